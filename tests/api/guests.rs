//! Guests (contract 27): people without an account who proved their e-mail
//! through the guest pool. The authorizer's token makes them `guest:<sub>`;
//! the order system is asked by that e-mail (`X-Customer-Email`) and the
//! e-mail reaches nothing else: no model request, payments call, ledger
//! record, stored exchange or log line. An unverified e-mail is a 401; a
//! guest is served `GUEST_INTENTS`; a guest may claim the conversation they
//! began as a visitor.

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use tracing::Instrument;
use wiremock::{Request, ResponseTemplate};

use crate::observability::capturing;
use refund_chat_testkit::*;

const SUB: &str = "6f1c2b9e-guest";
const GUEST: &str = "guest:6f1c2b9e-guest";
const EMAIL: &str = "Ada.Guest@Example.com";

/// The order system: orders placed with [`EMAIL`] (whatever its case), asked
/// by `X-Customer-Email`; any other e-mail, or a customer id, finds none.
fn orders_of_the_guest(request: &Request) -> ResponseTemplate {
    let email = request
        .headers
        .get("x-customer-email")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !email.eq_ignore_ascii_case(EMAIL) || request.headers.contains_key("x-customer-id") {
        return ResponseTemplate::new(404);
    }
    let order_id = request.url.path().trim_start_matches("/orders/");
    let mut order = order_json(order_id, "", "delivered", Some(1));
    order["customer_id"] = Value::Null;
    order["email"] = json!("ada.guest@example.com");
    ResponseTemplate::new(200).set_body_json(order)
}

fn said(message: &str) -> String {
    json!({"user_id": GUEST, "message": message}).to_string()
}

async fn as_guest(h: &TestApp, verified: &str, body: &str) -> Answer {
    send_as(
        &h.app,
        guest_post_event(SUB, EMAIL, verified, body, &[]),
        &fresh_request_id(),
        0,
    )
    .await
}

/// Every header the order system received, lowercased name: value.
async fn order_headers(h: &TestApp) -> Vec<Vec<(String, String)>> {
    h.payments
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().starts_with("/orders/"))
        .map(|r| {
            r.headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn a_guest_is_refunded_by_the_verified_email_which_reaches_nothing_but_the_order_system() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .model(vec![
            tool_calls(&[("g1", "get_order", r#"{"order_id":"G-5001"}"#)]),
            refund_call("r1", "G-5001", 1250),
            text("Refunded 12.50 EUR."),
        ])
        .build()
        .await;
    let (captured, _guard, span) = capturing();

    let answer = as_guest(
        &h,
        "true",
        &said("my mug from G-5001 arrived broken, refund 12.50 please"),
    )
    .instrument(span)
    .await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let reads = order_headers(&h).await;
    assert_eq!(reads.len(), 2, "get_order, then the refund's own check");
    for headers in &reads {
        assert!(
            headers.contains(&("x-customer-email".into(), EMAIL.into())),
            "{headers:?}"
        );
        assert!(!headers.iter().any(|(name, _)| name == "x-customer-id"), "{headers:?}");
    }
    let payments = h.payments_requests().await;
    assert_eq!(payments.len(), 1, "the guest's refund is made once");
    assert_eq!(payments[0]["user_id"], GUEST, "paid with the guest's user id");
    let email = EMAIL.to_lowercase();
    let everywhere = [
        ("the model", serde_json::to_string(&h.model_requests().await).unwrap()),
        (
            "the routing call",
            serde_json::to_string(&h.routing_requests().await).unwrap(),
        ),
        ("payments", serde_json::to_string(&payments).unwrap()),
        ("the ledger", format!("{:?}", h.ledger().await)),
        (
            "the conversations",
            format!("{:?}", items(&h.aws, &conversation_table(&h.table)).await),
        ),
        ("a log line", captured.text()),
        ("the answer", answer.raw.clone()),
    ];
    for (sink, text) in everywhere {
        assert!(!text.to_lowercase().contains(&email), "the e-mail reached {sink}");
    }
}

#[tokio::test]
async fn a_guest_token_without_a_verified_email_is_a_401_before_any_model_call() {
    let h = TestApp::builder().orders(orders_of_the_guest).build().await;

    for verified in ["false", ""] {
        let answer = as_guest(&h, verified, &said("where is G-5001?")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{verified:?}: {}", answer.raw);
    }
    // The body must name the guest, as section 7 says of a customer.
    let named_otherwise = as_guest(&h, "true", &json!({"user_id": SUB, "message": "hi"}).to_string()).await;
    assert_eq!(named_otherwise.status, StatusCode::FORBIDDEN, "{}", named_otherwise.raw);
    assert!(h.model_requests().await.is_empty());
    assert!(h.orders_requests().await.is_empty());
}

#[tokio::test]
async fn an_order_of_another_email_is_not_found_and_moves_no_money() {
    let h = TestApp::builder()
        // The order system answers with an order of someone else's e-mail.
        .orders(|request: &Request| {
            let order_id = request.url.path().trim_start_matches("/orders/");
            let mut order = order_json(order_id, "", "delivered", Some(1));
            order["email"] = json!("someone.else@example.com");
            ResponseTemplate::new(200).set_body_json(order)
        })
        .model(vec![
            refund_call("r1", "G-5001", 1250),
            text("I could not find that order."),
        ])
        .build()
        .await;

    let answer = as_guest(&h, "true", &said("refund 12.50 for G-5001")).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let told = tool_content(&tool_messages(&h.model_requests().await[1])[0]);
    assert_eq!(told["error"], "no order G-5001 for this customer", "{told}");
    assert!(h.payments_requests().await.is_empty(), "another's order moves no money");
}

/// `GUEST_INTENTS` (default without `address_change`): what the shop serves
/// its customers is not served to a guest unless it says so.
#[tokio::test]
async fn a_guest_is_served_the_guest_intents_only() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .router(routed(&["address_change"], "low", 0.95))
        .model(vec![text("I can change that address.")])
        .configure(|config| {
            config.router.served = refund_chat::router::Served::parse("order_status,refund,address_change").unwrap();
            config.guest_intents = refund_chat::router::Served::parse("order_status,refund").unwrap();
        })
        .build()
        .await;

    let guest = as_guest(&h, "true", &said("please send G-5001 to my new address")).await;
    assert_eq!(guest.status, StatusCode::OK, "{}", guest.raw);
    assert_eq!(guest.body["handed_off"], true, "not a guest's intent: a person");
    assert_eq!(
        h.model_requests().await.len(),
        0,
        "no agent call for an intent a guest is not served"
    );

    let customer = h.chat("please send A-1001 to my new address").await;
    assert_eq!(customer.status, StatusCode::OK, "{}", customer.raw);
    assert_ne!(
        customer.body["handed_off"], true,
        "a customer is served it: {}",
        customer.raw
    );
}

/// One conversation throughout: a visitor asks, proves their e-mail, and the
/// guest claims the conversation and goes on in it.
#[tokio::test]
async fn a_guest_claims_the_conversation_begun_as_a_visitor_and_goes_on_in_it() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .router(routed(&["order_status"], "low", 0.95))
        .model(vec![
            tool_calls(&[("g1", "get_order", r#"{"order_id":"G-5001"}"#)]),
            text("G-5001 was delivered yesterday."),
        ])
        .build()
        .await;
    let asked = send_as(
        &h.app,
        visitor_post_event(
            &json!({"message": "where is my order G-5001?"}).to_string(),
            "203.0.113.9",
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    assert!(asked.body["verify"]["intents"].is_array(), "{}", asked.raw);
    assert!(h.orders_requests().await.is_empty(), "a visitor reads no order");
    let token = asked.body["visitor"].as_str().unwrap().to_owned();
    let id = asked.conversation_id().to_owned();

    let mut claim = guest_post_event(SUB, EMAIL, "true", "{}", &[("x-visitor-token", &token)]);
    let path = format!("/support/refund-chat/conversations/{id}/claim");
    claim["rawPath"] = json!(path);
    claim["requestContext"]["http"]["path"] = json!(path);
    let claimed = send_as(&h.app, claim, &fresh_request_id(), 0).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.raw);

    let again = as_guest(
        &h,
        "true",
        &json!({"user_id": GUEST, "message": "where is my order G-5001?", "conversation_id": id}).to_string(),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    assert_eq!(again.conversation_id(), id, "the same conversation");
    assert_eq!(h.orders_requests().await, vec!["/orders/G-5001".to_owned()]);
    let header = conversation_header(&h, &id).await;
    assert_eq!(header["claimed_by"].as_s().unwrap(), GUEST);
    assert!(
        !format!("{header:?}").to_lowercase().contains("example.com"),
        "no e-mail in the claim"
    );
}

async fn conversation_header(
    h: &TestApp,
    id: &str,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| item.get("claimed_by").is_some() && format!("{item:?}").contains(id))
        .expect("the conversation's header")
}
