//! The `Idempotency-Key` header as the edge reads it (contract 6.3): its
//! name, the header that marks a replay, and the key's syntax, which is the
//! intake's ([`crate::intake::admission::key`]) since the key names a refund scope.

pub use crate::intake::admission::key::{IdempotencyKey, MAX_KEY_LENGTH, MalformedKey, body_fingerprint, body_sha256};

pub const HEADER: &str = "idempotency-key";
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
