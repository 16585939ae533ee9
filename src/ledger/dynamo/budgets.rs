//! The customers' budgets on DynamoDB ([`crate::ledger::BudgetStore`]), in
//! the ledger's table: one counter item per customer and window, removed by
//! TTL a window after its own ends.
//!
//! | item | `pk` | attributes |
//! | --- | --- | --- |
//! | the hour's turns | `budget#turns#<name>#<UTC hour>` | `kind`, `turns`, `expires_at` |
//! | the day's tokens | `budget#tokens#<name>#<UTC day>` | `kind`, `tokens`, `expires_at` |
//!
//! The names are [`crate::budget::Account`]'s: `u<len>:<user>` for a
//! customer's or a guest's own; `a:<keyed hash>` for a visitor's source
//! address (its turns), `visitors` for the day all visitors share and
//! `guests` for the one all guests share beside their own.
//!
//! Taking a turn is one transaction: the hour's counter goes up on the
//! condition that it is below the limit, and the day's tokens go up by the
//! turn's reservation on the condition that they are below theirs (a
//! guest's: their own day and the guests' day, each below its own); a keyed
//! request's claim of its key rides in it (one operation, not two).
//! Concurrent requests for the last turn: exactly one passes; concurrent
//! turns see each other's reservations. The settlement to the turn's usage
//! rides in the conversation's append. Every write that counts is in a
//! transaction, whose idempotency token makes a retry of one that had
//! landed count nothing: the give-back and a settlement made on its own are
//! one-item or two-item transactions for that reason, not `UpdateItem`s.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::{DynamoLedger, Item, malformed, n, s};
use crate::budget::{Account, Reservation, Spent, Windows};
use crate::ledger::{
    BudgetStore, ClaimedWithTurn, KeyClaim, KeySettlement, LedgerError, RequestLease, TakenTurn, TokenSettlement,
};

fn turns_pk(name: &str, hour: &str) -> String {
    format!("budget#turns#{name}#{hour}")
}

fn tokens_pk(name: &str, day: &str) -> String {
    format!("budget#tokens#{name}#{day}")
}

impl DynamoLedger {
    /// Adds `tokens` (negative: takes away) to the day of `at_ms`:
    /// unconditional, so it can ride in any transaction (the conversation's
    /// append).
    pub(crate) fn tokens_update(&self, counter: &str, tokens: i64, at_ms: u64) -> Result<Update, LedgerError> {
        let windows = Windows::at(at_ms);
        Update::builder()
            .table_name(self.table())
            .key("pk", s(tokens_pk(counter, &windows.day)))
            .update_expression("ADD tokens :tokens SET expires_at = :expires, #kind = :kind")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":tokens", AttributeValue::N(tokens.to_string()))
            .expression_attribute_values(":expires", n((windows.day_ends_ms + 86_400_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)
    }

    /// A settlement's writes, one per day counter; none when it changes nothing.
    pub(crate) fn settlement_updates(&self, settlement: &TokenSettlement) -> Result<Vec<Update>, LedgerError> {
        let delta = settlement.reservation.settlement(settlement.used);
        if delta == 0 {
            return Ok(Vec::new());
        }
        settlement
            .counters
            .iter()
            .map(|counter| self.tokens_update(counter, delta, settlement.reservation.taken_at_ms))
            .collect()
    }

    /// A day's tokens go up by the turn's reservation, on the condition
    /// that they are below `limit`.
    fn reserve_update(
        &self,
        counter: &str,
        reservation: u64,
        limit: u64,
        windows: &Windows,
    ) -> Result<Update, LedgerError> {
        Update::builder()
            .table_name(self.table())
            .key("pk", s(tokens_pk(counter, &windows.day)))
            .update_expression("ADD tokens :reserve SET expires_at = :expires, #kind = :kind")
            .condition_expression("attribute_not_exists(tokens) OR tokens < :limit")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":reserve", n(reservation))
            .expression_attribute_values(":limit", n(limit))
            .expression_attribute_values(":expires", n((windows.day_ends_ms + 86_400_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)
    }

    /// The turn's transaction: the hour's turns, the day's tokens, the
    /// shared day's when the account has one, and the key's claim last when
    /// given ([`claim_index`]). `Ok(None)`: written.
    async fn turn_transaction(
        &self,
        account: &Account,
        claim: Option<&RequestLease>,
        now_ms: u64,
    ) -> Result<Option<Vec<Option<Item>>>, LedgerError> {
        let windows = Windows::at(now_ms);
        let limits = &account.limits;
        let turns = Update::builder()
            .table_name(self.table())
            .key("pk", s(turns_pk(&account.turns, &windows.hour)))
            .update_expression("ADD turns :one SET expires_at = :expires, #kind = :kind")
            .condition_expression("attribute_not_exists(turns) OR turns < :limit")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":limit", n(limits.turns_per_hour))
            .expression_attribute_values(":expires", n((windows.hour_ends_ms + 3_600_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)?;
        let tokens = self.reserve_update(
            &account.tokens,
            limits.turn_reservation,
            limits.tokens_per_day,
            &windows,
        )?;
        let mut items = vec![
            TransactWriteItem::builder().update(turns).build(),
            TransactWriteItem::builder().update(tokens).build(),
        ];
        if let Some(shared) = &account.shared_day {
            let day = self.reserve_update(shared.counter, limits.turn_reservation, shared.tokens_per_day, &windows)?;
            items.push(TransactWriteItem::builder().update(day).build());
        }
        if let Some(lease) = claim {
            items.push(TransactWriteItem::builder().put(self.claim_put(lease, now_ms)?).build());
        }
        self.transact(items).await
    }

    /// The turn of `reservation` and its tokens, given back: the hour's
    /// counter never below zero, nothing recreated that TTL removed.
    fn give_back_items(
        &self,
        account: &Account,
        reservation: Reservation,
    ) -> Result<Vec<TransactWriteItem>, LedgerError> {
        let windows = Windows::at(reservation.taken_at_ms);
        let turns = Update::builder()
            .table_name(self.table())
            .key("pk", s(turns_pk(&account.turns, &windows.hour)))
            .update_expression("ADD turns :minus_one")
            .condition_expression("turns > :zero")
            .expression_attribute_values(":minus_one", AttributeValue::N("-1".into()))
            .expression_attribute_values(":zero", n(0))
            .build()
            .map_err(malformed)?;
        let mut items = vec![TransactWriteItem::builder().update(turns).build()];
        if reservation.tokens > 0 {
            for counter in account.token_counters() {
                let tokens = Update::builder()
                    .table_name(self.table())
                    .key("pk", s(tokens_pk(&counter, &windows.day)))
                    .update_expression("ADD tokens :minus")
                    .condition_expression("attribute_exists(tokens)")
                    .expression_attribute_values(":minus", AttributeValue::N(format!("-{}", reservation.tokens)))
                    .build()
                    .map_err(malformed)?;
                items.push(TransactWriteItem::builder().update(tokens).build());
            }
        }
        Ok(items)
    }
}

/// Where the key's claim sits in the turn's transaction: after the turns,
/// the tokens and the shared day if any.
fn claim_index(account: &Account) -> usize {
    2 + usize::from(account.shared_day.is_some())
}

/// What a refused turn's transaction says: the day's tokens outlast the
/// hour's turns, so when both are spent the longer wait wins (either day).
fn spent(account: &Account, found: &[Option<Item>], now_ms: u64) -> Spent {
    let windows = Windows::at(now_ms);
    let day_spent = (1..claim_index(account)).any(|index| found.get(index).is_some_and(Option::is_some));
    if day_spent {
        Spent::Tokens {
            retry_after_secs: windows.tokens_retry_after_secs(now_ms),
        }
    } else {
        Spent::Turns {
            retry_after_secs: windows.turns_retry_after_secs(now_ms),
        }
    }
}

impl BudgetStore for DynamoLedger {
    async fn take_turn(&self, account: &Account, now_ms: u64) -> Result<TakenTurn, LedgerError> {
        Ok(match self.turn_transaction(account, None, now_ms).await? {
            None => TakenTurn::Taken,
            Some(found) => TakenTurn::Refused(spent(account, &found, now_ms)),
        })
    }

    async fn claim_with_turn(
        &self,
        lease: &RequestLease,
        account: &Account,
        now_ms: u64,
    ) -> Result<ClaimedWithTurn, LedgerError> {
        let Some(found) = self.turn_transaction(account, Some(lease), now_ms).await? else {
            return Ok(ClaimedWithTurn::Both);
        };
        // The key first: a replay, a 409 or a 422 spends nothing.
        if let Some(Some(item)) = found.get(claim_index(account)) {
            return Ok(match self.claim_found(lease, item)? {
                // Our own retried transaction had landed, turn and all.
                KeyClaim::Claimed => ClaimedWithTurn::Both,
                KeyClaim::Existing(existing) => ClaimedWithTurn::KeyExists(existing),
            });
        }
        Ok(ClaimedWithTurn::Refused(spent(account, &found, now_ms)))
    }

    async fn give_back_turn(&self, account: &Account, reservation: Reservation) -> Result<(), LedgerError> {
        // A cancellation on a condition: the counters went with their
        // window (TTL), or are at zero; nothing to give back.
        self.transact(self.give_back_items(account, reservation)?)
            .await
            .map(|_| ())
    }

    async fn abandon_claim(
        &self,
        lease: &RequestLease,
        account: &Account,
        reservation: Reservation,
    ) -> Result<(), LedgerError> {
        // The key's release is conditional on our own claim being there, so
        // the turn is given back only if the claim landed.
        let release = self.settle_update(&KeySettlement::Release(lease.clone()), 0)?;
        let mut items = vec![TransactWriteItem::builder().update(release).build()];
        items.extend(self.give_back_items(account, reservation)?);
        self.transact(items).await.map(|_| ())
    }

    async fn settle_tokens(&self, settlement: &TokenSettlement) -> Result<(), LedgerError> {
        let updates = self.settlement_updates(settlement)?;
        if updates.is_empty() {
            return Ok(());
        }
        self.transact(
            updates
                .into_iter()
                .map(|update| TransactWriteItem::builder().update(update).build()),
        )
        .await
        .map(|_| ())
    }
}
