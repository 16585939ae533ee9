//! A keyed message's admission (contract 6.3 and 13): the key claimed,
//! with the budget's turn when one is due, in one operation; a key already
//! used judged first, so a replay spends nothing; and after the turn, the
//! answer stored for replays or the key given back.

pub mod key;

pub use self::key::{Admission, IdempotencyKey, Refusal, admit, admit_existing};

use crate::budget::{Account, Reservation};
use crate::clock::now_ms;
use crate::ledger::{BudgetStore, ClaimedWithTurn, ConversationStore, KeySettlement, RequestLease, RequestLedger};
use crate::ops::telemetry::KeyUse;
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::secrets::ApiKeySource;

use super::{Intake, Outcome, Refused, Trace};

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// Claims the key, with the turn from the budget when one is due (one
    /// operation). `Some(reservation)`: the turn is taken, and is given back
    /// if the conversation then refuses the turn.
    pub(super) async fn admit(
        &self,
        lease: &RequestLease,
        account: &Account,
        budget_due: bool,
        now: u64,
        trace: &mut Trace,
    ) -> Result<(Admission, Option<Reservation>), Refused> {
        let refused = |trace: &mut Trace, refusal: Refusal| {
            trace.key_use = KeyUse::Refused;
            if let Refusal::Ledger(error) = &refusal {
                tracing::error!(event = "ledger", op = "claim_request", error = %error);
            }
            Refused::from(refusal)
        };
        if !budget_due {
            return admit(&self.ledger, lease, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal));
        }
        let reservation = Reservation {
            taken_at_ms: now,
            tokens: account.limits.turn_reservation,
        };
        match self.ledger.claim_with_turn(lease, account, now).await {
            Ok(ClaimedWithTurn::Both) => {
                trace.budget = Some("taken");
                let admission = Admission::Proceed {
                    taken_over: false,
                    conversation_id: lease.conversation_id.clone(),
                };
                Ok((admission, Some(reservation)))
            }
            Ok(ClaimedWithTurn::KeyExists(existing)) => admit_existing(&self.ledger, lease, existing, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal)),
            // Nothing was written. The contract's order puts the conversation
            // before the budget (a person's conversation is answered whatever
            // the budget), so the claim is made alone and the budget asked
            // again after the conversation's checks.
            Ok(ClaimedWithTurn::Refused(_)) => admit(&self.ledger, lease, now)
                .await
                .map(|admission| (admission, None))
                .map_err(|refusal| refused(trace, refusal)),
            Err(error) => {
                tracing::error!(event = "budget", op = "claim_with_turn", error = %error);
                // It may have landed after all (its answer lost, or late):
                // then the key is given back with the turn, so a retry runs
                // at once instead of waiting out the lease (decisions.md).
                if let Err(error) = self.ledger.abandon_claim(lease, account, reservation).await {
                    tracing::error!(event = "budget", op = "abandon_claim", error = %error);
                }
                trace.key_use = KeyUse::Refused;
                trace.budget = Some("unavailable");
                Err(Refused::BudgetUnavailable(error))
            }
        }
    }

    /// Whether the answer is stored for replays, or the key given back: a
    /// 500, 502 or 504 after which the scope has no refund record is
    /// released, so a retry runs afresh (contract 6.3). When in doubt, it is
    /// stored: a stored failure costs the customer a new message, never
    /// money. An answer about the conversation or the budget ran no turn
    /// and is never stored: the retry it asks for must run.
    pub(super) async fn keeps_answer(&self, lease: &RequestLease, outcome: &Outcome, trace: &Trace) -> bool {
        if outcome.refused.as_ref().is_some_and(Refused::before_the_turn) {
            return false;
        }
        outcome.refused.is_none()
            || trace.refund_recorded()
            || self.ledger.refund_exists(&lease.scope).await.unwrap_or_else(|error| {
                tracing::error!(event = "ledger", op = "refund_exists", error = %error, "storing the answer");
                true
            })
    }

    /// Stores the answer for replays, or gives the key back, on its own
    /// (when no exchange carried it).
    pub(super) async fn settle(&self, settlement: &KeySettlement) {
        let (op, result) = match settlement {
            KeySettlement::Store(lease, response) => (
                "complete_request",
                self.ledger.complete_request(lease, response, now_ms()).await,
            ),
            KeySettlement::Release(lease) => ("release_request", self.ledger.release_request(lease).await),
        };
        if let Err(error) = result {
            // The lease runs out at the deadline; a retry then takes the key
            // over, and the scope's refund record still guards the money.
            tracing::error!(event = "ledger", op, error = %error, "the key stays leased until the deadline");
        }
    }
}
