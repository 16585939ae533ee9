//! Text that a customer or a model wrote is data. This module is how it may
//! reach the three places where data can act:
//!
//! - a person's terminal ([`visible`]): an escape sequence in a message could
//!   move the cursor and rewrite what an approver reads, such as the amount,
//!   so every control character (C0, DEL, C1) and every bidirectional
//!   override is shown as a Rust-style escape (`\u{1b}`) instead;
//! - a spreadsheet ([`spreadsheet_cell`]): a cell that begins with `=`, `+`,
//!   `-`, `@`, a tab or a carriage return is run as a formula, so such a cell
//!   gets a leading `'`, as OWASP advises for CSV injection;
//! - a log line ([`order_id_for_log`], [`for_log`]): the model can copy the
//!   customer's words into anything it writes, so model-written text is
//!   logged only as something that looks like an id, or bounded and escaped.
//!
//! None of these change what is stored: the ledger and the JSON export keep
//! the text exactly.

use std::borrow::Cow;

/// Characters that reorder what a terminal shows (the "Trojan Source" set).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` must not reach a terminal as it is.
pub fn acts_on_a_terminal(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `text` with every character that acts on a terminal shown as `\u{..}`.
pub fn visible(text: &str) -> Cow<'_, str> {
    visible_keeping(text, &[])
}

/// The same, keeping the characters in `keep` (a CSV cell keeps its line breaks).
pub fn visible_keeping<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    let escaped = |c: char| acts_on_a_terminal(c) && !keep.contains(&c);
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// A CSV cell a spreadsheet shows as text: formulas neutralised, and control
/// characters other than line breaks and tabs made visible (a CSV is often
/// read in a terminal too).
pub fn spreadsheet_cell(text: &str) -> Cow<'_, str> {
    let cell = visible_keeping(text, &['\n', '\t']);
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{cell}"))
    } else {
        cell
    }
}

/// Whether a model-written order id looks like one: 1 to 64 ASCII letters,
/// digits and the characters of `punctuation`.
fn looks_like_an_id(order_id: &str, punctuation: &[u8]) -> bool {
    !order_id.is_empty()
        && order_id.len() <= 64
        && order_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || punctuation.contains(&b))
}

/// What a log line may say of a model-written order id: the id, when it
/// looks like one (at most 64 letters, digits and `-_.:#/`), else a
/// placeholder (log its length beside it).
pub fn order_id_for_log(order_id: &str) -> &str {
    if looks_like_an_id(order_id, b"-_.:#/") {
        order_id
    } else {
        "<not an order id>"
    }
}

/// What an event may carry of a model-written order id (contract 14): the
/// id when it looks like one (1 to 64 letters, digits, `-`, `_`, `#`, `.`),
/// else nothing (an empty string: the record id names the refund).
pub fn order_id_for_event(order_id: &str) -> &str {
    if looks_like_an_id(order_id, b"-_#.") {
        order_id
    } else {
        ""
    }
}

/// Text from a service we call (a payments `detail`), bounded to `max`
/// characters and with control characters made visible: it may quote what
/// the model sent.
pub fn for_log(text: &str, max: usize) -> String {
    let bounded: String = text.chars().take(max).collect();
    let mut shown = visible(&bounded).into_owned();
    if text.chars().count() > max {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_run() {
        assert_eq!(visible("refund 12.50"), "refund 12.50");
        assert_eq!(visible("a\u{1b}[7Ab"), "a\\u{1b}[7Ab");
        assert_eq!(visible("\u{9b}2J\u{7f}\u{202e}x\n"), "\\u{9b}2J\\u{7f}\\u{202e}x\\u{a}");
        assert_eq!(visible("Grüße, café"), "Grüße, café", "letters are not controls");
    }

    #[test]
    fn formulas_become_text_and_line_breaks_stay() {
        for formula in ["=HYPERLINK(\"x\")", "+1", "-1+2", "@SUM(A1)", "\tx"] {
            assert!(spreadsheet_cell(formula).starts_with('\''), "{formula:?}");
        }
        assert_eq!(
            spreadsheet_cell("\r=1"),
            "\\u{d}=1",
            "a carriage return is shown, so nothing leads"
        );
        assert_eq!(spreadsheet_cell("two\nlines"), "two\nlines");
        assert_eq!(spreadsheet_cell("A-1001"), "A-1001");
        assert_eq!(spreadsheet_cell("x\u{1b}[2J"), "x\\u{1b}[2J");
    }

    #[test]
    fn only_what_looks_like_an_id_is_logged_as_one() {
        assert_eq!(order_id_for_log("A-1001"), "A-1001");
        assert_eq!(order_id_for_log("ord_9/x#2.b"), "ord_9/x#2.b");
        for text in ["", "my mug arrived broken", "A-1001\u{1b}[2J", &"x".repeat(65)] {
            assert_eq!(order_id_for_log(text), "<not an order id>", "{text:?}");
        }
        assert_eq!(for_log("abc\u{1b}", 10), "abc\\u{1b}");
        assert_eq!(for_log("abcdef", 3), "abc…");
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn nothing_visible_acts_on_a_terminal(text in any::<String>()) {
            prop_assert!(!visible(&text).chars().any(acts_on_a_terminal));
            let cell = spreadsheet_cell(&text);
            prop_assert!(!cell.chars().any(|c| acts_on_a_terminal(c) && c != '\n' && c != '\t'));
            prop_assert!(!cell.starts_with(['=', '+', '-', '@', '\t', '\r']));
        }
    }
}
