//! Shared test harness: the real handler wired to local mock servers on
//! 127.0.0.1, with short timeouts from configuration.

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::lambda_runtime::Context;
use lambda_http::{Body, RequestExt};
use refund_chat::api::App;
use refund_chat::config::Config;
use refund_chat::secrets::{ApiKeySource, FixedKey};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const API_KEY: &str = "sk-test-4f9a1c0e";
pub const REQUEST_ID: &str = "req-0123456789";
pub const OPENAI_TIMEOUT: Duration = Duration::from_millis(500);
pub const BACKOFF: Duration = Duration::from_millis(200);
pub const PAYMENTS_TIMEOUT: Duration = Duration::from_millis(500);
/// Long enough that a stand-in "hangs" past every timeout above.
pub const HANG: Duration = Duration::from_secs(2);

pub fn config(openai_base: &str, payments_base: &str) -> Config {
    let vars = [
        ("OPENAI_API_KEY_SECRET_ID", "openai-key".to_owned()),
        ("OPENAI_BASE_URL", openai_base.to_owned()),
        ("PAYMENTS_BASE_URL", payments_base.to_owned()),
        ("OPENAI_TIMEOUT_SECS", OPENAI_TIMEOUT.as_secs_f64().to_string()),
        ("RETRY_BACKOFF_SECS", BACKOFF.as_secs_f64().to_string()),
        ("PAYMENTS_TIMEOUT_SECS", PAYMENTS_TIMEOUT.as_secs_f64().to_string()),
    ];
    Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())).expect("test config")
}

/// Answers requests from a script, in order, and records when each arrived.
#[derive(Clone)]
pub struct Script {
    responses: Arc<Mutex<VecDeque<ResponseTemplate>>>,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Script {
    pub fn new(responses: Vec<ResponseTemplate>) -> Self {
        Script {
            responses: Arc::new(Mutex::new(responses.into())),
            arrivals: Arc::default(),
        }
    }
    pub fn arrivals(&self) -> Vec<Instant> {
        self.arrivals.lock().unwrap().clone()
    }
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.arrivals.lock().unwrap().push(Instant::now());
        self.responses
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(599).set_body_string("script exhausted"))
    }
}

pub struct Harness<K = FixedKey> {
    pub openai: MockServer,
    pub payments: MockServer,
    pub model_script: Script,
    pub app: App<K>,
}

impl Harness<FixedKey> {
    /// The model answers with `model` in order; payments answer every refund with `payments`.
    pub async fn new(model: Vec<ResponseTemplate>, payments: ResponseTemplate) -> Self {
        Harness::with_key_source(model, payments, FixedKey::new(API_KEY)).await
    }
}

impl<K: ApiKeySource> Harness<K> {
    pub async fn with_key_source(model: Vec<ResponseTemplate>, payments: ResponseTemplate, key_source: K) -> Self {
        let openai = MockServer::start().await;
        let payments_server = MockServer::start().await;
        let model_script = Script::new(model);
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(model_script.clone())
            .mount(&openai)
            .await;
        Mock::given(method("POST"))
            .and(path("/refunds"))
            .respond_with(payments)
            .mount(&payments_server)
            .await;
        let config = config(&format!("{}/v1", openai.uri()), &payments_server.uri());
        let app = App::new(config, key_source).expect("app");
        Harness {
            openai,
            payments: payments_server,
            model_script,
            app,
        }
    }

    /// POSTs `body` to the route through an HTTP API v2 event.
    pub async fn post(&self, body: &str) -> Answer {
        let mut event = load_event("http-api-v2-refund.json");
        event["body"] = Value::String(body.to_owned());
        self.send(event).await
    }

    pub async fn chat(&self, message: &str) -> Answer {
        self.post(&json!({"user_id": "u-1001", "message": message}).to_string())
            .await
    }

    pub async fn send(&self, event: Value) -> Answer {
        send_with(&self.app, event).await
    }

    /// The JSON bodies the model received, in order.
    pub async fn model_requests(&self) -> Vec<Value> {
        bodies(&self.openai).await
    }

    /// The JSON bodies the payments service received, in order.
    pub async fn payments_requests(&self) -> Vec<Value> {
        bodies(&self.payments).await
    }
}

/// Sends an API Gateway event through `app`'s handler, as the runtime would.
pub async fn send_with<K: ApiKeySource>(app: &App<K>, event: Value) -> Answer {
    let mut context = Context::default();
    context.request_id = REQUEST_ID.to_owned();
    let request = lambda_http::request::from_str(&event.to_string())
        .expect("event")
        .with_lambda_context(context);
    let response = app.handle(request).await;
    let status = response.status();
    let headers = response.headers().clone();
    let raw = match response.body() {
        Body::Text(text) => text.clone(),
        other => String::from_utf8_lossy(other.as_ref()).into_owned(),
    };
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
        raw,
    }
}

pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: String,
}

impl Answer {
    pub fn reply(&self) -> &str {
        self.body["reply"]
            .as_str()
            .unwrap_or_else(|| panic!("no reply in {} ({})", self.raw, self.status))
    }
    pub fn detail(&self) -> &str {
        self.body["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {} ({})", self.raw, self.status))
    }
}

pub fn load_event(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("event file")).expect("event JSON")
}

// Model responses.

pub fn completion(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_795_860_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" }}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135}
    }))
}

pub fn text(reply: &str) -> ResponseTemplate {
    completion(json!({"role": "assistant", "content": reply}))
}

pub fn tool_calls(calls: &[(&str, &str, &str)]) -> ResponseTemplate {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
        .collect();
    completion(json!({"role": "assistant", "content": null, "tool_calls": calls}))
}

pub fn refund_call(id: &str, order_id: &str, amount_cents: u64) -> ResponseTemplate {
    tool_calls(&[(
        id,
        "issue_refund",
        &json!({"order_id": order_id, "amount_cents": amount_cents}).to_string(),
    )])
}

pub fn hang() -> ResponseTemplate {
    text("too late").set_delay(HANG)
}

pub fn receipt() -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_json(json!({"refund_id": "rf_42", "status": "succeeded", "amount_cents": 1250, "currency": "eur"}))
}

/// The `role: "tool"` messages of one model request.
pub fn tool_messages(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// The `error` of a tool message's content, if it is one.
pub fn tool_error(message: &Value) -> Option<String> {
    let content: Value = serde_json::from_str(message["content"].as_str()?).ok()?;
    content["error"].as_str().map(str::to_owned)
}
