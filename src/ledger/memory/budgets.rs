//! The customers' budgets in memory, as the DynamoDB adapter keeps them: a
//! turn counted and its reservation added in one step on the condition
//! that both are below their limits, a key's claim beside it, give-backs
//! never below zero.

use std::collections::HashMap;

use super::{Books, MemoryLedger};
use crate::budget::{Account, Reservation, Spent, Windows};
use crate::ledger::{BudgetStore, ClaimedWithTurn, KeyClaim, LedgerError, RequestLease, TakenTurn, TokenSettlement};

/// (turns counter, hour) -> turns; (tokens counter, day) -> tokens: the
/// names of [`Account`].
#[derive(Default)]
pub(super) struct Budgets {
    turns: HashMap<(String, String), u64>,
    tokens: HashMap<(String, String), u64>,
}

impl Budgets {
    /// Why a turn now would be refused, if it would.
    fn spent(&self, account: &Account, now_ms: u64) -> Option<Spent> {
        let windows = Windows::at(now_ms);
        let limits = &account.limits;
        let turns = self.turns.get(&(account.turns.clone(), windows.hour.clone())).copied();
        let day = |counter: &str| {
            self.tokens
                .get(&(counter.to_owned(), windows.day.clone()))
                .copied()
                .unwrap_or(0)
        };
        if turns.unwrap_or(0) >= limits.turns_per_hour {
            return Some(Spent::Turns {
                retry_after_secs: windows.turns_retry_after_secs(now_ms),
            });
        }
        let shared_spent = account
            .shared_day
            .as_ref()
            .is_some_and(|shared| day(shared.counter) >= shared.tokens_per_day);
        if day(&account.tokens) >= limits.tokens_per_day || shared_spent {
            return Some(Spent::Tokens {
                retry_after_secs: windows.tokens_retry_after_secs(now_ms),
            });
        }
        None
    }

    fn take(&mut self, account: &Account, now_ms: u64) {
        let windows = Windows::at(now_ms);
        *self.turns.entry((account.turns.clone(), windows.hour)).or_default() += 1;
        for counter in account.token_counters() {
            *self.tokens.entry((counter, windows.day.clone())).or_default() += account.limits.turn_reservation;
        }
    }

    fn give_back(&mut self, account: &Account, reservation: Reservation) {
        let windows = Windows::at(reservation.taken_at_ms);
        if let Some(turns) = self.turns.get_mut(&(account.turns.clone(), windows.hour)) {
            *turns = turns.saturating_sub(1);
        }
        for counter in account.token_counters() {
            if let Some(tokens) = self.tokens.get_mut(&(counter, windows.day.clone())) {
                *tokens = tokens.saturating_sub(reservation.tokens);
            }
        }
    }

    pub(super) fn settle(&mut self, settlement: &TokenSettlement) {
        let windows = Windows::at(settlement.reservation.taken_at_ms);
        let change = settlement.reservation.settlement(settlement.used);
        for counter in &settlement.counters {
            let tokens = self.tokens.entry((counter.clone(), windows.day.clone())).or_default();
            *tokens = tokens.saturating_add_signed(change);
        }
    }

    /// The turns counted in the hour of `at_ms` (for tests).
    fn turns_at(&self, counter: &str, at_ms: u64) -> u64 {
        let hour = Windows::at(at_ms).hour;
        self.turns.get(&(counter.to_owned(), hour)).copied().unwrap_or(0)
    }
}

impl MemoryLedger {
    /// The turns counted for `customer`'s own account in the hour of `at_ms`.
    pub fn turns_counted(&self, customer: &str, at_ms: u64) -> u64 {
        let counter = format!("u{}:{customer}", customer.len());
        self.books
            .lock()
            .map_or(0, |books| books.budgets.turns_at(&counter, at_ms))
    }
}

impl Books {
    fn take_turn(&mut self, account: &Account, now_ms: u64) -> TakenTurn {
        match self.budgets.spent(account, now_ms) {
            Some(spent) => TakenTurn::Refused(spent),
            None => {
                self.budgets.take(account, now_ms);
                TakenTurn::Taken
            }
        }
    }
}

impl BudgetStore for MemoryLedger {
    async fn take_turn(&self, account: &Account, now_ms: u64) -> Result<TakenTurn, LedgerError> {
        Ok(self.books()?.take_turn(account, now_ms))
    }

    async fn claim_with_turn(
        &self,
        lease: &RequestLease,
        account: &Account,
        now_ms: u64,
    ) -> Result<ClaimedWithTurn, LedgerError> {
        let mut books = self.books()?;
        match books.live_key(lease, now_ms) {
            Some(KeyClaim::Existing(existing)) => return Ok(ClaimedWithTurn::KeyExists(existing)),
            Some(KeyClaim::Claimed) => return Ok(ClaimedWithTurn::Both),
            None => {}
        }
        match books.take_turn(account, now_ms) {
            TakenTurn::Refused(spent) => Ok(ClaimedWithTurn::Refused(spent)),
            TakenTurn::Taken => {
                books.claim_key(lease);
                Ok(ClaimedWithTurn::Both)
            }
        }
    }

    async fn give_back_turn(&self, account: &Account, reservation: Reservation) -> Result<(), LedgerError> {
        self.books()?.budgets.give_back(account, reservation);
        Ok(())
    }

    async fn abandon_claim(
        &self,
        lease: &RequestLease,
        account: &Account,
        reservation: Reservation,
    ) -> Result<(), LedgerError> {
        let mut books = self.books()?;
        let ours = books.requests.get_mut(&lease.scope.id()).filter(|existing| {
            existing.writer == lease.writer.as_str() && existing.response.is_none() && !existing.released
        });
        if let Some(existing) = ours {
            existing.released = true;
            existing.lease_until_ms = 0;
            books.budgets.give_back(account, reservation);
        }
        Ok(())
    }

    async fn settle_tokens(&self, settlement: &TokenSettlement) -> Result<(), LedgerError> {
        self.books()?.budgets.settle(settlement);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::BudgetLimits;

    /// Two guests of other addresses: the second is refused by the day they
    /// share, settled as their own days are, and given back alike.
    #[tokio::test]
    async fn guests_share_one_day_beside_their_own() {
        let ledger = MemoryLedger::new();
        let limits = BudgetLimits {
            turns_per_hour: 10,
            tokens_per_day: 1_000,
            turn_reservation: 400,
        };
        let (a, b) = (
            Account::of_guest("guest:@a", limits, 500),
            Account::of_guest("guest:@b", limits, 500),
        );
        let at = 1_800_000_000_000;

        assert_eq!(ledger.take_turn(&a, at).await, Ok(TakenTurn::Taken));
        let reservation = Reservation {
            taken_at_ms: at,
            tokens: 400,
        };
        ledger
            .settle_tokens(&TokenSettlement {
                reservation,
                used: 600,
                counters: a.token_counters(),
            })
            .await
            .unwrap();
        assert!(matches!(
            ledger.take_turn(&b, at).await,
            Ok(TakenTurn::Refused(Spent::Tokens { .. }))
        ));
        let customer = Account::of_customer("u-1", limits);
        assert_eq!(
            ledger.take_turn(&customer, at).await,
            Ok(TakenTurn::Taken),
            "customers keep theirs"
        );
    }
}
