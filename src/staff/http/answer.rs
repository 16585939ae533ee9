//! The desk's one map from outcomes to HTTP statuses (contract 24): every
//! answer JSON, errors `{"detail": ...}`, a 409 with who decided first.

use lambda_http::http::{StatusCode, header};
use lambda_http::{Body, Response};
use serde_json::{Value, json};

use crate::ledger::LedgerError;
use crate::staff::decide::{Decided, Outcome};

/// The headers the chat's edge names too (the desk is an edge of its own
/// and does not import the chat's).
pub const REQUEST_ID_HEADER: &str = "x-request-id";
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
pub const KEY_HEADER: &str = "idempotency-key";

/// Seconds a person's page waits before trying again after a 503.
pub const RETRY_AFTER_SECS: u64 = 2;

/// A status and a JSON body, before headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    pub fn ok(body: Value) -> Answer {
        Answer {
            status: StatusCode::OK,
            body,
        }
    }

    pub fn error(status: StatusCode, detail: impl Into<String>) -> Answer {
        Answer {
            status,
            body: json!({"detail": detail.into()}),
        }
    }

    /// The ledger could not be reached: nothing shown; a decision already
    /// made is never made twice, so trying again is safe.
    pub fn ledger(error: &LedgerError) -> Answer {
        tracing::error!(event = "ledger", error = %error, "a desk request could not reach the ledger");
        Answer::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the refund ledger could not be reached; try again (a decision already made is not made twice)",
        )
    }

    /// A decision's outcome.
    pub fn decided(decided: &Decided) -> Answer {
        let status = match decided.outcome {
            Outcome::Done | Outcome::VerdictNotRecorded => StatusCode::OK,
            Outcome::NotFound => StatusCode::NOT_FOUND,
            Outcome::AlreadyDecided | Outcome::OrderRefused | Outcome::HeldByAnother | Outcome::LimitReached => {
                StatusCode::CONFLICT
            }
            Outcome::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            Outcome::TryAgain | Outcome::Uncertain => StatusCode::SERVICE_UNAVAILABLE,
            Outcome::PaymentsFailed | Outcome::Unrecorded => StatusCode::BAD_GATEWAY,
        };
        let mut body = json!({"outcome": decided.outcome});
        let text_field = if status == StatusCode::OK { "text" } else { "detail" };
        body[text_field] = Value::String(decided.text.clone());
        // Who has the conversation, or who decided first (contract 30, 24).
        let (by, at) = match decided.outcome {
            Outcome::HeldByAnother => ("held_by", "held_since"),
            _ => ("decided_by", "decided_at"),
        };
        if let Some(first) = &decided.first {
            body[by] = Value::String(first.by.clone());
            body[at] = first.at.clone().map_or(Value::Null, Value::String);
        }
        Answer { status, body }
    }

    /// The answer as Lambda returns it.
    /// Same origin only: the desk's page is served by this function (a
    /// page hosted elsewhere could not pass the gateway's preflight, which
    /// names the widget's origin).
    pub fn response(&self, request_id: &str, replayed: bool) -> Response<Body> {
        let mut response = Response::builder()
            .status(self.status)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-store")
            .header(REQUEST_ID_HEADER, request_id);
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response = response.header(header::RETRY_AFTER, RETRY_AFTER_SECS);
        }
        if replayed {
            response = response.header(REPLAYED_HEADER, "true");
        }
        response
            .body(Body::Text(self.body.to_string()))
            .unwrap_or_else(|_| Response::new(Body::Text(r#"{"detail":"internal error"}"#.into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::staff::decide::First;

    #[test]
    fn each_outcome_has_its_status() {
        let of = |outcome| {
            Answer::decided(&Decided {
                outcome,
                text: "t".into(),
                first: None,
                pokes: Vec::new(),
            })
            .status
            .as_u16()
        };
        assert_eq!(of(Outcome::Done), 200);
        assert_eq!(of(Outcome::NotFound), 404);
        assert_eq!(of(Outcome::AlreadyDecided), 409);
        assert_eq!(of(Outcome::Invalid), 422);
        assert_eq!(of(Outcome::PaymentsFailed), 502);
        assert_eq!(of(Outcome::TryAgain), 503);
    }

    #[test]
    fn a_conflict_names_who_decided_first_and_when() {
        let answer = Answer::decided(&Decided {
            outcome: Outcome::AlreadyDecided,
            text: "refund r is executing, decided by Ann".into(),
            first: Some(First {
                by: "Ann".into(),
                at: Some("2026-12-04T10:00:00Z".into()),
            }),
            pokes: Vec::new(),
        });
        assert_eq!(answer.body["decided_by"], "Ann");
        assert_eq!(answer.body["decided_at"], "2026-12-04T10:00:00Z");
        assert!(answer.body["detail"].as_str().unwrap().contains("Ann"));
    }
}
