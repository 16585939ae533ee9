//! What the model and payments stand-ins answer, and how tests read what the model was told.

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::*;

pub fn completion(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::completion(message))
}

pub fn text(reply: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::text(reply))
}

pub fn tool_calls(calls: &[(&str, &str, &str)]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::tool_calls(calls))
}

pub fn refund_call(id: &str, order_id: &str, amount_cents: u64) -> ResponseTemplate {
    tool_calls(&[(
        id,
        "issue_refund",
        &json!({"order_id": order_id, "amount_cents": amount_cents}).to_string(),
    )])
}

/// `completion` (a chat completion's JSON) as a streamed answer: two words a
/// chunk, tool arguments four characters a chunk, the usage, `[DONE]`.
pub fn streamed(completion: Value) -> ResponseTemplate {
    use refund_chat_local::completions::{chunks, event};
    let mut body: String = chunks(&completion, 2, 4)
        .iter()
        .map(|c| event(&c.to_string()))
        .collect();
    body.push_str(&event("[DONE]"));
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

pub fn streamed_text(reply: &str) -> ResponseTemplate {
    streamed(refund_chat_local::completions::text(reply))
}

pub fn streamed_refund_call(id: &str, order_id: &str, amount_cents: u64) -> ResponseTemplate {
    streamed(refund_chat_local::completions::tool_calls(&[(
        id,
        "issue_refund",
        &json!({"order_id": order_id, "amount_cents": amount_cents}).to_string(),
    )]))
}

/// The routing call's answer (contract 21): these labels, as a strict
/// structured output arrives (the JSON in the message's text).
pub fn routed(intents: &[&str], risk: &str, confidence: f64) -> ResponseTemplate {
    text(&json!({"intents": intents, "risk": risk, "confidence": confidence}).to_string())
}

/// Whether a model request is a routing call (it asks for the labels' schema).
pub fn is_routing_call(request: &Value) -> bool {
    request["response_format"]["type"] == "json_schema"
}

pub fn hang() -> ResponseTemplate {
    text("too late").set_delay(HANG)
}

pub fn receipt() -> ResponseTemplate {
    ResponseTemplate::new(201)
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

/// The parsed content of a tool message.
pub fn tool_content(message: &Value) -> Value {
    message["content"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}
