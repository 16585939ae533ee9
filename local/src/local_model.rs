//! A deterministic OpenAI-compatible Chat Completions server that behaves like
//! a reasonable refund agent, for demos and tests without OpenAI.
//!
//! It reads the customer's message, finds an order id and an amount, calls
//! `issue_refund`, then answers in words from the tool result; it asks for the
//! missing detail when there is none. Phrases in the customer's message make
//! it misbehave on purpose (see [`PHRASES`]), so every contract path can be
//! shown by hand.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::completions::{self, text};
use crate::order_text::{find_amount_cents, find_order_id};
use crate::payments_sandbox::money;

/// The phrases that make the model misbehave, and what each does.
pub const PHRASES: &[(&str, &str)] = &[
    (
        "refund twice",
        "two issue_refund calls in one assistant message (the second is refused)",
    ),
    ("refund again", "a second issue_refund in a later round (refused)"),
    (
        "broken arguments",
        "issue_refund with arguments that fail the schema (a tool error, no payment)",
    ),
    (
        "time out once",
        "the first completion call hangs; the retry answers (200 after the backoff)",
    ),
    ("time out", "every completion call hangs (504 after two attempts)"),
    (
        "keep calling tools",
        "asks for a tool on every call (502 after 5 calls)",
    ),
    ("provider error", "answers HTTP 500 (502 at once, no retry)"),
];

/// How long a "hanging" call takes: longer than any sane completion timeout.
pub const HANG: Duration = Duration::from_secs(120);

#[derive(Clone, Default)]
pub struct LocalModel {
    /// Requests already answered by "time out once", by their exact body.
    timed_out_once: Arc<Mutex<HashSet<String>>>,
    hang: Option<Duration>,
}

enum Behaviour {
    Answer(Value),
    Hang,
    Fail,
}

impl LocalModel {
    /// `hang` overrides [`HANG`] (tests use a short one).
    pub fn new(hang: Option<Duration>) -> Self {
        LocalModel {
            hang,
            ..LocalModel::default()
        }
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(self.clone())
    }

    fn behave(&self, request: &Value) -> Behaviour {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let customer = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let said = |phrase: &str| customer.to_lowercase().contains(phrase);

        if said("provider error") {
            return Behaviour::Fail;
        }
        let rounds = messages.iter().filter(|m| m["role"] == "assistant").count();
        if said("time out once") {
            // Only the turn's first call hangs, once; its retry (the same body) answers.
            let mut seen = self.timed_out_once.lock().unwrap_or_else(|p| p.into_inner());
            if rounds == 0 && seen.insert(request["messages"].to_string()) {
                return Behaviour::Hang;
            }
        } else if said("time out") {
            return Behaviour::Hang;
        }
        if said("keep calling tools") {
            return Behaviour::Answer(tool_calls(rounds, &[("lookup_order", json!({"order_id": "A-1001"}))]));
        }

        let after_tools = messages.last().is_some_and(|m| m["role"] == "tool");
        let order_id = find_order_id(customer);
        let amount = find_amount_cents(customer);
        match (after_tools, order_id, amount) {
            (true, Some(order_id), Some(cents)) if said("refund again") && rounds == 1 => {
                Behaviour::Answer(tool_calls(rounds, &[("issue_refund", refund_args(&order_id, cents))]))
            }
            (true, ..) => Behaviour::Answer(text(&summarise_tool_results(&messages))),
            (false, Some(order_id), _) if said("broken arguments") => Behaviour::Answer(tool_calls(
                rounds,
                &[(
                    "issue_refund",
                    json!({"order_id": order_id, "amount_cents": "twelve fifty"}),
                )],
            )),
            (false, Some(order_id), Some(cents)) => {
                let call = ("issue_refund", refund_args(&order_id, cents));
                let calls: &[(&str, Value)] = if said("refund twice") {
                    &[call.clone(), call]
                } else {
                    &[call]
                };
                Behaviour::Answer(tool_calls(rounds, calls))
            }
            (false, Some(order_id), None) => {
                Behaviour::Answer(text(&format!("How much should I refund on order {order_id}?")))
            }
            (false, None, Some(cents)) => Behaviour::Answer(text(&format!(
                "I can refund {} for you: which order is it for? Order ids look like A-1001.",
                money(cents)
            ))),
            (false, None, None) => Behaviour::Answer(text(
                "I can refund an order for you. Tell me the order id (like A-1001) and the amount. \
                 Refunds usually reach your card within 5 business days.",
            )),
        }
    }
}

fn refund_args(order_id: &str, cents: u64) -> Value {
    json!({"order_id": order_id, "amount_cents": cents})
}

/// Words for the customer from every tool result of the conversation.
fn summarise_tool_results(messages: &[Value]) -> String {
    let sentences: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|message| {
            let content: Value = message["content"]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null);
            if content["status"] == "pending_approval" {
                return format!(
                    "A person from our support team will review this refund (reference {}) and get back to you.",
                    content["approval_id"].as_str().unwrap_or("pending")
                );
            }
            match (
                content["refund_id"].as_str(),
                content["amount_cents"].as_u64(),
                content["error"].as_str(),
            ) {
                (Some(id), Some(cents), _) if content["already_refunded"] == true => {
                    format!("That refund was already made: {} (refund {id}).", money(cents))
                }
                (Some(id), Some(cents), _) => format!("Done: I refunded {} (refund {id}).", money(cents)),
                (_, _, Some(error)) => format!("I could not do that: {error}."),
                _ => "Something unexpected came back, so a person will check your refund.".to_owned(),
            }
        })
        .collect();
    sentences.join(" ")
}

fn tool_calls(round: usize, calls: &[(&str, Value)]) -> Value {
    let ids: Vec<String> = (0..calls.len()).map(|i| format!("call_{round}_{i}")).collect();
    let arguments: Vec<String> = calls.iter().map(|(_, arguments)| arguments.to_string()).collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (ids[i].as_str(), *name, arguments[i].as_str()))
        .collect();
    completions::tool_calls(&calls)
}

async fn complete(State(model): State<LocalModel>, Json(request): Json<Value>) -> Response {
    match model.behave(&request) {
        Behaviour::Answer(body) => Json(body).into_response(),
        Behaviour::Fail => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "the local model was asked to fail", "type": "server_error"}})),
        )
            .into_response(),
        Behaviour::Hang => {
            tokio::time::sleep(model.hang.unwrap_or(HANG)).await;
            Json(text("(answered too late)")).into_response()
        }
    }
}
