//! A Lambda Runtime API emulator: enough of `/2018-06-01/runtime/...` for the
//! Rust runtime client to poll for events and post responses, so the function
//! runs exactly its production loop. Several function processes may poll one
//! emulator: each event goes to whichever asks first, as Lambda spreads
//! invocations over warm containers. Used by `make bench` and `make chaos`.
//!
//! A function in the streaming response mode (contract 20) posts its answer
//! as Lambda's HTTP integration response: a JSON prelude (status, headers,
//! cookies), eight zero bytes, then the body. The emulator reads it back
//! into the shape a buffered function answers (`statusCode`, `headers`,
//! `body`), so every caller reads both modes alike, and counts which mode
//! each answer came in.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{Mutex, mpsc, oneshot};

/// What Lambda puts in a function's environment, with this emulator as its
/// Runtime API (the runtime client refuses to start without them), plus a
/// region and placeholder credentials for the AWS SDK.
pub fn lambda_environment(runtime_api: std::net::SocketAddr) -> [(&'static str, String); 9] {
    [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", "refund-chat".into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
        ("AWS_LAMBDA_LOG_LEVEL", "INFO".into()),
        ("AWS_REGION", "eu-west-1".into()),
        ("AWS_ACCESS_KEY_ID", "local".into()),
        ("AWS_SECRET_ACCESS_KEY", "local".into()),
    ]
}

/// What an invocation's caller gets when it was not answered by its deadline.
pub const DIED: &[u8] = b"the invocation did not answer by its deadline";
const DIED_GRACE: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct RuntimeApi {
    inner: Arc<Inner>,
}

struct Inner {
    /// How long each invocation may run: its deadline is sent to the function.
    timeout: Duration,
    sender: mpsc::UnboundedSender<(String, Bytes)>,
    receiver: Mutex<mpsc::UnboundedReceiver<(String, Bytes)>>,
    waiting: std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Bytes, Bytes>>>>,
    next_id: AtomicU64,
    /// Starts every request id, so that two APIs of one run never share one.
    id_prefix: &'static str,
    /// Answers that came in the streaming response mode.
    streamed: AtomicU64,
    /// When the first `delta` event of an invocation's answer arrived.
    first_delta: std::sync::Mutex<HashMap<String, Instant>>,
}

impl Default for RuntimeApi {
    fn default() -> Self {
        RuntimeApi::new()
    }
}

impl RuntimeApi {
    /// Invocations with the deployed function's 135 s deadline.
    pub fn new() -> Self {
        RuntimeApi::with_timeout(Duration::from_secs(135))
    }

    pub fn with_timeout(timeout: Duration) -> Self {
        RuntimeApi::with_timeout_and_ids(timeout, "inv")
    }

    /// The same, its request ids beginning with `id_prefix`.
    pub fn with_timeout_and_ids(timeout: Duration, id_prefix: &'static str) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        RuntimeApi {
            inner: Arc::new(Inner {
                timeout,
                sender,
                receiver: Mutex::new(receiver),
                waiting: std::sync::Mutex::default(),
                next_id: AtomicU64::new(1),
                id_prefix,
                streamed: AtomicU64::new(0),
                first_delta: std::sync::Mutex::default(),
            }),
        }
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(respond))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(fail))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(self.clone())
    }

    /// Queues `event` and waits for the function's answer; the duration runs
    /// from queueing to the answer's arrival.
    pub async fn invoke(&self, event: Bytes) -> (Result<Bytes, Bytes>, Duration) {
        let (_, answer, took) = self.invoke_with_id(event).await;
        (answer, took)
    }

    /// The same, with the request id the function was given.
    pub async fn invoke_with_id(&self, event: Bytes) -> (String, Result<Bytes, Bytes>, Duration) {
        let id = format!(
            "{}-{:08}",
            self.inner.id_prefix,
            self.inner.next_id.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        self.inner.waiting.lock().unwrap().insert(id.clone(), tx);
        let started = Instant::now();
        self.inner.sender.send((id.clone(), event)).ok();
        let answer = rx.await.unwrap_or_else(|_| Err(Bytes::from_static(b"no answer")));
        (id, answer, started.elapsed())
    }

    /// When the first `delta` event of invocation `id`'s answer arrived (an
    /// event stream's), taken once.
    pub fn first_delta(&self, id: &str) -> Option<Instant> {
        self.inner.first_delta.lock().ok()?.remove(id)
    }

    /// How many answers came in the streaming response mode.
    pub fn streamed(&self) -> u64 {
        self.inner.streamed.load(Ordering::SeqCst)
    }

    fn complete(&self, id: &str, answer: Result<Bytes, Bytes>) -> StatusCode {
        match self.inner.waiting.lock().unwrap().remove(id) {
            Some(waiter) => {
                let _ = waiter.send(answer);
                StatusCode::ACCEPTED
            }
            None => StatusCode::NOT_FOUND,
        }
    }
}

async fn next(State(api): State<RuntimeApi>) -> Response {
    let Some((id, event)) = api.inner.receiver.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let deadline_ms =
        (SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + api.inner.timeout).as_millis();
    // As Lambda does: an invocation not answered by its deadline has died
    // (its process was killed, say); its caller is told so a moment later.
    let watchdog = api.clone();
    let watched = id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(watchdog.inner.timeout + DIED_GRACE).await;
        watchdog.complete(&watched, Err(Bytes::from_static(DIED)));
    });
    (
        [
            ("lambda-runtime-aws-request-id", id),
            ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
            (
                "lambda-runtime-invoked-function-arn",
                "arn:aws:lambda:eu-west-1:123456789012:function:refund-chat".to_owned(),
            ),
            (
                "lambda-runtime-trace-id",
                "Root=1-00000000-000000000000000000000000;Sampled=0".to_owned(),
            ),
            ("content-type", "application/json".to_owned()),
        ],
        event,
    )
        .into_response()
}

async fn respond(
    State(api): State<RuntimeApi>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> StatusCode {
    let streamed = headers
        .get("lambda-runtime-function-response-mode")
        .is_some_and(|mode| mode.as_bytes().eq_ignore_ascii_case(b"streaming"));
    // Read as it arrives: the moment the first `delta` event came is kept
    // (the benchmark's time to first word).
    let mut chunks = body.into_data_stream();
    let mut whole = Vec::new();
    while let Some(chunk) = futures_util::StreamExt::next(&mut chunks).await {
        let Ok(chunk) = chunk else {
            // The function died mid-answer: its caller gets no answer, as from Lambda.
            return api.complete(&id, Err(Bytes::from_static(b"the answer broke off")));
        };
        let had_delta = contains(&whole, FIRST_DELTA);
        whole.extend_from_slice(&chunk);
        if !had_delta
            && contains(&whole, FIRST_DELTA)
            && let Ok(mut firsts) = api.inner.first_delta.lock()
        {
            firsts.insert(id.clone(), Instant::now());
        }
    }
    let body = Bytes::from(whole);
    if !streamed {
        return api.complete(&id, Ok(body));
    }
    api.inner.streamed.fetch_add(1, Ordering::SeqCst);
    match buffered_shape(&body) {
        Some(answer) => api.complete(&id, Ok(answer)),
        None => api.complete(&id, Err(Bytes::from_static(b"a streamed answer without its prelude"))),
    }
}

const FIRST_DELTA: &[u8] = b"event: delta\n";

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// The HTTP integration response of the streaming mode (prelude, eight
/// zero bytes, body) as a buffered function's answer.
pub fn buffered_shape(streamed: &[u8]) -> Option<Bytes> {
    const SEPARATOR: &[u8] = &[0; 8];
    let at = streamed
        .windows(SEPARATOR.len())
        .position(|window| window == SEPARATOR)?;
    let prelude: serde_json::Value = serde_json::from_slice(&streamed[..at]).ok()?;
    let body = &streamed[at + SEPARATOR.len()..];
    let mut headers = serde_json::Map::new();
    let mut multi = serde_json::Map::new();
    for (name, value) in prelude["headers"].as_object().into_iter().flatten() {
        let values: Vec<serde_json::Value> = match value {
            serde_json::Value::Array(values) => values.clone(),
            single => vec![single.clone()],
        };
        if let Some(first) = values.first() {
            headers.insert(name.clone(), first.clone());
        }
        multi.insert(name.clone(), serde_json::Value::Array(values));
    }
    let answer = serde_json::json!({
        "statusCode": prelude["statusCode"],
        "headers": headers,
        "multiValueHeaders": multi,
        "cookies": prelude["cookies"],
        "body": String::from_utf8_lossy(body),
        "isBase64Encoded": false,
    });
    Some(Bytes::from(answer.to_string()))
}

async fn fail(State(api): State<RuntimeApi>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    api.complete(&id, Err(body))
}

async fn init_error(body: Bytes) -> StatusCode {
    eprintln!("the function failed to start: {}", String::from_utf8_lossy(&body));
    std::process::exit(1);
}
