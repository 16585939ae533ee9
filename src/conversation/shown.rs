//! What the widget reads of a conversation (contract 18): the customer's
//! messages, the agent's replies and a person's words, numbered so that a
//! poll asks only for what is new. Tool calls, tool results, handoff
//! summaries and staff names are never shown.
//!
//! A message's `seq` comes from its exchange's: `2 × seq` for the
//! customer's message (or a person's words, an exchange of its own), and
//! `2 × seq + 1` for the agent's reply. Increasing, not consecutive, and
//! derived from what is stored, so no counter has to be kept beside it.

use serde::Serialize;

use crate::conversation::Exchange;
use crate::orders::returns::Label;

/// The most messages one read returns (contract 18).
pub const MAX_SHOWN: usize = 100;

/// Who wrote a shown message (its `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Author {
    Customer,
    Agent,
    Person,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownMessage {
    pub seq: u64,
    pub from: Author,
    pub text: String,
    /// RFC 3339: when its exchange was stored.
    pub at: String,
    /// On the turn's reply (or its message, when it has none): a return's
    /// label that the turn started, apart from the text (contract 28).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
}

/// A conversation as its customer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub handed_off: bool,
    /// Its handoff is open: nobody closed it (contract 32: the page says
    /// when a person will answer).
    pub handoff_open: bool,
    /// A refund of the conversation waits for a person's decision.
    pub awaiting_approval: bool,
    pub messages: Vec<ShownMessage>,
    /// A person closed the handoff or decided a refund, and the customer
    /// has not said whether it solved it (contract 30): the page asks, once.
    pub ask_rating: bool,
    /// While its handoff is open: when a person will answer (contract 32),
    /// code's words, filled by the read (the stores leave it none).
    pub person_expected: Option<crate::office_hours::expected::PersonExpected>,
}

/// The first exchange that can hold a message after `after`: exchange `n`
/// holds messages `2n` and `2n + 1`.
pub fn first_exchange_after(after: Option<u64>) -> u64 {
    after.map_or(0, |after| after.div_ceil(2))
}

/// The `seq` a person's message stored as exchange `exchange` is read as.
pub fn person_message_seq(exchange: u64) -> u64 {
    2 * exchange
}

/// The shown messages of one stored exchange, numbered from its `seq`,
/// with the label its turn started a return with.
pub fn messages_of(seq: u64, at: &str, exchange: &Exchange, label: Option<&Label>) -> Vec<ShownMessage> {
    let message = |seq, from: Author, text: &str| ShownMessage {
        seq,
        from,
        text: text.to_owned(),
        at: at.to_owned(),
        label: None,
    };
    if let Some(text) = exchange.person_text() {
        return vec![message(person_message_seq(seq), Author::Person, text)];
    }
    let mut shown = Vec::with_capacity(2);
    if let Some(text) = exchange.customer_message() {
        shown.push(message(2 * seq, Author::Customer, text));
    }
    if let Some(text) = exchange.reply() {
        shown.push(message(2 * seq + 1, Author::Agent, text));
    }
    if let Some(last) = shown.last_mut() {
        last.label = label.cloned();
    }
    shown
}

/// The messages after `after` (all without it) of exchanges given oldest
/// first as `(seq, at, exchange)`, at most [`MAX_SHOWN`].
pub fn after<'a>(
    exchanges: impl IntoIterator<Item = (u64, &'a str, &'a Exchange, Option<&'a Label>)>,
    after: Option<u64>,
) -> Vec<ShownMessage> {
    exchanges
        .into_iter()
        .flat_map(|(seq, at, exchange, label)| messages_of(seq, at, exchange, label))
        .filter(|message| after.is_none_or(|after| message.seq > after))
        .take(MAX_SHOWN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Message, ToolCall};
    use crate::conversation::person::{Person, PersonNote};

    fn refund_turn() -> Exchange {
        Exchange::of_turn(
            &[
                Message::User("refund D-4001 120.00".into()),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "issue_refund".into(),
                        arguments: r#"{"order_id":"D-4001","amount_cents":12000}"#.into(),
                    }],
                },
                Message::Tool {
                    tool_call_id: "call_1".into(),
                    content: r#"{"status":"pending_approval"}"#.into(),
                },
            ],
            Some("A person will review it."),
        )
    }

    #[test]
    fn tool_calls_and_results_are_never_shown_and_a_persons_words_are_a_persons() {
        let turn = refund_turn();
        let note = PersonNote::reply(Person::named("sam"), "Approved.").exchange();
        let failed = Exchange::of_turn(&[Message::User("still there?".into())], None);
        let stored = [(0, "t0", &turn, None), (1, "t1", &note, None), (2, "t2", &failed, None)];
        let shown = after(stored, None);
        let view: Vec<(u64, Author, &str)> = shown.iter().map(|m| (m.seq, m.from, m.text.as_str())).collect();
        assert_eq!(
            view,
            [
                (0, Author::Customer, "refund D-4001 120.00"),
                (1, Author::Agent, "A person will review it."),
                (2, Author::Person, "Approved."),
                (4, Author::Customer, "still there?"),
            ]
        );
        assert_eq!(shown[2].at, "t1");
        assert!(!serde_json::to_string(&shown).unwrap().contains("issue_refund"));
    }

    #[test]
    fn after_n_gives_only_later_messages_and_starts_at_the_exchange_that_can_hold_them() {
        let turn = refund_turn();
        let stored: Vec<(u64, &str, &Exchange, Option<&Label>)> = (0..4).map(|seq| (seq, "t", &turn, None)).collect();
        for n in 0..8 {
            let shown = after(stored.iter().copied(), Some(n));
            assert!(shown.iter().all(|m| m.seq > n), "after {n}");
            assert_eq!(shown.len() as u64, 7 - n, "after {n}");
            let first = first_exchange_after(Some(n));
            let from_first = after(stored.iter().copied().filter(|(seq, ..)| *seq >= first), Some(n));
            assert_eq!(
                from_first, shown,
                "reading from exchange {first} loses nothing after {n}"
            );
        }
        assert_eq!(first_exchange_after(None), 0);
    }

    /// Contract 28: a started return's label rides on the turn's reply, or
    /// on its message when the turn failed before one; nowhere else.
    #[test]
    fn a_label_is_shown_on_its_turns_last_message() {
        let label = Label {
            url: "https://labels.example/l/1".into(),
            expires_at: "2026-12-20T00:00:00Z".into(),
            use_by: None,
        };
        let turn = refund_turn();
        let failed = Exchange::of_turn(&[Message::User("return it".into())], None);
        let shown = after([(0, "t", &turn, Some(&label)), (1, "t", &failed, Some(&label))], None);
        let labelled: Vec<(u64, bool)> = shown.iter().map(|m| (m.seq, m.label.is_some())).collect();
        assert_eq!(labelled, [(0, false), (1, true), (2, true)]);
        let json = serde_json::to_value(&shown).unwrap();
        assert!(json[0].get("label").is_none(), "{json}");
        assert_eq!(json[1]["label"]["url"], "https://labels.example/l/1");
    }

    #[test]
    fn at_most_a_hundred_oldest_first() {
        let turn = refund_turn();
        let stored: Vec<(u64, &str, &Exchange, Option<&Label>)> = (0..80).map(|seq| (seq, "t", &turn, None)).collect();
        let shown = after(stored.iter().copied(), None);
        assert_eq!(shown.len(), MAX_SHOWN);
        assert_eq!((shown[0].seq, shown[99].seq), (0, 99));
    }
}
