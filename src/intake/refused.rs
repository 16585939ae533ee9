//! Why the intake gave no reply. The edge maps each variant to exactly one
//! status ([`crate::http::answer`]); the intake never picks a status itself.

use crate::budget::Spent;
use crate::conversation::NoRandomness;
use crate::ledger::LedgerError;
use crate::secrets::SecretError;
use crate::turn::TurnError;

use super::admission::Refusal;

#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the Idempotency-Key was used with a different request body")]
    KeyReused,
    #[error("a request with this Idempotency-Key is still being answered")]
    InProgress { retry_after_secs: u64 },
    #[error("the refund ledger cannot be reached: {0}")]
    LedgerUnavailable(LedgerError),
    /// Unknown, expired, or another customer's: one answer for all three.
    #[error("no such conversation")]
    ConversationNotFound,
    #[error("the conversation's previous turn is still running")]
    ConversationBusy { retry_after_secs: u64 },
    #[error("the conversation cannot be reached: {0}")]
    ConversationUnavailable(LedgerError),
    /// The conversation was rated before (contract 30): the first stands.
    #[error("the conversation was rated already")]
    AlreadyRated,
    /// A rating before a person closed the conversation or decided a refund
    /// of it (contract 30): nothing was asked yet.
    #[error("the conversation was not closed or decided yet")]
    NotYetRateable,
    #[error(transparent)]
    NoRandomness(#[from] NoRandomness),
    /// The customer's turns of the hour, or tokens of the day, are spent.
    #[error("the customer's {} budget is spent", .0.as_str())]
    BudgetSpent(Spent),
    #[error("the budget cannot be reached: {0}")]
    BudgetUnavailable(LedgerError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Turn(#[from] TurnError),
}

impl From<Refusal> for Refused {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::InProgress { retry_after_secs } => Refused::InProgress { retry_after_secs },
            Refusal::DifferentBody => Refused::KeyReused,
            Refusal::Ledger(error) => Refused::LedgerUnavailable(error),
        }
    }
}

impl Refused {
    /// Refused for the conversation's or the budget's sake: no turn ran, and
    /// the retry it asks for must run, so the answer is never stored.
    pub fn before_the_turn(&self) -> bool {
        matches!(
            self,
            Refused::ConversationNotFound
                | Refused::ConversationBusy { .. }
                | Refused::ConversationUnavailable(_)
                | Refused::BudgetSpent(_)
                | Refused::BudgetUnavailable(_)
        )
    }
}
