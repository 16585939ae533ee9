//! The conversations on DynamoDB ([`crate::ledger::ConversationStore`]), in
//! a table of their own (`CONVERSATION_TABLE`; why in `docs/decisions.md`):
//! partition key `pk` (the conversation id), sort key `sk`.
//!
//! | item | `sk` | attributes |
//! | --- | --- | --- |
//! | header | `head` | `customer`, `created_at`, `updated_at`, `exchanges` (how many), `last_status`, `refund_records` (the record ids its turns wrote, a string set), `lease_writer`, `lease_until_ms` (while a turn runs), `lease_ended_by` (the writer of the last lease given back: it never takes the lease again), `expires_at` (TTL: `CONVERSATION_TTL_HOURS` after the last exchange, never after `ends_by`), `ends_by` (`CONVERSATION_MAX_AGE_HOURS` after the first exchange); once handed off: `handoff_id`, `handoff_reason`, `handoff_router` (the router's labels, contract 21), `handoff_summary` (the model's), `handoff_at`, `handoff_request_id`, `handoff_open` (`open` until closed: the `open_handoffs` index), `handoff_closed_by`, `handoff_closed_at`; `customer_wrote_at` (the last turn's time: the customer's last message); who on the team has it (contract 30, [`super::holders`]): `holder`, `holder_name`, `held_since`, `held_taken_over_from`; `decision_noted_at` (a person's decision reached it); the customer's rating: `rating_solved`, `rating_comment` (masked), `rating_at`, `rating_intent` |
//! | order posting | pk `order#<order id>`, sk the conversation id | `customer`, `created_at`, `expires_at` (`ends_by`): [`super::postings`] |
//! | internal note | `n#<click>` | `by`, `by_sub`, `at`, `at_ms`, `text`, `customer`, `created_at`, `expires_at` (`ends_by`): [`super::internal_notes`] |
//! | exchange | `x#<seq, 6 digits>` | `seq`, `request_id`, `refund_record` (the scope's record id), `status`, `created_at`, `chars`, `messages` (JSON), `handoff_reason` (the exchange that handed off), `router` (the router's labels of its turn), `customer`, `expires_at` (`ends_by`) |
//! | scope mark | `scope#<record id>` | `seq`, `customer`, `created_at`, `expires_at` (`ends_by`) |
//!
//! Each exchange is an item of its own (a 4000-character message and a
//! turn's replies: tens of KB at most), so a conversation of any length stays
//! far below the 400 KB item limit. Every item names its `customer`, so
//! the `by_customer` index (keys only) finds all of a customer's items
//! without a scan, even those whose header TTL removed first: what
//! "forget" needs (contract 11).
//!
//! - **One turn at a time.** [`begin`](ConversationStore::begin) is one
//!   conditional update of the header: the lease is taken only if it is free
//!   or ended, the customer is the owner, and the conversation has not
//!   expired (TTL deletes lazily, so every condition checks `expires_at`).
//!   A conversation the request itself starts takes none: nobody else knows
//!   its id, and its first append creates the header.
//! - **Exactly once.** [`append`](ConversationStore::append) is one
//!   transaction: the header moves from `seq` to `seq + 1` and gives the
//!   lease back (on the condition that this writer holds it and nothing was
//!   appended meanwhile), the exchange is put, and so is the refund scope's
//!   mark, on the condition that the scope has none. A takeover of a dead
//!   invocation's key that had appended finds the mark: nothing is added.
//!   A failed turn whose key is given back appends unmarked, so its retry
//!   (the same scope, run afresh) appends its own exchange after it. The
//!   turn's tokens and its key's settlement (items of the ledger's table)
//!   ride in the same transaction. An exchange that takes no lease (a
//!   person's note or reply, contract 18) may take the sequence number a
//!   running turn was to use: that turn's append, still the lease's
//!   holder, finds the count moved and appends after it.
//! - **Expiry.** A conversation ends `CONVERSATION_TTL_HOURS` after its
//!   last exchange, and at the latest at `ends_by`, `CONVERSATION_MAX_AGE_HOURS`
//!   after its first. So every item but the header is written to expire at
//!   `ends_by`, once, and lives at least as long as its conversation; an
//!   append writes the same items however long the conversation is, and
//!   never moves another item's expiry. Reads go through the header, so an
//!   expired conversation is absent even while its items wait for TTL.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
    WriteRequest,
};

use super::{
    DynamoClient, DynamoLedger, Item, every_item, malformed, n, number, s, text, transact, unavailable, update_alone,
    update_item,
};
use crate::clock::rfc3339;
use crate::confirm::{Proposal, ProposalStep, Proposals, WriteKind};
use crate::conversation::person::Person;
use crate::conversation::shown::{self, Shown};
use crate::conversation::{ConversationId, Exchange, Lifetime};
use crate::ledger::{
    Appended, Begun, Claimed, ConversationLease, ConversationStore, HeldConversation, LedgerError, NewExchange,
};
use crate::orders::returns::ReturnRecord;
use crate::refund::RefundScope;

pub const SORT_KEY: &str = super::schema::CONVERSATION_SORT_KEY;

/// The DynamoDB actions the function calls on the conversation table: its
/// role grants exactly these (`tests/template.rs` checks it). The append's
/// transaction is authorised as its `UpdateItem` and `PutItem`s. Deletes and
/// the `by_customer` index are the support team's alone.
pub const ACTIONS_USED: &[&str] = &["dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"];
pub const HEAD: &str = super::schema::CONVERSATION_HEAD;
use super::schema::{EXCHANGE_PREFIX, exchange_sk};
const SCOPE_PREFIX: &str = "scope#";
/// DynamoDB's batch write limit.
const BATCH: usize = 25;
/// How often an append follows a sequence number that moved under it (a
/// person's note or reply) before it gives up as contended.
const SEQUENCE_MOVES: usize = 4;

/// How many of the first exchanges a rating looks through for the first
/// routed turn (a screened turn has no labels).
const RATING_LOOKBACK: i32 = 10;

/// One try of an append: done, or the header's count had moved to this.
enum AppendTry {
    Done(Appended),
    Moved(u64),
}

#[derive(Clone)]
pub struct DynamoConversations {
    client: DynamoClient,
    table: String,
    /// The ledger, for the items that ride in an append's transaction (the
    /// tokens, the key's settlement).
    ledger: DynamoLedger,
    life: Lifetime,
}

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
    pub internal_notes: Vec<super::internal_notes::InternalNote>,
    /// Who on the team has it (contract 30).
    pub holder: Option<super::holders::Holder>,
    /// The customer's "Did this solve it?" (contract 30).
    pub rating: Option<StoredRating>,
}

/// A customer's rating as kept: the comment is theirs, masked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoredRating {
    pub solved: bool,
    pub comment: String,
    pub at: String,
    pub intent: String,
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
    pub held_by: Option<super::holders::Holder>,
    /// The refund records its turns wrote.
    #[serde(skip)]
    pub refund_records: Vec<String>,
}

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
    pub holder: Option<super::holders::Holder>,
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
    HeldBy(super::holders::Holder),
    NotFound,
}

/// The refund records a conversation's turns wrote, from its header, sorted.
fn refund_records_of(head: &Item) -> Vec<String> {
    let mut records: Vec<String> = head
        .get("refund_records")
        .and_then(|v| v.as_ss().ok())
        .cloned()
        .unwrap_or_default();
    records.sort();
    records
}

fn stored_handoff(head: &Item) -> Option<StoredHandoff> {
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
        holder: super::holders::holder_of(head),
    })
}

impl DynamoConversations {
    /// On `client` (the ledger's: one connection pool for both tables),
    /// whose every operation is bounded by `bound`; `ledger_table` is where
    /// the tokens and request records its appends write live.
    pub fn new(
        client: DynamoClient,
        table: impl Into<String>,
        ledger_table: impl Into<String>,
        life: Lifetime,
    ) -> Self {
        DynamoConversations {
            ledger: DynamoLedger::new(client.clone(), ledger_table),
            client,
            table: table.into(),
            life,
        }
    }

    /// A client on the shared AWS configuration, every operation bounded by `bound`.
    pub fn from_sdk_config(
        sdk: &aws_config::SdkConfig,
        table: impl Into<String>,
        ledger_table: impl Into<String>,
        life: Lifetime,
        bound: Duration,
    ) -> Self {
        DynamoConversations::new(super::client_for(sdk, bound), table, ledger_table, life)
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Its client, for the other writers of this table (a person's notes).
    pub fn client(&self) -> &DynamoClient {
        &self.client
    }

    /// How long an exchange keeps a conversation alive.
    pub fn life(&self) -> Lifetime {
        self.life
    }

    fn key(&self, id: &str, sk: impl Into<String>) -> [(String, AttributeValue); 2] {
        [("pk".to_owned(), s(id)), (SORT_KEY.to_owned(), s(sk))]
    }

    /// Every item of the conversation (a strongly consistent query, all pages).
    async fn all_items(&self, id: &str, keys_only: bool) -> Result<Vec<Item>, LedgerError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :id")
            .expression_attribute_values(":id", s(id))
            .consistent_read(true);
        if keys_only {
            query = query.projection_expression("pk, sk");
        }
        every_item(query.into_paginator().items().send()).await
    }

    /// An append whose transaction a condition cancelled: the scope's
    /// exchange is there already (the lease is given back), or the lease was lost.
    async fn not_appended(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        found: &[Option<Item>],
        mark_at: Option<usize>,
    ) -> Result<AppendTry, LedgerError> {
        if mark_at.is_some_and(|at| found.get(at).is_some_and(Option::is_some)) {
            if held.stored {
                self.release(lease).await?;
            }
            return Ok(AppendTry::Done(Appended::AlreadyThere));
        }
        if held.stored
            && let Some(Some(head)) = found.first()
            && text(head, "lease_writer") == Some(lease.writer.as_str())
            && let Some(exchanges) = number(head, "exchanges").filter(|&n| n != held.exchanges)
        {
            return Ok(AppendTry::Moved(exchanges));
        }
        Err(LedgerError::Conflict("the conversation's lease was lost".into()))
    }

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
            .filter(|item| text(item, SORT_KEY).is_some_and(|sk| sk.starts_with(super::schema::VERDICT_PREFIX)))
            .map(|item| StoredVerdict {
                intent: text(item, "intent").unwrap_or_default().to_owned(),
                by: text(item, "by").unwrap_or_default().to_owned(),
                at: text(item, "at").unwrap_or_default().to_owned(),
            })
            .collect();
        // The staff's own partition, and the notes kept before it existed.
        let notes = self.all_items(&super::schema::internal_notes_pk(id), false).await?;
        let mut internal_notes: Vec<_> = items
            .iter()
            .chain(&notes)
            .filter(|item| text(item, SORT_KEY).is_some_and(|sk| sk.starts_with(super::schema::INTERNAL_NOTE_PREFIX)))
            .map(super::internal_notes::internal_note_of)
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
            holder: super::holders::holder_of(head),
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

    fn open_query(&self, line: HandoffLine) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(super::schema::OPEN_HANDOFFS_INDEX)
            .key_condition_expression("handoff_open = :open")
            .expression_attribute_values(
                ":open",
                s(match line {
                    HandoffLine::People => super::schema::HANDOFF_OPEN,
                    HandoffLine::Visitors => super::schema::HANDOFF_OPEN_VISITOR,
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
                Some(_) => format!(
                    "SET handoff_closed_by = :by, handoff_closed_by_sub = :by_sub, handoff_closed_at = :now \
                     REMOVE handoff_open, {PROPOSALS_ENDED}"
                ),
                None => format!(
                    "SET handoff_closed_by = :by, handoff_closed_at = :now REMOVE handoff_open, {PROPOSALS_ENDED}"
                ),
            })
            .condition_expression(format!(
                "handoff_id = :id AND attribute_exists(handoff_open) AND {}",
                super::holders::HOLD_CONDITION
            ))
            .expression_attribute_values(":holder", s(super::holders::holder_key(by)))
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
                let holder =
                    super::holders::holder_of(found).filter(|holder| holder.key != super::holders::holder_key(by));
                Ok(match (stored_handoff(found).filter(|h| h.id == handoff_id), holder) {
                    (Some(handoff), _) if handoff.closed.is_some() => Closed::AlreadyClosed(handoff),
                    (Some(_), Some(holder)) => Closed::HeldBy(holder),
                    (Some(handoff), None) => Closed::AlreadyClosed(handoff),
                    (None, _) => Closed::NotFound,
                })
            }
        }
    }

    /// The ids of a customer's conversations, expired ones included (from
    /// the `by_customer` index).
    pub async fn of_customer(&self, customer: &str) -> Result<Vec<String>, LedgerError> {
        let items = every_item(
            self.client
                .query()
                .table_name(&self.table)
                .index_name(super::schema::BY_CUSTOMER_INDEX)
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
            .filter(|pk| !pk.starts_with(super::postings::ORDER_PREFIX))
            // Internal notes are their conversation's.
            .map(|pk| pk.strip_prefix(super::schema::INTERNAL_NOTES_PARTITION).unwrap_or(pk))
            .map(str::to_owned)
            .collect();
        // Every item of a conversation is in the index: one id each.
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// `by` claims conversation `id` ([`super::holders`]).
    pub async fn claim_hold(
        &self,
        id: &str,
        by: Person<'_>,
        take_over: bool,
        now_ms: u64,
    ) -> Result<super::holders::Claimed, LedgerError> {
        super::holders::claim(&self.client, &self.table, id, by, take_over, now_ms).await
    }

    /// `by` gives conversation `id` back ([`super::holders`]).
    pub async fn release_hold(
        &self,
        id: &str,
        by: Person<'_>,
        now_ms: u64,
    ) -> Result<super::holders::Released, LedgerError> {
        super::holders::release(&self.client, &self.table, id, by, now_ms).await
    }

    /// Keeps an internal note ([`super::internal_notes`]).
    pub async fn add_internal_note(
        &self,
        id: &str,
        by: Person<'_>,
        text_kept: &str,
        click: &str,
        now_ms: u64,
    ) -> Result<super::internal_notes::Noted, LedgerError> {
        let Some(head) = super::live_conversation_head(&self.client, &self.table, id, now_ms).await? else {
            return Ok(super::internal_notes::Noted::NotFound);
        };
        super::internal_notes::add(&self.client, &self.table, &head, by, text_kept, click, now_ms).await
    }

    /// Conversation `id` in a line, from its header alone, while it lives.
    pub async fn line(&self, id: &str, now_ms: u64) -> Result<Option<ConversationLine>, LedgerError> {
        let Some(head) = super::live_conversation_head(&self.client, &self.table, id, now_ms).await? else {
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
                    super::schema::HANDOFF_OPEN
                } else {
                    "closed"
                }
            }),
            held_by: super::holders::holder_of(head),
            refund_records,
        }))
    }

    /// The conversations that named `order_id` ([`super::postings`]).
    pub async fn of_order(&self, order_id: &str, now_ms: u64) -> Result<Vec<String>, LedgerError> {
        super::postings::conversations_of_order(&self.client, &self.table, order_id, now_ms).await
    }

    /// Deletes `customer`'s postings of orders ([`super::postings`]).
    pub async fn forget_postings(&self, customer: &str) -> Result<usize, LedgerError> {
        super::postings::forget(&self.client, &self.table, customer).await
    }

    /// The saved replies in use ([`super::saved_replies`]).
    pub async fn saved_replies(&self) -> Result<Vec<super::saved_replies::SavedReply>, LedgerError> {
        super::saved_replies::list(&self.client, &self.table).await
    }

    /// Saves a reply, new or changed, within `max` ([`super::saved_replies`]).
    pub async fn save_reply(
        &self,
        id: &str,
        title: &str,
        text: &str,
        by: Person<'_>,
        max: usize,
        now_ms: u64,
    ) -> Result<super::saved_replies::Saved, LedgerError> {
        super::saved_replies::save(&self.client, &self.table, id, title, text, by, max, now_ms).await
    }

    /// Deletes a saved reply, its record kept ([`super::saved_replies`]).
    pub async fn delete_saved_reply(
        &self,
        id: &str,
        by: Person<'_>,
        now_ms: u64,
    ) -> Result<super::saved_replies::Deleted, LedgerError> {
        super::saved_replies::delete(&self.client, &self.table, id, by, now_ms).await
    }

    /// The ids of `customer`'s conversations with the latest items first,
    /// at most `limit` (the `by_customer` index, newest first, read until
    /// `limit` conversations are seen): search and the customer panel.
    pub async fn latest_of_customer(&self, customer: &str, limit: usize) -> Result<Vec<String>, LedgerError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(super::schema::BY_CUSTOMER_INDEX)
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
                && !pk.starts_with(super::postings::ORDER_PREFIX)
                && let pk = pk.strip_prefix(super::schema::INTERNAL_NOTES_PARTITION).unwrap_or(pk)
                && !ids.iter().any(|id| id == pk)
            {
                ids.push(pk.to_owned());
            }
        }
        Ok(ids)
    }

    /// Deletes every item of the conversation: the support team's "forget",
    /// never the function's (its role has no delete on this table). Returns
    /// how many items went.
    pub async fn delete(&self, id: &str) -> Result<usize, LedgerError> {
        let mut keys = self.all_items(id, true).await?;
        keys.extend(self.all_items(&super::schema::internal_notes_pk(id), true).await?);
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

fn stored_exchange(item: &Item) -> Result<StoredExchange, LedgerError> {
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

impl ConversationStore for DynamoConversations {
    async fn begin(&self, lease: &ConversationLease, may_create: bool, now_ms: u64) -> Result<Begun, LedgerError> {
        // A writer whose lease ended never takes it again: an attempt of its
        // own `begin` that the SDK gave up on may land after its turn ended.
        let live = "customer = :customer AND expires_at > :now_s \
                    AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :now_ms OR lease_writer = :writer) \
                    AND (attribute_not_exists(lease_ended_by) OR lease_ended_by <> :writer)";
        let condition = if may_create {
            format!("attribute_not_exists(pk) OR ({live})")
        } else {
            live.to_owned()
        };
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(lease.id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET lease_writer = :writer, lease_until_ms = :until, customer = if_not_exists(customer, :customer), \
                 created_at = if_not_exists(created_at, :now), updated_at = if_not_exists(updated_at, :now), \
                 exchanges = if_not_exists(exchanges, :zero), expires_at = if_not_exists(expires_at, :expires), \
                 ends_by = if_not_exists(ends_by, :ends_by), \
                 proposals_taker = if_not_exists(proposals_taker, :scope)",
            )
            .condition_expression(condition)
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .expression_attribute_values(":until", n(lease.lease_until_ms))
            .expression_attribute_values(":scope", s(&lease.scope))
            .expression_attribute_values(":customer", s(&lease.customer))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":expires", n(self.life.expires_s(now_ms, self.life.ends_by_s(now_ms))))
            .expression_attribute_values(":ends_by", n(self.life.ends_by_s(now_ms)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        match update_item(&self.client, &update, ReturnValue::AllNew).await? {
            Ok(item) => {
                let last_status = number(&item, "last_status").unwrap_or_default();
                Ok(Begun::Held(HeldConversation {
                    exchanges: number(&item, "exchanges").unwrap_or_default(),
                    ends_by_s: number(&item, "ends_by").unwrap_or_default(),
                    handed_off: item.contains_key("handoff_id"),
                    last_failed: matches!(last_status, 502 | 504),
                    stored: true,
                    // Taken in this very write by the first scope to lease
                    // it since they were proposed: no other scope's.
                    proposals: if text(&item, "proposals_taker") == Some(lease.scope.as_str()) {
                        stored_proposals(&item)
                    } else {
                        Proposals::default()
                    },
                    returns_started: item
                        .get("return_orders")
                        .and_then(|orders| orders.as_ss().ok())
                        .cloned()
                        .unwrap_or_default(),
                    verifying: item.contains_key("verify_pending"),
                }))
            }
            Err(found) => {
                let live = text(&found, "customer") == Some(lease.customer.as_str())
                    && number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000);
                Ok(if live {
                    Begun::Busy {
                        lease_until_ms: number(&found, "lease_until_ms").unwrap_or(now_ms),
                    }
                } else {
                    Begun::NotFound
                })
            }
        }
    }

    async fn recent(
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

    async fn append(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> Result<Appended, LedgerError> {
        let mut held = held.clone();
        // How many the conversation held when this turn took it: a person's
        // words appended meanwhile come before it in storage, not before
        // the customer's message (the chaos run's yes invariant reads it).
        let taken_at = held.exchanges;
        // A person's note or reply (contract 18) takes the next sequence
        // number without the lease: the turn's exchange follows it.
        for _ in 0..SEQUENCE_MOVES {
            match self.append_at(lease, &held, new, taken_at, now_ms).await? {
                AppendTry::Done(appended) => return Ok(appended),
                AppendTry::Moved(exchanges) => held.exchanges = exchanges,
            }
        }
        Err(LedgerError::Contended)
    }

    async fn release(&self, lease: &ConversationLease) -> Result<(), LedgerError> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(lease.id.as_str(), HEAD).into_iter().collect()))
            .update_expression("SET lease_ended_by = :writer REMOVE lease_writer, lease_until_ms")
            .condition_expression("lease_writer = :writer")
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .build()
            .map_err(malformed)?;
        // A condition that fails: not ours (any more), nothing to give back.
        update_alone(&self.client, update).await.map(|_| ())
    }

    /// The header, then, only when it is live and the customer's, the
    /// exchanges from the first that can hold a message after `after`
    /// (contract 18): the query's range starts there and each page asks for
    /// no more exchanges than messages are still to be shown, so a read
    /// costs what it returns plus the header, however long the
    /// conversation, and a 404 costs the header alone. Both are `Query`s
    /// (the function's role has no `GetItem` on this table).
    async fn claim(
        &self,
        id: &ConversationId,
        visitor: &str,
        claimer: &str,
        now_ms: u64,
    ) -> Result<Claimed, LedgerError> {
        // The header alone: every read goes through it, and `forget` finds
        // the conversation by it (the `by_customer` index), then deletes
        // every item of it, the visitor's words among them.
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET customer = :claimer, claimed_by = :claimer, claimed_from = :visitor, claimed_at = :now",
            )
            .condition_expression(
                // An ended turn's append or release removes its lease.
                "customer = :visitor AND expires_at > :now_s \
                 AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :now_ms)",
            )
            .expression_attribute_values(":claimer", s(claimer))
            .expression_attribute_values(":visitor", s(visitor))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        Ok(match update_item(&self.client, &update, ReturnValue::None).await? {
            Ok(_) => Claimed::Claimed,
            Err(found) => {
                let live = number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000);
                let ours = text(&found, "customer") == Some(claimer) && text(&found, "claimed_from") == Some(visitor);
                let visitors = text(&found, "customer") == Some(visitor);
                match (live, ours, visitors) {
                    (true, true, _) => Claimed::Claimed,
                    (true, _, true) => Claimed::Busy {
                        lease_until_ms: number(&found, "lease_until_ms").unwrap_or(now_ms),
                    },
                    _ => Claimed::NotFound,
                }
            }
        })
    }

    async fn rate(
        &self,
        id: &ConversationId,
        customer: &str,
        rating: &crate::conversation::rating::Rating,
        now_ms: u64,
    ) -> Result<crate::conversation::rating::Rated, LedgerError> {
        use crate::conversation::rating::{Rated, intent_of};
        // The first routed turn's labels, as `routing` counts a
        // conversation (a screened turn or a person's words have none).
        let recent = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :id AND begins_with(#sk, :x)")
            .projection_expression("router")
            .expression_attribute_names("#sk", SORT_KEY)
            .expression_attribute_values(":id", s(id.as_str()))
            .expression_attribute_values(":x", s(EXCHANGE_PREFIX))
            .scan_index_forward(true)
            .limit(RATING_LOOKBACK)
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let labels = recent
            .items()
            .iter()
            .find_map(|item| text(item, "router").filter(|labels| !labels.is_empty()));
        let intent = intent_of(labels);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id.as_str(), HEAD).into_iter().collect()))
            .update_expression(
                "SET rating_solved = :solved, rating_comment = :comment, rating_at = :at, rating_intent = :intent",
            )
            // Only what a person closed or decided is asked about (contract 30).
            .condition_expression(
                "customer = :customer AND expires_at > :now_s AND attribute_not_exists(rating_solved) \
                 AND (attribute_exists(handoff_closed_at) OR attribute_exists(decision_noted_at))",
            )
            .expression_attribute_values(":solved", AttributeValue::Bool(rating.solved))
            .expression_attribute_values(":comment", s(&rating.comment))
            .expression_attribute_values(":at", s(rfc3339(now_ms)))
            .expression_attribute_values(":intent", s(&intent))
            .expression_attribute_values(":customer", s(customer))
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        Ok(match update_alone(&self.client, update).await? {
            None => Rated::Rated { intent },
            Some(found)
                if text(&found, "customer") == Some(customer)
                    && number(&found, "expires_at").is_some_and(|at| at > now_ms / 1000) =>
            {
                if found.contains_key("rating_solved") {
                    Rated::AlreadyRated
                } else {
                    Rated::NotYet
                }
            }
            Some(_) => Rated::NotFound,
        })
    }

    async fn shown(
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
                "customer, expires_at, handoff_id, awaiting, handoff_closed_at, decision_noted_at, rating_solved",
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
            awaiting_approval: awaiting,
            ask_rating: (head.contains_key("handoff_closed_at") || head.contains_key("decision_noted_at"))
                && !head.contains_key("rating_solved"),
            messages: self
                .exchanges_from(id, shown::first_exchange_after(after), after)
                .await?,
        }))
    }
}

impl DynamoConversations {
    /// The shown messages after `after`, from exchange `from` on, at most
    /// [`shown::MAX_SHOWN`].
    async fn exchanges_from(
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
const LAST_EXCHANGE: u64 = 999_999;

/// The exchange an item stores.
fn item_exchange(item: &Item) -> Result<Exchange, LedgerError> {
    let messages =
        text(item, "messages").ok_or_else(|| LedgerError::Malformed("an exchange without messages".into()))?;
    Exchange::from_json(messages).map_err(LedgerError::Malformed)
}

impl DynamoConversations {
    /// One try of [`ConversationStore::append`] at `held.exchanges`.
    async fn append_at(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        taken_at: u64,
        now_ms: u64,
    ) -> Result<AppendTry, LedgerError> {
        let id = lease.id.as_str();
        let seq = held.exchanges;
        // Every item expires when the conversation ends at the latest, so
        // none outlives it by less than its header and none is moved later.
        let ends_by = match held.ends_by_s {
            0 => self.life.ends_by_s(now_ms),
            ends_by => ends_by,
        };
        let mut set = vec![
            "exchanges = :next",
            "updated_at = :now",
            // A turn is the customer's message; a person's words move `updated_at` alone.
            "customer_wrote_at = :now",
            "expires_at = :expires",
            "last_status = :status",
        ];
        let mut header = Update::builder()
            .table_name(&self.table)
            .set_key(Some(self.key(id, HEAD).into_iter().collect()))
            .expression_attribute_values(":next", n(seq + 1))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":expires", n(self.life.expires_s(now_ms, ends_by)))
            .expression_attribute_values(":status", n(u64::from(new.status)));
        let mut condition = if held.stored {
            header = header
                .expression_attribute_values(":seq", n(seq))
                .expression_attribute_values(":writer", s(lease.writer.as_str()));
            "lease_writer = :writer AND exchanges = :seq".to_owned()
        } else {
            // Created with its first exchange: nobody else knew the id.
            set.extend(["customer = :customer", "created_at = :now", "ends_by = :ends_by"]);
            header = header
                .expression_attribute_values(":customer", s(&lease.customer))
                .expression_attribute_values(":ends_by", n(ends_by));
            "attribute_not_exists(pk)".to_owned()
        };
        if let Some(handoff) = &new.handoff {
            // At most one handoff per conversation: it stays with the people.
            condition.push_str(" AND attribute_not_exists(handoff_id)");
            set.extend([
                "handoff_id = :handoff_id",
                "handoff_reason = :handoff_reason",
                "handoff_at = :now",
                "handoff_request_id = :request_id",
                "handoff_open = :open",
            ]);
            header = header
                .expression_attribute_values(":handoff_id", s(&handoff.id))
                .expression_attribute_values(":handoff_reason", s(handoff.reason.as_str()))
                .expression_attribute_values(":request_id", s(lease.writer.invocation()))
                .expression_attribute_values(
                    ":open",
                    s(if new.from_visitor {
                        super::schema::HANDOFF_OPEN_VISITOR
                    } else {
                        super::schema::HANDOFF_OPEN
                    }),
                );
            if let Some(router) = &new.router {
                set.push("handoff_router = :router");
                header = header.expression_attribute_values(":router", s(router));
            }
            if let Some(summary) = &handoff.summary {
                set.push("handoff_summary = :summary");
                header = header.expression_attribute_values(":summary", s(summary));
            }
        }
        if held.stored {
            set.push("lease_ended_by = :writer");
        }
        // The writes waiting for the yes (contracts 26 and 28): hashes and times only.
        let mut remove: Vec<&str> = Vec::new();
        for (kind, step) in new.writes.steps.changes() {
            let [hash, at, until] = proposal_attributes(kind);
            match step {
                ProposalStep::Keep => {}
                ProposalStep::Set(proposal) => {
                    set.extend(proposal_sets(kind));
                    header = header
                        .expression_attribute_values(format!(":{hash}"), s(proposal.hex()))
                        .expression_attribute_values(format!(":{at}"), n(proposal.at_ms))
                        .expression_attribute_values(format!(":{until}"), n(proposal.until_ms));
                }
                ProposalStep::Clear => remove.extend([hash, at, until]),
            }
        }
        if held.stored {
            // The next lease takes what this turn leaves for its own scope.
            remove.extend(["lease_writer", "lease_until_ms", "proposals_taker"]);
        }
        // A verification asked for is pending until the next exchange (contract 27).
        if new.verifying {
            set.push("verify_pending = :now");
        } else if held.stored {
            remove.push("verify_pending");
        }
        let mut expression = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        // Rule 7: a refund of an order this conversation started a return
        // of (or may have) waits for a person, in every later turn.
        let returns_started: Vec<String> = new
            .writes
            .returns
            .iter()
            .filter(|record| matches!(record.outcome.as_str(), "started" | "unknown"))
            .map(|record| crate::refund::policy::order_key(&record.order_id))
            .collect();
        let mut added = Vec::new();
        if !returns_started.is_empty() {
            added.push("return_orders :return_orders");
            header = header.expression_attribute_values(":return_orders", AttributeValue::Ss(returns_started));
        }
        if new.refund_recorded {
            added.push("refund_records :record");
            header = header.expression_attribute_values(":record", AttributeValue::Ss(vec![new.scope.record_id()]));
            if new.awaiting_approval {
                // Until a decision's note takes it out (`notes`).
                added.push("awaiting :record");
            }
        }
        if !added.is_empty() {
            expression.push_str(&format!(" ADD {}", added.join(", ")));
        }
        let header = header
            .update_expression(expression)
            .condition_expression(condition)
            // What moved it, if it did: a person's note took the sequence number.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)?;
        let put = |sk: String, attributes: Vec<(&str, AttributeValue)>| {
            let mut item: Item = self.key(id, sk).into_iter().collect();
            item.extend(attributes.into_iter().map(|(k, v)| (k.to_owned(), v)));
            item.insert("seq".into(), n(seq));
            item.insert("expires_at".into(), n(ends_by));
            // Every item names its customer, so that forgetting them finds
            // it through the `by_customer` index even after its header went.
            item.insert("customer".into(), s(&lease.customer));
            item.entry("created_at".into()).or_insert_with(|| s(rfc3339(now_ms)));
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .map_err(malformed)
        };
        let record_id = new.scope.record_id();
        let mut exchange_attributes = vec![
            ("request_id", s(lease.writer.invocation())),
            ("refund_record", s(&record_id)),
            ("status", n(u64::from(new.status))),
            ("taken_at", n(taken_at)),
            ("created_at", s(rfc3339(now_ms))),
            ("chars", n(new.exchange.chars() as u64)),
            ("messages", s(new.exchange.to_json())),
            (
                "handoff_reason",
                s(new.handoff.as_ref().map(|h| h.reason.as_str()).unwrap_or_default()),
            ),
            ("router", s(new.router.as_deref().unwrap_or_default())),
            // What it did about addresses: orders and outcomes, never an address.
            (
                "address_changes",
                s(serde_json::to_string(&new.writes.addresses).unwrap_or_default()),
            ),
            // What it did about returns: orders, items, reasons, outcomes, never a label's URL.
            (
                "return_records",
                s(serde_json::to_string(&new.writes.returns).unwrap_or_default()),
            ),
        ];
        // The label the customer reads with the turn's reply (contract 28).
        if let Some(label) = &new.label {
            exchange_attributes.push(("label", s(serde_json::to_string(label).unwrap_or_default())));
        }
        let exchange_put = put(exchange_sk(seq), exchange_attributes)?;
        let mut items = vec![
            TransactWriteItem::builder().update(header).build(),
            TransactWriteItem::builder().put(exchange_put).build(),
        ];
        let mark_at = new.marked.then_some(items.len());
        if new.marked {
            let mark = put(format!("{SCOPE_PREFIX}{record_id}"), Vec::new())?;
            items.push(TransactWriteItem::builder().put(mark).build());
        }
        // The orders it named, for the support team's search (contract 30).
        items.extend(super::postings::puts(
            &self.table,
            id,
            &lease.customer,
            &new.orders,
            now_ms,
            ends_by,
        )?);
        // What rides with the exchange, in the ledger's table.
        if let Some(tokens) = &new.tokens {
            for update in self.ledger.settlement_updates(tokens)? {
                items.push(TransactWriteItem::builder().update(update).build());
            }
        }
        let mut outcome = Appended::Appended;
        if let Some(settlement) = &new.key {
            items.push(
                TransactWriteItem::builder()
                    .update(self.ledger.settle_update(settlement, now_ms)?)
                    .build(),
            );
            match transact(&self.client, items.iter().cloned()).await? {
                None => return Ok(AppendTry::Done(outcome)),
                // The key's record failed its condition alone: our own retried
                // write had landed, or the key is another request's now.
                Some(found) if found.iter().filter(|f| f.is_some()).count() == 1 => match found.last() {
                    Some(Some(item)) if DynamoLedger::settled_already(settlement, item) => {
                        return Ok(AppendTry::Done(outcome));
                    }
                    Some(Some(_)) => {
                        items.pop();
                        outcome = Appended::KeyNotOurs;
                    }
                    _ => return self.not_appended(lease, held, &found, mark_at).await,
                },
                Some(found) => return self.not_appended(lease, held, &found, mark_at).await,
            }
        }
        match transact(&self.client, items).await? {
            None => Ok(AppendTry::Done(outcome)),
            Some(found) => self.not_appended(lease, held, &found, mark_at).await,
        }
    }
}

/// What a person's words (a reply, a decision's note, a close) remove from
/// the header: every proposal, since the customer's next message may answer
/// the person (contract 26: "next" is literal). An internal note, which the
/// customer never sees, removes nothing.
pub(super) const PROPOSALS_ENDED: &str = "address_proposal, address_proposal_at, address_proposal_until, \
     return_proposal, return_proposal_at, return_proposal_until, proposals_taker";

/// A kind's proposal attributes on the conversation's header: its hash, when
/// it was made and until when it waits.
fn proposal_attributes(kind: WriteKind) -> [&'static str; 3] {
    match kind {
        WriteKind::Address => ["address_proposal", "address_proposal_at", "address_proposal_until"],
        WriteKind::Return => ["return_proposal", "return_proposal_at", "return_proposal_until"],
    }
}

/// The update's `SET` clauses of a kind's new proposal.
fn proposal_sets(kind: WriteKind) -> [&'static str; 3] {
    match kind {
        WriteKind::Address => [
            "address_proposal = :address_proposal",
            "address_proposal_at = :address_proposal_at",
            "address_proposal_until = :address_proposal_until",
        ],
        WriteKind::Return => [
            "return_proposal = :return_proposal",
            "return_proposal_at = :return_proposal_at",
            "return_proposal_until = :return_proposal_until",
        ],
    }
}

/// The proposals a conversation's header holds.
fn stored_proposals(item: &Item) -> Proposals {
    let mut proposals = Proposals::default();
    for kind in WriteKind::ALL {
        let [hash, at, until] = proposal_attributes(kind);
        let proposal = text(item, hash).and_then(|hex| {
            Proposal::from_stored(
                hex,
                number(item, at).unwrap_or_default(),
                number(item, until).unwrap_or_default(),
            )
        });
        proposals.set(kind, proposal);
    }
    proposals
}
