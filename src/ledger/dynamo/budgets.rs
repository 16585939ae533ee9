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
//! below theirs. Concurrent requests for the last turn: exactly one passes.
//! A retry of a transaction that landed is the SDK's, with its idempotency
//! token: it cannot count twice.

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};

use super::{DynamoLedger, malformed, n, s, unavailable};
use crate::budget::{BudgetLimits, Spent, Windows};
use crate::ledger::{BudgetStore, LedgerError, TakenTurn};

fn turns_pk(customer: &str, hour: &str) -> String {
    format!("budget#turns#u{}:{customer}#{hour}", customer.len())
}

fn tokens_pk(customer: &str, day: &str) -> String {
    format!("budget#tokens#u{}:{customer}#{day}", customer.len())
}

impl BudgetStore for DynamoLedger {
    async fn take_turn(&self, customer: &str, limits: &BudgetLimits, now_ms: u64) -> Result<TakenTurn, LedgerError> {
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
        let items = [
            TransactWriteItem::builder().update(turns).build(),
            TransactWriteItem::builder().condition_check(tokens).build(),
        ];
        Ok(match self.transact(items).await? {
            None => TakenTurn::Taken,
            // The day's tokens outlast the hour's turns: the longer wait wins.
            Some(found) if found.get(1).is_some_and(Option::is_some) => TakenTurn::Refused(Spent::Tokens {
                retry_after_secs: windows.tokens_retry_after_secs(now_ms),
            }),
            Some(_) => TakenTurn::Refused(Spent::Turns {
                retry_after_secs: windows.turns_retry_after_secs(now_ms),
            }),
        })
    }

    async fn add_tokens(&self, customer: &str, tokens: u64, now_ms: u64) -> Result<(), LedgerError> {
        let windows = Windows::at(now_ms);
        self.client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(tokens_pk(customer, &windows.day)))
            .update_expression("ADD tokens :tokens SET expires_at = :expires, #kind = :kind")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":tokens", n(tokens))
            .expression_attribute_values(":expires", n((windows.day_ends_ms + 86_400_000) / 1000))
            .expression_attribute_values(":kind", s("budget"))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}
