//! `reject ID --by NAME --reason TEXT`: a refund awaiting approval
//! rejected; no money moves.

use refund_chat::clock::now_ms;
use refund_chat::ledger::StaffDecision;
use refund_chat::ledger::dynamo::DynamoLedger;

use crate::print::{claim_name, refused};
use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger, id: &str, by: &str, reason: &str) -> Outcome {
    let claim = ledger.reject(id, by, reason, now_ms()).await?;
    tracing::info!(
        event = "staff_decision",
        action = "reject",
        record_id = id,
        by,
        result = claim_name(&claim)
    );
    Ok(match claim {
        StaffDecision::Done(_) => {
            println!("rejected {id}: no money moved");
            Ending::Done
        }
        other => refused(id, other, "awaiting approval"),
    })
}
