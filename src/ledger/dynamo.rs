//! The ledger on DynamoDB: one table, string partition key `pk`, no sort key.
//!
//! | item | `pk` | attributes |
//! | --- | --- | --- |
//! | refund record | `refund#<scope>` | `kind`, `scope`, `user_id`, `order_id`, `amount_cents`, `request_id`, `writer`, `idempotency_key`, `decision`, `state`, `created_at`, `created_at_ms`, then `updated_at`, `refund_id`, `receipt_status`, `payments_status`, `payments_detail`, `failure` |
//! | request record | `request#<scope>` | `kind`, `state` (`in_progress`/`completed`), `body_sha256`, `request_id`, `writer`, `lease_until_ms`, `expires_at` (the TTL attribute, epoch seconds), `created_at`, then `response_status`, `response_body` |
//!
//! `<scope>` is [`RefundScope::id`]. Refund records carry no `expires_at`,
//! so TTL never touches them. TTL deletes lazily, so every read of a request
//! record checks `expires_at` itself.
//!
//! Retries: the SDK's standard retries stay on, inside the one
//! `LEDGER_TIMEOUT_SECS` operation timeout. That is safe because every write
//! here is conditional: a retry of a write that already landed fails its
//! condition, and the item returned with the failure carries our own
//! `writer`, which we recognise as success. No write can apply twice.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use super::{LedgerError, RefundClaim, RequestClaim, RequestLease, StoredRequest, StoredResponse};
use crate::clock::rfc3339;
use crate::money::AmountCents;
use crate::refund::{PriorRefund, Receipt, RefundOutcome, RefundRequest, RefundScope, RefundState};

type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoLedger {
    client: Client,
    table: String,
}

impl DynamoLedger {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoLedger {
            client,
            table: table.into(),
        }
    }

    /// A client on the shared AWS configuration (one HTTP client, one root
    /// store), every operation bounded by `timeout`.
    pub fn from_sdk_config(sdk: &aws_config::SdkConfig, table: impl Into<String>, timeout: Duration) -> Self {
        let config = aws_sdk_dynamodb::config::Builder::from(sdk)
            .timeout_config(TimeoutConfig::builder().operation_timeout(timeout).build())
            .build();
        DynamoLedger::new(Client::from_conf(config), table)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

/// The DynamoDB actions this adapter calls: the function's role grants exactly
/// these (`template.yaml`; `tests/template.rs` checks it).
pub const ACTIONS_USED: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
];

pub fn refund_pk(scope: &RefundScope) -> String {
    format!("refund#{}", scope.id())
}

pub fn request_pk(scope: &RefundScope) -> String {
    format!("request#{}", scope.id())
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

pub fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok())
}

fn required<'a>(item: &'a Item, name: &str) -> Result<&'a str, LedgerError> {
    text(item, name).ok_or_else(|| LedgerError::Malformed(format!("no {name}")))
}

/// The SDK's error, with its cause (its `Display` alone says only "service error").
fn unavailable<E, R>(error: SdkError<E, R>) -> LedgerError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    metrics::counter!("LedgerFailures").increment(1);
    match error {
        SdkError::TimeoutError(_) => LedgerError::Timeout,
        other => LedgerError::Unavailable(DisplayErrorContext(other).to_string()),
    }
}

/// A refund record as the turn needs to see it.
pub fn prior_refund(item: &Item) -> Result<PriorRefund, LedgerError> {
    let state = RefundState::parse(required(item, "state")?)
        .ok_or_else(|| LedgerError::Malformed("unknown refund state".into()))?;
    let receipt = match (text(item, "refund_id"), state) {
        (Some(refund_id), RefundState::Executed) => Some(Receipt {
            refund_id: refund_id.to_owned(),
            status: text(item, "receipt_status").unwrap_or_default().to_owned(),
            amount_cents: AmountCents::new(number(item, "amount_cents").unwrap_or_default()),
        }),
        _ => None,
    };
    Ok(PriorRefund {
        state,
        order_id: required(item, "order_id")?.to_owned(),
        amount: AmountCents::new(number(item, "amount_cents").unwrap_or_default()),
        receipt,
    })
}

fn stored_request(item: &Item) -> Result<StoredRequest, LedgerError> {
    let response = match (text(item, "state"), number(item, "response_status")) {
        (Some("completed"), Some(status)) => Some(StoredResponse {
            status: u16::try_from(status).map_err(|_| LedgerError::Malformed("response_status".into()))?,
            body: required(item, "response_body")?.to_owned(),
        }),
        _ => None,
    };
    Ok(StoredRequest {
        body_sha256: required(item, "body_sha256")?.to_owned(),
        writer: required(item, "writer")?.to_owned(),
        lease_until_ms: number(item, "lease_until_ms").unwrap_or_default(),
        expires_at_s: number(item, "expires_at").unwrap_or_default(),
        response,
    })
}

/// The item a failed condition found (`ReturnValuesOnConditionCheckFailure::AllOld`),
/// or `None` when the failure was of another kind.
macro_rules! condition_failed_item {
    ($error:expr, $kind:path) => {
        match $error.as_service_error() {
            Some($kind(failed)) => Some(failed.item().cloned().unwrap_or_default()),
            _ => None,
        }
    };
}

impl super::Ledger for DynamoLedger {
    async fn record_refund(&self, request: &RefundRequest, now_ms: u64) -> Result<RefundClaim, LedgerError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(refund_pk(&request.scope)))
            .item("kind", s("refund"))
            .item("scope", s(request.scope.id()))
            .item("user_id", s(request.scope.user_id()))
            .item("order_id", s(&request.order_id))
            .item("amount_cents", n(request.amount.cents()))
            .item("request_id", s(&request.request_id))
            .item("writer", s(&request.writer))
            .item("decision", s("automatic"))
            .item("state", s(RefundState::Executing.as_str()))
            .item("created_at", s(rfc3339(now_ms)))
            .item("created_at_ms", n(now_ms))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(key) = request.scope.idempotency_key() {
            put = put.item("idempotency_key", s(key));
        }
        match put.send().await {
            Ok(_) => Ok(RefundClaim::Recorded),
            Err(error) => {
                use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) if text(&item, "writer") == Some(request.writer.as_str()) => Ok(RefundClaim::Recorded),
                    Some(item) => Ok(RefundClaim::Existing(prior_refund(&item)?)),
                    None => Err(unavailable(error)),
                }
            }
        }
    }

    async fn record_outcome(
        &self,
        request: &RefundRequest,
        outcome: &RefundOutcome,
        now_ms: u64,
    ) -> Result<(), LedgerError> {
        let Some(state) = outcome.payments_state() else {
            return Ok(());
        };
        let mut set = vec!["#state = :state", "updated_at = :now"];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(refund_pk(&request.scope)))
            .condition_expression("#state = :executing AND writer = :writer")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":state", s(state.as_str()))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":executing", s(RefundState::Executing.as_str()))
            .expression_attribute_values(":writer", s(&request.writer))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match outcome {
            RefundOutcome::Executed(receipt) => {
                set.extend(["refund_id = :refund_id", "receipt_status = :receipt_status"]);
                update = update
                    .expression_attribute_values(":refund_id", s(&receipt.refund_id))
                    .expression_attribute_values(":receipt_status", s(&receipt.status));
            }
            RefundOutcome::Rejected { status, detail } => {
                set.extend(["payments_status = :status", "payments_detail = :detail"]);
                update = update
                    .expression_attribute_values(":status", n(u64::from(*status)))
                    .expression_attribute_values(":detail", s(detail));
            }
            RefundOutcome::Unknown(error) => {
                set.push("failure = :failure");
                update = update.expression_attribute_values(":failure", s(error.to_string()));
            }
            _ => {}
        }
        match update.update_expression(format!("SET {}", set.join(", "))).send().await {
            Ok(_) => Ok(()),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item)
                        if text(&item, "writer") == Some(request.writer.as_str())
                            && text(&item, "state") == Some(state.as_str()) =>
                    {
                        Ok(())
                    }
                    Some(item) => Err(LedgerError::Conflict(format!(
                        "refund record is {:?}, not executing",
                        text(&item, "state")
                    ))),
                    None => Err(unavailable(error)),
                }
            }
        }
    }

    async fn refund_exists(&self, scope: &RefundScope) -> Result<bool, LedgerError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(refund_pk(scope)))
            .consistent_read(true)
            .projection_expression("pk")
            .send()
            .await
            .map_err(unavailable)?;
        Ok(output.item().is_some())
    }

    async fn claim_request(&self, lease: &RequestLease, now_ms: u64) -> Result<RequestClaim, LedgerError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(request_pk(&lease.scope)))
            .item("kind", s("request"))
            .item("state", s("in_progress"))
            .item("body_sha256", s(&lease.body_sha256))
            .item("request_id", s(&lease.request_id))
            .item("writer", s(&lease.writer))
            .item("lease_until_ms", n(lease.lease_until_ms))
            .item("expires_at", n(lease.expires_at_s))
            .item("created_at", s(rfc3339(now_ms)))
            // An expired record is absent (TTL deletes lazily): it may be replaced.
            .condition_expression("attribute_not_exists(pk) OR expires_at < :now_s")
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(RequestClaim::Claimed),
            Err(error) => {
                use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) if text(&item, "writer") == Some(lease.writer.as_str()) => Ok(RequestClaim::Claimed),
                    Some(item) => Ok(RequestClaim::Existing(stored_request(&item)?)),
                    None => Err(unavailable(error)),
                }
            }
        }
    }

    async fn take_over_request(
        &self,
        lease: &RequestLease,
        previous_writer: &str,
        now_ms: u64,
    ) -> Result<bool, LedgerError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(request_pk(&lease.scope)))
            .update_expression(
                "SET writer = :writer, request_id = :request_id, lease_until_ms = :lease, taken_over_at = :now",
            )
            .condition_expression("writer = :previous AND #state = :in_progress AND lease_until_ms < :now_ms")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":writer", s(&lease.writer))
            .expression_attribute_values(":request_id", s(&lease.request_id))
            .expression_attribute_values(":lease", n(lease.lease_until_ms))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":previous", s(previous_writer))
            .expression_attribute_values(":in_progress", s("in_progress"))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) => Ok(text(&item, "writer") == Some(lease.writer.as_str())),
                    None => Err(unavailable(error)),
                }
            }
        }
    }

    async fn complete_request(
        &self,
        lease: &RequestLease,
        response: &StoredResponse,
        now_ms: u64,
    ) -> Result<(), LedgerError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(request_pk(&lease.scope)))
            .update_expression(
                "SET #state = :completed, response_status = :status, response_body = :body, completed_at = :now",
            )
            .condition_expression("writer = :writer AND #state = :in_progress")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":completed", s("completed"))
            .expression_attribute_values(":status", n(u64::from(response.status)))
            .expression_attribute_values(":body", s(&response.body))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":writer", s(&lease.writer))
            .expression_attribute_values(":in_progress", s("in_progress"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item)
                        if text(&item, "writer") == Some(lease.writer.as_str())
                            && text(&item, "state") == Some("completed") =>
                    {
                        Ok(())
                    }
                    Some(_) => Err(LedgerError::Conflict("the key is held by another request".into())),
                    None => Err(unavailable(error)),
                }
            }
        }
    }

    async fn release_request(&self, lease: &RequestLease) -> Result<(), LedgerError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(request_pk(&lease.scope)))
            .condition_expression("writer = :writer AND #state = :in_progress")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":writer", s(&lease.writer))
            .expression_attribute_values(":in_progress", s("in_progress"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(error) => {
                use aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    // Nothing there: a retry of a delete that had already landed.
                    Some(item) if item.is_empty() => Ok(()),
                    Some(_) => Err(LedgerError::Conflict("the key is held by another request".into())),
                    None => Err(unavailable(error)),
                }
            }
        }
    }
}
