//! The conversations' port (contract 11): the lease, the window and the append.

use std::future::Future;

use crate::confirm::{ProposalSteps, Proposals};
use crate::conversation::shown::Shown;
use crate::conversation::{ConversationId, Exchange};
use crate::handoff::Handoff;
use crate::orders::address::AddressRecord;
use crate::orders::returns::ReturnRecord;
use crate::refund::{RefundScope, WriterMark};

use super::{LedgerError, RequestLease, StoredResponse, TokenSettlement};

/// One turn's hold on its conversation (contract 11): a lease that ends at
/// the invocation's deadline, so a dead invocation stops holding it by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationLease {
    pub id: ConversationId,
    /// The customer it belongs to: a conversation of another is absent.
    pub customer: String,
    pub writer: WriterMark,
    /// Epoch ms: the invocation's deadline.
    pub lease_until_ms: u64,
    /// The turn's refund scope's record id: the proposals the lease finds
    /// are this scope's alone (a takeover of its key finds them again), and
    /// no later message's (contract 26: the customer's very next message).
    pub scope: String,
}

/// A conversation this turn holds, as it was when the lease was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldConversation {
    /// Exchanges so far: the next one's sequence number.
    pub exchanges: u64,
    /// Epoch seconds: when it ends at the latest, `CONVERSATION_MAX_AGE_HOURS`
    /// after its first exchange (0: not stored yet, the append sets it).
    pub ends_by_s: u64,
    /// A person has it (contract 12): every message gets the fixed reply.
    pub handed_off: bool,
    /// Its last exchange ended in 502 or 504.
    pub last_failed: bool,
    /// Its header is stored. Not so for a conversation this request creates:
    /// nobody else knows its id, so it needs no lease, and its first append
    /// creates it.
    pub stored: bool,
    /// The writes waiting for the customer's yes (contracts 26 and 28),
    /// taken by this turn: the first lease after the proposing turn's
    /// append takes them for its scope (in the lease's own conditional
    /// write), so no later message finds them, whether or not this turn's
    /// append lands; a takeover of the same scope finds them again.
    pub proposals: Proposals,
    /// The orders its turns started a return of (or may have), as rule 2
    /// compares ids (contract 8's rule 7).
    pub returns_started: Vec<String>,
    /// Its last answer asked a visitor to verify (contract 27): a
    /// verification is pending, and one-time codes are masked.
    pub verifying: bool,
    /// What a person's conversation last told the customer of when a
    /// person will answer (contracts 12 and 32): said again only when it changed.
    pub handoff_told: Option<String>,
}

impl HeldConversation {
    /// A conversation this request creates (see [`HeldConversation::stored`]).
    pub fn created_here() -> HeldConversation {
        HeldConversation {
            exchanges: 0,
            ends_by_s: 0,
            handed_off: false,
            last_failed: false,
            stored: false,
            proposals: Proposals::default(),
            returns_started: Vec::new(),
            verifying: false,
            handoff_told: None,
        }
    }
}

/// What taking a conversation's lease found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    Held(HeldConversation),
    /// Unknown, expired, or another customer's: one answer for all three.
    NotFound,
    /// Its previous turn still runs; that turn's lease ends at `lease_until_ms`.
    Busy {
        lease_until_ms: u64,
    },
}

/// What claiming a visitor's conversation found (contract 27).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// It is the claimer's now: claimed just now, or by this very claimer
    /// from this very visitor before (a claim whose answer was lost).
    Claimed,
    /// Unknown, expired, another visitor's or claimed by someone else: one
    /// answer for all.
    NotFound,
    /// A turn of it still runs; its lease ends at `lease_until_ms`.
    Busy { lease_until_ms: u64 },
}

/// An exchange to append, with what the conversation keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExchange {
    pub exchange: Exchange,
    /// The answer's status: 200, 502 or 504.
    pub status: u16,
    /// The turn's refund scope.
    pub scope: RefundScope,
    /// At most once per refund scope: the scope is marked, and an exchange
    /// whose scope is marked already is not added. Unmarked for a failed
    /// turn whose key is given back, so that its retry runs afresh and
    /// appends its own exchange.
    pub marked: bool,
    /// The turn recorded a refund for its scope: the conversation lists it.
    pub refund_recorded: bool,
    /// That refund waits for a person: the conversation says so until a
    /// decision's note (contract 18).
    pub awaiting_approval: bool,
    /// The conversation goes to a person with this exchange (at most once).
    pub handoff: Option<Handoff>,
    /// The turn's reservation settled to its tokens, in the same step
    /// (`None`: no turn was taken from the budget).
    pub tokens: Option<TokenSettlement>,
    /// What becomes of the request's key, in the same step.
    pub key: Option<KeySettlement>,
    /// The router's labels of the turn (contract 21); none where no routing
    /// call was made (a screened message, a person's conversation).
    pub router: Option<String>,
    /// What the turn did about writes (contracts 26 and 28), in the same step.
    pub writes: WritesAppend,
    /// The orders the order system found for the customer this turn: the
    /// conversation is found by each (contract 30), in the same step.
    pub orders: Vec<String>,
    /// The answer asked a visitor to verify: pending until the next append.
    pub verifying: bool,
    /// A visitor wrote it: a handoff it makes waits in the visitors' line
    /// of the desk's queue (contract 30).
    pub from_visitor: bool,
    /// A return the turn started: its label, kept with the exchange for the
    /// read (contract 28).
    pub label: Option<crate::orders::returns::Label>,
    /// When the handoff it makes is due (contract 32; epoch ms): none when
    /// it makes none, or the hours hold no such time.
    pub handoff_due_at_ms: Option<u64>,
    /// The sentence of when a person will answer that its reply told a
    /// handed-off conversation (contracts 12 and 32); none: nothing new was said.
    pub told: Option<String>,
}

/// A turn's writes (contracts 26 and 28): what becomes of the
/// conversation's proposals (a kind the turn neither proposes nor keeps is
/// cleared: only a proposing turn writes one back), and each write's
/// outcome, kept with the exchange.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WritesAppend {
    pub steps: ProposalSteps,
    pub addresses: Vec<AddressRecord>,
    pub returns: Vec<ReturnRecord>,
}

/// A request's key after its turn: its answer stored for replays, or the key
/// given back (contract 6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySettlement {
    Store(RequestLease, StoredResponse),
    Release(RequestLease),
}

/// What appending an exchange found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The exchange, the tokens and the key's settlement: one transaction.
    Appended,
    /// The exchange and the tokens; the key is another request's now (its
    /// lease had ended), so it was left alone.
    KeyNotOurs,
    /// The refund scope's exchange is already there (a takeover of a dead
    /// invocation's key that had appended it): nothing was written, neither
    /// the tokens nor the key's settlement.
    AlreadyThere,
}

/// The conversations, as the HTTP edge keeps them (contract 11). Every
/// operation is bounded by `LEDGER_TIMEOUT_SECS` in the adapter; every
/// write is conditional on the lease, never a read-then-write.
pub trait ConversationStore: Send + Sync {
    /// Takes the conversation's lease for `lease.writer`. `may_create`: the
    /// id is the function's own, just issued (or recorded with the request's
    /// key), so an absent conversation is created; otherwise it is 404.
    fn begin(
        &self,
        lease: &ConversationLease,
        may_create: bool,
        now_ms: u64,
    ) -> impl Future<Output = Result<Begun, LedgerError>> + Send;

    /// The `count` most recent exchanges, newest first (a strongly consistent
    /// read: the previous turn's exchange is in it), one per refund scope
    /// and none of `running` (the scope of the turn about to run): a try
    /// whose key was released and then re-sent stays in the conversation
    /// for the support team, but the model sees the customer's message once.
    fn recent(
        &self,
        id: &ConversationId,
        count: usize,
        running: &RefundScope,
    ) -> impl Future<Output = Result<Vec<Exchange>, LedgerError>> + Send;

    /// Appends the turn's exchange and gives the lease back (creating the
    /// conversation when it is not stored), with the exchange's tokens and
    /// key settlement: one transaction. On an error, nothing was written.
    fn append(
        &self,
        lease: &ConversationLease,
        held: &HeldConversation,
        new: &NewExchange,
        now_ms: u64,
    ) -> impl Future<Output = Result<Appended, LedgerError>> + Send;

    /// Gives the lease back without an exchange (no turn ran).
    fn release(&self, lease: &ConversationLease) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Passes a visitor's conversation to `claimer` (contract 27): exactly
    /// once, in one conditional write, while it is `visitor`'s, live and no
    /// turn of it runs; recorded in it (who, from whom, when). From then on
    /// it is `claimer`'s alone, and the visitor reads and writes nothing of it.
    fn claim(
        &self,
        id: &ConversationId,
        visitor: &str,
        claimer: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<Claimed, LedgerError>> + Send;

    /// `customer`'s rating of the conversation (contract 30): once, in one
    /// conditional write of its header, while it lives and is theirs; the
    /// first rating stands. Counted under the first routed turn's intent.
    fn rate(
        &self,
        id: &ConversationId,
        customer: &str,
        rating: &crate::conversation::rating::Rating,
        now_ms: u64,
    ) -> impl Future<Output = Result<crate::conversation::rating::Rated, LedgerError>> + Send;

    /// What `customer` reads of the conversation (contract 18): the
    /// messages after `after`, oldest first, at most
    /// [`crate::conversation::shown::MAX_SHOWN`]. `None` when it is
    /// unknown, expired or another customer's: one answer for all three.
    /// One read, which takes no lease and writes nothing.
    fn shown(
        &self,
        id: &ConversationId,
        customer: &str,
        after: Option<u64>,
        now_ms: u64,
    ) -> impl Future<Output = Result<Option<Shown>, LedgerError>> + Send;

    /// The recent first replies of handoffs, oldest first (contract 32):
    /// one small read, which the reply time a customer is told is the median of.
    fn first_replies(
        &self,
    ) -> impl Future<Output = Result<Vec<crate::office_hours::expected::FirstReply>, LedgerError>> + Send;
}
