//! `unknown`: refunds whose outcome is not known (state unknown, or
//! executing for longer than the function's timeout), to check with payments.

use refund_chat::clock::now_ms;
use refund_chat::config::FUNCTION_TIMEOUT;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::refund::RefundState;

use crate::print::{print_table, row};
use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger) -> Outcome {
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let mut records = ledger.waiting(RefundState::Unknown).await?;
    records.extend(
        ledger
            .waiting(RefundState::Executing)
            .await?
            .into_iter()
            .filter(|r| r.executing_since_ms.unwrap_or(r.created_at_ms) < stale_before),
    );
    records.sort_by_key(|r| r.created_at_ms);
    if records.is_empty() {
        println!("no refunds with an unknown outcome");
        return Ok(Ending::Done);
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let why = r.failure.clone().unwrap_or_else(|| "no outcome recorded".to_owned());
            row(r, [r.state.to_string(), why])
        })
        .collect();
    print_table(
        &["ID", "CREATED (UTC)", "CUSTOMER", "ORDER", "AMOUNT", "STATE", "WHY"],
        &rows,
    );
    Ok(Ending::Done)
}
