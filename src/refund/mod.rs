//! The refund operation as the agent turn sees it: who it is for (the refund
//! scope), what is asked, and every way it can end.
//!
//! The payments service has no idempotency key, and only a rejection proves
//! that no money moved; a timeout, a broken connection or a garbled answer do
//! not. So every attempt, whatever its outcome, spends the turn's latch (see
//! [`crate::turn`]), and the ledger records the attempt before money can move
//! (see [`crate::record_then_pay`]).

pub mod message;
pub mod money;
pub mod payments;
pub mod policy;
pub mod tool;

use std::fmt;
use std::future::Future;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::refund::message::CustomerMessage;
use crate::refund::money::AmountCents;
use crate::refund::policy::{OrderFacts, OrderRefusal};

/// Whose refund, and under which name it may happen at most once: the
/// customer plus the request's `Idempotency-Key` when it has one, otherwise
/// the Lambda request id (contract 6.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefundScope {
    user_id: String,
    key: ScopeKey,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ScopeKey {
    Idempotency(String),
    Request(String),
    /// A person paying an approved refund whose first attempt never reached
    /// payments (contract 9): at most one reissue per original record.
    Reissue(String),
}

impl RefundScope {
    pub fn for_request(user_id: impl Into<String>, request_id: impl Into<String>) -> Self {
        RefundScope {
            user_id: user_id.into(),
            key: ScopeKey::Request(request_id.into()),
        }
    }

    pub fn for_idempotency_key(user_id: impl Into<String>, key: impl Into<String>) -> Self {
        RefundScope {
            user_id: user_id.into(),
            key: ScopeKey::Idempotency(key.into()),
        }
    }

    pub fn for_reissue(user_id: impl Into<String>, original_record_id: impl Into<String>) -> Self {
        RefundScope {
            user_id: user_id.into(),
            key: ScopeKey::Reissue(original_record_id.into()),
        }
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    pub fn idempotency_key(&self) -> Option<&str> {
        match &self.key {
            ScopeKey::Idempotency(key) => Some(key),
            ScopeKey::Request(_) | ScopeKey::Reissue(_) => None,
        }
    }

    /// The id of the scope's refund record (also its approval id): `rr-` and
    /// the first 128 bits of the SHA-256 of [`RefundScope::id`], in hex:
    /// short enough for a person to type, and reveals neither customer nor key.
    pub fn record_id(&self) -> String {
        let digest = Sha256::digest(self.id().as_bytes());
        let hex: String = digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
        format!("rr-{hex}")
    }

    /// The scope's name in the ledger. The user id is length-prefixed, so no
    /// choice of user id and key can make two customers' scopes collide.
    pub fn id(&self) -> String {
        let (tag, key) = match &self.key {
            ScopeKey::Idempotency(key) => ('k', key),
            ScopeKey::Request(id) => ('r', id),
            ScopeKey::Reissue(original) => ('x', original),
        };
        format!("u{}:{}|{tag}:{key}", self.user_id.len(), self.user_id)
    }
}

/// A writer's mark on what it writes to the ledger: a fencing token. It
/// names the invocation it belongs to (a Lambda request id, or
/// `staff:<name>`) and adds a random part, so no two writers ever share one,
/// even an invocation delivered twice with the same request id. A write that
/// finds an item carrying its own mark knows the item is its own (a retried
/// write that had landed).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct WriterMark(String);

impl WriterMark {
    /// A new mark for `invocation`.
    pub fn new(invocation: &str) -> WriterMark {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // std's per-process random hasher keys, varied by a counter and the clock.
        let mut hasher = std::hash::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u64(crate::clock::now_ms());
        WriterMark(format!("{invocation}/{:016x}", hasher.finish()))
    }

    /// A mark with a known value (`<invocation>/<anything>`), for tests that
    /// play two writers or the same one twice.
    #[cfg(any(test, feature = "test-support"))]
    pub fn fixed(mark: impl Into<String>) -> WriterMark {
        WriterMark(mark.into())
    }

    /// The mark as written to the ledger.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The invocation it belongs to.
    pub fn invocation(&self) -> &str {
        self.0.rsplit_once('/').map_or(&self.0, |(invocation, _)| invocation)
    }
}

impl fmt::Debug for WriterMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WriterMark({})", self.0)
    }
}

/// Who attempts refunds, under which scope: one invocation's turn, or one
/// approver's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub scope: RefundScope,
    pub writer: WriterMark,
    /// The conversation of the turn (contract 11), which its refund record names.
    pub conversation: Option<String>,
    /// Whose day rule 3 counts the refund in when it is not the scope's
    /// user's: a guest's e-mail's ([`crate::guest::GuestEmail::day_owner`]).
    pub day_owner: Option<String>,
}

impl Attempt {
    /// Whose day rule 3 counts the attempt in.
    pub fn day_owner(&self) -> &str {
        self.day_owner.as_deref().unwrap_or(self.scope.user_id())
    }

    /// The Lambda request id (or the staff member) making the attempt.
    pub fn request_id(&self) -> &str {
        self.writer.invocation()
    }
}

/// What the turn asks for. The payments body is built from it by the payments
/// adapter: `user_id` is always the scope's (the verified customer), never
/// the model's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    pub attempt: Attempt,
    pub order_id: String,
    pub amount: AmountCents,
    /// What the customer wrote: kept in the ledger only when a person must
    /// approve the refund (their context), never logged.
    pub message: CustomerMessage,
    /// The order as code read it for this refund (contract 16), never as
    /// the model described it.
    pub order: OrderFacts,
    /// What the router said of the turn (contract 21).
    pub routed: Routed,
}

/// The router's labels of the turn a refund was proposed in, as its record
/// keeps them, and whether they leave the refund to a person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routed {
    /// `order_status,refund;low;0.92` or `unknown`; none where no router ran.
    pub labels: Option<String>,
    /// The router was unsure or failed: the refund waits for a person.
    pub unsure: bool,
    /// The turn's labels do not name `refund`, or refunds are not served
    /// (`AGENT_INTENTS`): the refund waits for a person.
    pub refund_not_routed: bool,
}

impl RefundRequest {
    pub fn scope(&self) -> &RefundScope {
        &self.attempt.scope
    }

    pub fn writer(&self) -> &WriterMark {
        &self.attempt.writer
    }

    pub fn request_id(&self) -> &str {
        self.attempt.request_id()
    }
}

/// A refund receipt: what the payments service answers with on 2xx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub refund_id: String,
    pub status: String,
    pub amount_cents: AmountCents,
}

/// Every way a payments call can end without a receipt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefundError {
    /// The service refused with a 4xx and a `detail`: no money moved.
    #[error("payments rejected the refund (HTTP {status}): {detail}")]
    Rejected { status: u16, detail: String },
    /// Any status that is neither 2xx nor 4xx (1xx, 3xx, 5xx), with a
    /// `detail`: the service failed or answered oddly, possibly after moving money.
    #[error("payments failed (HTTP {status}): {detail}")]
    Failed { status: u16, detail: String },
    /// No answer within the payments timeout: the refund may have gone through.
    #[error("payments did not answer in time")]
    Timeout,
    /// The connection failed or broke: the refund may have gone through.
    #[error("payments could not be reached or the connection broke ({0})")]
    Transport(String),
    /// An answer that is not what the contract promises (not JSON, or a 2xx
    /// that is not a receipt): the refund may have gone through.
    #[error("payments answered HTTP {status} with something that is not {expected}")]
    InvalidResponse { status: u16, expected: &'static str },
}

impl RefundError {
    /// The payments service's own words, when it gave any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            RefundError::Rejected { detail, .. } | RefundError::Failed { detail, .. } => Some(detail),
            _ => None,
        }
    }

    /// A short class name for logs, metrics and the ledger.
    pub fn class(&self) -> &'static str {
        match self {
            RefundError::Rejected { .. } => "rejected",
            RefundError::Failed { .. } => "server_error",
            RefundError::Timeout => "timeout",
            RefundError::Transport(_) => "transport",
            RefundError::InvalidResponse { .. } => "invalid_response",
        }
    }
}

/// Where a refund record stands (contract 6.2, 8 and 9). `Executing` is
/// what every reader treats as unknown: the attempt was recorded and its
/// outcome never was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RefundState {
    /// The first state of every record (the default only so that a record
    /// can be built field by field).
    #[default]
    Executing,
    Executed,
    Rejected,
    Unknown,
    AwaitingApproval,
    RejectedByStaff,
}

impl RefundState {
    pub const ALL: [RefundState; 6] = [
        RefundState::Executing,
        RefundState::Executed,
        RefundState::Rejected,
        RefundState::Unknown,
        RefundState::AwaitingApproval,
        RefundState::RejectedByStaff,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RefundState::Executing => "executing",
            RefundState::Executed => "executed",
            RefundState::Rejected => "rejected",
            RefundState::Unknown => "unknown",
            RefundState::AwaitingApproval => "awaiting_approval",
            RefundState::RejectedByStaff => "rejected_by_staff",
        }
    }

    pub fn parse(text: &str) -> Option<RefundState> {
        RefundState::ALL.into_iter().find(|state| state.as_str() == text)
    }
}

impl fmt::Display for RefundState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the support team recorded for a refund whose outcome was unknown,
/// once payments confirmed it. Kept beside the original state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Executed { refund_id: String },
    NotExecuted,
}

impl Resolution {
    /// As the ledger stores it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Resolution::Executed { .. } => "executed",
            Resolution::NotExecuted => "not_executed",
        }
    }
}

/// What an existing refund record says, for a request that finds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorRefund {
    pub state: RefundState,
    pub order_id: String,
    pub amount: AmountCents,
    /// Set once payments confirmed the refund.
    pub receipt: Option<Receipt>,
    pub resolution: Option<Resolution>,
}

impl PriorRefund {
    /// Whether the record proves that no money moved.
    pub fn moved_no_money(&self) -> bool {
        matches!(self.state, RefundState::Rejected | RefundState::RejectedByStaff)
            || self.resolution == Some(Resolution::NotExecuted)
    }
}

/// What became of the one refund a request may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundOutcome {
    /// Payments accepted it and answered with a receipt.
    Executed(Receipt),
    /// Payments refused it (4xx): no money moved.
    Rejected { status: u16, detail: String },
    /// No proof either way: money may have moved.
    Unknown(RefundError),
    /// The scope already had a refund record: payments was not called.
    AlreadyRecorded(PriorRefund),
    /// Sent to a person (contract 8): payments was not called.
    PendingApproval { approval_id: String, reasons: Vec<String> },
    /// The order refuses it (contract 16: not this customer's, or more than
    /// remains refundable): no record, payments not called, the latch open.
    OrderRefused(OrderRefusal),
    /// The ledger could not record the attempt: payments was not called.
    Unrecorded,
}

/// What one payments call proved (contract 3): a receipt, a rejection
/// (a 4xx: no money moved), or nothing either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentOutcome {
    Executed(Receipt),
    Rejected { status: u16, detail: String },
    Unknown(RefundError),
}

impl From<Result<Receipt, RefundError>> for PaymentOutcome {
    fn from(result: Result<Receipt, RefundError>) -> Self {
        match result {
            Ok(receipt) => PaymentOutcome::Executed(receipt),
            Err(RefundError::Rejected { status, detail }) => PaymentOutcome::Rejected { status, detail },
            Err(error) => PaymentOutcome::Unknown(error),
        }
    }
}

impl PaymentOutcome {
    /// The state the ledger records for it.
    pub fn state(&self) -> RefundState {
        match self {
            PaymentOutcome::Executed(_) => RefundState::Executed,
            PaymentOutcome::Rejected { .. } => RefundState::Rejected,
            PaymentOutcome::Unknown(_) => RefundState::Unknown,
        }
    }

    pub fn name(&self) -> &'static str {
        self.state().as_str()
    }
}

/// A refund's outcome is a payment's when payments was called.
impl From<PaymentOutcome> for RefundOutcome {
    fn from(outcome: PaymentOutcome) -> Self {
        match outcome {
            PaymentOutcome::Executed(receipt) => RefundOutcome::Executed(receipt),
            PaymentOutcome::Rejected { status, detail } => RefundOutcome::Rejected { status, detail },
            PaymentOutcome::Unknown(error) => RefundOutcome::Unknown(error),
        }
    }
}

impl RefundOutcome {
    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            RefundOutcome::Executed(_) => "executed",
            RefundOutcome::Rejected { .. } => "rejected",
            RefundOutcome::Unknown(_) => "unknown",
            RefundOutcome::AlreadyRecorded(_) => "already_recorded",
            RefundOutcome::PendingApproval { .. } => "pending_approval",
            RefundOutcome::OrderRefused(_) => "order_refused",
            RefundOutcome::Unrecorded => "unrecorded",
        }
    }

    /// Whether a refund record exists for the scope after this outcome.
    pub fn is_recorded(&self) -> bool {
        !matches!(self, RefundOutcome::Unrecorded | RefundOutcome::OrderRefused(_))
    }
}

/// Makes (or declines to make) the refund the turn asks for: in the function,
/// "decide, record, then pay" ([`crate::record_then_pay`]).
pub trait RefundGateway: Sync {
    fn refund(&self, request: &RefundRequest) -> impl Future<Output = RefundOutcome> + Send;

    /// Whether the order has a refund record in rule 2's window that may
    /// have moved money (contract 8's rule 7: a return of it goes to a
    /// person); `None` when the books could not say.
    fn order_refunded_recently(&self, order_id: &str) -> impl Future<Output = Option<bool>> + Send;
}

/// The payments service (contract 3). One call is one payments request:
/// there is no idempotency key, and an implementation must never retry.
pub trait Payments {
    fn pay(&self, request: &RefundRequest) -> impl Future<Output = PaymentOutcome> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_ids_cannot_collide_across_customers() {
        let a = RefundScope::for_idempotency_key("u|k:x", "y");
        let b = RefundScope::for_idempotency_key("u", "x|k:y");
        assert_ne!(a.id(), b.id());
        assert_ne!(
            RefundScope::for_request("u-1", "abc").id(),
            RefundScope::for_idempotency_key("u-1", "abc").id()
        );
        assert_eq!(RefundScope::for_idempotency_key("u-1001", "k1").id(), "u6:u-1001|k:k1");
        assert_ne!(
            RefundScope::for_reissue("u-1", "rr-1").record_id(),
            RefundScope::for_request("u-1", "rr-1").record_id()
        );
    }

    #[test]
    fn a_writer_mark_names_its_invocation_and_is_never_shared() {
        let (a, b) = (WriterMark::new("req-1"), WriterMark::new("req-1"));
        assert_ne!(a, b, "the same invocation delivered twice");
        assert_eq!(a.invocation(), "req-1");
        assert_eq!(WriterMark::new("staff:alice").invocation(), "staff:alice");
    }

    #[test]
    fn states_round_trip() {
        for state in RefundState::ALL {
            assert_eq!(RefundState::parse(state.as_str()), Some(state));
        }
    }
}
