//! Zero-latency stand-ins for OpenAI, payments and Secrets Manager: canned
//! answers, each handler timing itself (so its own time can be subtracted)
//! and remembering which client connections it saw.

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

const TOOL_CALL: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"issue_refund","arguments":"{\"order_id\":\"A-1001\",\"amount_cents\":1250}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":180,"completion_tokens":22,"total_tokens":202}}"#;
const REPLY: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Done: 12.50 is on its way back to your card."},"finish_reason":"stop"}],"usage":{"prompt_tokens":240,"completion_tokens":14,"total_tokens":254}}"#;
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
        self.connections.lock().unwrap().len()
    }
    fn record(&self, peer: SocketAddr, started: Instant) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.connections.lock().unwrap().insert(peer);
        self.busy_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

pub fn openai(meter: &Meter) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(meter.clone())
}

pub fn payments(meter: &Meter) -> Router {
    Router::new().route("/refunds", post(refund)).with_state(meter.clone())
}

/// Secrets Manager's JSON protocol posts every operation to `/`.
pub fn secrets(meter: &Meter) -> Router {
    Router::new().route("/", post(secret)).with_state(meter.clone())
}

async fn complete(
    State(meter): State<Meter>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: Bytes,
) -> impl IntoResponse {
    let started = Instant::now();
    let after_tool = body.windows(13).any(|w| w == br#""role":"tool""#);
    let answer = if after_tool { REPLY } else { TOOL_CALL };
    meter.record(peer, started);
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
