//! The support team's port (contract 9): decisions that lead to payments, and the record as people see it.

use std::future::Future;

use crate::conversation::person::Person;
use crate::refund::money::AmountCents;
use crate::refund::policy::{Limits, OrderFacts, OrderSnapshot, Reason};
use crate::refund::{Attempt, RefundRequest, RefundScope, RefundState, Resolution, WriterMark};

use super::{CountsFor, LedgerError, RefundLedger};

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
    pub by: Person<'a>,
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
    /// Whose day rule 3 counted it in, when not `user_id`'s: a guest's
    /// e-mail's keyed hash ([`crate::refund::Attempt::day_owner`]).
    pub day_owner: Option<String>,
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
    /// The staff pool's verified `sub` of who decided (contract 24); none from the CLI.
    pub decided_by_sub: Option<String>,
    pub decided_at: Option<String>,
    pub rejection_reason: Option<String>,
    /// What a person confirmed with payments, for an outcome that was unknown.
    pub resolution: Option<Resolution>,
    pub resolved_by: Option<String>,
    pub resolved_by_sub: Option<String>,
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
    /// The router's labels of the turn that proposed it (contract 21):
    /// `order_status,refund;low;0.92` or `unknown`; none where no router ran.
    pub router: Option<String>,
}

impl RefundRecord {
    /// The columns of the audit trail, in order.
    pub const COLUMNS: [&'static str; 39] = [
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
        "decided_by_sub",
        "decided_at",
        "rejection_reason",
        "resolution",
        "resolved_refund_id",
        "resolved_by",
        "resolved_by_sub",
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
        "router",
    ];

    /// Every field as text, in [`RefundRecord::COLUMNS`] order; empty when unset.
    pub fn values(&self) -> [String; 39] {
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
            opt(&self.decided_by_sub),
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
            opt(&self.resolved_by_sub),
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
            opt(&self.router),
        ]
    }

    /// The order's facts in a line, for an approver: "delivered Mon 30
    /// Nov 2026, paid 45.00 EUR, refunded 0.00 EUR" (the day in UTC: the
    /// record keeps no zone), or why there are none.
    pub fn order_facts(&self) -> String {
        match &self.order {
            Some(order) => {
                let delivered = order
                    .delivered_at_ms
                    .and_then(|ms| jiff::Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok())
                    .map(|at| format!(" {}", at.to_zoned(jiff::tz::TimeZone::UTC).strftime("%a %-d %b %Y")))
                    .unwrap_or_default();
                format!(
                    "{}{delivered}, paid {}, refunded {}",
                    order.status,
                    order.paid.in_currency(&order.currency),
                    order.refunded.in_currency(&order.currency)
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
                day_owner: self.day_owner.clone(),
            },
            order_id: self.order_id.clone(),
            amount: self.amount,
            message: crate::refund::message::CustomerMessage::new(""),
            order: self.order_facts_read(),
            // A person's decision: no router decides it (the record keeps the turn's labels).
            routed: crate::refund::Routed::default(),
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
