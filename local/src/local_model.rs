//! A deterministic OpenAI-compatible Chat Completions server that behaves like
//! a reasonable refund agent, for demos and tests without OpenAI.
//!
//! It reads the customer's newest message, finds an order id and an amount,
//! calls `issue_refund`, then answers in words from the tool result; it asks
//! for the missing detail when there is none. Like a real model it reads the
//! conversation's earlier exchanges: after it asked for a detail, the next
//! message's answer completes the earlier one ("A-1001, the whole 12.50"), a
//! correction wins ("sorry, it was A-1003"), and "the other one too" finds
//! the order it has not refunded yet. A question about an order ("where is my
//! order A-1001?") is looked up with `get_order` and answered from the order's
//! status. A question about the shop's rules ("how long do I have to return
//! a damaged item?") is searched with `search_help_centre` and answered with
//! the passage found and its link, or "not sure" and a person offered when
//! nothing is found; a refund asked for "according to your policy" is
//! searched first, then refunded. A change of delivery address is proposed
//! with `change_delivery_address` and made after the customer's "yes", when
//! the function offers the tool, and so is a return with `start_return`
//! (the order read first, its first item named); another request beyond refunds and orders
//! goes to a person with `hand_off_to_person`. Phrases in the newest message make it
//! misbehave on purpose (see [`PHRASES`]), so every contract path can be
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
use crate::order_text::{find_amount_cents, find_amount_for, find_order_ids};
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
    (
        "think aloud",
        "a few words before its tool calls (streamed, then discarded: contract 20)",
    ),
];

/// How long a "hanging" call takes: longer than any sane completion timeout.
pub const HANG: Duration = Duration::from_secs(120);

/// Between two chunks of a streamed answer: slow enough to see the words
/// arrive, fast enough for tests.
pub const CHUNK_DELAY: Duration = Duration::from_millis(30);
/// The longest one streamed answer takes, however long it is, unless set:
/// inside the tests' 500 ms completion timeout.
pub const STREAM_AT_MOST: Duration = Duration::from_millis(200);

#[derive(Clone, Default)]
pub struct LocalModel {
    /// Requests already answered by "time out once", by their exact body.
    timed_out_once: Arc<Mutex<HashSet<String>>>,
    hang: Option<Duration>,
    /// A real model's time per call: `mean ± jitter`, uniform (`make load`).
    latency: Option<(Duration, Duration)>,
    /// A provider's requests-per-minute limit: over it, 429 (`make load`).
    requests_per_minute: Option<usize>,
    recent: Arc<Mutex<std::collections::VecDeque<std::time::Instant>>>,
    draws: Arc<std::sync::atomic::AtomicU64>,
    chunk_delay: Option<Duration>,
    stream_within: Option<Duration>,
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

    /// Every call takes `mean ± jitter` (uniform), as a real model's do.
    pub fn with_latency(mut self, mean: Duration, jitter: Duration) -> Self {
        self.latency = Some((mean, jitter));
        self
    }

    /// At most `per_minute` calls in any 60 s; the rest get a 429.
    pub fn with_rate_limit(mut self, per_minute: usize) -> Self {
        self.requests_per_minute = Some(per_minute);
        self
    }

    /// This call's latency: a splitmix64 draw, no randomness crate needed.
    fn latency(&self) -> Option<Duration> {
        let (mean, jitter) = self.latency?;
        let mut x = self
            .draws
            .fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let unit = ((x ^ (x >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
        Some(mean.saturating_sub(jitter) + jitter.mul_f64(2.0 * unit))
    }

    /// Whether this call is over the rate limit (and so gets a 429).
    fn over_the_limit(&self) -> bool {
        let Some(limit) = self.requests_per_minute else {
            return false;
        };
        let now = std::time::Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        while recent
            .front()
            .is_some_and(|at| now.duration_since(*at) > Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= limit {
            return true;
        }
        recent.push_back(now);
        false
    }

    /// Between two chunks of a streamed answer (the words arriving under
    /// `make run`); [`CHUNK_DELAY`] unless set.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = Some(delay);
        self
    }

    /// A streamed answer takes at most `within` ([`STREAM_AT_MOST`] unless set).
    pub fn streaming_within(mut self, within: Duration) -> Self {
        self.stream_within = Some(within);
        self
    }

    /// `completion` as a provider streams it: two words a chunk, the tool
    /// calls' arguments in pieces, a pause between chunks.
    fn stream(&self, completion: &Value) -> Response {
        let mut events: std::collections::VecDeque<String> = completions::chunks(completion, 2, 12)
            .iter()
            .map(|chunk| completions::event(&chunk.to_string()))
            .collect();
        // A long answer streams faster: the whole stream stays within
        // STREAM_AT_MOST, well inside the short timeouts of tests and `make run`.
        let delay = self
            .chunk_delay
            .unwrap_or(CHUNK_DELAY)
            .min(self.stream_within.unwrap_or(STREAM_AT_MOST) / events.len().max(1) as u32);
        events.push_back(completions::event("[DONE]"));
        let body = futures_util::stream::unfold((events, true), move |(mut events, first)| async move {
            let event = events.pop_front()?;
            if !first {
                tokio::time::sleep(delay).await;
            }
            Some((Ok::<_, std::convert::Infallible>(event), (events, false)))
        });
        (
            [("content-type", "text/event-stream")],
            axum::body::Body::from_stream(body),
        )
            .into_response()
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(self.clone())
    }

    fn behave(&self, request: &Value) -> Behaviour {
        let mut behaviour = self.behave_plainly(request);
        // "think aloud": a few words before its tool calls, as real models write.
        let customer = newest_customer_message(request).to_lowercase();
        if let Behaviour::Answer(body) = &mut behaviour
            && customer.contains("think aloud")
            && body["choices"][0]["message"]["tool_calls"].is_array()
        {
            body["choices"][0]["message"]["content"] = json!("Let me look into that for you.");
        }
        behaviour
    }

    fn behave_plainly(&self, request: &Value) -> Behaviour {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        // This turn starts at the newest customer message; before it, the history.
        let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
        let (history, this_turn) = messages.split_at(newest);
        let customer = this_turn.first().and_then(|m| m["content"].as_str()).unwrap_or("");
        let said = |phrase: &str| customer.to_lowercase().contains(phrase);

        if said("provider error") {
            return Behaviour::Fail;
        }
        let rounds = this_turn.iter().filter(|m| m["role"] == "assistant").count();
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

        let after_tools = this_turn.last().is_some_and(|m| m["role"] == "tool");
        // A change of address (contract 26), when the function offers the tool.
        if offered(request, "change_delivery_address") && !after_tools {
            if let Some(arguments) = address_change(customer) {
                return Behaviour::Answer(tool_calls(rounds, &[("change_delivery_address", arguments)]));
            }
            if says_yes(customer)
                && let Some(arguments) = proposed(history, "change_delivery_address")
            {
                return Behaviour::Answer(tool_calls(rounds, &[("change_delivery_address", arguments)]));
            }
            if says_no(customer) && proposed(history, "change_delivery_address").is_some() {
                return Behaviour::Answer(text("All right: I have left the delivery address as it is."));
            }
        }
        // A return (contract 28), when the function offers the tool: the
        // order read first, then its first item named as the order names it.
        if offered(request, "start_return") {
            if let Some(call) = return_call(customer, this_turn, after_tools) {
                return Behaviour::Answer(tool_calls(rounds, &[call]));
            }
            if !after_tools
                && says_yes(customer)
                && let Some(arguments) = proposed(history, "start_return")
            {
                return Behaviour::Answer(tool_calls(rounds, &[("start_return", arguments)]));
            }
            if !after_tools && says_no(customer) && proposed(history, "start_return").is_some() {
                return Behaviour::Answer(text("All right: I have not started a return."));
            }
        }
        if !after_tools && beyond_refunds(customer) {
            // Not a refund: a person must help (code already caught "a person, please").
            return Behaviour::Answer(tool_calls(
                rounds,
                &[(
                    "hand_off_to_person",
                    json!({"reason": "cannot_help", "summary": "The customer asks for something other than a refund."}),
                )],
            ));
        }
        let (order_id, amount) = understand(customer, history);
        if !after_tools && order_id.is_none() && amount.is_none() && asks_about_the_rules(customer) {
            return Behaviour::Answer(tool_calls(
                rounds,
                &[("search_help_centre", json!({"query": customer}))],
            ));
        }
        if let (false, Some(order_id), None) = (after_tools, &order_id, amount)
            && asks_about_the_order(customer)
        {
            return Behaviour::Answer(tool_calls(rounds, &[("get_order", json!({"order_id": order_id}))]));
        }
        // "Any news?" after a person wrote (contract 18): what they wrote.
        if let (false, None, None, Some(words)) = (after_tools, &order_id, amount, persons_last_words(history))
            && asks_for_news(customer)
        {
            return Behaviour::Answer(text(&format!("Our support team wrote to you: \u{201c}{words}\u{201d}")));
        }
        // A refund the customer grounds in the shop's rules: the rules
        // first, then the refund, so the approver sees the passage it relied on.
        if let (Some(order_id), Some(cents)) = (&order_id, amount)
            && cites_the_rules(customer)
            && !called(this_turn, "issue_refund")
        {
            let call = if called(this_turn, "search_help_centre") {
                ("issue_refund", refund_args(order_id, cents))
            } else {
                ("search_help_centre", json!({"query": customer}))
            };
            return Behaviour::Answer(tool_calls(rounds, &[call]));
        }
        match (after_tools, order_id, amount) {
            (true, Some(order_id), Some(cents)) if said("refund again") && rounds == 1 => {
                Behaviour::Answer(tool_calls(rounds, &[("issue_refund", refund_args(&order_id, cents))]))
            }
            (true, ..) => Behaviour::Answer(text(&summarise_tool_results(this_turn))),
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
            (false, None, None) if !refunded_orders(history).is_empty() => {
                Behaviour::Answer(text("You are welcome. Is there anything else I can help with?"))
            }
            // No number of its own: the shop's rules come from its help centre.
            (false, None, None) => Behaviour::Answer(text(
                "I can refund an order for you, look an order up, or answer questions about the shop's rules. \
                 Tell me the order id (like A-1001) and the amount.",
            )),
        }
    }
}

/// The order and amount the customer means, reading the conversation as a
/// person would: the newest message first; what it leaves out comes from
/// earlier messages when the agent had just asked for it, or when the
/// customer asks for "the other one". An order refunded earlier in the
/// conversation is never picked again from the history.
fn understand(newest: &str, history: &[Value]) -> (Option<String>, Option<u64>) {
    let refunded = refunded_orders(history);
    let earlier: Vec<&str> = history
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let asked = history
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant" && m["content"].is_string())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|reply| reply.contains('?'));
    let lower = newest.to_lowercase();
    let carries = asked || lower.contains("other one") || lower.contains("the other");

    let own_order = find_order_ids(newest)
        .into_iter()
        .find(|order| !refunded.contains(order));
    let from_history = || {
        earlier.iter().find_map(|text| {
            find_order_ids(text)
                .into_iter()
                .find(|order| !refunded.contains(order))
                .map(|order| (find_amount_for(text, &order), order))
        })
    };
    let (order_id, earlier_amount) = match own_order {
        Some(order) => (Some(order), None),
        None if carries => match from_history() {
            Some((amount, order)) => (Some(order), amount),
            None => (None, None),
        },
        None => (None, None),
    };
    let amount = match &order_id {
        Some(order) if newest.contains(order.as_str()) => find_amount_for(newest, order),
        _ => None,
    }
    .or_else(|| find_amount_cents(newest))
    .or(earlier_amount)
    .or_else(|| {
        // "Which order?": the amount was in the message before.
        carries
            .then(|| earlier.iter().find_map(|text| find_amount_cents(text)))
            .flatten()
    });
    (order_id, amount)
}

/// Whether the request declares the tool `name` (the function offers the
/// change of address and the return only while they are served, contracts
/// 26 and 28).
pub fn offered(request: &Value, name: &str) -> bool {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|tool| tool["function"]["name"] == name)
}

/// "change the delivery address of A-1004 to Ada Lovelace, 12 Byron Road,
/// N1 7AA London, GB" (a line2 may come after line1): the tool's arguments.
fn address_change(message: &str) -> Option<Value> {
    let lower = message.to_lowercase();
    if !lower.contains("address") {
        return None;
    }
    let order_id = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|word| is_order_id(word))?;
    let after = message.get(lower.find(" to ")? + 4..)?;
    let parts: Vec<&str> = after
        .trim()
        .trim_end_matches(['.', '!'])
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let (name, line1, line2, town, country) = match parts.as_slice() {
        [name, line1, town, country] => (*name, *line1, "", *town, *country),
        [name, line1, line2, town, country] => (*name, *line1, *line2, *town, *country),
        _ => return None,
    };
    // "N1 7AA London", "75002 Paris": the postcode is the words with digits before the city.
    let words: Vec<&str> = town.split_whitespace().collect();
    let split = words.iter().position(|w| !w.chars().any(|c| c.is_ascii_digit()))?;
    let (postcode, city) = (words[..split].join(" "), words[split..].join(" "));
    if postcode.is_empty() || city.is_empty() {
        return None;
    }
    Some(json!({
        "order_id": order_id, "name": name, "line1": line1, "line2": line2,
        "postcode": postcode, "city": city, "country": country.to_uppercase(),
    }))
}

fn is_order_id(word: &str) -> bool {
    let mut parts = word.splitn(2, '-');
    matches!(
        (parts.next(), parts.next()),
        (Some(letters), Some(digits)) if !letters.is_empty() && letters.chars().all(|c| c.is_ascii_uppercase())
            && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
    )
}

/// The message's first word, lowercased.
fn first_word(message: &str) -> String {
    message
        .trim()
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_lowercase()
}

/// A plain yes, as a model would take one.
fn says_yes(message: &str) -> bool {
    ["yes", "yep", "correct", "confirm", "ja", "oui", "si", "sí"].contains(&first_word(message).as_str())
}

/// A plain no.
fn says_no(message: &str) -> bool {
    ["no", "nope", "nein", "non"].contains(&first_word(message).as_str())
}

/// "I'd like to return the mug of A-1002": `get_order` first, then
/// `start_return` of the order's first item (one, or the number said), with
/// the reason the words give.
fn return_call(customer: &str, this_turn: &[Value], after_tools: bool) -> Option<(&'static str, Value)> {
    let lower = customer.to_lowercase();
    if !["return", "send it back", "send back"]
        .iter()
        .any(|w| lower.contains(w))
        || says_yes(customer)
    {
        return None;
    }
    let order_id = customer
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|word| is_order_id(word))?;
    if called(this_turn, "start_return") {
        return None;
    }
    if !after_tools {
        return Some(("get_order", json!({"order_id": order_id})));
    }
    let order: Value = this_turn
        .iter()
        .rev()
        .filter(|m| m["role"] == "tool")
        .find_map(|m| m["content"].as_str().and_then(|c| serde_json::from_str(c).ok()))?;
    let item = order["items"][0]["name"].as_str()?;
    let quantity = if lower.split_whitespace().any(|word| matches!(word, "two" | "2")) {
        2
    } else {
        1
    };
    let reason = if ["broken", "damaged", "kaputt", "cassé"]
        .iter()
        .any(|w| lower.contains(w))
    {
        "damaged"
    } else if lower.contains("size") || lower.contains("too small") || lower.contains("too big") {
        "wrong_size"
    } else {
        "changed_mind"
    };
    Some((
        "start_return",
        json!({"order_id": order_id, "items": [{"name": item, "quantity": quantity}], "reason": reason}),
    ))
}

/// The arguments of the last call of `tool` the agent proposed (its result
/// asked for the customer's yes).
fn proposed(history: &[Value], tool: &str) -> Option<Value> {
    let confirmed_calls: Vec<&str> = history
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter(|m| {
            m["content"]
                .as_str()
                .and_then(|c| serde_json::from_str::<Value>(c).ok())
                .is_some_and(|c| c["status"] == "confirm")
        })
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    history
        .iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|call| {
            call["function"]["name"] == tool && call["id"].as_str().is_some_and(|id| confirmed_calls.contains(&id))
        })
        .and_then(|call| {
            call["function"]["arguments"]
                .as_str()
                .and_then(|a| serde_json::from_str(a).ok())
        })
}

/// A request the agent cannot serve: an address, a delivery, an account.
fn beyond_refunds(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "address",
        "adresse",
        "dirección",
        "direccion",
        "password",
        "my account",
        "cancel my order",
    ]
    .iter()
    .any(|topic| lower.contains(topic))
}

/// A question about where an order is or whether it came, not a refund.
fn asks_about_the_order(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "where is",
        "where's",
        "has not arrived",
        "hasn't arrived",
        "not arrived yet",
        "status",
        "when will",
        "delivery date",
        "wo ist",
        "où est",
        "dónde está",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// A question about what the shop allows, answered from its help centre.
fn asks_about_the_rules(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "how long",
        "how many days",
        "can i return",
        "can i still",
        "return policy",
        "refund policy",
        "a damaged item",
        "gift",
        "warranty",
        "how fast",
        "policy",
        "wie lange",
        "combien de temps",
        "cuánto tiempo",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// A refund asked for in the shop's own words ("according to your
/// policy"): the local model looks the rules up before it refunds.
fn cites_the_rules(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "according to your",
        "policy says",
        "help centre says",
        "help center says",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// Whether the model called `tool` in `this_turn` already.
fn called(this_turn: &[Value], tool: &str) -> bool {
    this_turn
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .any(|call| call["function"]["name"] == tool)
}

/// What the help centre answered, in words: the best passage and its link,
/// or "not sure" and a person offered.
fn describe_search(found: &Value) -> String {
    match found["results"].as_array().and_then(|results| results.first()) {
        Some(best) => format!(
            "From our help centre: {} (see {}).",
            best["passage"].as_str().unwrap_or_default(),
            best["url"].as_str().unwrap_or_default()
        ),
        None => "I am not sure about that, and I would rather not guess. Would you like me to pass you to a \
                 person from our support team?"
            .to_owned(),
    }
}

/// An order `get_order` found, in words: its status and dates, nothing of its address.
fn describe_order(order: &Value) -> String {
    let id = order["order_id"].as_str().unwrap_or("your order");
    let day = |field: &str| {
        order[field]
            .as_str()
            .and_then(|at| at.get(..10))
            .unwrap_or("?")
            .to_owned()
    };
    let status = match order["status"].as_str() {
        Some("delivered") => format!("was delivered on {}", day("delivered_at")),
        Some("shipped") => format!("is on its way (ordered on {}, not delivered yet)", day("placed_at")),
        Some("placed") => format!("was placed on {} and has not shipped yet", day("placed_at")),
        Some("cancelled") => "was cancelled".to_owned(),
        _ => "has a status I cannot read".to_owned(),
    };
    let refundable = order["refundable_cents"].as_u64().unwrap_or(0);
    format!(
        "Order {id} {status}. {} of it can still be refunded if something is wrong with it.",
        money(refundable)
    )
}

/// The orders an `issue_refund` was made for in the history.
/// What a person of the support team last wrote in the conversation, as
/// the window marks it (only a person's words carry the mark).
fn persons_last_words(history: &[Value]) -> Option<&str> {
    history.iter().rev().filter(|m| m["role"] == "assistant").find_map(|m| {
        m["content"]
            .as_str()?
            .strip_prefix(refund_chat::conversation::person::PERSON_MARK)
    })
}

/// "Any news about my refund?", "has anyone decided?".
fn asks_for_news(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "news",
        "update",
        "heard",
        "any word",
        "what happened",
        "decided",
        "status of my refund",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

fn refunded_orders(history: &[Value]) -> HashSet<String> {
    history
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|call| call["function"]["name"] == "issue_refund")
        .filter_map(|call| {
            let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str()?).ok()?;
            arguments["order_id"].as_str().map(str::to_owned)
        })
        .collect()
}

fn refund_args(order_id: &str, cents: u64) -> Value {
    json!({"order_id": order_id, "amount_cents": cents})
}

/// Words for the customer from every tool result of this turn.
fn summarise_tool_results(messages: &[Value]) -> String {
    let sentences: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|message| {
            let content: Value = message["content"]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null);
            if content["status"] == "handed_off" {
                return "I cannot do that myself, so I have passed this conversation to a person from our support \
                        team, who will take it from here."
                    .to_owned();
            }
            if content["results"].is_array() {
                return describe_search(&content);
            }
            if content["order_id"].is_string() && content["placed_at"].is_string() {
                return describe_order(&content);
            }
            if content["status"] == "confirm" && content["refund"].is_string() {
                return format!(
                    "I can start this {}. Shall I? Answer yes to confirm, and I will start it.",
                    content["summary"].as_str().unwrap_or_default()
                );
            }
            // A model paraphrases what its tools said (contract 36): no
            // internal id, no "ending in", nothing the tool wrote for it.
            if content["status"] == "started" {
                return format!(
                    "Done: your return has started; the refund of {} follows once the parcel arrives.",
                    content["refund"].as_str().unwrap_or_default()
                );
            }
            if content["status"] == "confirm" {
                return "I can change the delivery address to the one you gave me. Is that right? Answer yes to \
                        confirm, and I will make the change."
                    .to_owned();
            }
            if content["status"] == "changed" {
                return "Done: the delivery address is changed.".to_owned();
            }
            if content["status"] == "pending_approval" {
                return "A person from our support team will review this refund and get back to you.".to_owned();
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
                (_, _, Some(error)) => format!("I could not do that: {}.", paraphrase(error)),
                _ => "Something unexpected came back, so a person will check your refund.".to_owned(),
            }
        })
        .collect();
    sentences.join(" ")
}

/// A tool's error in a customer's words, as a model would say it: the
/// facts kept, what the tool told the model to do left out ("tell the
/// customer...", "do not try again"), and a figure in cents dropped.
fn paraphrase(error: &str) -> String {
    const FOR_THE_MODEL: [&str; 8] = [
        "tell the customer",
        "ask the customer",
        "do not",
        "try again",
        "use what you",
        " you ",
        "the conversation has",
        "a person from the",
    ];
    // Clauses end at "; ", ": " and a sentence's ". ", never at a decimal point.
    let clauses = error.replace("; ", "\n").replace(": ", "\n").replace(". ", "\n");
    let kept: Vec<String> = clauses
        .split('\n')
        .map(|clause| clause.trim().trim_end_matches('.'))
        .filter(|clause| !clause.is_empty())
        .filter(|clause| {
            let lower = format!(" {} ", clause.to_lowercase());
            !FOR_THE_MODEL.iter().any(|said| lower.contains(said))
        })
        .map(|clause| match (clause.find(" ("), clause.ends_with("cents)")) {
            (Some(at), true) => clause[..at].to_owned(),
            _ => clause.to_owned(),
        })
        .collect();
    if kept.is_empty() {
        "a person from our support team will look at it".to_owned()
    } else {
        kept.join(", and ")
    }
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

/// The router's labels for `message`, by keyword (contract 21): what a
/// customer asks for, in the order the list names them, at most three; a
/// chargeback, a lawyer or fraud is a high risk.
pub fn route(message: &str) -> Value {
    let said = message.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|word| said.contains(word));
    let mut intents = Vec::new();
    for (intent, words) in [
        (
            "order_status",
            &["where is", "status", "track", "has it shipped", "when will"][..],
        ),
        // As the screen reads four languages, so does the local router; an
        // item that arrived broken is a refund to a model reading it.
        (
            "refund",
            &[
                "refund",
                "money back",
                "charged twice",
                "broken",
                "damaged",
                "torn",
                "erstatt",
                "kaputt",
                "rembours",
                "cassé",
                "reembols",
                "roto",
            ][..],
        ),
        ("return", &["return it", "send it back", "return the", "a return"][..]),
        ("address_change", &["address"][..]),
        (
            "account_access",
            &["password", "log in", "login", "sign in", "my account"][..],
        ),
        (
            "policy_question",
            &["how long", "policy", "how do", "do you", "can i"][..],
        ),
    ] {
        if any(words) && intents.len() < 3 {
            intents.push(intent);
        }
    }
    if intents.is_empty() {
        intents.push("other");
    }
    let risk = if any(&["chargeback", "lawyer", "legal", "dispute", "fraud", "police", "sue you"]) {
        "high"
    } else {
        "low"
    };
    json!({"intents": intents, "risk": risk, "confidence": 0.9})
}

/// The routing call's labels: the newest message's, and, as a model that
/// reads the conversation would, a refund the earlier messages asked for
/// carried on into an answer that only names the order ("It is order
/// A-1002."): the router sees the customer's earlier messages for this.
fn route_conversation(request: &Value) -> Value {
    let said: Vec<&str> = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    let Some((newest, earlier)) = said.split_last() else {
        return route("");
    };
    let mut labels = route(newest);
    let asked_before = route(&earlier.join("\n"));
    let carried_on = asked_before["intents"]
        .as_array()
        .is_some_and(|intents| intents.iter().any(|i| i == "refund"));
    if let Some(intents) = labels["intents"].as_array_mut()
        && carried_on
        && !intents.iter().any(|i| i == "refund")
        && intents.iter().all(|i| i == "order_status" || i == "other")
    {
        intents.retain(|i| i != "other");
        intents.push(json!("refund"));
    }
    labels
}

/// The newest message the customer wrote.
fn newest_customer_message(request: &Value) -> &str {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
}

async fn complete(State(model): State<LocalModel>, Json(request): Json<Value>) -> Response {
    if model.over_the_limit() {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            Json(json!({"error": {"message": "Rate limit reached for requests", "type": "requests"}})),
        )
            .into_response();
    }
    if let Some(latency) = model.latency() {
        tokio::time::sleep(latency).await;
    }
    if request["response_format"]["type"] == "json_schema" {
        // The routing call (contract 21): labels by keyword, never streamed.
        return Json(text(&route_conversation(&request).to_string())).into_response();
    }
    let streamed = request["stream"].as_bool() == Some(true);
    match model.behave(&request) {
        Behaviour::Answer(body) if streamed => model.stream(&body),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    #[test]
    fn a_refund_asked_before_is_carried_into_an_answer_that_names_the_order() {
        let routing = |said: &[&str]| {
            let messages: Vec<Value> = said.iter().map(|text| user(text)).collect();
            route_conversation(&json!({"messages": messages}))["intents"].clone()
        };
        assert_eq!(
            routing(&["My vase arrived broken, please refund 12.50", "It is order A-1002."]),
            json!(["refund"])
        );
        assert_eq!(routing(&["It is order A-1002."]), json!(["other"]));
        for asked in [
            "Meine Tasse aus Bestellung A-1001 kam kaputt an, bitte erstatten Sie 12,50 €.",
            "La commande A-1003 est arrivée cassée, remboursez 5,00 s'il vous plaît.",
            "Por favor reembolse 12,50 del pedido A-1001.",
        ] {
            assert_eq!(routing(&[asked]), json!(["refund"]), "{asked}");
        }
        assert_eq!(
            routing(&["please refund 12.50", "please change the delivery address of A-1002"]),
            json!(["address_change"]),
            "a new request is its own"
        );
    }

    fn assistant(text: &str) -> Value {
        json!({"role": "assistant", "content": text})
    }

    fn refunded(order_id: &str, cents: u64) -> Vec<Value> {
        let arguments = refund_args(order_id, cents).to_string();
        vec![
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "issue_refund", "arguments": arguments}}
            ]}),
            json!({"role": "tool", "tool_call_id": "c0", "content": "{\"refund_id\":\"rf_1\",\"amount_cents\":1}"}),
            assistant("Done."),
        ]
    }

    /// The refund the model asks for after `conversation` (system prompt first), if any.
    fn refund_asked(conversation: Vec<Value>) -> Option<Value> {
        let mut messages = vec![json!({"role": "system", "content": "rules"})];
        messages.extend(conversation);
        match LocalModel::default().behave(&json!({"messages": messages})) {
            Behaviour::Answer(body) => {
                let call = &body["choices"][0]["message"]["tool_calls"][0]["function"];
                call["arguments"].as_str().map(|a| serde_json::from_str(a).unwrap())
            }
            _ => None,
        }
    }

    #[test]
    fn a_tools_error_is_paraphrased_not_echoed() {
        assert_eq!(
            paraphrase("only 5.00 remains refundable on order A-1001 (500 cents); no refund was made"),
            "only 5.00 remains refundable on order A-1001, and no refund was made"
        );
        let said = paraphrase(
            "the order system is unavailable: nothing was written. Ask the customer to try again in a few minutes",
        );
        assert_eq!(said, "the order system is unavailable, and nothing was written");
        for instruction in ["tell the customer", "try again", "cents"] {
            assert!(
                !paraphrase("refunds cannot be made right now (the refund could not be recorded, so no money moved); do not try again and tell the customer that a person from the support team will follow up").contains(instruction),
                "{instruction}"
            );
        }
    }

    #[test]
    fn any_news_is_answered_with_what_a_person_wrote() {
        let note = format!(
            "{}A person approved your refund of 120.00 EUR for order D-4001.",
            refund_chat::conversation::person::PERSON_MARK
        );
        let messages = vec![
            json!({"role": "system", "content": "rules"}),
            user("The sofa from order D-4001 arrived torn, please refund 120.00"),
            assistant("A person from our support team will review this refund."),
            assistant(&note),
            user("Any news about my refund?"),
        ];
        let Behaviour::Answer(body) = LocalModel::default().behave(&json!({"messages": messages})) else {
            panic!("an answer");
        };
        let reply = body["choices"][0]["message"]["content"].as_str().unwrap_or_default();
        assert!(
            reply.contains("A person approved your refund of 120.00 EUR for order D-4001."),
            "{reply}"
        );
        assert!(!reply.contains("[From a person"), "{reply}");
    }

    #[test]
    fn the_answer_to_its_question_completes_the_earlier_message() {
        let conversation = vec![
            user("Please refund 12.50, my mug arrived broken."),
            assistant("I can refund 12.50 for you: which order is it for?"),
            user("It is order A-1001."),
        ];
        assert_eq!(refund_asked(conversation), Some(refund_args("A-1001", 1250)));
    }

    #[test]
    fn a_correction_wins() {
        let conversation = vec![
            user("Order A-1001 arrived broken."),
            assistant("How much should I refund on order A-1001?"),
            user("Sorry, it was A-1003, not A-1001. 8.00 please."),
        ];
        assert_eq!(refund_asked(conversation), Some(refund_args("A-1003", 800)));
    }

    #[test]
    fn the_other_one_is_the_order_not_refunded_yet() {
        let mut conversation = vec![user("Refund A-1001 12.50 and A-1002 8.00 please")];
        conversation.extend(refunded("A-1001", 1250));
        conversation.push(user("Please refund the other one too."));
        assert_eq!(refund_asked(conversation), Some(refund_args("A-1002", 800)));
    }

    #[test]
    fn a_refund_in_the_shops_own_words_looks_the_rules_up_first() {
        let said = "The sofa from order D-4001 arrived torn. According to your policy, please refund 120.00.";
        let next = |messages: &[Value]| {
            let mut all = vec![json!({"role": "system", "content": "rules"})];
            all.extend_from_slice(messages);
            match LocalModel::default().behave(&json!({"messages": all})) {
                Behaviour::Answer(body) => body["choices"][0]["message"].clone(),
                _ => panic!("an answer"),
            }
        };
        let mut turn = vec![user(said)];
        let first = next(&turn);
        assert_eq!(first["tool_calls"][0]["function"]["name"], "search_help_centre");
        turn.push(first);
        turn.push(json!({"role": "tool", "tool_call_id": "c0", "content": r#"{"results": []}"#}));
        let second = next(&turn);
        assert_eq!(second["tool_calls"][0]["function"]["name"], "issue_refund");
        assert_eq!(
            second["tool_calls"][0]["function"]["arguments"],
            refund_args("D-4001", 12000).to_string()
        );
        turn.push(second);
        turn.push(json!({"role": "tool", "tool_call_id": "c1", "content": r#"{"status": "pending_approval", "approval_id": "rr-1"}"#}));
        let answer = next(&turn);
        assert!(answer["tool_calls"].is_null(), "{answer}");
        assert!(
            answer["content"].as_str().unwrap().contains("review this refund"),
            "{answer}"
        );
    }

    #[test]
    fn where_is_my_order_is_looked_up_not_refunded() {
        let mut messages = vec![json!({"role": "system", "content": "rules"})];
        messages.push(user("Where is my order A-1001? It has not arrived yet."));
        let Behaviour::Answer(body) = LocalModel::default().behave(&json!({"messages": messages})) else {
            panic!("an answer");
        };
        let call = &body["choices"][0]["message"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "get_order");
        assert_eq!(call["arguments"], json!({"order_id": "A-1001"}).to_string());
        let shipped = json!({"order_id": "E-5001", "status": "shipped", "placed_at": "2026-11-30T10:00:00Z",
            "delivered_at": null, "refundable_cents": 2500, "ship_to": "address ending in 002"});
        let words = describe_order(&shipped);
        assert!(words.contains("E-5001 is on its way"), "{words}");
        assert!(!words.contains("002"), "{words}");
    }

    #[test]
    fn a_question_about_the_rules_is_searched_and_answered_with_the_link() {
        let mut messages = vec![json!({"role": "system", "content": "rules"})];
        messages.push(user("How long do I have to return a damaged item?"));
        let Behaviour::Answer(body) = LocalModel::default().behave(&json!({"messages": messages})) else {
            panic!("an answer");
        };
        let call = &body["choices"][0]["message"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "search_help_centre");
        let found = json!({"results": [{"article_id": "refunds", "version": "1", "title": "Refunds",
            "url": "https://shop.example/help/refunds", "passage": "You can ask within 30 days."}]});
        let words = describe_search(&found);
        assert!(
            words.contains("30 days") && words.contains("https://shop.example/help/refunds"),
            "{words}"
        );
        assert!(describe_search(&json!({"results": []})).contains("not sure"));
    }

    #[test]
    fn a_refund_in_the_history_is_never_asked_for_again() {
        let mut conversation = vec![user("Refund A-1001 12.50")];
        conversation.extend(refunded("A-1001", 1250));
        conversation.push(user("thanks!"));
        assert_eq!(refund_asked(conversation), None);
    }
}
