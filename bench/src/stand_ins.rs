//! Zero-latency stand-ins for OpenAI, payments (and the order system), Secrets Manager and DynamoDB:
//! canned answers, each handler timing itself (so its own time can be
//! subtracted) and remembering which client connections it saw.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use futures_util::StreamExt;
use refund_chat_local::completions;

/// The pause before a stream's first content chunk (see its use).
const TIME_TO_FIRST_TOKEN: std::time::Duration = std::time::Duration::from_millis(60);

const RECEIPT: &str = r#"{"refund_id":"rf_bench","status":"succeeded","amount_cents":1250}"#;
const SECRET: &str = r#"{"ARN":"arn:aws:secretsmanager:eu-west-1:123456789012:secret:bench-AbCdEf","Name":"bench","SecretString":"{\"api_key\":\"sk-bench\"}","VersionId":"v1","VersionStages":["AWSCURRENT"],"CreatedDate":1.7E9}"#;

/// What one stand-in measured.
#[derive(Clone, Default)]
pub struct Meter {
    busy_ns: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    connections: Arc<Mutex<HashSet<SocketAddr>>>,
    /// The model's: bytes of the last turn's first request (the prompt).
    prompt_bytes: Arc<AtomicU64>,
    /// The model's: when it last wrote the first content chunk of a stream.
    first_content: Arc<Mutex<Option<Instant>>>,
    /// The model's: when the last routing call arrived (contract 21), and
    /// from then to the turn's first agent call (the routing call's cost to
    /// the turn, as the function spends it, the stand-in answering at once).
    routed_at: Arc<Mutex<Option<Instant>>>,
    routing_gap: Arc<Mutex<Option<std::time::Duration>>>,
}

impl Meter {
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns.load(Ordering::Relaxed)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    pub fn prompt_bytes(&self) -> u64 {
        self.prompt_bytes.load(Ordering::Relaxed)
    }
    /// When the model last wrote a stream's first content chunk, taken once.
    pub fn first_content(&self) -> Option<Instant> {
        self.first_content.lock().ok()?.take()
    }
    /// From the last routing call's arrival to the agent's first call, taken once.
    pub fn routing_gap(&self) -> Option<std::time::Duration> {
        self.routing_gap.lock().ok()?.take()
    }
    pub fn connections(&self) -> usize {
        self.connections.lock().map(|c| c.len()).unwrap_or_default()
    }
    fn record(&self, peer: SocketAddr, started: Instant) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut connections) = self.connections.lock() {
            connections.insert(peer);
        }
        self.busy_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The model's two answers of a refund turn, rendered once.
#[derive(Clone)]
struct Answers {
    tool_call: String,
    reply: String,
    /// The routing call's labels (contract 21): a sure refund, low risk.
    labels: String,
    meter: Meter,
}

pub fn openai(meter: &Meter) -> Router {
    let answers = Answers {
        tool_call: completions::tool_calls(&[(
            "call_1",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":1250}"#,
        )])
        .to_string(),
        reply: completions::text("Done: 12.50 is on its way back to your card.").to_string(),
        labels: completions::text(r#"{"intents":["refund"],"risk":"low","confidence":0.95}"#).to_string(),
        meter: meter.clone(),
    };
    Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(answers)
}

/// Payments, and the shop's order system beside it (as on the sandbox): every
/// order is the asking customer's, delivered yesterday.
pub fn payments(meter: &Meter) -> Router {
    Router::new()
        .route("/refunds", post(refund))
        .route("/orders/{order_id}", axum::routing::get(order))
        .with_state(meter.clone())
}

/// Secrets Manager's JSON protocol posts every operation to `/`.
pub fn secrets(meter: &Meter) -> Router {
    Router::new().route("/", post(secret)).with_state(meter.clone())
}

/// DynamoDB's JSON protocol too. Every conditional write succeeds with `{}`
/// (the item was not there), which is the path of a new keyed refund turn.
/// Taking a conversation's lease returns the header as DynamoDB would: a new
/// conversation has no exchanges, one named `c_bench_n<N>` has N, and the
/// window's query returns its most recent ones (each a refund turn like the
/// one measured).
pub fn dynamodb(meter: &Meter) -> Router {
    Router::new().route("/", post(dynamodb_ok)).with_state(meter.clone())
}

/// The N of a `c_bench_n<N>` conversation a request names.
fn earlier_exchanges(body: &[u8]) -> Option<u64> {
    let at = body.windows(9).position(|w| w == b"c_bench_n")? + 9;
    let digits: String = body[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    digits.parse().ok()
}

/// One stored exchange: a refund turn, as the conversation table holds it.
fn exchange_item(seq: u64) -> serde_json::Value {
    let messages = serde_json::json!([
        {"role": "user", "content": format!("My mug from order A-{seq:04} arrived broken, please refund 12.50")},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "name": "issue_refund", "arguments": format!(r#"{{"order_id":"A-{seq:04}","amount_cents":1250}}"#)}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": r#"{"refund_id":"rf_bench","status":"succeeded","amount_cents":1250}"#},
        {"role": "assistant", "content": "Done: 12.50 is on its way back to your card.", "tool_calls": []},
    ]);
    serde_json::json!({"messages": {"S": messages.to_string()}})
}

fn dynamodb_answer(target: &str, body: &[u8]) -> String {
    let exchanges = earlier_exchanges(body).unwrap_or(0);
    if target.ends_with(".Query") {
        let limit = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|query| query["Limit"].as_u64())
            .unwrap_or(exchanges);
        let items: Vec<_> = (0..exchanges.min(limit))
            .map(|i| exchange_item(exchanges - i))
            .collect();
        return serde_json::json!({"Items": items, "Count": items.len()}).to_string();
    }
    if target.ends_with(".UpdateItem") && body.windows(12).any(|w| w == b"lease_writer") {
        return serde_json::json!({"Attributes": {
            "exchanges": {"N": exchanges.to_string()},
            "ends_by": {"N": "4102444800"},
        }})
        .to_string();
    }
    "{}".to_owned()
}

async fn complete(
    State(answers): State<Answers>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: Bytes,
) -> impl IntoResponse {
    let started = Instant::now();
    if body.windows(13).any(|w| w == br#""json_schema""#) {
        // The routing call, before the agent's first.
        if let Ok(mut routed_at) = answers.meter.routed_at.lock() {
            *routed_at = Some(started);
        }
        answers.meter.record(peer, started);
        return (
            [(CONTENT_TYPE, "application/json")],
            axum::body::Body::from(answers.labels),
        );
    }
    // This turn's first call: no tool result after the newest customer message.
    let newest_user = body.windows(13).rposition(|w| w == br#""role":"user""#).unwrap_or(0);
    let after_tool = body[newest_user..].windows(13).any(|w| w == br#""role":"tool""#);
    if !after_tool {
        answers.meter.prompt_bytes.store(body.len() as u64, Ordering::Relaxed);
        let routed_at = answers.meter.routed_at.lock().ok().and_then(|mut at| at.take());
        if let (Some(routed_at), Ok(mut gap)) = (routed_at, answers.meter.routing_gap.lock()) {
            *gap = Some(started.saturating_duration_since(routed_at));
        }
    }
    let answer = if after_tool { answers.reply } else { answers.tool_call };
    answers.meter.record(peer, started);
    if !body.windows(13).any(|w| w == br#""stream":true"#) {
        return ([(CONTENT_TYPE, "application/json")], axum::body::Body::from(answer));
    }
    // Event-stream mode (contract 20): the answer in chunks, the first
    // content chunk's moment noted as it is handed to the connection.
    let completion: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
    let events: Vec<(bool, String)> = completions::chunks(&completion, 2, 16)
        .iter()
        .map(|chunk| {
            let content = chunk["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty());
            (content, completions::event(&chunk.to_string()))
        })
        .chain(std::iter::once((false, completions::event("[DONE]"))))
        .collect();
    let first_content = Arc::clone(&answers.meter.first_content);
    let mut noted = false;
    let stream = futures_util::stream::iter(events).then(move |(content, event)| {
        let first = content && !noted;
        noted |= content;
        let first_content = Arc::clone(&first_content);
        async move {
            if first {
                // A model's time to its first token (a real one's is hundreds
                // of ms): longer than a delayed ACK, so that what follows
                // measures the function's relay, not the previous write's ACK.
                tokio::time::sleep(TIME_TO_FIRST_TOKEN).await;
                if let Ok(mut first) = first_content.lock() {
                    *first = Some(Instant::now());
                }
            }
            Ok::<_, std::convert::Infallible>(event)
        }
    });
    (
        [(CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(stream),
    )
}

async fn refund(State(meter): State<Meter>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> impl IntoResponse {
    let started = Instant::now();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/json")], RECEIPT)
}

async fn order(
    State(meter): State<Meter>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    axum::extract::Path(order_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
    let started = Instant::now();
    let customer = headers
        .get("x-customer-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let body = refund_chat_testkit::order_json(&order_id, customer, "delivered", Some(1)).to_string();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/json")], body)
}

async fn secret(State(meter): State<Meter>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> impl IntoResponse {
    let started = Instant::now();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/x-amz-json-1.1")], SECRET)
}

async fn dynamodb_ok(
    State(meter): State<Meter>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let started = Instant::now();
    let target = headers
        .get("x-amz-target")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let answer = dynamodb_answer(target, &body);
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/x-amz-json-1.0")], answer)
}
