//! The customer's "Did this solve it?" (contract 30): one conditional write
//! of the store's, counted by outcome and intent (`Ratings`), the comment
//! never logged.

use crate::conversation::ConversationId;
use crate::conversation::rating::{Rated, Rating};
use crate::ledger::{BudgetStore, ConversationStore, RequestLedger};
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::secrets::ApiKeySource;

use super::{Intake, Refused};

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    Intake<K, R, L, C, O>
{
    /// `customer`'s rating of conversation `id`: 404 for an unknown,
    /// expired or another's conversation, 409 for a second rating (the
    /// first stands) or before a person closed it or decided a refund.
    pub async fn rate(&self, id: &ConversationId, customer: &str, rating: &Rating, now_ms: u64) -> Result<(), Refused> {
        match self.conversations.rate(id, customer, rating, now_ms).await {
            Ok(Rated::Rated { intent }) => {
                // A visitor's is anyone's to send: counted apart, it never
                // moves the customers' figure.
                let metric = if crate::visitor::is_visitor(customer) {
                    "VisitorRatings"
                } else {
                    "Ratings"
                };
                metrics::counter!(metric, "Outcome" => rating.outcome(), "Intent" => intent.clone()).increment(1);
                tracing::info!(
                    event = "rating",
                    metric,
                    outcome = rating.outcome(),
                    intent = %intent,
                    comment_chars = rating.comment.chars().count(),
                );
                Ok(())
            }
            Ok(Rated::AlreadyRated) => Err(Refused::AlreadyRated),
            Ok(Rated::NotYet) => Err(Refused::NotYetRateable),
            Ok(Rated::NotFound) => Err(Refused::ConversationNotFound),
            Err(error) => {
                tracing::error!(event = "conversation", op = "rate", error = %error);
                Err(Refused::ConversationUnavailable(error))
            }
        }
    }
}
