//! What the support team reads of conversations: a transcript, a line,
//! what ended in a window, those an order or a customer names, the saved
//! replies, and the internal notes added beside them.

use super::exchanges::stored_exchange;
use super::handoffs::stored_handoff;
use super::header::refund_records_of;
use super::*;

/// A person's verdict on what the customer wanted (contract 21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVerdict {
    pub intent: String,
    pub by: String,
    pub at: String,
}

/// A whole conversation, for the support team.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub id: String,
    pub customer: String,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at_s: u64,
    /// The refund records its turns wrote (the facts are the ledger's).
    pub refund_records: Vec<String>,
    pub handoff: Option<StoredHandoff>,
    pub exchanges: Vec<StoredExchange>,
    /// People's verdicts, oldest first (the last one counts).
    pub verdicts: Vec<StoredVerdict>,
    /// The support team's internal notes, oldest first (contract 30).
    pub internal_notes: Vec<super::super::internal_notes::InternalNote>,
    /// Who on the team has it (contract 30).
    pub holder: Option<super::super::holders::Holder>,
    /// The customer's "Did this solve it?" (contract 30).
    pub rating: Option<StoredRating>,
}

/// A conversation gone quiet, as the review sample lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub id: String,
    pub customer: String,
    pub exchanges: u64,
    pub handed_off: bool,
    /// RFC 3339: when its last exchange was stored.
    pub last_at: String,
    pub refund_records: Vec<String>,
}

/// A conversation in a line, from its header (contract 30's search and
/// customer panel).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConversationLine {
    pub id: String,
    pub customer: String,
    pub created_at: String,
    pub updated_at: String,
    pub exchanges: u64,
    /// `open`, `closed`, or none when it was never handed off.
    pub handoff: Option<&'static str>,
    pub held_by: Option<super::super::holders::Holder>,
    /// The refund records its turns wrote.
    #[serde(skip)]
    pub refund_records: Vec<String>,
}

impl DynamoConversations {
    /// The whole conversation, if it exists and has not expired.
    pub async fn transcript(&self, id: &str, now_ms: u64) -> Result<Option<Transcript>, LedgerError> {
        let items = self.all_items(id, false).await?;
        let Some(head) = items.iter().find(|item| text(item, SORT_KEY) == Some(HEAD)) else {
            return Ok(None);
        };
        let expires_at_s = number(head, "expires_at").unwrap_or_default();
        if expires_at_s <= now_ms / 1000 {
            return Ok(None);
        }
        let mut exchanges = items
            .iter()
            .filter(|item| text(item, SORT_KEY).is_some_and(|sk| sk.starts_with(EXCHANGE_PREFIX)))
            .map(stored_exchange)
            .collect::<Result<Vec<_>, _>>()?;
        exchanges.sort_by_key(|stored| stored.seq);
        // The sort key holds the time first: in key order is oldest first.
        let verdicts = items
            .iter()
            .filter(|item| text(item, SORT_KEY).is_some_and(|sk| sk.starts_with(super::super::schema::VERDICT_PREFIX)))
            .map(|item| StoredVerdict {
                intent: text(item, "intent").unwrap_or_default().to_owned(),
                by: text(item, "by").unwrap_or_default().to_owned(),
                at: text(item, "at").unwrap_or_default().to_owned(),
            })
            .collect();
        // The staff's own partition, and the notes kept before it existed.
        let notes = self
            .all_items(&super::super::schema::internal_notes_pk(id), false)
            .await?;
        let mut internal_notes: Vec<_> = items
            .iter()
            .chain(&notes)
            .filter(|item| {
                text(item, SORT_KEY).is_some_and(|sk| sk.starts_with(super::super::schema::INTERNAL_NOTE_PREFIX))
            })
            .map(super::super::internal_notes::internal_note_of)
            .collect();
        internal_notes.sort_by_key(|note| note.at_ms);
        let refund_records = refund_records_of(head);
        Ok(Some(Transcript {
            id: id.to_owned(),
            customer: text(head, "customer").unwrap_or_default().to_owned(),
            created_at: text(head, "created_at").unwrap_or_default().to_owned(),
            updated_at: text(head, "updated_at").unwrap_or_default().to_owned(),
            expires_at_s,
            refund_records,
            handoff: stored_handoff(head),
            exchanges,
            verdicts,
            internal_notes,
            holder: super::super::holders::holder_of(head),
            rating: head
                .get("rating_solved")
                .and_then(|v| v.as_bool().ok())
                .map(|&solved| StoredRating {
                    solved,
                    comment: text(head, "rating_comment").unwrap_or_default().to_owned(),
                    at: text(head, "rating_at").unwrap_or_default().to_owned(),
                    intent: text(head, "rating_intent").unwrap_or_default().to_owned(),
                }),
        }))
    }

    /// The open handoffs, oldest first (the `open_handoffs` index, never a scan).
    /// The live conversations whose last exchange was stored between
    /// `from_ms` and `to_ms` (contract 23's review sample), by id. A scan
    /// of the headers: the nightly review reads a day of conversations
    /// once, and no index is worth every append's write for it.
    pub async fn ended_between(&self, from_ms: u64, to_ms: u64, now_ms: u64) -> Result<Vec<Ended>, LedgerError> {
        let items = every_item(
            self.client
                .scan()
                .table_name(&self.table)
                .filter_expression("#sk = :head AND updated_at BETWEEN :from AND :to AND expires_at > :now_s")
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_values(":head", s(HEAD))
                .expression_attribute_values(":from", s(rfc3339(from_ms)))
                .expression_attribute_values(":to", s(rfc3339(to_ms)))
                .expression_attribute_values(":now_s", n(now_ms / 1000))
                .consistent_read(true)
                .into_paginator()
                .items()
                .send(),
        )
        .await?;
        let mut ended: Vec<Ended> = items
            .iter()
            .map(|item| Ended {
                id: text(item, "pk").unwrap_or_default().to_owned(),
                customer: text(item, "customer").unwrap_or_default().to_owned(),
                exchanges: number(item, "exchanges").unwrap_or_default(),
                handed_off: item.contains_key("handoff_id"),
                last_at: text(item, "updated_at").unwrap_or_default().to_owned(),
                refund_records: item
                    .get("refund_records")
                    .and_then(|set| set.as_ss().ok())
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        ended.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(ended)
    }

    /// Conversation `id` in a line, from its header alone, while it lives.
    pub async fn line(&self, id: &str, now_ms: u64) -> Result<Option<ConversationLine>, LedgerError> {
        let Some(head) = super::super::live_conversation_head(&self.client, &self.table, id, now_ms).await? else {
            return Ok(None);
        };
        let head = &head;
        let refund_records = refund_records_of(head);
        Ok(Some(ConversationLine {
            id: id.to_owned(),
            customer: text(head, "customer").unwrap_or_default().to_owned(),
            created_at: text(head, "created_at").unwrap_or_default().to_owned(),
            updated_at: text(head, "updated_at").unwrap_or_default().to_owned(),
            exchanges: number(head, "exchanges").unwrap_or_default(),
            handoff: head.contains_key("handoff_id").then(|| {
                if head.contains_key("handoff_open") {
                    super::super::schema::HANDOFF_OPEN
                } else {
                    "closed"
                }
            }),
            held_by: super::super::holders::holder_of(head),
            refund_records,
        }))
    }

    /// The conversations that named `order_id` ([`super::super::postings`]).
    pub async fn of_order(&self, order_id: &str, now_ms: u64) -> Result<Vec<String>, LedgerError> {
        super::super::postings::conversations_of_order(&self.client, &self.table, order_id, now_ms).await
    }

    /// The saved replies in use ([`super::super::saved_replies`]).
    pub async fn saved_replies(&self) -> Result<Vec<super::super::saved_replies::SavedReply>, LedgerError> {
        super::super::saved_replies::list(&self.client, &self.table).await
    }

    /// Saves a reply, new or changed, within `max` ([`super::super::saved_replies`]).
    pub async fn save_reply(
        &self,
        id: &str,
        title: &str,
        text: &str,
        by: Person<'_>,
        max: usize,
        now_ms: u64,
    ) -> Result<super::super::saved_replies::Saved, LedgerError> {
        super::super::saved_replies::save(&self.client, &self.table, id, title, text, by, max, now_ms).await
    }

    /// Deletes a saved reply, its record kept ([`super::super::saved_replies`]).
    pub async fn delete_saved_reply(
        &self,
        id: &str,
        by: Person<'_>,
        now_ms: u64,
    ) -> Result<super::super::saved_replies::Deleted, LedgerError> {
        super::super::saved_replies::delete(&self.client, &self.table, id, by, now_ms).await
    }

    /// The ids of `customer`'s conversations with the latest items first,
    /// at most `limit` (the `by_customer` index, newest first, read until
    /// `limit` conversations are seen): search and the customer panel.
    pub async fn latest_of_customer(&self, customer: &str, limit: usize) -> Result<Vec<String>, LedgerError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(super::super::schema::BY_CUSTOMER_INDEX)
            .key_condition_expression("customer = :customer")
            .expression_attribute_values(":customer", s(customer))
            .scan_index_forward(false)
            .into_paginator()
            .items()
            .send();
        let mut ids: Vec<String> = Vec::new();
        while ids.len() < limit
            && let Some(item) = pages.next().await
        {
            let item = item.map_err(unavailable)?;
            if let Some(pk) = text(&item, "pk")
                && !pk.starts_with(super::super::postings::ORDER_PREFIX)
                && let pk = pk
                    .strip_prefix(super::super::schema::INTERNAL_NOTES_PARTITION)
                    .unwrap_or(pk)
                && !ids.iter().any(|id| id == pk)
            {
                ids.push(pk.to_owned());
            }
        }
        Ok(ids)
    }
}
