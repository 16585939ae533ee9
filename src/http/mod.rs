//! The HTTP edge of the function: it knows requests, not the shop. It
//! routes, checks what needs no I/O in the contract's order (1) — route,
//! method, identity, body, identity match, key syntax; none touches the
//! ledger, the secret, the model or payments — hands the checked message to
//! the intake ([`crate::intake`]), and writes the intake's outcome as a status and
//! a JSON body ([`answer`], the one error-to-status map).
//!
//! The widget's read of a conversation (contract 18) is a route of its
//! own ([`read`]): no intake turn, one read.
//!
//! Every answer is `Ok(Response)` with a JSON body and an `x-request-id`: an
//! `Err` from a Lambda handler becomes an opaque runtime error, not an answer.

pub mod answer;
pub mod body;
pub mod claim;
pub mod idempotency;
pub mod identity;
pub mod live;
pub mod page;
pub mod rating;
pub mod read;
pub mod visitor;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use lambda_http::http::{HeaderValue, Method, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use tokio::time::Instant;

use crate::config::Config;
use crate::http::answer::ApiError;
use crate::http::body::ChatRequest;
use crate::http::idempotency::{IdempotencyKey, MalformedKey};
use crate::http::live::AnswerBody;
use crate::intake::{Intake, Invocation, Keyed, Message, Outcome, Ports, Trace};
use crate::ledger::{BudgetStore, ConversationStore, RequestLedger};
use crate::live::{Heard, Live};
use crate::ops::telemetry::{self, RequestEnd};
use crate::orders::OrderSystem;
use crate::refund::RefundGateway;
use crate::refund::message::CustomerMessage;
use crate::secrets::ApiKeySource;

pub use crate::http::answer::LEDGER_RETRY_AFTER_SECS;

pub const ROUTE: &str = "/support/refund-chat";
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// Headers a browser widget may read from an answer (with `CORS_ALLOW_ORIGIN`).
pub const EXPOSED_HEADERS: &str = "x-request-id, idempotent-replayed, retry-after";

/// The Lambda request id and deadline of `request`.
fn invocation_of(request: &Request) -> Invocation {
    let context = request.lambda_context_ref();
    let request_id = context
        .map(|context| context.request_id.as_str())
        .filter(|id| !id.is_empty())
        .unwrap_or("unknown");
    Invocation::new(request_id, context.map(|context| context.deadline).unwrap_or_default())
}

/// The function for the life of the container: the intake, and whether the
/// container has answered yet.
pub struct App<K, R, L, C, O> {
    intake: Intake<K, R, L, C, O>,
    /// The chat page (contract 27), its settings written in once.
    page: page::ChatPage,
    /// True until the container's first request has been answered.
    cold: AtomicBool,
    /// Event-stream turns running on tasks of their own.
    running: Arc<Running>,
    /// Where a turn's and a rating's writes are announced (contract 31).
    push: crate::push::Publisher,
}

/// How many streamed turns run, and a signal when none does.
#[derive(Default)]
struct Running {
    count: std::sync::atomic::AtomicUsize,
    none: tokio::sync::Notify,
}

/// Counts one streamed turn for as long as it lives.
struct RunningTurn(Arc<Running>);

impl RunningTurn {
    fn start(running: &Arc<Running>) -> RunningTurn {
        running.count.fetch_add(1, Ordering::SeqCst);
        RunningTurn(Arc::clone(running))
    }
}

impl Drop for RunningTurn {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.none.notify_waiters();
        }
    }
}

impl<K: ApiKeySource, R: RefundGateway, L: RequestLedger + BudgetStore, C: ConversationStore, O: OrderSystem>
    App<K, R, L, C, O>
{
    pub fn new(config: Config, ports: Ports<K, R, L, C, O>) -> Self {
        App {
            page: page::ChatPage::new(&config),
            intake: Intake::new(config, ports, answer::render),
            cold: AtomicBool::new(true),
            running: Arc::default(),
            push: crate::push::Publisher::off(),
        }
    }

    /// Announcing what the writes did to open pages through `push`.
    pub fn with_push(mut self, push: crate::push::Publisher) -> Self {
        self.push = push;
        self
    }

    pub fn config(&self) -> &Config {
        self.intake.config()
    }

    /// JSON mode: the answer once the turn has ended.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        self.handle_heard(request, &Live::silent()).await
    }

    async fn handle_heard(&self, request: Request, live: &Live) -> Response<Body> {
        let path = request.raw_http_path();
        // The page and its files hold no data (contract 27).
        if matches!(*request.method(), Method::GET | Method::HEAD)
            && let Some(page) = self.page.serve(path)
        {
            return page;
        }
        if let Some(id) = read::route_id(path).map(str::to_owned) {
            let checked = read::check(&request, &id, &self.config().identity);
            return self.handle_read(&request, &id, checked).await;
        }
        if let Some(id) = claim::route_id(path).map(str::to_owned) {
            return self.handle_claim(&request, &id).await;
        }
        if let Some((id, route)) = rating::route_id(path).map(|(id, route)| (id.to_owned(), route)) {
            return self.handle_rating(&request, &id, route).await;
        }
        if let Some(id) = visitor::read_route_id(path).map(str::to_owned) {
            let checked = match self.config().visitors {
                Some(_) => visitor::check_read(&request, &id),
                None => Err(ApiError::NotFound),
            };
            return self.handle_read(&request, &id, checked).await;
        }
        let started = Instant::now();
        let invocation = invocation_of(&request);
        let mut trace = Trace::default();
        // A visitor's message (contract 27), or a customer's.
        let (checked, issued) = if path == visitor::ROUTE {
            match &self.config().visitors {
                Some(settings) => match visitor::check(&request, settings) {
                    Ok(checked) => (Ok(checked.message), checked.issued),
                    Err(error) => (Err(error), None),
                },
                None => (Err(ApiError::NotFound), None),
            }
        } else {
            (check(&request, &self.config().identity), None)
        };
        let (mut outcome, edge_error) = match checked {
            // Boxed: a turn's future (the model, payments, the ledger and the
            // order system's calls, large in a debug build) lives on the heap,
            // not on the stack of whatever polls the handler.
            Ok(message) => (
                Box::pin(self.intake.take(message, &invocation, &mut trace, live)).await,
                None,
            ),
            Err(error) => {
                let written = answer::render_error(&error);
                let outcome = Outcome {
                    status: written.status,
                    body: written.body,
                    refused: None,
                    replayed: false,
                };
                (outcome, Some(error))
            }
        };
        // The token goes to the visitor once, in the answer to the message
        // that had none; nothing keeps it.
        if let Some(token) = issued {
            outcome.body = with_visitor_token(&outcome.body, &token);
        }
        let status = StatusCode::from_u16(outcome.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error = edge_error.or_else(|| outcome.refused.map(ApiError::Intake));
        telemetry::finish_request(RequestEnd {
            status,
            error: error.as_ref().map(|e| e as &dyn std::fmt::Display),
            user_id: trace.user_id.as_deref(),
            stats: trace.stats.as_ref(),
            key_use: trace.key_use,
            key_settled: trace.key_settled,
            conversation: &trace.conversation,
            handoff: trace.handoff,
            budget: trace.budget,
            routing: trace.routing.as_ref(),
            cold_start: self.cold.swap(false, Ordering::Relaxed),
            duration: started.elapsed(),
        });
        // After every write of the turn; bounded, and whatever it meets the answer stays.
        self.push.publish(&trace.pokes()).await;
        self.response(status, outcome.body, error.as_ref(), outcome.replayed, &invocation)
    }

    /// A claim of a visitor's conversation (contract 27): one write, one line.
    async fn handle_claim(&self, request: &Request, raw_id: &str) -> Response<Body> {
        let invocation = invocation_of(request);
        let checked = claim::check(request, raw_id, &self.config().identity);
        let claimer = checked.as_ref().ok().map(|claim| claim.claimer.clone());
        let written = match checked {
            Err(error) => Err(error),
            Ok(claim::ClaimRequest {
                id: Some(id),
                visitor: Some(visitor),
                claimer,
            }) => self
                .intake
                .claim(&id, &visitor, &claimer, crate::clock::now_ms())
                .await
                .map(|()| serde_json::json!({"conversation_id": id.as_str(), "claimed": true}).to_string())
                .map_err(ApiError::Intake),
            Ok(_) => Err(ApiError::Intake(crate::intake::Refused::ConversationNotFound)),
        };
        let (status, body, error) = one_write(written);
        tracing::info!(
            event = "claim",
            status = status.as_u16(),
            user_id = claimer.as_deref().unwrap_or_default(),
            conversation_id = crate::conversation::ConversationId::parse(raw_id)
                .as_ref()
                .map_or("", crate::conversation::ConversationId::as_str),
            error = %error.as_ref().map(ToString::to_string).unwrap_or_default(),
        );
        self.response(status, body, error.as_ref(), false, &invocation)
    }

    /// A customer's "Did this solve it?" (contract 30): one write, one line.
    async fn handle_rating(&self, request: &Request, raw_id: &str, route: rating::Route) -> Response<Body> {
        let invocation = invocation_of(request);
        let checked = match (route, &self.config().visitors) {
            (rating::Route::Visitor, None) => Err(ApiError::NotFound),
            _ => rating::check(request, raw_id, route, &self.config().identity),
        };
        let written = match checked {
            Err(error) => Err(error),
            Ok(rating::RatingRequest {
                id: Some(id),
                customer,
                rating,
            }) => match self.intake.rate(&id, &customer, &rating, crate::clock::now_ms()).await {
                Ok(()) => {
                    // After the write; bounded, and whatever it meets the answer stays.
                    let poke = crate::push::Poke::new(id.as_str(), 0, crate::push::Kind::Rating);
                    self.push.publish(&[poke]).await;
                    Ok(serde_json::json!({"conversation_id": id.as_str(), "rated": rating.outcome()}).to_string())
                }
                Err(refused) => Err(ApiError::Intake(refused)),
            },
            Ok(_) => Err(ApiError::Intake(crate::intake::Refused::ConversationNotFound)),
        };
        let (status, body, error) = one_write(written);
        tracing::info!(
            event = "rating_request",
            status = status.as_u16(),
            error = %error.as_ref().map(ToString::to_string).unwrap_or_default(),
        );
        self.response(status, body, error.as_ref(), false, &invocation)
    }

    /// A read of a conversation (contract 18): its own summary line.
    async fn handle_read(
        &self,
        request: &Request,
        raw_id: &str,
        checked: Result<read::ReadRequest, ApiError>,
    ) -> Response<Body> {
        let started = Instant::now();
        let invocation = invocation_of(request);
        let customer = checked.as_ref().ok().map(|read| read.customer.clone());
        let (status, body, error, messages) = match checked {
            Err(error) => (error.status(), answer::render_error(&error).body, Some(error), 0),
            Ok(read::ReadRequest { id: None, .. }) => {
                let error = ApiError::Intake(crate::intake::Refused::ConversationNotFound);
                (error.status(), answer::render_error(&error).body, Some(error), 0)
            }
            Ok(read::ReadRequest {
                id: Some(id),
                customer,
                after,
            }) => match self.intake.read(&id, &customer, after, crate::clock::now_ms()).await {
                Ok(shown) => (StatusCode::OK, read::render(&id, &shown), None, shown.messages.len()),
                Err(refused) => {
                    let error = ApiError::Intake(refused);
                    (error.status(), answer::render_error(&error).body, Some(error), 0)
                }
            },
        };
        telemetry::finish_read(telemetry::ReadEnd {
            status,
            error: error.as_ref().map(|e| e as &dyn std::fmt::Display),
            user_id: customer.as_deref(),
            // Only an id that passes its check: the path is the caller's text.
            conversation_id: crate::conversation::ConversationId::parse(raw_id)
                .as_ref()
                .map_or("", crate::conversation::ConversationId::as_str),
            messages,
            cold_start: self.cold.swap(false, Ordering::Relaxed),
            duration: started.elapsed(),
        });
        self.response(status, body, error.as_ref(), false, &invocation)
    }

    fn response(
        &self,
        status: StatusCode,
        body: String,
        error: Option<&ApiError>,
        replayed: bool,
        invocation: &Invocation,
    ) -> Response<Body> {
        let mut response = self.head(status, "application/json", invocation.request_id());
        if let Some(allow) = error.and_then(ApiError::allow) {
            response = response.header(header::ALLOW, allow);
        }
        if let Some(seconds) = error.and_then(ApiError::retry_after_secs) {
            response = response.header(header::RETRY_AFTER, seconds);
        }
        if replayed {
            response = response.header(idempotency::REPLAYED_HEADER, "true");
        }
        response
            .body(Body::Text(body))
            .unwrap_or_else(|_| Response::new(Body::Text(r#"{"detail":"internal error"}"#.to_owned())))
    }

    /// What every answer carries: its status, its type, the request id and
    /// the CORS headers.
    fn head(
        &self,
        status: StatusCode,
        content_type: &'static str,
        request_id: &str,
    ) -> lambda_http::http::response::Builder {
        let mut response = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, content_type);
        if let Ok(value) = HeaderValue::from_str(request_id) {
            response = response.header(REQUEST_ID_HEADER, value);
        }
        if let Some(origin) = self
            .config()
            .cors_allow_origin
            .as_deref()
            .and_then(|o| HeaderValue::from_str(o).ok())
        {
            response = response
                .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin)
                .header(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED_HEADERS)
                .header(header::VARY, "origin");
        }
        response
    }
}

impl<K, R, L, C, O> App<K, R, L, C, O>
where
    K: ApiKeySource + Send + Sync + 'static,
    R: RefundGateway + Send + Sync + 'static,
    L: RequestLedger + BudgetStore + Send + Sync + 'static,
    C: ConversationStore + Send + Sync + 'static,
    O: OrderSystem + Send + Sync + 'static,
{
    /// Either mode (contract 20). A POST that asks for `text/event-stream`
    /// runs on a task of its own, so that a client that goes away ends
    /// nothing: the turn, its append and its key's answer go on. Until the
    /// agent's first completion call the answer may still be JSON with any
    /// status; from there it is a `200` event stream that ends with `done`,
    /// the status and body JSON mode would have sent.
    pub async fn answer(self: Arc<Self>, request: Request) -> Response<AnswerBody> {
        if request.method() != Method::POST || !live::wants_events(&request) {
            return self.handle(request).await.map(whole);
        }
        let request_id = invocation_of(&request).request_id().to_owned();
        let (heard_by, mut heard) = Live::listened();
        let (answered, answer) = tokio::sync::oneshot::channel();
        let app = Arc::clone(&self);
        let running = RunningTurn::start(&self.running);
        // In the invocation's span, so that every line of the turn carries its request id.
        let turn = async move {
            let _running = running;
            let response = app.handle_heard(request, &heard_by).await;
            if heard_by.has_begun() {
                let status = response.status().as_u16();
                heard_by.done(status, body_text(response.into_body()));
            } else {
                let _ = answered.send(response);
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(turn));
        match heard.recv().await {
            Some(Heard::Begun) => self
                .head(StatusCode::OK, live::EVENT_STREAM, &request_id)
                .header(header::CACHE_CONTROL, "no-cache")
                .body(AnswerBody::events(heard, self.config().stream_keep_alive))
                .unwrap_or_else(|_| Response::new(AnswerBody::whole(INTERNAL_ERROR))),
            _ => match answer.await {
                Ok(response) => response.map(whole),
                Err(_) => {
                    let mut response = Response::new(AnswerBody::whole(INTERNAL_ERROR));
                    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    response
                }
            },
        }
    }
}

impl<K, R, L, C, O> App<K, R, L, C, O> {
    /// Completes once no streamed turn is running: every turn whose client
    /// went away has appended its exchange and stored its key's answer.
    pub async fn turns_ended(&self) {
        loop {
            let none = self.running.none.notified();
            tokio::pin!(none);
            // Registered before the check, so that no last turn slips in between.
            none.as_mut().enable();
            if self.running.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            none.await;
        }
    }
}

const INTERNAL_ERROR: &str = r#"{"detail":"internal error"}"#;

/// A one-write route's answer (a claim, a rating): its body, or the error's.
fn one_write(written: Result<String, ApiError>) -> (StatusCode, String, Option<ApiError>) {
    match written {
        Ok(body) => (StatusCode::OK, body, None),
        Err(error) => (error.status(), answer::render_error(&error).body, Some(error)),
    }
}

/// The answer's JSON body with the visitor's new token in `visitor`, when
/// it names a conversation the token now owns (a refusal before any
/// conversation hands out nothing: the next message mints afresh).
fn with_visitor_token(body: &str, token: &crate::visitor::VisitorToken) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut fields)) if fields.contains_key("conversation_id") => {
            fields.insert("visitor".into(), serde_json::Value::String(token.expose().to_owned()));
            serde_json::Value::Object(fields).to_string()
        }
        _ => body.to_owned(),
    }
}

fn whole(body: Body) -> AnswerBody {
    match body {
        Body::Empty => AnswerBody::whole(Bytes::new()),
        Body::Text(text) => AnswerBody::whole(text),
        Body::Binary(bytes) => AnswerBody::whole(bytes),
        _ => AnswerBody::whole(Bytes::new()),
    }
}

fn body_text(body: Body) -> String {
    match body {
        Body::Text(text) => text,
        Body::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        _ => String::new(),
    }
}

/// The checks that need no I/O, in the contract's order.
fn check(request: &Request, identity: &crate::config::Identity) -> Result<Message, ApiError> {
    // The raw path: a REST API stage prefixes `uri().path()` with `/Prod`.
    if request.raw_http_path() != ROUTE {
        return Err(ApiError::NotFound);
    }
    if request.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed { allow: "POST" });
    }
    let authenticated = identity.authenticated(request)?;
    let body = request.body().as_ref();
    let chat = ChatRequest::parse(body)?;
    let customer = identity::customer(authenticated.as_ref(), &chat.user_id)?;
    // Contract 23: the message as it will be kept and sent, from here on
    // (the key's fingerprint too): the person mark any customer text loses
    // is taken out first, then card numbers and IBANs are masked.
    let text = crate::conversation::person::kept(chat.message.text()).into_owned();
    let mut keys = request.headers().get_all(idempotency::HEADER).iter();
    let key = match (keys.next(), keys.next()) {
        (None, _) => None,
        (Some(value), None) => Some(Keyed {
            key: IdempotencyKey::parse(value.as_bytes())?,
            body_sha256: idempotency::body_fingerprint(
                &customer,
                &text,
                chat.conversation_id.as_ref().map(|id| id.as_str()),
            ),
        }),
        (Some(_), Some(_)) => return Err(MalformedKey::Syntax.into()),
    };
    let who = match authenticated.and_then(|who| who.guest) {
        Some(email) => crate::intake::Who::Guest {
            day_owner: identity.guest_day_owner(&email, &customer),
            email,
        },
        None => crate::intake::Who::Customer,
    };
    Ok(Message {
        customer,
        text: CustomerMessage::new(text),
        conversation_id: chat.conversation_id,
        key,
        who,
    })
}
