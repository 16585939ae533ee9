//! Approving a refund the rules sent to a person (contract 9): the
//! conditional move to `executing` comes first, so of two approvers racing
//! exactly one reaches payments; then one payments call; then the outcome,
//! recorded as the function records it (6.2).
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

use crate::clock::now_ms;
use crate::ledger::{CountsFor, LedgerError, RefundLedger, RefundRecord, StaffDecision, StaffLedger};
use crate::refund::policy::Limits;
use crate::refund::{PaymentOutcome, Payments, RefundState, WriterMark};

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no refund record {0}")]
    NotFound(String),
    #[error("refund {record_id} is {state}, decided by {by}: not awaiting approval")]
    AlreadyDecided {
        record_id: String,
        state: String,
        by: String,
    },
    #[error(
        "refund {record_id} cannot be reissued: only an approved refund that a person resolved as not executed \
         can, once (it is {state})"
    )]
    NotReissuable { record_id: String, state: String },
    #[error("refund record {0} does not match its own scope: not paid")]
    Inconsistent(String),
    /// The claim may have landed; payments was not called.
    #[error(
        "could not tell whether the approval of {record_id} was recorded ({cause}); payments was NOT called. \
         Run `refund-chat-admin show {record_id}`: if it is still awaiting_approval, approve it again; if it is \
         executing and decided by you, `unknown` lists it once the function's timeout has passed: check with \
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

pub async fn approve<L: StaffLedger, G: Payments>(
    ledger: &L,
    payments: &G,
    record_id: &str,
    by: &str,
    writer: &WriterMark,
    limits: &Limits,
) -> Result<Approved, ApprovalError> {
    let claimed = match ledger.claim_approval(record_id, by, writer, now_ms(), limits).await {
        Ok(claim) => claim,
        Err(lost) => recover_claim(ledger, record_id, writer, lost).await?,
    };
    let record = match claimed {
        StaffDecision::Done(record) => record,
        StaffDecision::Refused(found) => return Err(already_decided(record_id, found)),
        StaffDecision::NotFound => return Err(ApprovalError::NotFound(record_id.to_owned())),
    };
    pay(ledger, payments, record, writer).await
}

/// Pays, under a new record, an approved refund that a person resolved as
/// not executed (see the module's documentation).
pub async fn reissue<L: StaffLedger, G: Payments>(
    ledger: &L,
    payments: &G,
    record_id: &str,
    by: &str,
    writer: &WriterMark,
    limits: &Limits,
) -> Result<Approved, ApprovalError> {
    match ledger.claim_reissue(record_id, by, writer, now_ms(), limits).await? {
        StaffDecision::Done(record) => pay(ledger, payments, record, writer).await,
        StaffDecision::Refused(found) => Err(ApprovalError::NotReissuable {
            record_id: record_id.to_owned(),
            state: describe(&found),
        }),
        StaffDecision::NotFound => Err(ApprovalError::NotFound(record_id.to_owned())),
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

/// One payments call for a record this writer holds, then its outcome.
async fn pay<L: RefundLedger, G: Payments>(
    ledger: &L,
    payments: &G,
    record: RefundRecord,
    writer: &WriterMark,
) -> Result<Approved, ApprovalError> {
    let request = record.request(writer);
    if request.scope().record_id() != record.record_id {
        // Held in `executing` by this approver: `unknown` will list it.
        return Err(ApprovalError::Inconsistent(record.record_id));
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
