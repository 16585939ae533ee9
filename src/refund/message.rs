//! What the customer typed: a domain value the turn and the refund request
//! carry (the ledger keeps it for an approver), next to money on the ground
//! floor, so neither the HTTP edge nor the chat port owns it.

/// Longest customer message, in Unicode scalar values (not bytes).
pub const MAX_MESSAGE_CHARS: usize = 4000;

/// What the customer typed. Its `Debug` shows only the length, so it cannot
/// reach a log line through a `{:?}`; the text goes to the model and nowhere else.
#[derive(Clone, PartialEq, Eq)]
pub struct CustomerMessage(String);

impl CustomerMessage {
    pub fn new(text: impl Into<String>) -> Self {
        CustomerMessage(text.into())
    }

    pub fn text(&self) -> &str {
        &self.0
    }

    /// Length in Unicode scalar values, as the contract counts it.
    pub fn chars(&self) -> usize {
        self.0.chars().count()
    }
}

impl std::fmt::Debug for CustomerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CustomerMessage(<{} characters>)", self.chars())
    }
}
