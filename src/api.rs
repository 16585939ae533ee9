//! The HTTP edge of the function: routing, input checks, running the turn, and
//! the one place where every error becomes a status and a JSON body.
//!
//! Every answer is `Ok(Response)` with a JSON body and an `x-request-id`: an
//! `Err` from a Lambda handler becomes an opaque runtime error, not an answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use lambda_http::http::{HeaderValue, Method, StatusCode, header};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::chat::CompletionError;
use crate::chat_request::{ChatRequest, InputError};
use crate::config::Config;
use crate::openai::{self, OpenAiChat};
use crate::payments::HttpPayments;
use crate::secrets::{ApiKeySource, SecretError};
use crate::telemetry::{self, RequestEnd};
use crate::turn::{Turn, TurnError, TurnStats};

pub const ROUTE: &str = "/support/refund-chat";
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Why a request got no reply. Each variant maps to exactly one status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("no such route")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Turn(#[from] TurnError),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Input(InputError::Malformed(_)) => StatusCode::BAD_REQUEST,
            ApiError::Input(InputError::InvalidField(_)) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Secret(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Turn(TurnError::TimedOut) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Turn(TurnError::BudgetExhausted | TurnError::Provider(_)) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The `detail` a caller sees: what went wrong, never a secret, a body
    /// from upstream or a stack trace.
    pub fn detail(&self) -> String {
        match self {
            ApiError::Input(error) => error.to_string(),
            ApiError::NotFound => format!("no route here: the endpoint is POST {ROUTE}"),
            ApiError::MethodNotAllowed => format!("{ROUTE} accepts POST only"),
            ApiError::Secret(_) => "the assistant is not available right now (configuration could not be read)".into(),
            ApiError::Turn(TurnError::TimedOut) => "the assistant did not answer in time".into(),
            ApiError::Turn(TurnError::BudgetExhausted) => "the assistant could not finish this request".into(),
            ApiError::Turn(TurnError::Provider(CompletionError::Status { status })) => {
                format!("the assistant's model provider answered with an error (HTTP {status})")
            }
            ApiError::Turn(TurnError::Provider(_)) => "the assistant's model provider gave no usable answer".into(),
        }
    }
}

/// What the summary line needs from however far a request got.
#[derive(Default)]
struct RequestTrace {
    user_id: Option<String>,
    stats: Option<TurnStats>,
}

/// The function's state for the life of the container.
pub struct App<K> {
    config: Config,
    key_source: K,
    http: reqwest::Client,
    payments: HttpPayments,
    /// Built on first use, once the key has been read; an error is not cached.
    model: OnceCell<OpenAiChat>,
    /// True until the container's first request has been answered.
    cold: AtomicBool,
}

impl<K: ApiKeySource> App<K> {
    pub fn new(config: Config, key_source: K) -> reqwest::Result<Self> {
        let http = openai::http_client()?;
        let payments = HttpPayments::new(http.clone(), &config.payments_base_url, config.payments_timeout);
        crate::refund_tool::warm_up();
        Ok(App {
            config,
            key_source,
            http,
            payments,
            model: OnceCell::new(),
            cold: AtomicBool::new(true),
        })
    }

    pub async fn handle(&self, request: Request) -> Response<Body> {
        let started = Instant::now();
        let request_id = request
            .lambda_context_ref()
            .map(|context| context.request_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| "unknown".to_owned());

        let mut trace = RequestTrace::default();
        let result = self.respond(&request, &mut trace).await;
        let (status, body) = match &result {
            Ok(reply) => (StatusCode::OK, json!({ "reply": reply })),
            Err(error) => (error.status(), json!({ "detail": error.detail() })),
        };
        telemetry::finish_request(RequestEnd {
            status,
            error: result.as_ref().err().map(|e| e as &dyn std::fmt::Display),
            user_id: trace.user_id.as_deref(),
            stats: trace.stats.as_ref(),
            cold_start: self.cold.swap(false, Ordering::Relaxed),
            duration: started.elapsed(),
        });

        let mut response = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json");
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response = response.header(REQUEST_ID_HEADER, value);
        }
        if let Some(origin) = self
            .config
            .cors_allow_origin
            .as_deref()
            .and_then(|o| HeaderValue::from_str(o).ok())
        {
            response = response
                .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin)
                .header(header::VARY, "origin");
        }
        if status == StatusCode::METHOD_NOT_ALLOWED {
            response = response.header(header::ALLOW, "POST");
        }
        response
            .body(Body::Text(body.to_string()))
            .unwrap_or_else(|_| Response::new(Body::Text(r#"{"detail":"internal error"}"#.to_owned())))
    }

    async fn respond(&self, request: &Request, trace: &mut RequestTrace) -> Result<String, ApiError> {
        // The raw path: a REST API stage prefixes `uri().path()` with `/Prod`.
        if request.raw_http_path() != ROUTE {
            return Err(ApiError::NotFound);
        }
        if request.method() != Method::POST {
            return Err(ApiError::MethodNotAllowed);
        }
        let chat = ChatRequest::parse(request.body().as_ref())?;
        trace.user_id = Some(chat.user_id.clone());
        tracing::info!(
            event = "request",
            user_id = %chat.user_id,
            message_chars = chat.message.chars().count(),
            message_sha256_12 = %crate::redact::short_hash(&chat.message),
        );
        let model = self.model().await?;
        let mut turn = Turn::new(
            model,
            &self.payments,
            self.config.retry_backoff,
            &chat.user_id,
            &chat.message,
        );
        let result = turn.run().await;
        trace.stats = Some(turn.stats().clone());
        Ok(result?)
    }

    async fn model(&self) -> Result<&OpenAiChat, SecretError> {
        self.model
            .get_or_try_init(|| async {
                let key = self.key_source.fetch().await.inspect_err(|error| {
                    tracing::error!(event = "secret_read_failed", error = %error);
                })?;
                Ok(OpenAiChat::new(
                    self.http.clone(),
                    &self.config.openai_base_url,
                    key.expose(),
                    self.config.openai_timeout,
                ))
            })
            .await
    }
}
