//! Customers at their keyboards: new messages, re-sends with the same
//! `Idempotency-Key` (after a 409, a 5xx, at random, or two at once),
//! re-sends without a key, and requests whose body names someone other than
//! the signed-in customer. Every exchange is kept for the checks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use refund_chat_local::runtime_api::RuntimeApi;
use serde_json::{Value, json};

use crate::rng::Rng;

const EVENT: &str = include_str!("../../events/refund.json");

/// The run's customers and their orders.
pub struct Shop {
    pub customers: Vec<String>,
    /// (order id, customer, paid cents)
    pub orders: Vec<(String, String, u64)>,
}

impl Shop {
    pub fn new(seed: u64, customers: usize, orders_each: usize) -> Shop {
        let mut rng = Rng::derived(seed, &[0x5409]);
        let customers: Vec<String> = (0..customers).map(|c| format!("c-{c:02}")).collect();
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
    /// `None` when the invocation failed (no answer from the function).
    pub status: Option<u16>,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Exchange {
    pub fn replayed(&self) -> bool {
        self.headers.get("idempotent-replayed").map(String::as_str) == Some("true")
    }
}

/// A REST API event, signed in (Cognito) as `signed_in`.
fn event(signed_in: &str, body: &str, key: Option<&str>) -> Bytes {
    let mut event: Value = serde_json::from_str(EVENT).unwrap_or(Value::Null);
    event["body"] = Value::String(body.to_owned());
    event["requestContext"]["authorizer"] = json!({"claims": {"sub": signed_in}});
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
    pub next: AtomicUsize,
    pub sent: AtomicUsize,
    pub exchanges: Mutex<Vec<Exchange>>,
}

impl Clients {
    /// Sends one request and keeps the exchange.
    async fn send(&self, index: usize, signed_in: &str, body: &str, key: Option<&str>, marker: &str) -> Exchange {
        self.sent.fetch_add(1, Ordering::SeqCst);
        let (request_id, answer, _) = self.api.invoke_with_id(event(signed_in, body, key)).await;
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
        let exchange = Exchange {
            index,
            request_id,
            signed_in: signed_in.to_owned(),
            key: key.map(str::to_owned),
            marker: marker.to_owned(),
            status: answer["statusCode"].as_u64().map(|s| s as u16),
            headers,
            body: answer["body"].as_str().unwrap_or_default().to_owned(),
        };
        if let Ok(mut exchanges) = self.exchanges.lock() {
            exchanges.push(exchange.clone());
        }
        exchange
    }

    /// One customer's scenario, drawn from the seed and its index.
    async fn scenario(&self, index: usize) {
        let mut rng = Rng::derived(self.seed, &[0xC11E, index as u64]);
        let customer = rng.pick(&self.shop.customers).clone();
        let marker = format!("zq{:012x}", rng.next() & 0xFFFF_FFFF_FFFF);
        let own = self.shop.orders_of(&customer);
        let order = if rng.chance(0.85) {
            (*rng.pick(&own)).to_owned()
        } else {
            rng.pick(&self.shop.orders).0.clone()
        };
        let cents = 300 + rng.below(7_700);
        let message = format!("{marker} please refund {cents} on {order}");
        if rng.chance(0.07) {
            // The body names someone else than the signed-in customer: a 403.
            let other = rng.pick(&self.shop.customers).clone();
            let body = json!({"user_id": other, "message": message}).to_string();
            self.send(index, &customer, &body, None, &marker).await;
            return;
        }
        let body = json!({"user_id": customer, "message": message}).to_string();
        if !rng.chance(0.75) {
            self.send(index, &customer, &body, None, &marker).await;
            if rng.chance(0.08) {
                // The customer sends the message again, without a key: a new request.
                self.send(index, &customer, &body, None, &marker).await;
            }
            return;
        }
        let key = format!("k-{index}-{:08x}", rng.next() as u32);
        let first = if rng.chance(0.1) {
            // A double click: the same key twice at once.
            let (a, _) = tokio::join!(
                self.send(index, &customer, &body, Some(&key), &marker),
                self.send(index, &customer, &body, Some(&key), &marker)
            );
            a
        } else {
            self.send(index, &customer, &body, Some(&key), &marker).await
        };
        let mut last = first.status;
        for _ in 0..2 {
            let resend = matches!(last, Some(409 | 500 | 502 | 503 | 504) | None) || rng.chance(0.15);
            if !resend {
                break;
            }
            last = self.send(index, &customer, &body, Some(&key), &marker).await.status;
        }
    }

    /// Plays scenarios until `requests` requests have been sent.
    pub async fn run(self: Arc<Self>) {
        while self.sent.load(Ordering::SeqCst) < self.requests {
            let index = self.next.fetch_add(1, Ordering::SeqCst);
            self.scenario(index).await;
        }
    }
}
