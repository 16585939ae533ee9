//! Zero-latency stand-ins for OpenAI, payments, Secrets Manager and DynamoDB:
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
use refund_chat_local::completions;

const RECEIPT: &str = r#"{"refund_id":"rf_bench","status":"succeeded","amount_cents":1250}"#;
const SECRET: &str = r#"{"ARN":"arn:aws:secretsmanager:eu-west-1:123456789012:secret:bench-AbCdEf","Name":"bench","SecretString":"{\"api_key\":\"sk-bench\"}","VersionId":"v1","VersionStages":["AWSCURRENT"],"CreatedDate":1.7E9}"#;

/// What one stand-in measured.
#[derive(Clone, Default)]
pub struct Meter {
    busy_ns: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    connections: Arc<Mutex<HashSet<SocketAddr>>>,
}

impl Meter {
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns.load(Ordering::Relaxed)
    }
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
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
        meter: meter.clone(),
    };
    Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(answers)
}

pub fn payments(meter: &Meter) -> Router {
    Router::new().route("/refunds", post(refund)).with_state(meter.clone())
}

/// Secrets Manager's JSON protocol posts every operation to `/`.
pub fn secrets(meter: &Meter) -> Router {
    Router::new().route("/", post(secret)).with_state(meter.clone())
}

/// DynamoDB's JSON protocol too. Every conditional write succeeds with `{}`
/// (the item was not there), which is the path of a new keyed refund turn.
pub fn dynamodb(meter: &Meter) -> Router {
    Router::new().route("/", post(dynamodb_ok)).with_state(meter.clone())
}

async fn complete(
    State(answers): State<Answers>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: Bytes,
) -> impl IntoResponse {
    let started = Instant::now();
    let after_tool = body.windows(13).any(|w| w == br#""role":"tool""#);
    let answer = if after_tool { answers.reply } else { answers.tool_call };
    answers.meter.record(peer, started);
    ([(CONTENT_TYPE, "application/json")], answer)
}

async fn refund(State(meter): State<Meter>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> impl IntoResponse {
    let started = Instant::now();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/json")], RECEIPT)
}

async fn secret(State(meter): State<Meter>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> impl IntoResponse {
    let started = Instant::now();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/x-amz-json-1.1")], SECRET)
}

async fn dynamodb_ok(State(meter): State<Meter>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> impl IntoResponse {
    let started = Instant::now();
    meter.record(peer, started);
    ([(CONTENT_TYPE, "application/x-amz-json-1.0")], "{}")
}
