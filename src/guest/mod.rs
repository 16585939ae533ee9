//! Guests (contract 27): people with no account at the shop who proved
//! control of an e-mail address with a one-time code, through the guest
//! user pool. The code goes from Cognito to the mailbox and from the person
//! to Cognito; the function only ever sees the pool's ID token, which API
//! Gateway's authorizer verified, and tells a guest apart by its issuer
//! (`GUEST_POOL_ISSUER`).
//!
//! A guest's user id is `guest:` and the pool's `sub`, so the rules that
//! keep customers apart keep guests apart, and the e-mail itself is needed
//! only where the order system is asked ([`crate::orders::Shopper`]): it is
//! a [`GuestEmail`], whose `Debug` shows nothing, and no log line, event,
//! metric, ledger key or model request holds it.

pub mod directory;

use std::fmt;

use crate::keyed_hash::AddressKey;

/// A guest's user id begins with this; no customer's or visitor's does.
pub const USER_PREFIX: &str = "guest:";

/// The user id of the guest pool's `sub`.
pub fn user_id(sub: &str) -> String {
    format!("{USER_PREFIX}{sub}")
}

/// Whether a user id is a guest's.
pub fn is_guest(user_id: &str) -> bool {
    user_id.starts_with(USER_PREFIX)
}

/// The verified e-mail of a guest: personal data, shown by no `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct GuestEmail(String);

impl GuestEmail {
    /// An address with something on each side of one `@`, and no control
    /// character or space (Cognito verified it; this only refuses what
    /// could not be one). `None` otherwise.
    pub fn parse(raw: &str) -> Option<GuestEmail> {
        let raw = raw.trim();
        let (local, domain) = raw.rsplit_once('@')?;
        let fits = !local.is_empty()
            && !domain.is_empty()
            && raw.len() <= 320
            && !raw.chars().any(|c| c.is_control() || c.is_whitespace());
        fits.then(|| GuestEmail(raw.to_owned()))
    }

    /// For the one header that carries it to the order system.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The same address, compared without case (contract 27): what the
    /// order system answered for must be this guest's.
    pub fn is(&self, other: &str) -> bool {
        self.folded() == other.trim().to_lowercase()
    }

    /// Whose day the guest's turns, tokens and automatic refunds count in
    /// (section 8's rule 3, contract 13): `guest:@` and the keyed hash of
    /// the address folded as the order system compares it. Their orders are
    /// bound to the address, not to the pool's `sub`, which a guest renews
    /// by deleting themselves and signing up again. A `sub` never holds an
    /// `@`, so no guest's user id is a day owner; the hash keeps the address
    /// out of every ledger key.
    pub fn day_owner(&self, key: &AddressKey) -> String {
        format!("{USER_PREFIX}@{}", key.hash(&self.folded()))
    }

    fn folded(&self) -> String {
        self.0.to_lowercase()
    }
}

impl fmt::Debug for GuestEmail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GuestEmail(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_or_none() {
        assert!(GuestEmail::parse("guest@example.com").is_some());
        for not_one in ["", "guest", "@example.com", "guest@", "a b@example.com", "a@b\u{7}"] {
            assert_eq!(GuestEmail::parse(not_one), None, "{not_one:?}");
        }
    }

    #[test]
    fn compared_without_case_and_never_shown() {
        let email = GuestEmail::parse("Guest@Example.com").unwrap();
        assert!(email.is("guest@example.COM"));
        assert!(!email.is("guest2@example.com"));
        assert_eq!(format!("{email:?}"), "GuestEmail(..)");
    }

    /// Two `sub`s of one address are one guest's day; another address, or
    /// another key, another day.
    #[test]
    fn a_day_by_the_address_folded() {
        let key = AddressKey::new(&"k".repeat(32)).unwrap();
        let day = GuestEmail::parse("Guest@Example.com").unwrap().day_owner(&key);
        assert_eq!(day, GuestEmail::parse(" guest@example.COM").unwrap().day_owner(&key));
        assert!(day.starts_with("guest:@") && !day.contains("xample"), "{day}");
        assert_ne!(day, GuestEmail::parse("guest2@example.com").unwrap().day_owner(&key));
        let other = AddressKey::new(&"j".repeat(32)).unwrap();
        assert_ne!(day, GuestEmail::parse("guest@example.com").unwrap().day_owner(&other));
    }

    #[test]
    fn a_guests_user_id() {
        assert_eq!(user_id("0f1e"), "guest:0f1e");
        assert!(is_guest("guest:0f1e"));
        assert!(!is_guest("u-1001") && !is_guest("visitor:ab"));
    }
}
