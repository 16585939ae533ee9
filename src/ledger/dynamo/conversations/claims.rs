//! A visitor's conversation claimed by whoever verified (contract 27), and
//! the customer's rating of it (contract 30): each one conditional write.

use super::*;

/// How many of the first exchanges a rating looks through for the first
/// routed turn (a screened turn has no labels).
pub(super) const RATING_LOOKBACK: i32 = 10;

/// A customer's rating as kept: the comment is theirs, masked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoredRating {
    pub solved: bool,
    pub comment: String,
    pub at: String,
    pub intent: String,
}

impl DynamoConversations {
    /// The header, then, only when it is live and the customer's, the
    /// exchanges from the first that can hold a message after `after`
    /// (contract 18): the query's range starts there and each page asks for
    /// no more exchanges than messages are still to be shown, so a read
    /// costs what it returns plus the header, however long the
    /// conversation, and a 404 costs the header alone. Both are `Query`s
    /// (the function's role has no `GetItem` on this table).
    pub(super) async fn claim_conversation(
        &self,
        id: &ConversationId,
        visitor: &str,
        claimer: &str,
        now_ms: u64,
    ) -> Result<Claimed, LedgerError> {
        // The header alone: every read goes through it, and `forget` finds
        // the conversation by it (the `by_customer` index), then deletes
        // every item of it, the visitor's words among them.
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET customer = :claimer, claimed_by = :claimer, claimed_from = :visitor, claimed_at = :now",
            )
            .condition_expression(
                // An ended turn's append or release removes its lease.
                "customer = :visitor AND expires_at > :now_s \
                 AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :now_ms)",
            )
            .expression_attribute_values(":claimer", s(claimer))
            .expression_attribute_values(":visitor", s(visitor))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        Ok(match update_item(&self.client, &update, ReturnValue::None).await? {
            Ok(_) => Claimed::Claimed,
            Err(found) => {
                let live = number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000);
                let ours = text(&found, "customer") == Some(claimer) && text(&found, "claimed_from") == Some(visitor);
                let visitors = text(&found, "customer") == Some(visitor);
                match (live, ours, visitors) {
                    (true, true, _) => Claimed::Claimed,
                    (true, _, true) => Claimed::Busy {
                        lease_until_ms: number(&found, "lease_until_ms").unwrap_or(now_ms),
                    },
                    _ => Claimed::NotFound,
                }
            }
        })
    }

    pub(super) async fn rate_once(
        &self,
        id: &ConversationId,
        customer: &str,
        rating: &crate::conversation::rating::Rating,
        now_ms: u64,
    ) -> Result<crate::conversation::rating::Rated, LedgerError> {
        use crate::conversation::rating::{Rated, intent_of};
        // The first routed turn's labels, as `routing` counts a
        // conversation (a screened turn or a person's words have none).
        let recent = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :id AND begins_with(#sk, :x)")
            .projection_expression("router")
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":id", s(id.as_str()))
            .expression_attribute_values(":x", s(EXCHANGE_PREFIX))
            .scan_index_forward(true)
            .limit(RATING_LOOKBACK)
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let labels = recent
            .items()
            .iter()
            .find_map(|item| text(item, "router").filter(|labels| !labels.is_empty()));
        let intent = intent_of(labels);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET rating_solved = :solved, rating_comment = :comment, rating_at = :at, rating_intent = :intent",
            )
            // Only what a person closed or decided is asked about (contract 30).
            .condition_expression(
                "customer = :customer AND expires_at > :now_s AND attribute_not_exists(rating_solved) \
                 AND (attribute_exists(handoff_closed_at) OR attribute_exists(decision_noted_at))",
            )
            .expression_attribute_values(":solved", AttributeValue::Bool(rating.solved))
            .expression_attribute_values(":comment", s(&rating.comment))
            .expression_attribute_values(":at", s(rfc3339(now_ms)))
            .expression_attribute_values(":intent", s(&intent))
            .expression_attribute_values(":customer", s(customer))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        Ok(match update_alone(&self.client, update).await? {
            None => Rated::Rated { intent },
            Some(found)
                if text(&found, "customer") == Some(customer)
                    && number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000) =>
            {
                if found.contains_key("rating_solved") {
                    Rated::AlreadyRated
                } else {
                    Rated::NotYet
                }
            }
            Some(_) => Rated::NotFound,
        })
    }
}
