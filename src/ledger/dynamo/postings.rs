//! Which conversations named an order (contract 30's search by order id):
//! a posting `order#<order id>` / `<conversation id>` in the conversation
//! table, put in the turn's own append for each order the order system
//! found for the customer that turn (code's reads, never the model's
//! words). It names its `customer` and `created_at`, so "forget" finds it
//! through `by_customer`, and expires with its conversation (`ends_by`).

use aws_sdk_dynamodb::types::{DeleteRequest, Put, TransactWriteItem, WriteRequest};

use super::schema::{BY_CUSTOMER_INDEX, CONVERSATION_SORT_KEY as SORT_KEY};
use super::{DynamoClient, Item, every_item, malformed, n, s, text, unavailable};
use crate::clock::rfc3339;
use crate::ledger::LedgerError;

pub const ORDER_PREFIX: &str = "order#";
/// At most this many postings ride in one append (a turn reads a few orders).
const MAX_PER_TURN: usize = 8;

/// The posting's partition of an order.
pub fn order_pk(order_id: &str) -> String {
    format!("{ORDER_PREFIX}{order_id}")
}

/// The puts of one append: conversation `id` of `customer` named `orders`.
pub(super) fn puts(
    table: &str,
    id: &str,
    customer: &str,
    orders: &[String],
    now_ms: u64,
    ends_by: u64,
) -> Result<Vec<TransactWriteItem>, LedgerError> {
    let mut orders: Vec<&String> = orders.iter().collect();
    orders.sort();
    orders.dedup();
    orders
        .into_iter()
        .take(MAX_PER_TURN)
        .map(|order| {
            Put::builder()
                .table_name(table)
                .item("pk", s(order_pk(order)))
                .item(SORT_KEY, s(id))
                .item("customer", s(customer))
                .item("created_at", s(rfc3339(now_ms)))
                .item("expires_at", n(ends_by))
                .build()
                .map(|put| TransactWriteItem::builder().put(put).build())
                .map_err(malformed)
        })
        .collect()
}

/// The conversations that named `order_id`.
pub(super) async fn conversations_of_order(
    client: &DynamoClient,
    table: &str,
    order_id: &str,
    now_ms: u64,
) -> Result<Vec<String>, LedgerError> {
    let items = every_item(
        client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .filter_expression("expires_at > :now_s")
            .expression_attribute_values(":pk", s(order_pk(order_id)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .into_paginator()
            .items()
            .send(),
    )
    .await?;
    Ok(items
        .iter()
        .filter_map(|item| text(item, SORT_KEY).map(str::to_owned))
        .collect())
}

/// Deletes `customer`'s postings (forgetting them, contract 11): each by
/// its own key, as another customer's posting of the same order stays.
pub(super) async fn forget(client: &DynamoClient, table: &str, customer: &str) -> Result<usize, LedgerError> {
    let keys: Vec<Item> = every_item(
        client
            .query()
            .table_name(table)
            .index_name(BY_CUSTOMER_INDEX)
            .key_condition_expression("customer = :customer")
            .filter_expression("begins_with(pk, :order)")
            .expression_attribute_values(":customer", s(customer))
            .expression_attribute_values(":order", s(ORDER_PREFIX))
            .into_paginator()
            .items()
            .send(),
    )
    .await?;
    for key in &keys {
        let key: Item = key
            .iter()
            .filter(|(name, _)| name.as_str() == "pk" || name.as_str() == SORT_KEY)
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let delete = DeleteRequest::builder().set_key(Some(key)).build().map_err(malformed)?;
        client
            .batch_write_item()
            .request_items(table, vec![WriteRequest::builder().delete_request(delete).build()])
            .send()
            .await
            .map_err(unavailable)?;
    }
    Ok(keys.len())
}
