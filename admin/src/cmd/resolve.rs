//! `resolve ID (--executed REFUND_ID | --not-executed) --by NAME`: what
//! payments confirmed for an unknown outcome, recorded. Never calls payments.

use refund_chat::clock::now_ms;
use refund_chat::config::FUNCTION_TIMEOUT;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{Confirmed, StaffDecision};

use crate::print::{claim_name, refused};
use crate::{Ending, Outcome, Resolve};

pub async fn run(ledger: &DynamoLedger, resolve: Resolve) -> Outcome {
    let confirmed = match resolve.executed {
        Some(refund_id) => Confirmed::Executed { refund_id },
        None => Confirmed::NotExecuted,
    };
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let id = resolve.id.as_str();
    let claim = ledger
        .resolve(id, &confirmed, &resolve.by, stale_before, now_ms())
        .await?;
    tracing::info!(
        event = "staff_decision",
        action = "resolve",
        record_id = id,
        by = %resolve.by,
        resolution = match &confirmed { Confirmed::Executed { .. } => "executed", Confirmed::NotExecuted => "not_executed" },
        result = claim_name(&claim),
    );
    Ok(match claim {
        StaffDecision::Done(_) => {
            match confirmed {
                Confirmed::Executed { refund_id } => println!("resolved {id}: executed (refund {refund_id})"),
                Confirmed::NotExecuted => println!("resolved {id}: not executed, no money moved"),
            }
            Ending::Done
        }
        other => refused(id, other, "of unknown outcome (or already resolved)"),
    })
}
