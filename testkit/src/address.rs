//! A change of address (contract 26) as the API and EMF tests drive it: a
//! model that calls `change_delivery_address` at the start of every turn,
//! an order system whose A-1004 is `placed`, and a count of the writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::{TestApp, USER, order_json, routed, text, tool_calls};

pub const ADDRESS_ARGS: &str = r#"{"order_id":"A-1004","name":"Ada Lovelace","line1":"12 Rue Byron","line2":"","postcode":"75002","city":"Paris","country":"FR"}"#;
pub const ADDRESS_ASKED: &str =
    "Please change the delivery address of A-1004 to Ada Lovelace, 12 Rue Byron, 75002 Paris, FR";

/// A model that calls the address tool with [`ADDRESS_ARGS`] at the start of every
/// turn, then answers in words.
pub fn address_model(request: &wiremock::Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
    if messages[newest..].iter().any(|m| m["role"] == "tool") {
        return text("Please answer yes to confirm.");
    }
    tool_calls(&[("call_a", "change_delivery_address", ADDRESS_ARGS)])
}

/// The function serving `intents` (`AGENT_INTENTS`), routed as an address
/// change; the count of `POST /orders/A-1004/address` calls.
pub async fn address_shop(intents: &str) -> (TestApp, Arc<AtomicUsize>) {
    address_shop_with(intents, address_model, 200).await
}

/// [`address_shop`] with a model of the test's own, and the order system's
/// write answering `write_status` (200: changed).
pub async fn address_shop_with(
    intents: &str,
    model: impl Fn(&wiremock::Request) -> ResponseTemplate + Send + Sync + 'static,
    write_status: u16,
) -> (TestApp, Arc<AtomicUsize>) {
    address_shop_at(intents, model, write_status, None).await
}

/// [`address_shop_with`], its conversations reached at `conversations`
/// (a proxy in front of moto that may fail some calls) where given.
pub async fn address_shop_at(
    intents: &str,
    model: impl Fn(&wiremock::Request) -> ResponseTemplate + Send + Sync + 'static,
    write_status: u16,
    conversations: Option<String>,
) -> (TestApp, Arc<AtomicUsize>) {
    let intents = intents.to_owned();
    let builder = match conversations {
        Some(endpoint) => TestApp::builder().conversations_at(endpoint),
        None => TestApp::builder(),
    };
    let h = builder
        .router(routed(&["address_change"], "low", 0.95))
        .model_responder(model)
        .orders(move |request: &wiremock::Request| {
            let customer = request
                .headers
                .get("x-customer-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            ResponseTemplate::new(200).set_body_json(order_json("A-1004", customer, "placed", None))
        })
        .configure(move |config| {
            config.router.served = refund_chat::router::Served::parse(&intents).unwrap();
        })
        .build()
        .await;
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    Mock::given(method("POST"))
        .and(path("/orders/A-1004/address"))
        .respond_with(move |request: &wiremock::Request| {
            counted.fetch_add(1, Ordering::SeqCst);
            let key = request
                .headers
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let customer = request
                .headers
                .get("x-customer-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert_eq!(key.len(), 64, "the proposal's key");
            assert_eq!(customer, USER);
            ResponseTemplate::new(write_status).set_body_json(json!({"status": "changed"}))
        })
        .mount(&h.payments)
        .await;
    (h, writes)
}
