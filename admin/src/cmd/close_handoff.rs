//! `close-handoff ID --by NAME [--text TEXT]`: the handoff closed; the
//! conversation stays with the people. With `--text`, a person's reply
//! follows the closing (contract 18), checked before anything is written.

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::conversations::{Closed, DynamoConversations};
use refund_chat::ledger::dynamo::notes::PersonNotes;
use refund_chat::untrusted::visible;

use crate::cmd::reply;
use crate::{Ending, Outcome};

pub async fn run(conversations: &DynamoConversations, id: &str, by: &str, text: Option<&str>) -> Outcome {
    if let Some(Err(why)) = text.map(reply::checked_text) {
        return Ok(Ending::Refused(why));
    }
    let ending = match conversations.close_handoff(id, by, now_ms()).await? {
        Closed::Closed(handoff) => {
            tracing::info!(event = "staff_decision", action = "close_handoff", handoff_id = %visible(id), by);
            println!(
                "closed {} (conversation {}); its later messages still reach the support team",
                visible(&handoff.id),
                visible(&handoff.conversation_id)
            );
            if let Some(text) = text {
                return reply::run(&PersonNotes::of(conversations), &handoff.conversation_id, by, text).await;
            }
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
