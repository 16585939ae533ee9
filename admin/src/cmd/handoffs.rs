//! `handoffs`: open handoffs, what is due first first (contract 32), each
//! with when it is due (and `OVERDUE`, or when a person first answered),
//! its summary and transcript.

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::print::{handoff_labels, print_exchanges, print_verdicts};
use crate::{Ending, Outcome};

pub async fn run(conversations: &DynamoConversations) -> Outcome {
    let mut open = conversations.open_handoffs().await?;
    if open.is_empty() {
        println!("no open handoffs");
        return Ok(Ending::Done);
    }
    let now = now_ms();
    // Due first, first, as the desk's queue.
    open.sort_by_key(|handoff| refund_chat::staff::read::due_ms(handoff, now));
    for handoff in &open {
        let due = match (&handoff.due_at, &handoff.first_reply_at) {
            (_, Some(first)) => format!("first answered {first}"),
            (Some(due), None) if refund_chat::staff::read::overdue(handoff, now) => format!("due {due} OVERDUE"),
            (Some(due), None) => format!("due {due}"),
            (None, None) => "due -".to_owned(),
        };
        println!(
            "{}  {}  {}  customer {}  reason {}  conversation {}",
            visible(&handoff.id),
            handoff.at,
            visible(&due),
            visible(&handoff.customer),
            visible(&handoff.reason),
            visible(&handoff.conversation_id)
        );
        if let Some(summary) = &handoff.summary {
            println!("  the model's summary: {}", visible(summary));
        }
        if let Some(transcript) = conversations.transcript(&handoff.conversation_id, now_ms()).await? {
            // The router's labels of the turn that handed off, and any verdict (contract 21).
            println!(
                "  router: {}",
                visible(handoff_labels(&transcript, handoff).unwrap_or("-"))
            );
            print_verdicts(&transcript);
            print_exchanges(&transcript);
        }
        println!();
    }
    Ok(Ending::Done)
}
