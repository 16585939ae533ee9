//! "Decide, record, then pay": the [`RefundGateway`] that applies the refund
//! policy ([`crate::refund::policy`]) and writes the scope's refund record before the
//! payments call, and its outcome after (contract 6.2 and 8).
//!
//! It wraps any gateway, so the function's wiring decides whether refunds
//! are recorded, and the turn neither knows nor cares. What it guarantees:
//! - an order code could not find for the customer, or an amount above what
//!   remains refundable on it, is refused before anything is written
//!   (contract 16); the order's facts otherwise join the rules (4 to 6), so
//!   a refund on an order code could not read always waits for a person;
//! - payments is called only after the conditional write of an automatic
//!   refund succeeded, so a scope reaches payments at most once, across
//!   requests and invocations, and rules 2 and 3 held at that write;
//! - a refund the rules send to a person is recorded `awaiting_approval`,
//!   with the reasons and the customer's message, and payments is not called;
//! - a record already there means no payments call; the turn is told what
//!   the record says;
//! - a ledger failure means no payments call;
//! - a failed outcome update leaves the record `executing`, which readers
//!   treat as unknown: logged, never retried by calling payments again.

pub mod approvals;

use crate::clock::{now_ms, utc_day};
use crate::ledger::{ApprovalWrite, AutomaticWrite, CountsFor, LedgerError, RefundLedger};
use crate::refund::policy::{self, Decision, History, Limits, Reason, order_refusal};
use crate::refund::{Payments, RefundGateway, RefundOutcome, RefundRequest};

pub struct RecordedRefunds<L, P> {
    ledger: L,
    payments: P,
    limits: Limits,
}

impl<L, P> RecordedRefunds<L, P> {
    pub fn new(ledger: L, payments: P, limits: Limits) -> Self {
        RecordedRefunds {
            ledger,
            payments,
            limits,
        }
    }
}

impl<L, P> RecordedRefunds<L, P> {
    /// The payments it calls, for tests that count what reached them.
    #[cfg(any(test, feature = "test-support"))]
    pub fn payments(&self) -> &P {
        &self.payments
    }
}

impl<L: RefundLedger, P: Payments + Sync> RecordedRefunds<L, P> {
    async fn automatic(&self, request: &RefundRequest, now: u64) -> Result<RefundOutcome, LedgerError> {
        match self.ledger.record_automatic(request, &self.limits, now).await? {
            AutomaticWrite::Recorded => {}
            AutomaticWrite::Existing(prior) => return Ok(already_recorded(prior)),
            AutomaticWrite::Refused(history) => {
                // Rule 2 or 3 refused the write; the rules judge the facts it reported.
                let decided = policy::decide_with_order(&self.limits, request.amount, &history, &request.order, now);
                let reasons = match policy::with_routing(decided, &request.routed) {
                    Decision::Approval(reasons) => reasons,
                    Decision::Automatic => {
                        // The report passes both rules, so it is short of a figure. Rule
                        // 2's fact is a flag it always has: the refusal was rule 3's.
                        tracing::error!(
                            event = "policy",
                            automatic_today = history.automatic_today.cents(),
                            "the ledger refused a refund its own report allows: sent to a person as rule 3's"
                        );
                        vec![Reason::DailyLimitExceeded]
                    }
                };
                return self.for_approval(request, reasons, now).await;
            }
        }
        let outcome = self.payments.pay(request).await;
        let counted = CountsFor::Rules2And3 { day: utc_day(now) };
        if let Err(error) = self.ledger.record_outcome(request, &outcome, &counted, now_ms()).await {
            tracing::error!(
                event = "ledger",
                op = "record_outcome",
                outcome = outcome.name(),
                error = %error,
                "the refund record stays executing (read as unknown)"
            );
        }
        Ok(outcome.into())
    }

    async fn for_approval(
        &self,
        request: &RefundRequest,
        reasons: Vec<Reason>,
        now: u64,
    ) -> Result<RefundOutcome, LedgerError> {
        match self
            .ledger
            .record_for_approval(request, &reasons, &self.limits, now)
            .await?
        {
            ApprovalWrite::Recorded => Ok(RefundOutcome::PendingApproval {
                approval_id: request.scope().record_id(),
                reasons: reasons.iter().map(|reason| reason.as_str().to_owned()).collect(),
            }),
            ApprovalWrite::Existing(prior) => Ok(already_recorded(prior)),
        }
    }
}

fn already_recorded(prior: crate::refund::PriorRefund) -> RefundOutcome {
    tracing::warn!(event = "ledger", op = "record_refund", found = %prior.state, "the scope already has a refund record: payments not called");
    RefundOutcome::AlreadyRecorded(prior)
}

impl<L: RefundLedger, P: Payments + Sync> RefundGateway for RecordedRefunds<L, P> {
    async fn order_refunded_recently(&self, order_id: &str) -> Option<bool> {
        self.ledger
            .order_refunded_recently(order_id, &self.limits, now_ms())
            .await
            .inspect_err(|error| tracing::warn!(event = "ledger", op = "order_history", error = %error))
            .ok()
    }

    async fn refund(&self, request: &RefundRequest) -> RefundOutcome {
        let now = now_ms();
        if let Some(refusal) = order_refusal(&request.order, request.amount) {
            return RefundOutcome::OrderRefused(refusal);
        }
        // Rule 1 (and rule 3 for an amount above the daily limit alone) and
        // rules 4 to 6 need no history; rules 2 and 3 are checked by the
        // ledger's write itself.
        let decide = |history: &History| {
            let decided = policy::decide_with_order(&self.limits, request.amount, history, &request.order, now);
            policy::with_routing(decided, &request.routed)
        };
        let result = match decide(&History::default()) {
            Decision::Automatic => self.automatic(request, now).await,
            Decision::Approval(_) => {
                // Going to a person anyway: read the history for the full reasons.
                let history = self.ledger.history(request, &self.limits, now).await.unwrap_or_else(|error| {
                    tracing::warn!(event = "ledger", op = "history", error = %error, "reasons from the amount only");
                    History::default()
                });
                match decide(&history) {
                    Decision::Approval(reasons) => self.for_approval(request, reasons, now).await,
                    Decision::Automatic => unreachable_automatic(request),
                }
            }
        };
        result.unwrap_or_else(|error| {
            tracing::error!(event = "ledger", op = "record_refund", error = %error, "payments not called");
            RefundOutcome::Unrecorded
        })
    }
}

/// More history never turns an approval into an automatic refund; should
/// that ever be broken, the refund is declined rather than paid.
fn unreachable_automatic(request: &RefundRequest) -> Result<RefundOutcome, LedgerError> {
    tracing::error!(event = "policy", order_id = %request.order_id, "rules disagreed: refund declined");
    Ok(RefundOutcome::Unrecorded)
}

#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod tests;
