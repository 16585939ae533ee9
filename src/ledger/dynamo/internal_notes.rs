//! Internal notes (contract 30): a word for the support team only, kept
//! on the conversation as an item of its own (`n#<click>`), never as an
//! exchange. The customer's GET, the events and the model's window read
//! exchanges alone, so a note reaches none of them; the desk's and the
//! terminal's transcripts read it beside them. It names its `customer`
//! (and `created_at`), so forgetting a customer finds it through the
//! `by_customer` index, and it lives as long as the conversation
//! (`expires_at` is its `ends_by`).

use super::schema::{CONVERSATION_SORT_KEY as SORT_KEY, INTERNAL_NOTE_PREFIX};
use super::{DynamoClient, Item, n, number, s, text, unavailable};
use crate::clock::rfc3339;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;

/// An internal note as kept: who, when, and the text (masked).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InternalNote {
    pub by: String,
    pub at: String,
    #[serde(skip)]
    pub at_ms: u64,
    pub text: String,
}

/// What adding a note found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Noted {
    /// Kept (or kept already by the same click).
    Kept,
    /// Unknown or expired.
    NotFound,
}

pub fn internal_note_of(item: &Item) -> InternalNote {
    InternalNote {
        by: text(item, "by").unwrap_or_default().to_owned(),
        at: text(item, "at").unwrap_or_default().to_owned(),
        at_ms: number(item, "at_ms").unwrap_or_default(),
        text: text(item, "text").unwrap_or_default().to_owned(),
    }
}

/// Keeps `text_kept` (checked and masked by the caller) on the conversation
/// whose live header is `head`; `click` names the note, so the same click
/// keeps one.
pub(super) async fn add(
    client: &DynamoClient,
    table: &str,
    head: &Item,
    by: Person<'_>,
    text_kept: &str,
    click: &str,
    now_ms: u64,
) -> Result<Noted, LedgerError> {
    let id = text(head, "pk").unwrap_or_default();
    let ends_by = number(head, "ends_by")
        .or_else(|| number(head, "expires_at"))
        .unwrap_or_default();
    let mut put = client
        .put_item()
        .table_name(table)
        .item("pk", s(super::schema::internal_notes_pk(id)))
        .item(SORT_KEY, s(format!("{INTERNAL_NOTE_PREFIX}{click}")))
        .item("customer", s(text(head, "customer").unwrap_or_default()))
        .item("created_at", s(rfc3339(now_ms)))
        .item("at", s(rfc3339(now_ms)))
        .item("at_ms", n(now_ms))
        .item("by", s(by.name))
        .item("text", s(text_kept))
        .item("expires_at", n(ends_by))
        .condition_expression("attribute_not_exists(pk)");
    if let Some(sub) = by.sub {
        put = put.item("by_sub", s(sub));
    }
    match put.send().await {
        Ok(_) => Ok(Noted::Kept),
        Err(error) => {
            use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
            match error.as_service_error() {
                // The same click, sent again: its note is there.
                Some(Failed(_)) => Ok(Noted::Kept),
                _ => Err(unavailable(error)),
            }
        }
    }
}
