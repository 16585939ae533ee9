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
//! address (its turns) and `visitors` for the day all visitors share.
//!
//! Taking a turn is one transaction: the hour's counter goes up on the
//! condition that it is below the limit, and the day's tokens go up by the
//! turn's reservation on the condition that they are below theirs; a keyed
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

    /// A settlement's write, `None` when it changes nothing.
    pub(crate) fn settlement_update(&self, settlement: &TokenSettlement) -> Result<Option<Update>, LedgerError> {
        let delta = settlement.reservation.settlement(settlement.used);
        if delta == 0 {
            return Ok(None);
        }
        self.tokens_update(&settlement.counter, delta, settlement.reservation.taken_at_ms)
            .map(Some)
    }

    /// The turn's transaction, with the key's claim as its third item when
    /// given. `Ok(None)`: written.
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
        let tokens = Update::builder()
            .table_name(self.table())
            .key("pk", s(tokens_pk(&account.tokens, &windows.day)))
            .update_expression("ADD tokens :reserve SET expires_at = :expires, #kind = :kind")
            .condition_expression("attribute_not_exists(tokens) OR tokens < :limit")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":reserve", n(limits.turn_reservation))
            .expression_attribute_values(":limit", n(limits.tokens_per_day))
            .expression_attribute_values(":expires", n((windows.day_ends_ms + 86_400_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)?;
        let mut items = vec![
            TransactWriteItem::builder().update(turns).build(),
            TransactWriteItem::builder().update(tokens).build(),
        ];
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
            let tokens = Update::builder()
                .table_name(self.table())
                .key("pk", s(tokens_pk(&account.tokens, &windows.day)))
                .update_expression("ADD tokens :minus")
                .condition_expression("attribute_exists(tokens)")
                .expression_attribute_values(":minus", AttributeValue::N(format!("-{}", reservation.tokens)))
                .build()
                .map_err(malformed)?;
            items.push(TransactWriteItem::builder().update(tokens).build());
        }
        Ok(items)
    }
}

/// What a refused turn's transaction says: the day's tokens outlast the
/// hour's turns, so when both are spent the longer wait wins.
fn spent(found: &[Option<Item>], now_ms: u64) -> Spent {
    let windows = Windows::at(now_ms);
    if found.get(1).is_some_and(Option::is_some) {
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
            Some(found) => TakenTurn::Refused(spent(&found, now_ms)),
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
        if let Some(Some(item)) = found.get(2) {
            return Ok(match self.claim_found(lease, item)? {
                // Our own retried transaction had landed, turn and all.
                KeyClaim::Claimed => ClaimedWithTurn::Both,
                KeyClaim::Existing(existing) => ClaimedWithTurn::KeyExists(existing),
            });
        }
        Ok(ClaimedWithTurn::Refused(spent(&found, now_ms)))
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
        let Some(update) = self.settlement_update(settlement)? else {
            return Ok(());
        };
        self.transact([TransactWriteItem::builder().update(update).build()])
            .await
            .map(|_| ())
    }
}
