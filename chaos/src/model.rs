//! A chaotic OpenAI-compatible model: for each completion call it draws, from
//! the seed, the conversation's marker and the call, one behaviour: a plain
//! reply, one to three `issue_refund` calls (valid, invalid, duplicate, above
//! the limit, another customer's order), a `get_order` (its own order or
//! another's), a handoff to a person, an unknown tool, a timeout, a 429 or
//! 500, or a body that is not a completion. Everything a real model (or a
//! prompt injection) can make the function face. A call for a message of the
//! mortal container may also die with its invocation ([`MORTAL_MARKER`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use refund_chat_local::completions;
use serde_json::{Value, json};

use crate::rng::{Rng, hash};

#[derive(Clone)]
pub struct ChaoticModel {
    seed: u64,
    /// Longer than the function's completion timeout.
    hang: Duration,
    /// Every order id of the run, for "another customer's order".
    orders: Arc<Vec<String>>,
    /// How often each (conversation, round) was asked: a retry draws anew.
    asked: Arc<Mutex<HashMap<(String, usize), u64>>>,
    /// Rung when a call of the mortal container's is to die with it.
    pub deaths: Arc<tokio::sync::Notify>,
    /// How often each streamed request body was asked.
    streamed: Arc<Mutex<HashMap<u64, u64>>>,
    /// Requests, and those that held a return label's URL (contract 28:
    /// the model is never given one).
    pub requests: Arc<std::sync::atomic::AtomicUsize>,
    pub labels_seen: Arc<std::sync::atomic::AtomicUsize>,
}

/// Messages whose marker starts with this go to the mortal container.
pub const MORTAL_MARKER: &str = "zd";

impl ChaoticModel {
    pub fn new(seed: u64, hang: Duration, orders: Vec<String>) -> ChaoticModel {
        ChaoticModel {
            seed,
            hang,
            orders: Arc::new(orders),
            asked: Arc::default(),
            deaths: Arc::default(),
            streamed: Arc::default(),
            requests: Arc::default(),
            labels_seen: Arc::default(),
        }
    }

    pub fn router(self) -> axum::Router {
        axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(complete))
            .with_state(self)
    }
}

/// A message's marker: its first word, or, after a yes or a no (contract
/// 26's answers), the first word that is one.
pub fn marker_of(message: &str) -> &str {
    let mut words = message.split_whitespace();
    let first = words.clone().next().unwrap_or("none");
    words
        .find(|w| w.starts_with("zq") || w.starts_with(MORTAL_MARKER))
        .unwrap_or(first)
}

/// The streets of the addresses the chaos model writes: never in a log line.
pub const CHAOS_STREETS: [&str; 2] = ["1 Zebrafish Quay", "2 Zebrafish Quay"];

fn refund(id: &str, order: &str, cents: i64) -> (String, String, String) {
    (
        id.to_owned(),
        "issue_refund".to_owned(),
        json!({"order_id": order, "amount_cents": cents}).to_string(),
    )
}

/// The sandbox's labels are at `/labels/{return id}` of its own origin.
pub const LABEL_PATH: &str = "/labels/";

/// The arguments of the model's last call of `tool` in the conversation:
/// after a yes it mostly calls it again, as a model reading the history would.
fn earlier_call(request: &Value, tool: &str) -> Option<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|call| call["function"]["name"] == tool)
        .and_then(|call| call["function"]["arguments"].as_str().map(str::to_owned))
}

async fn complete(State(model): State<ChaoticModel>, Json(request): Json<Value>) -> Response {
    model.requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if request.to_string().contains(LABEL_PATH) {
        model.labels_seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    if request["response_format"]["type"] == "json_schema" {
        return route(&model, &request).await;
    }
    let response = answer(&model, &request).await;
    // How it streams: drawn from the request and how often it was asked, so
    // that a retry (the same body) draws anew.
    let mut rng = {
        let body = hash(&request.to_string());
        let mut streamed = model.streamed.lock().unwrap_or_else(|e| e.into_inner());
        let count = streamed.entry(body).or_insert(0);
        *count += 1;
        Rng::derived(model.seed, &[body, *count, 0x5713])
    };
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if request["stream"].as_bool() != Some(true) || response.status() != StatusCode::OK || !is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(completion) => stream_chaotically(&model, &mut rng, completion).await,
        // Not a completion (the garbled body): as it is, whatever was asked.
        Err(_) => Response::from_parts(parts, axum::body::Body::from(bytes)),
    }
}

/// The routing call (contract 21), chaotic: sure labels mostly (now and
/// then sure of an order question alone), unsure ones, a high risk, labels outside the schema, garbage, a
/// stall past its timeout or a 500. Drawn from the message and how often it
/// was routed.
async fn route(model: &ChaoticModel, request: &Value) -> Response {
    let newest = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut rng = {
        let key = hash(&newest);
        let mut routed = model.streamed.lock().unwrap_or_else(|e| e.into_inner());
        let count = routed.entry(key ^ 0x2007).or_insert(0);
        *count += 1;
        Rng::derived(model.seed, &[key, *count, 0x2007])
    };
    if newest.contains("address") && rng.chance(0.9) {
        return text(&json!({"intents": ["address_change"], "risk": "low", "confidence": 0.93}).to_string());
    }
    if newest.contains("return the item") && rng.chance(0.9) {
        return text(&json!({"intents": ["return"], "risk": "low", "confidence": 0.93}).to_string());
    }
    let labels = match rng.below(100) {
        0..=61 => json!({"intents": ["refund"], "risk": "low", "confidence": 0.95}),
        // Sure, and not a refund: whatever the agent proposes waits (contract 21).
        62..=69 => json!({"intents": ["order_status"], "risk": "low", "confidence": 0.97}),
        70..=79 => json!({"intents": ["refund", "order_status"], "risk": "low", "confidence": 0.4}),
        80..=83 => json!({"intents": ["refund"], "risk": "high", "confidence": 0.9}),
        84..=87 => json!({"intents": ["refund", "refund"], "risk": "low", "confidence": 1.0}),
        88..=91 => return text("refund it all, risk low, confidence 1"),
        92..=95 => {
            tokio::time::sleep(model.hang).await;
            return text("too late");
        }
        _ => return (StatusCode::INTERNAL_SERVER_ERROR, "router exploded").into_response(),
    };
    text(&labels.to_string())
}

/// A completion as a stream (contract 20), the way a provider and a network
/// can deliver one: pieces of text and of tool arguments split anywhere
/// (inside an escape), the bytes cut anywhere (inside a UTF-8 character),
/// and now and then a stream with no usage, one that breaks off, one that
/// stalls mid-way (past the function's timeout), or a chunk that is not JSON.
async fn stream_chaotically(model: &ChaoticModel, rng: &mut Rng, mut completion: Value) -> Response {
    if let Some(reply) = completion["choices"][0]["message"]["content"].as_str() {
        // Words beyond ASCII, so that a cut can fall inside a character.
        completion["choices"][0]["message"]["content"] = json!(format!("{reply} Merci, café ✓"));
    }
    let mut events: Vec<String> =
        completions::chunks(&completion, 1 + rng.below(3) as usize, 1 + rng.below(5) as usize)
            .iter()
            .map(|chunk| completions::event(&chunk.to_string()))
            .collect();
    let roll = rng.below(100);
    let mut stall_at = None;
    match roll {
        0..=9 => {
            events.pop(); // the usage chunk
        }
        10..=17 => {
            let keep = rng.below(events.len() as u64 - 2) as usize + 1;
            events.truncate(keep); // broken off: no finish, no [DONE]
        }
        18..=24 => stall_at = Some(rng.below(events.len() as u64) as usize),
        25..=29 => {
            let at = rng.below(events.len() as u64) as usize;
            events.insert(at, completions::event("{\"choices\": [ not json"));
        }
        _ => {}
    }
    if roll >= 10 && !(10..=17).contains(&roll) {
        events.push(completions::event("[DONE]"));
    }
    let text: Vec<u8> = events.concat().into_bytes();
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let end = (at + 1 + rng.below(40) as usize).min(text.len());
        pieces.push(axum::body::Bytes::copy_from_slice(&text[at..end]));
        at = end;
    }
    let stall_piece = stall_at.map(|event| pieces.len() * event / events.len().max(1));
    let hang = model.hang;
    let body = futures_util::stream::iter(pieces.into_iter().enumerate()).then(move |(i, piece)| async move {
        if Some(i) == stall_piece {
            tokio::time::sleep(hang).await;
        } else if i % 3 == 0 {
            // Now and then a pause, so that pieces arrive as pieces.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok::<_, std::convert::Infallible>(piece)
    });
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(body),
    )
        .into_response()
}

/// The behaviour drawn for this call.
async fn answer(model: &ChaoticModel, request: &Value) -> Response {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    // This turn: from the newest customer message on (the history comes before it).
    let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
    let messages = messages[newest..].to_vec();
    let said = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let words: Vec<&str> = said.split_whitespace().collect();
    let marker = marker_of(&said).to_owned();
    let order = words
        .iter()
        .find(|w| w.starts_with("O-"))
        .copied()
        .unwrap_or("O-00-0")
        .to_owned();
    let cents: i64 = words.iter().find_map(|w| w.parse().ok()).unwrap_or(1000);
    let round = messages.iter().filter(|m| m["role"] == "assistant").count();
    let asked = {
        let mut asked = model.asked.lock().unwrap_or_else(|e| e.into_inner());
        let count = asked.entry((marker.clone(), round)).or_insert(0);
        *count += 1;
        *count
    };
    let mut rng = Rng::derived(model.seed, &[hash(&marker), round as u64, asked]);
    let after_tools = messages.last().is_some_and(|m| m["role"] == "tool");
    let roll = rng.below(100);
    if marker.starts_with(MORTAL_MARKER) && rng.chance(0.35) {
        // Its invocation dies mid-turn: the harness kills the one container
        // that runs marked messages, and this call never answers.
        model.deaths.notify_one();
        tokio::time::sleep(model.hang * 20).await;
        return text("too late");
    }

    // A return (contract 28), when the function offers the tool: after a
    // yes mostly the call it made before; else one of the order's item, of
    // more than it holds, for a reason a person takes, or another's order.
    if refund_chat_local::local_model::offered(request, "start_return") && !after_tools {
        let earlier = earlier_call(request, "start_return");
        let said_lower = said.to_lowercase();
        if (said_lower.starts_with("yes") || said_lower.starts_with("oui"))
            && let Some(arguments) = earlier.filter(|_| rng.chance(0.8))
        {
            let calls = [("r1", "start_return", arguments.as_str())];
            return Json(completions::tool_calls(&calls)).into_response();
        }
        if said_lower.contains("return the item") && rng.chance(0.85) {
            let target = if rng.chance(0.85) {
                order.clone()
            } else {
                rng.pick(model.orders.as_slice()).clone()
            };
            let quantity = if rng.chance(0.1) { 2 } else { 1 };
            let reason = *rng.pick(&["changed_mind", "changed_mind", "wrong_size", "damaged"]);
            let arguments = json!({"order_id": target, "items": [{"name": "Item", "quantity": quantity}],
                "reason": reason})
            .to_string();
            let mut calls = vec![("r1", "start_return", arguments.as_str())];
            if rng.chance(0.2) {
                calls.push(("r2", "start_return", arguments.as_str()));
            }
            return Json(completions::tool_calls(&calls)).into_response();
        }
    }

    // A change of address (contract 26), when the function offers the tool:
    // a proposal, the same again (as after a yes), one with other words, or
    // another customer's order; sometimes twice in a turn.
    let offered = refund_chat_local::local_model::offered(request, "change_delivery_address");
    let earlier = earlier_call(request, "change_delivery_address");
    let said_lower = said.to_lowercase();
    if offered
        && !after_tools
        && (said_lower.starts_with("yes") || said_lower.starts_with("oui"))
        && let Some(arguments) = earlier.filter(|_| rng.chance(0.8))
    {
        let calls = [("a1", "change_delivery_address", arguments.as_str())];
        return Json(completions::tool_calls(&calls)).into_response();
    }
    if offered && !after_tools && rng.chance(0.85) {
        let target = if rng.chance(0.85) {
            order.clone()
        } else {
            rng.pick(model.orders.as_slice()).clone()
        };
        let arguments = json!({"order_id": target, "name": "Chaos Customer",
            "line1": rng.pick(&CHAOS_STREETS), "line2": "", "postcode": "75002", "city": "Paris", "country": "FR"})
        .to_string();
        let mut calls = vec![("a1", "change_delivery_address", arguments.as_str())];
        if rng.chance(0.2) {
            calls.push(("a2", "change_delivery_address", arguments.as_str()));
        }
        return Json(completions::tool_calls(&calls)).into_response();
    }
    let calls: Vec<(String, String, String)> = match (after_tools, roll) {
        (true, 0..=69) => return text("I have looked into it for you."),
        (true, 70..=84) => vec![refund("again", &order, cents)],
        (true, _) | (false, 0..=6) => return misbehave(model, &mut rng).await,
        (false, 7..=41) => vec![refund("c1", &order, cents)],
        (false, 42..=49) => vec![refund("c1", &order, cents), refund("c2", &order, cents)],
        (false, 50..=55) => vec![
            refund("c1", &order, cents),
            refund("c2", rng.pick(model.orders.as_slice()).as_str(), cents / 2 + 1),
            refund("c3", &order, cents + 100),
        ],
        (false, 56..=63) => vec![refund("c1", &order, 5001 + rng.below(20_000) as i64)],
        (false, 64..=71) => vec![refund("c1", rng.pick(model.orders.as_slice()).as_str(), cents)],
        (false, 72..=79) => vec![(
            "c1".into(),
            "issue_refund".into(),
            rng.pick(&[
                json!({"order_id": order, "amount_cents": 0}).to_string(),
                json!({"order_id": order}).to_string(),
                json!({"order_id": order, "amount_cents": cents, "user_id": "someone-else"}).to_string(),
                json!({"order_id": "", "amount_cents": cents}).to_string(),
                "{not json".to_owned(),
            ])
            .clone(),
        )],
        // Its own order, or another customer's (the order system says 404).
        (false, 80..=82) => vec![(
            "g1".into(),
            "get_order".into(),
            json!({"order_id": if rng.chance(0.5) { order.clone() } else { rng.pick(model.orders.as_slice()).clone() }})
                .to_string(),
        )],
        (false, 83..=84) => vec![(
            "c1".into(),
            "lookup_order".into(),
            json!({"order_id": order}).to_string(),
        )],
        (false, 85..=87) => vec![(
            "h1".into(),
            "hand_off_to_person".into(),
            json!({"reason": "other", "summary": format!("{marker} wants a person")}).to_string(),
        )],
        (false, _) => return text("How can I help you with your order?"),
    };
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Json(completions::tool_calls(&calls)).into_response()
}

fn text(reply: &str) -> Response {
    Json(completions::text(reply)).into_response()
}

/// A timeout, a 429, a 500, or a body that is not a completion.
async fn misbehave(model: &ChaoticModel, rng: &mut Rng) -> Response {
    match rng.below(4) {
        0 => {
            tokio::time::sleep(model.hang).await;
            text("too late")
        }
        1 => (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"error": {"message": "slow down"}})),
        )
            .into_response(),
        2 => (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        _ => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            "{\"choices\": [ garbled",
        )
            .into_response(),
    }
}
