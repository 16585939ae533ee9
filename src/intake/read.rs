//! The widget's read of a conversation (contract 18): no budget, no model,
//! no lease, one read of the store. What it may show is the conversation's
//! own rule ([`crate::conversation::shown`]).

use crate::conversation::ConversationId;
use crate::conversation::shown::Shown;
use crate::ledger::{BudgetStore, ConversationStore, RequestLedger};
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::secrets::ApiKeySource;

use super::{Intake, Refused};

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// What `customer` reads of conversation `id` after message `after`.
    pub async fn read(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        now_ms: u64,
    ) -> Result<Shown, Refused> {
        match self.conversations.shown(id, customer, after, now_ms).await {
            // While a handoff is open, when a person will answer (contract
            // 32), said afresh at each read: a page left open overnight
            // reads the morning's sentence.
            Ok(Some(mut shown)) => {
                if shown.handoff_open {
                    shown.person_expected = Some(self.person_expected().await);
                }
                Ok(shown)
            }
            Ok(None) => Err(Refused::ConversationNotFound),
            Err(error) => {
                tracing::warn!(event = "conversation_read_failed", error = %error);
                Err(Refused::ConversationUnavailable(error))
            }
        }
    }
}
