//! The exchanges and their window: what the next turn's model reads, and
//! what the customer's page is shown.

use super::*;

/// An exchange as stored, with what the transcript shows beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredExchange {
    pub seq: u64,
    pub created_at: String,
    pub request_id: String,
    pub refund_record: String,
    pub status: u16,
    pub exchange: Exchange,
    /// A person's words (contract 18): who wrote them, and the refund
    /// record a decision's note is for.
    pub by: Option<String>,
    pub note_for: Option<String>,
    /// The router's labels of the turn (contract 21), as recorded; none
    /// where no routing call was made.
    pub router: Option<String>,
    /// What the turn did about addresses (contract 26): (order, outcome).
    pub addresses: Vec<(String, String)>,
    /// What the turn did about returns (contract 28).
    pub returns: Vec<ReturnRecord>,
}

pub(super) fn stored_exchange(item: &Item) -> Result<StoredExchange, LedgerError> {
    Ok(StoredExchange {
        seq: number(item, "seq").unwrap_or_default(),
        created_at: text(item, "created_at").unwrap_or_default().to_owned(),
        request_id: text(item, "request_id").unwrap_or_default().to_owned(),
        refund_record: text(item, "refund_record").unwrap_or_default().to_owned(),
        status: number(item, "status")
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or_default(),
        exchange: item_exchange(item)?,
        by: text(item, "by").map(str::to_owned),
        note_for: text(item, "note_for").map(str::to_owned),
        router: text(item, "router")
            .filter(|labels| !labels.is_empty())
            .map(str::to_owned),
        addresses: text(item, "address_changes")
            .and_then(|json| serde_json::from_str::<Vec<serde_json::Value>>(json).ok())
            .unwrap_or_default()
            .iter()
            .map(|record| {
                (
                    record["order_id"].as_str().unwrap_or_default().to_owned(),
                    record["outcome"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        returns: text(item, "return_records")
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default(),
    })
}

impl DynamoConversations {
    pub(super) async fn recent_exchanges(
        &self,
        id: &ConversationId,
        count: usize,
        running: &RefundScope,
    ) -> Result<Vec<Exchange>, LedgerError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut exchanges = Vec::new();
        let mut scopes = vec![running.record_id()];
        let mut start: Option<Item> = None;
        // Newest first, page by page, until `count` (a page holds at most 1 MB).
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :id AND begins_with(sk, :prefix)")
                .expression_attribute_values(":id", s(id.as_str()))
                .expression_attribute_values(":prefix", s(EXCHANGE_PREFIX))
                .projection_expression("messages, refund_record")
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(i32::try_from(count - exchanges.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(unavailable)?;
            let items = page.items();
            for item in items {
                // A scope seen already (newer) or running now: an earlier try of it.
                let scope = text(item, "refund_record").unwrap_or_default();
                if !scope.is_empty() && scopes.iter().any(|seen| seen == scope) {
                    continue;
                }
                scopes.push(scope.to_owned());
                exchanges.push(item_exchange(item)?);
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() || exchanges.len() >= count {
                return Ok(exchanges);
            }
        }
    }

    pub(super) async fn shown_since(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<Shown>, LedgerError> {
        let header = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :id AND #sk = :head")
            .projection_expression(
                "customer, expires_at, handoff_id, handoff_open, awaiting, handoff_closed_at, decision_noted_at, rating_solved",
            )
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":id", s(id.as_str()))
            .expression_attribute_values(":head", s(HEAD))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(head) = header.items().first() else {
            return Ok(None);
        };
        let live =
            text(head, "customer") == Some(customer) && number(head, "expires_at").is_some_and(|at| at > now_ms / 1000);
        if !live {
            return Ok(None);
        }
        let awaiting = head
            .get("awaiting")
            .and_then(|set| set.as_ss().ok())
            .is_some_and(|set| !set.is_empty());
        Ok(Some(Shown {
            handed_off: head.contains_key("handoff_id"),
            handoff_open: head.contains_key("handoff_open"),
            awaiting_approval: awaiting,
            ask_rating: (head.contains_key("handoff_closed_at") || head.contains_key("decision_noted_at"))
                && !head.contains_key("rating_solved"),
            person_expected: None,
            messages: self
                .exchanges_from(id, shown::first_exchange_after(after), after)
                .await?,
        }))
    }

    /// The shown messages after `after`, from exchange `from` on, at most
    /// [`shown::MAX_SHOWN`].
    pub(super) async fn exchanges_from(
        &self,
        id: &ConversationId,
        from: u64,
        after: Option<u64>,
    ) -> Result<Vec<shown::ShownMessage>, LedgerError> {
        let mut messages = Vec::new();
        // Past the sort key's six digits no exchange is stored.
        if from > LAST_EXCHANGE {
            return Ok(messages);
        }
        let mut start: Option<Item> = None;
        loop {
            // Every exchange shows at least one message.
            let wanted = shown::MAX_SHOWN.saturating_sub(messages.len());
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :id AND #sk BETWEEN :from AND :last")
                .projection_expression("#seq, created_at, messages, label")
                .expression_attribute_names("#sk", SORT_KEY)
                .expression_attribute_names("#seq", "seq")
                .expression_attribute_values(":id", s(id.as_str()))
                .expression_attribute_values(":from", s(exchange_sk(from)))
                .expression_attribute_values(":last", s(exchange_sk(LAST_EXCHANGE)))
                .limit(i32::try_from(wanted).unwrap_or(i32::MAX).max(1))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(unavailable)?;
            for item in page.items() {
                let stored = item_exchange(item)?;
                let seq = number(item, "seq").unwrap_or_default();
                let at = text(item, "created_at").unwrap_or_default();
                let label = text(item, "label").and_then(|label| serde_json::from_str(label).ok());
                messages.extend(
                    shown::messages_of(seq, at, &stored, label.as_ref())
                        .into_iter()
                        .filter(|m| after.is_none_or(|after| m.seq > after)),
                );
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() || messages.len() >= shown::MAX_SHOWN {
                break;
            }
        }
        messages.truncate(shown::MAX_SHOWN);
        Ok(messages)
    }
}

/// The highest exchange number a sort key holds (six digits).
pub(super) const LAST_EXCHANGE: u64 = 999_999;

/// The exchange an item stores.
pub(super) fn item_exchange(item: &Item) -> Result<Exchange, LedgerError> {
    let messages =
        text(item, "messages").ok_or_else(|| LedgerError::Malformed("an exchange without messages".into()))?;
    Exchange::from_json(messages).map_err(LedgerError::Malformed)
}
