//! The request records on DynamoDB ([`crate::ledger::RequestLedger`]): the
//! `Idempotency-Key`'s lease, its takeover, and the answer kept for replays.

use super::*;
use crate::ledger::KeySettlement;

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
        let claim = self.claim_put(lease, now_ms)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(claim.item))
            .set_condition_expression(claim.condition_expression)
            .set_expression_attribute_values(claim.expression_attribute_values)
            .set_return_values_on_condition_check_failure(claim.return_values_on_condition_check_failure)
            .send()
            .await;
        match result {
            Ok(_) => Ok(KeyClaim::Claimed),
            Err(error) => {
                use aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException as Failed;
                match condition_failed_item!(error, Failed) {
                    Some(item) => self.claim_found(lease, &item),
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
        self.settle_request(KeySettlement::Store(lease.clone(), response.clone()), now_ms)
            .await
    }

    async fn release_request(&self, lease: &RequestLease) -> Result<(), LedgerError> {
        self.settle_request(KeySettlement::Release(lease.clone()), 0).await
    }
}

impl DynamoLedger {
    /// The claim of a key: the request record, in progress, on the
    /// condition that the key has no live record.
    pub(crate) fn claim_put(&self, lease: &RequestLease, now_ms: u64) -> Result<Put, LedgerError> {
        let mut item: Item = [
            ("pk", s(request_pk(&lease.scope))),
            ("kind", s("request")),
            ("state", s(RequestState::InProgress.as_str())),
            ("body_sha256", s(&lease.body_sha256)),
            ("request_id", s(lease.writer.invocation())),
            ("writer", s(lease.writer.as_str())),
            ("lease_until_ms", n(lease.lease_until_ms)),
            ("expires_at", n(lease.expires_at_s)),
            ("created_at", s(rfc3339(now_ms))),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        if let Some(id) = &lease.conversation_id {
            item.insert("conversation_id".into(), s(id));
        }
        Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            // An expired record is absent (TTL deletes lazily): it may be replaced.
            .condition_expression("attribute_not_exists(pk) OR expires_at < :now_s")
            .expression_attribute_values(":now_s", n(now_ms / 1000))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)
    }

    /// What a claim's failed condition found: our own retried claim, or the
    /// key's live record.
    pub(crate) fn claim_found(&self, lease: &RequestLease, item: &Item) -> Result<KeyClaim, LedgerError> {
        if text(item, "writer") == Some(lease.writer.as_str()) {
            Ok(KeyClaim::Claimed)
        } else {
            stored_request(item).map(KeyClaim::Existing)
        }
    }

    /// The settlement of this writer's in-progress request record, on the
    /// condition that the writer still holds it.
    pub(crate) fn settle_update(&self, settlement: &KeySettlement, now_ms: u64) -> Result<Update, LedgerError> {
        let (lease, to, set, values) = match settlement {
            KeySettlement::Store(lease, response) => (
                lease,
                RequestState::Completed,
                "response_status = :status, response_body = :body, completed_at = :now",
                vec![
                    (":status", n(u64::from(response.status))),
                    (":body", s(&response.body)),
                    (":now", s(rfc3339(now_ms))),
                ],
            ),
            // Kept, not deleted: the retry continues its conversation, and
            // the record still names its body.
            KeySettlement::Release(lease) => (
                lease,
                RequestState::Released,
                "lease_until_ms = :zero",
                vec![(":zero", n(0))],
            ),
        };
        let mut update = Update::builder()
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
        update.build().map_err(malformed)
    }

    /// Whether what a settlement's failed condition found is its own
    /// retried write that had landed.
    pub(crate) fn settled_already(settlement: &KeySettlement, item: &Item) -> bool {
        let (lease, to) = match settlement {
            KeySettlement::Store(lease, _) => (lease, RequestState::Completed),
            KeySettlement::Release(lease) => (lease, RequestState::Released),
        };
        text(item, "writer") == Some(lease.writer.as_str()) && text(item, "state") == Some(to.as_str())
    }

    /// Settles this writer's in-progress request record. A retry of a write
    /// that had landed finds its own record settled: done.
    async fn settle_request(&self, settlement: KeySettlement, now_ms: u64) -> Result<(), LedgerError> {
        let update = self.settle_update(&settlement, now_ms)?;
        match update_alone(&self.client, update).await? {
            None => Ok(()),
            Some(item) if Self::settled_already(&settlement, &item) => Ok(()),
            Some(_) => Err(LedgerError::Conflict("the key is held by another request".into())),
        }
    }
}
