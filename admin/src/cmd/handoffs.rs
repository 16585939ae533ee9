//! `handoffs`: open handoffs, oldest first, each with its summary and transcript.

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::print::{handoff_labels, print_exchanges, print_verdicts};
use crate::{Ending, Outcome};

pub async fn run(conversations: &DynamoConversations) -> Outcome {
    let open = conversations.open_handoffs().await?;
    if open.is_empty() {
        println!("no open handoffs");
        return Ok(Ending::Done);
    }
    for handoff in &open {
        println!(
            "{}  {}  customer {}  reason {}  conversation {}",
            visible(&handoff.id),
            handoff.at,
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
