//! Conversations in memory, as the DynamoDB adapter keeps them: a lease per
//! conversation taken on the condition that it is free or ended, another
//! customer's conversation absent, an exchange once per refund scope, and
//! the append carrying the tokens and the key's settlement in one step.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::MemoryLedger;
use crate::clock::rfc3339;
use crate::conversation::person::PersonNote;
use crate::conversation::shown::{self, Shown};
use crate::conversation::{ConversationId, Exchange};
use crate::ledger::{
    Appended, Begun, Claimed, ConversationLease, ConversationStore, HeldConversation, KeySettlement, LedgerError,
    NewExchange,
};
use crate::refund::RefundScope;

#[derive(Default)]
pub(super) struct StoredConversation {
    pub(super) customer: String,
    /// Oldest first: the exchange, its refund scope's id (empty for a
    /// person's) and when it was stored.
    exchanges: Vec<StoredExchange>,
    /// The refund scopes whose exchange is here.
    marked: BTreeSet<String>,
    /// The writer holding the lease, and until when.
    lease: Option<(String, u64)>,
    handed_off: bool,
    last_failed: bool,
    /// The refund records of its turns that wait for a person.
    awaiting: BTreeSet<String>,
    /// The writes waiting for the customer's yes (contracts 26 and 28),
    /// and the scope whose lease took them since they were proposed.
    proposals: crate::confirm::Proposals,
    proposals_taker: Option<String>,
    /// The orders its turns started a return of, or may have (rule 7).
    returns_started: Vec<String>,
    /// Its last answer asked to verify (contract 27).
    verifying: bool,
    /// The visitor it was claimed from (contract 27).
    claimed_from: Option<String>,
    /// A person decided a refund of it (contract 30: it may be rated).
    decided: bool,
    /// The customer's rating (contract 30).
    rating: Option<crate::conversation::rating::Rating>,
    /// What a person's conversation last told of when a person will answer.
    handoff_told: Option<String>,
    /// When its handoff is due (contract 32).
    pub(super) handoff_due_at_ms: Option<u64>,
}

pub(super) struct StoredExchange {
    scope: String,
    exchange: Exchange,
    at: String,
    label: Option<crate::orders::returns::Label>,
}

impl StoredConversation {
    fn held(&self, scope: &str) -> HeldConversation {
        HeldConversation {
            exchanges: self.exchanges.len() as u64,
            ends_by_s: u64::MAX,
            handed_off: self.handed_off,
            last_failed: self.last_failed,
            stored: true,
            proposals: if self.proposals_taker.as_deref() == Some(scope) {
                self.proposals.clone()
            } else {
                crate::confirm::Proposals::default()
            },
            returns_started: self.returns_started.clone(),
            verifying: self.verifying,
            handoff_told: self.handoff_told.clone(),
        }
    }

    /// A person's words (a reply, a decision's note, a close) end what
    /// waited for the customer's yes: their next message may answer the
    /// person (contract 26, tightened).
    pub(super) fn end_proposals(&mut self) {
        self.proposals = crate::confirm::Proposals::default();
    }
}

impl MemoryLedger {
    /// The conversation's exchanges, oldest first (for tests).
    pub fn exchanges(&self, id: &ConversationId) -> Vec<Exchange> {
        self.books.lock().map_or_else(
            |_| Vec::new(),
            |books| {
                books
                    .conversations
                    .get(id.as_str())
                    .map(|c| c.exchanges.iter().map(|stored| stored.exchange.clone()).collect())
                    .unwrap_or_default()
            },
        )
    }

    /// Whether a turn holds the conversation's lease (for tests).
    /// A conversation of `customer` with one exchange already in it (tests).
    #[cfg(any(test, feature = "test-support"))]
    pub async fn stored_conversation(&self, customer: &str) -> ConversationId {
        let now = crate::clock::now_ms();
        let id = ConversationId::generate().expect("randomness");
        let lease = ConversationLease {
            id: id.clone(),
            customer: customer.to_owned(),
            writer: crate::refund::WriterMark::fixed("setup/w"),
            lease_until_ms: now + 60_000,
            scope: "setup".into(),
        };
        let Ok(Begun::Held(held)) = self.begin(&lease, true, now).await else {
            panic!("a new conversation is held");
        };
        let new = NewExchange {
            verifying: false,
            from_visitor: false,
            label: None,
            router: None,
            writes: Default::default(),
            orders: Vec::new(),
            exchange: Exchange::of_turn(&[crate::chat::Message::User("hello".into())], Some("hi")),
            status: 200,
            scope: RefundScope::for_request(customer, "setup"),
            marked: true,
            refund_recorded: false,
            awaiting_approval: false,
            handoff: None,
            tokens: None,
            key: None,
            handoff_due_at_ms: None,
            told: None,
        };
        self.append(&lease, &held, &new, now).await.expect("appended");
        id
    }

    /// Keeps a handoff's first reply within hours, as a person's first act does (tests).
    pub fn keep_first_reply(&self, begun_ms: u64, replied_ms: u64) {
        if let Ok(mut books) = self.books() {
            books.first_replies.push(crate::office_hours::expected::FirstReply {
                begun_ms,
                replied_ms,
                within_hours: true,
            });
        }
    }

    /// When conversation `id`'s handoff is due (tests).
    pub fn handoff_due_at_ms(&self, id: &ConversationId) -> Option<u64> {
        self.books()
            .ok()?
            .conversations
            .get(id.as_str())
            .and_then(|conversation| conversation.handoff_due_at_ms)
    }

    pub fn conversation_leased(&self, id: &ConversationId) -> bool {
        self.books
            .lock()
            .is_ok_and(|books| books.conversations.get(id.as_str()).is_some_and(|c| c.lease.is_some()))
    }
}

impl ConversationStore for MemoryLedger {
    async fn rate(
        &self,
        id: &ConversationId,
        customer: &str,
        rating: &crate::conversation::rating::Rating,
        _now_ms: u64,
    ) -> Result<crate::conversation::rating::Rated, LedgerError> {
        use crate::conversation::rating::Rated;
        let mut books = self.books()?;
        let Some(conversation) = books
            .conversations
            .get_mut(id.as_str())
            .filter(|c| c.customer == customer)
        else {
            return Ok(Rated::NotFound);
        };
        if conversation.rating.is_some() {
            return Ok(Rated::AlreadyRated);
        }
        if !conversation.decided {
            return Ok(Rated::NotYet);
        }
        conversation.rating = Some(rating.clone());
        Ok(Rated::Rated {
            intent: crate::conversation::rating::intent_of(None),
        })
    }

    async fn claim(
        &self,
        id: &ConversationId,
        visitor: &str,
        claimer: &str,
        now_ms: u64,
    ) -> Result<Claimed, LedgerError> {
        let mut books = self.books()?;
        let Some(conversation) = books.conversations.get_mut(id.as_str()) else {
            return Ok(Claimed::NotFound);
        };
        if conversation.customer == claimer && conversation.claimed_from.as_deref() == Some(visitor) {
            return Ok(Claimed::Claimed);
        }
        if conversation.customer != visitor {
            return Ok(Claimed::NotFound);
        }
        if let Some((_, until)) = &conversation.lease
            && *until > now_ms
        {
            return Ok(Claimed::Busy { lease_until_ms: *until });
        }
        conversation.customer = claimer.to_owned();
        conversation.claimed_from = Some(visitor.to_owned());
        Ok(Claimed::Claimed)
    }

    async fn begin(&self, lease: &ConversationLease, may_create: bool, now_ms: u64) -> Result<Begun, LedgerError> {
        let mut books = self.books()?;
        let conversation = match books.conversations.get_mut(lease.id.as_str()) {
            Some(conversation) if conversation.customer != lease.customer => return Ok(Begun::NotFound),
            Some(conversation) => conversation,
            None if may_create => books
                .conversations
                .entry(lease.id.as_str().to_owned())
                .or_insert_with(|| StoredConversation {
                    customer: lease.customer.clone(),
                    ..StoredConversation::default()
                }),
            None => return Ok(Begun::NotFound),
        };
        if let Some((writer, until)) = &conversation.lease
            && *writer != lease.writer.as_str()
            && *until > now_ms
        {
            return Ok(Begun::Busy { lease_until_ms: *until });
        }
        conversation.lease = Some((lease.writer.as_str().to_owned(), lease.lease_until_ms));
        conversation.proposals_taker.get_or_insert_with(|| lease.scope.clone());
        Ok(Begun::Held(conversation.held(&lease.scope)))
    }

    async fn recent(
        &self,
        id: &ConversationId,
        count: usize,
        running: &RefundScope,
    ) -> Result<Vec<Exchange>, LedgerError> {
        let books = self.books()?;
        let Some(conversation) = books.conversations.get(id.as_str()) else {
            return Ok(Vec::new());
        };
        let mut seen = BTreeSet::from([running.id()]);
        Ok(conversation
            .exchanges
            .iter()
            .rev()
            // A person's words belong to no scope: every one is kept.
            .filter(|stored| stored.scope.is_empty() || seen.insert(stored.scope.clone()))
            .take(count)
            .map(|stored| stored.exchange.clone())
            .collect())
    }

    async fn append(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> Result<Appended, LedgerError> {
        if self.failing_appends.load(Ordering::SeqCst) {
            return Err(LedgerError::Unavailable("the append timed out".into()));
        }
        let mut books = self.books()?;
        let books = &mut *books;
        let id = lease.id.as_str().to_owned();
        if !held.stored {
            books
                .conversations
                .entry(id.clone())
                .or_insert_with(|| StoredConversation {
                    customer: lease.customer.clone(),
                    ..StoredConversation::default()
                });
        }
        let Some(conversation) = books.conversations.get_mut(&id) else {
            return Err(LedgerError::Conflict("no such conversation".into()));
        };
        let ours = conversation
            .lease
            .as_ref()
            .is_none_or(|(writer, _)| *writer == lease.writer.as_str());
        if !ours {
            return Err(LedgerError::Conflict(
                "the conversation's lease is another turn's".into(),
            ));
        }
        let scope = new.scope.id();
        if new.marked && conversation.marked.contains(&scope) {
            return Ok(Appended::AlreadyThere);
        }
        if new.marked {
            conversation.marked.insert(scope.clone());
        }
        conversation.exchanges.push(StoredExchange {
            scope,
            exchange: new.exchange.clone(),
            at: rfc3339(now_ms),
            label: new.label.clone(),
        });
        conversation.last_failed = matches!(new.status, 502 | 504);
        if new.refund_recorded && new.awaiting_approval {
            conversation.awaiting.insert(new.scope.record_id());
        }
        if new.handoff.is_some() && !conversation.handed_off {
            conversation.handoff_due_at_ms = new.handoff_due_at_ms;
        }
        conversation.handed_off |= new.handoff.is_some();
        if let Some(told) = &new.told {
            conversation.handoff_told = Some(told.clone());
        }
        conversation.proposals.apply(&new.writes.steps);
        conversation.proposals_taker = None;
        conversation.verifying = new.verifying;
        for record in &new.writes.returns {
            if matches!(record.outcome.as_str(), "started" | "unknown") {
                let order = crate::refund::policy::order_key(&record.order_id);
                if !conversation.returns_started.contains(&order) {
                    conversation.returns_started.push(order);
                }
            }
        }
        conversation.lease = None;
        if let Some(tokens) = &new.tokens {
            books.budgets.settle(tokens);
        }
        let Some(settlement) = &new.key else {
            return Ok(Appended::Appended);
        };
        let (request_lease, response) = match settlement {
            KeySettlement::Store(request_lease, response) => (request_lease, Some(response)),
            KeySettlement::Release(request_lease) => (request_lease, None),
        };
        let Some(request) = books
            .requests
            .get_mut(&request_lease.scope.id())
            .filter(|request| request.writer == request_lease.writer.as_str() && request.response.is_none())
        else {
            return Ok(Appended::KeyNotOurs);
        };
        match response {
            Some(response) => request.response = Some(response.clone()),
            None => {
                request.released = true;
                request.lease_until_ms = 0;
            }
        }
        Ok(Appended::Appended)
    }

    async fn release(&self, lease: &ConversationLease) -> Result<(), LedgerError> {
        let mut books = self.books()?;
        if let Some(conversation) = books.conversations.get_mut(lease.id.as_str())
            && conversation
                .lease
                .as_ref()
                .is_some_and(|(writer, _)| *writer == lease.writer.as_str())
        {
            conversation.lease = None;
        }
        Ok(())
    }

    async fn shown(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        _now_ms: u64,
    ) -> Result<Option<Shown>, LedgerError> {
        let books = self.books()?;
        let Some(conversation) = books.conversations.get(id.as_str()).filter(|c| c.customer == customer) else {
            return Ok(None);
        };
        let exchanges = conversation
            .exchanges
            .iter()
            .enumerate()
            .map(|(seq, stored)| (seq as u64, stored.at.as_str(), &stored.exchange, stored.label.as_ref()));
        Ok(Some(Shown {
            handed_off: conversation.handed_off,
            // No person closes a handoff here.
            handoff_open: conversation.handed_off,
            awaiting_approval: !conversation.awaiting.is_empty(),
            messages: shown::after(exchanges, after),
            // No person closes or decides here: nothing to ask about.
            ask_rating: false,
            person_expected: None,
        }))
    }

    async fn first_replies(&self) -> Result<Vec<crate::office_hours::expected::FirstReply>, LedgerError> {
        Ok(self.books()?.first_replies.clone())
    }
}

impl StoredConversation {
    /// A person's note or reply (contract 18), taking no lease: a running
    /// turn appends after it.
    pub(super) fn add_person(&mut self, note: &PersonNote, now_ms: u64) {
        if let Some(record_id) = &note.note_for {
            self.awaiting.remove(record_id);
            self.decided = true;
        }
        self.end_proposals();
        self.exchanges.push(StoredExchange {
            scope: String::new(),
            exchange: note.exchange(),
            at: rfc3339(now_ms),
            label: None,
        });
    }
}
