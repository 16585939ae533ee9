//! The hot path's DynamoDB calls, sent by the function itself rather than
//! through the SDK's orchestrator: `TransactWriteItems` (the claim with the
//! turn, the refund record, the outcome, the append), `UpdateItem` (the
//! conversation's lease, and the writes made on their own when an append
//! could not carry them) and `Query` (the window). The SDK's own item types,
//! written as DynamoDB's JSON protocol, signed by AWS's SigV4 signer
//! (`aws-sigv4`, the one the SDK uses), sent on a reqwest client.
//!
//! Why: through the SDK an operation cost 160 µs of CPU here, against
//! 66 µs for the HTTP exchange itself and 86 µs this way
//! (`docs/benchmarks.md`, `sdk-op-cost`). The reads off the hot path, a key's claim without a
//! turn (`PutItem`) and the staff's commands stay on the SDK.
//!
//! The same rules as the SDK's standard mode, which the ledger relies on:
//! - one `ClientRequestToken` per call, the same on every attempt, so a
//!   retry of a transaction that landed is answered as a success (DynamoDB
//!   keeps tokens for 10 minutes) and cannot apply twice;
//! - at most 3 attempts, retrying throttling, `TransactionInProgress`, 5xx
//!   and transport errors after a full-jitter exponential backoff (1 s
//!   base, 20 s cap), drawn from a retry quota (500 tokens, 5 a retry, 1
//!   back per success) so that an outage does not multiply the load;
//! - the whole call, retries included, bounded by the client's operation
//!   timeout (`LEDGER_TIMEOUT_SECS`);
//! - credentials from the SDK configuration's provider, cached until five
//!   minutes before they expire;
//! - the endpoint as the SDK resolves it from its configuration: one set in
//!   code, else `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL`, else
//!   the region's public endpoint (FIPS, dual-stack as configured). Not
//!   resolved: account-based endpoints (`AccountIdEndpointMode`), which
//!   the regional endpoint serves as well.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem, Update};
use serde::Serialize;
use serde::ser::{Error as _, SerializeMap, Serializer};
use serde_json::Value;
#[cfg(test)]
use serde_json::json;

use super::Item;
use crate::ledger::LedgerError;

const MAX_ATTEMPTS: u32 = 3;
const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(20);
const RETRY_QUOTA: u32 = 500;
const RETRY_COST: u32 = 5;
/// Error codes the SDK's standard mode retries (besides any 5xx).
const RETRYABLE: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionInProgressException",
    "InternalServerError",
    "ServiceUnavailable",
];

/// What a transaction found: `None` applied; `Some(found)`, a condition
/// failed, with what each item found when its own condition failed.
pub type Outcome = Option<Vec<Option<Item>>>;

#[derive(Clone)]
pub struct Direct {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// The endpoint as signed and as sent (parsed once, not per call), or
    /// why there is none (no region configured): then every call fails, as
    /// the SDK's would.
    url: Result<(String, reqwest::Url), String>,
    region: String,
    provider: Option<SharedCredentialsProvider>,
    credentials: Mutex<Option<Credentials>>,
    timeout: Duration,
    retry_quota: AtomicU32,
}

impl Direct {
    /// From the SDK configuration the ledger's client is built from, on `http`.
    pub fn new(sdk: &aws_config::SdkConfig, timeout: Duration, http: reqwest::Client) -> Direct {
        let region = sdk.region().map(|r| r.as_ref().to_owned()).unwrap_or_default();
        let (fips, dual_stack) = (sdk.use_fips().unwrap_or(false), sdk.use_dual_stack().unwrap_or(false));
        let url = endpoint(sdk).or_else(|| (!region.is_empty()).then(|| public_endpoint(&region, fips, dual_stack)));
        Direct {
            inner: Arc::new(Inner {
                http,
                url: parsed_endpoint(url),
                region,
                provider: sdk.credentials_provider(),
                credentials: Mutex::new(None),
                timeout,
                retry_quota: AtomicU32::new(RETRY_QUOTA),
            }),
        }
    }

    /// Runs one transaction (see [`Outcome`]).
    pub async fn transact(&self, items: &[TransactWriteItem]) -> Result<Outcome, LedgerError> {
        let token = request_token()?;
        match self
            .call("TransactWriteItems", to_json(&Body { items, token: &token })?)
            .await?
        {
            Answer::Done(_) => Ok(None),
            Answer::Refused { code, body } if code == "TransactionCanceledException" => {
                cancelled(&body["CancellationReasons"], items.len())
            }
            Answer::Refused { code, .. } => Err(LedgerError::Unavailable(code)),
        }
    }

    /// One `UpdateItem`, returning the item as written when `returns` is
    /// `AllNew` (else an empty item). `Ok(Err(found))`: its condition
    /// failed, on what it found (with `ReturnValuesOnConditionCheckFailure`).
    pub async fn update(&self, update: &Update, returns: ReturnValue) -> Result<Result<Item, Item>, LedgerError> {
        let request = Fields {
            return_values: Some(returns.as_str()),
            ..Fields::of_update(update)
        };
        match self.call("UpdateItem", to_json(&request)?).await? {
            Answer::Done(body) => attributes(&body["Attributes"]).map(Ok),
            Answer::Refused { code, body } if code == "ConditionalCheckFailedException" => {
                attributes(&body["Item"]).map(Err)
            }
            // A transaction holds the item: nothing was written (retried by the caller).
            Answer::Refused { code, .. } if code == "TransactionConflictException" => Err(LedgerError::Contended),
            Answer::Refused { code, .. } => Err(LedgerError::Unavailable(code)),
        }
    }

    /// One page of a strongly consistent `Query`: its items, and the key to
    /// go on from.
    pub async fn query(&self, query: &Query<'_>) -> Result<(Vec<Item>, Option<Item>), LedgerError> {
        match self.call("Query", to_json(query)?).await? {
            Answer::Done(body) => {
                let items = body["Items"]
                    .as_array()
                    .map(|items| items.iter().map(item_of).collect::<Result<Vec<_>, _>>())
                    .transpose()?
                    .unwrap_or_default();
                let next = match &body["LastEvaluatedKey"] {
                    Value::Null => None,
                    key => Some(item_of(key)?),
                };
                Ok((items, next))
            }
            Answer::Refused { code, .. } => Err(LedgerError::Unavailable(code)),
        }
    }

    /// One call, retries included, bounded by the operation timeout.
    async fn call(&self, operation: &'static str, body: Vec<u8>) -> Result<Answer, LedgerError> {
        let result = tokio::time::timeout(self.inner.timeout, self.attempts(operation, &body))
            .await
            .unwrap_or(Err(Failure::Timeout));
        result.map_err(|failure| {
            metrics::counter!("LedgerFailures").increment(1);
            match failure {
                Failure::Timeout => LedgerError::Timeout,
                Failure::Other(why) => LedgerError::Unavailable(why),
            }
        })
    }

    async fn attempts(&self, operation: &'static str, body: &[u8]) -> Result<Answer, Failure> {
        let mut attempt = 1;
        loop {
            match self.attempt(operation, body).await? {
                Attempted::Answered(answer) => {
                    let quota = &self.inner.retry_quota;
                    let _ =
                        quota.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| Some((q + 1).min(RETRY_QUOTA)));
                    return Ok(answer);
                }
                Attempted::Retry(why) => {
                    let quota = &self.inner.retry_quota;
                    let drawn = quota.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| q.checked_sub(RETRY_COST));
                    if attempt >= MAX_ATTEMPTS || drawn.is_err() {
                        return Err(Failure::Other(why));
                    }
                    tokio::time::sleep(backoff(attempt)?).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(&self, operation: &'static str, body: &[u8]) -> Result<Attempted, Failure> {
        let (url, parsed) = self.inner.url.as_ref().map_err(|why| Failure::Other(why.clone()))?;
        let credentials = self.credentials().await?;
        let target = format!("DynamoDB_20120810.{operation}");
        let headers = [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", target.as_str()),
        ];
        let mut request = self.inner.http.post(parsed.clone()).body(body.to_vec());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        for (name, value) in sign(url, &headers, body, credentials, &self.inner.region, SystemTime::now())? {
            request = request.header(name, value);
        }
        let response = match request.send().await {
            Ok(response) => response,
            // Perhaps sent: every write is conditional, and a transaction's
            // token is the same on every attempt, so a retry is safe.
            Err(error) => return Ok(Attempted::Retry(format!("DynamoDB could not be reached: {error}"))),
        };
        let status = response.status();
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes,
            Err(error) => return Ok(Attempted::Retry(format!("DynamoDB's answer was cut off: {error}"))),
        };
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(Attempted::Answered(Answer::Done(body)));
        }
        let code = body["__type"].as_str().unwrap_or_default();
        let code = code.rsplit('#').next().unwrap_or(code).to_owned();
        if [
            "TransactionCanceledException",
            "ConditionalCheckFailedException",
            "TransactionConflictException",
        ]
        .contains(&code.as_str())
        {
            return Ok(Attempted::Answered(Answer::Refused { code, body }));
        }
        let message = body["message"]
            .as_str()
            .or(body["Message"].as_str())
            .unwrap_or_default();
        let why = format!("DynamoDB answered {status}: {code}: {message}");
        if status.is_server_error() || RETRYABLE.contains(&code.as_str()) {
            return Ok(Attempted::Retry(why));
        }
        Err(Failure::Other(why))
    }

    async fn credentials(&self) -> Result<Credentials, Failure> {
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|expiry| expiry > SystemTime::now() + Duration::from_secs(300))
        };
        if let Some(cached) = self.cached().filter(fresh) {
            return Ok(cached);
        }
        let provider = self
            .inner
            .provider
            .as_ref()
            .ok_or_else(|| Failure::Other("no AWS credentials".into()))?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|error| Failure::Other(format!("AWS credentials: {error}")))?;
        if let Ok(mut cached) = self.inner.credentials.lock() {
            *cached = Some(credentials.clone());
        }
        Ok(credentials)
    }

    fn cached(&self) -> Option<Credentials> {
        self.inner.credentials.lock().ok()?.clone()
    }
}

/// What DynamoDB answered, retries done: success, or a condition's refusal.
enum Answer {
    Done(Value),
    Refused { code: String, body: Value },
}

enum Attempted {
    Answered(Answer),
    Retry(String),
}

enum Failure {
    Timeout,
    Other(String),
}

/// The SigV4 headers for a `POST` of `body` to `url` with `headers`, at `time`.
fn sign(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: Credentials,
    region: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>, Failure> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let failed = |error: &dyn std::fmt::Display| Failure::Other(format!("signing: {error}"));
    let identity = credentials.into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("dynamodb")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let signable = SignableRequest::new("POST", url, headers.iter().copied(), SignableBody::Bytes(body))
        .map_err(|e| failed(&e))?;
    let (instructions, _) = sign(signable, &params).map_err(|e| failed(&e))?.into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

/// A cancellation, as the ledger reads it (see [`Outcome`]).
fn cancelled(reasons: &Value, count: usize) -> Result<Outcome, LedgerError> {
    let reasons = reasons.as_array().cloned().unwrap_or_default();
    let code = |reason: &Value| reason["Code"].as_str().unwrap_or_default().to_owned();
    if !reasons.iter().any(|r| code(r) == "ConditionalCheckFailed") {
        if reasons.iter().any(|r| code(r) == "TransactionConflict") {
            return Err(LedgerError::Contended);
        }
        // Throttling, or a capacity or validation problem.
        let codes: Vec<String> = reasons.iter().map(code).filter(|c| c != "None").collect();
        return Err(LedgerError::Unavailable(codes.join(",")));
    }
    (0..count)
        .map(|i| match reasons.get(i) {
            Some(reason) if code(reason) == "ConditionalCheckFailed" => match reason.get("Item") {
                Some(item) => item_of(item).map(Some),
                None => Ok(Some(Item::new())),
            },
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The endpoint the SDK would use, from its configuration.
fn endpoint(sdk: &aws_config::SdkConfig) -> Option<String> {
    if sdk.get_origin("endpoint_url").is_client_config() {
        return sdk.endpoint_url().map(str::to_owned);
    }
    let key = aws_types::service_config::ServiceConfigKey::builder()
        .service_id("DynamoDB")
        .env("AWS_ENDPOINT_URL")
        .profile("endpoint_url")
        .build()
        .ok()?;
    sdk.service_config()
        .and_then(|config| config.load_config(key))
        .or_else(|| sdk.endpoint_url().map(str::to_owned))
}

fn parsed_endpoint(url: Option<String>) -> Result<(String, reqwest::Url), String> {
    let url = format!(
        "{}/",
        url.ok_or("no region configured for DynamoDB")?.trim_end_matches('/')
    );
    match reqwest::Url::parse(&url) {
        Ok(parsed) => Ok((url, parsed)),
        Err(error) => Err(format!("the DynamoDB endpoint {url:?} is not a URL: {error}")),
    }
}

/// The region's endpoint, as the SDK's rules make it (FIPS and dual-stack
/// from `AWS_USE_FIPS_ENDPOINT`, `AWS_USE_DUALSTACK_ENDPOINT`).
fn public_endpoint(region: &str, fips: bool, dual_stack: bool) -> String {
    let service = if fips { "dynamodb-fips" } else { "dynamodb" };
    let domain = match (region.starts_with("cn-"), dual_stack) {
        (false, false) => "amazonaws.com",
        (false, true) => "api.aws",
        (true, false) => "amazonaws.com.cn",
        (true, true) => "api.amazonwebservices.com.cn",
    };
    format!("https://{service}.{region}.{domain}")
}

/// Full jitter: a random share of `INITIAL_BACKOFF · 2^(attempt-1)`, at most `MAX_BACKOFF`.
fn backoff(attempt: u32) -> Result<Duration, Failure> {
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|error| Failure::Other(format!("no randomness: {error}")))?;
    let share = f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX);
    let ceiling = INITIAL_BACKOFF
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(MAX_BACKOFF);
    Ok(ceiling.mul_f64(share))
}

/// A version-4 UUID, as the SDK makes the token.
fn request_token() -> Result<String, LedgerError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| LedgerError::Unavailable(format!("no randomness: {error}")))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut token = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            token.push('-');
        }
        token.push(char::from(HEX[usize::from(byte >> 4)]));
        token.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    Ok(token)
}

/// One item of `TransactItems`, as DynamoDB's JSON protocol spells it
/// (for tests: the request is serialised straight from [`ItemJson`]).
#[cfg(test)]
fn item_json(item: &TransactWriteItem) -> Result<Value, LedgerError> {
    serde_json::to_value(ItemJson(item)).map_err(|error| LedgerError::Malformed(error.to_string()))
}

/// The request body, written straight from the SDK's types (no JSON tree
/// is built: that cost as much as the signing).
struct Body<'a> {
    items: &'a [TransactWriteItem],
    token: &'a str,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut body = serializer.serialize_map(Some(2))?;
        body.serialize_entry("TransactItems", &Items(self.items))?;
        body.serialize_entry("ClientRequestToken", self.token)?;
        body.end()
    }
}

struct Items<'a>(&'a [TransactWriteItem]);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(ItemJson))
    }
}

struct ItemJson<'a>(&'a TransactWriteItem);

fn on_failure(returned: Option<&aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure>) -> Option<&str> {
    returned.map(|r| r.as_str())
}

/// The fields one kind of transaction item has, borrowed, as the JSON
/// protocol names them (absent ones left out).
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Fields<'a> {
    table_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<Attributes<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<Attributes<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    update_expression: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    condition_expression: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expression_attribute_names: Option<&'a HashMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expression_attribute_values: Option<Attributes<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    return_values_on_condition_check_failure: Option<&'a str>,
    /// `UpdateItem`'s alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    return_values: Option<&'a str>,
}

impl<'a> Fields<'a> {
    fn of_update(update: &'a Update) -> Fields<'a> {
        Fields {
            table_name: update.table_name(),
            item: None,
            key: Some(Attributes(update.key())),
            update_expression: Some(update.update_expression()),
            condition_expression: update.condition_expression(),
            expression_attribute_names: update.expression_attribute_names(),
            expression_attribute_values: update.expression_attribute_values().map(Attributes),
            return_values_on_condition_check_failure: on_failure(update.return_values_on_condition_check_failure()),
            return_values: None,
        }
    }
}

impl Serialize for ItemJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let item = self.0;
        let (kind, fields) = if let Some(put) = item.put() {
            let fields = Fields {
                table_name: put.table_name(),
                item: Some(Attributes(put.item())),
                key: None,
                update_expression: None,
                condition_expression: put.condition_expression(),
                expression_attribute_names: put.expression_attribute_names(),
                expression_attribute_values: put.expression_attribute_values().map(Attributes),
                return_values_on_condition_check_failure: on_failure(put.return_values_on_condition_check_failure()),
                return_values: None,
            };
            ("Put", fields)
        } else if let Some(update) = item.update() {
            ("Update", Fields::of_update(update))
        } else if let Some(check) = item.condition_check() {
            let fields = Fields {
                table_name: check.table_name(),
                item: None,
                key: Some(Attributes(check.key())),
                update_expression: None,
                condition_expression: Some(check.condition_expression()),
                expression_attribute_names: check.expression_attribute_names(),
                expression_attribute_values: check.expression_attribute_values().map(Attributes),
                return_values_on_condition_check_failure: on_failure(check.return_values_on_condition_check_failure()),
                return_values: None,
            };
            ("ConditionCheck", fields)
        } else {
            // A delete included: the function never deletes in a transaction.
            return Err(S::Error::custom("a transaction item the function does not send"));
        };
        let mut outer = serializer.serialize_map(Some(1))?;
        outer.serialize_entry(kind, &fields)?;
        outer.end()
    }
}

struct Attributes<'a>(&'a HashMap<String, AttributeValue>);

impl Serialize for Attributes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, value)| (name, Attribute(value))))
    }
}

/// An attribute value in the JSON protocol. The ledger stores no binary values.
struct Attribute<'a>(&'a AttributeValue);

impl Serialize for Attribute<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            AttributeValue::S(s) => map.serialize_entry("S", s)?,
            AttributeValue::N(n) => map.serialize_entry("N", n)?,
            AttributeValue::Ss(set) => map.serialize_entry("SS", set)?,
            AttributeValue::Ns(set) => map.serialize_entry("NS", set)?,
            AttributeValue::Bool(b) => map.serialize_entry("BOOL", b)?,
            AttributeValue::Null(b) => map.serialize_entry("NULL", b)?,
            AttributeValue::L(list) => map.serialize_entry("L", &List(list))?,
            AttributeValue::M(inner) => map.serialize_entry("M", &Attributes(inner))?,
            _ => return Err(S::Error::custom("a binary attribute value")),
        }
        map.end()
    }
}

struct List<'a>(&'a [AttributeValue]);

impl Serialize for List<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Attribute))
    }
}

/// A `Query` of one partition, strongly consistent.
pub struct Query<'a> {
    pub table: &'a str,
    pub key_condition: &'a str,
    pub values: &'a HashMap<String, AttributeValue>,
    pub projection: Option<&'a str>,
    pub newest_first: bool,
    pub limit: Option<u32>,
    pub start: Option<&'a Item>,
}

impl Serialize for Query<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("TableName", self.table)?;
        map.serialize_entry("KeyConditionExpression", self.key_condition)?;
        map.serialize_entry("ExpressionAttributeValues", &Attributes(self.values))?;
        if let Some(projection) = self.projection {
            map.serialize_entry("ProjectionExpression", projection)?;
        }
        map.serialize_entry("ScanIndexForward", &!self.newest_first)?;
        map.serialize_entry("ConsistentRead", &true)?;
        if let Some(limit) = self.limit {
            map.serialize_entry("Limit", &limit)?;
        }
        if let Some(start) = self.start {
            map.serialize_entry("ExclusiveStartKey", &Attributes(start))?;
        }
        map.end()
    }
}

fn to_json(request: &impl Serialize) -> Result<Vec<u8>, LedgerError> {
    serde_json::to_vec(request).map_err(|error| LedgerError::Malformed(error.to_string()))
}

/// An item DynamoDB returned, or none (an absent `Attributes`, `Item`).
fn attributes(value: &Value) -> Result<Item, LedgerError> {
    match value {
        Value::Null => Ok(Item::new()),
        item => item_of(item),
    }
}

fn item_of(value: &Value) -> Result<Item, LedgerError> {
    let malformed = || LedgerError::Malformed("an item DynamoDB returned cannot be read".into());
    value
        .as_object()
        .ok_or_else(malformed)?
        .iter()
        .map(|(name, value)| Ok((name.clone(), value_of(value)?)))
        .collect()
}

fn value_of(value: &Value) -> Result<AttributeValue, LedgerError> {
    let malformed = || LedgerError::Malformed("an attribute DynamoDB returned cannot be read".into());
    let (kind, inner) = value.as_object().and_then(|o| o.iter().next()).ok_or_else(malformed)?;
    let strings = |inner: &Value| -> Result<Vec<String>, LedgerError> {
        inner
            .as_array()
            .ok_or_else(malformed)?
            .iter()
            .map(|s| s.as_str().map(str::to_owned).ok_or_else(malformed))
            .collect()
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(inner.as_str().ok_or_else(malformed)?.to_owned()),
        "N" => AttributeValue::N(inner.as_str().ok_or_else(malformed)?.to_owned()),
        "SS" => AttributeValue::Ss(strings(inner)?),
        "NS" => AttributeValue::Ns(strings(inner)?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().ok_or_else(malformed)?),
        "NULL" => AttributeValue::Null(inner.as_bool().ok_or_else(malformed)?),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .ok_or_else(malformed)?
                .iter()
                .map(value_of)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(item_of(inner)?),
        _ => return Err(malformed()),
    })
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::{ConditionCheck, Put, ReturnValuesOnConditionCheckFailure};

    use super::*;

    fn s(value: &str) -> AttributeValue {
        AttributeValue::S(value.into())
    }

    #[test]
    fn items_are_written_as_the_json_protocol_spells_them() {
        let put = Put::builder()
            .table_name("ledger")
            .item("pk", s("request#k"))
            .item("live", AttributeValue::Ss(vec!["r1".into()]))
            .condition_expression("attribute_not_exists(pk) OR expires_at < :now_s")
            .expression_attribute_values(":now_s", AttributeValue::N("17".into()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .unwrap();
        let update = Update::builder()
            .table_name("ledger")
            .key("pk", s("budget#turns#u1:u#h"))
            .update_expression("ADD turns :one SET #kind = :kind")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":kind", s("budget"))
            .build()
            .unwrap();
        let check = ConditionCheck::builder()
            .table_name("ledger")
            .key("pk", s("budget#tokens#u1:u#d"))
            .condition_expression("attribute_not_exists(tokens)")
            .build()
            .unwrap();

        let item = |item: TransactWriteItem| item_json(&item).unwrap();

        assert_eq!(
            item(TransactWriteItem::builder().put(put).build()),
            json!({"Put": {
                "TableName": "ledger",
                "Item": {"pk": {"S": "request#k"}, "live": {"SS": ["r1"]}},
                "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now_s",
                "ExpressionAttributeValues": {":now_s": {"N": "17"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }})
        );
        assert_eq!(
            item(TransactWriteItem::builder().update(update).build()),
            json!({"Update": {
                "TableName": "ledger",
                "Key": {"pk": {"S": "budget#turns#u1:u#h"}},
                "UpdateExpression": "ADD turns :one SET #kind = :kind",
                "ExpressionAttributeNames": {"#kind": "kind"},
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":kind": {"S": "budget"}},
            }})
        );
        assert_eq!(
            item(TransactWriteItem::builder().condition_check(check).build()),
            json!({"ConditionCheck": {
                "TableName": "ledger",
                "Key": {"pk": {"S": "budget#tokens#u1:u#d"}},
                "ConditionExpression": "attribute_not_exists(tokens)",
            }})
        );
        let delete = aws_sdk_dynamodb::types::Delete::builder()
            .table_name("ledger")
            .key("pk", s("refund#r1"))
            .build()
            .unwrap();
        assert!(
            item_json(&TransactWriteItem::builder().delete(delete).build()).is_err(),
            "the direct client never sends a delete"
        );
    }

    #[test]
    fn every_kind_of_value_the_ledger_writes_reads_back() {
        let item: Item = [
            ("s", s("text")),
            ("n", AttributeValue::N("-12.5".into())),
            ("ss", AttributeValue::Ss(vec!["a".into(), "b".into()])),
            ("ns", AttributeValue::Ns(vec!["1".into()])),
            ("bool", AttributeValue::Bool(true)),
            ("null", AttributeValue::Null(true)),
            ("l", AttributeValue::L(vec![s("x"), AttributeValue::N("2".into())])),
            ("m", AttributeValue::M([("inner".to_owned(), s("y"))].into())),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();

        assert_eq!(item_of(&serde_json::to_value(Attributes(&item)).unwrap()), Ok(item));
        assert!(serde_json::to_value(Attribute(&AttributeValue::B(vec![1].into()))).is_err());
    }

    #[test]
    fn a_cancellation_says_what_each_failed_condition_found() {
        let reasons = json!([
            {"Code": "None"},
            {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed", "Item": {"pk": {"S": "x"}}},
            {"Code": "ConditionalCheckFailed"},
        ]);
        let found: Item = [("pk".to_owned(), s("x"))].into();

        assert_eq!(
            cancelled(&reasons, 3),
            Ok(Some(vec![None, Some(found), Some(Item::new())]))
        );
        assert_eq!(
            cancelled(&json!([{"Code": "None"}, {"Code": "TransactionConflict"}]), 2),
            Err(LedgerError::Contended)
        );
        assert_eq!(
            cancelled(&json!([{"Code": "ThrottlingError"}, {"Code": "None"}]), 2),
            Err(LedgerError::Unavailable("ThrottlingError".into()))
        );
    }

    #[test]
    fn the_token_is_a_version_4_uuid_and_new_each_time() {
        let (first, second) = (request_token().unwrap(), request_token().unwrap());
        assert_ne!(first, second);
        assert_eq!(
            first.split('-').map(str::len).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{first}"
        );
        assert!(
            first
                .chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{first}"
        );
        assert_eq!(&first[14..15], "4");
        assert!("89ab".contains(&first[19..20]), "{first}");
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_ceiling() {
        for _ in 0..100 {
            assert!(backoff(1).ok().unwrap() <= Duration::from_secs(1));
            assert!(backoff(2).ok().unwrap() <= Duration::from_secs(2));
            assert!(backoff(9).ok().unwrap() <= MAX_BACKOFF);
        }
    }

    #[test]
    fn the_endpoint_is_the_sdks() {
        let configured = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("eu-west-1"))
            .endpoint_url("http://127.0.0.1:4566")
            .build();
        assert_eq!(endpoint(&configured).as_deref(), Some("http://127.0.0.1:4566"));
        let public = [
            ("eu-west-1", false, false, "https://dynamodb.eu-west-1.amazonaws.com"),
            (
                "us-east-1",
                true,
                false,
                "https://dynamodb-fips.us-east-1.amazonaws.com",
            ),
            ("eu-west-1", false, true, "https://dynamodb.eu-west-1.api.aws"),
            (
                "cn-north-1",
                false,
                false,
                "https://dynamodb.cn-north-1.amazonaws.com.cn",
            ),
        ];
        for (region, fips, dual_stack, expected) in public {
            assert_eq!(public_endpoint(region, fips, dual_stack), expected);
        }
    }

    #[tokio::test]
    async fn an_endpoint_that_is_not_a_url_fails_every_call_at_once() {
        let config = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("eu-west-1"))
            .endpoint_url("not a url")
            .build();
        let direct = Direct::new(&config, Duration::from_secs(5), reqwest::Client::new());
        let failed = direct.transact(&[]).await;
        assert!(
            matches!(&failed, Err(LedgerError::Unavailable(why)) if why.contains("is not a URL")),
            "{:?}",
            failed.err()
        );
        let no_region = Direct::new(
            &aws_config::SdkConfig::builder().build(),
            Duration::from_secs(5),
            reqwest::Client::new(),
        );
        assert!(
            matches!(no_region.transact(&[]).await, Err(LedgerError::Unavailable(why)) if why.contains("no region"))
        );
    }

    /// Signed by the SDK and by [`sign`], the same request (body, headers,
    /// time) carries the same `Authorization`: the call is the SDK's.
    #[tokio::test]
    async fn the_signature_is_the_one_the_sdk_makes() {
        use aws_sdk_dynamodb::config::Credentials as SdkCredentials;
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::any())
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("{}"))
            .mount(&server)
            .await;
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_590_400);
        let credentials = Credentials::new("AKIDEXAMPLE", "secret", Some("session-token".into()), None, "test");
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
            .credentials_provider(SdkCredentials::new(
                "AKIDEXAMPLE",
                "secret",
                Some("session-token".into()),
                None,
                "test",
            ))
            .endpoint_url(server.uri())
            .time_source(aws_smithy_async::time::StaticTimeSource::new(time))
            .build();
        let check = ConditionCheck::builder()
            .table_name("ledger")
            .key("pk", s("budget#tokens#u1:u#d"))
            .condition_expression("attribute_not_exists(tokens)")
            .build()
            .unwrap();
        aws_sdk_dynamodb::Client::from_conf(config)
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().condition_check(check).build())
            .client_request_token("token")
            .send()
            .await
            .unwrap();

        let sent = &server.received_requests().await.unwrap()[0];
        let header = |name: &str| {
            sent.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let authorization = header("authorization");
        let signed_names = authorization
            .split("SignedHeaders=")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap();
        let signed: Vec<(String, String)> = signed_names
            .split(';')
            .filter(|name| !["x-amz-date", "x-amz-security-token"].contains(name))
            .map(|name| (name.to_owned(), header(name)))
            .collect();
        let signed: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let url = format!("{}/", server.uri());

        let ours = sign(&url, &signed, &sent.body, credentials, "eu-west-1", time)
            .ok()
            .unwrap();

        let ours: HashMap<String, String> = ours.into_iter().collect();
        assert_eq!(ours.get("authorization"), Some(&authorization));
        assert_eq!(ours.get("x-amz-date"), Some(&header("x-amz-date")));
        assert_eq!(ours.get("x-amz-security-token"), Some(&header("x-amz-security-token")));
    }

    #[test]
    fn a_lease_and_a_window_are_written_as_the_json_protocol_spells_them() {
        let update = Update::builder()
            .table_name("conversations")
            .key("pk", s("c_1"))
            .update_expression("SET lease_writer = :writer")
            .condition_expression("attribute_not_exists(lease_until_ms)")
            .expression_attribute_values(":writer", s("w"))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .unwrap();
        let lease = Fields {
            return_values: Some(ReturnValue::AllNew.as_str()),
            ..Fields::of_update(&update)
        };
        let values = [(":id".to_owned(), s("c_1"))].into();
        let start: Item = [("pk".to_owned(), s("c_1")), ("sk".to_owned(), s("x#000003"))].into();
        let window = Query {
            table: "conversations",
            key_condition: "pk = :id",
            values: &values,
            projection: Some("messages"),
            newest_first: true,
            limit: Some(10),
            start: Some(&start),
        };

        assert_eq!(
            serde_json::to_value(&lease).unwrap(),
            json!({
                "TableName": "conversations",
                "Key": {"pk": {"S": "c_1"}},
                "UpdateExpression": "SET lease_writer = :writer",
                "ConditionExpression": "attribute_not_exists(lease_until_ms)",
                "ExpressionAttributeValues": {":writer": {"S": "w"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                "ReturnValues": "ALL_NEW",
            })
        );
        assert_eq!(
            serde_json::to_value(&window).unwrap(),
            json!({
                "TableName": "conversations",
                "KeyConditionExpression": "pk = :id",
                "ExpressionAttributeValues": {":id": {"S": "c_1"}},
                "ProjectionExpression": "messages",
                "ScanIndexForward": false,
                "ConsistentRead": true,
                "Limit": 10,
                "ExclusiveStartKey": {"pk": {"S": "c_1"}, "sk": {"S": "x#000003"}},
            })
        );
    }
}
