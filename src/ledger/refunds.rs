//! The refund records' port, as "decide, record, then pay" uses it (6.2, 8).

use std::future::Future;

use crate::refund::policy::{History, Limits, Reason};
use crate::refund::{PaymentOutcome, PriorRefund, RefundRequest};

use super::LedgerError;

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

    /// Rule 2's fact alone, for an order and no refund (contract 8's rule
    /// 7: a return of an order refunded in the window goes to a person).
    fn order_refunded_recently(
        &self,
        order_id: &str,
        limits: &Limits,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, LedgerError>> + Send;

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
