//! The customers' budgets on DynamoDB ([`crate::ledger::BudgetStore`]), in
//! the ledger's table: one counter item per customer and window, removed by
//! TTL a window after its own ends.
//!
//! | item | `pk` | attributes |
//! | --- | --- | --- |
//! | the hour's turns | `budget#turns#u<len>:<user>#<UTC hour>` | `kind`, `turns`, `expires_at` |
//! | the day's tokens | `budget#tokens#u<len>:<user>#<UTC day>` | `kind`, `tokens`, `expires_at` |
//!
//! Taking a turn is one transaction: the hour's counter goes up on the
//! condition that it is below the limit, and the day's tokens are checked
//! below theirs; a keyed request's claim of its key rides in it (one
//! operation, not two). Concurrent requests for the last turn: exactly one
//! passes. The tokens are added in the conversation's append.
//! A retry of a transaction that landed carries its idempotency token
//! ([`super::direct`]): it cannot count twice.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update};

use super::{DynamoLedger, Item, malformed, n, s, update_alone};
use crate::budget::{BudgetLimits, Spent, Windows};
use crate::ledger::{BudgetStore, ClaimedWithTurn, KeyClaim, LedgerError, RequestLease, TakenTurn};

fn turns_pk(customer: &str, hour: &str) -> String {
    format!("budget#turns#u{}:{customer}#{hour}", customer.len())
}

fn tokens_pk(customer: &str, day: &str) -> String {
    format!("budget#tokens#u{}:{customer}#{day}", customer.len())
}

impl DynamoLedger {
    /// Adds `tokens` to the customer's day: unconditional, so it can ride in
    /// any transaction (the conversation's append).
    pub(crate) fn tokens_update(&self, customer: &str, tokens: u64, now_ms: u64) -> Result<Update, LedgerError> {
        let windows = Windows::at(now_ms);
        Update::builder()
            .table_name(self.table())
            .key("pk", s(tokens_pk(customer, &windows.day)))
            .update_expression("ADD tokens :tokens SET expires_at = :expires, #kind = :kind")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":tokens", n(tokens))
            .expression_attribute_values(":expires", n((windows.day_ends_ms + 86_400_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)
    }
}

impl DynamoLedger {
    /// The turn's transaction, with the key's claim as its third item when
    /// given. `Ok(None)`: written.
    async fn turn_transaction(
        &self,
        customer: &str,
        limits: &BudgetLimits,
        claim: Option<&RequestLease>,
        now_ms: u64,
    ) -> Result<Option<Vec<Option<Item>>>, LedgerError> {
        let windows = Windows::at(now_ms);
        let turns = Update::builder()
            .table_name(self.table())
            .key("pk", s(turns_pk(customer, &windows.hour)))
            .update_expression("ADD turns :one SET expires_at = :expires, #kind = :kind")
            .condition_expression("attribute_not_exists(turns) OR turns < :limit")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":limit", n(limits.turns_per_hour))
            .expression_attribute_values(":expires", n((windows.hour_ends_ms + 3_600_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .map_err(malformed)?;
        let tokens = ConditionCheck::builder()
            .table_name(self.table())
            .key("pk", s(tokens_pk(customer, &windows.day)))
            .condition_expression("attribute_not_exists(tokens) OR tokens < :limit")
            .expression_attribute_values(":limit", n(limits.tokens_per_day))
            .build()
            .map_err(malformed)?;
        let mut items = vec![
            TransactWriteItem::builder().update(turns).build(),
            TransactWriteItem::builder().condition_check(tokens).build(),
        ];
        if let Some(lease) = claim {
            items.push(TransactWriteItem::builder().put(self.claim_put(lease, now_ms)?).build());
        }
        self.transact(items).await
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
    async fn take_turn(&self, customer: &str, limits: &BudgetLimits, now_ms: u64) -> Result<TakenTurn, LedgerError> {
        Ok(match self.turn_transaction(customer, limits, None, now_ms).await? {
            None => TakenTurn::Taken,
            Some(found) => TakenTurn::Refused(spent(&found, now_ms)),
        })
    }

    async fn claim_with_turn(
        &self,
        lease: &RequestLease,
        limits: &BudgetLimits,
        now_ms: u64,
    ) -> Result<ClaimedWithTurn, LedgerError> {
        let customer = lease.scope.user_id();
        let Some(found) = self.turn_transaction(customer, limits, Some(lease), now_ms).await? else {
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

    async fn give_back_turn(&self, customer: &str, taken_at_ms: u64) -> Result<(), LedgerError> {
        let windows = Windows::at(taken_at_ms);
        let update = Update::builder()
            .table_name(self.table())
            .key("pk", s(turns_pk(customer, &windows.hour)))
            .update_expression("ADD turns :minus_one")
            .condition_expression("turns > :zero")
            .expression_attribute_values(":minus_one", AttributeValue::N("-1".into()))
            .expression_attribute_values(":zero", n(0))
            .build()
            .map_err(malformed)?;
        // A condition that fails: the counter is gone with its hour (TTL), or at zero.
        update_alone(self.client(), update).await.map(|_| ())
    }

    async fn add_tokens(&self, customer: &str, tokens: u64, now_ms: u64) -> Result<(), LedgerError> {
        update_alone(self.client(), self.tokens_update(customer, tokens, now_ms)?)
            .await
            .map(|_| ())
    }
}
