//! The one place where an outcome becomes a status and a JSON body: every
//! error, the edge's own and the intake's refusals, maps to exactly one
//! status here, with a `detail` that says what went wrong and never a
//! secret, a body from upstream or a stack trace.

use lambda_http::http::StatusCode;
use serde_json::json;

use super::ROUTE;
use super::body::InputError;
use super::idempotency::MalformedKey;
use super::identity::IdentityError;
use crate::budget::Spent;
use crate::chat::CompletionError;
use crate::handoff;
use crate::intake::{Refused, Reply};
use crate::ledger::StoredResponse;
use crate::turn::TurnError;

/// What a 503 asks the caller to wait before trying again.
pub const LEDGER_RETRY_AFTER_SECS: u64 = 2;

/// Why a request got no reply. Each variant maps to exactly one status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("no such route")]
    NotFound,
    /// `allow`: the one method the route takes.
    #[error("method not allowed")]
    MethodNotAllowed { allow: &'static str },
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    MalformedKey(#[from] MalformedKey),
    #[error(transparent)]
    Intake(#[from] Refused),
    /// A visitor's `X-Visitor-Token` of a shape the function never issues:
    /// another visitor's token, answered as one (a 404 on every route).
    #[error("not a visitor token")]
    VisitorToken,
    /// A visitor's first message with an `Idempotency-Key`: no token yet
    /// to scope it by.
    #[error("an Idempotency-Key without a visitor token")]
    VisitorKeyWithoutToken,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Input(InputError::Malformed(_)) | ApiError::MalformedKey(_) => StatusCode::BAD_REQUEST,
            ApiError::Input(InputError::InvalidField(_)) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Identity(IdentityError::Unauthenticated) => StatusCode::UNAUTHORIZED,
            ApiError::Identity(IdentityError::Mismatch) => StatusCode::FORBIDDEN,
            ApiError::Intake(refused) => refused_status(refused),
            // Contract 27: another token, whatever its shape.
            ApiError::VisitorToken => refused_status(&Refused::ConversationNotFound),
            ApiError::VisitorKeyWithoutToken => StatusCode::BAD_REQUEST,
        }
    }

    pub fn detail(&self) -> String {
        match self {
            ApiError::Input(error) => error.to_string(),
            ApiError::NotFound => format!(
                "no route here: the endpoint is POST {ROUTE}, and GET {ROUTE}/conversations/{{id}} reads a conversation"
            ),
            ApiError::MethodNotAllowed { allow: "POST" } => format!("{ROUTE} accepts POST only"),
            ApiError::MethodNotAllowed { allow } => format!("a conversation is read with {allow} only"),
            ApiError::Identity(IdentityError::Unauthenticated) => "sign in to use the refund assistant".into(),
            ApiError::Identity(IdentityError::Mismatch) => "user_id must be the signed-in customer's own id".into(),
            ApiError::MalformedKey(error) => error.to_string(),
            ApiError::Intake(refused) => refused_detail(refused),
            ApiError::VisitorToken => refused_detail(&Refused::ConversationNotFound),
            ApiError::VisitorKeyWithoutToken => "an Idempotency-Key needs X-Visitor-Token: send the first message \
                without a key, then both with every later one"
                .into(),
        }
    }

    /// The one method a 405's route takes.
    pub fn allow(&self) -> Option<&'static str> {
        match self {
            ApiError::MethodNotAllowed { allow } => Some(allow),
            _ => None,
        }
    }

    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::Intake(refused) => refused_retry_after_secs(refused),
            _ => None,
        }
    }
}

fn refused_status(refused: &Refused) -> StatusCode {
    match refused {
        Refused::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
        Refused::InProgress { .. }
        | Refused::ConversationBusy { .. }
        | Refused::AlreadyRated
        | Refused::NotYetRateable => StatusCode::CONFLICT,
        Refused::LedgerUnavailable(_) | Refused::ConversationUnavailable(_) | Refused::BudgetUnavailable(_) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Refused::BudgetSpent(_) => StatusCode::TOO_MANY_REQUESTS,
        Refused::ConversationNotFound => StatusCode::NOT_FOUND,
        Refused::Secret(_) | Refused::NoRandomness(_) => StatusCode::INTERNAL_SERVER_ERROR,
        Refused::Turn(TurnError::TimedOut) => StatusCode::GATEWAY_TIMEOUT,
        Refused::Turn(TurnError::BudgetExhausted | TurnError::Provider(_)) => StatusCode::BAD_GATEWAY,
    }
}

fn refused_detail(refused: &Refused) -> String {
    match refused {
        Refused::KeyReused => {
            "this Idempotency-Key was already used with a different request body; use a new key for a new message"
                .into()
        }
        Refused::InProgress { .. } => {
            "a request with this Idempotency-Key is still being answered; try again after Retry-After seconds".into()
        }
        Refused::LedgerUnavailable(_) | Refused::ConversationUnavailable(_) | Refused::BudgetUnavailable(_) => {
            "the assistant cannot take requests right now; try again after Retry-After seconds".into()
        }
        Refused::BudgetSpent(Spent::Turns { .. }) => {
            "you have sent the most messages the assistant takes in an hour; try again after Retry-After seconds".into()
        }
        Refused::BudgetSpent(Spent::Tokens { .. }) => {
            "the assistant has done as much for you as it can today; try again after Retry-After seconds".into()
        }
        Refused::ConversationNotFound => {
            "this conversation has ended or does not exist; start a new one without conversation_id".into()
        }
        Refused::ConversationBusy { .. } => {
            "the assistant is still answering the previous message of this conversation; try again after \
             Retry-After seconds"
                .into()
        }
        Refused::AlreadyRated => "you have told us already whether this solved it; your first answer stands".into(),
        Refused::NotYetRateable => {
            "you can tell us whether this solved it once our team has closed the conversation or decided its refund"
                .into()
        }
        Refused::NoRandomness(_) => "the assistant is not available right now".into(),
        Refused::Secret(_) => "the assistant is not available right now (configuration could not be read)".into(),
        Refused::Turn(TurnError::TimedOut) => "the assistant did not answer in time".into(),
        Refused::Turn(TurnError::BudgetExhausted) => "the assistant could not finish this request".into(),
        Refused::Turn(TurnError::Provider(CompletionError::Status { status })) => {
            format!("the assistant's model provider answered with an error (HTTP {status})")
        }
        Refused::Turn(TurnError::Provider(_)) => "the assistant's model provider gave no usable answer".into(),
    }
}

fn refused_retry_after_secs(refused: &Refused) -> Option<u64> {
    match refused {
        Refused::InProgress { retry_after_secs } | Refused::ConversationBusy { retry_after_secs } => {
            Some(*retry_after_secs)
        }
        Refused::LedgerUnavailable(_) | Refused::ConversationUnavailable(_) | Refused::BudgetUnavailable(_) => {
            Some(LEDGER_RETRY_AFTER_SECS)
        }
        Refused::BudgetSpent(spent) => Some(spent.retry_after_secs()),
        _ => None,
    }
}

/// The intake's reply as the caller reads it (and a replay gets it again):
/// `reply`, or `detail` with its status; the conversation it belongs to
/// (contract 11) and whether a person has it (contract 12).
pub fn render(reply: &Reply) -> StoredResponse {
    let (status, mut body) = match &reply.result {
        Ok(text) => (StatusCode::OK, json!({ "reply": text })),
        Err(refused) => {
            let mut detail = refused_detail(refused);
            if reply.handed_off {
                detail = format!("{detail}. {}", handoff::AFTER_FAILURES);
            }
            (refused_status(refused), json!({ "detail": detail }))
        }
    };
    if let Some(id) = &reply.conversation {
        body["conversation_id"] = json!(id.as_str());
    }
    if reply.handed_off {
        body["handed_off"] = json!(true);
    }
    // When a person will answer, in code's words (contract 32).
    if let Some(expected) = &reply.person_expected {
        body["person_expected"] = expected.json();
    }
    // Only a 200 says so: a failed turn's refund is told by its detail.
    if reply.awaiting_approval && reply.result.is_ok() {
        body["awaiting_approval"] = json!(true);
    }
    // A visitor asked what needs an account (contract 27): the page offers
    // to confirm their e-mail.
    if !reply.verify.is_empty() {
        let intents: Vec<&str> = reply.verify.iter().map(|intent| intent.as_str()).collect();
        body["verify"] = json!({ "intents": intents });
    }
    // A started return's label, apart from the text (contract 28): the
    // page links this URL, and no URL of a label origin the text holds.
    if let (Some(label), Ok(_)) = (&reply.label, &reply.result) {
        body["label"] = json!(label);
    }
    StoredResponse {
        status: status.as_u16(),
        body: body.to_string(),
    }
}

/// An error of the edge's own checks, before the intake: `detail` only.
pub fn render_error(error: &ApiError) -> StoredResponse {
    StoredResponse {
        status: error.status().as_u16(),
        body: json!({ "detail": error.detail() }).to_string(),
    }
}
