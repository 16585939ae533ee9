//! `--intent INTENT` on `close-handoff`, `approve` and `reject`: the intent
//! a person found, beside the router's (contract 21), written once the
//! decision is made. The intent was checked by the command line (an
//! unknown one is a usage error before anything is written).

use refund_chat::clock::now_ms;
use refund_chat::ledger::LedgerError;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::dynamo::routing::Verdict;
use refund_chat::router::Intent;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

/// After a decision on refund record `record_id`: the intent recorded in
/// the conversation the refund was proposed in.
pub async fn after_record(
    ledger: &DynamoLedger,
    conversations: &DynamoConversations,
    decided: Outcome,
    record_id: &str,
    intent: Option<Intent>,
    by: &str,
) -> Outcome {
    let Some(intent) = intent.filter(|_| matches!(decided, Ok(Ending::Done))) else {
        return decided;
    };
    match ledger.record(record_id).await {
        Ok(record) => {
            let conversation = record.and_then(|record| record.conversation_id);
            after(conversations, decided, conversation.as_deref(), Some(intent), by).await
        }
        Err(error) => Ok(not_recorded(&error)),
    }
}

/// After a decision in `conversation` (none: the refund had none): the
/// intent recorded there. A decision that was not made records nothing.
pub async fn after(
    conversations: &DynamoConversations,
    decided: Outcome,
    conversation: Option<&str>,
    intent: Option<Intent>,
    by: &str,
) -> Outcome {
    let Some(intent) = intent.filter(|_| matches!(decided, Ok(Ending::Done))) else {
        return decided;
    };
    let Some(conversation) = conversation else {
        println!("no conversation: the intent {intent} is not recorded");
        return decided;
    };
    match conversations.record_verdict(conversation, intent, by, now_ms()).await {
        Ok(Verdict::Recorded) => {
            tracing::info!(
                event = "staff_verdict",
                conversation_id = %visible(conversation),
                intent = intent.as_str(),
                by
            );
            println!(
                "recorded the intent {intent} for conversation {}",
                visible(conversation)
            );
            decided
        }
        Ok(Verdict::NoConversation) => {
            println!(
                "conversation {} has expired: the intent {intent} is not recorded",
                visible(conversation)
            );
            decided
        }
        Err(error) => Ok(not_recorded(&error)),
    }
}

fn not_recorded(error: &LedgerError) -> Ending {
    Ending::Failed(format!("the decision stands, but the intent was not recorded: {error}"))
}

/// `--intent`'s value: a name from the router's list.
pub fn parse_intent(text: &str) -> Result<Intent, String> {
    Intent::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Intent::ALL.iter().map(|intent| intent.as_str()).collect();
        format!("{text:?} is not an intent ({})", names.join(", "))
    })
}
