//! `show ID`: one refund record, every field.

use refund_chat::ledger::RefundRecord;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger, id: &str) -> Outcome {
    let Some(record) = ledger.record(id).await? else {
        return Ok(Ending::Refused(format!("no refund record {id}")));
    };
    let width = RefundRecord::COLUMNS.iter().map(|c| c.len()).max().unwrap_or(0);
    for (column, value) in RefundRecord::COLUMNS.iter().zip(record.values()) {
        println!(
            "{column:<width$}  {}",
            if value.is_empty() { "-".into() } else { visible(&value) }
        );
    }
    Ok(Ending::Done)
}
