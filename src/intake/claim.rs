//! A visitor's conversation passed to the customer (or guest) who has
//! verified since (contract 27): one conditional write of the store's; the
//! visitor's token reads and writes nothing of it afterwards.

use crate::conversation::ConversationId;
use crate::ledger::{BudgetStore, Claimed, ConversationStore, RequestLedger};
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::secrets::ApiKeySource;

use super::{Intake, Refused};

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// Claims conversation `id` of `visitor` (the token's user id) for
    /// `claimer`: 404 for an unknown, expired or another's conversation (or
    /// one claimed by someone else), 409 while a turn of it runs.
    pub async fn claim(&self, id: &ConversationId, visitor: &str, claimer: &str, now_ms: u64) -> Result<(), Refused> {
        match self.conversations.claim(id, visitor, claimer, now_ms).await {
            Ok(Claimed::Claimed) => Ok(()),
            Ok(Claimed::NotFound) => Err(Refused::ConversationNotFound),
            Ok(Claimed::Busy { lease_until_ms }) => Err(Refused::ConversationBusy {
                retry_after_secs: lease_until_ms.saturating_sub(now_ms).div_ceil(1000).max(1),
            }),
            Err(error) => {
                tracing::error!(event = "conversation", op = "claim", error = %error);
                Err(Refused::ConversationUnavailable(error))
            }
        }
    }
}
