//! The saved replies (contract 30) on DynamoDB, in the conversation table's
//! `saved-replies` partition ([`super::schema::SAVED_REPLIES_PARTITION`]).
//!
//! - **At most so many.** A new reply is one transaction: its id added to
//!   the `count` item's `ids` on the condition that they number fewer than
//!   the limit (or hold it already), and the reply written. Two approvers
//!   adding the hundredth at once: one is refused.
//! - **Every change recorded.** A reply keeps who changed it last and
//!   when, and a list of every change (`changes`: who, when, what). A
//!   deleted reply stays as a record (`deleted_by`, `deleted_at`), out of
//!   `ids` and out of the list; the same id saved again is in use anew.
//! - Nothing here expires: the items have no `expires_at`, and no
//!   `customer`, so no conversation's reader or "forget" meets them.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};

use super::schema::{
    CONVERSATION_SORT_KEY as SORT_KEY, SAVED_REPLIES_COUNT, SAVED_REPLIES_PARTITION, SAVED_REPLY_PREFIX,
};
use super::{DynamoClient, Item, every_item, malformed, n, s, text, transact};
use crate::clock::rfc3339;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;

/// A saved reply as the desk lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SavedReply {
    pub id: String,
    pub title: String,
    pub text: String,
    pub changed_by: String,
    pub changed_at: String,
}

/// What saving a reply found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    Saved,
    /// A new one, and the limit is reached: nothing was written.
    Full,
}

/// What deleting a reply found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    NotFound,
}

fn saved_reply_of(item: &Item) -> SavedReply {
    let sk = text(item, SORT_KEY).unwrap_or_default();
    SavedReply {
        id: sk.strip_prefix(SAVED_REPLY_PREFIX).unwrap_or(sk).to_owned(),
        title: text(item, "title").unwrap_or_default().to_owned(),
        text: text(item, "text").unwrap_or_default().to_owned(),
        changed_by: text(item, "changed_by").unwrap_or_default().to_owned(),
        changed_at: text(item, "changed_at").unwrap_or_default().to_owned(),
    }
}

fn change(by: Person<'_>, at: &str, what: &str) -> AttributeValue {
    let mut entry = std::collections::HashMap::from([
        ("by".to_owned(), s(by.name)),
        ("at".to_owned(), s(at)),
        ("what".to_owned(), s(what)),
    ]);
    if let Some(sub) = by.sub {
        entry.insert("by_sub".to_owned(), s(sub));
    }
    AttributeValue::L(vec![AttributeValue::M(entry)])
}

fn key_of(sk: &str) -> [(String, AttributeValue); 2] {
    [
        ("pk".to_owned(), s(SAVED_REPLIES_PARTITION)),
        (SORT_KEY.to_owned(), s(sk)),
    ]
}

/// Every saved reply in use, by title.
pub(super) async fn list(client: &DynamoClient, table: &str) -> Result<Vec<SavedReply>, LedgerError> {
    let items = every_item(
        client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk AND begins_with(#sk, :r)")
            .filter_expression("attribute_not_exists(deleted_at)")
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":pk", s(SAVED_REPLIES_PARTITION))
            .expression_attribute_values(":r", s(SAVED_REPLY_PREFIX))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send(),
    )
    .await?;
    let mut replies: Vec<SavedReply> = items.iter().map(saved_reply_of).collect();
    replies.sort_by(|a, b| (a.title.to_lowercase(), &a.id).cmp(&(b.title.to_lowercase(), &b.id)));
    Ok(replies)
}

/// One change of reply `id`: `count` (the ids in use) and `reply` (the
/// reply's own item, its change appended to `changes`) in one transaction.
/// Each update is given its key and the values it shares with the other
/// kind of change; `false` when a condition failed and nothing was written.
#[allow(clippy::too_many_arguments)]
async fn change_reply(
    client: &DynamoClient,
    table: &str,
    id: &str,
    count: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    reply: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    by: Person<'_>,
    what: &str,
    now_ms: u64,
) -> Result<bool, LedgerError> {
    let at = rfc3339(now_ms);
    let count = count
        .table_name(table)
        .set_key(Some(key_of(SAVED_REPLIES_COUNT).into_iter().collect()))
        .expression_attribute_values(":id", AttributeValue::Ss(vec![id.to_owned()]))
        .expression_attribute_values(":one", s(id))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(malformed)?;
    let reply = reply
        .table_name(table)
        .set_key(Some(key_of(&format!("{SAVED_REPLY_PREFIX}{id}")).into_iter().collect()))
        .expression_attribute_values(":by", s(by.name))
        .expression_attribute_values(":at", s(&at))
        .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
        .expression_attribute_values(":change", change(by, &at, what))
        .build()
        .map_err(malformed)?;
    let items = [
        TransactWriteItem::builder().update(count).build(),
        TransactWriteItem::builder().update(reply).build(),
    ];
    Ok(transact(client, items).await?.is_none())
}

/// Saves reply `id` (new, or changed), if fewer than `max` exist or it is one of them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn save(
    client: &DynamoClient,
    table: &str,
    id: &str,
    title: &str,
    body: &str,
    by: Person<'_>,
    max: usize,
    now_ms: u64,
) -> Result<Saved, LedgerError> {
    let count = Update::builder()
        .update_expression("ADD ids :id")
        .condition_expression("attribute_not_exists(ids) OR size(ids) < :max OR contains(ids, :one)")
        .expression_attribute_values(":max", n(max as u64));
    let reply = Update::builder()
        .update_expression(
            "SET title = :title, #text = :text, changed_by = :by, changed_at = :at, \
             changes = list_append(if_not_exists(changes, :none), :change) REMOVE deleted_by, deleted_at",
        )
        .expression_attribute_names("#text", "text")
        .expression_attribute_values(":title", s(title))
        .expression_attribute_values(":text", s(body));
    Ok(
        if change_reply(client, table, id, count, reply, by, "saved", now_ms).await? {
            Saved::Saved
        } else {
            Saved::Full
        },
    )
}

/// Deletes reply `id`: out of use, its record kept with who and when.
pub(super) async fn delete(
    client: &DynamoClient,
    table: &str,
    id: &str,
    by: Person<'_>,
    now_ms: u64,
) -> Result<Deleted, LedgerError> {
    let count = Update::builder()
        .update_expression("DELETE ids :id")
        .condition_expression("contains(ids, :one)");
    let reply = Update::builder()
        .update_expression(
            "SET deleted_by = :by, deleted_at = :at, changes = list_append(if_not_exists(changes, :none), :change)",
        )
        .condition_expression("attribute_exists(pk)");
    Ok(
        if change_reply(client, table, id, count, reply, by, "deleted", now_ms).await? {
            Deleted::Deleted
        } else {
            Deleted::NotFound
        },
    )
}
