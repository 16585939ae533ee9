//! The desk's `Idempotency-Key` (contract 24): each POST of a person's
//! click is answered once, and the same key again gets that answer. An
//! item of the ledger table per person and key (`staffclick#<sub>#<key>`),
//! written before the decision runs and holding its answer once it has run;
//! it expires with `IDEMPOTENCY_TTL_HOURS` as the customers' keys do.
//!
//! The decisions are safe without it (of two approvals one pays, the
//! other is told who decided); the key is what keeps a double-clicked
//! reply from being posted twice, and what gives a re-sent click its first
//! answer rather than a 409 naming the person themselves.

use std::time::Duration;

use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;

use super::{DynamoLedger, n, number, s, text, unavailable};
use crate::clock::now_ms;
use crate::ledger::LedgerError;

/// What a click's key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Click {
    /// The key is new (or its earlier run was let go): run the decision.
    Fresh,
    /// Answered before: this status and body.
    Answered { status: u16, body: String },
    /// The same key for another request (another route or body).
    Mismatch,
    /// Still running, or ended without an answer (its outcome is not known).
    Running,
}

fn click_pk(person: &str, key: &str) -> String {
    format!("staffclick#{person}#{key}")
}

impl DynamoLedger {
    /// Takes `key` of `person` for a request with `fingerprint`.
    pub async fn begin_click(
        &self,
        person: &str,
        key: &str,
        fingerprint: &str,
        ttl: Duration,
    ) -> Result<Click, LedgerError> {
        let now = now_ms();
        let result = self
            .client()
            .put_item()
            .table_name(self.table())
            .item("pk", s(click_pk(person, key)))
            .item("kind", s("staff_click"))
            .item("fingerprint", s(fingerprint))
            .item("click_state", s("running"))
            .item("started_ms", n(now))
            .item("expires_at", n((now + ttl.as_millis() as u64) / 1000))
            // A key let go (its decision could not reach the ledger) may run again.
            .condition_expression(
                "attribute_not_exists(pk) OR (click_state = :released AND fingerprint = :fingerprint)",
            )
            .expression_attribute_values(":released", s("released"))
            .expression_attribute_values(":fingerprint", s(fingerprint))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let error = match result {
            Ok(_) => return Ok(Click::Fresh),
            Err(error) => error,
        };
        use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
        let Some(Failed(failed)) = error.as_service_error() else {
            return Err(unavailable(error));
        };
        let Some(item) = failed.item() else {
            return Ok(Click::Running);
        };
        if text(item, "fingerprint") != Some(fingerprint) {
            return Ok(Click::Mismatch);
        }
        Ok(match text(item, "click_state") {
            Some("answered") => Click::Answered {
                status: number(item, "status").unwrap_or(200) as u16,
                body: text(item, "body").unwrap_or_default().to_owned(),
            },
            _ => Click::Running,
        })
    }

    /// Keeps the answer of a click's decision for its key.
    pub async fn answer_click(&self, person: &str, key: &str, status: u16, body: &str) -> Result<(), LedgerError> {
        self.client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(click_pk(person, key)))
            .update_expression("SET click_state = :answered, #status = :status, body = :body")
            .condition_expression("click_state = :running")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":answered", s("answered"))
            .expression_attribute_values(":running", s("running"))
            .expression_attribute_values(":status", n(u64::from(status)))
            .expression_attribute_values(":body", s(body))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Lets a key go whose decision wrote nothing (the ledger could not be
    /// reached before it decided): the same click may run again.
    pub async fn release_click(&self, person: &str, key: &str) -> Result<(), LedgerError> {
        self.client()
            .update_item()
            .table_name(self.table())
            .key("pk", s(click_pk(person, key)))
            .update_expression("SET click_state = :released")
            .condition_expression("click_state = :running")
            .expression_attribute_values(":released", s("released"))
            .expression_attribute_values(":running", s("running"))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}
