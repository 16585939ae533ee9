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
/// languages. A message is a yes only when it is made of these and
/// [`COURTESY`] alone (section 26, tightened): "Correct me if I'm wrong"
/// and "Go ahead and cancel it" are not.
pub const DEFAULT_CONFIRM_PHRASES: &[&str] = &[
    // English
    "yes",
    "yep",
    "yeah",
    "yes please",
    "correct",
    "confirm",
    "confirmed",
    "that is right",
    "that's right",
    "that's correct",
    "go ahead",
    // German
    "ja",
    "jawohl",
    "ja bitte",
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

/// Words that may stand beside a yes without making it anything else.
pub const COURTESY: &[&str] = &[
    "please",
    "pls",
    "thanks",
    "thank you",
    "thank you very much",
    "many thanks",
    "bitte",
    "danke",
    "danke schön",
    "vielen dank",
    "merci",
    "merci beaucoup",
    "s'il vous plaît",
    "s'il te plaît",
    "por favor",
    "gracias",
    "muchas gracias",
];

/// Words that make a message no yes wherever they stand: a negation or a
/// "but" (contract 26, tightened), whatever the configured phrases say.
const NOT_A_YES: &[&str] = &[
    "no", "not", "nope", "never", "don", "dont", "doesn", "won", "isn", "nothing", "but", "however", "except",
    "instead", "nein", "nicht", "kein", "keine", "keinen", "nie", "niemals", "aber", "sondern", "doch", "non", "pas",
    "ne", "jamais", "mais", "ni", "nunca", "tampoco", "pero", "sino",
];

/// What counts as the customer's yes: the whole message is phrases of
/// `CONFIRM_PHRASES` (at least one) and courtesy words, with any
/// punctuation but a question mark, and no negation or "but" anywhere.
/// Read as a person reads it (NFKC, format characters removed, case folded,
/// look-alikes read as Latin) but **before** accents are folded, so "si"
/// (the Spanish and French "if") is not "sí". "YES!", "Ｙｅｓ" and "oui,
/// merci" are a yes; "Yes? Which address?", "Yes but the postcode is
/// wrong", "Ja, nein" and "yesterday" are not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YesPhrases {
    yes: Vec<Vec<String>>,
    courtesy: Vec<Vec<String>>,
}

impl Default for YesPhrases {
    fn default() -> Self {
        YesPhrases::new(DEFAULT_CONFIRM_PHRASES)
    }
}

impl YesPhrases {
    pub fn new<P: AsRef<str>>(phrases: &[P]) -> YesPhrases {
        let words = |list: &mut dyn Iterator<Item = &str>| -> Vec<Vec<String>> {
            list.map(accented_words).filter(|words| !words.is_empty()).collect()
        };
        YesPhrases {
            yes: words(&mut phrases.iter().map(AsRef::as_ref)),
            courtesy: words(&mut COURTESY.iter().copied()),
        }
    }

    pub fn says_yes(&self, message: &str) -> bool {
        let visible = visible_folded(message);
        if message.chars().chain(visible.chars()).any(is_question_mark) {
            return false;
        }
        let words = words_of(&visible);
        if words.is_empty() || words.iter().any(|word| NOT_A_YES.contains(&word.as_str())) {
            return false;
        }
        // Which prefixes of the message are phrases and courtesy alone:
        // `reached[i]` is None (not reached), Some(false) (reached by
        // courtesy alone) or Some(true) (with a yes on the way).
        let mut reached: Vec<Option<bool>> = vec![None; words.len() + 1];
        reached[0] = Some(false);
        for at in 0..words.len() {
            let Some(with_yes) = reached[at] else { continue };
            for (list, is_yes) in [(&self.yes, true), (&self.courtesy, false)] {
                for phrase in list.iter().filter(|phrase| words[at..].starts_with(phrase)) {
                    let next = &mut reached[at + phrase.len()];
                    *next = Some(next.unwrap_or(false) || with_yes || is_yes);
                }
            }
        }
        reached[words.len()] == Some(true)
    }
}

/// A question mark in any script the defaults cover, or Greek's, which
/// NFKC turns into a semicolon (so it is looked for before).
fn is_question_mark(c: char) -> bool {
    matches!(c, '?' | '¿' | '⸮' | '؟' | '\u{37e}' | '\u{ff1f}')
}

/// The text as a person reads it, accents kept: NFKC, format characters
/// removed, full case folding, composed again, look-alikes as Latin.
fn visible_folded(text: &str) -> String {
    use unicode_general_category::{GeneralCategory, get_general_category};
    use unicode_normalization::UnicodeNormalization;

    let visible: String = text
        .nfkc()
        .filter(|&c| get_general_category(c) != GeneralCategory::Format)
        .collect();
    caseless::default_case_fold_str(&visible)
        .nfc()
        .map(|c| latin_look_alike(c).unwrap_or_else(|| c.to_string()))
        .collect()
}

/// The runs of letters and digits (a letter's accents with it).
fn words_of(folded: &str) -> Vec<String> {
    use unicode_normalization::char::is_combining_mark;
    folded
        .split(|c: char| !(c.is_alphanumeric() || is_combining_mark(c)))
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

fn accented_words(phrase: &str) -> Vec<String> {
    words_of(&visible_folded(phrase))
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
    use proptest::prelude::*;

    #[test]
    fn a_yes_is_the_whole_message_with_courtesy_and_punctuation_at_most() {
        let yes = YesPhrases::default();
        for said in [
            "yes",
            "Yes!",
            "YES please",
            "Ｙｅｓ",
            "oui, merci",
            "Sí, correcto",
            "Si\u{301}",
            "ja bitte",
            "That's right.",
            "Yes, that's right, thank you!",
            "Correct.",
            "go ahead",
            "  yes  ",
            "y\u{200b}es",
        ] {
            assert!(yes.says_yes(said), "{said}");
        }
    }

    #[test]
    fn a_sentence_that_begins_like_a_yes_is_no_yes() {
        let yes = YesPhrases::default();
        for said in [
            "yesterday it came",
            "no, yes is wrong",
            "please change it to 1 Yes Street",
            "I said yes before",
            "",
            "!!!",
            "please",
            "Yes, one more question: when will my refund arrive?",
            "Correct me if I'm wrong, but I never asked for that",
            "Confirm that you will NOT change my address",
            "Go ahead and cancel the whole order instead",
            "Yes? Which address?",
            "Yes but the postcode is wrong",
            "Ja, nein, doch nicht",
            "Si la dirección no es correcta…",
            "si",
            "Si",
            "oui mais non",
            "yes ¿",
            "yes\u{37e}",
            "yes ？",
            "no",
            "yes no",
        ] {
            assert!(!yes.says_yes(said), "{said}");
        }
    }

    #[test]
    fn configured_phrases_replace_the_defaults_and_still_refuse_a_negation() {
        let yes = YesPhrases::new(&["make it so", "no problem"]);
        assert!(yes.says_yes("Make it so, please."));
        assert!(!yes.says_yes("yes"));
        assert!(!yes.says_yes("no problem"));
    }

    const SPOILERS: &[&str] = &[
        "no", "not", "NOT", "but", "But", "?", "¿", "nein", "nicht", "non", "pas", "pero", "si", "if", "wrong",
        "instead", "doch", "never", "don't", "¿qué?", "mais",
    ];
    const PHRASES: &[&str] = &[
        "yes",
        "Yes",
        "ja",
        "oui",
        "sí",
        "correct",
        "confirm",
        "go ahead",
        "yes please",
    ];
    const FILLER: &[&str] = &[
        "",
        ",",
        "!",
        ".",
        " ",
        "please",
        "thanks",
        "merci",
        "por favor",
        "bitte",
        "...",
    ];

    proptest! {
        /// Contract 26, tightened: a yes phrase with any negation, "but",
        /// question mark or "if" anywhere in the message is no yes.
        #[test]
        fn any_spoiler_anywhere_makes_it_no_yes(
            phrase in proptest::sample::select(PHRASES),
            spoiler in proptest::sample::select(SPOILERS),
            before in proptest::collection::vec(proptest::sample::select(FILLER), 0..3),
            after in proptest::collection::vec(proptest::sample::select(FILLER), 0..3),
            spoiler_first in any::<bool>(),
        ) {
            let (a, b) = if spoiler_first { (spoiler, phrase) } else { (phrase, spoiler) };
            let message = format!("{} {a} {} {b} {}", before.join(" "), after.join(" "), before.join(""));
            prop_assert!(!YesPhrases::default().says_yes(&message), "{message}");
        }

        #[test]
        fn a_phrase_with_courtesy_and_punctuation_is_a_yes(
            phrase in proptest::sample::select(PHRASES),
            around in proptest::collection::vec(proptest::sample::select(FILLER), 0..4),
        ) {
            let message = format!("{phrase} {}", around.join(" "));
            prop_assert!(YesPhrases::default().says_yes(&message), "{message}");
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
