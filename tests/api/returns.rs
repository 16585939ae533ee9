//! Contract 28 through the whole function, on moto's tables and a mock
//! order system: a return offered only while it is served, a first message
//! that proposes in code's words and starts nothing, the customer's next
//! message a yes that starts it once with the proposal's key, the label a
//! link in code's line only on `RETURN_LABEL_ORIGINS` and never in what the
//! model reads, and the return kept on the conversation for people to read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use refund_chat_testkit::*;

const RETURN_ARGS: &str = r#"{"order_id":"A-1002","items":[{"name":"Blue mug","quantity":1}],"reason":"changed_mind"}"#;
const LABEL: &str = "https://labels.carrier.example/l/ret_000001?sig=7f3a";

/// A model that calls `start_return` with `arguments` at the start of
/// every turn, then answers in words.
fn return_model(arguments: &'static str) -> impl Fn(&wiremock::Request) -> ResponseTemplate + Send + Sync + 'static {
    move |request: &wiremock::Request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
        if messages[newest..].iter().any(|m| m["role"] == "tool") {
            return text("Here is where your return stands.");
        }
        tool_calls(&[("call_r", "start_return", arguments)])
    }
}

/// The function serving `intents`, routed as a return, linking labels on
/// `label_origins`; A-1002 delivered 3 days ago with two blue mugs; the
/// count of `POST /orders/A-1002/returns` calls.
async fn return_shop(intents: &str, label_origins: &[&str]) -> (TestApp, Arc<AtomicUsize>) {
    return_shop_calling(intents, label_origins, RETURN_ARGS).await
}

/// [`return_shop`] with a model that calls `start_return` with `arguments`.
async fn return_shop_calling(
    intents: &str,
    label_origins: &[&str],
    arguments: &'static str,
) -> (TestApp, Arc<AtomicUsize>) {
    let intents = intents.to_owned();
    let origins: Vec<String> = label_origins.iter().map(|o| (*o).to_owned()).collect();
    let h = TestApp::builder()
        .router(routed(&["return"], "low", 0.95))
        .model_responder(return_model(arguments))
        .orders(move |request: &wiremock::Request| {
            let customer = request
                .headers
                .get("x-customer-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let mut order = order_json("A-1002", customer, "delivered", Some(3));
            order["paid_cents"] = json!(2500);
            order["items"] = json!([{"name": "Blue mug", "quantity": 2, "unit_price_cents": 1250}]);
            ResponseTemplate::new(200).set_body_json(order)
        })
        .configure(move |config| {
            config.router.served = refund_chat::router::Served::parse(&intents).unwrap();
            config.returns.label_origins = origins.clone();
        })
        .build()
        .await;
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    Mock::given(method("POST"))
        .and(path("/orders/A-1002/returns"))
        .respond_with(move |request: &wiremock::Request| {
            counted.fetch_add(1, Ordering::SeqCst);
            let key = request
                .headers
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert_eq!(key.len(), 64, "the proposal's key");
            assert_eq!(
                request.headers.get("x-customer-id").and_then(|v| v.to_str().ok()),
                Some(USER)
            );
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            assert_eq!(
                body,
                json!({"items": [{"name": "Blue mug", "quantity": 1}], "reason": "changed_mind"})
            );
            ResponseTemplate::new(201).set_body_json(json!({"return_id": "ret_000001", "label_url": LABEL,
                "refund_cents": 1250, "expires_at": "2026-12-20T00:00:00Z"}))
        })
        .mount(&h.payments)
        .await;
    (h, writes)
}

const SERVED: &str = "order_status,refund,policy_question,other,return";

#[tokio::test]
async fn a_return_starts_once_after_the_customers_next_yes_with_its_label_apart_from_the_text() {
    let (h, writes) = return_shop(SERVED, &["https://labels.carrier.example"]).await;

    let first = h
        .say(None, "I'd like to return a Blue mug from A-1002, I changed my mind")
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    let conversation = first.conversation_id().to_owned();
    assert_eq!(writes.load(Ordering::SeqCst), 0, "the first call starts nothing");
    let told = tool_content(&tool_messages(h.model_requests().await.last().unwrap())[0]);
    assert_eq!(told["status"], "confirm", "{told}");
    assert!(
        first.reply().ends_with(
            "To confirm: return from order A-1002: 1 × Blue mug, reason: changed my mind; refund of 12.50 EUR once \
             it arrives. Answer yes to start it; anything else starts nothing."
        ),
        "{}",
        first.reply()
    );

    let yes = h.say(Some(&conversation), "Yes please").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert_eq!(writes.load(Ordering::SeqCst), 1, "started once, after the yes");
    // The label travels apart from the text (contract 28): the answer's
    // `label`, and the read's reply of that turn; the text points at it.
    assert!(
        yes.reply().contains("Your return label is below (use it by"),
        "{}",
        yes.reply()
    );
    assert!(!yes.reply().contains("labels.carrier.example"), "{}", yes.reply());
    assert_eq!(yes.body["label"]["url"], LABEL, "{}", yes.raw);
    assert!(yes.body["label"]["expires_at"].is_string(), "{}", yes.raw);
    assert!(first.body.get("label").is_none(), "{}", first.raw);
    let read = h.read(&conversation, "").await;
    let labelled: Vec<(u64, &str)> = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| Some((m["seq"].as_u64()?, m["label"]["url"].as_str()?)))
        .collect();
    assert_eq!(labelled, [(3, LABEL)], "on the yes turn's reply only: {}", read.raw);
    // The model never reads the label's URL: not in any request it got.
    for request in h.model_requests().await {
        assert!(!request.to_string().contains("labels.carrier.example"), "{request}");
    }
    let told = tool_content(tool_messages(h.model_requests().await.last().unwrap()).last().unwrap());
    assert_eq!(told["status"], "started", "{told}");
    assert_eq!(told["return_id"], "ret_000001");

    // Yes again: the proposal was used; the same call is a new question.
    let again = h.say(Some(&conversation), "yes").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(writes.load(Ordering::SeqCst), 1);
    // The history the model reads holds the reply, and no label.
    for request in h.model_requests().await {
        assert!(!request.to_string().contains("labels.carrier.example"), "{request}");
    }

    // What the conversation keeps, and what people read.
    let exchanges = h.exchanges(&conversation).await;
    let outcomes: Vec<Vec<String>> = exchanges
        .iter()
        .map(|e| e.returns.iter().map(|r| r.outcome.clone()).collect())
        .collect();
    assert_eq!(outcomes, [vec!["proposed"], vec!["started"], vec!["proposed"]]);
    assert_eq!(exchanges[1].returns[0].return_id.as_deref(), Some("ret_000001"));
    let printed = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &h.payments.uri(),
        &["conversation", &conversation],
    )
    .await;
    let printed = crate::approvals::stdout(&printed);
    assert!(
        printed.contains("return: A-1002 1 × Blue mug (changed_mind): started ret_000001"),
        "{printed}"
    );
    let sampled = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &h.payments.uri(),
        &["sample", "--quiet-for", "0s"],
    )
    .await;
    let sampled = crate::approvals::stdout(&sampled);
    assert!(
        sampled.contains("returns A-1002:proposed,A-1002:started,A-1002:proposed"),
        "{sampled}"
    );
    let desk = StaffDesk::new(&h.aws, desk_config(&h.table, &h.payments.uri(), &[]));
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), SAM)
        .await;
    let lines = read.body["exchanges"][1]["lines"].to_string();
    assert!(
        lines.contains("return from order A-1002: 1 × Blue mug, reason: changed my mind: started, return ret_000001"),
        "{lines}"
    );
}

#[tokio::test]
async fn a_label_off_the_allowed_origins_is_named_not_linked() {
    let (h, writes) = return_shop(SERVED, &[]).await;
    let first = h.say(None, "return the mug of A-1002 please").await;
    let yes = h.say(Some(first.conversation_id()), "yes").await;
    assert_eq!(writes.load(Ordering::SeqCst), 1);
    assert!(!yes.reply().contains("http"), "{}", yes.reply());
    assert!(yes.body.get("label").is_none(), "named, not linked: {}", yes.raw);
    assert!(
        yes.reply().contains("Its label is return ret_000001"),
        "{}",
        yes.reply()
    );
}

#[tokio::test]
async fn not_served_the_tool_is_never_offered_and_the_conversation_goes_to_a_person() {
    let (h, writes) = return_shop("order_status,refund,policy_question,other", &[]).await;
    let first = h.say(None, "I want to return the mug of A-1002").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body["handed_off"], true, "intent_not_served: {}", first.raw);
    assert!(h.model_requests().await.is_empty(), "no agent call at all");
    let _ = h.say(Some(first.conversation_id()), "yes").await;
    assert_eq!(writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_yes_only_in_the_same_message_never_starts_a_return() {
    let (h, writes) = return_shop(SERVED, &[]).await;
    let answer = h.say(None, "Yes: return a Blue mug of A-1002. Yes, I confirm.").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn what_the_model_named_is_kept_masked_even_when_the_order_holds_no_such_item() {
    const CARD_AS_ITEM: &str =
        r#"{"order_id":"A-1002","items":[{"name":"4111 1111 1111 1111","quantity":1}],"reason":"changed_mind"}"#;
    let (h, writes) = return_shop_calling(SERVED, &[], CARD_AS_ITEM).await;
    let first = h.say(None, "return the mug of A-1002 please").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    assert_eq!(writes.load(Ordering::SeqCst), 0);
    let exchanges = h.exchanges(first.conversation_id()).await;
    let kept = &exchanges[0].returns[0];
    assert_eq!(kept.outcome, "not_on_order");
    let names: Vec<&str> = kept.items.iter().map(|item| item.name.as_str()).collect();
    assert!(!names.concat().contains("4111 1111 1111 1111"), "{names:?}");
    assert!(!format!("{exchanges:?}").contains("4111 1111 1111 1111"));
}
