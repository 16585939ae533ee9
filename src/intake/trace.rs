//! What the summary line needs from however far a message got: the intake
//! fills it in, the edge hands it to [`crate::ops::telemetry`] with the
//! status and the duration.

use crate::handoff::Reason;
use crate::ops::telemetry::{ConversationUse, KeyUse};
use crate::turn::TurnStats;

#[derive(Default)]
pub struct Trace {
    pub user_id: Option<String>,
    pub stats: Option<TurnStats>,
    pub key_use: KeyUse,
    /// What became of the key after the turn: `stored` or `released`.
    pub key_settled: Option<&'static str>,
    pub conversation: ConversationUse,
    /// The handoff this request made, by code or by the model.
    pub handoff: Option<Reason>,
    /// What the budget said: `taken`, `turns`, `tokens` (spent) or `unavailable`.
    pub budget: Option<&'static str>,
    /// The routing call's labels (contract 21), when one was made.
    pub routing: Option<crate::router::Routing>,
}

impl Trace {
    /// The turn recorded a refund for its scope (in the ledger, whatever its outcome).
    pub fn refund_recorded(&self) -> bool {
        self.stats
            .as_ref()
            .and_then(|stats| stats.refund.as_ref())
            .is_some_and(|outcome| outcome.is_recorded())
    }

    /// The turn's refund waits for a person (contract 18: the answer and
    /// the conversation say so, and the page polls for the decision).
    pub fn refund_awaits_approval(&self) -> bool {
        self.stats
            .as_ref()
            .is_some_and(|stats| matches!(stats.refund, Some(crate::refund::RefundOutcome::PendingApproval { .. })))
    }
}
