//! "Record, then pay": the [`RefundGateway`] that writes the scope's refund
//! record before the payments call and its outcome after (contract 6.2).
//!
//! It wraps any gateway, so the function's wiring decides whether refunds
//! are recorded, and the turn neither knows nor cares. What it guarantees:
//! - payments is called only after the conditional write succeeded, so a
//!   scope reaches payments at most once, across requests and invocations;
//! - a record already there means no payments call; the turn is told what
//!   the record says;
//! - a ledger failure means no payments call;
//! - a failed outcome update leaves the record `executing`, which readers
//!   treat as unknown: logged, never retried by calling payments again.

use crate::clock::now_ms;
use crate::ledger::{Ledger, RefundClaim};
use crate::refund::{RefundGateway, RefundOutcome, RefundRequest};

pub struct RecordedRefunds<L, G> {
    ledger: L,
    payments: G,
}

impl<L, G> RecordedRefunds<L, G> {
    pub fn new(ledger: L, payments: G) -> Self {
        RecordedRefunds { ledger, payments }
    }

    pub fn ledger(&self) -> &L {
        &self.ledger
    }
}

impl<L: Ledger, G: RefundGateway + Sync> RefundGateway for RecordedRefunds<L, G> {
    async fn refund(&self, request: &RefundRequest) -> RefundOutcome {
        match self.ledger.record_refund(request, now_ms()).await {
            Ok(RefundClaim::Recorded) => {}
            Ok(RefundClaim::Existing(prior)) => {
                tracing::warn!(event = "ledger", op = "record_refund", found = %prior.state, "the scope already has a refund record: payments not called");
                return RefundOutcome::AlreadyRecorded(prior);
            }
            Err(error) => {
                tracing::error!(event = "ledger", op = "record_refund", error = %error, "payments not called");
                return RefundOutcome::Unrecorded;
            }
        }
        let outcome = self.payments.refund(request).await;
        if let Err(error) = self.ledger.record_outcome(request, &outcome, now_ms()).await {
            tracing::error!(
                event = "ledger",
                op = "record_outcome",
                outcome = outcome.name(),
                error = %error,
                "the refund record stays executing (read as unknown)"
            );
        }
        outcome
    }
}
