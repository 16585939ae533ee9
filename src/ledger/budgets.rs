//! The budgets' port (contract 13): turns per hour, tokens per day.

use std::future::Future;

use crate::budget::{Account, Reservation, Spent};

use super::{LedgerError, RequestLease, StoredRequest};

/// What taking a turn from a customer's budget found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenTurn {
    Taken,
    /// Nothing was counted: the hour's turns or the day's tokens are spent.
    Refused(Spent),
}

/// What claiming a key together with a turn found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimedWithTurn {
    /// The key is held and the turn counted.
    Both,
    /// The key has a live record: nothing was written (the key's verdict
    /// comes first: a replay spends nothing).
    KeyExists(StoredRequest),
    /// Nothing was written: the hour's turns or the day's tokens are spent.
    Refused(Spent),
}

/// The customers' budgets (contract 13): counters per window, with TTL.
/// Every write here counts once however often it is retried: the take is
/// conditional and carries the request's key or a transaction token, and
/// the give-back and the settlement are transactions, whose token makes a
/// retry of one that had landed apply nothing.
pub trait BudgetStore: Send + Sync {
    /// Counts one turn of the account's hour and reserves
    /// `limits.turn_reservation` of its day's tokens, on the condition that
    /// the hour's turns and the day's tokens are below their limits: one
    /// atomic step.
    fn take_turn(&self, account: &Account, now_ms: u64) -> impl Future<Output = Result<TakenTurn, LedgerError>> + Send;

    /// The same step, which also claims the request's key (as
    /// [`RequestLedger::claim_request`] would): both or neither.
    fn claim_with_turn(
        &self,
        lease: &RequestLease,
        account: &Account,
        now_ms: u64,
    ) -> impl Future<Output = Result<ClaimedWithTurn, LedgerError>> + Send;

    /// Gives back a turn that did not run (its conversation was refused or
    /// is a person's), with its reservation: never below zero.
    fn give_back_turn(
        &self,
        account: &Account,
        reservation: Reservation,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// After a key's claim with its turn whose outcome is unknown (it timed
    /// out, or its answer was lost): if it landed, gives the key back
    /// (released) and the turn with its reservation, in one step; if it did
    /// not, writes nothing.
    fn abandon_claim(
        &self,
        lease: &RequestLease,
        account: &Account,
        reservation: Reservation,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Settles a turn's reservation to the tokens it used (when no append
    /// carried it).
    fn settle_tokens(&self, settlement: &TokenSettlement) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// A turn's tokens at its end: what it reserved, and what the provider
/// says it used, on every day counter it reserved from
/// ([`Account::token_counters`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSettlement {
    pub reservation: Reservation,
    pub used: u64,
    pub counters: Vec<String>,
}
