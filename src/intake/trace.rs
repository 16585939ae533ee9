//! What the summary line needs from however far a message got: the intake
//! fills it in, the edge hands it to [`crate::ops::telemetry`] with the
//! status and the duration.

use crate::handoff::Reason;
use crate::ops::telemetry::{ConversationUse, KeyUse};
use crate::push::{Kind, Poke};
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

    /// What the turn's writes announce to the desk (contract 31): a handoff
    /// it made, else a message appended to a conversation a person has; and
    /// a refund it sent to a person. Published after the turn's writes.
    pub fn pokes(&self) -> Vec<Poke> {
        let Some(id) = self.conversation.id.as_deref() else {
            return Vec::new();
        };
        let mut pokes = Vec::new();
        if self.handoff.is_some() {
            pokes.push(Poke::new(id, 0, Kind::Handoff));
        } else if self.conversation.with_a_person && self.conversation.appended == Some("appended") {
            pokes.push(Poke::new(id, 0, Kind::CustomerWrote));
        }
        if self.refund_awaits_approval() {
            pokes.push(Poke::new(id, 0, Kind::RefundWaiting));
        }
        pokes
    }

    /// The turn's refund waits for a person (contract 18: the answer and
    /// the conversation say so, and the page polls for the decision).
    pub fn refund_awaits_approval(&self) -> bool {
        self.stats
            .as_ref()
            .is_some_and(|stats| matches!(stats.refund, Some(crate::refund::RefundOutcome::PendingApproval { .. })))
    }
}
