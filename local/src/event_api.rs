//! A stand-in of AppSync Events (contract 31) under `make run`, in the
//! browser tests and in `make bench-live`: moto's AppSync accepts a publish
//! and delivers nothing, so it cannot serve.
//!
//! - `POST /event`: a publish, `{"channel", "events": [string]}`, refused
//!   (401) without a SigV4 `Authorization` for the service `appsync`;
//!   answered `{"successful", "failed"}` and delivered to the channel's
//!   subscribers.
//! - `GET /event/realtime`: the WebSocket protocol `aws-appsync-event-ws`,
//!   the caller's authorization in the `header-<base64url JSON>`
//!   subprotocol: `connection_init` → `connection_ack` (or
//!   `connection_error`), keep-alive `ka`, `subscribe` →
//!   `subscribe_success` | `subscribe_error`, `data`, `unsubscribe` →
//!   `unsubscribe_success`, and `error` for what it does not understand.
//!   Every connect and subscribe is decided by the project's own code
//!   ([`refund_chat::push::listen`]), handed in as an [`Authorize`].
//! - `POST /_faults`: the switches: drop every socket now, stop
//!   keep-alives, refuse subscribes, delay delivery, and make publishes
//!   fail (down, a 500, a `failed` list).
//!
//! What it does not emulate (decisions.md, "Live"): a signature is checked
//! for its shape, not verified; channels are matched exactly (no `/*`
//! wildcards, which the authorizer refuses anyway); no handlers, no API
//! keys, no limits, quotas or message sizes; one process's memory.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use futures_util::{SinkExt, StreamExt};
use refund_chat::push::listen::{Asked, AuthorizerResponse};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The project's decision for a token and what it asks.
pub type Authorize = Arc<dyn Fn(String, Asked) -> BoxFuture<'static, AuthorizerResponse> + Send + Sync>;

/// The switches a test or a person flips (`POST /_faults`).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Faults {
    /// No `ka` is sent.
    pub no_keepalive: bool,
    /// Every subscribe is answered `subscribe_error`.
    pub refuse_subscribe: bool,
    /// Each delivery waits this long.
    pub delay_ms: u64,
    /// Publishes: `down` (503, as a throttled or broken endpoint), `error`
    /// (500), `failed` (200 with every event in `failed`); none: delivered.
    pub publish: Option<String>,
}

/// How often a `ka` is sent, and the timeout `connection_ack` announces.
const KEEPALIVE: Duration = Duration::from_secs(10);
const CONNECTION_TIMEOUT_MS: u64 = 30_000;

/// The Event API's state: its subscribers and its switches.
pub struct EventApi {
    authorize: Authorize,
    faults: Mutex<Faults>,
    /// Channel → (socket, subscription id).
    subscribers: Mutex<HashMap<String, Vec<(u64, String)>>>,
    /// Socket → where its frames go (dropping it closes the socket).
    sockets: Mutex<HashMap<u64, mpsc::UnboundedSender<Message>>>,
    next: AtomicU64,
    published: AtomicU64,
    /// Every event accepted: its channel, the event, and when (epoch ms).
    heard: Mutex<Vec<(String, String, u64)>>,
}

impl EventApi {
    pub fn new(authorize: Authorize) -> Arc<EventApi> {
        Arc::new(EventApi {
            authorize,
            faults: Mutex::new(Faults::default()),
            subscribers: Mutex::new(HashMap::new()),
            sockets: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            published: AtomicU64::new(0),
            heard: Mutex::new(Vec::new()),
        })
    }

    fn faults(&self) -> Faults {
        self.faults.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Closes every socket now (the pages reconnect and read again).
    pub fn drop_sockets(&self) {
        if let Ok(mut sockets) = self.sockets.lock() {
            for (_, socket) in sockets.drain() {
                let _ = socket.send(Message::Close(None));
            }
        }
        if let Ok(mut subscribers) = self.subscribers.lock() {
            subscribers.clear();
        }
    }

    /// How many events were published and accepted so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::SeqCst)
    }

    /// Every event accepted so far: its channel, the event as published,
    /// and when it arrived (epoch ms), for the chaos run's invariants.
    pub fn heard(&self) -> Vec<(String, String, u64)> {
        self.heard.lock().map(|h| h.clone()).unwrap_or_default()
    }

    async fn publish(self: &Arc<Self>, headers: &HeaderMap, body: &str) -> Response {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !(authorization.starts_with("AWS4-HMAC-SHA256 Credential=")
            && authorization.contains("/appsync/aws4_request")
            && headers.contains_key("x-amz-date"))
        {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"errors": [{"errorType": "UnauthorizedException", "message": "You are not authorized to make this call."}]})),
            )
                .into_response();
        }
        let faults = self.faults();
        match faults.publish.as_deref() {
            Some("down") => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
            Some("error") => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            _ => {}
        }
        let body: Value = serde_json::from_str(body).unwrap_or_default();
        let (Some(channel), Some(events)) = (body["channel"].as_str(), body["events"].as_array()) else {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"errors": [{"errorType": "BadRequestException"}]})),
            )
                .into_response();
        };
        let listed: Vec<Value> = (0..events.len())
            .map(
                |index| json!({"identifier": format!("e{}", self.next.fetch_add(1, Ordering::SeqCst)), "index": index}),
            )
            .collect();
        if faults.publish.as_deref() == Some("failed") {
            let failed: Vec<Value> = listed
                .into_iter()
                .map(|mut e| {
                    e["code"] = json!(400);
                    e["message"] = json!("failed by the stand-in's switch");
                    e
                })
                .collect();
            return axum::Json(json!({"successful": [], "failed": failed})).into_response();
        }
        self.published.fetch_add(events.len() as u64, Ordering::SeqCst);
        if let Ok(mut heard) = self.heard.lock() {
            let at = refund_chat::clock::now_ms();
            heard.extend(
                events
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|e| (channel.to_owned(), e.to_owned(), at)),
            );
        }
        let targets: Vec<(u64, String)> = self
            .subscribers
            .lock()
            .map(|s| s.get(channel).cloned().unwrap_or_default())
            .unwrap_or_default();
        for event in events.iter().filter_map(Value::as_str) {
            for (socket, id) in &targets {
                let frame = json!({"type": "data", "id": id, "event": event}).to_string();
                let sender = self.sockets.lock().ok().and_then(|s| s.get(socket).cloned());
                if let Some(sender) = sender {
                    let delay = Duration::from_millis(faults.delay_ms);
                    tokio::spawn(async move {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        let _ = sender.send(Message::Text(frame.into()));
                    });
                }
            }
        }
        axum::Json(json!({"successful": listed, "failed": []})).into_response()
    }

    async fn socket(self: Arc<Self>, socket: WebSocket, connect_token: String) {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (mut sink, mut stream) = socket.split();
        let (sender, mut outbox) = mpsc::unbounded_channel::<Message>();
        let writer = tokio::spawn(async move {
            while let Some(frame) = outbox.recv().await {
                let closing = matches!(frame, Message::Close(_));
                if sink.send(frame).await.is_err() || closing {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let send = |frame: Value| {
            let _ = sender.send(Message::Text(frame.to_string().into()));
        };
        let mut acked = false;
        while let Some(Ok(message)) = stream.next().await {
            let Message::Text(text) = message else {
                if matches!(message, Message::Close(_)) {
                    break;
                }
                continue;
            };
            let frame: Value = serde_json::from_str(&text).unwrap_or_default();
            match frame["type"].as_str() {
                Some("connection_init") => {
                    let answer = (self.authorize)(connect_token.clone(), Asked::Connect).await;
                    if !answer.is_authorized {
                        send(
                            json!({"type": "connection_error", "errors": [{"errorType": "UnauthorizedException", "message": "You are not authorized to make this call."}]}),
                        );
                        break;
                    }
                    acked = true;
                    if let Ok(mut sockets) = self.sockets.lock() {
                        sockets.insert(id, sender.clone());
                    }
                    send(json!({"type": "connection_ack", "connectionTimeoutMs": CONNECTION_TIMEOUT_MS}));
                    let (api, keepalive) = (Arc::clone(&self), sender.clone());
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(KEEPALIVE).await;
                            let live = api.sockets.lock().map(|s| s.contains_key(&id)).unwrap_or(false);
                            if !live || keepalive.is_closed() {
                                break;
                            }
                            if !api.faults().no_keepalive {
                                let _ = keepalive.send(Message::Text(json!({"type": "ka"}).to_string().into()));
                            }
                        }
                    });
                }
                Some("subscribe") if acked => {
                    let sub = frame["id"].as_str().unwrap_or_default().to_owned();
                    let channel = frame["channel"].as_str().unwrap_or_default().to_owned();
                    let token = frame["authorization"]["Authorization"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let granted = !self.faults().refuse_subscribe
                        && (self.authorize)(token, Asked::Subscribe(channel.clone()))
                            .await
                            .is_authorized;
                    if granted {
                        if let Ok(mut subscribers) = self.subscribers.lock() {
                            subscribers.entry(channel).or_default().push((id, sub.clone()));
                        }
                        send(json!({"type": "subscribe_success", "id": sub}));
                    } else {
                        send(
                            json!({"type": "subscribe_error", "id": sub, "errors": [{"errorType": "UnauthorizedException", "message": "You are not authorized to make this call."}]}),
                        );
                    }
                }
                Some("unsubscribe") if acked => {
                    let sub = frame["id"].as_str().unwrap_or_default().to_owned();
                    if let Ok(mut subscribers) = self.subscribers.lock() {
                        for list in subscribers.values_mut() {
                            list.retain(|(socket, s)| !(*socket == id && *s == sub));
                        }
                    }
                    send(json!({"type": "unsubscribe_success", "id": sub}));
                }
                _ => send(
                    json!({"type": "error", "errors": [{"errorType": "UnsupportedOperation", "message": "not understood"}]}),
                ),
            }
            // The socket was dropped by the switch: stop reading it.
            if acked && !self.sockets.lock().map(|s| s.contains_key(&id)).unwrap_or(false) {
                break;
            }
        }
        self.forget(id);
        drop(sender);
        let _ = writer.await;
    }

    fn forget(&self, socket: u64) {
        if let Ok(mut sockets) = self.sockets.lock() {
            sockets.remove(&socket);
        }
        if let Ok(mut subscribers) = self.subscribers.lock() {
            for list in subscribers.values_mut() {
                list.retain(|(s, _)| *s != socket);
            }
        }
    }
}

/// The `Authorization` a `header-<base64url JSON>` subprotocol carries.
pub fn header_token(protocols: &str) -> Option<String> {
    use base64::Engine;
    let encoded = protocols
        .split(',')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("header-"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .ok()?;
    let header: Value = serde_json::from_slice(&bytes).ok()?;
    header["Authorization"].as_str().map(str::to_owned)
}

/// The stand-in's routes.
pub fn router(api: Arc<EventApi>) -> axum::Router {
    let publish = Arc::clone(&api);
    let realtime = Arc::clone(&api);
    let faults = Arc::clone(&api);
    axum::Router::new()
        .route(
            "/event",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let api = Arc::clone(&publish);
                async move { api.publish(&headers, &body).await }
            }),
        )
        .route(
            "/event/realtime",
            axum::routing::get(move |headers: HeaderMap, upgrade: WebSocketUpgrade| {
                let api = Arc::clone(&realtime);
                async move {
                    let protocols = headers
                        .get("sec-websocket-protocol")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    if !protocols.split(',').any(|p| p.trim() == "aws-appsync-event-ws") {
                        return (
                            StatusCode::BAD_REQUEST,
                            "the subprotocol aws-appsync-event-ws is required",
                        )
                            .into_response();
                    }
                    let token = header_token(&protocols).unwrap_or_default();
                    upgrade
                        .protocols(["aws-appsync-event-ws"])
                        .on_upgrade(move |socket| api.socket(socket, token))
                        .into_response()
                }
            }),
        )
        .route(
            "/_faults",
            axum::routing::post(move |body: axum::Json<Value>| {
                let api = Arc::clone(&faults);
                async move {
                    if body.0["drop_sockets"] == true {
                        api.drop_sockets();
                    }
                    let set: Faults = serde_json::from_value(body.0).unwrap_or_default();
                    if let Ok(mut faults) = api.faults.lock() {
                        *faults = set.clone();
                    }
                    axum::Json(json!(set))
                }
            }),
        )
}

/// Binds `127.0.0.1:port` (0 for any) and serves `api` in the background.
pub async fn spawn(port: u16, api: Arc<EventApi>) -> std::io::Result<SocketAddr> {
    crate::spawn(port, router(api)).await
}

/// Under `make run`, a customer picked on the page has no token (the
/// function runs with `USER_IDENTITY=body`): the page names them as
/// `body-user:<id>`, taken only when the stand-in runs with body identity,
/// and never for a guest's or a visitor's id, as the function's own rule.
pub const BODY_USER_PREFIX: &str = "body-user:";

/// The project's decision ([`refund_chat::push::listen::decide`]) with
/// `listening`'s pools and conversations; with `body_customers`, a
/// [`BODY_USER_PREFIX`] token names a customer as the body does locally.
pub fn deciding(listening: Arc<refund_chat::push::listen::Listening>, body_customers: bool) -> Authorize {
    use refund_chat::push::listen::{Listener, decide};
    Arc::new(move |token: String, asked: Asked| {
        let listening = Arc::clone(&listening);
        Box::pin(async move {
            let named = token
                .strip_prefix(BODY_USER_PREFIX)
                .filter(|user| {
                    body_customers
                        && !user.is_empty()
                        && !refund_chat::guest::is_guest(user)
                        && !refund_chat::visitor::is_visitor(user)
                })
                .map(|user| Listener::Customer {
                    user_id: user.to_owned(),
                    expires: None,
                });
            let listener = match named {
                Some(named) => Some(named),
                None => listening.verifier.listener(&token).await,
            };
            decide(
                listener.as_ref(),
                &asked,
                &listening.conversations,
                std::time::SystemTime::now(),
            )
            .await
        })
    })
}
