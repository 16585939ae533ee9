//! Live pushes between the desk and the page (contract 31): after a write
//! that a person or a customer is waiting to see, a poke on AWS AppSync
//! Events tells their open page to read again.
//!
//! A poke is `{"conversation_id", "seq", "kind"}` and nothing else: no
//! text, no name, no amount, no order id, no e-mail. Whoever hears one
//! reads what changed through the routes it already has, with the identity
//! those routes check, so a poke can tell a listener nothing it could not
//! read, and a lost one costs only time (the pages still poll).
//!
//! Publishing is best effort and comes last: [`publish::Publisher`] is
//! called only once the write it announces has committed, has its own
//! short timeout, is never retried, and changes no answer or status; a
//! failure is logged without the poke and counted (`LivePublishFailures`).
//! Who may listen is decided in [`listen`], by the same tokens the routes
//! take.

pub mod listen;
pub mod publish;

pub use publish::Publisher;

use serde::Serialize;

use crate::conversation::ConversationId;

/// The desk's channel: every open desk hears it.
pub const DESK_CHANNEL: &str = "/desk/queue";
/// The channel namespaces `template.yaml` creates (a channel's first segment).
pub const CONVERSATIONS_NAMESPACE: &str = "conversations";
pub const DESK_NAMESPACE: &str = "desk";

/// What changed, in one word: the page and the desk read again on any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A person's message to the customer.
    PersonReply,
    /// A person decided a refund of the conversation.
    Decision,
    /// A person closed the conversation's handoff.
    Closed,
    /// The conversation was handed to a person.
    Handoff,
    /// The customer wrote in a conversation a person has.
    CustomerWrote,
    /// A refund of the conversation waits for a person.
    RefundWaiting,
    /// Someone on the team claimed, took over or released the conversation.
    Held,
    /// Someone on the team wrote an internal note.
    InternalNote,
    /// The customer answered "Did this solve it?".
    Rating,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::PersonReply,
        Kind::Decision,
        Kind::Closed,
        Kind::Handoff,
        Kind::CustomerWrote,
        Kind::RefundWaiting,
        Kind::Held,
        Kind::InternalNote,
        Kind::Rating,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::PersonReply => "person_reply",
            Kind::Decision => "decision",
            Kind::Closed => "closed",
            Kind::Handoff => "handoff",
            Kind::CustomerWrote => "customer_wrote",
            Kind::RefundWaiting => "refund_waiting",
            Kind::Held => "held",
            Kind::InternalNote => "internal_note",
            Kind::Rating => "rating",
        }
    }

    /// What the customer's page shows goes to their channel and the desk's;
    /// what only the team sees to the desk's alone, so that a customer never
    /// learns that a note was written or that the desk is looking.
    pub fn customer_sees(self) -> bool {
        matches!(self, Kind::PersonReply | Kind::Decision | Kind::Closed)
    }
}

/// One poke: which conversation, its newest message's `seq` (0 when the
/// write added no message), and what changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Poke {
    pub conversation_id: String,
    pub seq: u64,
    pub kind: Kind,
}

impl Poke {
    pub fn new(conversation_id: &str, seq: u64, kind: Kind) -> Poke {
        Poke {
            conversation_id: conversation_id.to_owned(),
            seq,
            kind,
        }
    }

    /// The channels it is published to: the conversation's (when the
    /// customer sees it and the id can name a channel) and the desk's.
    pub fn channels(&self) -> Vec<String> {
        let own = self
            .kind
            .customer_sees()
            .then(|| conversation_channel(&self.conversation_id))
            .flatten();
        own.into_iter().chain([DESK_CHANNEL.to_owned()]).collect()
    }

    /// The event as AppSync Events carries it: a JSON document, as a string.
    pub fn event(&self) -> String {
        // Three fields of plain types: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A conversation's channel: `/conversations/{id}` with `_` written `-`
/// (a channel segment holds letters, digits and dashes, at most 50). An id
/// that cannot be one (a request may name any visible ASCII) has none.
pub fn conversation_channel(id: &str) -> Option<String> {
    let segment = id.replace('_', "-");
    let fits = (1..=50).contains(&segment.len()) && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    fits.then(|| format!("/{CONVERSATIONS_NAMESPACE}/{segment}"))
}

/// The conversation a channel names, as the function issued its id.
pub fn conversation_of_channel(channel: &str) -> Option<ConversationId> {
    let segment = channel.strip_prefix(&format!("/{CONVERSATIONS_NAMESPACE}/"))?;
    if segment.is_empty() || segment.contains('/') || segment.contains('_') {
        return None;
    }
    // Issued ids are `c_` and hex: the one `_` is the first dash.
    let id = segment.replacen('-', "_", 1);
    conversation_channel(&id)
        .filter(|again| again == channel)
        .and_then(|_| ConversationId::parse(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poke_is_three_fields_and_nothing_else() {
        let poke = Poke::new("c_0a1b", 7, Kind::PersonReply);
        let event: serde_json::Value = serde_json::from_str(&poke.event()).unwrap();
        assert_eq!(
            event,
            serde_json::json!({"conversation_id": "c_0a1b", "seq": 7, "kind": "person_reply"})
        );
    }

    #[test]
    fn what_only_the_team_sees_goes_to_the_desk_alone() {
        for kind in Kind::ALL {
            let channels = Poke::new("c_0a1b", 0, kind).channels();
            assert_eq!(channels.last().map(String::as_str), Some(DESK_CHANNEL), "{kind:?}");
            let to_the_customer = channels.contains(&"/conversations/c-0a1b".to_owned());
            assert_eq!(
                to_the_customer,
                matches!(kind, Kind::PersonReply | Kind::Decision | Kind::Closed),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn every_kind_has_the_contracts_word() {
        let words: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            words,
            [
                "person_reply",
                "decision",
                "closed",
                "handoff",
                "customer_wrote",
                "refund_waiting",
                "held",
                "internal_note",
                "rating"
            ]
        );
        for kind in Kind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn a_channel_is_the_id_with_dashes_and_back() {
        assert_eq!(conversation_channel("c_00ff").as_deref(), Some("/conversations/c-00ff"));
        assert_eq!(
            conversation_of_channel("/conversations/c-00ff").map(|id| id.as_str().to_owned()),
            Some("c_00ff".to_owned())
        );
        // Not a channel: a character a segment cannot hold, or too long.
        assert_eq!(conversation_channel("c_0.1"), None);
        assert_eq!(conversation_channel(&format!("c_{}", "a".repeat(60))), None);
        // Not a conversation's channel.
        for other in [
            "/desk/queue",
            "/conversations/",
            "/conversations/c-1/x",
            "/conversations/c_1",
            "/other/c-1",
        ] {
            assert_eq!(conversation_of_channel(other), None, "{other}");
        }
    }
}
