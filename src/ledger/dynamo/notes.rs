//! A person's words appended to a conversation on DynamoDB (contract 18):
//! a decision's staff note and a person's reply.
//!
//! Either is the conversation's next exchange, taken without its lease:
//! the header moves from `exchanges = n` to `n + 1` (on the condition that
//! it is still `n`, live and the customer's), and `x#<n>` is put. A running
//! turn's append then finds the count moved and appends after it. A note
//! counts as an exchange for the conversation's expiry, never past
//! `ends_by`. Its item has no refund scope, so the model's window never
//! drops it as an earlier try of one.
//!
//! A decision's note rides in the decision's own transaction (the ledger's
//! [`items`](PersonNotes::items)): exactly once per decision is the
//! record's condition, and a command that dies after deciding has written
//! its note too.

use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update};

use super::conversations::DynamoConversations;
use super::holders::{Holder, hold_condition, holder_key, holder_of};
use super::schema::{CLICK_PREFIX, CONVERSATION_HEAD as HEAD, CONVERSATION_SORT_KEY as SORT_KEY, exchange_sk};
use super::{DynamoClient, Item, malformed, n, number, s, text, transact, unavailable};
use crate::clock::rfc3339;
use crate::conversation::Lifetime;
use crate::conversation::person::Person;
use crate::conversation::person::PersonNote;
use crate::ledger::LedgerError;

/// How often a person's reply follows a sequence number that moved under
/// it (a turn appending, another reply) before it gives up as contended.
const SEQUENCE_MOVES: usize = 8;

/// Where a person's words go: the conversation table, and how long an
/// exchange keeps a conversation alive.
#[derive(Clone)]
pub struct PersonNotes {
    client: DynamoClient,
    table: String,
    life: Lifetime,
}

/// What a person's reply found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replied {
    /// Appended as the conversation's exchange `seq`.
    Appended { seq: u64 },
    /// Unknown or expired.
    NotFound,
    /// Someone else on the team has the conversation (contract 30): nothing was sent.
    HeldBy(Holder),
}

impl PersonNotes {
    /// On the conversations' own table, client and lifetime.
    pub fn of(conversations: &DynamoConversations) -> Self {
        PersonNotes::new(
            conversations.client().clone(),
            conversations.table(),
            conversations.life(),
        )
    }

    pub fn new(client: DynamoClient, table: impl Into<String>, life: Lifetime) -> Self {
        PersonNotes {
            client,
            table: table.into(),
            life,
        }
    }

    /// The conversation's header while it lives (a strongly consistent read).
    pub(crate) async fn live_head(&self, id: &str, now_ms: u64) -> Result<Option<Item>, LedgerError> {
        super::live_conversation_head(&self.client, &self.table, id, now_ms).await
    }

    /// The two writes that append `note` to the conversation whose header
    /// was read as `head`: conditional on the header still counting what
    /// it counted, being live, and being `customer`'s.
    pub(crate) fn items(
        &self,
        head: &Item,
        customer: &str,
        note: &PersonNote,
        now_ms: u64,
    ) -> Result<Vec<TransactWriteItem>, LedgerError> {
        self.items_holding(head, customer, note, now_ms, None)
    }

    /// [`items`](Self::items), and with `holding` (a reply's author) on the
    /// condition that nobody else has the conversation, taking it for them
    /// when nobody does (contract 30).
    fn items_holding(
        &self,
        head: &Item,
        customer: &str,
        note: &PersonNote,
        now_ms: u64,
        holding: Option<Person<'_>>,
    ) -> Result<Vec<TransactWriteItem>, LedgerError> {
        let id = text(head, "pk").unwrap_or_default();
        let seq = number(head, "exchanges").unwrap_or_default();
        let ends_by = number(head, "ends_by")
            .or_else(|| number(head, "expires_at"))
            .unwrap_or_default();
        // A decision's note ends the wait of its record (contract 18).
        let decided = note
            .note_for
            .as_ref()
            .map(|record_id| AttributeValue::Ss(vec![record_id.clone()]));
        // A person's words end what waited for the customer's yes (contract 26).
        let ended = super::conversations::proposals_ended();
        let expression = match decided {
            // The customer's page asks afterwards whether it solved it (contract 30).
            Some(_) => format!(
                "SET exchanges = :next, updated_at = :now, expires_at = :expires, decision_noted_at = :now \
                 REMOVE {ended} DELETE awaiting :decided"
            ),
            None => format!("SET exchanges = :next, updated_at = :now, expires_at = :expires REMOVE {ended}"),
        };
        let header = Update::builder()
            .table_name(&self.table)
            .key("pk", s(id))
            .key(SORT_KEY, s(HEAD))
            .update_expression(expression)
            .condition_expression("exchanges = :seq AND expires_at > :now_s AND customer = :customer")
            .expression_attribute_values(":next", n(seq + 1))
            .expression_attribute_values(":seq", n(seq))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":expires", n(self.life.expires_s(now_ms, ends_by)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .expression_attribute_values(":customer", s(customer));
        let header = match decided {
            Some(decided) => header.expression_attribute_values(":decided", decided),
            None => header,
        };
        let header = match holding {
            Some(by) => hold_condition(header, by, now_ms),
            None => header,
        }
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(malformed)?;
        let exchange = note.exchange();
        let mut put = Put::builder()
            .table_name(&self.table)
            .item("pk", s(id))
            .item(SORT_KEY, s(exchange_sk(seq)))
            .item("seq", n(seq))
            .item("customer", s(customer))
            .item("created_at", s(rfc3339(now_ms)))
            .item("expires_at", n(ends_by))
            .item("status", n(200))
            .item("request_id", s(""))
            .item("refund_record", s(""))
            .item("chars", n(exchange.chars() as u64))
            .item("messages", s(exchange.to_json()))
            .item("from", s("person"))
            .item("by", s(&note.by))
            .condition_expression("attribute_not_exists(pk)");
        if let Some(sub) = &note.by_sub {
            put = put.item("by_sub", s(sub));
        }
        if let Some(record_id) = &note.note_for {
            put = put.item("note_for", s(record_id));
        }
        Ok(vec![
            TransactWriteItem::builder().update(header).build(),
            TransactWriteItem::builder()
                .put(put.build().map_err(malformed)?)
                .build(),
        ])
    }

    /// Appends a person's reply to conversation `id`, after whatever is
    /// there when it lands, if nobody else on the team has it; a reply to a
    /// conversation nobody has claims it (contract 30). With `click` (the desk's: who clicked and the
    /// click's `Idempotency-Key`, hashed), the append is conditional on the
    /// click itself: a click whose answer was lost finds its own exchange
    /// and appends nothing more (DynamoDB's `ClientRequestToken` would not
    /// do: moto ignores it, and it lasts ten minutes).
    pub async fn reply(
        &self,
        id: &str,
        note: &PersonNote,
        now_ms: u64,
        click: Option<&str>,
    ) -> Result<Replied, LedgerError> {
        let click_sk = click.map(|click| format!("{CLICK_PREFIX}{click}"));
        for _ in 0..SEQUENCE_MOVES {
            if let Some(sk) = &click_sk
                && let Some(seq) = self.clicked(id, sk).await?
            {
                return Ok(Replied::Appended { seq });
            }
            let Some(head) = self.live_head(id, now_ms).await? else {
                return Ok(Replied::NotFound);
            };
            let by = Person {
                name: &note.by,
                sub: note.by_sub.as_deref(),
            };
            if let Some(holder) = holder_of(&head).filter(|holder| holder.key != holder_key(by)) {
                return Ok(Replied::HeldBy(holder));
            }
            let customer = text(&head, "customer").unwrap_or_default().to_owned();
            let seq = number(&head, "exchanges").unwrap_or_default();
            let mut items = self.items_holding(&head, &customer, note, now_ms, Some(by))?;
            if let Some(sk) = &click_sk {
                let ends_by = number(&head, "ends_by")
                    .or_else(|| number(&head, "expires_at"))
                    .unwrap_or_default();
                let put = Put::builder()
                    .table_name(&self.table)
                    .item("pk", s(id))
                    .item(SORT_KEY, s(sk))
                    .item("seq", n(seq))
                    .item("expires_at", n(ends_by))
                    .condition_expression("attribute_not_exists(pk)")
                    .build()
                    .map_err(malformed)?;
                items.push(TransactWriteItem::builder().put(put).build());
            }
            // A failed condition: the count moved, the click landed, or it
            // expired or went meanwhile; the next read tells which.
            if transact(&self.client, items).await?.is_none() {
                return Ok(Replied::Appended { seq });
            }
        }
        Err(LedgerError::Contended)
    }

    /// The exchange a click appended, if it did.
    async fn clicked(&self, id: &str, sk: &str) -> Result<Option<u64>, LedgerError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(id))
            .key(SORT_KEY, s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(output.item().and_then(|item| number(item, "seq")))
    }
}
