//! Forgetting a customer (contract 11): their conversations found by the
//! `by_customer` index, deleted item by item, and their order postings.

use super::*;

/// DynamoDB's batch write limit.
pub(super) const BATCH: usize = 25;

impl DynamoConversations {
    /// The ids of a customer's conversations, expired ones included (from
    /// the `by_customer` index).
    pub async fn of_customer(&self, customer: &str) -> Result<Vec<String>, LedgerError> {
        let items = every_item(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(super::super::schema::BY_CUSTOMER_INDEX)
                .key_condition_expression("customer = :customer")
                .expression_attribute_values(":customer", s(customer))
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        let mut ids: Vec<String> = items
            .iter()
            .filter_map(|item| text(item, "pk"))
            // An order's posting names the customer too: not a conversation.
            .filter(|pk| !pk.starts_with(super::super::postings::ORDER_PREFIX))
            // Internal notes are their conversation's.
            .map(|pk| {
                pk.strip_prefix(super::super::schema::INTERNAL_NOTES_PARTITION)
                    .unwrap_or(pk)
            })
            .map(str::to_owned)
            .collect();
        // Every item of a conversation is in the index: one id each.
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Deletes `customer`'s postings of orders ([`super::super::postings`]).
    pub async fn forget_postings(&self, customer: &str) -> Result<usize, LedgerError> {
        super::super::postings::forget(&self.client, &self.table, customer).await
    }

    /// Deletes every item of the conversation: the support team's "forget",
    /// never the function's (its role has no delete on this table). Returns
    /// how many items went.
    pub async fn delete(&self, id: &str) -> Result<usize, LedgerError> {
        let mut keys = self.all_items(id, true).await?;
        keys.extend(
            self.all_items(&super::super::schema::internal_notes_pk(id), true)
                .await?,
        );
        for chunk in keys.chunks(BATCH) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|key| {
                    DeleteRequest::builder()
                        .set_key(Some(key.clone()))
                        .build()
                        .map(|delete| WriteRequest::builder().delete_request(delete).build())
                        .map_err(malformed)
                })
                .collect::<Result<_, _>>()?;
            // Unprocessed items (throttling) are sent again, a bounded number of times.
            for _ in 0..8 {
                if pending.is_empty() {
                    break;
                }
                let output = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, pending)
                    .send()
                    .await
                    .map_err(unavailable)?;
                pending = output
                    .unprocessed_items()
                    .and_then(|unprocessed| unprocessed.get(&self.table))
                    .cloned()
                    .unwrap_or_default();
            }
            if !pending.is_empty() {
                return Err(LedgerError::Unavailable("DynamoDB kept items unprocessed".into()));
            }
        }
        Ok(keys.len())
    }
}
