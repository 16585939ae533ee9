//! The `Idempotency-Key` (contract 6.3), after the IETF draft and
//! Stripe's practice: one key names one request of one customer. The first
//! request with a key holds a lease on it until its invocation's deadline,
//! then stores its answer; a repeat gets that answer back unchanged, a 409
//! while the first still runs, a 422 if its body differs, and takes the key
//! over when the first died without answering. Because the refund scope is
//! the key's, a takeover can never refund twice: the scope's refund record
//! is still there.

use sha2::{Digest, Sha256};

use crate::ledger::{KeyClaim, LedgerError, RequestLease, RequestLedger, StoredRequest, StoredResponse, TakeOver};

pub const MAX_KEY_LENGTH: usize = 255;

/// A key that passed the syntax check: 1 to 255 visible ASCII characters,
/// and nothing that section 23's masking would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MalformedKey {
    #[error("the Idempotency-Key header must be 1 to {MAX_KEY_LENGTH} visible ASCII characters")]
    Syntax,
    /// A card number or an IBAN: refused and never kept (contract 6.3).
    #[error("the Idempotency-Key header must not be a card number or an IBAN: send a random key")]
    CardNumber,
}

impl IdempotencyKey {
    pub fn parse(raw: &[u8]) -> Result<IdempotencyKey, MalformedKey> {
        if raw.is_empty() || raw.len() > MAX_KEY_LENGTH || !raw.iter().all(u8::is_ascii_graphic) {
            return Err(MalformedKey::Syntax);
        }
        // Visible ASCII is UTF-8.
        let key = String::from_utf8(raw.to_vec()).map_err(|_| MalformedKey::Syntax)?;
        if crate::mask::would_mask(&key) {
            return Err(MalformedKey::CardNumber);
        }
        Ok(IdempotencyKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Hex SHA-256 of raw bytes.
pub fn body_sha256(body: &[u8]) -> String {
    Sha256::digest(body).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The key's fingerprint of a message (contract 6.3): a SHA-256 of the body
/// as the function reads it, its three fields with the message as kept
/// (masked, section 23). Never of the raw body: an unkeyed hash of a card
/// number gives it back to anyone who tries the few million that end in
/// the same four digits. Fields the function ignores are not read.
pub fn body_fingerprint(customer: &str, kept_message: &str, conversation_id: Option<&str>) -> String {
    let read = serde_json::json!({
        "conversation_id": conversation_id,
        "message": kept_message,
        "user_id": customer,
    });
    body_sha256(read.to_string().as_bytes())
}

/// What a live request record means for a request with the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Replay(StoredResponse),
    DifferentBody,
    InProgress {
        retry_after_secs: u64,
    },
    /// The lease ended without an answer (its invocation died), or the key
    /// was released after a failure that moved no money.
    TakeOver {
        previous_writer: String,
    },
}

pub fn judge(existing: &StoredRequest, body_sha256: &str, now_ms: u64) -> Verdict {
    if existing.body_sha256 != body_sha256 {
        return Verdict::DifferentBody;
    }
    if let Some(response) = &existing.response {
        return Verdict::Replay(response.clone());
    }
    if existing.lease_until_ms > now_ms && !existing.released {
        return Verdict::InProgress {
            retry_after_secs: retry_after_secs(existing.lease_until_ms - now_ms),
        };
    }
    Verdict::TakeOver {
        previous_writer: existing.writer.clone(),
    }
}

/// Whole seconds until the lease ends, at least 1.
fn retry_after_secs(remaining_ms: u64) -> u64 {
    remaining_ms.div_ceil(1000).max(1)
}

/// How a request with a key may go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It holds the key: run the turn, in the conversation the key's record
    /// names (on a takeover, the one the dead invocation had begun).
    Proceed {
        taken_over: bool,
        conversation_id: Option<String>,
    },
    /// The first request's answer, to send again.
    Replay(StoredResponse),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("a request with this Idempotency-Key is still being answered")]
    InProgress { retry_after_secs: u64 },
    #[error("this Idempotency-Key was used with a different request body")]
    DifferentBody,
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Claims the key for `lease`, or says why not.
pub async fn admit<L: RequestLedger>(ledger: &L, lease: &RequestLease, now_ms: u64) -> Result<Admission, Refusal> {
    match ledger.claim_request(lease, now_ms).await? {
        KeyClaim::Claimed => Ok(Admission::Proceed {
            taken_over: false,
            conversation_id: lease.conversation_id.clone(),
        }),
        KeyClaim::Existing(existing) => admit_existing(ledger, lease, existing, now_ms).await,
    }
}

/// What a claim that found the key's live record `existing` may do.
pub async fn admit_existing<L: RequestLedger>(
    ledger: &L,
    lease: &RequestLease,
    existing: StoredRequest,
    now_ms: u64,
) -> Result<Admission, Refusal> {
    match judge(&existing, &lease.body_sha256, now_ms) {
        Verdict::Replay(response) => Ok(Admission::Replay(response)),
        Verdict::DifferentBody => Err(Refusal::DifferentBody),
        Verdict::InProgress { retry_after_secs } => Err(Refusal::InProgress { retry_after_secs }),
        Verdict::TakeOver { previous_writer } => {
            match ledger.take_over_request(lease, &previous_writer, now_ms).await? {
                TakeOver::Won => Ok(Admission::Proceed {
                    taken_over: true,
                    conversation_id: existing.conversation_id.or_else(|| lease.conversation_id.clone()),
                }),
                // Another retry took it over first: wait for its lease.
                TakeOver::Lost { lease_until_ms } => Err(Refusal::InProgress {
                    retry_after_secs: retry_after_secs(lease_until_ms.saturating_sub(now_ms)),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(body: &str, lease_until_ms: u64, response: Option<StoredResponse>) -> StoredRequest {
        StoredRequest {
            body_sha256: body_sha256(body.as_bytes()),
            writer: "w1".into(),
            lease_until_ms,
            expires_at_s: u64::MAX,
            conversation_id: None,
            released: false,
            response,
        }
    }

    #[test]
    fn key_syntax() {
        assert!(IdempotencyKey::parse(b"a").is_ok());
        assert!(IdempotencyKey::parse(&[b'k'; 255]).is_ok());
        assert!(IdempotencyKey::parse(b"550e8400-e29b-41d4-a716-446655440000").is_ok());
        for bad in [&b""[..], &[b'k'; 256], b"a b", b"tab\t", "é".as_bytes(), b"\x7f"] {
            assert_eq!(IdempotencyKey::parse(bad), Err(MalformedKey::Syntax), "{bad:?}");
        }
        // A card number or an IBAN, in any spelling, is never kept as a key.
        for card in [
            &b"4242424242424242"[..],
            b"4242-4242-4242-4242",
            b"key_4242.4242.4242.4242",
            b"GB82WEST12345698765432",
        ] {
            assert_eq!(IdempotencyKey::parse(card), Err(MalformedKey::CardNumber), "{card:?}");
        }
    }

    #[test]
    fn the_fingerprint_is_of_the_body_as_read_never_the_card() {
        let masked = crate::mask::masked("refund my card 4242 4242 4242 4242");
        let fingerprint = body_fingerprint("u1", &masked, None);
        assert_eq!(
            fingerprint,
            body_fingerprint("u1", "refund my card [card ending 4242]", None)
        );
        assert_ne!(
            fingerprint,
            body_fingerprint("u1", "refund my card [card ending 4242]", Some("c-1"))
        );
        assert_ne!(
            fingerprint,
            body_fingerprint("u2", "refund my card [card ending 4242]", None)
        );
    }

    #[test]
    fn verdicts() {
        let hash = body_sha256(b"body");
        let answer = StoredResponse {
            status: 200,
            body: "{}".into(),
        };
        assert_eq!(
            judge(&stored("body", 0, Some(answer.clone())), &hash, 5),
            Verdict::Replay(answer)
        );
        assert_eq!(judge(&stored("other", 10_000, None), &hash, 5), Verdict::DifferentBody);
        assert_eq!(
            judge(&stored("body", 10_000, None), &hash, 0),
            Verdict::InProgress { retry_after_secs: 10 }
        );
        assert_eq!(
            judge(&stored("body", 10_001, None), &hash, 10_000),
            Verdict::InProgress { retry_after_secs: 1 },
            "never less than a second"
        );
        assert_eq!(
            judge(&stored("body", 10_000, None), &hash, 10_000),
            Verdict::TakeOver {
                previous_writer: "w1".into()
            }
        );
    }
}

#[cfg(test)]
mod takeover {
    use std::sync::Mutex;

    use super::*;
    use crate::refund::{RefundScope, WriterMark};

    /// A request ledger whose key was left by a dead invocation, and whose
    /// takeover another retry wins first, with a lease ending at `winner_lease_ms`.
    struct LostRace {
        winner_lease_ms: u64,
        calls: Mutex<Vec<&'static str>>,
    }

    impl RequestLedger for LostRace {
        async fn claim_request(&self, lease: &RequestLease, _: u64) -> Result<KeyClaim, LedgerError> {
            self.calls.lock().unwrap().push("claim");
            Ok(KeyClaim::Existing(StoredRequest {
                body_sha256: lease.body_sha256.clone(),
                writer: "dead".into(),
                lease_until_ms: 1,
                expires_at_s: u64::MAX,
                conversation_id: None,
                released: false,
                response: None,
            }))
        }
        async fn take_over_request(&self, _: &RequestLease, previous: &str, _: u64) -> Result<TakeOver, LedgerError> {
            assert_eq!(previous, "dead");
            self.calls.lock().unwrap().push("take_over");
            Ok(TakeOver::Lost {
                lease_until_ms: self.winner_lease_ms,
            })
        }
        async fn complete_request(&self, _: &RequestLease, _: &StoredResponse, _: u64) -> Result<(), LedgerError> {
            unreachable!("admission never completes a request")
        }
        async fn release_request(&self, _: &RequestLease) -> Result<(), LedgerError> {
            unreachable!("admission never releases a request")
        }
        async fn refund_exists(&self, _: &RefundScope) -> Result<bool, LedgerError> {
            unreachable!("admission never reads refund records")
        }
    }

    #[tokio::test]
    async fn a_lost_takeover_race_waits_for_the_winners_lease() {
        let now = 1_000_000;
        let ledger = LostRace {
            winner_lease_ms: now + 6_500,
            calls: Mutex::default(),
        };
        let lease = RequestLease {
            scope: RefundScope::for_idempotency_key("u-1", "k-1"),
            writer: WriterMark::fixed("req-2/w"),
            body_sha256: body_sha256(b"body"),
            lease_until_ms: now + 60_000,
            expires_at_s: u64::MAX,
            conversation_id: None,
        };

        let admission = admit(&ledger, &lease, now).await;

        assert_eq!(admission, Err(Refusal::InProgress { retry_after_secs: 7 }));
        assert_eq!(*ledger.calls.lock().unwrap(), vec!["claim", "take_over"]);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn a_key_is_accepted_exactly_when_it_is_1_to_255_visible_ascii(
            key in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let expected = (1..=255).contains(&key.len()) && key.iter().all(|b| (0x21..=0x7e).contains(b));
            prop_assert_eq!(IdempotencyKey::parse(&key).is_ok(), expected);
        }

        #[test]
        fn visible_ascii_keys_round_trip(key in "[!-~]{1,255}") {
            prop_assert_eq!(IdempotencyKey::parse(key.as_bytes()).map(|k| k.as_str().to_owned()), Ok(key));
        }
    }
}
