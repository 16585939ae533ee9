//! The refund ledger (contract 6): the system of record for refund
//! decisions, written before any money moves.
//!
//! Two kinds of record live in it:
//! - **refund records**, one per [`RefundScope`], written on the condition
//!   that none exists *before* payments is called, then moved to the
//!   outcome. Never deleted, never overwritten, no expiry: a record already
//!   there is the durable form of the turn's refund latch;
//! - **request records**, one per customer and `Idempotency-Key`: a lease
//!   while the first request runs, then its answer for replays, until they
//!   expire.
//!
//! Every write is safe to retry, in one of two ways. A conditional write
//! that had already landed fails its condition, and the item it finds
//! carries the writer's own mark ([`crate::desk::Invocation::writer`]),
//! which is how it knows it was its own. A counter's `ADD` (a budget's turn
//! given back, a turn's tokens settled) has no condition that could tell,
//! so it is sent as a transaction, whose idempotency token makes DynamoDB
//! answer a retry of one that had landed without applying it again. The
//! DynamoDB adapter is
//! [`dynamo::DynamoLedger`].

pub mod dynamo;
pub mod memory;

use std::future::Future;

use crate::budget::{BudgetLimits, Reservation, Spent};
use crate::conversation::shown::Shown;
use crate::conversation::{ConversationId, Exchange};
use crate::handoff::Handoff;
use crate::refund::money::AmountCents;
use crate::refund::policy::{History, Limits, OrderFacts, OrderSnapshot, Reason};
use crate::refund::{
    Attempt, PaymentOutcome, PriorRefund, RefundRequest, RefundScope, RefundState, Resolution, WriterMark,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("the ledger did not answer within LEDGER_TIMEOUT_SECS")]
    Timeout,
    #[error("the ledger could not be reached: {0}")]
    Unavailable(String),
    /// A conditional write found the record in a state it did not expect
    /// (another writer got there first).
    #[error("the ledger record changed under us: {0}")]
    Conflict(String),
    /// DynamoDB cancelled a transaction because another one held one of its
    /// items at that moment (`TransactionConflict`): nothing was written.
    #[error("the ledger was busy with a concurrent write to the same item")]
    Contended,
    #[error("the ledger holds a record that cannot be read: {0}")]
    Malformed(String),
}

/// What writing a refund record found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalWrite {
    /// The record is written.
    Recorded,
    /// The scope already had a record: payments must not be called.
    Existing(PriorRefund),
}

/// What writing an automatic refund's record found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutomaticWrite {
    /// The record is written, state `executing`, and counted against rules 2
    /// and 3: payments may be called.
    Recorded,
    /// The scope already had a record: payments must not be called.
    Existing(PriorRefund),
    /// Rule 2 or 3 refused it (nothing was written): what the ledger knew.
    Refused(History),
}

/// Which rules a refund that may have moved money counts for, and so what a
/// release takes it out of: every such refund counts for rule 2 (its
/// order); an automatic one counts for rule 3 too, on the UTC day it was
/// recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountsFor {
    Rules2And3 { day: String },
    Rule2,
}

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

/// One turn's hold on its conversation (contract 11): a lease that ends at
/// the invocation's deadline, so a dead invocation stops holding it by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationLease {
    pub id: ConversationId,
    /// The customer it belongs to: a conversation of another is absent.
    pub customer: String,
    pub writer: WriterMark,
    /// Epoch ms: the invocation's deadline.
    pub lease_until_ms: u64,
}

/// A conversation this turn holds, as it was when the lease was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldConversation {
    /// Exchanges so far: the next one's sequence number.
    pub exchanges: u64,
    /// Epoch seconds: when it ends at the latest, `CONVERSATION_MAX_AGE_HOURS`
    /// after its first exchange (0: not stored yet, the append sets it).
    pub ends_by_s: u64,
    /// A person has it (contract 12): every message gets the fixed reply.
    pub handed_off: bool,
    /// Its last exchange ended in 502 or 504.
    pub last_failed: bool,
    /// Its header is stored. Not so for a conversation this request creates:
    /// nobody else knows its id, so it needs no lease, and its first append
    /// creates it.
    pub stored: bool,
}

impl HeldConversation {
    /// A conversation this request creates (see [`HeldConversation::stored`]).
    pub fn created_here() -> HeldConversation {
        HeldConversation {
            exchanges: 0,
            ends_by_s: 0,
            handed_off: false,
            last_failed: false,
            stored: false,
        }
    }
}

/// What taking a conversation's lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begun {
    Held(HeldConversation),
    /// Unknown, expired, or another customer's: one answer for all three.
    NotFound,
    /// Its previous turn still runs; that turn's lease ends at `lease_until_ms`.
    Busy {
        lease_until_ms: u64,
    },
}

/// An exchange to append, with what the conversation keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExchange {
    pub exchange: Exchange,
    /// The answer's status: 200, 502 or 504.
    pub status: u16,
    /// The turn's refund scope.
    pub scope: RefundScope,
    /// At most once per refund scope: the scope is marked, and an exchange
    /// whose scope is marked already is not added. Unmarked for a failed
    /// turn whose key is given back, so that its retry runs afresh and
    /// appends its own exchange.
    pub marked: bool,
    /// The turn recorded a refund for its scope: the conversation lists it.
    pub refund_recorded: bool,
    /// That refund waits for a person: the conversation says so until a
    /// decision's note (contract 18).
    pub awaiting_approval: bool,
    /// The conversation goes to a person with this exchange (at most once).
    pub handoff: Option<Handoff>,
    /// The turn's reservation settled to its tokens, in the same step
    /// (`None`: no turn was taken from the budget).
    pub tokens: Option<TokenSettlement>,
    /// What becomes of the request's key, in the same step.
    pub key: Option<KeySettlement>,
}

/// A request's key after its turn: its answer stored for replays, or the key
/// given back (contract 6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySettlement {
    Store(RequestLease, StoredResponse),
    Release(RequestLease),
}

/// What appending an exchange found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The exchange, the tokens and the key's settlement: one transaction.
    Appended,
    /// The exchange and the tokens; the key is another request's now (its
    /// lease had ended), so it was left alone.
    KeyNotOurs,
    /// The refund scope's exchange is already there (a takeover of a dead
    /// invocation's key that had appended it): nothing was written, neither
    /// the tokens nor the key's settlement.
    AlreadyThere,
}

/// The conversations, as the HTTP edge keeps them (contract 11). Every
/// operation is bounded by `LEDGER_TIMEOUT_SECS` in the adapter; every
/// write is conditional on the lease, never a read-then-write.
pub trait ConversationStore: Send + Sync {
    /// Takes the conversation's lease for `lease.writer`. `may_create`: the
    /// id is the function's own, just issued (or recorded with the request's
    /// key), so an absent conversation is created; otherwise it is 404.
    fn begin(
        &self,
        lease: &ConversationLease,
        may_create: bool,
        now_ms: u64,
    ) -> impl Future<Output = Result<Begun, LedgerError>> + Send;

    /// The `count` most recent exchanges, newest first (a strongly consistent
    /// read: the previous turn's exchange is in it), one per refund scope
    /// and none of `running` (the scope of the turn about to run): a try
    /// whose key was released and then re-sent stays in the conversation
    /// for the support team, but the model sees the customer's message once.
    fn recent(
        &self,
        id: &ConversationId,
        count: usize,
        running: &RefundScope,
    ) -> impl Future<Output = Result<Vec<Exchange>, LedgerError>> + Send;

    /// Appends the turn's exchange and gives the lease back (creating the
    /// conversation when it is not stored), with the exchange's tokens and
    /// key settlement: one transaction. On an error, nothing was written.
    fn append(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> impl Future<Output = Result<Appended, LedgerError>> + Send;

    /// Gives the lease back without an exchange (no turn ran).
    fn release(&self, lease: &ConversationLease) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// What `customer` reads of the conversation (contract 18): the
    /// messages after `after`, oldest first, at most
    /// [`crate::conversation::shown::MAX_SHOWN`]. `None` when it is
    /// unknown, expired or another customer's: one answer for all three.
    /// One read, which takes no lease and writes nothing.
    fn shown(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        now_ms: u64,
    ) -> impl Future<Output = Result<Option<Shown>, LedgerError>> + Send;
}

/// What taking a turn from a customer's budget found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenTurn {
    Taken,
    /// Nothing was counted: the hour's turns or the day's tokens are spent.
    Refused(Spent),
}

/// What claiming a key together with a turn found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimedWithTurn {
    /// The key is held and the turn counted.
    Both,
    /// The key has a live record: nothing was written (the key's verdict
    /// comes first: a replay spends nothing).
    KeyExists(StoredRequest),
    /// Nothing was written: the hour's turns or the day's tokens are spent.
    Refused(Spent),
}

/// The customers' budgets (contract 13): counters per window, with TTL.
/// Every write here counts once however often it is retried: the take is
/// conditional and carries the request's key or a transaction token, and
/// the give-back and the settlement are transactions, whose token makes a
/// retry of one that had landed apply nothing.
pub trait BudgetStore: Send + Sync {
    /// Counts one turn of the hour and reserves `limits.turn_reservation`
    /// of the day's tokens, on the condition that the hour's turns and the
    /// day's tokens are below their limits: one atomic step.
    fn take_turn(
        &self,
        customer: &str,
        limits: &BudgetLimits,
        now_ms: u64,
    ) -> impl Future<Output = Result<TakenTurn, LedgerError>> + Send;

    /// The same step, which also claims the request's key (as
    /// [`RequestLedger::claim_request`] would): both or neither.
    fn claim_with_turn(
        &self,
        lease: &RequestLease,
        limits: &BudgetLimits,
        now_ms: u64,
    ) -> impl Future<Output = Result<ClaimedWithTurn, LedgerError>> + Send;

    /// Gives back a turn that did not run (its conversation was refused or
    /// is a person's), with its reservation: never below zero.
    fn give_back_turn(
        &self,
        customer: &str,
        reservation: Reservation,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// After a key's claim with its turn whose outcome is unknown (it timed
    /// out, or its answer was lost): if it landed, gives the key back
    /// (released) and the turn with its reservation, in one step; if it did
    /// not, writes nothing.
    fn abandon_claim(
        &self,
        lease: &RequestLease,
        reservation: Reservation,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Settles a turn's reservation to the tokens it used (when no append
    /// carried it).
    fn settle_tokens(
        &self,
        customer: &str,
        settlement: &TokenSettlement,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// A turn's tokens at its end: what it reserved, and what the provider
/// says it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSettlement {
    pub reservation: Reservation,
    pub used: u64,
}

/// The refund records, as "decide, record, then pay" uses them (6.2, 8).
/// Every operation is bounded by `LEDGER_TIMEOUT_SECS` in the adapter.
pub trait RefundLedger: Send + Sync {
    /// Writes the scope's refund record, state `executing`, unless one exists
    /// or policy rules 2 and 3 refuse it; the write and the rules are one
    /// atomic step, so concurrent requests cannot both pass.
    fn record_automatic(
        &self,
        request: &RefundRequest,
        limits: &Limits,
        now_ms: u64,
    ) -> impl Future<Output = Result<AutomaticWrite, LedgerError>> + Send;

    /// Writes the scope's refund record, state `awaiting_approval`, with the
    /// reasons and the customer's message, unless one exists. It counts for
    /// rule 2 from `now_ms`, for at least `limits`' window.
    fn record_for_approval(
        &self,
        request: &RefundRequest,
        reasons: &[Reason],
        limits: &Limits,
        now_ms: u64,
    ) -> impl Future<Output = Result<ApprovalWrite, LedgerError>> + Send;

    /// What rules 2 and 3 would see now (a plain read: for the reasons of a
    /// refund that goes to a person anyway).
    fn history(
        &self,
        request: &RefundRequest,
        limits: &Limits,
        now_ms: u64,
    ) -> impl Future<Output = Result<History, LedgerError>> + Send;

    /// Moves this writer's `executing` record to the payments outcome, unless
    /// a person resolved it meanwhile. A rejection (no money moved) also
    /// takes the refund out of rules 2 and 3.
    fn record_outcome(
        &self,
        request: &RefundRequest,
        outcome: &PaymentOutcome,
        counted: &CountsFor,
        now_ms: u64,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// What a staff decision found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaffDecision {
    /// Decided: the record as it was before the decision (for a reissue, the
    /// new record).
    Done(RefundRecord),
    /// Refused: the record is not in a state this decision applies to.
    Refused(RefundRecord),
    NotFound,
    /// The order's guard moved since [`OrderInFlight::version`] was read (a
    /// refund of the same order was recorded or claimed): nothing was
    /// written; check the order again.
    OrderMoved,
}

/// What the ledger holds in flight against one order besides the record
/// being decided (contract 16): refunds `executing` or `unknown`, which the
/// order system cannot show yet, and the version of the order's guard when
/// they were read, which a claim is conditioned on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OrderInFlight {
    pub amount: AmountCents,
    pub version: u64,
}

/// Where an approval is between its claim and payments (contract 9): the
/// sweep watches a step on its own clock, never the approver's.
pub const APPROVAL_CLAIMED: &str = "claimed";
pub const APPROVAL_PAYING: &str = "paying";

/// What payments confirmed for a refund whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed {
    Executed { refund_id: String },
    NotExecuted,
}

/// The support team's decisions that lead to a payments call, as
/// [`crate::record_then_pay::approvals`] uses them (contract 9). Each is one
/// conditional write, so of two people deciding at once exactly one wins.
pub trait StaffLedger: RefundLedger {
    /// Moves `awaiting_approval` to `executing` (step [`APPROVAL_CLAIMED`]),
    /// `writer` taking the record to pay it; the order's guard counts it
    /// again from `now_ms`, on the condition that the guard is still at
    /// `seen.version` ([`StaffDecision::OrderMoved`] otherwise).
    fn claim_approval(
        &self,
        claim: &Claim<'_>,
        seen: OrderInFlight,
    ) -> impl Future<Output = Result<StaffDecision, LedgerError>> + Send;

    /// Writes the reissue of an approved record resolved as not executed,
    /// `executing` and held by `writer`, linked both ways (at most once);
    /// conditioned on the order's guard as [`StaffLedger::claim_approval`].
    fn claim_reissue(
        &self,
        claim: &Claim<'_>,
        seen: OrderInFlight,
    ) -> impl Future<Output = Result<StaffDecision, LedgerError>> + Send;

    /// The refunds in flight on `order_id` other than `except`, and the
    /// version of its guard, read first.
    fn in_flight(
        &self,
        order_id: &str,
        except: &str,
    ) -> impl Future<Output = Result<OrderInFlight, LedgerError>> + Send;

    /// The last step before payments: [`APPROVAL_CLAIMED`] to
    /// [`APPROVAL_PAYING`] while the record is still `executing` and
    /// `writer`'s. `false` when it is not (the sweep called it unknown):
    /// then payments must not be called.
    fn start_paying(
        &self,
        record_id: &str,
        writer: &WriterMark,
    ) -> impl Future<Output = Result<bool, LedgerError>> + Send;

    /// The record and the mark of whoever last took it to pay.
    fn record_and_writer(
        &self,
        record_id: &str,
    ) -> impl Future<Output = Result<Option<(RefundRecord, String)>, LedgerError>> + Send;
}

/// Who decides a record and when: an approval or a reissue's claim.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub record_id: &'a str,
    pub by: &'a str,
    pub writer: &'a WriterMark,
    pub now_ms: u64,
    pub limits: &'a Limits,
}

/// How the policy decided a refund record (contract 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecidedBy {
    /// No rule fired: paid without a person.
    #[default]
    Rules,
    /// A rule fired: a person approves or rejects it.
    Approval,
}

impl DecidedBy {
    /// As the ledger stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Rules => "automatic",
            DecidedBy::Approval => "approval",
        }
    }

    pub fn parse(text: &str) -> Option<DecidedBy> {
        [DecidedBy::Rules, DecidedBy::Approval]
            .into_iter()
            .find(|d| d.as_str() == text)
    }
}

/// A refund record as the support team sees it: every field, for `show`,
/// `pending`, `unknown` and the audit export.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RefundRecord {
    pub record_id: String,
    pub state: RefundState,
    pub user_id: String,
    pub order_id: String,
    pub amount: AmountCents,
    /// The UTC day it was recorded on (rule 3's day).
    pub day: String,
    pub created_at: String,
    pub created_at_ms: u64,
    pub request_id: String,
    pub idempotency_key: Option<String>,
    pub decision: DecidedBy,
    pub reasons: Vec<String>,
    pub customer_message: Option<String>,
    pub executing_since_ms: Option<u64>,
    pub updated_at: Option<String>,
    pub refund_id: Option<String>,
    pub receipt_status: Option<String>,
    pub payments_status: Option<u64>,
    pub payments_detail: Option<String>,
    pub failure: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub rejection_reason: Option<String>,
    /// What a person confirmed with payments, for an outcome that was unknown.
    pub resolution: Option<Resolution>,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<String>,
    /// On a reissue: the approved record that never reached payments.
    pub reissue_of: Option<String>,
    /// On that record: the reissue that pays it instead.
    pub reissued_as: Option<String>,
    /// The conversation of the turn that wrote it.
    pub conversation_id: Option<String>,
    /// Who removed the customer's message (the right to be forgotten), and when.
    pub message_forgotten_by: Option<String>,
    pub message_forgotten_at: Option<String>,
    /// The order as code read it when the refund was decided (contract 16);
    /// `None`: it could not be read (rule 6).
    pub order: Option<OrderSnapshot>,
}

impl RefundRecord {
    /// The columns of the audit trail, in order.
    pub const COLUMNS: [&'static str; 36] = [
        "record_id",
        "state",
        "user_id",
        "order_id",
        "amount_cents",
        "created_at",
        "created_at_ms",
        "request_id",
        "idempotency_key",
        "decision",
        "reasons",
        "customer_message",
        "executing_since_ms",
        "updated_at",
        "refund_id",
        "receipt_status",
        "payments_status",
        "payments_detail",
        "failure",
        "decided_by",
        "decided_at",
        "rejection_reason",
        "resolution",
        "resolved_refund_id",
        "resolved_by",
        "resolved_at",
        "reissue_of",
        "reissued_as",
        "conversation_id",
        "message_forgotten_by",
        "message_forgotten_at",
        "order_status",
        "order_delivered_at",
        "order_paid_cents",
        "order_refunded_cents",
        "order_currency",
    ];

    /// Every field as text, in [`RefundRecord::COLUMNS`] order; empty when unset.
    pub fn values(&self) -> [String; 36] {
        let opt = |value: &Option<String>| value.clone().unwrap_or_default();
        let num = |value: Option<u64>| value.map(|n| n.to_string()).unwrap_or_default();
        let order = |fact: fn(&OrderSnapshot) -> String| self.order.as_ref().map(fact).unwrap_or_default();
        [
            self.record_id.clone(),
            self.state.as_str().to_owned(),
            self.user_id.clone(),
            self.order_id.clone(),
            self.amount.cents().to_string(),
            self.created_at.clone(),
            self.created_at_ms.to_string(),
            self.request_id.clone(),
            opt(&self.idempotency_key),
            self.decision.as_str().to_owned(),
            self.reasons.join(" "),
            opt(&self.customer_message),
            num(self.executing_since_ms),
            opt(&self.updated_at),
            opt(&self.refund_id),
            opt(&self.receipt_status),
            num(self.payments_status),
            opt(&self.payments_detail),
            opt(&self.failure),
            opt(&self.decided_by),
            opt(&self.decided_at),
            opt(&self.rejection_reason),
            self.resolution
                .as_ref()
                .map(Resolution::as_str)
                .unwrap_or_default()
                .to_owned(),
            match &self.resolution {
                Some(Resolution::Executed { refund_id }) => refund_id.clone(),
                _ => String::new(),
            },
            opt(&self.resolved_by),
            opt(&self.resolved_at),
            opt(&self.reissue_of),
            opt(&self.reissued_as),
            opt(&self.conversation_id),
            opt(&self.message_forgotten_by),
            opt(&self.message_forgotten_at),
            order(|o| o.status.clone()),
            order(|o| o.delivered_at_ms.map(crate::clock::rfc3339).unwrap_or_default()),
            order(|o| o.paid.cents().to_string()),
            order(|o| o.refunded.cents().to_string()),
            order(|o| o.currency.clone()),
        ]
    }

    /// The order's facts in a line, for an approver: "delivered
    /// 2026-11-30T10:00:00Z, paid 45.00 EUR, refunded 0.00", or why there are none.
    pub fn order_facts(&self) -> String {
        match &self.order {
            Some(order) => {
                let delivered = order
                    .delivered_at_ms
                    .map(|ms| format!(" {}", crate::clock::rfc3339(ms)))
                    .unwrap_or_default();
                format!(
                    "{}{delivered}, paid {} {}, refunded {}",
                    order.status, order.paid, order.currency, order.refunded
                )
            }
            None if self.reasons.iter().any(|r| r == Reason::OrderUnverified.as_str()) => {
                "not read: the order system did not answer".to_owned()
            }
            None => "not read".to_owned(),
        }
    }

    /// The request the record stands for, to pay or release it as `writer`.
    pub fn request(&self, writer: &WriterMark) -> RefundRequest {
        RefundRequest {
            attempt: Attempt {
                scope: self.scope(),
                writer: writer.clone(),
                conversation: self.conversation_id.clone(),
            },
            order_id: self.order_id.clone(),
            amount: self.amount,
            message: crate::refund::message::CustomerMessage::new(""),
            order: self.order_facts_read(),
        }
    }

    /// The facts the record was decided on, as the rules read them.
    pub fn order_facts_read(&self) -> OrderFacts {
        self.order.clone().map_or(OrderFacts::Unverified, OrderFacts::Read)
    }

    /// How the record counts for the rules, should it be released.
    pub fn counts_for(&self) -> CountsFor {
        match self.decision {
            DecidedBy::Rules => CountsFor::Rules2And3 { day: self.day.clone() },
            DecidedBy::Approval => CountsFor::Rule2,
        }
    }

    /// The refund scope the record belongs to.
    pub fn scope(&self) -> RefundScope {
        match (&self.reissue_of, &self.idempotency_key) {
            (Some(original), _) => RefundScope::for_reissue(&self.user_id, original),
            (None, Some(key)) => RefundScope::for_idempotency_key(&self.user_id, key),
            (None, None) => RefundScope::for_request(&self.user_id, &self.request_id),
        }
    }
}
