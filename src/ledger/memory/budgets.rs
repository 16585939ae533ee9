//! The customers' budgets in memory, as the DynamoDB adapter keeps them: a
//! turn counted and its reservation added in one step on the condition
//! that both are below their limits, a key's claim beside it, give-backs
//! never below zero.

use std::collections::HashMap;

use super::{Books, MemoryLedger};
use crate::budget::{BudgetLimits, Reservation, Spent, Windows};
use crate::ledger::{BudgetStore, ClaimedWithTurn, KeyClaim, LedgerError, RequestLease, TakenTurn, TokenSettlement};

/// (customer, hour) -> turns; (customer, day) -> tokens.
#[derive(Default)]
pub(super) struct Budgets {
    turns: HashMap<(String, String), u64>,
    tokens: HashMap<(String, String), u64>,
}

impl Budgets {
    /// Why a turn now would be refused, if it would.
    fn spent(&self, customer: &str, limits: &BudgetLimits, now_ms: u64) -> Option<Spent> {
        let windows = Windows::at(now_ms);
        let turns = self.turns.get(&(customer.to_owned(), windows.hour.clone())).copied();
        let tokens = self.tokens.get(&(customer.to_owned(), windows.day.clone())).copied();
        if turns.unwrap_or(0) >= limits.turns_per_hour {
            return Some(Spent::Turns {
                retry_after_secs: windows.turns_retry_after_secs(now_ms),
            });
        }
        if tokens.unwrap_or(0) >= limits.tokens_per_day {
            return Some(Spent::Tokens {
                retry_after_secs: windows.tokens_retry_after_secs(now_ms),
            });
        }
        None
    }

    fn take(&mut self, customer: &str, limits: &BudgetLimits, now_ms: u64) {
        let windows = Windows::at(now_ms);
        *self.turns.entry((customer.to_owned(), windows.hour)).or_default() += 1;
        *self.tokens.entry((customer.to_owned(), windows.day)).or_default() += limits.turn_reservation;
    }

    fn give_back(&mut self, customer: &str, reservation: Reservation) {
        let windows = Windows::at(reservation.taken_at_ms);
        if let Some(turns) = self.turns.get_mut(&(customer.to_owned(), windows.hour)) {
            *turns = turns.saturating_sub(1);
        }
        if let Some(tokens) = self.tokens.get_mut(&(customer.to_owned(), windows.day)) {
            *tokens = tokens.saturating_sub(reservation.tokens);
        }
    }

    pub(super) fn settle(&mut self, customer: &str, settlement: &TokenSettlement) {
        let windows = Windows::at(settlement.reservation.taken_at_ms);
        let tokens = self.tokens.entry((customer.to_owned(), windows.day)).or_default();
        let change = settlement.reservation.settlement(settlement.used);
        *tokens = tokens.saturating_add_signed(change);
    }

    /// The turns counted in the hour of `at_ms` (for tests).
    fn turns_at(&self, customer: &str, at_ms: u64) -> u64 {
        let hour = Windows::at(at_ms).hour;
        self.turns.get(&(customer.to_owned(), hour)).copied().unwrap_or(0)
    }
}

impl MemoryLedger {
    /// The turns counted for `customer` in the hour of `at_ms`.
    pub fn turns_counted(&self, customer: &str, at_ms: u64) -> u64 {
        self.books
            .lock()
            .map_or(0, |books| books.budgets.turns_at(customer, at_ms))
    }
}

impl Books {
    fn take_turn(&mut self, customer: &str, limits: &BudgetLimits, now_ms: u64) -> TakenTurn {
        match self.budgets.spent(customer, limits, now_ms) {
            Some(spent) => TakenTurn::Refused(spent),
            None => {
                self.budgets.take(customer, limits, now_ms);
                TakenTurn::Taken
            }
        }
    }
}

impl BudgetStore for MemoryLedger {
    async fn take_turn(&self, customer: &str, limits: &BudgetLimits, now_ms: u64) -> Result<TakenTurn, LedgerError> {
        Ok(self.books()?.take_turn(customer, limits, now_ms))
    }

    async fn claim_with_turn(
        &self,
        lease: &RequestLease,
        limits: &BudgetLimits,
        now_ms: u64,
    ) -> Result<ClaimedWithTurn, LedgerError> {
        let mut books = self.books()?;
        match books.live_key(lease, now_ms) {
            Some(KeyClaim::Existing(existing)) => return Ok(ClaimedWithTurn::KeyExists(existing)),
            Some(KeyClaim::Claimed) => return Ok(ClaimedWithTurn::Both),
            None => {}
        }
        match books.take_turn(lease.scope.user_id(), limits, now_ms) {
            TakenTurn::Refused(spent) => Ok(ClaimedWithTurn::Refused(spent)),
            TakenTurn::Taken => {
                books.claim_key(lease);
                Ok(ClaimedWithTurn::Both)
            }
        }
    }

    async fn give_back_turn(&self, customer: &str, reservation: Reservation) -> Result<(), LedgerError> {
        self.books()?.budgets.give_back(customer, reservation);
        Ok(())
    }

    async fn abandon_claim(&self, lease: &RequestLease, reservation: Reservation) -> Result<(), LedgerError> {
        let mut books = self.books()?;
        let ours = books.requests.get_mut(&lease.scope.id()).filter(|existing| {
            existing.writer == lease.writer.as_str() && existing.response.is_none() && !existing.released
        });
        if let Some(existing) = ours {
            existing.released = true;
            existing.lease_until_ms = 0;
            books.budgets.give_back(lease.scope.user_id(), reservation);
        }
        Ok(())
    }

    async fn settle_tokens(&self, customer: &str, settlement: &TokenSettlement) -> Result<(), LedgerError> {
        self.books()?.budgets.settle(customer, settlement);
        Ok(())
    }
}
