//! Keyed hashes of the addresses people are counted by (contracts 8 and
//! 27): a visitor's source address and a guest's e-mail are counted under
//! an HMAC with the stack's secret key, never kept, and no one without the
//! key can read one back or link one to a hash.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The stack's key of its keyed hashes (`VISITOR_ADDRESS_KEY`): a visitor's
/// source address, a guest's e-mail. An address is counted, never kept.
/// Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct AddressKey(Vec<u8>);

impl AddressKey {
    pub const MIN_CHARS: usize = 32;

    pub fn new(key: &str) -> Option<AddressKey> {
        (key.chars().count() >= Self::MIN_CHARS).then(|| AddressKey(key.as_bytes().to_vec()))
    }

    /// The address's keyed hash (128 bits in hex): the same address, the
    /// same name, in every container; no address can be read back from it.
    pub fn hash(&self, address: &str) -> String {
        // HMAC takes a key of any length: this cannot fail.
        let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(address.as_bytes());
        let digest = mac.finalize().into_bytes();
        digest[..16].iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

impl fmt::Debug for AddressKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AddressKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_named_by_its_keyed_hash() {
        let key = AddressKey::new(&"k".repeat(32)).unwrap();
        let other = AddressKey::new(&"j".repeat(32)).unwrap();
        assert_eq!(key.hash("203.0.113.7"), key.hash("203.0.113.7"));
        assert_ne!(key.hash("203.0.113.7"), key.hash("203.0.113.8"));
        assert_ne!(key.hash("203.0.113.7"), other.hash("203.0.113.7"));
        assert!(!key.hash("203.0.113.7").contains("203"));
        assert_eq!(AddressKey::new("short"), None);
        assert_eq!(format!("{key:?}"), "AddressKey(..)");
    }
}
