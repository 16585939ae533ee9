//! The end of a turn: its exchange appended and its conversation given
//! back, with its tokens and the key's settlement in the same transaction;
//! whatever the append could not carry written on its own.

use crate::clock::now_ms;
use crate::ledger::{Appended, BudgetStore, ConversationStore, KeySettlement, LedgerError, RequestLedger};
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::secrets::ApiKeySource;

use super::conversation::PendingExchange;
use super::{Intake, Trace};

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// Appends the turn's exchange and gives the conversation back.
    /// `marked`: once per refund scope (see [`crate::ledger::NewExchange::marked`]).
    pub(super) async fn finish(
        &self,
        pending: Option<PendingExchange>,
        marked: bool,
        settlement: Option<KeySettlement>,
        trace: &mut Trace,
    ) {
        if let Some(settlement) = &settlement {
            trace.key_settled = Some(match settlement {
                KeySettlement::Store(..) => "stored",
                KeySettlement::Release(_) => "released",
            });
        }
        let Some(mut pending) = pending else {
            if let Some(settlement) = &settlement {
                self.settle(settlement).await;
            }
            return;
        };
        pending.new.marked = marked;
        pending.new.key = settlement;
        let now = now_ms();
        // Due in office minutes from the handoff's own time (contract 32).
        if pending.new.handoff.is_some() {
            pending.new.handoff_due_at_ms = self.config.office.due_at_ms(now);
        }
        let appended = self
            .conversations
            .append(&pending.lease, &pending.held, &pending.new, now)
            .await;
        // `Some(false)`: nothing of it was written; `None`: it may have been
        // (a timeout, or an answer that was lost).
        let carried = match &appended {
            Ok(Appended::Appended) => Some(true),
            Ok(Appended::KeyNotOurs) => {
                tracing::error!(
                    event = "ledger",
                    op = "settle_request",
                    "the key is held by another request"
                );
                Some(true)
            }
            Ok(Appended::AlreadyThere) => Some(false),
            Err(error) => {
                // The answer stands: the ledger, not the conversation, is the record of money.
                tracing::error!(event = "conversation", op = "append", error = %error);
                // The turn has ended: its conversation is free (contract 11),
                // not held until the lease runs out.
                self.release_conversation(&pending.lease, &pending.held).await;
                match error {
                    // Cancelled: nothing was written.
                    LedgerError::Conflict(_) | LedgerError::Contended => Some(false),
                    _ => None,
                }
            }
        };
        trace.conversation.appended = Some(match appended {
            Ok(Appended::Appended | Appended::KeyNotOurs) => "appended",
            Ok(Appended::AlreadyThere) => "already_there",
            Err(_) => "failed",
        });
        if carried == Some(true) {
            return;
        }
        // The key's settlement recognises its own landed write, so it is
        // made whatever the append did; the tokens' settlement only when
        // the append certainly wrote nothing, since it would count twice
        // (an unknown one keeps its reservation, as a dead turn does).
        if carried == Some(false) {
            self.settle_tokens(pending.new.tokens).await;
        }
        if let Some(settlement) = &pending.new.key {
            self.settle(settlement).await;
        }
    }
}
