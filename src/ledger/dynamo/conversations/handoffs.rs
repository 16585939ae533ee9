//! The person's side of a conversation: its handoff, the queue of open
//! ones in pages, closing one, and who on the team has it.

use super::*;

/// A handoff as the conversation records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHandoff {
    pub id: String,
    pub conversation_id: String,
    pub customer: String,
    pub reason: String,
    /// The model's words, kept apart from the facts; none when code handed off.
    pub summary: Option<String>,
    pub at: String,
    pub request_id: String,
    /// Who closed it and when; `None` while it is open.
    pub closed: Option<(String, String)>,
    /// The router's labels of the turn that handed off (contract 21).
    pub router: Option<String>,
    /// When the customer last wrote (RFC 3339; contract 30).
    pub customer_wrote_at: Option<String>,
    /// Who on the team has the conversation (contract 30).
    pub holder: Option<super::super::holders::Holder>,
    /// When a person owes the first reply (RFC 3339; contract 32): none
    /// for a handoff made before it was recorded, or when the hours hold none.
    pub due_at: Option<String>,
    /// When a person first replied, decided or closed it (RFC 3339).
    pub first_reply_at: Option<String>,
    /// The start of the customer's last message, masked as kept (contract 36).
    pub customer_last_words: Option<String>,
}

/// Whose open handoffs a read is of: customers' and guests', or visitors'
/// (contract 30: the queue keeps them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffLine {
    People,
    Visitors,
}

/// A page of open handoffs, and how many more wait.
#[derive(Debug, Clone)]
pub struct HandoffPage {
    pub handoffs: Vec<StoredHandoff>,
    /// Up to [`MORE_COUNTED`]: "that many or more".
    pub more: u64,
}

/// The most a page's "more" counts, in one read: the queue's answer and its
/// reads stay bounded whatever the number open.
pub const MORE_COUNTED: u64 = 1000;

/// What closing a handoff found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    Closed(StoredHandoff),
    AlreadyClosed(StoredHandoff),
    /// Someone else on the team has the conversation (contract 30).
    HeldBy(super::super::holders::Holder),
    NotFound,
}

pub(super) fn stored_handoff(head: &Item) -> Option<StoredHandoff> {
    Some(StoredHandoff {
        id: text(head, "handoff_id")?.to_owned(),
        conversation_id: text(head, "pk").unwrap_or_default().to_owned(),
        customer: text(head, "customer").unwrap_or_default().to_owned(),
        reason: text(head, "handoff_reason").unwrap_or_default().to_owned(),
        summary: text(head, "handoff_summary").map(str::to_owned),
        at: text(head, "handoff_at").unwrap_or_default().to_owned(),
        request_id: text(head, "handoff_request_id").unwrap_or_default().to_owned(),
        closed: text(head, "handoff_closed_by")
            .zip(text(head, "handoff_closed_at"))
            .map(|(by, at)| (by.to_owned(), at.to_owned())),
        router: text(head, "handoff_router").map(str::to_owned),
        customer_wrote_at: text(head, "customer_wrote_at").map(str::to_owned),
        holder: super::super::holders::holder_of(head),
        due_at: text(head, "handoff_due_at").map(str::to_owned),
        first_reply_at: text(head, "handoff_first_reply_at").map(str::to_owned),
        customer_last_words: text(head, "customer_last_words").map(str::to_owned),
    })
}

impl DynamoConversations {
    pub async fn open_handoffs(&self) -> Result<Vec<StoredHandoff>, LedgerError> {
        let mut handoffs = Vec::new();
        for line in [HandoffLine::People, HandoffLine::Visitors] {
            let items = every_item(
                self.open_query(line)
                    .scan_index_forward(true)
                    .into_paginator()
                    .items()
                    .send(),
            )
            .await?;
            handoffs.extend(items.iter().filter_map(stored_handoff));
        }
        handoffs.sort_by(|a, b| a.at.cmp(&b.at));
        Ok(handoffs)
    }

    /// The oldest `page` open handoffs of `line`, oldest first, and how
    /// many more wait (counted up to [`MORE_COUNTED`], one bounded read):
    /// what the desk's queue reads, the same whatever the number open
    /// (contract 30).
    pub async fn open_handoffs_page(&self, line: HandoffLine, page: usize) -> Result<HandoffPage, LedgerError> {
        let first = self
            .open_query(line)
            .scan_index_forward(true)
            .limit(i32::try_from(page).unwrap_or(i32::MAX).max(1))
            .send()
            .await
            .map_err(unavailable)?;
        let handoffs: Vec<StoredHandoff> = first.items().iter().filter_map(stored_handoff).collect();
        let more = match first.last_evaluated_key() {
            None => 0,
            Some(after) => {
                let counted = self
                    .open_query(line)
                    .scan_index_forward(true)
                    .select(aws_sdk_dynamodb::types::Select::Count)
                    .set_exclusive_start_key(Some(after.clone()))
                    .limit(MORE_COUNTED as i32)
                    .send()
                    .await
                    .map_err(unavailable)?;
                counted.count().max(0) as u64
            }
        };
        Ok(HandoffPage { handoffs, more })
    }

    /// When the oldest open handoff of `line` was made (one item read).
    pub async fn oldest_open_handoff(&self, line: HandoffLine) -> Result<Option<String>, LedgerError> {
        Ok(self
            .open_handoffs_page(line, 1)
            .await?
            .handoffs
            .into_iter()
            .next()
            .map(|handoff| handoff.at))
    }

    pub(super) fn open_query(
        &self,
        line: HandoffLine,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(super::super::schema::OPEN_HANDOFFS_INDEX)
            .key_condition_expression("handoff_open = :open")
            .expression_attribute_values(
                ":open",
                s(match line {
                    HandoffLine::People => super::super::schema::HANDOFF_OPEN,
                    HandoffLine::Visitors => super::super::schema::HANDOFF_OPEN_VISITOR,
                }),
            )
    }

    /// Closes an open handoff, recording who and when. The conversation stays
    /// with the people: its later messages still get the fixed reply.
    pub async fn close_handoff(&self, handoff_id: &str, by: Person<'_>, now_ms: u64) -> Result<Closed, LedgerError> {
        let Some(conversation) = crate::handoff::conversation_of(handoff_id) else {
            return Ok(Closed::NotFound);
        };
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(&conversation, HEAD).into_iter().collect()))
            .update_expression(match by.sub {
                // A person's words end what waited for the customer's yes.
                Some(_) => format!(
                    "SET handoff_closed_by = :by, handoff_closed_by_sub = :by_sub, handoff_closed_at = :now \
                     REMOVE handoff_open, {}",
                    super::proposals_ended()
                ),
                None => format!(
                    "SET handoff_closed_by = :by, handoff_closed_at = :now REMOVE handoff_open, {}",
                    super::proposals_ended()
                ),
            })
            .condition_expression(format!(
                "handoff_id = :id AND attribute_exists(handoff_open) AND {}",
                super::super::holders::HOLD_CONDITION
            ))
            .expression_attribute_values(":holder", s(super::super::holders::holder_key(by)))
            .expression_attribute_values(":by", s(by.name))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":id", s(handoff_id))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let result = match by.sub {
            Some(sub) => update.expression_attribute_values(":by_sub", s(sub)),
            None => update,
        }
        .send()
        .await;
        match result {
            Ok(output) => Ok(output
                .attributes()
                .and_then(stored_handoff)
                .map_or(Closed::NotFound, Closed::Closed)),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                let Some(Failed(failed)) = error.as_service_error() else {
                    return Err(unavailable(error));
                };
                let Some(found) = failed.item() else {
                    return Ok(Closed::NotFound);
                };
                let holder = super::super::holders::holder_of(found)
                    .filter(|holder| holder.key != super::super::holders::holder_key(by));
                Ok(match (stored_handoff(found).filter(|h| h.id == handoff_id), holder) {
                    (Some(handoff), _) if handoff.closed.is_some() => Closed::AlreadyClosed(handoff),
                    (Some(_), Some(holder)) => Closed::HeldBy(holder),
                    (Some(handoff), None) => Closed::AlreadyClosed(handoff),
                    (None, _) => Closed::NotFound,
                })
            }
        }
    }

    /// A person's reply, decision or close reached conversation `id` at
    /// `now_ms` (contract 32): the first ends its handoff's clock and keeps
    /// the time it took, with whether `office` was open when it began
    /// ([`super::super::reply_times`]): what was kept, when it was the first.
    pub async fn first_reply(
        &self,
        id: &str,
        now_ms: u64,
        office: &crate::office_hours::expected::Office,
    ) -> Result<Option<crate::office_hours::expected::FirstReply>, LedgerError> {
        let Some(begun_ms) = super::super::reply_times::first_reply(&self.client, &self.table, id, now_ms).await?
        else {
            return Ok(None);
        };
        let reply = office.first_reply(begun_ms, now_ms);
        super::super::reply_times::keep(&self.client, &self.table, &reply).await?;
        Ok(Some(reply))
    }

    /// `by` claims conversation `id` ([`super::super::holders`]).
    pub async fn claim_hold(
        &self,
        id: &str,
        by: Person<'_>,
        take_over: bool,
        now_ms: u64,
    ) -> Result<super::super::holders::Claimed, LedgerError> {
        super::super::holders::claim(&self.client, &self.table, id, by, take_over, now_ms).await
    }

    /// `by` gives conversation `id` back ([`super::super::holders`]).
    pub async fn release_hold(
        &self,
        id: &str,
        by: Person<'_>,
        now_ms: u64,
    ) -> Result<super::super::holders::Released, LedgerError> {
        super::super::holders::release(&self.client, &self.table, id, by, now_ms).await
    }

    /// Keeps an internal note ([`super::super::internal_notes`]).
    pub async fn add_internal_note(
        &self,
        id: &str,
        by: Person<'_>,
        text_kept: &str,
        click: &str,
        now_ms: u64,
    ) -> Result<super::super::internal_notes::Noted, LedgerError> {
        let Some(head) = super::super::live_conversation_head(&self.client, &self.table, id, now_ms).await? else {
            return Ok(super::super::internal_notes::Noted::NotFound);
        };
        super::super::internal_notes::add(&self.client, &self.table, &head, by, text_kept, click, now_ms).await
    }
}
