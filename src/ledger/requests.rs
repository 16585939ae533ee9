//! The request records' port: the `Idempotency-Key` rules (contract 6.3).

use std::future::Future;

use crate::refund::{RefundScope, WriterMark};

use super::LedgerError;

/// One request's hold on its `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLease {
    /// The customer and key (a scope, since the key's scope is the request's).
    pub scope: RefundScope,
    /// The holder's mark, which names its invocation.
    pub writer: WriterMark,
    /// Hex SHA-256 of the request body.
    pub body_sha256: String,
    /// Epoch ms: the invocation's deadline.
    pub lease_until_ms: u64,
    /// Epoch seconds: DynamoDB's TTL attribute.
    pub expires_at_s: u64,
    /// The conversation the request runs in: a retry that takes the key
    /// over continues it, even one the first request had just issued.
    pub conversation_id: Option<String>,
}

/// Where a request record stands: held by a live request, or answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestState {
    InProgress,
    Completed,
    /// Given back after a failure that moved no money: the next request with
    /// the key runs afresh, in the conversation this one began, and the
    /// record still names its body.
    Released,
}

impl RequestState {
    /// As the ledger stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestState::InProgress => "in_progress",
            RequestState::Completed => "completed",
            RequestState::Released => "released",
        }
    }
}

/// A request record as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRequest {
    pub body_sha256: String,
    pub writer: String,
    pub lease_until_ms: u64,
    pub expires_at_s: u64,
    /// Set once the first request completed.
    pub response: Option<StoredResponse>,
    /// Given back: the next request with the key runs at once.
    pub released: bool,
    pub conversation_id: Option<String>,
}

/// An answer kept for replays: status and body exactly as first sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The record is written: this request holds the key.
    Claimed,
    /// A live record for the key exists (expired ones count as absent).
    Existing(StoredRequest),
}

/// What taking over a dead invocation's key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeOver {
    /// This lease now holds the key.
    Won,
    /// Another retry took it over first; its lease ends at `lease_until_ms`.
    Lost { lease_until_ms: u64 },
}

/// The request records, as the `Idempotency-Key` rules use them (6.3).
/// Every operation is bounded by `LEDGER_TIMEOUT_SECS` in the adapter.
pub trait RequestLedger: Send + Sync {
    /// Writes the key's request record, unless a live one exists.
    fn claim_request(
        &self,
        lease: &RequestLease,
        now_ms: u64,
    ) -> impl Future<Output = Result<KeyClaim, LedgerError>> + Send;

    /// Takes over a record whose lease ended without an answer, or that was
    /// released, if it is still `previous_writer`'s.
    fn take_over_request(
        &self,
        lease: &RequestLease,
        previous_writer: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<TakeOver, LedgerError>> + Send;

    /// Stores the answer for replays.
    fn complete_request(
        &self,
        lease: &RequestLease,
        response: &StoredResponse,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Gives the key back (no refund record, no answer worth replaying): the
    /// record stays, released, so a retry continues its conversation.
    fn release_request(&self, lease: &RequestLease) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Whether the scope has a refund record (a strongly consistent read):
    /// what decides between storing an answer and releasing the key.
    fn refund_exists(&self, scope: &RefundScope) -> impl Future<Output = Result<bool, LedgerError>> + Send;
}
