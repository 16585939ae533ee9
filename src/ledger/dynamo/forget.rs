//! The customer's right to be forgotten (contract 11), on the ledger's side:
//! a person's job, never the function's (its role cannot do any of it).
//!
//! A refund record is the financial record of a payment the shop made, which
//! it must keep (bookkeeping, chargebacks, audit); what identifies a person
//! in it beyond the customer id is the message they typed. So the message
//! goes, and the record keeps who removed it and when: the one change to a
//! refund record outside its state machine. The customer's request records
//! (stored answers for replays, which may quote them) are deleted; they
//! would expire within `IDEMPOTENCY_TTL_HOURS` anyway. Each forget is itself
//! recorded, in a `forget#` item that never expires.

use super::{DynamoLedger, Item, every_item, n, s, text, unavailable};
use crate::clock::rfc3339;
use crate::ledger::LedgerError;
use crate::refund::RefundScope;

/// What a forget did on the ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    pub messages_removed: usize,
    pub request_records_deleted: usize,
}

impl DynamoLedger {
    /// Removes `user_id`'s messages from their refund records and deletes
    /// their request records.
    pub async fn forget_customer(&self, user_id: &str, by: &str, now_ms: u64) -> Result<Forgotten, LedgerError> {
        let mut forgotten = Forgotten::default();
        // A scan: forgetting is rare, a person's, and must find every record.
        let items: Vec<Item> = every_item(
            self.client()
                .scan()
                .table_name(self.table())
                .filter_expression("(#kind = :refund AND user_id = :user) OR begins_with(pk, :requests)")
                .expression_attribute_names("#kind", "kind")
                .expression_attribute_values(":refund", s("refund"))
                .expression_attribute_values(":user", s(user_id))
                .expression_attribute_values(":requests", s(requests_prefix(user_id)))
                .consistent_read(true)
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        for item in &items {
            let Some(pk) = text(item, "pk") else { continue };
            if text(item, "kind") == Some("refund") {
                if item.contains_key("customer_message") {
                    self.remove_message(pk, user_id, by, now_ms).await?;
                    forgotten.messages_removed += 1;
                }
            } else {
                self.client()
                    .delete_item()
                    .table_name(self.table())
                    .key("pk", s(pk))
                    .send()
                    .await
                    .map_err(unavailable)?;
                forgotten.request_records_deleted += 1;
            }
        }
        Ok(forgotten)
    }

    async fn remove_message(&self, pk: &str, user_id: &str, by: &str, now_ms: u64) -> Result<(), LedgerError> {
        self.client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(pk))
            .update_expression("REMOVE customer_message SET message_forgotten_by = :by, message_forgotten_at = :now")
            .condition_expression("attribute_exists(pk) AND user_id = :user")
            .expression_attribute_values(":by", s(by))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":user", s(user_id))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// The forget's own record: who, when, what went. Never expires.
    pub async fn record_forget(
        &self,
        user_id: &str,
        by: &str,
        now_ms: u64,
        forgotten: Forgotten,
        conversations_deleted: usize,
    ) -> Result<(), LedgerError> {
        self.client()
            .put_item()
            .table_name(self.table())
            .item("pk", s(format!("forget#{now_ms}#u{}:{user_id}", user_id.len())))
            .item("kind", s("forget"))
            .item("user_id", s(user_id))
            .item("by", s(by))
            .item("created_at", s(rfc3339(now_ms)))
            .item("messages_removed", n(forgotten.messages_removed as u64))
            .item("request_records_deleted", n(forgotten.request_records_deleted as u64))
            .item("conversations_deleted", n(conversations_deleted as u64))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

/// Every request record of `user_id` begins with this (see [`RefundScope::id`]).
fn requests_prefix(user_id: &str) -> String {
    let scope = RefundScope::for_request(user_id, "");
    let id = super::request_pk(&scope);
    // `request#u<len>:<user>|r:` less the key's tag: any key of theirs.
    id.trim_end_matches("r:").to_owned()
}
