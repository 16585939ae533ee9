//! Approving a refund the rules sent to a person (contract 9): the
//! conditional move to `executing` comes first, so of two approvers racing
//! exactly one reaches payments; then one payments call; then the outcome,
//! recorded as the function records it (6.2).
//!
//! An approval pays on the order as it is now, not as it was when the
//! customer asked (contract 16): the refunds the ledger holds in flight on
//! the order (with the version of its guard), then the order system, read
//! as the record's customer; the claim is conditioned on the guard's
//! version, so two approvals of one order, or an approval beside an
//! automatic refund, never both pass a check that only one fits.
//!
//! Between the claim and payments the record has one more step
//! (`start_paying`): it moves only while the record is still this
//! approver's and `executing`. The sweep never trusts the approver's clock:
//! it watches a claimed approval on its own clock, and calls it unknown
//! only after seeing the same step for the function's timeout. An approver
//! that slept between its claim and payments finds its record taken and
//! pays nothing, and one whose own clocks say more than [`PAY_WITHIN`]
//! passed pays nothing either: a person resolves it, and nothing is paid
//! twice.
//!
//! An approval whose claim's answer is lost (a timeout after the write
//! landed) is not lost: only this process knows that it has not called
//! payments, so it reads the record back and goes on if the record carries
//! its own writer mark. If it cannot tell, it stops without paying and says
//! so; the record then shows `executing`, decided by this approver, and is
//! listed by `unknown` once the function's timeout has passed. A person
//! checks with payments and resolves it; if no refund was made, [`reissue`]
//! pays it under a new record linked to the first. Money moves only after a
//! person has checked.

use std::time::{Duration, Instant, SystemTime};

use crate::clock::now_ms;
use crate::conversation::person::Person;
use crate::ledger::{Claim, CountsFor, LedgerError, OrderInFlight, RefundRecord, StaffDecision, StaffLedger};
use crate::orders::{OrderLookup, OrderSystem, OrdersError};
use crate::refund::money::AmountCents;
use crate::refund::policy::Limits;
use crate::refund::{PaymentOutcome, Payments, RefundState, WriterMark};

/// How often an approval reads the order again when the order's guard
/// moved under it (another refund of the order recorded or claimed).
pub const ORDER_CHECKS: usize = 4;
/// The most an approver lets pass, by its own clocks, between sending its
/// claim and calling payments. Far below the sweep's watch (the function's
/// timeout, on the sweep's clock), so an approver that slept (a laptop
/// closed mid-approval) never pays a record the sweep may have called
/// unknown meanwhile.
pub const PAY_WITHIN: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no refund record {0}")]
    NotFound(String),
    #[error("refund {record_id} is {state}, decided by {by}: not awaiting approval")]
    AlreadyDecided {
        record_id: String,
        state: String,
        by: String,
        /// When it was decided (none for the rules' own decisions).
        at: Option<String>,
    },
    #[error(
        "refund {record_id} cannot be reissued: only an approved refund that a person resolved as not executed \
         can, once (it is {state})"
    )]
    NotReissuable { record_id: String, state: String },
    #[error("refund record {0} does not match its own scope: not paid")]
    Inconsistent(String),
    /// Contract 16: the order, read now, has less left than the refund.
    #[error(
        "refund {record_id} of {amount} is more than its order has left: {remaining} ({refundable} refundable \
         as the order system reads now, less {in_flight} in refunds still being paid or of unknown outcome). \
         Not paid; it still awaits a decision"
    )]
    MoreThanRemains {
        record_id: String,
        amount: AmountCents,
        remaining: AmountCents,
        refundable: AmountCents,
        in_flight: AmountCents,
    },
    #[error(
        "the order system has no such order for the refund's customer now ({record_id}). Not paid; it still \
         awaits a decision"
    )]
    OrderGone { record_id: String },
    #[error("the order of {record_id} could not be read ({cause}). Not paid; it still awaits a decision: try again")]
    OrderUnreadable { record_id: String, cause: OrdersError },
    #[error(
        "refunds of the order of {record_id} kept being recorded while this approval checked it. Not paid; it \
         still awaits a decision: try again"
    )]
    OrderBusy { record_id: String },
    /// The approval was claimed, and then not paid: the sweep (on its own
    /// clock) makes it unknown, and a person resolves it.
    #[error(
        "the approval of {record_id} was recorded but not paid ({why}); payments was NOT called. Once \
         `refund-chat-admin unknown` lists it, `resolve {record_id} --not-executed --by NAME`, then \
         `reissue {record_id} --by NAME`"
    )]
    NotPaid { record_id: String, why: &'static str },
    /// The claim may have landed; payments was not called.
    #[error(
        "could not tell whether the approval of {record_id} was recorded ({cause}); payments was NOT called. \
         Run `refund-chat-admin show {record_id}`: if it is still awaiting_approval, approve it again; if it is \
         executing and decided by you, `unknown` lists it once the sweep has watched it: check with \
         payments that no refund was made, `resolve {record_id} --not-executed --by NAME`, then `reissue {record_id} --by NAME`"
    )]
    ClaimUncertain { record_id: String, cause: LedgerError },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// What an approval did.
#[derive(Debug)]
pub struct Approved {
    /// The record that was paid (for a reissue, the new one).
    pub record: RefundRecord,
    pub outcome: PaymentOutcome,
    /// False when the outcome could not be written: the record stays
    /// `executing`, which `unknown` lists once it is stale.
    pub outcome_recorded: bool,
}

/// Time since a claim was sent, by both of the approver's clocks: the
/// monotonic one does not count a machine's sleep, the wall clock does
/// (and may jump); the larger is believed.
struct SinceClaim {
    monotonic: Instant,
    wall: SystemTime,
}

impl SinceClaim {
    fn now() -> Self {
        SinceClaim {
            monotonic: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    fn elapsed(&self) -> Duration {
        let wall = self.wall.elapsed().unwrap_or_default();
        self.monotonic.elapsed().max(wall)
    }
}

/// Approves an awaiting refund: the order read afresh (contract 16), the
/// claim conditioned on the order's guard as read, then one payments call.
pub async fn approve<L: StaffLedger, G: Payments, O: OrderSystem>(
    ledger: &L,
    payments: &G,
    orders: &O,
    record_id: &str,
    by: Person<'_>,
    writer: &WriterMark,
    limits: &Limits,
) -> Result<Approved, ApprovalError> {
    for _ in 0..ORDER_CHECKS {
        let record = match ledger.record_and_writer(record_id).await? {
            Some((record, _)) => record,
            None => return Err(ApprovalError::NotFound(record_id.to_owned())),
        };
        if record.state != RefundState::AwaitingApproval {
            return Err(already_decided(record_id, record));
        }
        let seen = match order_allows(ledger, orders, &record).await {
            Ok(seen) => seen,
            // Another approval may have paid it while the order was read: its
            // payment is what the order no longer has. Say who decided.
            Err(refused @ ApprovalError::MoreThanRemains { .. }) => {
                return match ledger.record_and_writer(record_id).await? {
                    Some((now, _)) if now.state != RefundState::AwaitingApproval => {
                        Err(already_decided(record_id, now))
                    }
                    _ => Err(refused),
                };
            }
            Err(other) => return Err(other),
        };
        let since = SinceClaim::now();
        let claim = Claim {
            record_id,
            by,
            writer,
            now_ms: now_ms(),
            limits,
        };
        let claimed = match ledger.claim_approval(&claim, seen).await {
            Ok(claim) => claim,
            Err(lost) => recover_claim(ledger, record_id, writer, lost).await?,
        };
        match claimed {
            StaffDecision::Done(record) => return pay(ledger, payments, record, writer, since).await,
            StaffDecision::Refused(found) => return Err(already_decided(record_id, found)),
            StaffDecision::NotFound => return Err(ApprovalError::NotFound(record_id.to_owned())),
            StaffDecision::OrderMoved => continue,
        }
    }
    Err(ApprovalError::OrderBusy {
        record_id: record_id.to_owned(),
    })
}

/// Pays, under a new record, an approved refund that a person resolved as
/// not executed (see the module's documentation), the order read afresh
/// as for an approval.
pub async fn reissue<L: StaffLedger, G: Payments, O: OrderSystem>(
    ledger: &L,
    payments: &G,
    orders: &O,
    record_id: &str,
    by: Person<'_>,
    writer: &WriterMark,
    limits: &Limits,
) -> Result<Approved, ApprovalError> {
    for _ in 0..ORDER_CHECKS {
        let original = match ledger.record_and_writer(record_id).await? {
            Some((record, _)) => record,
            None => return Err(ApprovalError::NotFound(record_id.to_owned())),
        };
        let seen = order_allows(ledger, orders, &original).await?;
        let since = SinceClaim::now();
        let claim = Claim {
            record_id,
            by,
            writer,
            now_ms: now_ms(),
            limits,
        };
        match ledger.claim_reissue(&claim, seen).await? {
            StaffDecision::Done(record) => return pay(ledger, payments, record, writer, since).await,
            StaffDecision::Refused(found) => {
                return Err(ApprovalError::NotReissuable {
                    record_id: record_id.to_owned(),
                    state: describe(&found),
                });
            }
            StaffDecision::NotFound => return Err(ApprovalError::NotFound(record_id.to_owned())),
            StaffDecision::OrderMoved => continue,
        }
    }
    Err(ApprovalError::OrderBusy {
        record_id: record_id.to_owned(),
    })
}

/// Contract 16's check: what the ledger has in flight on the order first
/// (so a refund that finishes between the two reads is counted at least
/// once), then the order as the order system reads it now, as the record's
/// customer. The guard's version it returns conditions the claim.
async fn order_allows<L: StaffLedger, O: OrderSystem>(
    ledger: &L,
    orders: &O,
    record: &RefundRecord,
) -> Result<OrderInFlight, ApprovalError> {
    let in_flight = ledger.in_flight(&record.order_id, &record.record_id).await?;
    let record_id = record.record_id.clone();
    match orders.order(&record.order_id, &record.user_id.as_str().into()).await {
        OrderLookup::Found(order) => {
            let refundable = AmountCents::new(order.refundable_cents());
            let remaining = AmountCents::new(refundable.cents().saturating_sub(in_flight.amount.cents()));
            if record.amount.cents() > remaining.cents() {
                return Err(ApprovalError::MoreThanRemains {
                    record_id,
                    amount: record.amount,
                    remaining,
                    refundable,
                    in_flight: in_flight.amount,
                });
            }
            Ok(in_flight)
        }
        OrderLookup::NotFound => Err(ApprovalError::OrderGone { record_id }),
        OrderLookup::Unavailable(cause) => Err(ApprovalError::OrderUnreadable { record_id, cause }),
    }
}

/// After a claim whose answer was lost: the record as this approver holds
/// it, if the claim landed; what it says if it did not.
async fn recover_claim<L: StaffLedger>(
    ledger: &L,
    record_id: &str,
    writer: &WriterMark,
    lost: LedgerError,
) -> Result<StaffDecision, ApprovalError> {
    tracing::warn!(event = "ledger", op = "claim_approval", record_id, error = %lost, "reading the record back");
    let uncertain = |cause| ApprovalError::ClaimUncertain {
        record_id: record_id.to_owned(),
        cause,
    };
    match ledger.record_and_writer(record_id).await {
        Ok(Some((record, holder))) if holder == writer.as_str() && record.state == RefundState::Executing => {
            Ok(StaffDecision::Done(record))
        }
        // Not recorded: nothing changed, approving again is safe.
        Ok(Some((record, _))) if record.state == RefundState::AwaitingApproval => Err(uncertain(lost)),
        Ok(Some((record, _))) => Ok(StaffDecision::Refused(record)),
        Ok(None) => Ok(StaffDecision::NotFound),
        Err(error) => Err(uncertain(error)),
    }
}

/// One payments call for a record this writer holds, then its outcome:
/// only after the record's last step (still held, not made unknown by the
/// sweep) and within [`PAY_WITHIN`] of the claim by the approver's clocks.
async fn pay<L: StaffLedger, G: Payments>(
    ledger: &L,
    payments: &G,
    record: RefundRecord,
    writer: &WriterMark,
    since: SinceClaim,
) -> Result<Approved, ApprovalError> {
    let request = record.request(writer);
    if request.scope().record_id() != record.record_id {
        // Held in `executing` by this approver: `unknown` will list it.
        return Err(ApprovalError::Inconsistent(record.record_id));
    }
    let not_paid = |why| ApprovalError::NotPaid {
        record_id: record.record_id.clone(),
        why,
    };
    match ledger.start_paying(&record.record_id, writer).await {
        Ok(true) => {}
        Ok(false) => {
            return Err(not_paid(
                "it is no longer held by this approval: the sweep found it stale",
            ));
        }
        Err(error) => {
            tracing::error!(event = "ledger", op = "start_paying", record_id = %record.record_id, error = %error);
            return Err(not_paid("its last step before payments could not be recorded"));
        }
    }
    if since.elapsed() > PAY_WITHIN {
        return Err(not_paid(
            "more time passed since its claim than an approval may take: did the machine sleep?",
        ));
    }
    let outcome = payments.pay(&request).await;
    let recorded = ledger
        .record_outcome(&request, &outcome, &CountsFor::Rule2, now_ms())
        .await;
    if let Err(error) = &recorded {
        tracing::error!(
            event = "ledger",
            op = "record_outcome",
            record_id = %record.record_id,
            error = %error,
            "the record stays executing"
        );
    }
    Ok(Approved {
        record,
        outcome,
        outcome_recorded: recorded.is_ok(),
    })
}

fn already_decided(record_id: &str, found: RefundRecord) -> ApprovalError {
    ApprovalError::AlreadyDecided {
        record_id: record_id.to_owned(),
        by: found
            .decided_by
            .clone()
            .unwrap_or_else(|| "the refund assistant".to_owned()),
        state: found.state.to_string(),
        at: found.decided_at.clone().or_else(|| found.updated_at.clone()),
    }
}

/// A record's state, with its resolution and reissue when it has them.
fn describe(record: &RefundRecord) -> String {
    let mut text = record.state.to_string();
    if let Some(resolution) = &record.resolution {
        text.push_str(&format!(", resolved {}", resolution.as_str()));
    }
    if let Some(reissue) = &record.reissued_as {
        text.push_str(&format!(", already reissued as {reissue}"));
    }
    text
}
