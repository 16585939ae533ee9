//! `forget --customer USER --by NAME`: the right to be forgotten (contract
//! 11): the customer's conversations and request records deleted, their
//! messages removed from their refund records, which stay; recorded.

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, customer: &str, by: &str) -> Outcome {
    let now = now_ms();
    let ids = conversations.of_customer(customer).await?;
    for id in &ids {
        conversations.delete(id).await?;
    }
    let forgotten = ledger.forget_customer(customer, by, now).await?;
    ledger.record_forget(customer, by, now, forgotten, ids.len()).await?;
    tracing::info!(
        event = "staff_decision",
        action = "forget",
        by,
        conversations_deleted = ids.len(),
        messages_removed = forgotten.messages_removed,
        request_records_deleted = forgotten.request_records_deleted,
    );
    println!(
        "forgot {}: {} conversation(s) deleted, the message removed from {} refund record(s), {} request record(s) \
         deleted; the refund records stay (the shop's financial record)",
        visible(customer),
        ids.len(),
        forgotten.messages_removed,
        forgotten.request_records_deleted
    );
    Ok(Ending::Done)
}
