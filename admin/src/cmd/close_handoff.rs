//! `close-handoff ID --by NAME`: the handoff closed; the conversation stays
//! with the people.

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::conversations::{Closed, DynamoConversations};
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

pub async fn run(conversations: &DynamoConversations, id: &str, by: &str) -> Outcome {
    let ending = match conversations.close_handoff(id, by, now_ms()).await? {
        Closed::Closed(handoff) => {
            tracing::info!(event = "staff_decision", action = "close_handoff", handoff_id = %visible(id), by);
            println!(
                "closed {} (conversation {}); its later messages still reach the support team",
                visible(&handoff.id),
                visible(&handoff.conversation_id)
            );
            Ending::Done
        }
        Closed::AlreadyClosed(handoff) => {
            let (who, when) = handoff.closed.unwrap_or_default();
            Ending::Refused(format!(
                "{} was already closed by {} at {}",
                visible(id),
                visible(&who),
                visible(&when)
            ))
        }
        Closed::NotFound => Ending::Refused(format!("no handoff {}", visible(id))),
    };
    Ok(ending)
}
