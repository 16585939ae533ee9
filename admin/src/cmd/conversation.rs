//! `conversation ID`: a whole conversation: its handoff, who has it, every
//! exchange, the team's internal notes, then the refund records its turns
//! wrote (the facts, from the ledger).

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::print::{handoff_labels, print_exchanges, print_handoff, print_table, print_verdicts, row};
use crate::{Ending, Outcome};

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, id: &str) -> Outcome {
    let Some(transcript) = conversations.transcript(id, now_ms()).await? else {
        return Ok(Ending::Refused(format!(
            "no conversation {} (or it expired)",
            visible(id)
        )));
    };
    println!("conversation  {}", visible(&transcript.id));
    println!("customer      {}", visible(&transcript.customer));
    println!("created       {}", transcript.created_at);
    println!("last exchange {}", transcript.updated_at);
    println!(
        "expires       {}",
        refund_chat::clock::rfc3339(transcript.expires_at_s * 1000)
    );
    println!("exchanges     {}", transcript.exchanges.len());
    if let Some(rating) = &transcript.rating {
        let answer = if rating.solved { "solved" } else { "not solved" };
        println!(
            "rated         {answer} at {} (intent {})",
            rating.at,
            visible(&rating.intent)
        );
        if !rating.comment.is_empty() {
            println!("  the customer's words: {}", visible(&rating.comment));
        }
    }
    if let Some(holder) = &transcript.holder {
        println!(
            "held by       {} since {}",
            visible(&holder.name),
            visible(&holder.since)
        );
    }
    if let Some(handoff) = &transcript.handoff {
        print_handoff(handoff);
        if let Some(labels) = handoff_labels(&transcript, handoff) {
            println!("  router      {}", visible(labels));
        }
    }
    print_verdicts(&transcript);
    print_exchanges(&transcript);
    // The support team's own words: never the customer's to read (contract 30).
    for note in &transcript.internal_notes {
        println!(
            "internal note by {} at {}: {}",
            visible(&note.by),
            note.at,
            visible(&note.text)
        );
    }
    println!();
    // The facts, from the ledger: the records its turns wrote.
    let records = refund_chat::staff::read::records_of(ledger, &transcript).await?;
    if records.is_empty() {
        println!("no refund records in this conversation");
    } else {
        let rows: Vec<Vec<String>> = records.iter().map(|r| row(r, [r.state.as_str().to_owned()])).collect();
        print_table(&["ID", "CREATED (UTC)", "CUSTOMER", "ORDER", "AMOUNT", "STATE"], &rows);
    }
    Ok(Ending::Done)
}
