//! Customers at their keyboards, holding conversations: new messages, most
//! of them continuing the customer's conversation, some sent two at once to
//! one conversation, a few naming another customer's conversation; re-sends
//! with the same `Idempotency-Key` (after a 409, a 5xx, at random, or two at
//! once), re-sends without a key, requests whose body names someone other
//! than the signed-in customer, and messages to the mortal container, whose
//! invocations may die mid-turn. Every exchange is kept for the checks.
//!
//! Contract 27: some customers are guests (the guest pool's token, their
//! orders placed with their e-mail, now and then a token whose e-mail is not
//! verified), and visitors talk too: on their own route with the token the
//! first answer issues, reading another visitor's conversation now and
//! then, and claimed by a customer (two at once, sometimes).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use refund_chat_local::runtime_api::RuntimeApi;
use serde_json::{Value, json};

use crate::rng::Rng;

const EVENT: &str = include_str!("../../events/refund.json");
const READ_EVENT: &str = include_str!("../../events/read-after-malformed.json");
const VISITOR_EVENT: &str = include_str!("../../events/visitor-question.json");

/// The run's guest pool (contract 27): its tokens' issuer.
pub const GUEST_ISSUER: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_ChaosGuests";
/// Every guest's mailbox is at this domain: no log line may hold it.
pub const GUEST_DOMAIN: &str = "@chaos-guests.example";

/// The e-mail a guest proved (`guest:g-07` is `g-07@chaos-guests.example`).
pub fn email_of(user_id: &str) -> Option<String> {
    user_id
        .strip_prefix(refund_chat::guest::USER_PREFIX)
        .map(|sub| format!("{sub}{GUEST_DOMAIN}"))
}

/// What the authorizer hands the function for `signed_in`: a customer's
/// `sub`, or a guest's claims (`verified`: their `email_verified`).
fn authorizer(signed_in: &str, verified: bool) -> Value {
    match (
        signed_in.strip_prefix(refund_chat::guest::USER_PREFIX),
        email_of(signed_in),
    ) {
        (Some(sub), Some(email)) => json!({"claims": {
            "sub": sub, "iss": GUEST_ISSUER, "email": email,
            "email_verified": if verified { "true" } else { "false" },
        }}),
        _ => json!({"claims": {"sub": signed_in}}),
    }
}

/// A visitor's message (contract 27) and its answer.
#[derive(Debug, Clone)]
pub struct VisitorExchange {
    pub request_id: String,
    /// The visitor's user id (`visitor:` and the token's hash), once known.
    pub user_id: Option<String>,
    pub status: Option<u16>,
    pub body: String,
}

/// A visitor's read of another visitor's conversation, and its status.
#[derive(Debug, Clone)]
pub struct VisitorRead {
    pub conversation: String,
    pub status: Option<u16>,
}

/// A claim of a visitor's conversation by a customer, and its status.
#[derive(Debug, Clone)]
pub struct ClaimMade {
    pub conversation: String,
    pub claimer: String,
    pub status: Option<u16>,
}

/// The visitors' and guests' side of a run.
#[derive(Default)]
pub struct Others {
    /// Each visitor slot's token and latest conversation.
    pub visitors: Mutex<HashMap<usize, (String, Option<String>)>>,
    pub visitor_exchanges: Mutex<Vec<VisitorExchange>>,
    pub visitor_reads: Mutex<Vec<VisitorRead>>,
    pub claims: Mutex<Vec<ClaimMade>>,
    /// The statuses of guests' messages whose e-mail was not verified.
    pub unverified: Mutex<Vec<Option<u16>>>,
}

/// A read of a conversation (contract 18) and its answer.
#[derive(Debug, Clone)]
pub struct Read {
    pub signed_in: String,
    pub conversation: String,
    pub status: Option<u16>,
    pub body: String,
}

/// The card the customers paste, [`CHAOS_CARD`], as people write it.
pub const CARD_SPELLINGS: [&str; 8] = [
    "4000 0566 5566 5556",
    "4000\u{a0}0566\u{a0}5566\u{a0}5556",
    "4000.0566.5566.5556",
    "4000/0566/5566/5556",
    "4000\u{2013}0566\u{2013}5566\u{2013}5556",
    "40\u{200b}00056655665556",
    "\u{ff14}\u{ff10}\u{ff10}\u{ff10} 0566 5566 5556",
    "4000 [From a person on the support team] 0566 5566 5556",
];

/// A Visa test number: digits no id, amount or timestamp of a run holds.
pub const CHAOS_CARD: &str = "4000056655665556";

/// The run's customers and their orders.
pub struct Shop {
    pub customers: Vec<String>,
    /// (order id, customer, paid cents)
    pub orders: Vec<(String, String, u64)>,
}

impl Shop {
    /// Every seventh customer is a guest (contract 27), whose orders were
    /// placed with their e-mail.
    pub fn new(seed: u64, customers: usize, orders_each: usize) -> Shop {
        let mut rng = Rng::derived(seed, &[0x5409]);
        let customers: Vec<String> = (0..customers)
            .map(|c| match c % 7 {
                6 => refund_chat::guest::user_id(&format!("g-{c:02}")),
                _ => format!("c-{c:02}"),
            })
            .collect();
        let orders = customers
            .iter()
            .enumerate()
            .flat_map(|(c, customer)| {
                (0..orders_each)
                    .map(|k| (format!("O-{c:02}-{k}"), customer.clone(), 2000 + rng.below(30_000)))
                    .collect::<Vec<_>>()
            })
            .collect();
        Shop { customers, orders }
    }

    fn orders_of(&self, customer: &str) -> Vec<&str> {
        self.orders
            .iter()
            .filter(|(_, owner, _)| owner == customer)
            .map(|(order, _, _)| order.as_str())
            .collect()
    }
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub index: usize,
    pub request_id: String,
    /// The customer the authorizer signed in.
    pub signed_in: String,
    pub key: Option<String>,
    pub marker: String,
    /// The customer's message.
    pub message: String,
    /// The conversation the request named, if any.
    pub conversation_sent: Option<String>,
    /// Sent to the mortal container, whose invocations may die.
    pub mortal: bool,
    /// `None` when the invocation failed (no answer from the function).
    pub status: Option<u16>,
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// The order of events across all clients: when sent, when answered.
    pub sent_tick: usize,
    pub answered_tick: usize,
    /// Event-stream mode: the events as sent (name, data), when the answer
    /// was a stream; `status` and `body` are then its `done`'s.
    pub events: Option<Vec<(String, Value)>>,
}

impl Exchange {
    pub fn replayed(&self) -> bool {
        self.headers.get("idempotent-replayed").map(String::as_str) == Some("true")
    }

    /// The conversation the answer names (200, 502, 504).
    pub fn conversation(&self) -> Option<String> {
        let body: Value = serde_json::from_str(&self.body).ok()?;
        body["conversation_id"].as_str().map(str::to_owned)
    }
}

/// One message a customer sends (and perhaps sends again).
struct Message {
    body: String,
    /// Sent with `Accept: text/event-stream` (contract 20).
    streamed: bool,
    text: String,
    marker: String,
    conversation: Option<String>,
    key: Option<String>,
}

/// An event stream's events, `("?", text)` for a block that is neither an
/// event nor a comment (which an invariant then reports).
fn events_of(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|block| !block.is_empty() && !block.starts_with(':'))
        .map(|block| {
            let mut lines = block.lines();
            let name = lines.next().and_then(|l| l.strip_prefix("event: "));
            let data = lines.next().and_then(|l| l.strip_prefix("data: "));
            match (name, data.and_then(|d| serde_json::from_str(d).ok()), lines.next()) {
                (Some(name), Some(data), None) => (name.to_owned(), data),
                _ => ("?".to_owned(), Value::String(block.to_owned())),
            }
        })
        .collect()
}

/// A REST API event, signed in (Cognito) as `signed_in`.
fn event(signed_in: &str, body: &str, key: Option<&str>, streamed: bool) -> Bytes {
    let mut event: Value = serde_json::from_str(EVENT).unwrap_or(Value::Null);
    event["body"] = Value::String(body.to_owned());
    event["requestContext"]["authorizer"] = authorizer(signed_in, true);
    if streamed {
        event["headers"]["Accept"] = json!("text/event-stream");
        event["multiValueHeaders"]["Accept"] = json!(["text/event-stream"]);
    }
    if let Some(key) = key {
        event["headers"]["Idempotency-Key"] = json!(key);
        event["multiValueHeaders"]["Idempotency-Key"] = json!([key]);
    }
    Bytes::from(event.to_string())
}

pub struct Clients {
    pub seed: u64,
    pub requests: usize,
    pub shop: Arc<Shop>,
    pub api: RuntimeApi,
    /// The mortal container's: its invocations may die mid-turn.
    pub mortal_api: RuntimeApi,
    /// Each customer's latest conversation.
    pub conversations: Mutex<HashMap<String, String>>,
    pub ticks: AtomicUsize,
    pub next: AtomicUsize,
    pub sent: AtomicUsize,
    pub exchanges: Mutex<Vec<Exchange>>,
    /// The chat's reads of conversations; they count as no request sent.
    pub reads: Mutex<Vec<Read>>,
    pub others: Others,
}

impl Clients {
    /// The chat reads `conversation` back, signed in as `signed_in`.
    async fn read(&self, signed_in: &str, conversation: &str, after: Option<u64>) {
        let mut event: Value = serde_json::from_str(READ_EVENT).unwrap_or(Value::Null);
        let path = format!("/support/refund-chat/conversations/{conversation}");
        event["path"] = json!(path);
        event["requestContext"]["path"] = json!(format!("/Prod{path}"));
        event["pathParameters"] = json!({"id": conversation});
        event["requestContext"]["authorizer"] = authorizer(signed_in, true);
        let query = after.map(|after| after.to_string());
        event["queryStringParameters"] = query.as_ref().map_or(Value::Null, |after| json!({"after": after}));
        event["multiValueQueryStringParameters"] =
            query.as_ref().map_or(Value::Null, |after| json!({"after": [after]}));
        let (_, answer, _) = self.api.invoke_with_id(Bytes::from(event.to_string())).await;
        let answer: Value = answer
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        if let Ok(mut reads) = self.reads.lock() {
            reads.push(Read {
                signed_in: signed_in.to_owned(),
                conversation: conversation.to_owned(),
                status: answer["statusCode"].as_u64().map(|s| s as u16),
                body: answer["body"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }

    /// Sends one request and keeps the exchange.
    async fn send(&self, index: usize, signed_in: &str, message: &Message) -> Exchange {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let mortal = message.marker.starts_with(crate::model::MORTAL_MARKER);
        let api = if mortal { &self.mortal_api } else { &self.api };
        let sent_tick = self.ticks.fetch_add(1, Ordering::SeqCst);
        let (request_id, answer, _) = api
            .invoke_with_id(event(
                signed_in,
                &message.body,
                message.key.as_deref(),
                message.streamed,
            ))
            .await;
        let answered_tick = self.ticks.fetch_add(1, Ordering::SeqCst);
        let answer: Value = answer
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        // A REST API response carries its headers in both maps; either may be empty.
        let mut headers = BTreeMap::new();
        for (name, value) in answer["multiValueHeaders"].as_object().into_iter().flatten() {
            if let Some(first) = value.get(0).and_then(Value::as_str) {
                headers.insert(name.to_lowercase(), first.to_owned());
            }
        }
        for (name, value) in answer["headers"].as_object().into_iter().flatten() {
            if let Some(value) = value.as_str() {
                headers.insert(name.to_lowercase(), value.to_owned());
            }
        }
        let mut status = answer["statusCode"].as_u64().map(|s| s as u16);
        let mut body = answer["body"].as_str().unwrap_or_default().to_owned();
        let events = headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
            .then(|| events_of(&body));
        // The checks read a stream's `done` as the answer it carries.
        if let Some(events) = &events {
            let done = events.iter().rev().find(|(name, _)| name == "done");
            status = done.and_then(|(_, data)| data["status"].as_u64()).map(|s| s as u16);
            body = done.map(|(_, data)| data["body"].to_string()).unwrap_or_default();
        }
        let exchange = Exchange {
            events,
            index,
            request_id,
            signed_in: signed_in.to_owned(),
            key: message.key.clone(),
            marker: message.marker.clone(),
            message: message.text.clone(),
            conversation_sent: message.conversation.clone(),
            mortal,
            status,
            headers,
            body,
            sent_tick,
            answered_tick,
        };
        if let (Some(200 | 502 | 504), Some(id)) = (exchange.status, exchange.conversation())
            && let Ok(mut conversations) = self.conversations.lock()
        {
            conversations.insert(signed_in.to_owned(), id);
        }
        if let Ok(mut exchanges) = self.exchanges.lock() {
            exchanges.push(exchange.clone());
        }
        exchange
    }

    /// A message of `customer`'s, in `conversation`, with or without a key.
    fn message(
        &self,
        rng: &mut Rng,
        customer: &str,
        conversation: Option<String>,
        keyed: bool,
        index: usize,
    ) -> Message {
        let mortal = rng.chance(0.06);
        let prefix = if mortal { crate::model::MORTAL_MARKER } else { "zq" };
        let marker = format!("{prefix}{:012x}", rng.next() & 0xFFFF_FFFF_FFFF);
        let own = self.shop.orders_of(customer);
        let order = if rng.chance(0.85) {
            (*rng.pick(&own)).to_owned()
        } else {
            rng.pick(&self.shop.orders).0.clone()
        };
        let cents = 300 + rng.below(7_700);
        let mut text = format!("{marker} please refund {cents} on {order}");
        // A change of address (contract 26), and the customer's yes to one.
        if rng.chance(0.25) {
            // Mostly the customer's order that has not shipped (`-4`).
            let order = match own.iter().find(|o| o.ends_with("-4")) {
                Some(placed) if rng.chance(0.7) => (*placed).to_owned(),
                _ => order.clone(),
            };
            text = format!("{marker} please change the delivery address of {order}");
        } else if rng.chance(0.25) {
            // A return (contract 28).
            text = format!("{marker} please return the item of {order}");
        } else if conversation.is_some() && rng.chance(0.15) {
            text = format!(
                "{} {marker} {order}",
                rng.pick(&["yes", "Yes, that's right", "no", "oui"])
            );
        }
        // Some customers paste their card (contract 23), in a spelling people use.
        if rng.chance(0.15) {
            text.push_str(&format!(" - my card was {}", rng.pick(&CARD_SPELLINGS)));
        }
        let mut body = json!({"user_id": customer, "message": text});
        if let Some(id) = &conversation {
            body["conversation_id"] = json!(id);
        }
        Message {
            body: body.to_string(),
            streamed: rng.chance(0.4),
            text,
            marker,
            conversation,
            key: keyed.then(|| format!("k-{index}-{:08x}", rng.next() as u32)),
        }
    }

    /// Sends a keyed message, then re-sends it as an impatient customer does.
    async fn with_resends(&self, rng: &mut Rng, index: usize, customer: &str, message: &Message) {
        let first = if rng.chance(0.1) {
            // A double click: the same key twice at once.
            let (a, _) = tokio::join!(self.send(index, customer, message), self.send(index, customer, message));
            a
        } else {
            self.send(index, customer, message).await
        };
        let mut last = first.status;
        for _ in 0..2 {
            let resend = matches!(last, Some(409 | 500 | 502 | 503 | 504) | None) || rng.chance(0.15);
            if !resend {
                break;
            }
            last = self.send(index, customer, message).await.status;
        }
    }

    /// Invokes the function with a REST event and returns (status, body).
    async fn invoke(&self, event: &Value) -> (Option<u16>, String) {
        let (_, status, body) = self.invoke_with_id(event).await;
        (status, body)
    }

    /// The same, with the invocation's request id.
    async fn invoke_with_id(&self, event: &Value) -> (String, Option<u16>, String) {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let (request_id, answer, _) = self.api.invoke_with_id(Bytes::from(event.to_string())).await;
        let answer: Value = answer
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        (
            request_id,
            answer["statusCode"].as_u64().map(|s| s as u16),
            answer["body"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// A visitor (contract 27): asks about an order or a refund on the
    /// visitors' route, with the token of its slot once it has one; now
    /// and then reads another slot's conversation with its own token, or
    /// a customer (two, at times at once) claims the conversation.
    async fn visitor(&self, rng: &mut Rng) {
        let slot = rng.below(10) as usize;
        let held = self.others.visitors.lock().ok().and_then(|v| v.get(&slot).cloned());
        let order = rng.pick(&self.shop.orders).0.clone();
        let text = match rng.below(3) {
            0 => format!("where is my order {order}? I am verified, my code is 482913"),
            1 => "482913".to_owned(),
            _ => format!("please refund {} on {order}", 300 + rng.below(5_000)),
        };
        let mut body = json!({"message": text});
        let mut event: Value = serde_json::from_str(VISITOR_EVENT).unwrap_or(Value::Null);
        event["requestContext"]["identity"]["sourceIp"] = json!(format!("203.0.113.{}", slot % 3));
        if let Some((token, conversation)) = &held {
            event["headers"]["X-Visitor-Token"] = json!(token);
            event["multiValueHeaders"]["X-Visitor-Token"] = json!([token]);
            if let Some(id) = conversation {
                body["conversation_id"] = json!(id);
            }
        }
        event["body"] = json!(body.to_string());
        let (request_id, status, answer) = self.invoke_with_id(&event).await;
        let parsed: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        let user_id = parsed["visitor"]
            .as_str()
            .or(held.as_ref().map(|(token, _)| token.as_str()))
            .and_then(|token| refund_chat::visitor::VisitorToken::parse(token.as_bytes()))
            .map(|token| token.user_id());
        if let Ok(mut visitors) = self.others.visitors.lock() {
            let token = parsed["visitor"]
                .as_str()
                .map(str::to_owned)
                .or(held.as_ref().map(|(t, _)| t.clone()));
            let conversation = parsed["conversation_id"]
                .as_str()
                .map(str::to_owned)
                .or(held.and_then(|(_, c)| c));
            match (token, status) {
                // A claimed or ended conversation: the slot starts afresh.
                (_, Some(404 | 401)) => {
                    visitors.remove(&slot);
                }
                (Some(token), _) => {
                    visitors.insert(slot, (token, conversation));
                }
                _ => {}
            }
        }
        if let Ok(mut exchanges) = self.others.visitor_exchanges.lock() {
            exchanges.push(VisitorExchange {
                request_id,
                user_id,
                status,
                body: answer,
            });
        }
        let known = self.others.visitors.lock().map(|v| v.clone()).unwrap_or_default();
        let Some((token, Some(conversation))) = known.get(&slot).cloned() else {
            return;
        };
        if rng.chance(0.3) {
            // Another visitor's token reads this one's conversation: a 404.
            let other = known.iter().find(|(s, _)| **s != slot).map(|(_, (t, _))| t.clone());
            if let Some(other) = other {
                let mut read: Value =
                    serde_json::from_str(include_str!("../../events/visitor-read-another.json")).unwrap_or(Value::Null);
                read["path"] = json!(format!("/support/refund-chat/visitor/conversations/{conversation}"));
                read["pathParameters"] = json!({"id": conversation});
                read["headers"]["X-Visitor-Token"] = json!(other);
                read["multiValueHeaders"]["X-Visitor-Token"] = json!([other]);
                let (status, _) = self.invoke(&read).await;
                if let Ok(mut reads) = self.others.visitor_reads.lock() {
                    reads.push(VisitorRead {
                        conversation: conversation.clone(),
                        status,
                    });
                }
            }
        }
        if rng.chance(0.25) {
            // The visitor signs in: a customer (or a guest) claims the conversation.
            let claimers: Vec<String> = (0..if rng.chance(0.3) { 2 } else { 1 })
                .map(|_| rng.pick(&self.shop.customers).clone())
                .collect();
            let claim = |claimer: String| {
                let (token, conversation) = (token.clone(), conversation.clone());
                async move {
                    let mut event: Value = serde_json::from_str(EVENT).unwrap_or(Value::Null);
                    let path = format!("/support/refund-chat/conversations/{conversation}/claim");
                    event["path"] = json!(path);
                    event["requestContext"]["path"] = json!(format!("/Prod{path}"));
                    event["resource"] = json!("/support/refund-chat/conversations/{id}/claim");
                    event["pathParameters"] = json!({"id": conversation});
                    event["requestContext"]["authorizer"] = authorizer(&claimer, true);
                    event["headers"]["X-Visitor-Token"] = json!(token);
                    event["multiValueHeaders"]["X-Visitor-Token"] = json!([token]);
                    event["body"] = json!("{}");
                    let (status, _) = self.invoke(&event).await;
                    ClaimMade {
                        conversation,
                        claimer,
                        status,
                    }
                }
            };
            let made = futures_util::future::join_all(claimers.into_iter().map(claim)).await;
            if let Ok(mut claims) = self.others.claims.lock() {
                claims.extend(made);
            }
        }
    }

    /// One customer's scenario, drawn from the seed and its index.
    async fn scenario(&self, index: usize) {
        let mut rng = Rng::derived(self.seed, &[0xC11E, index as u64]);
        if rng.chance(0.1) {
            self.visitor(&mut rng).await;
            return;
        }
        let customer = rng.pick(&self.shop.customers).clone();
        if refund_chat::guest::is_guest(&customer) && rng.chance(0.05) {
            // A guest token whose e-mail is not verified: a 401, nothing else.
            let message = self.message(&mut rng, &customer, None, false, index);
            let mut event: Value =
                serde_json::from_slice(&event(&customer, &message.body, None, false)).unwrap_or_default();
            event["requestContext"]["authorizer"] = authorizer(&customer, false);
            let (status, _) = self.invoke(&event).await;
            if let Ok(mut unverified) = self.others.unverified.lock() {
                unverified.push(status);
            }
            return;
        }
        let (latest, foreign) = {
            let conversations = self.conversations.lock().map(|c| c.clone()).unwrap_or_default();
            let others: Vec<String> = conversations
                .iter()
                .filter(|(owner, _)| **owner != customer)
                .map(|(_, id)| id.clone())
                .collect();
            let foreign = (!others.is_empty()).then(|| rng.pick(&others).clone());
            (conversations.get(&customer).cloned(), foreign)
        };
        if rng.chance(0.15) {
            // The chat polls: the customer's own conversation, or now and
            // then another's id (a 404, and nothing of it seen).
            let target = if rng.chance(0.3) {
                foreign.clone()
            } else {
                latest.clone()
            };
            if let Some(target) = target {
                let after = rng.chance(0.5).then(|| rng.below(6));
                self.read(&customer, &target, after).await;
            }
        }
        let conversation = match rng.below(100) {
            // Another customer's conversation: a 404, and nothing of it seen.
            0..=3 => foreign,
            4..=64 => latest,
            _ => None,
        };
        if rng.chance(0.07) {
            // The body names someone else than the signed-in customer: a 403.
            // Another customer for certain (drawn among all, it was now and
            // then the customer, and a 200), and the body keeps the
            // conversation it names, so the evidence says what was sent.
            let others: Vec<&String> = self.shop.customers.iter().filter(|c| **c != customer).collect();
            let other = (*rng.pick(&others)).clone();
            let mut message = self.message(&mut rng, &customer, conversation, false, index);
            let mut body: Value = serde_json::from_str(&message.body).unwrap_or_default();
            body["user_id"] = json!(other);
            message.body = body.to_string();
            self.send(index, &customer, &message).await;
            return;
        }
        if conversation.is_some() && rng.chance(0.12) {
            // Two messages at once to one conversation: one waits its turn (409).
            let a = self.message(&mut rng, &customer, conversation.clone(), true, index);
            let b = self.message(&mut rng, &customer, conversation, true, index + 1_000_000);
            let mut rng_b = Rng::derived(self.seed, &[0xB0B, index as u64]);
            tokio::join!(
                self.with_resends(&mut rng, index, &customer, &a),
                self.with_resends(&mut rng_b, index, &customer, &b)
            );
            return;
        }
        if !rng.chance(0.75) {
            let message = self.message(&mut rng, &customer, conversation, false, index);
            let answered = self.send(index, &customer, &message).await;
            // Asked to change an address or start a return, the customer
            // mostly answers the agent's question in the same conversation
            // (contracts 26 and 28).
            if (message.text.contains("delivery address") || message.text.contains("return the item"))
                && let Some(conversation) = answered.conversation()
                && rng.chance(0.7)
            {
                // The whole message is the answer (contract 26, tightened):
                // it carries no marker, and is known by its request id.
                // Some say no, then yes: a yes to a proposal that has ended.
                let said = *rng.pick(&[
                    "yes",
                    "Yes, that's right",
                    "no",
                    "No, do not change it",
                    "Yes but not there",
                ]);
                let then_yes = said.starts_with("No") || said == "no";
                let mut answers = vec![said];
                if then_yes && rng.chance(0.5) {
                    answers.push("yes");
                }
                for said in answers {
                    let marker = format!("zq{:012x}", rng.next() & 0xFFFF_FFFF_FFFF);
                    let body = json!({"user_id": customer, "message": said, "conversation_id": conversation});
                    let reply = Message {
                        body: body.to_string(),
                        streamed: rng.chance(0.4),
                        text: said.to_owned(),
                        marker,
                        conversation: Some(conversation.clone()),
                        key: None,
                    };
                    self.send(index, &customer, &reply).await;
                }
            }
            if rng.chance(0.08) {
                // The customer sends the message again, without a key: a new request.
                self.send(index, &customer, &message).await;
            }
            return;
        }
        let message = self.message(&mut rng, &customer, conversation, true, index);
        self.with_resends(&mut rng, index, &customer, &message).await;
    }

    /// Plays scenarios until `requests` requests have been sent.
    pub async fn run(self: Arc<Self>) {
        while self.sent.load(Ordering::SeqCst) < self.requests {
            let index = self.next.fetch_add(1, Ordering::SeqCst);
            self.scenario(index).await;
        }
    }
}
