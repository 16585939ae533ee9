//! Visitors (contract 27): people with no token, who may ask anything the
//! help centre answers and hand the conversation to a person, and nothing
//! that reads an order or moves money.
//!
//! A visitor is known by a token the function issues on their first
//! message (256 random bits) and the page sends back in `X-Visitor-Token`.
//! Only its hash is kept: the visitor's user id is `visitor:` and the first
//! 128 bits of its SHA-256, which is what owns their conversations, so
//! every rule that keeps one customer's conversation from another's keeps
//! visitors apart too. The token itself reaches no log, event, metric or
//! table: it leaves the function once, in the first answer's `visitor`.
//!
//! A visitor's turns count per source address, kept only as a keyed hash
//! ([`crate::keyed_hash::AddressKey`]) in a budget counter with a TTL; their tokens count in
//! one day all visitors share ([`crate::budget::Account::of_visitor`]).

use std::fmt;

use sha2::{Digest, Sha256};

use crate::conversation::{NoRandomness, random_hex};
use crate::router::Intent;

/// The header the page sends the token back in.
pub const TOKEN_HEADER: &str = "x-visitor-token";
/// A visitor's user id begins with this; no customer's or guest's does.
pub const USER_PREFIX: &str = "visitor:";

const TOKEN_BYTES: usize = 32;

/// A visitor's token: 64 lowercase hex characters. Its `Debug` shows
/// nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct VisitorToken(String);

impl VisitorToken {
    /// A new token, from the system's random source.
    pub fn mint() -> Result<VisitorToken, NoRandomness> {
        random_hex::<TOKEN_BYTES>().map(VisitorToken)
    }

    /// A token as the page sends it back: exactly the shape the function
    /// issues, or none.
    pub fn parse(raw: &[u8]) -> Option<VisitorToken> {
        let fits = raw.len() == TOKEN_BYTES * 2 && raw.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        fits.then(|| VisitorToken(String::from_utf8_lossy(raw).into_owned()))
    }

    /// The user id it stands for: its hash, never the token.
    pub fn user_id(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        let hex: String = digest[..16].iter().map(|byte| format!("{byte:02x}")).collect();
        format!("{USER_PREFIX}{hex}")
    }

    /// For the one answer that hands it to the visitor.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for VisitorToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VisitorToken(..)")
    }
}

/// Whether `user_id` is a visitor's.
pub fn is_visitor(user_id: &str) -> bool {
    user_id.starts_with(USER_PREFIX)
}

/// The intents that need to know whose orders they are about.
pub const ACCOUNT_INTENTS: [Intent; 5] = [
    Intent::OrderStatus,
    Intent::Refund,
    Intent::Return,
    Intent::AddressChange,
    Intent::AccountAccess,
];

/// The labels' intents a visitor cannot be served before they verify, in
/// the labels' order.
pub fn needing_an_account(intents: &[Intent]) -> Vec<Intent> {
    intents
        .iter()
        .copied()
        .filter(|intent| ACCOUNT_INTENTS.contains(intent))
        .collect()
}

/// Code's reply to a visitor who asks about an order: no model wrote it.
pub const VERIFY_REPLY: &str = "To help with an order I first need to know it is yours. \
Please confirm your e-mail address (we send you a one-time code) or sign in, and I will carry on right here.";

/// What a visitor's message of only 6 to 8 digits is kept and sent as: a
/// visitor has no order to give a number of, so such a message is the
/// one-time code of a sign-in (contract 27).
pub const ONE_TIME_CODE: &str = "[a one-time code]";

/// A message that is only 6 to 8 digits, read as a card number is read
/// (contract 23): of any script, with spaces, dashes or format characters
/// between them, white space around them aside.
pub fn is_one_time_code(text: &str) -> bool {
    crate::mask::digits_only(text).is_some_and(|digits| (6..=8).contains(&digits))
}

/// A message as it is kept and sent: while a verification is pending in
/// its conversation (contract 27), a message of only a one-time code, and
/// every 6-to-8-digit run standing alone in one ("my code is 481 516"),
/// is [`ONE_TIME_CODE`]. `None`: nothing to mask.
pub fn while_verifying(text: &str) -> Option<String> {
    if is_one_time_code(text) {
        return Some(ONE_TIME_CODE.to_owned());
    }
    match crate::mask::codes_replaced(text, ONE_TIME_CODE) {
        std::borrow::Cow::Owned(masked) => Some(masked),
        std::borrow::Cow::Borrowed(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_256_random_bits_and_only_its_hash_names_the_visitor() {
        let one = VisitorToken::mint().unwrap();
        let two = VisitorToken::mint().unwrap();
        assert_ne!(one, two);
        assert_eq!(one.expose().len(), 64);
        assert_eq!(VisitorToken::parse(one.expose().as_bytes()), Some(one.clone()));
        let user = one.user_id();
        assert!(user.starts_with("visitor:") && user.len() == "visitor:".len() + 32);
        assert!(!user.contains(one.expose()) && !one.expose().contains(&user["visitor:".len()..]));
        assert_eq!(format!("{one:?}"), "VisitorToken(..)");
    }

    #[test]
    fn only_the_issued_shape_parses() {
        for bad in [
            "",
            "abc",
            &"A".repeat(64),
            &"g".repeat(64),
            &"a".repeat(63),
            &"a".repeat(65),
        ] {
            assert_eq!(VisitorToken::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn account_intents_and_codes() {
        assert_eq!(
            needing_an_account(&[Intent::PolicyQuestion, Intent::Refund, Intent::OrderStatus]),
            vec![Intent::Refund, Intent::OrderStatus]
        );
        assert!(needing_an_account(&[Intent::PolicyQuestion, Intent::Other]).is_empty());
        for code in [
            "123456",
            " 1234567 ",
            "12345678",
            // As people type them (the seventh review's finding).
            "481 516",
            "481-516",
            "481\u{a0}516",
            "４８１５１６",
            "٤٨١٥١٦",
            "48\u{200b}1516",
        ] {
            assert!(is_one_time_code(code), "{code}");
        }
        for not in ["12345", "123456789", "A-1001", "my code is 123456", "12345x"] {
            assert!(!is_one_time_code(not), "{not}");
        }
    }

    /// While a verification is pending, a code standing alone in a
    /// sentence is masked, in every spelling; a longer or shorter number,
    /// or one glued to a word (an order id), stays.
    #[test]
    fn codes_in_a_sentence_while_verifying() {
        for (said, kept) in [
            (" 481516 ", ONE_TIME_CODE.to_owned()),
            ("my code is 481516", format!("my code is {ONE_TIME_CODE}")),
            ("code: 481 516, thanks", format!("code: {ONE_TIME_CODE}, thanks")),
            ("it says ４８１５１６.", format!("it says {ONE_TIME_CODE}.")),
            ("٤٨١-٥١٦ is it", format!("{ONE_TIME_CODE} is it")),
            ("12345678 then 1234567", format!("{ONE_TIME_CODE} then {ONE_TIME_CODE}")),
        ] {
            assert_eq!(while_verifying(said), Some(kept), "{said}");
        }
        for stays in [
            "order A481516",
            "order A-481516",
            "call 0612345678",
            "12345 is short",
            "refund A-1001 12.50",
            "on 2026-12-07",
            "call 06 12 34 56",
        ] {
            assert_eq!(while_verifying(stays), None, "{stays}");
        }
    }
}
