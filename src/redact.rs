//! What may stand in for the customer's message in a log line: its length and
//! a short hash, enough to match a complaint to a request without storing
//! what the customer wrote.

use sha2::{Digest, Sha256};

/// The first 12 hex digits of the text's SHA-256.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(6).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_hash_is_stable_and_short() {
        assert_eq!(super::short_hash("abc"), "ba7816bf8f01");
    }
}
