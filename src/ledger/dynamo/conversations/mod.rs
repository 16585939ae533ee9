//! The conversations on DynamoDB ([`crate::ledger::ConversationStore`]), in
//! a table of their own (`CONVERSATION_TABLE`; why in `docs/decisions.md`):
//! partition key `pk` (the conversation id), sort key `sk`.
//!
//! | item | `sk` | attributes |
//! | --- | --- | --- |
//! | header | `head` | `customer`, `created_at`, `updated_at`, `exchanges` (how many), `last_status`, `refund_records` (the record ids its turns wrote, a string set), `lease_writer`, `lease_until_ms` (while a turn runs), `lease_ended_by` (the writer of the last lease given back: it never takes the lease again), `expires_at` (TTL: `CONVERSATION_TTL_HOURS` after the last exchange, never after `ends_by`), `ends_by` (`CONVERSATION_MAX_AGE_HOURS` after the first exchange); once handed off: `handoff_id`, `handoff_reason`, `handoff_router` (the router's labels, contract 21), `handoff_summary` (the model's), `handoff_at`, `handoff_request_id`, `handoff_open` (`open` until closed: the `open_handoffs` index), `handoff_closed_by`, `handoff_closed_at`, `handoff_due_at`, `handoff_first_reply_at` (contract 32), `handoff_told` (what the handed-off chat last told of when a person will answer); `customer_wrote_at` (the last turn's time: the customer's last message), `customer_last_words` (its first 80 characters, masked as kept: the desk's queue, contract 36); who on the team has it (contract 30, [`super::holders`]): `holder`, `holder_name`, `held_since`, `held_taken_over_from`; `decision_noted_at` (a person's decision reached it); the customer's rating: `rating_solved`, `rating_comment` (masked), `rating_at`, `rating_intent` |
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

mod append;
mod claims;
mod exchanges;
mod forget;
mod handoffs;
mod header;
mod reads;

pub use claims::StoredRating;
pub use exchanges::StoredExchange;
pub use handoffs::{Closed, HandoffLine, HandoffPage, MORE_COUNTED, StoredHandoff};
pub(crate) use header::proposals_ended;
pub use reads::{ConversationLine, Ended, StoredVerdict, Transcript};

pub const SORT_KEY: &str = super::schema::CONVERSATION_SORT_KEY;

/// The DynamoDB actions the function calls on the conversation table: its
/// role grants exactly these (`tests/template.rs` checks it). The append's
/// transaction is authorised as its `UpdateItem` and `PutItem`s. Deletes and
/// the `by_customer` index are the support team's alone.
pub const ACTIONS_USED: &[&str] = &["dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"];
pub const HEAD: &str = super::schema::CONVERSATION_HEAD;
use super::schema::{EXCHANGE_PREFIX, exchange_sk};
const SCOPE_PREFIX: &str = "scope#";

#[derive(Clone)]
pub struct DynamoConversations {
    client: DynamoClient,
    table: String,
    /// The ledger, for the items that ride in an append's transaction (the
    /// tokens, the key's settlement).
    ledger: DynamoLedger,
    life: Lifetime,
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
}

impl ConversationStore for DynamoConversations {
    async fn begin(&self, lease: &ConversationLease, may_create: bool, now_ms: u64) -> Result<Begun, LedgerError> {
        self.begin_lease(lease, may_create, now_ms).await
    }

    async fn recent(
        &self,
        id: &ConversationId,
        count: usize,
        running: &RefundScope,
    ) -> Result<Vec<Exchange>, LedgerError> {
        self.recent_exchanges(id, count, running).await
    }

    async fn append(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> Result<Appended, LedgerError> {
        self.append_exchange(lease, held, new, now_ms).await
    }

    async fn release(&self, lease: &ConversationLease) -> Result<(), LedgerError> {
        self.release_lease(lease).await
    }

    async fn first_replies(&self) -> Result<Vec<crate::office_hours::expected::FirstReply>, LedgerError> {
        super::reply_times::recent(&self.client, &self.table).await
    }

    async fn claim(
        &self,
        id: &ConversationId,
        visitor: &str,
        claimer: &str,
        now_ms: u64,
    ) -> Result<Claimed, LedgerError> {
        self.claim_conversation(id, visitor, claimer, now_ms).await
    }

    async fn rate(
        &self,
        id: &ConversationId,
        customer: &str,
        rating: &crate::conversation::rating::Rating,
        now_ms: u64,
    ) -> Result<crate::conversation::rating::Rated, LedgerError> {
        self.rate_once(id, customer, rating, now_ms).await
    }

    async fn shown(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<Shown>, LedgerError> {
        self.shown_since(id, customer, after, now_ms).await
    }
}
