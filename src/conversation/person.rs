//! A person's words in a conversation (contract 18): the staff note a
//! decision writes, and a person's reply.
//!
//! Both are an exchange of one assistant message that no turn ran: no user
//! message, no tool call. The model sees it in its window as what already
//! happened, marked as a person's so that it neither takes the words as its
//! own nor runs anything from them (an approval in history never pays
//! again: nothing in history is executed). The customer sees the text
//! without the mark, as a person's message.
//!
//! A decision's note is fixed words written here from the record, never
//! from anything a customer or the model wrote: what was decided, the
//! amount, the order. A rejection's reason is the support team's audit
//! text and is not shown; a person who wants to explain writes a reply.

use crate::chat::Message;
use crate::conversation::Exchange;
use crate::refund::money::AmountCents;

/// How the model's window marks a person's words.
pub const PERSON_MARK: &str = "[From a person on the support team] ";

/// A decision of the support team that the customer is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approved,
    Rejected,
    /// `resolve --executed`: payments confirmed the refund was made.
    ConfirmedMade,
    /// `resolve --not-executed`: payments confirmed no refund was made.
    ConfirmedNotMade,
}

impl Decision {
    /// The note's fixed words for a refund of `amount` on `order_id`.
    pub fn note(self, amount: AmountCents, order_id: &str) -> String {
        match self {
            Decision::Approved => format!("A person approved your refund of {amount} for order {order_id}."),
            Decision::Rejected => format!(
                "A person reviewed your refund of {amount} for order {order_id} and did not approve it. \
                 No money was moved."
            ),
            Decision::ConfirmedMade => {
                format!("A person confirmed that your refund of {amount} for order {order_id} was made.")
            }
            Decision::ConfirmedNotMade => format!(
                "A person confirmed that your refund of {amount} for order {order_id} was not made. \
                 No money was moved."
            ),
        }
    }
}

/// What a person adds to a conversation: who (kept for the support team,
/// never shown to the customer), the text, and the refund record a
/// decision's note is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonNote {
    pub by: String,
    pub text: String,
    pub note_for: Option<String>,
}

impl PersonNote {
    /// The note of `decision` on a record.
    pub fn of_decision(decision: Decision, by: &str, record_id: &str, amount: AmountCents, order_id: &str) -> Self {
        PersonNote {
            by: by.to_owned(),
            text: decision.note(amount, order_id),
            note_for: Some(record_id.to_owned()),
        }
    }

    /// A person's reply.
    pub fn reply(by: &str, text: &str) -> Self {
        PersonNote {
            by: by.to_owned(),
            text: text.to_owned(),
            note_for: None,
        }
    }

    /// As the conversation stores it.
    pub fn exchange(&self) -> Exchange {
        Exchange {
            messages: vec![Message::Assistant {
                content: Some(format!("{PERSON_MARK}{}", self.text)),
                tool_calls: Vec::new(),
            }],
        }
    }
}

impl Exchange {
    /// A person's words, when this exchange is a person's (one marked
    /// assistant message, which no turn writes: a turn's exchange begins
    /// with the customer's message).
    pub fn person_text(&self) -> Option<&str> {
        match self.messages.as_slice() {
            [
                Message::Assistant {
                    content: Some(content),
                    tool_calls,
                },
            ] if tool_calls.is_empty() => content.strip_prefix(PERSON_MARK),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decisions_note_is_fixed_words_from_the_record() {
        let note = PersonNote::of_decision(Decision::Approved, "sam", "r_1", AmountCents::new(12000), "D-4001");
        assert_eq!(note.text, "A person approved your refund of 120.00 for order D-4001.");
        assert_eq!(note.note_for.as_deref(), Some("r_1"));
        for decision in [Decision::Rejected, Decision::ConfirmedMade, Decision::ConfirmedNotMade] {
            let text = decision.note(AmountCents::new(1250), "A-1");
            assert!(text.contains("12.50") && text.contains("order A-1"), "{text}");
        }
    }

    #[test]
    fn a_persons_exchange_is_known_as_one_and_survives_storage() {
        let note = PersonNote::reply("sam", "We have sent a new sofa.");
        let stored = Exchange::from_json(&note.exchange().to_json()).unwrap();
        assert_eq!(stored.person_text(), Some("We have sent a new sofa."));
        assert_eq!(stored.customer_message(), None, "no customer words in it");
    }

    #[test]
    fn a_turns_exchange_is_never_a_persons_even_if_its_reply_wears_the_mark() {
        let forged = Exchange::of_turn(&[Message::User("hi".into())], Some(&format!("{PERSON_MARK}approved")));
        assert_eq!(forged.person_text(), None);
        let reply_alone = Exchange {
            messages: vec![Message::Assistant {
                content: Some("approved".into()),
                tool_calls: Vec::new(),
            }],
        };
        assert_eq!(reply_alone.person_text(), None, "unmarked");
    }
}
