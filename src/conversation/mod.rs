//! Conversations (contract 11): what one turn adds to a conversation, and
//! which earlier exchanges the model sees.
//!
//! The model remembers nothing between calls, so the function keeps the
//! conversation and sends a bounded part of it with every turn. The client
//! never sends history: one it could write would let it forge the
//! assistant's words or a tool's result. Everything here is pure; the store
//! is [`crate::ledger::ConversationStore`].
//!
//! History is data for the model, never executed: an exchange's tool calls
//! are sent as they were, with their results, and nothing reads them to act.
//! The one-refund latch and the 5-call budget stay per request.

pub mod person;
pub mod rating;
pub mod shown;

use serde_json::{Value, json};

use crate::chat::{Message, ToolCall};
use crate::help::{Citation, tool as help_tool};

/// Longest conversation id a request may name (contract 11).
pub const MAX_ID_LENGTH: usize = 128;
/// Random bytes of a new id: 128 bits, over the contract's 122.
const ID_RANDOM_BYTES: usize = 16;

/// A conversation's id: issued by the function, unguessable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConversationId(String);

#[derive(Debug, thiserror::Error)]
#[error("the system's random source failed: {0}")]
pub struct NoRandomness(String);

/// `N` bytes of the system's random source, in lowercase hex.
pub fn random_hex<const N: usize>() -> Result<String, NoRandomness> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|error| NoRandomness(error.to_string()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

impl ConversationId {
    /// A new id: `c_` and 128 random bits in hex.
    pub fn generate() -> Result<ConversationId, NoRandomness> {
        Ok(ConversationId(format!("c_{}", random_hex::<ID_RANDOM_BYTES>()?)))
    }

    /// An id a request named: 1 to 128 visible ASCII characters. Whether it
    /// names a conversation is the store's question.
    pub fn parse(raw: &str) -> Option<ConversationId> {
        let fits = (1..=MAX_ID_LENGTH).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_graphic());
        fits.then(|| ConversationId(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConversationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What one turn added to its conversation: the customer's message, the
/// assistant's messages with their tool calls, each tool call's result, and
/// the reply (none when the turn ended in 502 or 504).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub messages: Vec<Message>,
}

impl Exchange {
    /// The exchange of a turn whose own messages (after the system prompt
    /// and the history) were `turn_messages`, and whose reply, if any, was
    /// `reply`. The turn only keeps an assistant message with tool calls
    /// once every call has its result, so no call is ever stored without one.
    pub fn of_turn(turn_messages: &[Message], reply: Option<&str>) -> Exchange {
        let mut messages = turn_messages.to_vec();
        if let Some(reply) = reply {
            messages.push(Message::Assistant {
                content: Some(reply.to_owned()),
                tool_calls: Vec::new(),
            });
        }
        Exchange { messages }
    }

    /// The exchange with card numbers and IBANs masked in every text it
    /// holds (contract 23): the model's words and its tools' arguments too,
    /// which may repeat what the customer pasted.
    pub fn masked(self) -> Exchange {
        let mask = |text: String| match person::kept(&text) {
            std::borrow::Cow::Owned(masked) => masked,
            std::borrow::Cow::Borrowed(_) => text,
        };
        let messages = self
            .messages
            .into_iter()
            .map(|message| match message {
                Message::System(text) => Message::System(text),
                Message::User(text) => Message::User(mask(text)),
                Message::Assistant { content, tool_calls } => Message::Assistant {
                    content: content.map(mask),
                    tool_calls: tool_calls
                        .into_iter()
                        .map(|call| crate::chat::ToolCall {
                            arguments: mask(call.arguments),
                            ..call
                        })
                        .collect(),
                },
                Message::Tool { tool_call_id, content } => Message::Tool {
                    tool_call_id,
                    content: mask(content),
                },
            })
            .collect();
        Exchange { messages }
    }

    /// The help articles (id and version) its searches showed the model,
    /// read from the stored results themselves: what the model was shown is
    /// what the exchange holds, so the two cannot disagree.
    pub fn citations(&self) -> Vec<Citation> {
        let searches: Vec<&str> = self
            .messages
            .iter()
            .flat_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .filter(|call| call.name == help_tool::TOOL_NAME)
            .map(|call| call.id.as_str())
            .collect();
        help_tool::citations_in(self.messages.iter().filter_map(|message| match message {
            Message::Tool { tool_call_id, content } if searches.contains(&tool_call_id.as_str()) => {
                Some(content.as_str())
            }
            _ => None,
        }))
    }

    /// Characters of its message contents, as `CONVERSATION_MAX_CHARS` counts
    /// them: texts, tool calls' names and arguments, tool results.
    pub fn chars(&self) -> usize {
        self.messages
            .iter()
            .map(|message| match message {
                Message::System(text) | Message::User(text) => text.chars().count(),
                Message::Assistant { content, tool_calls } => {
                    content.as_deref().map_or(0, |c| c.chars().count())
                        + tool_calls
                            .iter()
                            .map(|call| call.name.chars().count() + call.arguments.chars().count())
                            .sum::<usize>()
                }
                Message::Tool { content, .. } => content.chars().count(),
            })
            .sum()
    }

    /// The customer's message that began it.
    pub fn customer_message(&self) -> Option<&str> {
        self.messages.iter().find_map(|message| match message {
            Message::User(text) => Some(text.as_str()),
            _ => None,
        })
    }

    /// The reply the customer saw, if the turn ended with one.
    pub fn reply(&self) -> Option<&str> {
        match self.messages.last() {
            Some(Message::Assistant { content, tool_calls }) if tool_calls.is_empty() => content.as_deref(),
            _ => None,
        }
    }

    /// As stored: a JSON array of messages in the Chat Completions shape.
    pub fn to_json(&self) -> String {
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|message| match message {
                Message::System(text) => json!({"role": "system", "content": text}),
                Message::User(text) => json!({"role": "user", "content": text}),
                Message::Assistant { content, tool_calls } => json!({
                    "role": "assistant",
                    "content": content,
                    "tool_calls": tool_calls.iter().map(|call| json!({
                        "id": call.id, "name": call.name, "arguments": call.arguments,
                    })).collect::<Vec<_>>(),
                }),
                Message::Tool { tool_call_id, content } => {
                    json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
                }
            })
            .collect();
        Value::Array(messages).to_string()
    }

    pub fn from_json(stored: &str) -> Result<Exchange, String> {
        let value: Value = serde_json::from_str(stored).map_err(|error| error.to_string())?;
        let text = |m: &Value, field: &str| -> Result<String, String> {
            m[field]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("a message without {field}"))
        };
        let messages = value
            .as_array()
            .ok_or("not an array")?
            .iter()
            .map(|m| match m["role"].as_str() {
                Some("system") => Ok(Message::System(text(m, "content")?)),
                Some("user") => Ok(Message::User(text(m, "content")?)),
                Some("assistant") => Ok(Message::Assistant {
                    content: m["content"].as_str().map(str::to_owned),
                    tool_calls: m["tool_calls"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .map(|call| {
                            Ok(ToolCall {
                                id: text(call, "id")?,
                                name: text(call, "name")?,
                                arguments: text(call, "arguments")?,
                            })
                        })
                        .collect::<Result<_, String>>()?,
                }),
                Some("tool") => Ok(Message::Tool {
                    tool_call_id: text(m, "tool_call_id")?,
                    content: text(m, "content")?,
                }),
                _ => Err("a message of no known role".to_owned()),
            })
            .collect::<Result<_, String>>()?;
        Ok(Exchange { messages })
    }
}

/// How long a conversation lives (contract 11): `ttl` after its last
/// exchange, and at most `max_age` after its first. Knowing the latest end
/// when the first exchange is written lets every item be given its expiry
/// once, when it is written: no append ever moves another item's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub ttl: std::time::Duration,
    pub max_age: std::time::Duration,
}

impl Lifetime {
    /// Epoch seconds at which a conversation begun at `first_ms` ends at the latest.
    pub fn ends_by_s(&self, first_ms: u64) -> u64 {
        first_ms / 1000 + self.max_age.as_secs()
    }

    /// Epoch seconds at which a conversation that ends by `ends_by_s`
    /// expires after an exchange at `now_ms`.
    pub fn expires_s(&self, now_ms: u64, ends_by_s: u64) -> u64 {
        (now_ms / 1000 + self.ttl.as_secs()).min(ends_by_s)
    }
}

/// How much history the model gets (`CONVERSATION_MAX_EXCHANGES`,
/// `CONVERSATION_MAX_CHARS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub max_exchanges: usize,
    pub max_chars: usize,
}

impl Window {
    /// The most recent exchanges that fit, whole, oldest first, from
    /// `newest_first`. The first one that does not fit ends the window:
    /// leaving out an exchange in the middle would send a conversation that
    /// never happened.
    pub fn select(&self, newest_first: Vec<Exchange>) -> Vec<Exchange> {
        let mut chars = 0;
        let mut window: Vec<Exchange> = newest_first
            .into_iter()
            .take(self.max_exchanges)
            .take_while(|exchange| {
                chars += exchange.chars();
                chars <= self.max_chars
            })
            .collect();
        window.reverse();
        window
    }
}

/// The window as the model's messages, between the system prompt and the
/// new message.
pub fn history(window: &[Exchange]) -> Vec<Message> {
    window.iter().flat_map(Exchange::for_the_model).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_expires_a_ttl_after_its_last_exchange_and_ends_by_its_maximum_age() {
        let life = Lifetime {
            ttl: std::time::Duration::from_secs(3600),
            max_age: std::time::Duration::from_secs(7200),
        };
        let ends_by = life.ends_by_s(1_000_000);
        assert_eq!(ends_by, 1000 + 7200);
        assert_eq!(life.expires_s(1_000_000, ends_by), 1000 + 3600);
        assert_eq!(
            life.expires_s(5_000_000, ends_by),
            ends_by,
            "never after the maximum age"
        );
    }

    fn exchange(said: &str, reply: &str) -> Exchange {
        Exchange::of_turn(&[Message::User(said.into())], Some(reply))
    }

    fn refund_exchange() -> Exchange {
        let call = ToolCall {
            id: "call_1".into(),
            name: "issue_refund".into(),
            arguments: r#"{"order_id":"A-1","amount_cents":1250}"#.into(),
        };
        Exchange::of_turn(
            &[
                Message::User("refund A-1".into()),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call],
                },
                Message::Tool {
                    tool_call_id: "call_1".into(),
                    content: r#"{"refund_id":"rf_1"}"#.into(),
                },
            ],
            Some("Done."),
        )
    }

    #[test]
    fn a_new_id_has_128_random_bits_and_passes_its_own_check() {
        let id = ConversationId::generate().unwrap();
        assert_eq!(id.as_str().len(), 2 + 32);
        assert_eq!(ConversationId::parse(id.as_str()), Some(id.clone()));
        assert_ne!(ConversationId::generate().unwrap(), id);
    }

    #[test]
    fn an_id_is_1_to_128_visible_ascii_characters() {
        assert!(ConversationId::parse("a").is_some());
        assert!(ConversationId::parse(&"a".repeat(128)).is_some());
        assert!(ConversationId::parse(&"a".repeat(129)).is_none());
        assert!(ConversationId::parse("").is_none());
        assert!(ConversationId::parse("a b").is_none());
        assert!(ConversationId::parse("é").is_none());
    }

    #[test]
    fn an_exchange_survives_storage_whole() {
        let stored = refund_exchange();
        assert_eq!(Exchange::from_json(&stored.to_json()).unwrap(), stored);
        assert_eq!(stored.reply(), Some("Done."));
        assert_eq!(stored.customer_message(), Some("refund A-1"));
    }

    #[test]
    fn a_failed_turn_has_no_reply() {
        let failed = Exchange::of_turn(&[Message::User("hello".into())], None);
        assert_eq!(failed.reply(), None);
    }

    #[test]
    fn the_window_keeps_the_most_recent_exchanges_whole_oldest_first() {
        let exchanges: Vec<Exchange> = (0..5).map(|i| exchange(&format!("m{i}"), "ok")).collect();
        let newest_first: Vec<Exchange> = exchanges.iter().rev().cloned().collect();
        let three = Window {
            max_exchanges: 3,
            max_chars: 1000,
        };
        assert_eq!(three.select(newest_first.clone()), exchanges[2..].to_vec());
        // Each is 4 characters: 9 fit two, never two and a half.
        let nine_chars = Window {
            max_exchanges: 10,
            max_chars: 9,
        };
        assert_eq!(nine_chars.select(newest_first), exchanges[3..].to_vec());
    }

    #[test]
    fn a_tool_call_is_never_sent_without_its_result() {
        let refund = refund_exchange();
        let newest_first = vec![exchange("thanks", "welcome"), refund.clone()];
        for max_chars in 0..=refund.chars() + 20 {
            let window = Window {
                max_exchanges: 10,
                max_chars,
            }
            .select(newest_first.clone());
            let messages = history(&window);
            let calls = messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
                .count();
            let results = messages.iter().filter(|m| matches!(m, Message::Tool { .. })).count();
            assert_eq!(calls, results, "at {max_chars} characters");
        }
    }

    #[test]
    fn an_exchange_larger_than_the_window_ends_it() {
        let newest_first = vec![exchange(&"x".repeat(50), "ok"), exchange("a", "b")];
        let window = Window {
            max_exchanges: 10,
            max_chars: 20,
        };
        assert!(window.select(newest_first).is_empty());
    }
}
