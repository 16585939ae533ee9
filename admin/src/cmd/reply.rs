//! `reply ID --by NAME (--text TEXT | --text-file FILE)`: a person's
//! message in a conversation (contract 18), which the customer reads in
//! the chat. ID is the conversation's, or its handoff's (what `handoffs`
//! lists). It changes nothing about who has the conversation.

use refund_chat::clock::now_ms;
use refund_chat::conversation::person::PersonNote;
use refund_chat::ledger::dynamo::notes::{PersonNotes, Replied};
use refund_chat::refund::message::MAX_MESSAGE_CHARS;
use refund_chat::untrusted::{acts_on_a_terminal, visible};

use crate::{Ending, Outcome};

/// The reply's text, checked: what a person writes reaches the customer's
/// screen and the support team's terminals, so it holds no control
/// characters (a file's trailing line break is trimmed, not refused).
pub fn checked_text(text: &str) -> Result<String, String> {
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Err("the reply is empty".into());
    }
    if let Some(bad) = text.chars().find(|&c| acts_on_a_terminal(c)) {
        return Err(format!(
            "the reply holds a control character ({}); write it as one line of plain text",
            visible(&bad.to_string())
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(format!("the reply is {chars} characters; at most {MAX_MESSAGE_CHARS}"));
    }
    Ok(text.to_owned())
}

/// The conversation an ID names: a handoff's id names its conversation.
pub fn conversation_named(id: &str) -> String {
    refund_chat::handoff::conversation_of(id).unwrap_or_else(|| id.to_owned())
}

pub async fn run(notes: &PersonNotes, id: &str, by: &str, text: &str) -> Outcome {
    let text = match checked_text(text) {
        Ok(text) => text,
        Err(why) => return Ok(Ending::Refused(why)),
    };
    let conversation = conversation_named(id);
    let note = PersonNote::reply(by, &text);
    Ok(match notes.reply(&conversation, &note, now_ms()).await? {
        Replied::Appended { seq } => {
            tracing::info!(
                event = "staff_decision",
                action = "reply",
                conversation_id = %visible(&conversation),
                by,
                seq,
                chars = text.chars().count(),
            );
            println!(
                "replied in {} (exchange #{seq}); the customer reads it in the chat",
                visible(&conversation)
            );
            Ending::Done
        }
        Replied::NotFound => Ending::Refused(format!(
            "no conversation {} (unknown, or it has expired): nothing was sent",
            visible(&conversation)
        )),
    })
}
