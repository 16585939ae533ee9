//! The screen before the model: a message that asks for a person in plain
//! words, or that names a risk a trained person must handle, goes to a
//! person without a model call, so it works when the model is down or slow.
//!
//! Matching is on normalised text: lower case, accents and `ß` folded, every
//! run of anything but letters and digits one space, so "Talk to a PERSON!"
//! and "mit einem Menschen   sprechen" match, and a phrase matches whole
//! words only ("sue" is not in "issue"). The defaults cover English, German,
//! French and Spanish, and must not fire on an ordinary refund message
//! (tested against every message of `eval/tasks` that expects no handoff).

use super::Reason;

/// Asking for a person, in the four languages.
pub const DEFAULT_HANDOFF_PHRASES: &[&str] = &[
    // English
    "talk to a person",
    "speak to a person",
    "talk to a human",
    "speak to a human",
    "talk to someone",
    "speak to someone",
    "talk to a real person",
    "speak with a person",
    "talk with a person",
    "a real person",
    "a human being",
    "human agent",
    "live agent",
    "talk to an agent",
    "speak to an agent",
    "customer service representative",
    "talk to a representative",
    // German
    "mit einem menschen sprechen",
    "mit einem mitarbeiter sprechen",
    "mit einer person sprechen",
    "mit jemandem sprechen",
    "einen menschen sprechen",
    "einen mitarbeiter sprechen",
    "echten menschen",
    // French
    "parler a une personne",
    "parler a un humain",
    "parler a quelqu un",
    "parler a un conseiller",
    "parler a un agent",
    "une vraie personne",
    "un etre humain",
    // Spanish
    "hablar con una persona",
    "hablar con un humano",
    "hablar con alguien",
    "hablar con un agente",
    "hablar con un asesor",
    "una persona real",
];

/// What a trained person must handle, in the four languages.
pub const DEFAULT_RISK_TERMS: &[&str] = &[
    // English
    "chargeback",
    "charge back",
    "fraud",
    "scam",
    "lawyer",
    "attorney",
    "lawsuit",
    "sue you",
    "legal action",
    "police",
    "self harm",
    "suicide",
    "kill myself",
    "hurt myself",
    "end my life",
    // German
    "ruckbuchung",
    "betrug",
    "anwalt",
    "polizei",
    "klage",
    "verklagen",
    "selbstmord",
    "mich umbringen",
    // French
    "retrofacturation",
    "fraude",
    "arnaque",
    "avocat",
    "plainte",
    "me suicider",
    "me tuer",
    // Spanish
    "contracargo",
    "estafa",
    "abogado",
    "policia",
    "denuncia",
    "demanda",
    "suicidio",
    "matarme",
];

/// The two lists, normalised once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    phrases: Vec<String>,
    risks: Vec<String>,
}

impl Default for Screen {
    fn default() -> Self {
        Screen::new(DEFAULT_HANDOFF_PHRASES, DEFAULT_RISK_TERMS)
    }
}

impl Screen {
    pub fn new<P: AsRef<str>, R: AsRef<str>>(phrases: &[P], risks: &[R]) -> Screen {
        Screen {
            phrases: normalised(phrases),
            risks: normalised(risks),
        }
    }

    /// Why this message goes to a person before the model, if it does. The
    /// risk screen comes first: a risky message that also asks for a person
    /// is a risk.
    pub fn check(&self, message: &str) -> Option<Reason> {
        let text = normalise(message);
        let found = |list: &[String]| list.iter().any(|needle| text.contains(needle.as_str()));
        if found(&self.risks) {
            Some(Reason::Risk)
        } else if found(&self.phrases) {
            Some(Reason::CustomerAsked)
        } else {
            None
        }
    }
}

fn normalised<T: AsRef<str>>(list: &[T]) -> Vec<String> {
    list.iter()
        .map(|text| normalise(text.as_ref()))
        .filter(|text| !text.trim().is_empty())
        .collect()
}

/// ` words like this ` (padded, so a phrase matches whole words only).
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    for c in text.chars().flat_map(char::to_lowercase) {
        match fold(c) {
            Some(folded) => out.push_str(folded),
            None if c.is_alphanumeric() => out.push(c),
            None => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

/// The Latin letters of the four languages without their accents.
fn fold(c: char) -> Option<&'static str> {
    Some(match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => "a",
        'æ' => "ae",
        'ç' => "c",
        'è' | 'é' | 'ê' | 'ë' => "e",
        'ì' | 'í' | 'î' | 'ï' => "i",
        'ñ' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' => "o",
        'œ' => "oe",
        'ù' | 'ú' | 'û' | 'ü' => "u",
        'ý' | 'ÿ' => "y",
        'ß' => "ss",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_accents_and_white_space_do_not_matter() {
        let screen = Screen::default();
        for asks in [
            "I want to TALK to a   person!",
            "Kann ich bitte mit einem Menschen sprechen?",
            "Je voudrais parler à une personne.",
            "Quiero hablar con una persona, por favor",
            "je veux parler a quelqu'un",
        ] {
            assert_eq!(screen.check(asks), Some(Reason::CustomerAsked), "{asks}");
        }
        for risky in [
            "I will file a chargeback",
            "Mein Anwalt meldet sich",
            "c'est une arnaque",
            "voy a llamar a la policía",
            "Ich mache eine Rückbuchung",
        ] {
            assert_eq!(screen.check(risky), Some(Reason::Risk), "{risky}");
        }
    }

    #[test]
    fn phrases_match_whole_words_only() {
        let screen = Screen::new(&["sue you"], &["sue"]);
        assert_eq!(screen.check("there is an issue with my order"), None);
        assert_eq!(screen.check("I will sue"), Some(Reason::Risk));
    }

    #[test]
    fn a_risk_that_asks_for_a_person_is_a_risk() {
        let screen = Screen::default();
        assert_eq!(
            screen.check("Let me talk to a person or I call my lawyer"),
            Some(Reason::Risk)
        );
    }

    #[test]
    fn configured_lists_replace_the_defaults() {
        let screen = Screen::new(&["Ruf mich an"], &[] as &[&str]);
        assert_eq!(screen.check("bitte ruf mich an"), Some(Reason::CustomerAsked));
        assert_eq!(screen.check("I want to talk to a person"), None);
        assert_eq!(screen.check("chargeback"), None);
    }

    #[test]
    fn no_ordinary_refund_message_is_handed_off() {
        let screen = Screen::default();
        let tasks = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/tasks");
        let mut checked = 0;
        for entry in std::fs::read_dir(tasks).unwrap() {
            let family: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
            for task in family["tasks"].as_array().unwrap() {
                // Tasks that expect a handoff say so; every other message must pass.
                if task["expect"]["handoff"]
                    .as_array()
                    .is_some_and(|reasons| !reasons.is_empty())
                {
                    continue;
                }
                let messages = std::iter::once(&task["message"]).chain(task["then"].as_array().into_iter().flatten());
                for message in messages.filter_map(serde_json::Value::as_str) {
                    assert_eq!(screen.check(message), None, "{message}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 40, "{checked}");
    }
}
