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
    /// it made, else a message appended to a conversation a person has
    /// (both only once the append that keeps them committed); and a refund
    /// it sent to a person (its record is in the ledger whatever the append
    /// did). Published after the turn's writes, never instead of them.
    pub fn pokes(&self) -> Vec<Poke> {
        let Some(id) = self.conversation.id.as_deref() else {
            return Vec::new();
        };
        let mut pokes = Vec::new();
        if self.conversation.appended == Some("appended") {
            if self.handoff.is_some() {
                pokes.push(Poke::new(id, 0, Kind::Handoff));
            } else if self.conversation.with_a_person {
                pokes.push(Poke::new(id, 0, Kind::CustomerWrote));
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(appended: Option<&'static str>, handoff: bool, with_a_person: bool) -> Trace {
        let mut trace = Trace::default();
        trace.conversation.id = Some("c_0a1b".into());
        trace.conversation.appended = appended;
        trace.conversation.with_a_person = with_a_person;
        trace.handoff = handoff.then_some(Reason::CustomerAsked);
        trace
    }

    fn kinds(trace: &Trace) -> Vec<Kind> {
        trace.pokes().into_iter().map(|poke| poke.kind).collect()
    }

    #[test]
    fn a_poke_announces_only_what_the_append_kept() {
        assert_eq!(kinds(&trace(Some("appended"), true, false)), [Kind::Handoff]);
        assert_eq!(kinds(&trace(Some("appended"), false, true)), [Kind::CustomerWrote]);
        // The conversation without a person: nothing for the desk.
        assert!(kinds(&trace(Some("appended"), false, false)).is_empty());
        // The append failed (or was a replay): nothing was written, nothing is announced.
        for appended in [Some("failed"), Some("already_there"), None] {
            assert!(kinds(&trace(appended, true, true)).is_empty(), "{appended:?}");
        }
        let mut unnamed = trace(Some("appended"), true, true);
        unnamed.conversation.id = None;
        assert!(unnamed.pokes().is_empty());
    }
}
