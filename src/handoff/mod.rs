//! Handing a conversation to a person (contract 12): "talk to a person" must
//! always work, even when the model does not, and the customer must not
//! have to start again.
//!
//! Two ways in. Code hands off before any model call: a message that asks for
//! a person in plain words (`HANDOFF_PHRASES`), or one that trips the risk
//! screen (`RISK_TERMS`: chargebacks, lawyers, self-harm, ...); and a second
//! failed turn in a row. The model hands off with the `hand_off_to_person`
//! tool ([`tool`]), which moves no money and spends no refund latch. Either
//! way the conversation is then the people's: every later message is kept
//! and answered with a fixed reply, without the model.
//!
//! Text a customer or a model wrote may hand a conversation to a person
//! (which moves no money); it never decides anything else.

pub mod screen;
pub mod tool;

/// Why a conversation went to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The customer asked for a person (the model's tool, or the phrases).
    CustomerAsked,
    /// The model cannot help with the request.
    CannotHelp,
    /// The model's other reason.
    Other,
    /// The risk screen: such tickets belong to a trained person.
    Risk,
    /// Two turns in a row ended in 502 or 504.
    AgentFailed,
    /// The router found an intent the agent does not take (`AGENT_INTENTS`, contract 21).
    IntentNotServed,
    /// The order system did not confirm a change of address (contract 26):
    /// a person checks it, so the one the customer is promised exists.
    AddressWriteUnknown,
    /// A damaged item, a wrong item or one not as described (contract 28):
    /// not a return the agent settles.
    ReturnNeedsAPerson,
    /// The order system did not confirm a return (contract 28): a person
    /// checks it, as [`Reason::AddressWriteUnknown`].
    ReturnWriteUnknown,
    /// A return of an order refunded in rule 2's window (contract 8's rule
    /// 7): its items would be refunded twice.
    ReturnAfterRefund,
}

impl Reason {
    pub const ALL: [Reason; 10] = [
        Reason::CustomerAsked,
        Reason::CannotHelp,
        Reason::Other,
        Reason::Risk,
        Reason::AgentFailed,
        Reason::IntentNotServed,
        Reason::AddressWriteUnknown,
        Reason::ReturnNeedsAPerson,
        Reason::ReturnWriteUnknown,
        Reason::ReturnAfterRefund,
    ];

    /// As the conversation, the logs and the metrics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CustomerAsked => "customer_asked",
            Reason::CannotHelp => "cannot_help",
            Reason::Other => "other",
            Reason::Risk => "risk",
            Reason::AgentFailed => "agent_failed",
            Reason::IntentNotServed => "intent_not_served",
            Reason::AddressWriteUnknown => "address_write_unknown",
            Reason::ReturnNeedsAPerson => "return_needs_a_person",
            Reason::ReturnWriteUnknown => "return_write_unknown",
            Reason::ReturnAfterRefund => "return_after_refund",
        }
    }

    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// A handoff about to be recorded on its conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// Names it for the support team; one per conversation (see [`handoff_id`]).
    pub id: String,
    pub reason: Reason,
    /// The model's words (its tool's `summary`), kept apart from the facts;
    /// none for a handoff made by code.
    pub summary: Option<String>,
}

/// A conversation is handed off at most once, and stays with the people: its
/// handoff's id is its own, so `close-handoff` finds the conversation.
pub fn handoff_id(conversation_id: &str) -> String {
    format!("h_{}", conversation_id.strip_prefix("c_").unwrap_or(conversation_id))
}

/// The conversation a handoff id names.
pub fn conversation_of(handoff_id: &str) -> Option<String> {
    handoff_id.strip_prefix("h_").map(|rest| format!("c_{rest}"))
}

/// What the customer reads when code hands the conversation off: plain
/// words, and for the risk screen nothing that sounds like a decision.
pub fn fixed_reply(reason: Reason) -> &'static str {
    match reason {
        Reason::IntentNotServed => {
            "A person from our support team takes care of this kind of request: they will read this conversation \
             and reply to you here. You do not need to repeat anything."
        }
        Reason::Risk => {
            "Thank you for telling us. A person from our support team will read this conversation and reply to you \
             here. You do not need to repeat anything."
        }
        _ => {
            "I have passed this conversation to a person from our support team, who will take it from here. You do \
             not need to repeat anything; you can keep writing here and they will read it."
        }
    }
}

/// The reply to every message of a conversation a person has.
pub const WITH_A_PERSON: &str = "A person from our support team has this conversation and will read your message. \
                                 You do not need to repeat anything.";

/// Appended to the detail of a failed turn that handed the conversation off.
pub const AFTER_FAILURES: &str = "A person from our support team will take over this conversation.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_names_its_conversation() {
        let id = handoff_id("c_0123abcd");
        assert_eq!(id, "h_0123abcd");
        assert_eq!(conversation_of(&id).as_deref(), Some("c_0123abcd"));
        assert_eq!(conversation_of("c_0123"), None);
    }

    #[test]
    fn reasons_read_back() {
        for reason in Reason::ALL {
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
        }
    }

    #[test]
    fn the_risk_reply_decides_nothing() {
        let reply = fixed_reply(Reason::Risk).to_lowercase();
        for decision in ["refund", "approved", "declined", "rejected", "will be", "cannot"] {
            assert!(!reply.contains(decision), "{decision}");
        }
    }
}
