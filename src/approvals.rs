//! Approving a refund the rules sent to a person (contract 9): the
//! conditional move to `executing` comes first, so of two approvers racing
//! exactly one reaches payments; then one payments call; then the outcome,
//! recorded as the function records it (6.2).

use crate::clock::now_ms;
use crate::ledger::dynamo::DynamoLedger;
use crate::ledger::staff::{StaffClaim, request_of};
use crate::ledger::{Counted, Ledger, LedgerError, RefundRecord};
use crate::refund::{RefundGateway, RefundOutcome};

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
    #[error("refund record {0} does not match its own scope: not paid")]
    Inconsistent(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// What an approval did.
#[derive(Debug)]
pub struct Approved {
    pub record: RefundRecord,
    pub outcome: RefundOutcome,
    /// False when the outcome could not be written: the record stays
    /// `executing`, which `unknown` lists once it is stale.
    pub outcome_recorded: bool,
}

pub async fn approve<G: RefundGateway>(
    ledger: &DynamoLedger,
    payments: &G,
    record_id: &str,
    by: &str,
    writer: &str,
) -> Result<Approved, ApprovalError> {
    let record = match ledger.claim_approval(record_id, by, writer, now_ms()).await? {
        StaffClaim::Done(record) => record,
        StaffClaim::Refused(found) => {
            return Err(ApprovalError::AlreadyDecided {
                record_id: record_id.to_owned(),
                state: found.state,
                by: found.decided_by.unwrap_or_else(|| "the refund assistant".to_owned()),
            });
        }
        StaffClaim::NotFound => return Err(ApprovalError::NotFound(record_id.to_owned())),
    };
    let request = request_of(&record, writer);
    if request.scope.record_id() != record.record_id {
        // Held in `executing` by this approver: `unknown` will list it.
        return Err(ApprovalError::Inconsistent(record_id.to_owned()));
    }
    let outcome = payments.refund(&request).await;
    let recorded = ledger
        .record_outcome(&request, &outcome, &Counted::Approved, now_ms())
        .await;
    if let Err(error) = &recorded {
        tracing::error!(event = "ledger", op = "record_outcome", record_id, error = %error, "the record stays executing");
    }
    Ok(Approved {
        record,
        outcome,
        outcome_recorded: recorded.is_ok(),
    })
}
