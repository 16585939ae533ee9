//! The ledger on DynamoDB: one table, string partition key `pk`, no sort
//! key, and one sparse index, `waiting`, of the refund records that wait for
//! someone (an approval, or an outcome to confirm).
//!
//! | item | `pk` | attributes |
//! | --- | --- | --- |
//! | refund record | `refund#<record id>` | `kind`, `record_id`, `scope`, `user_id`, `order_id`, `amount_cents`, `request_id`, `writer`, `idempotency_key`, `decision` (`automatic`/`approval`), `reasons`, `customer_message` (approvals only), the order's facts (`order_status`, `order_delivered_at`, `order_paid_cents`, `order_refunded_cents`, `order_currency`: contract 16, no address), `router` (the router's labels of the turn, contract 21), `state`, `waiting_for`, `day`, `created_at`, `created_at_ms`, `executing_since_ms`; then `updated_at`, `refund_id`, `receipt_status`, `payments_status`, `payments_detail`, `failure`; staff: `decided_by`, `decided_at`, `rejection_reason`, `resolution`, `resolved_refund_id`, `resolved_by`, `resolved_at` |
//! | request record | `request#<scope>` | `kind`, `state` (`in_progress`/`completed`/`released`), `conversation_id`, `body_sha256`, `request_id`, `writer`, `lease_until_ms`, `expires_at` (the TTL attribute, epoch seconds), `created_at`, then `response_status`, `response_body` |
//! | order guard (rule 2) | `order#<order key>` | `live` (the ids of the order's refund records that may have moved money, a string set), `last_at_ms`, `expires_at` |
//! | daily total (rule 3) | `daily#<user>#<UTC day>` | `total_cents` (automatic refunds that may have moved money), `live` (their record ids), `expires_at` |
//! | budget counters (contract 13) | `budget#turns#…`, `budget#tokens#…` | see [`budgets`] |
//!
//! `<scope>` is [`RefundScope::id`]; a refund record's id is
//! [`RefundScope::record_id`], a hash of it, short enough for a person to type. Refund records carry no
//! `expires_at`, so TTL never touches them; TTL deletes lazily, so every read
//! of a request record checks `expires_at` itself. `<order key>` is
//! [`order_key`]: rule 2 compares order ids trimmed and case-folded.
//!
//! Guards over time (contract 8). A guard names the records it counts, so a
//! release takes out exactly its own record, on the condition that the guard
//! still holds it: it never counts below zero, never creates a guard that TTL
//! removed (an update on a missing item would), and never frees a later
//! refund's guard. Once a guard no longer holds a record, it never will again
//! (a record is added once, when it is written or approved), so a release
//! whose condition fails is dropped and the transaction is tried again
//! without it. Every write that adds to a guard sets its expiry to the window
//! plus a day from now, which is never earlier than the expiry an earlier
//! write set with the same window.
//!
//! Every write to a guard, each in one transaction with the refund record's own write:
//!
//! | write | order guard | daily total |
//! | --- | --- | --- |
//! | `record_automatic` | adds the record, on rule 2's condition | adds it and its amount, on rule 3's |
//! | `record_for_approval` | adds the record | - |
//! | `record_outcome`, rejected by payments | releases it | releases it (automatic only) |
//! | staff `claim_approval`, `claim_reissue` | adds the (new) record, from now | - |
//! | staff `reject`, `resolve --not-executed` | releases it | releases it (automatic only) |
//!
//! Retries: the standard retries stay on, inside the one
//! `LEDGER_TIMEOUT_SECS` operation timeout. That is safe because every
//! write here either is conditional (a retry of a write that already landed
//! fails its condition, and the item returned with the failure carries our
//! own `writer`, which we recognise as success) or is a transaction (its
//! idempotency token makes a retry of one that landed apply nothing: the
//! budget's counters, whose `ADD`s no condition could tell apart). A
//! transaction cancelled for contention (`TransactionConflict`) wrote
//! nothing and is sent again with a new token ([`transact`]). No write can
//! apply twice.

mod budgets;
pub mod clicks;
pub mod conversations;
pub mod forget;
pub mod holders;
pub mod internal_notes;
pub mod notes;
pub mod postings;
mod refunds;
pub mod reply_times;
mod requests;
pub mod routing;
pub mod saved_replies;
pub mod schema;
pub mod staff;

pub use refunds::prior_refund;
pub(crate) use refunds::{refund_item, resolution_of};
pub use schema::WAITING_INDEX;

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};

use super::{
    ApprovalWrite, AutomaticWrite, CountsFor, KeyClaim, LedgerError, RequestLease, RequestState, StoredRequest,
    StoredResponse, TakeOver,
};
use crate::clock::{rfc3339, utc_day};
use crate::refund::money::AmountCents;
use crate::refund::policy::{History, Limits, OrderSnapshot, Reason, order_key};
use crate::refund::{PaymentOutcome, PriorRefund, Receipt, RefundRequest, RefundScope, RefundState, Resolution};

type Item = HashMap<String, AttributeValue>;

/// The DynamoDB client both tables share: the SDK's, on the function's one
/// HTTP client, every operation bounded by `LEDGER_TIMEOUT_SECS` (retries
/// included) and every attempt by half of it, so that one stalled attempt
/// leaves room for a retry.
#[derive(Clone)]
pub struct DynamoClient {
    sdk: Client,
    /// `LEDGER_TIMEOUT_SECS`: every operation's bound, retries included.
    bound: Duration,
}

impl std::ops::Deref for DynamoClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.sdk
    }
}

#[derive(Clone)]
pub struct DynamoLedger {
    client: DynamoClient,
    table: String,
    /// Where the support team's decisions leave their notes (contract 18):
    /// the admin's ledger has it, the function's does not (it decides nothing).
    notes: Option<notes::PersonNotes>,
}

impl DynamoLedger {
    pub fn new(client: DynamoClient, table: impl Into<String>) -> Self {
        DynamoLedger {
            client,
            table: table.into(),
            notes: None,
        }
    }

    /// The same ledger, whose decisions append their notes through `notes`.
    pub fn with_notes(self, notes: notes::PersonNotes) -> Self {
        DynamoLedger {
            notes: Some(notes),
            ..self
        }
    }

    /// A client on the shared AWS configuration (one HTTP client, one root
    /// store), every operation bounded by `timeout`.
    pub fn from_sdk_config(sdk: &aws_config::SdkConfig, table: impl Into<String>, timeout: Duration) -> Self {
        DynamoLedger::new(client_for(sdk, timeout), table)
    }

    pub fn client(&self) -> &DynamoClient {
        &self.client
    }

    /// A refund record's put, on the condition that the scope has none.
    pub(crate) fn put_refund(&self, item: Item) -> Result<Put, LedgerError> {
        Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(malformed)
    }

    /// Adds `record_id` to the order's guard: rule 2 counts it from `now_ms`
    /// for the window, and its version (`moves`) goes up by one, so an
    /// approval that read the order before it knows to read again.
    /// Unconditional: a caller adds its own condition.
    pub(crate) fn guard_order(
        &self,
        order_id: &str,
        record_id: &str,
        limits: &Limits,
        now_ms: u64,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder()
            .table_name(&self.table)
            .key("pk", s(order_pk(order_id)))
            .update_expression(
                "ADD live :record, moves :one SET last_at_ms = :now, expires_at = :expires, #kind = :kind",
            )
            .expression_attribute_values(":record", AttributeValue::Ss(vec![record_id.to_owned()]))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":expires", n(guard_expiry_s(now_ms, limits.order_window)))
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":kind", s("order_guard"))
    }

    /// The updates that take a refund that moved no money out of rules 2
    /// and 3 (the daily total counts automatic refunds only), each on the
    /// condition that its guard still counts the refund.
    pub(crate) fn releases(
        &self,
        released: &Released<'_>,
        counted: &CountsFor,
    ) -> Result<Vec<TransactWriteItem>, LedgerError> {
        let order = Update::builder()
            .table_name(&self.table)
            .key("pk", s(order_pk(released.order_id)))
            .update_expression("DELETE live :record")
            .condition_expression("contains(live, :record_id)")
            .expression_attribute_values(":record", AttributeValue::Ss(vec![released.record_id.to_owned()]))
            .expression_attribute_values(":record_id", s(released.record_id))
            .build()
            .map_err(malformed)?;
        let mut items = vec![TransactWriteItem::builder().update(order).build()];
        if let CountsFor::Rules2And3 { day } = counted {
            let daily = Update::builder()
                .table_name(&self.table)
                .key("pk", s(daily_pk(released.day_owner, day)))
                .update_expression("ADD total_cents :minus_amount DELETE live :record")
                .condition_expression("contains(live, :record_id)")
                .expression_attribute_values(
                    ":minus_amount",
                    AttributeValue::N(format!("-{}", released.amount.cents())),
                )
                .expression_attribute_values(":record", AttributeValue::Ss(vec![released.record_id.to_owned()]))
                .expression_attribute_values(":record_id", s(released.record_id))
                .build()
                .map_err(malformed)?;
            items.push(TransactWriteItem::builder().update(daily).build());
        }
        Ok(items)
    }

    /// Runs `main` together with `releases`. A release whose guard no
    /// longer counts the refund is dropped and the rest tried again (at most
    /// once per release). `Ok(None)`: applied. `Ok(Some(found))`: a condition
    /// of `main` failed; for each item of `main`, what it found when its own
    /// condition failed (`None` where it did not).
    pub(crate) async fn transact_releasing(
        &self,
        main: Vec<TransactWriteItem>,
        mut releases: Vec<TransactWriteItem>,
    ) -> Result<Option<Vec<Option<Item>>>, LedgerError> {
        loop {
            let items = main.iter().cloned().chain(releases.iter().cloned());
            let Some(mut failed) = self.transact(items).await? else {
                return Ok(None);
            };
            let released = failed.split_off(main.len());
            if failed.iter().any(Option::is_some) || !released.iter().any(Option::is_some) {
                return Ok(Some(failed));
            }
            releases = releases
                .into_iter()
                .zip(released)
                .filter_map(|(release, found)| found.is_none().then_some(release))
                .collect();
        }
    }

    /// Runs a transaction: see [`transact`].
    pub(crate) async fn transact(
        &self,
        items: impl IntoIterator<Item = TransactWriteItem>,
    ) -> Result<Option<Vec<Option<Item>>>, LedgerError> {
        transact(&self.client, items).await
    }

    /// For a refund record a conditional write found: `None` when it is our
    /// own (a retried write that had landed), else what it says.
    fn own_or_prior(&self, existing: &Item, writer: &str) -> Result<Option<PriorRefund>, LedgerError> {
        if text(existing, "writer") == Some(writer) {
            Ok(None)
        } else {
            prior_refund(existing).map(Some)
        }
    }

    pub(crate) async fn get(&self, pk: &str) -> Result<Option<Item>, LedgerError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(output.item().cloned())
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

/// Runs a transaction. `Ok(None)`: it was applied. `Ok(Some(items))`: a
/// condition failed; for each item, what it found when its own condition
/// failed (`None` where it did not).
///
/// A transaction that DynamoDB cancelled because another one held one of
/// its items (`TransactionConflict`: two tabs of one customer touch the
/// same budget items) wrote nothing, so it is sent again, with a new
/// idempotency token, after a short jittered pause, for as long as the
/// client's bound allows (contract 13).
pub(crate) async fn transact(
    client: &DynamoClient,
    items: impl IntoIterator<Item = TransactWriteItem>,
) -> Result<Option<Vec<Option<Item>>>, LedgerError> {
    let items: Vec<TransactWriteItem> = items.into_iter().collect();
    while_contended(client.bound, || transact_once(client, &items)).await
}

/// One `TransactWriteItems` (the SDK fills its idempotency token, the same
/// on each of its retries). Only DynamoDB's own answer counts: a 2xx whose
/// body is not DynamoDB's JSON (a proxy, a wrong endpoint) fails to
/// deserialize and is an error of unknown effect, never a write (contract
/// 6.1).
async fn transact_once(client: &DynamoClient, items: &[TransactWriteItem]) -> Result<Outcome, LedgerError> {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    let sent = client
        .transact_write_items()
        .set_transact_items(Some(items.to_vec()))
        .send()
        .await;
    match sent {
        Ok(_) => Ok(None),
        Err(SdkError::ServiceError(failure)) => match failure.err() {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                cancellation(cancelled.cancellation_reasons(), items.len())
            }
            _ => Err(unavailable(SdkError::ServiceError(failure))),
        },
        Err(other) => Err(unavailable(other)),
    }
}

/// What a transaction found: `None` applied; `Some(found)`, a condition
/// failed, with what each item found when its own condition failed.
type Outcome = Option<Vec<Option<Item>>>;

/// A cancellation, as the ledger reads it: the items whose condition
/// failed, with what they found; contention (`TransactionConflict`, nothing
/// written) is [`LedgerError::Contended`]; anything else (throttling, a
/// validation or capacity problem) is unavailable.
fn cancellation(reasons: &[CancellationReason], count: usize) -> Result<Outcome, LedgerError> {
    let code = |reason: &CancellationReason| reason.code().unwrap_or_default().to_owned();
    if !reasons.iter().any(|r| code(r) == "ConditionalCheckFailed") {
        if reasons.iter().any(|r| code(r) == "TransactionConflict") {
            return Err(LedgerError::Contended);
        }
        metrics::counter!("LedgerFailures").increment(1);
        let codes: Vec<String> = reasons.iter().map(code).filter(|c| c != "None").collect();
        return Err(LedgerError::Unavailable(codes.join(",")));
    }
    Ok(Some(
        (0..count)
            .map(|i| match reasons.get(i) {
                Some(reason) if code(reason) == "ConditionalCheckFailed" => {
                    Some(reason.item().cloned().unwrap_or_default())
                }
                _ => None,
            })
            .collect(),
    ))
}

/// Sends a transaction's `Update` as one `UpdateItem` (half the write
/// capacity of a transaction). `Ok(None)`: applied; `Ok(Some(item))`: its
/// condition failed, on what it found. Not safe to retry unless its
/// condition makes it so: an `ADD` that must count once goes as a
/// transaction ([`transact`]), whose token makes a retry that had landed
/// count nothing.
pub(crate) async fn update_alone(client: &DynamoClient, update: Update) -> Result<Option<Item>, LedgerError> {
    let result = while_contended(client.bound, || update_item(client, &update, ReturnValue::None)).await;
    Ok(result?.err())
}

/// One `UpdateItem` of `update`, returning the item as written when
/// `returns` is `AllNew`. `Ok(Err(found))`: its condition failed, on what it
/// found (with `ReturnValuesOnConditionCheckFailure`).
pub(crate) async fn update_item(
    client: &DynamoClient,
    update: &Update,
    returns: ReturnValue,
) -> Result<Result<Item, Item>, LedgerError> {
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
    let sent = client
        .update_item()
        .table_name(update.table_name())
        .set_key(Some(update.key().clone()))
        .update_expression(update.update_expression())
        .set_condition_expression(update.condition_expression().map(str::to_owned))
        .set_expression_attribute_names(update.expression_attribute_names().cloned())
        .set_expression_attribute_values(update.expression_attribute_values().cloned())
        .set_return_values_on_condition_check_failure(update.return_values_on_condition_check_failure().cloned())
        .return_values(returns)
        .send()
        .await;
    match sent {
        Ok(output) => Ok(Ok(output.attributes.unwrap_or_default())),
        Err(SdkError::ServiceError(failure)) => match failure.err() {
            UpdateItemError::ConditionalCheckFailedException(failed) => {
                Ok(Err(failed.item().cloned().unwrap_or_default()))
            }
            // A transaction holds the item: nothing was written.
            UpdateItemError::TransactionConflictException(_) => Err(LedgerError::Contended),
            _ => Err(unavailable(SdkError::ServiceError(failure))),
        },
        Err(other) => Err(unavailable(other)),
    }
}

/// The first pause after a cancellation for contention; it doubles, with full jitter.
const CONTENDED_BACKOFF: Duration = Duration::from_millis(20);
const CONTENDED_BACKOFF_CAP: Duration = Duration::from_millis(400);

/// A uniformly random share in `[0, 1]`, for full jitter.
fn random_share() -> Result<f64, LedgerError> {
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|error| LedgerError::Unavailable(format!("no randomness: {error}")))?;
    Ok(f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX))
}

/// Runs `operation` again while it fails with [`LedgerError::Contended`]
/// (nothing was written), within `bound` in all.
async fn while_contended<T, F, Fut>(bound: Duration, mut operation: F) -> Result<T, LedgerError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LedgerError>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    let mut ceiling = CONTENDED_BACKOFF;
    loop {
        let result = tokio::time::timeout_at(deadline, operation())
            .await
            .unwrap_or(Err(LedgerError::Timeout));
        if !matches!(result, Err(LedgerError::Contended)) {
            return result;
        }
        let pause = ceiling.mul_f64(random_share()?);
        if tokio::time::Instant::now() + pause >= deadline {
            return result;
        }
        metrics::counter!("LedgerContended").increment(1);
        tokio::time::sleep(pause).await;
        ceiling = (ceiling * 2).min(CONTENDED_BACKOFF_CAP);
    }
}

/// A DynamoDB client on the shared AWS configuration (its HTTP client), every
/// operation bounded by `timeout`, retries included.
pub fn client_for(sdk: &aws_config::SdkConfig, timeout: Duration) -> DynamoClient {
    DynamoClient {
        sdk: Client::from_conf(bounded(sdk, timeout).build()),
        bound: timeout,
    }
}

/// The same, on `http` (the function's shared client: one root store, one pool).
pub fn client_on(sdk: &aws_config::SdkConfig, timeout: Duration, http: reqwest::Client) -> DynamoClient {
    let config = bounded(sdk, timeout)
        .http_client(crate::http_client::sdk::sdk_http_client(http))
        .build();
    DynamoClient {
        sdk: Client::from_conf(config),
        bound: timeout,
    }
}

/// The whole operation bounded by `timeout`, and each attempt by half of it:
/// with only a whole-operation bound, one stalled attempt spends it and no
/// retry happens (AWS's advice is both). The operation timeout bounds every
/// call, retries included, so the SDK's stalled-stream watchdog (a timer
/// polled on every response) adds nothing but work on the hot path.
fn bounded(sdk: &aws_config::SdkConfig, timeout: Duration) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::from(sdk)
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(timeout)
                .operation_attempt_timeout(timeout / 2)
                .build(),
        )
        .stalled_stream_protection(aws_sdk_dynamodb::config::StalledStreamProtectionConfig::disabled())
}

/// The DynamoDB actions the function calls: its role grants exactly these
/// (`template.yaml`; `tests/template.rs` checks it). Transactions need no
/// action of their own: each of their items is authorised as the `PutItem`
/// or `UpdateItem` it is.
/// None deletes: a released key stays, marked released, until TTL. Taking
/// a turn from a budget reserves the day's tokens with an `UpdateItem`.
pub const ACTIONS_USED: &[&str] = &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"];

/// A refund that moved no money, as its release from the guards needs it.
pub(crate) struct Released<'a> {
    pub record_id: &'a str,
    pub order_id: &'a str,
    /// Whose day rule 3 counted it in.
    pub day_owner: &'a str,
    pub amount: AmountCents,
}

impl<'a> Released<'a> {
    pub(crate) fn of(request: &'a RefundRequest, record_id: &'a str) -> Self {
        Released {
            record_id,
            order_id: &request.order_id,
            day_owner: request.attempt.day_owner(),
            amount: request.amount,
        }
    }
}

pub fn refund_pk_of(record_id: &str) -> String {
    format!("refund#{record_id}")
}

pub fn refund_pk(scope: &RefundScope) -> String {
    refund_pk_of(&scope.record_id())
}

fn order_pk(order_id: &str) -> String {
    format!("order#{}", order_key(order_id))
}

/// Rule 3's total of one day owner's day ([`crate::refund::Attempt::day_owner`]).
fn daily_pk(day_owner: &str, day: &str) -> String {
    format!("daily#u{}:{day_owner}#{day}", day_owner.len())
}

/// Guards outlive what they guard by a day, then TTL may remove them.
fn guard_expiry_s(now_ms: u64, window: Duration) -> u64 {
    now_ms / 1000 + window.as_secs().max(86_400) + 86_400
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

/// A conversation's header while it lives (a strongly consistent read):
/// what a person's words are appended after, or kept beside.
pub(crate) async fn live_conversation_head(
    client: &DynamoClient,
    table: &str,
    id: &str,
    now_ms: u64,
) -> Result<Option<Item>, LedgerError> {
    let output = client
        .get_item()
        .table_name(table)
        .key("pk", s(id))
        .key(schema::CONVERSATION_SORT_KEY, s(schema::CONVERSATION_HEAD))
        .consistent_read(true)
        .send()
        .await
        .map_err(unavailable)?;
    Ok(output
        .item()
        .filter(|head| number(head, "expires_at").is_some_and(|at| at > now_ms / 1000))
        .cloned())
}

/// Every item of every page of a paginated query or scan.
pub(crate) async fn every_item<E, R>(
    pages: aws_smithy_async::future::pagination_stream::PaginationStream<Result<Item, SdkError<E, R>>>,
) -> Result<Vec<Item>, LedgerError>
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    pages.collect::<Result<Vec<_>, _>>().await.map_err(unavailable)
}

/// The SDK's error, with its cause (its `Display` alone says only "service error").
pub(crate) fn unavailable<E, R>(error: SdkError<E, R>) -> LedgerError
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

fn malformed(error: aws_sdk_dynamodb::error::BuildError) -> LedgerError {
    LedgerError::Malformed(error.to_string())
}
