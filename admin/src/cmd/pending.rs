//! `pending`: refunds awaiting approval, oldest first, each with the order's
//! facts as code read them (contract 16) and the whole message an approver
//! decides from.

use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::refund::RefundState;

use crate::print::{print_table, row};
use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger) -> Outcome {
    let records = ledger.waiting(RefundState::AwaitingApproval).await?;
    if records.is_empty() {
        println!("no refunds are awaiting approval");
        return Ok(Ending::Done);
    }
    // The whole message: an approver decides from it. Wrapped, in the last column.
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            row(
                r,
                [
                    r.reasons.join(", "),
                    r.order_facts(),
                    r.customer_message.clone().unwrap_or_default(),
                ],
            )
        })
        .collect();
    print_table(
        &[
            "ID",
            "CREATED (UTC)",
            "CUSTOMER",
            "ORDER",
            "AMOUNT",
            "REASONS",
            "THE ORDER (AS READ)",
            "MESSAGE",
        ],
        &rows,
    );
    Ok(Ending::Done)
}
