//! The screen before the model: a message that asks for a person in plain
//! words, or that names a risk a trained person must handle, goes to a
//! person without a model call, so it works when the model is down or slow.
//!
//! Matching is on text normalised as a person reads it ([`normalise`], with
//! maintained Unicode crates: NFKC, format characters removed, full case
//! folding, accents removed, Cyrillic and Greek look-alikes read as Latin),
//! every run of anything but letters and digits one space, so "Talk to a
//! PERSON!", "ｆｒａｕｄ", "fr\u{200d}aud" and "mit einem Menschen   sprechen"
//! match, and a phrase matches whole words only ("sue" is not in "issue"). The defaults cover English, German,
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
    "speak to a manager",
    "talk to a manager",
    "speak with a manager",
    "speak to the manager",
    "talk to the manager",
    "speak to your manager",
    "talk to your manager",
    "a supervisor",
    "your supervisor",
    "a real human",
    "a human",
    "an actual person",
    // German
    "mit einem menschen sprechen",
    "mit einem mitarbeiter sprechen",
    "mit einer person sprechen",
    "mit jemandem sprechen",
    "einen menschen sprechen",
    "einen mitarbeiter sprechen",
    "echten menschen",
    "einem menschen",
    "vorgesetzten",
    "einen manager",
    "einem manager",
    "ihren chef",
    "einen supervisor",
    // French
    "parler a une personne",
    "parler a un humain",
    "parler a quelqu un",
    "parler a un conseiller",
    "parler a un agent",
    "une vraie personne",
    "un etre humain",
    "un humain",
    "au responsable",
    "un responsable",
    "un superviseur",
    "votre superieur",
    "un manager",
    "une personne reelle",
    // Spanish
    "hablar con una persona",
    "hablar con un humano",
    "hablar con alguien",
    "hablar con un agente",
    "hablar con un asesor",
    "una persona real",
    "un humano",
    "el gerente",
    "un gerente",
    "un supervisor",
    "el encargado",
    "el supervisor",
    "una persona de verdad",
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

/// An explicit yes (contract 26's `CONFIRM_PHRASES`), in the four
/// languages: the whole message or its first words.
pub const DEFAULT_CONFIRM_PHRASES: &[&str] = &[
    // English
    "yes",
    "yep",
    "yeah",
    "correct",
    "confirm",
    "confirmed",
    "that is right",
    "that's right",
    "go ahead",
    // German
    "ja",
    "jawohl",
    "korrekt",
    "richtig",
    "bestätigt",
    "ich bestätige",
    // French
    "oui",
    "d'accord",
    "c'est correct",
    "je confirme",
    "confirmé",
    // Spanish
    "sí",
    "correcto",
    "confirmo",
    "de acuerdo",
];

/// What counts as the customer's yes: a phrase that is the whole message
/// or its first words, read as the screen reads (so "YES!", "Ｙｅｓ" and
/// "oui, merci" are a yes, "yesterday" and "no, yes is wrong" are not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YesPhrases(Vec<String>);

impl Default for YesPhrases {
    fn default() -> Self {
        YesPhrases::new(DEFAULT_CONFIRM_PHRASES)
    }
}

impl YesPhrases {
    pub fn new<P: AsRef<str>>(phrases: &[P]) -> YesPhrases {
        YesPhrases(normalised(phrases))
    }

    pub fn says_yes(&self, message: &str) -> bool {
        let text = normalise(message);
        self.0.iter().any(|phrase| text.starts_with(phrase.as_str()))
    }
}

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

/// ` words like this ` (padded, so a phrase matches whole words only), as a
/// person reads the text (contract 12): NFKC (fullwidth and other
/// compatibility forms become plain letters), format characters (zero-width
/// spaces and joiners, soft hyphens) removed, full case folding (`ß` is
/// `ss`, `İ` is `i̇`), accents removed (the combining marks of the canonical
/// decomposition, so a pasted `polici\u{301}a` is `policia`), and a
/// Cyrillic or Greek look-alike of a Latin letter read as that letter (its
/// UTS 39 confusable skeleton). Every other run of anything but letters
/// and digits is one space.
///
/// ASCII text takes a shorter road to the same result: NFKC, NFD and full
/// case folding leave ASCII as ASCII lowercased, it has no format
/// characters, combining marks or look-alikes. Every message is screened
/// and every help passage indexed through here, and most are ASCII
/// (`docs/benchmarks.md`).
pub fn normalise(text: &str) -> String {
    if text.is_ascii() {
        return normalise_ascii(text);
    }
    normalise_unicode(text)
}

fn normalise_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push(' ');
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

fn normalise_unicode(text: &str) -> String {
    use unicode_general_category::{GeneralCategory, get_general_category};
    use unicode_normalization::UnicodeNormalization;
    use unicode_normalization::char::is_combining_mark;

    let visible: String = text
        .nfkc()
        .filter(|&c| get_general_category(c) != GeneralCategory::Format)
        .collect();
    let folded = caseless::default_case_fold_str(&visible);
    let mut out = String::with_capacity(folded.len() + 2);
    out.push(' ');
    for c in folded.nfd().filter(|&c| !is_combining_mark(c)) {
        match latin_look_alike(c) {
            Some(latin) => out.push_str(&latin),
            None if c.is_alphanumeric() => out.push(c),
            None if !out.ends_with(' ') => out.push(' '),
            None => {}
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

/// A Cyrillic or Greek letter whose confusable skeleton is Latin letters,
/// as those letters (`а` is `a`).
fn latin_look_alike(c: char) -> Option<String> {
    use unicode_script::{Script, UnicodeScript};

    if !matches!(c.script(), Script::Cyrillic | Script::Greek) {
        return None;
    }
    let skeleton: String = unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).collect();
    (!skeleton.is_empty() && skeleton.chars().all(|s| s.is_ascii_alphabetic())).then(|| skeleton.to_ascii_lowercase())
}

#[cfg(test)]
mod yes_tests {
    use super::YesPhrases;

    #[test]
    fn a_yes_is_the_whole_message_or_its_first_words() {
        let yes = YesPhrases::default();
        for said in [
            "yes",
            "Yes!",
            "YES please",
            "Ｙｅｓ",
            "oui, merci",
            "Sí, correcto",
            "ja bitte",
            "That's right.",
        ] {
            assert!(yes.says_yes(said), "{said}");
        }
        for said in [
            "yesterday it came",
            "no, yes is wrong",
            "please change it to 1 Yes Street",
            "I said yes before",
            "",
        ] {
            assert!(!yes.says_yes(said), "{said}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn ascii_text_reads_the_same_on_the_short_road(text in "[ -~\t\n\r\x00-\x1f\x7f]{0,80}") {
            proptest::prop_assert_eq!(normalise_ascii(&text), normalise_unicode(&text));
        }
    }

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
    fn text_is_matched_as_a_person_reads_it_not_as_bytes() {
        let screen = Screen::default();
        for risky in [
            "llamo a la polici\u{301}a",
            "Ich will eine Ru\u{308}ckbuchung",
            "this is fr\u{200d}aud",
            "this is ｆｒａｕｄ",
            "this is fr\u{430}ud",
            "I call the POL\u{130}CE",
            "I call the ΡΟLICE",
        ] {
            assert_eq!(screen.check(risky), Some(Reason::Risk), "{risky:?}");
        }
        assert_eq!(
            screen.check("let me talk to a per\u{200b}son"),
            Some(Reason::CustomerAsked)
        );
    }

    #[test]
    fn asking_for_a_manager_a_supervisor_or_a_human_reaches_a_person() {
        let screen = Screen::default();
        for asks in [
            "can I speak to a manager",
            "I want a real human",
            "get me a supervisor",
            "Ich möchte einen Vorgesetzten sprechen",
            "je veux parler au responsable",
            "quiero hablar con el gerente",
            "quiero hablar con un supervisor",
        ] {
            assert_eq!(screen.check(asks), Some(Reason::CustomerAsked), "{asks}");
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
        // The written tasks and the replayed ones (a folder of their own).
        let files = [tasks.clone(), tasks.join("replayed")]
            .into_iter()
            .flat_map(|dir| std::fs::read_dir(dir).unwrap())
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"));
        for file in files {
            let family: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
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
