//! Card numbers and IBANs masked before anything keeps or sends them
//! (contract 23): a shop that keeps a card number in a chat table has a
//! PCI DSS problem it never chose, and an IBAN pasted "for the refund" is
//! the same. [`masked`] is the one function every path goes through: the
//! customer's message as the desk takes it (before the conversation, the
//! ledger's record, the model), the agent's reply, the model's handoff
//! summary and a person's reply.
//!
//! - A payment card number: 13 to 19 digits, a single space or dash allowed
//!   between any two, passing the Luhn check (the `luhn` crate), becomes
//!   `[card ending DDDD]`.
//! - An IBAN: a country code, two check digits and up to 30 letters or
//!   digits, single spaces allowed, that the `iban_validate` crate accepts
//!   (mod 97 and the country's own length and format), becomes
//!   `[IBAN ending DDDD]`.
//!
//! Numbers that fail their check (an order id, a phone number, an amount)
//! are left as they are. Where digits run on (a card glued to other digits,
//! or written beside them with separators), the candidates that start and
//! end on the run's own groups are tried first, shortest first, so the
//! digits beside a card (an amount, an order id) stay; only a run with no
//! such card is searched digit by digit, masking more rather than less: a
//! card glued to other digits, or mistyped by one digit, leaks as much as a
//! whole one. Fewer than 13 digits in a row never change.

use std::borrow::Cow;

/// A card number's digits, at the fewest and the most.
const CARD_DIGITS: std::ops::RangeInclusive<usize> = 13..=19;
/// An IBAN's letters and digits after the country code and check digits, at the most.
const IBAN_REST: usize = 30;

/// `text` with every card number and IBAN in it masked.
pub fn masked(text: &str) -> Cow<'_, str> {
    // IBANs first: an IBAN's digits must not be read as a card's.
    let ibans = mask_ibans(text);
    match mask_cards(&ibans) {
        Cow::Borrowed(_) => ibans,
        Cow::Owned(both) => Cow::Owned(both),
    }
}

fn is_separator(c: char) -> bool {
    c == ' ' || c == '-'
}

/// One run of digits with single separators between them: where each of
/// its digits stands (byte offsets), and which digits begin a group.
struct Run {
    /// (byte offset, the digit) of each digit, in order.
    digits: Vec<(usize, char)>,
    /// Indexes into `digits` where a group (after a separator) begins.
    group_starts: Vec<usize>,
}

/// The runs of `text`: digits, each pair of neighbours joined by at most one separator.
fn runs(text: &str) -> Vec<Run> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].1.is_ascii_digit() {
            i += 1;
            continue;
        }
        let mut run = Run {
            digits: Vec::new(),
            group_starts: vec![0],
        };
        loop {
            run.digits.push(chars[i]);
            i += 1;
            match (chars.get(i), chars.get(i + 1)) {
                (Some((_, c)), _) if c.is_ascii_digit() => {}
                (Some((_, s)), Some((_, c))) if is_separator(*s) && c.is_ascii_digit() => {
                    run.group_starts.push(run.digits.len());
                    i += 1;
                }
                _ => break,
            }
        }
        runs.push(run);
    }
    runs
}

/// The card numbers of one run, as (first digit, end) indexes into its
/// digits. First the windows that start and end on the run's own groups,
/// shortest first, so an amount or an order id written beside a card stays;
/// then, in what is left, any window, left to right, shortest first. Each
/// phase is one pass: a long run of digits costs its length times the
/// seven lengths a card may have.
fn cards_in(run: &Run) -> Vec<(usize, usize)> {
    let digits: Vec<u8> = run.digits.iter().map(|(_, d)| *d as u8).collect();
    let valid = |start: usize, end: usize| luhn::valid(std::str::from_utf8(&digits[start..end]).unwrap_or_default());
    let mut boundary = vec![false; digits.len() + 1];
    for &start in &run.group_starts {
        boundary[start] = true;
    }
    boundary[digits.len()] = true;
    let mut taken = vec![false; digits.len()];
    let mut found = Vec::new();
    let free = |taken: &[bool], start: usize, end: usize| !taken[start..end].iter().any(|t| *t);
    for length in CARD_DIGITS {
        for start in 0..digits.len().saturating_sub(length - 1) {
            let end = start + length;
            if boundary[start] && boundary[end] && free(&taken, start, end) && valid(start, end) {
                taken[start..end].iter_mut().for_each(|t| *t = true);
                found.push((start, end));
            }
        }
    }
    let mut start = 0;
    while start + *CARD_DIGITS.start() <= digits.len() {
        let hit = CARD_DIGITS
            .map(|length| start + length)
            .take_while(|&end| end <= digits.len() && free(&taken, start, end))
            .find(|&end| valid(start, end));
        match hit {
            Some(end) => {
                taken[start..end].iter_mut().for_each(|t| *t = true);
                found.push((start, end));
                start = end;
            }
            None => start += 1,
        }
    }
    found
}

fn mask_cards(text: &str) -> Cow<'_, str> {
    let mut spans = Vec::new();
    for run in runs(text) {
        for (start, end) in cards_in(&run) {
            let ending: String = run.digits[end - 4..end].iter().map(|(_, d)| *d).collect();
            let (first, last) = (run.digits[start], run.digits[end - 1]);
            spans.push((first.0, last.0 + last.1.len_utf8(), ending));
        }
    }
    replace(text, spans, "card")
}

/// Replaces each `(start, end, ending)` span of `text` by its mask.
fn replace<'a>(text: &'a str, mut spans: Vec<(usize, usize, String)>, what: &str) -> Cow<'a, str> {
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    spans.sort_by_key(|(start, ..)| *start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, ending) in spans {
        out.push_str(&text[at..start]);
        out.push_str(&format!("[{what} ending {ending}]"));
        at = end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// The IBANs of `text`: two letters and two digits, not inside a word, then
/// letters and digits with single spaces; the longest prefix the crate
/// accepts as an IBAN (letters read as capitals).
fn mask_ibans(text: &str) -> Cow<'_, str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut spans = Vec::new();
    let mut i = 0;
    while i + 4 <= chars.len() {
        let starts = chars[i].1.is_ascii_alphabetic()
            && chars[i + 1].1.is_ascii_alphabetic()
            && chars[i + 2].1.is_ascii_digit()
            && chars[i + 3].1.is_ascii_digit()
            && (i == 0 || !chars[i - 1].1.is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        // The candidate: its letters and digits, and where each ends.
        let mut kept: Vec<(usize, char)> = chars[i..i + 4].to_vec();
        let mut j = i + 4;
        while kept.len() < 4 + IBAN_REST && j < chars.len() {
            match (chars[j].1, chars.get(j + 1)) {
                (c, _) if c.is_ascii_alphanumeric() => {
                    kept.push(chars[j]);
                    j += 1;
                }
                (' ', Some((_, next))) if next.is_ascii_alphanumeric() => j += 1,
                _ => break,
            }
        }
        let found = (8..=kept.len()).rev().find(|&length| {
            // Not cut inside a word: the next kept character begins a new one.
            let electronic: String = kept[..length].iter().map(|(_, c)| c.to_ascii_uppercase()).collect();
            electronic.parse::<iban::Iban>().is_ok()
        });
        match found {
            Some(length) => {
                let (last_at, last) = kept[length - 1];
                let ending: String = kept[length - 4..length]
                    .iter()
                    .map(|(_, c)| c.to_ascii_uppercase())
                    .collect();
                spans.push((chars[i].0, last_at + last.len_utf8(), ending));
                i = chars.iter().position(|(at, _)| *at > last_at).unwrap_or(chars.len());
            }
            None => i += 1,
        }
    }
    replace(text, spans, "IBAN")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::masked;

    /// Valid test numbers (Luhn): Visa, Mastercard, Amex, a 19-digit one.
    const CARDS: [&str; 4] = [
        "4242424242424242",
        "5555555555554444",
        "378282246310005",
        "6011000990139424",
    ];
    const IBANS: [&str; 3] = [
        "GB82WEST12345698765432",
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
    ];

    #[test]
    fn cards_with_or_without_separators_are_masked_to_their_last_four() {
        assert_eq!(
            masked("my card 4242 4242 4242 4242 was charged twice for A-1001, refund one"),
            "my card [card ending 4242] was charged twice for A-1001, refund one"
        );
        assert_eq!(masked("5555-5555-5555-4444"), "[card ending 4444]");
        assert_eq!(masked("amex 378282246310005."), "amex [card ending 0005].");
        // Beside an amount and an order id, which stay.
        assert_eq!(
            masked("refund 12.50 4242 4242 4242 4242 on A-1001 4242424242424242"),
            "refund 12.50 [card ending 4242] on A-1001 [card ending 4242]"
        );
    }

    #[test]
    fn numbers_that_fail_their_check_are_left_as_they_are() {
        for text in [
            "order A-1001, 12.50, call +33 6 12 34 56 78",
            "4242 4242 4242",
            "GB82 is a code",
            "de 12 34",
        ] {
            assert_eq!(masked(text), text, "{text}");
        }
    }

    #[test]
    fn a_long_run_of_digits_is_searched_for_a_card_inside_it() {
        // A card glued to other digits, or mistyped by one, still leaks its
        // digits: the window that passes the check is masked.
        let glued = masked("ref 774242424242424242");
        assert!(
            glued.starts_with("ref 77[card ending ") && !glued.contains("424242424242"),
            "{glued}"
        );
        let mistyped = masked("4242 4242 4242 4241");
        assert!(!mistyped.contains("4242 4242 4242"), "{mistyped}");
    }

    #[test]
    fn ibans_with_or_without_spaces_are_masked_to_their_last_four() {
        assert_eq!(
            masked("pay it to GB82 WEST 1234 5698 7654 32 please"),
            "pay it to [IBAN ending 5432] please"
        );
        assert_eq!(masked("de89370400440532013000"), "[IBAN ending 3000]");
        assert_eq!(
            masked("IBAN: FR1420041010050500013M02606."),
            "IBAN: [IBAN ending 2606]."
        );
    }

    /// A card number with a separator (or none) drawn before each digit.
    fn written(card: &str, separators: &[u8]) -> String {
        let mut out = String::new();
        for (i, digit) in card.chars().enumerate() {
            if i > 0 {
                match separators.get(i).copied().unwrap_or(0) % 3 {
                    1 => out.push(' '),
                    2 => out.push('-'),
                    _ => {}
                }
            }
            out.push(digit);
        }
        out
    }

    fn digits_only(text: &str) -> String {
        text.chars().filter(char::is_ascii_digit).collect()
    }

    proptest! {
        #[test]
        fn a_card_inserted_anywhere_never_survives(
            before in "[ -~]{0,40}",
            after in "[ -~]{0,40}",
            card in 0usize..CARDS.len(),
            separators in proptest::collection::vec(any::<u8>(), 19),
        ) {
            let card = CARDS[card];
            let text = format!("{before}{}{after}", written(card, &separators));
            let out = masked(&text);
            prop_assert!(!digits_only(&out).contains(card), "{text:?} -> {out:?}");
        }

        #[test]
        fn an_iban_inserted_between_words_never_survives(
            before in "[ -~]{0,30}",
            after in "[ -~]{0,30}",
            iban in 0usize..IBANS.len(),
        ) {
            let iban = IBANS[iban];
            let text = format!("{before} {iban} {after}");
            let out = masked(&text);
            prop_assert!(!out.to_ascii_uppercase().contains(iban), "{text:?} -> {out:?}");
        }

        #[test]
        fn order_ids_and_amounts_never_change(
            words in proptest::collection::vec("[a-z]{1,8}|[A-F]-[0-9]{4}|[0-9]{1,3}\\.[0-9]{2}|€[0-9]{1,3}", 0..12),
            card in 0usize..CARDS.len(),
        ) {
            let plain = words.join(" ");
            let unchanged = masked(&plain);
            prop_assert_eq!(unchanged.as_ref(), plain.as_str());
            // With a card among them, every word but the card is kept.
            let with_card = format!("{plain} x {} y {plain}", CARDS[card]);
            let out = masked(&with_card);
            prop_assert_eq!(out.as_ref(), format!("{plain} x [card ending {}] y {plain}", &CARDS[card][CARDS[card].len() - 4..]));
        }
    }
}
