//! The request records on DynamoDB ([`crate::ledger::RequestLedger`]): the
//! `Idempotency-Key`'s lease, its takeover, and the answer kept for replays.

use super::*;

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

fn stored_request(item: &Item) -> Result<StoredRequest, LedgerError> {
    let response = match (text(item, "state"), number(item, "response_status")) {
        (Some(state), Some(status)) if state == RequestState::Completed.as_str() => Some(StoredResponse {
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
        released: text(item, "state") == Some(RequestState::Released.as_str()),
        conversation_id: text(item, "conversation_id").map(str::to_owned),
    })
}

impl crate::ledger::RequestLedger for DynamoLedger {
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

    async fn claim_request(&self, lease: &RequestLease, now_ms: u64) -> Result<KeyClaim, LedgerError> {
        let result = self
            .client
            .put_item()
            .set_item(
                lease
                    .conversation_id
                    .as_ref()
                    .map(|id| [("conversation_id".to_owned(), s(id))].into()),
            )
            .table_name(&self.table)
            .item("pk", s(request_pk(&lease.scope)))
            .item("kind", s("request"))
            .item("state", s(RequestState::InProgress.as_str()))
            .item("body_sha256", s(&lease.body_sha256))
            .item("request_id", s(lease.writer.invocation()))
            .item("writer", s(lease.writer.as_str()))
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
            Ok(_) => Ok(KeyClaim::Claimed),
            Err(error) => {
                use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) if text(&item, "writer") == Some(lease.writer.as_str()) => Ok(KeyClaim::Claimed),
                    Some(item) => Ok(KeyClaim::Existing(stored_request(&item)?)),
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
    ) -> Result<TakeOver, LedgerError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(request_pk(&lease.scope)))
            .update_expression(
                "SET writer = :writer, request_id = :request_id, lease_until_ms = :lease, taken_over_at = :now, \
                 #state = :in_progress",
            )
            .condition_expression(
                "writer = :previous AND ((#state = :in_progress AND lease_until_ms < :now_ms) OR #state = :released)",
            )
            .expression_attribute_values(":released", s(RequestState::Released.as_str()))
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .expression_attribute_values(":request_id", s(lease.writer.invocation()))
            .expression_attribute_values(":lease", n(lease.lease_until_ms))
            .expression_attribute_values(":now", s(rfc3339(now_ms)))
            .expression_attribute_values(":previous", s(previous_writer))
            .expression_attribute_values(":in_progress", s(RequestState::InProgress.as_str()))
            .expression_attribute_values(":now_ms", n(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(TakeOver::Won),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) if text(&item, "writer") == Some(lease.writer.as_str()) => Ok(TakeOver::Won),
                    // The winner's item: its lease is the one to wait for.
                    Some(item) => Ok(TakeOver::Lost {
                        lease_until_ms: number(&item, "lease_until_ms").unwrap_or(now_ms),
                    }),
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
        self.settle_request(
            lease,
            RequestState::Completed,
            "response_status = :status, response_body = :body, completed_at = :now",
            vec![
                (":status", n(u64::from(response.status))),
                (":body", s(&response.body)),
                (":now", s(rfc3339(now_ms))),
            ],
        )
        .await
    }

    async fn release_request(&self, lease: &RequestLease) -> Result<(), LedgerError> {
        // Kept, not deleted: the retry continues its conversation, and the
        // record still names its body.
        self.settle_request(
            lease,
            RequestState::Released,
            "lease_until_ms = :zero",
            vec![(":zero", n(0))],
        )
        .await
    }
}

impl DynamoLedger {
    /// Moves this writer's in-progress request record to `to`, setting `set`
    /// too, on the condition that the writer still holds it. A retry of a
    /// write that had landed finds its own record in `to`: done.
    async fn settle_request(
        &self,
        lease: &RequestLease,
        to: RequestState,
        set: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<(), LedgerError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(request_pk(&lease.scope)))
            .update_expression(format!("SET #state = :to, {set}"))
            .condition_expression("writer = :writer AND #state = :in_progress")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":to", s(to.as_str()))
            .expression_attribute_values(":writer", s(lease.writer.as_str()))
            .expression_attribute_values(":in_progress", s(RequestState::InProgress.as_str()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (name, value) in values {
            update = update.expression_attribute_values(name, value);
        }
        match update.send().await {
            Ok(_) => Ok(()),
            Err(error) => {
                use aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item)
                        if text(&item, "writer") == Some(lease.writer.as_str())
                            && text(&item, "state") == Some(to.as_str()) =>
                    {
                        Ok(())
                    }
                    Some(_) => Err(LedgerError::Conflict("the key is held by another request".into())),
                    None => Err(unavailable(error)),
                }
            }
        }
    }
}
