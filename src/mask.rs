//! Card numbers and IBANs masked before anything keeps or sends them
//! (contract 23): a shop that keeps a card number in a chat table has a
//! PCI DSS problem it never chose, and an IBAN pasted "for the refund" is
//! the same. [`masked`] is the one function every path goes through: the
//! customer's message as the edge reads it (before the key's fingerprint,
//! the conversation, the ledger's record, the model), the agent's reply,
//! the model's handoff summary, a person's text, and (piece by piece,
//! [`Streamed`]) a reply streamed as it is written.
//!
//! Numbers are read as a person reads them, not as bytes: digits of any
//! script are digits (NFKC makes fullwidth ones ASCII; any other decimal
//! digit counts by its place in its block of ten), format characters
//! (zero-width spaces and joiners, soft hyphens) are nothing, and between
//! two digits up to three separators may stand: any space, any dash, a
//! dot, a slash or an underscore.
//!
//! - A payment card number: a run of digits with such separators, 13 to 19
//!   digits passing the Luhn check (the `luhn` crate), becomes
//!   `[card ending DDDD]`. When the whole run passes, it is one card;
//!   otherwise its groups (the digits between separators) are tried, whole
//!   groups only, longest first, where they are written as a card's are
//!   (one group, groups of at most six digits, 4-4-4-4 or 4-6-5, or two
//!   halves). So a card written beside an amount is found, and a 16-digit reference, a 17-digit order id or a tracking
//!   number whose digits would pass on their own in some window stays as
//!   it is. A group is never split.
//! - An IBAN: a country code and two check digits at the start of a word,
//!   then up to 30 letters or digits with such separators, that the
//!   `iban_validate` crate accepts (mod 97 and the country's own length and
//!   format, letters of either case), becomes `[IBAN ending DDDD]`.
//!
//! Numbers that fail their check (an order id, a phone number, an amount)
//! are left as they are.

use std::borrow::Cow;

use unicode_general_category::{GeneralCategory, get_general_category};

/// A card number's digits, at the fewest and the most.
const CARD_DIGITS: std::ops::RangeInclusive<usize> = 13..=19;
/// An IBAN's letters and digits, at the most (country, check digits and 30).
const IBAN_MOST: usize = 34;
/// An IBAN's letters and digits, at the fewest that is worth a parse.
const IBAN_FEWEST: usize = 8;
/// The countries that give IBANs, as `iban_validate` knows them (a test
/// checks the list against the crate): an IBAN begins with one of them, so
/// "of 12.50" is not held back in a stream as an IBAN's beginning.
const IBAN_COUNTRIES: [&str; 87] = [
    "AD", "AE", "AL", "AT", "AZ", "BA", "BE", "BG", "BH", "BI", "BR", "BY", "CH", "CR", "CY", "CZ", "DE", "DJ", "DK",
    "DO", "EE", "EG", "ES", "FI", "FK", "FO", "FR", "GB", "GE", "GI", "GL", "GR", "GT", "HR", "HU", "IE", "IL", "IQ",
    "IS", "IT", "JO", "KW", "KZ", "LB", "LC", "LI", "LT", "LU", "LV", "LY", "MC", "MD", "ME", "MK", "MN", "MR", "MT",
    "MU", "NI", "NL", "NO", "OM", "PL", "PS", "PT", "QA", "RO", "RS", "RU", "SA", "SC", "SD", "SE", "SI", "SK", "SM",
    "SO", "ST", "SV", "TL", "TN", "TR", "UA", "VA", "VG", "XK", "YE",
];

fn iban_country(first: u8, second: u8) -> bool {
    IBAN_COUNTRIES.contains(&std::str::from_utf8(&[first, second]).unwrap_or_default())
}

/// The longest group of a card written in groups (Amex's 4-6-5).
const MOST_CARD_GROUP: usize = 6;
/// Separators that may stand between two digits (or an IBAN's characters).
const MOST_SEPARATORS: usize = 3;

/// `text` with every card number and IBAN in it masked.
pub fn masked(text: &str) -> Cow<'_, str> {
    masked_after(None, text)
}

/// How many digits `text` holds when it is a number and nothing else, read
/// as a person reads one (digits of any script, separators and format
/// characters between them, white space around): "481 516", "481-516" and
/// "４８１５１６" are six. `None` for anything else.
pub fn digits_only(text: &str) -> Option<usize> {
    let mut digits = 0;
    for glyph in read(None, text.trim()) {
        match glyph.read {
            Read::Digit(_) => digits += 1,
            Read::Separator | Read::Invisible => {}
            _ => return None,
        }
    }
    (digits > 0).then_some(digits)
}

/// `text` with each run of 6 to 8 digits that stands alone (read as card
/// numbers are read: digits of any script, separators between them, a
/// group glued to a word left out) replaced by `with`: a one-time code
/// typed into a sentence while a verification is pending (contract 27).
pub fn codes_replaced<'a>(text: &'a str, with: &str) -> Cow<'a, str> {
    let glyphs = read(None, text);
    if !glyphs.iter().any(|g| matches!(g.read, Read::Digit(_))) {
        return Cow::Borrowed(text);
    }
    let visible: Vec<usize> = (0..glyphs.len())
        .filter(|&i| glyphs[i].read != Read::Invisible)
        .collect();
    let taken = vec![false; glyphs.len()];
    // Glued to a word by a dash, dot or slash (`A-481516`, `481516/B`): an id.
    let glued = |v: Option<usize>, further: Option<usize>| {
        v.and_then(|v| visible.get(v)).is_some_and(|&i| {
            glyphs[i].read == Read::Separator
                && !text[glyphs[i].start..glyphs[i].end].chars().all(char::is_whitespace)
                && further
                    .and_then(|f| visible.get(f))
                    .is_some_and(|&f| matches!(glyphs[f].read, Read::Letter(_) | Read::OtherLetter | Read::Digit(_)))
        })
    };
    let codes: Vec<(usize, usize)> = runs(&glyphs, &visible, &taken)
        .iter()
        // As codes are typed: whole, or in two halves ("481 516"); an amount
        // or a date ("1001 12.50", "2026-12-07") is more groups or shorter ones.
        .filter(|run| run.len() <= 2 && run.iter().all(|group| group.len() >= 3))
        .filter(|run| (6..=8).contains(&run.iter().map(Vec::len).sum::<usize>()))
        .filter_map(|run| Some((run.first()?.first()?.0, run.last()?.last()?.0)))
        .filter(|&(first, last)| {
            let (Some(v_first), Some(v_last)) = (
                visible.iter().position(|&i| i == first),
                visible.iter().position(|&i| i == last),
            ) else {
                return false;
            };
            !glued(v_first.checked_sub(1), v_first.checked_sub(2)) && !glued(Some(v_last + 1), Some(v_last + 2))
        })
        .collect();
    if codes.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (first, last) in codes {
        out.push_str(&text[at..glyphs[first].start]);
        out.push_str(with);
        at = glyphs[last].end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// Whether masking would change `text` (a key or an id that holds a card
/// number or an IBAN is refused rather than kept).
pub fn would_mask(text: &str) -> bool {
    !spans(&read(None, text)).is_empty()
}

/// `text` masked as if it followed `before` (whether an IBAN may begin at
/// its start depends on the character before it).
fn masked_after(before: Option<char>, text: &str) -> Cow<'_, str> {
    let glyphs = read(before, text);
    let found = spans(&glyphs);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in found {
        let (start, end) = (glyphs[span.first].start, glyphs[span.last].end);
        out.push_str(&text[at..start]);
        out.push_str(&format!("[{} ending {}]", span.what, span.ending));
        at = end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// What a character is to a person reading a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Digit(u8),
    /// An ASCII letter, as a capital.
    Letter(u8),
    Separator,
    /// A format character: read as nothing.
    Invisible,
    /// A letter (or a digit that is no decimal digit) of another script:
    /// a digit run it touches is part of a word, no candidate.
    OtherLetter,
    Other,
}

/// One character of the text: where it stands (bytes) and how it reads.
#[derive(Debug, Clone, Copy)]
struct Glyph {
    start: usize,
    end: usize,
    read: Read,
}

fn read_ascii(c: u8) -> Read {
    match c {
        b'0'..=b'9' => Read::Digit(c - b'0'),
        b'a'..=b'z' | b'A'..=b'Z' => Read::Letter(c.to_ascii_uppercase()),
        b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b'-' | b'.' | b'/' | b'_' => Read::Separator,
        _ => Read::Other,
    }
}

fn read_char(c: char) -> Read {
    if c.is_ascii() {
        return read_ascii(c as u8);
    }
    let category = get_general_category(c);
    if category == GeneralCategory::Format {
        return Read::Invisible;
    }
    if c.is_whitespace() || category == GeneralCategory::DashPunctuation || c == '\u{2212}' {
        return Read::Separator;
    }
    if category == GeneralCategory::DecimalNumber {
        return Read::Digit(decimal_value(c));
    }
    // Compatibility forms (fullwidth letters, digits, dots and slashes).
    use unicode_normalization::UnicodeNormalization;
    let mut compatible = std::iter::once(c).nfkc();
    match (compatible.next(), compatible.next()) {
        (Some(plain), None) if plain.is_ascii() => read_ascii(plain as u8),
        _ if c.is_alphanumeric() => Read::OtherLetter,
        _ => Read::Other,
    }
}

/// A decimal digit's value: Unicode encodes each script's digits as a
/// contiguous run from zero to nine (a stability guarantee), so the value
/// is the place in the run of ten it stands in.
fn decimal_value(c: char) -> u8 {
    let mut first = c as u32;
    while let Some(before) = first.checked_sub(1).and_then(char::from_u32) {
        if get_general_category(before) != GeneralCategory::DecimalNumber {
            break;
        }
        first -= 1;
    }
    ((c as u32 - first) % 10) as u8
}

/// The text's characters as read, with `before` (if any) as a first glyph
/// of zero width, so that the first real one knows its neighbour.
fn read(before: Option<char>, text: &str) -> Vec<Glyph> {
    let mut glyphs = Vec::with_capacity(text.len() + 1);
    if let Some(c) = before {
        glyphs.push(Glyph {
            start: 0,
            end: 0,
            read: read_char(c),
        });
    }
    if text.is_ascii() {
        glyphs.extend(text.bytes().enumerate().map(|(at, b)| Glyph {
            start: at,
            end: at + 1,
            read: read_ascii(b),
        }));
    } else {
        glyphs.extend(text.char_indices().map(|(at, c)| Glyph {
            start: at,
            end: at + c.len_utf8(),
            read: read_char(c),
        }));
    }
    glyphs
}

/// A number found: its first and last glyphs, what it is and its last four.
struct Span {
    first: usize,
    last: usize,
    what: &'static str,
    ending: String,
}

/// Every card number and IBAN of `glyphs`, in order, none overlapping.
fn spans(glyphs: &[Glyph]) -> Vec<Span> {
    // Most text has no digit: nothing to read.
    if !glyphs.iter().any(|g| matches!(g.read, Read::Digit(_))) {
        return Vec::new();
    }
    let visible: Vec<usize> = (0..glyphs.len())
        .filter(|&i| glyphs[i].read != Read::Invisible)
        .collect();
    // IBANs first: an IBAN's digits must not be read as a card's.
    let mut found = ibans(glyphs, &visible);
    let mut taken = vec![false; glyphs.len()];
    for span in &found {
        taken[span.first..=span.last].iter_mut().for_each(|t| *t = true);
    }
    for run in runs(glyphs, &visible, &taken) {
        found.extend(cards_in(&run));
    }
    found.sort_by_key(|span| span.first);
    found
}

/// One run of digits with at most [`MOST_SEPARATORS`] separators between
/// neighbours: its groups, each the (glyph, digit) of its digits.
type Run = Vec<Vec<(usize, u8)>>;

fn runs(glyphs: &[Glyph], visible: &[usize], taken: &[bool]) -> Vec<Run> {
    let digit = |i: usize| match glyphs[i].read {
        Read::Digit(d) if !taken[i] => Some(d),
        _ => None,
    };
    let mut runs = Vec::new();
    let mut v = 0;
    while v < visible.len() {
        if digit(visible[v]).is_none() {
            v += 1;
            continue;
        }
        let first = v;
        let mut run: Run = vec![Vec::new()];
        loop {
            let i = visible[v];
            if let (Some(d), Some(group)) = (digit(i), run.last_mut()) {
                group.push((i, d));
            }
            v += 1;
            if v < visible.len() && digit(visible[v]).is_some() {
                continue;
            }
            // Counted only as far as decides it: a long run of spaces is read once.
            let separators = visible[v..]
                .iter()
                .take(MOST_SEPARATORS + 1)
                .take_while(|&&i| glyphs[i].read == Read::Separator)
                .count();
            let next = v + separators;
            if (1..=MOST_SEPARATORS).contains(&separators) && next < visible.len() && digit(visible[next]).is_some() {
                run.push(Vec::new());
                v = next;
                continue;
            }
            break;
        }
        // A candidate touches no other letter or digit (contract 23): a
        // group glued to a word (`A4539148803436467`, an order id) is no
        // part of one; the run's other groups still are.
        let touches =
            |at: Option<&usize>| at.is_some_and(|&i| matches!(glyphs[i].read, Read::Letter(_) | Read::OtherLetter));
        if touches(first.checked_sub(1).and_then(|b| visible.get(b))) {
            run.remove(0);
        }
        if !run.is_empty() && touches(visible.get(v)) {
            run.pop();
        }
        if !run.is_empty() {
            runs.push(run);
        }
    }
    runs
}

/// Whether some of a run's groups are written as a card's are, to be tried
/// as one apart from the rest: one group, groups of at most six digits
/// (4-4-4-4, 4-6-5, 4-4-4-4-3), or two halves (8-8). A 3-7-7 order id's
/// last two groups are not, whatever the Luhn check says of their digits.
fn card_grouped(groups: &[Vec<(usize, u8)>]) -> bool {
    match groups {
        [_] => true,
        [a, b] if a.len() == 8 && b.len() == 8 => true,
        _ => groups.iter().all(|group| group.len() <= MOST_CARD_GROUP),
    }
}

fn luhn_valid(digits: &[u8]) -> bool {
    let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    luhn::valid(&text)
}

fn card(digits: &[(usize, u8)]) -> Span {
    let ending = digits[digits.len() - 4..]
        .iter()
        .map(|(_, d)| char::from(b'0' + d))
        .collect();
    Span {
        first: digits[0].0,
        last: digits[digits.len() - 1].0,
        what: "card",
        ending,
    }
}

/// The cards of one run: the whole run when it passes, else windows of
/// whole groups, longest first, then leftmost, none overlapping.
fn cards_in(run: &Run) -> Vec<Span> {
    let all: Vec<(usize, u8)> = run.iter().flatten().copied().collect();
    if all.len() < *CARD_DIGITS.start() {
        return Vec::new();
    }
    let digits: Vec<u8> = all.iter().map(|(_, d)| *d).collect();
    if CARD_DIGITS.contains(&all.len()) && luhn_valid(&digits) {
        return vec![card(&all)];
    }
    // Where each group starts among the run's digits.
    let mut starts = Vec::with_capacity(run.len() + 1);
    let mut at = 0;
    for group in run {
        starts.push(at);
        at += group.len();
    }
    starts.push(at);
    let mut windows = Vec::new();
    for first in 0..run.len() {
        for end in first + 1..=run.len() {
            let length = starts[end] - starts[first];
            if length > *CARD_DIGITS.end() {
                break;
            }
            if !card_grouped(&run[first..end]) {
                continue;
            }
            if CARD_DIGITS.contains(&length) && luhn_valid(&digits[starts[first]..starts[end]]) {
                windows.push((starts[first], starts[end]));
            }
        }
    }
    windows.sort_by_key(|&(from, to)| (std::cmp::Reverse(to - from), from));
    let mut used = vec![false; all.len()];
    let mut found = Vec::new();
    for (from, to) in windows {
        if used[from..to].iter().all(|u| !u) {
            used[from..to].iter_mut().for_each(|u| *u = true);
            found.push(card(&all[from..to]));
        }
    }
    found
}

/// The IBANs: two letters and two digits at the start of a word, then
/// letters and digits with at most [`MOST_SEPARATORS`] separators between
/// neighbours; the longest prefix the crate accepts.
fn ibans(glyphs: &[Glyph], visible: &[usize]) -> Vec<Span> {
    let read = |v: usize| glyphs[visible[v]].read;
    let alphanumeric = |r: Read| matches!(r, Read::Digit(_) | Read::Letter(_));
    let character = |r: Read| match r {
        Read::Digit(d) => char::from(b'0' + d),
        Read::Letter(l) => char::from(l),
        _ => ' ',
    };
    let mut found = Vec::new();
    let mut v = 0;
    while v + 4 <= visible.len() {
        let word_start = v == 0 || !alphanumeric(read(v - 1));
        if !word_start || !matches!(read(v), Read::Letter(_)) {
            v += 1;
            continue;
        }
        // The candidate's letters and digits, at most three separators
        // between two of them: (visible index, character).
        let mut kept: Vec<(usize, char)> = vec![(v, character(read(v)))];
        let mut w = v + 1;
        while kept.len() < IBAN_MOST && w < visible.len() {
            if alphanumeric(read(w)) {
                kept.push((w, character(read(w))));
                w += 1;
                continue;
            }
            let separators = (w..visible.len())
                .take(MOST_SEPARATORS + 1)
                .take_while(|&x| read(x) == Read::Separator)
                .count();
            let next = w + separators;
            if separators <= MOST_SEPARATORS && next < visible.len() && alphanumeric(read(next)) {
                w = next;
            } else {
                break;
            }
        }
        // A country code and two check digits first.
        let header = kept.len() >= 4
            && kept[1].1.is_ascii_alphabetic()
            && iban_country(kept[0].1 as u8, kept[1].1 as u8)
            && kept[2].1.is_ascii_digit()
            && kept[3].1.is_ascii_digit();
        if !header {
            v += 1;
            continue;
        }
        let accepted = (IBAN_FEWEST..=kept.len()).rev().find(|&length| {
            let electronic: String = kept[..length].iter().map(|(_, c)| *c).collect();
            electronic.parse::<iban::Iban>().is_ok()
        });
        match accepted {
            Some(length) => {
                let last = kept[length - 1].0;
                found.push(Span {
                    first: visible[v],
                    last: visible[last],
                    what: "IBAN",
                    ending: kept[length - 4..length].iter().map(|(_, c)| *c).collect(),
                });
                v = last + 1;
            }
            None => v += 1,
        }
    }
    found
}

/// Where the text that masking may still change begins, in `text` that
/// follows `before` and may be followed by more: the start of a trailing
/// run of digits and separators that holds a digit (it may grow into a
/// card), or of a trailing word that may be an IBAN's beginning (two
/// letters, then digits, letters and separators). Everything before it
/// masks the same whatever comes next.
fn open_from(before: Option<char>, text: &str) -> usize {
    let glyphs = read(before, text);
    let visible: Vec<usize> = (0..glyphs.len())
        .filter(|&i| glyphs[i].read != Read::Invisible)
        .collect();
    let first = usize::from(before.is_some());
    let mut open = text.len();
    // A trailing run of digits and separators, with a digit in it.
    let mut v = visible.len();
    let (mut digit_at, mut separators) = (None, 0);
    while v > 0 && visible[v - 1] >= first {
        match glyphs[visible[v - 1]].read {
            Read::Digit(_) => (digit_at, separators) = (Some(v - 1), 0),
            Read::Separator if separators < MOST_SEPARATORS => separators += 1,
            _ => break,
        }
        v -= 1;
    }
    if let Some(d) = digit_at {
        open = open.min(glyphs[visible[d]].start);
    }
    // A trailing stretch of letters, digits and separators: any word start
    // in it that reads as an IBAN's beginning so far keeps it open.
    let (mut v, mut alphanumerics, mut separators) = (visible.len(), 0, 0);
    while v > 0 && visible[v - 1] >= first && alphanumerics < IBAN_MOST {
        match glyphs[visible[v - 1]].read {
            Read::Separator if separators < MOST_SEPARATORS => separators += 1,
            Read::Digit(_) | Read::Letter(_) => {
                (alphanumerics, separators) = (alphanumerics + 1, 0);
                let word_start = v == 1 || !matches!(glyphs[visible[v - 2]].read, Read::Digit(_) | Read::Letter(_));
                // Separators may stand inside the header too; two letters
                // must be a country that gives IBANs.
                let header: Vec<Read> = visible[v - 1..]
                    .iter()
                    .map(|&i| glyphs[i].read)
                    .filter(|read| *read != Read::Separator)
                    .take(4)
                    .collect();
                let begins = header
                    .iter()
                    .enumerate()
                    .all(|(k, read)| matches!((k, read), (0 | 1, Read::Letter(_)) | (2 | 3, Read::Digit(_))))
                    && match header.as_slice() {
                        [Read::Letter(a), Read::Letter(b), ..] => iban_country(*a, *b),
                        _ => true,
                    };
                if word_start && begins {
                    open = open.min(glyphs[visible[v - 1]].start);
                }
            }
            _ => break,
        }
        v -= 1;
    }
    open
}

/// A reply masked as it streams (contract 23 in event-stream mode): each
/// piece settles what can no longer change and hands it out masked, so a
/// delta never shows what the whole reply's mask hides, and the work grows
/// with the reply's length, not its length times its pieces.
#[derive(Debug, Default)]
pub struct Streamed {
    written: String,
    /// Where in `written` the settled (handed out) text ends.
    settled: usize,
}

impl Streamed {
    /// Adds `piece`; returns the newly settled text, masked (may be empty).
    pub fn push(&mut self, piece: &str) -> String {
        self.written.push_str(piece);
        let before = self.written[..self.settled].chars().next_back();
        let tail = &self.written[self.settled..];
        let open = open_from(before, tail);
        let out = masked_after(before, &tail[..open]).into_owned();
        self.settled += open;
        out
    }

    /// Whether nothing was written since the draft began.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Streamed, masked, would_mask};

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
    fn a_card_is_read_as_a_person_reads_it() {
        for spelling in [
            "4242  4242  4242  4242",
            "4242\t4242\t4242\t4242",
            "4242\n4242\n4242\n4242",
            "4242\u{a0}4242\u{a0}4242\u{a0}4242",
            "4242\u{2009}4242\u{2009}4242\u{2009}4242",
            "4242.4242.4242.4242",
            "4242/4242/4242/4242",
            "4242_4242_4242_4242",
            "4242\u{2013}4242\u{2013}4242\u{2013}4242",
            "4242 - 4242 - 4242 - 4242",
            "42\u{200b}42424242424242\u{200d}42",
            "4\u{ad}242424242424242",
            "\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}",
            "\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}",
            "\u{96a}\u{968}\u{96a}\u{968} \u{96a}\u{968}\u{96a}\u{968} 4242 4242",
        ] {
            assert_eq!(
                masked(&format!("card {spelling} thanks")),
                "card [card ending 4242] thanks",
                "{spelling:?}"
            );
        }
        // Four separators part two numbers: a person reads two.
        assert_eq!(masked("4242 4242    4242 4242"), "4242 4242    4242 4242");
    }

    #[test]
    fn ids_that_fail_the_check_as_a_whole_are_never_cut_to_a_card() {
        // A 3-7-7 order id, a 16-digit reference and a 20-digit tracking
        // number whose inner windows would pass the Luhn check alone.
        for id in [
            "940-4242424-2424242",
            "112-5555555-5555444",
            "4242424242424241",
            "94001424242424242424",
            "ref 774242424242424242",
        ] {
            assert_eq!(masked(id), id, "{id}");
        }
        // A card glued to other digits is one number of another length.
        assert!(!would_mask("774242424242424242"));
    }

    #[test]
    fn a_digit_run_glued_to_a_letter_is_no_candidate() {
        assert!(luhn::valid("4539148803436467"));
        for id in [
            "A4539148803436467",
            "4539148803436467B",
            "ORD4539148803436467X",
            "é4539148803436467",
        ] {
            assert_eq!(masked(id), id, "{id}");
        }
        // The chaos run's message: a marker ending in a digit, then a card.
        // The marker's last digit stays; the card goes, whole.
        let message = "Yes, that's right zqd199a40c89a0 40\u{200b}00056655665556";
        assert!(luhn::valid("4000056655665556"));
        assert_eq!(masked(message), "Yes, that's right zqd199a40c89a0 [card ending 5556]");
        // The rest of a run glued at one end is still read.
        assert_eq!(masked("A1 4539 1488 0343 6467"), "A1 [card ending 6467]");
    }

    #[test]
    fn a_nineteen_digit_card_in_groups_of_four_is_masked_whole() {
        let nineteen = "4000 0000 0000 0000 006";
        assert!(luhn::valid("4000000000000000006"));
        assert_eq!(masked(nineteen), "[card ending 0006]");
    }

    #[test]
    fn a_card_written_beside_an_amount_is_found_by_its_groups() {
        assert_eq!(
            masked("refund 12.50 4242 4242 4242 4242 please"),
            "refund 12.50 [card ending 4242] please"
        );
        assert_eq!(masked("A-1001 4242-4242-4242-4242"), "A-1001 [card ending 4242]");
    }

    #[test]
    fn the_iban_countries_are_the_crates() {
        // A code the crate knows answers an IBAN of it with its BBAN's
        // error, one it does not with an unknown country; the check digits
        // are tried until the base form (mod 97) passes.
        let mut known = Vec::new();
        for first in b'A'..=b'Z' {
            for second in b'A'..=b'Z' {
                let code = String::from_utf8(vec![first, second]).unwrap();
                let unknown = (0..100).find_map(|check| {
                    match format!("{code}{check:02}0000000000000000").parse::<iban::Iban>() {
                        Err(iban::ParseIbanError::UnknownCountry(_)) => Some(true),
                        Err(iban::ParseIbanError::InvalidBban(_)) | Ok(_) => Some(false),
                        Err(_) => None,
                    }
                });
                if unknown == Some(false) {
                    known.push(code);
                }
            }
        }
        assert_eq!(known, super::IBAN_COUNTRIES);
    }

    #[test]
    fn streamed_pieces_settle_to_the_whole_texts_mask() {
        let text = "Card 4242 4242 4242 4242, IBAN mt84 malt 0110 0001 2345 mtlc ast0 01s, order 940-4242424-2424242.";
        let mut streamed = Streamed::default();
        let mut shown = String::new();
        for piece in text.as_bytes().chunks(3) {
            shown.push_str(&streamed.push(std::str::from_utf8(piece).unwrap()));
            assert!(
                !shown.contains("4242 4242 4242 4242") && !shown.contains("0001 2345"),
                "{shown}"
            );
        }
        assert!(masked(text).starts_with(&shown), "{shown}");
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

    /// Separators a person writes between digits.
    const SEPARATORS: [&str; 12] = [
        " ", "-", "\t", "\n", "\u{a0}", "\u{2009}", ".", "/", "_", "\u{2013}", "\u{200b}", "\u{3000}",
    ];

    /// A card number with up to three separators (or none) drawn before
    /// each digit, and some digits in another script.
    fn written(card: &str, separators: &[u8]) -> String {
        let mut out = String::new();
        for (i, digit) in card.chars().enumerate() {
            let drawn = separators.get(i).copied().unwrap_or(0);
            if i > 0 && drawn % 2 == 1 {
                for k in 0..usize::from(drawn / 2 % 3) + 1 {
                    out.push_str(SEPARATORS[(usize::from(drawn) + k) % SEPARATORS.len()]);
                }
            }
            let value = digit as u32 - '0' as u32;
            match drawn / 32 {
                // Fullwidth and Arabic-Indic digits.
                1 => out.push(char::from_u32(0xff10 + value).unwrap()),
                2 => out.push(char::from_u32(0x660 + value).unwrap()),
                _ => out.push(digit),
            }
        }
        out
    }

    /// The digits of `text` as a person reads them.
    fn read_digits(text: &str) -> String {
        super::read(None, text)
            .iter()
            .filter_map(|g| match g.read {
                super::Read::Digit(d) => Some(char::from(b'0' + d)),
                _ => None,
            })
            .collect()
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
            // Apart from other numbers, as a person would write it (a card
            // glued to other digits is another number).
            let text = format!("{before} x {} y {after}", written(card, &separators));
            let out = masked(&text);
            prop_assert!(!read_digits(&out).contains(card), "{text:?} -> {out:?}");
        }

        #[test]
        fn a_streamed_reply_shows_only_what_its_whole_mask_shows(
            before in "[ -~]{0,30}",
            after in "[ -~]{0,30}",
            card in 0usize..CARDS.len(),
            iban in 0usize..IBANS.len(),
            separators in proptest::collection::vec(any::<u8>(), 19),
            cuts in proptest::collection::vec(1usize..6, 1..40),
        ) {
            let text = format!(
                "{before} x {} y {} {after}",
                written(CARDS[card], &separators),
                IBANS[iban].to_lowercase()
            );
            let whole = masked(&text).into_owned();
            let mut streamed = Streamed::default();
            let (mut shown, mut rest) = (String::new(), text.as_str());
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let at = (1..=rest.len()).find(|&at| at >= *cut.min(&rest.len()) && rest.is_char_boundary(at)).unwrap_or(rest.len());
                shown.push_str(&streamed.push(&rest[..at]));
                rest = &rest[at..];
                prop_assert!(whole.starts_with(&shown), "{text:?}: shown {shown:?}, whole {whole:?}");
            }
            prop_assert!(!read_digits(&shown).contains(CARDS[card]), "{text:?} -> {shown:?}");
        }

        #[test]
        fn an_iban_in_any_spelling_never_survives(
            before in "[ -~]{0,30}",
            after in "[ -~]{0,30}",
            iban in 0usize..IBANS.len(),
            separators in proptest::collection::vec(any::<u8>(), 34),
            lower in any::<bool>(),
        ) {
            let mut spelled = String::new();
            for (i, c) in IBANS[iban].chars().enumerate() {
                let drawn = separators[i];
                if i > 0 && drawn % 3 == 1 {
                    spelled.push_str(SEPARATORS[usize::from(drawn) % SEPARATORS.len()]);
                }
                spelled.push(if lower { c.to_ascii_lowercase() } else { c });
            }
            let text = format!("{before} x {spelled} y {after}");
            let out = masked(&text);
            let read: String = out
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_uppercase();
            prop_assert!(!read.contains(IBANS[iban]), "{text:?} -> {out:?}");
        }

        #[test]
        fn ids_that_fail_their_check_stay_whatever_their_digits(
            first in 100u32..1000,
            second in 1_000_000u32..10_000_000,
            third in 1_000_000u32..10_000_000,
            long in "[0-9]{20,22}",
            reference in "[0-9]{16}",
        ) {
            // A 3-7-7 order id never is a card: its groups are not a card's.
            let order = format!("{first}-{second}-{third}");
            // A 3-7-7 order id is a card only when its 17 digits pass whole.
            let sentence = format!("order {order} please");
            let out = masked(&sentence);
            let digits: String = order.chars().filter(char::is_ascii_digit).collect();
            prop_assert_eq!(out.as_ref() == sentence.as_str(), !luhn::valid(&digits));
            // A tracking number longer than any card is one number.
            let tracking = format!("tracking {long}");
            let out = masked(&tracking);
            prop_assert_eq!(out.as_ref(), tracking.as_str());
            // A 16-digit reference stays unless it is, whole, a card number.
            let kept = masked(&format!("ref {reference}")) == format!("ref {reference}");
            prop_assert_eq!(kept, !luhn::valid(&reference));
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
            // Apart, as in a sentence: "12.50 A-1001" written in a row with no
            // word between is one run of digits to a person reading numbers.
            let plain = words.join(", ");
            let unchanged = masked(&plain);
            prop_assert_eq!(unchanged.as_ref(), plain.as_str());
            // With a card among them, every word but the card is kept.
            let with_card = format!("{plain} x {} y {plain}", CARDS[card]);
            let out = masked(&with_card);
            prop_assert_eq!(out.as_ref(), format!("{plain} x [card ending {}] y {plain}", &CARDS[card][CARDS[card].len() - 4..]));
        }
    }
}
