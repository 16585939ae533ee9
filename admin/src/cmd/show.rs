//! `show ID`: one refund record, every field, and a person's verdict on
//! its conversation beside the router's labels (contract 21).

use refund_chat::ledger::RefundRecord;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, id: &str) -> Outcome {
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
    // The last verdict counts; none while no person has given one.
    let verdict = match &record.conversation_id {
        Some(conversation) => conversations
            .routing_of(conversation)
            .await?
            .and_then(|routed| routed.verdict),
        None => None,
    };
    println!(
        "{:<width$}  {}",
        "verdict",
        verdict.map_or("-", |intent| intent.as_str())
    );
    Ok(Ending::Done)
}
