//! The router's labels and people's verdicts in the conversation table, as
//! the support team reads them (contract 21): the report of `routing`, the
//! review sample's labels and the replay task's.
//!
//! | item | `sk` | attributes |
//! | --- | --- | --- |
//! | verdict | `v#<ms, 13 digits>#<by>` | `intent` (the person's, from the router's list), `by`, `at`, `expires_at` (the conversation's `ends_by`) |
//!
//! The router's own labels are on the exchanges (`router`), which live
//! until `ends_by`, `CONVERSATION_MAX_AGE_HOURS` after the first exchange,
//! whatever the header's TTL does: so a verdict is written to expire with
//! them, and a report over the last 7 days (the default maximum age) finds
//! every conversation that began in them. A verdict names no customer and
//! holds no customer text; `forget` deletes it with the conversation.

use super::conversations::{DynamoConversations, SORT_KEY};
use super::schema::EXCHANGE_PREFIX;
pub use super::schema::VERDICT_PREFIX;
use super::{Item, every_item, n, number, s, text, unavailable};
use crate::clock::rfc3339;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;
use crate::router::Intent;

/// A conversation as the router and the people saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutedConversation {
    pub id: String,
    /// RFC 3339: when its first exchange was stored.
    pub first_at: String,
    /// The labels of its first routed turn, as recorded
    /// (`order_status,refund;low;0.92` or `unknown`); none: no turn of it
    /// was routed (the screen handed it off first).
    pub first_router: Option<String>,
    /// Why it was handed to a person, if it was.
    pub handoff_reason: Option<String>,
    /// The intent a person found, the last verdict's.
    pub verdict: Option<Intent>,
    /// Its changes of address (contract 26): `order:outcome`, oldest first.
    pub addresses: Vec<String>,
    /// Its returns (contract 28): `order:outcome`, oldest first.
    pub returns: Vec<String>,
    /// The customer's "Did this solve it?" (contract 30), if they answered.
    pub solved: Option<bool>,
}

/// What recording a verdict found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Recorded,
    /// The conversation's exchanges are gone (expired, forgotten, or never
    /// there): nothing is written.
    NoConversation,
}

impl DynamoConversations {
    /// Records the intent a person found in `conversation`, to expire with
    /// its exchanges. A later verdict counts over an earlier one.
    pub async fn record_verdict(
        &self,
        conversation: &str,
        intent: Intent,
        by: Person<'_>,
        now_ms: u64,
    ) -> Result<Verdict, LedgerError> {
        let first = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("pk = :id AND begins_with(#sk, :x)")
            .projection_expression("expires_at")
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":id", s(conversation))
            .expression_attribute_values(":x", s(EXCHANGE_PREFIX))
            .limit(1)
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(ends_by) = first
            .items()
            .first()
            .and_then(|item| number(item, "expires_at"))
            .filter(|&at| at > now_ms / 1000)
        else {
            return Ok(Verdict::NoConversation);
        };
        let put = self
            .client()
            .put_item()
            .table_name(self.table())
            .item("pk", s(conversation))
            .item(SORT_KEY, s(format!("{VERDICT_PREFIX}{now_ms:013}#{}", by.name)))
            .item("intent", s(intent.as_str()))
            .item("by", s(by.name));
        let put = match by.sub {
            Some(sub) => put.item("by_sub", s(sub)),
            None => put,
        };
        put.item("at", s(rfc3339(now_ms)))
            .item("expires_at", n(ends_by))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .map_err(unavailable)?;
        Ok(Verdict::Recorded)
    }

    /// One conversation's labels and verdict (its exchanges and verdicts,
    /// without their messages); none when it has no exchange left.
    pub async fn routing_of(&self, conversation: &str) -> Result<Option<RoutedConversation>, LedgerError> {
        let items = every_item(
            self.client()
                .query()
                .table_name(self.table())
                // From the header (its rating) to the last exchange.
                .key_condition_expression("pk = :id AND #sk BETWEEN :head AND :x_end")
                .projection_expression(PROJECTION)
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_names("#seq", "seq")
                .expression_attribute_values(":id", s(conversation))
                .expression_attribute_values(":head", s(super::schema::CONVERSATION_HEAD))
                .expression_attribute_values(":x_end", s(format!("{EXCHANGE_PREFIX}~")))
                .consistent_read(true)
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        Ok(gather(&items).pop())
    }

    /// Every conversation whose first exchange was stored at or after
    /// `since_ms` (RFC 3339 compares as text), by id. A scan of the
    /// exchanges and verdicts, their labels only: a report read once in a
    /// while, over what TTL has left (`ends_by`), needs no index that every
    /// append would pay for.
    pub async fn routed_since(&self, since_ms: u64, now_ms: u64) -> Result<Vec<RoutedConversation>, LedgerError> {
        let items = every_item(
            self.client()
                .scan()
                .table_name(self.table())
                .filter_expression(
                    "(begins_with(#sk, :x) OR begins_with(#sk, :v) OR (#sk = :head AND attribute_exists(rating_solved))) \
                     AND expires_at > :now_s",
                )
                .projection_expression(PROJECTION)
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_names("#seq", "seq")
                .expression_attribute_values(":x", s(EXCHANGE_PREFIX))
                .expression_attribute_values(":v", s(VERDICT_PREFIX))
                .expression_attribute_values(":head", s(super::schema::CONVERSATION_HEAD))
                .expression_attribute_values(":now_s", n(now_ms / 1000))
                .consistent_read(true)
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        let since = rfc3339(since_ms);
        Ok(gather(&items)
            .into_iter()
            .filter(|conversation| conversation.first_at >= since)
            .collect())
    }
}

/// An attribute's text, when it holds any (the screen's turns record an
/// empty `router`).
fn present<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    text(item, name).filter(|value| !value.is_empty())
}

/// What the reads above take of an item: never its messages.
const PROJECTION: &str =
    "pk, #sk, #seq, created_at, router, handoff_reason, intent, address_changes, return_records, rating_solved";

/// Exchanges and verdicts, of any conversations in any order, put
/// together per conversation (by id); a conversation with no exchange is
/// left out (its verdicts outlived nothing to count).
fn gather(items: &[Item]) -> Vec<RoutedConversation> {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Seen<'a> {
        exchanges: Vec<(u64, &'a Item)>,
        verdicts: Vec<(&'a str, &'a str)>,
        solved: Option<bool>,
    }
    let mut by_id: BTreeMap<&str, Seen> = BTreeMap::new();
    for item in items {
        let (Some(id), Some(sk)) = (text(item, "pk"), text(item, SORT_KEY)) else {
            continue;
        };
        let seen = by_id.entry(id).or_default();
        if sk.starts_with(EXCHANGE_PREFIX) {
            seen.exchanges.push((number(item, "seq").unwrap_or_default(), item));
        } else if sk.starts_with(VERDICT_PREFIX)
            && let Some(intent) = text(item, "intent")
        {
            seen.verdicts.push((sk, intent));
        } else if sk == super::schema::CONVERSATION_HEAD {
            seen.solved = item.get("rating_solved").and_then(|v| v.as_bool().ok()).copied();
        }
    }
    by_id
        .into_iter()
        .filter_map(|(id, mut seen)| {
            seen.exchanges.sort_by_key(|(seq, _)| *seq);
            seen.verdicts.sort_unstable();
            let (_, first) = seen.exchanges.first()?;
            Some(RoutedConversation {
                id: id.to_owned(),
                first_at: text(first, "created_at").unwrap_or_default().to_owned(),
                first_router: seen
                    .exchanges
                    .iter()
                    .find_map(|(_, item)| present(item, "router"))
                    .map(str::to_owned),
                handoff_reason: seen
                    .exchanges
                    .iter()
                    .find_map(|(_, item)| present(item, "handoff_reason"))
                    .map(str::to_owned),
                verdict: seen.verdicts.last().and_then(|(_, intent)| Intent::parse(intent)),
                addresses: outcomes(&seen.exchanges, "address_changes"),
                returns: outcomes(&seen.exchanges, "return_records"),
                solved: seen.solved,
            })
        })
        .collect()
}

/// Each write's `order:outcome` of the exchanges' `attribute`, oldest first.
fn outcomes(exchanges: &[(u64, &Item)], attribute: &str) -> Vec<String> {
    exchanges
        .iter()
        .filter_map(|(_, item)| text(item, attribute))
        .filter_map(|json| serde_json::from_str::<Vec<serde_json::Value>>(json).ok())
        .flatten()
        .map(|record| {
            format!(
                "{}:{}",
                record["order_id"].as_str().unwrap_or_default(),
                record["outcome"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::AttributeValue;

    use super::*;

    fn item(pairs: &[(&str, &str)]) -> Item {
        pairs
            .iter()
            .map(|(name, value)| {
                let value = match *name {
                    "seq" => AttributeValue::N((*value).to_owned()),
                    _ => AttributeValue::S((*value).to_owned()),
                };
                ((*name).to_owned(), value)
            })
            .collect()
    }

    #[test]
    fn the_first_routed_turn_and_the_last_verdict_count() {
        let items = [
            item(&[
                ("pk", "c1"),
                ("sk", "x#000001"),
                ("seq", "1"),
                ("created_at", "b"),
                ("router", "refund;low;0.90"),
            ]),
            item(&[
                ("pk", "c1"),
                ("sk", "x#000000"),
                ("seq", "0"),
                ("created_at", "a"),
                ("router", ""),
            ]),
            item(&[("pk", "c1"), ("sk", "v#0000000000002#ann"), ("intent", "return")]),
            item(&[("pk", "c1"), ("sk", "v#0000000000001#bob"), ("intent", "refund")]),
            item(&[
                ("pk", "c2"),
                ("sk", "x#000000"),
                ("seq", "0"),
                ("created_at", "c"),
                ("router", "address_change;low;0.90"),
                ("handoff_reason", "intent_not_served"),
            ]),
            // Verdicts whose conversation's exchanges are gone count nowhere.
            item(&[("pk", "c3"), ("sk", "v#0000000000001#bob"), ("intent", "refund")]),
        ];
        let gathered = gather(&items);
        assert_eq!(gathered.len(), 2);
        assert_eq!(gathered[0].first_at, "a");
        assert_eq!(gathered[0].first_router.as_deref(), Some("refund;low;0.90"));
        assert_eq!(gathered[0].verdict, Some(Intent::Return));
        assert_eq!(gathered[0].handoff_reason, None);
        assert_eq!(gathered[1].handoff_reason.as_deref(), Some("intent_not_served"));
        assert_eq!(gathered[1].verdict, None);
    }
}
