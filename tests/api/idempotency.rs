//! The `Idempotency-Key` header end to end (contract 6.3): what reached the
//! model, payments and the table, and what each repeat got back.

use std::time::Duration;

use lambda_http::http::StatusCode;
use refund_chat::clock::now_ms;
use refund_chat::http::idempotency::body_fingerprint;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{RefundLedger, RequestLedger};
use refund_chat::ledger::{RequestLease, StoredResponse};
use refund_chat::refund::message::CustomerMessage;
use refund_chat::refund::money::AmountCents;
use refund_chat::refund::{Attempt, RefundRequest, RefundScope, WriterMark};
use serde_json::json;

use refund_chat_testkit::*;

const KEY: &str = "6f1c2a9e-0d4b-4e5f-9a3b-7c8d9e0f1a2b";

fn request_records(items: &[std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>]) -> usize {
    items
        .iter()
        .filter(|item| attr(item, "kind") == Some("request"))
        .count()
}

#[tokio::test]
async fn a_repeat_is_replayed_byte_for_byte_without_secret_model_or_payments() {
    let h = TestApp::new(
        vec![refund_call("c1", "A-1001", 1250), text("Refunded 12.50.")],
        receipt(),
    )
    .await;

    let first = h.chat_with_key(REFUND_MESSAGE, KEY).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("idempotent-replayed"), None);

    // The repeat lands on another container: it must not need the secret either.
    let other_container = refund_chat::startup::wire(h.app.config().clone(), &h.aws, PanickingKey).unwrap();
    let event = post_event(&chat_body(REFUND_MESSAGE), &[("idempotency-key", KEY)]);
    for app_answer in [
        h.chat_with_key(REFUND_MESSAGE, KEY).await,
        send_as(&other_container, event, "req-2", 0).await,
    ] {
        assert_eq!(app_answer.status, StatusCode::OK);
        assert_eq!(app_answer.raw, first.raw, "byte-identical body");
        assert_eq!(app_answer.header("idempotent-replayed"), Some("true"));
        assert_eq!(app_answer.header("content-type"), Some("application/json"));
    }
    assert_eq!(h.model_requests().await.len(), 2, "one turn: two completion calls");
    assert_eq!(h.payments_requests().await.len(), 1);
    let ledger = h.ledger().await;
    assert_eq!(request_records(&ledger), 1);
    let request = ledger
        .iter()
        .find(|item| attr(item, "kind") == Some("request"))
        .unwrap();
    assert_eq!(attr(request, "state"), Some("completed"));
    assert_eq!(attr(request, "response_body"), Some(first.raw.as_str()));
    assert!(
        request["expires_at"].as_n().is_ok(),
        "request records carry the TTL attribute"
    );
}

#[tokio::test]
async fn the_same_key_while_the_first_runs_is_a_409_and_one_payment() {
    let slow_reply = text("Refunded.").set_delay(Duration::from_millis(300));
    let h = TestApp::new(vec![refund_call("c1", "A-1001", 1250), slow_reply], receipt()).await;

    let first = h.chat_with_key(REFUND_MESSAGE, KEY);
    let second = async {
        // The first has called the model twice: it holds the key and waits on the model.
        h.model_script.arrived(2).await;
        h.chat_with_key(REFUND_MESSAGE, KEY).await
    };
    let (first, second) = tokio::join!(first, second);

    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(second.status, StatusCode::CONFLICT, "{}", second.raw);
    let retry_after: u64 = second.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);
    assert!(!second.detail().is_empty());
    assert_eq!(h.payments_requests().await.len(), 1);
    assert_eq!(h.model_requests().await.len(), 2, "the 409 made no model call");
}

#[tokio::test]
async fn the_same_key_with_another_body_is_a_422_and_calls_nothing() {
    let h = TestApp::new(vec![text("Hello.")], receipt()).await;

    assert_eq!(h.chat_with_key("hello", KEY).await.status, StatusCode::OK);
    let other = h.chat_with_key("refund A-1001 12.50", KEY).await;

    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(other.detail().contains("different request body"), "{}", other.detail());
    assert_eq!(h.model_requests().await.len(), 1);
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn keys_are_per_customer() {
    let h = TestApp::new(vec![text("Hello u-1001."), text("Hello u-2002.")], receipt()).await;

    let a = h.chat_with_key("hello", KEY).await;
    let b = h
        .post_with(
            &json!({"user_id": "u-2002", "message": "hello"}).to_string(),
            &[("idempotency-key", KEY)],
        )
        .await;

    assert_eq!((a.status, b.status), (StatusCode::OK, StatusCode::OK));
    assert_eq!(b.reply(), "Hello u-2002.");
    assert_eq!(b.header("idempotent-replayed"), None);
}

#[tokio::test]
async fn a_malformed_key_is_a_400_before_the_ledger() {
    let h = TestApp::builder().key_source(PanickingKey).build().await;
    let too_long = "k".repeat(256);
    for key in ["", "has space", too_long.as_str(), "naïve"] {
        let mut event = post_event(&chat_body("hello"), &[]);
        event["headers"]["idempotency-key"] = json!(key);
        let answer = h.send(event).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{key:?}");
        assert!(answer.detail().contains("Idempotency-Key"), "{}", answer.detail());
    }
    // Two keys on one request name no single request.
    let mut event = load_event("refund.json");
    event["multiValueHeaders"]["Idempotency-Key"] = json!(["k1", "k2"]);
    assert_eq!(h.send(event).await.status, StatusCode::BAD_REQUEST);
    assert!(h.ledger().await.is_empty());
}

/// The first invocation recorded its refund attempt, maybe paid, then died:
/// its request record is still `in_progress` with a lease in the past.
#[tokio::test]
async fn a_retry_after_a_dead_invocation_takes_over_and_never_pays_again() {
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1250),
            text("A person will confirm your refund."),
        ],
        receipt(),
    )
    .await;
    let ledger = DynamoLedger::from_sdk_config(&h.aws, h.table.clone(), LEDGER_TIMEOUT);
    let scope = RefundScope::for_idempotency_key(USER, KEY);
    let now = now_ms();
    let dead = RequestLease {
        scope: scope.clone(),
        writer: WriterMark::fixed("req-dead/0"),
        body_sha256: body_fingerprint(USER, REFUND_MESSAGE, None),
        lease_until_ms: now - 1,
        expires_at_s: now / 1000 + 3600,
        conversation_id: None,
    };
    ledger.claim_request(&dead, now - 60_000).await.unwrap();
    let dead_attempt = RefundRequest {
        routed: Default::default(),
        attempt: Attempt {
            scope,
            writer: WriterMark::fixed("req-dead/0"),
            conversation: None,
            day_owner: None,
        },
        order_id: "A-1001".into(),
        amount: AmountCents::new(1250),
        message: CustomerMessage::new(REFUND_MESSAGE),
        order: refund_chat::doubles::a_delivered_order(),
    };
    ledger
        .record_automatic(&dead_attempt, &refund_chat::config::DEFAULT_LIMITS, now - 60_000)
        .await
        .unwrap();

    let answer = h.chat_with_key(REFUND_MESSAGE, KEY).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert!(
        h.payments_requests().await.is_empty(),
        "the scope's refund was already attempted"
    );
    let told = tool_error(&tool_messages(&h.model_requests().await[1])[0]).unwrap();
    assert!(told.contains("may or may not have been made"), "{told}");
    let records = h.refund_records().await;
    assert_eq!(records.len(), 1);
    assert_eq!(
        attr(&records[0], "state"),
        Some("executing"),
        "the record is never overwritten"
    );
    assert_eq!(attr(&records[0], "request_id"), Some("req-dead"));
    // The takeover's answer is stored: a refund record exists for the scope.
    assert_eq!(
        h.chat_with_key(REFUND_MESSAGE, KEY).await.header("idempotent-replayed"),
        Some("true")
    );
}

#[tokio::test]
async fn a_live_lease_of_another_invocation_is_not_taken_over() {
    let h = TestApp::builder().key_source(PanickingKey).build().await;
    let ledger = DynamoLedger::from_sdk_config(&h.aws, h.table.clone(), LEDGER_TIMEOUT);
    let now = now_ms();
    let running = RequestLease {
        scope: RefundScope::for_idempotency_key(USER, KEY),
        writer: WriterMark::fixed("req-running/0"),
        body_sha256: body_fingerprint(USER, "hello", None),
        lease_until_ms: now + 30_000,
        expires_at_s: now / 1000 + 3600,
        conversation_id: None,
    };
    ledger.claim_request(&running, now).await.unwrap();

    let answer = h.chat_with_key("hello", KEY).await;

    assert_eq!(answer.status, StatusCode::CONFLICT);
    let retry_after: u64 = answer.header("retry-after").unwrap().parse().unwrap();
    assert!((29..=30).contains(&retry_after), "{retry_after}");
}

#[tokio::test]
async fn a_504_without_a_refund_releases_the_key() {
    let h = TestApp::new(vec![hang(), hang(), text("Hello at last.")], receipt()).await;

    let first = h.chat_with_key("hello", KEY).await;
    assert_eq!(first.status, StatusCode::GATEWAY_TIMEOUT);
    let released: Vec<_> = h
        .ledger()
        .await
        .into_iter()
        .filter(|i| attr(i, "kind") == Some("request"))
        .collect();
    assert_eq!(released.len(), 1);
    assert_eq!(
        attr(&released[0], "state"),
        Some("released"),
        "given back, still naming its body"
    );

    let retry = h.chat_with_key("hello", KEY).await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.reply(), "Hello at last.");
    assert_eq!(retry.header("idempotent-replayed"), None);
    assert_eq!(h.model_requests().await.len(), 3, "the retry ran a new turn");
}

#[tokio::test]
async fn a_504_after_an_executed_refund_is_stored_and_replayed() {
    let h = TestApp::new(vec![refund_call("c1", "A-1001", 1250), hang(), hang()], receipt()).await;

    let first = h.chat_with_key(REFUND_MESSAGE, KEY).await;
    assert_eq!(first.status, StatusCode::GATEWAY_TIMEOUT);

    let retry = h.chat_with_key(REFUND_MESSAGE, KEY).await;
    assert_eq!(retry.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(retry.raw, first.raw);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(h.payments_requests().await.len(), 1);
    assert_eq!(h.model_requests().await.len(), 3);
    assert_eq!(attr(&h.refund_records().await[0], "state"), Some("executed"));
}

#[tokio::test]
async fn an_expired_request_record_counts_as_absent() {
    let h = TestApp::new(vec![text("Fresh answer.")], receipt()).await;
    let ledger = DynamoLedger::from_sdk_config(&h.aws, h.table.clone(), LEDGER_TIMEOUT);
    let now = now_ms();
    let old = RequestLease {
        scope: RefundScope::for_idempotency_key(USER, KEY),
        writer: WriterMark::fixed("req-old/0"),
        body_sha256: body_fingerprint(USER, "another body entirely", None),
        lease_until_ms: now - 90_000_000,
        expires_at_s: now / 1000 - 1,
        conversation_id: None,
    };
    ledger.claim_request(&old, now - 90_000_000).await.unwrap();
    let stored = StoredResponse {
        status: 200,
        body: r#"{"reply":"stale"}"#.into(),
    };
    ledger.complete_request(&old, &stored, now - 90_000_000).await.unwrap();

    // TTL has not deleted it yet (moto never does): the read must see it expired.
    let answer = h.chat_with_key("hello", KEY).await;

    assert_eq!(answer.status, StatusCode::OK, "not a 422 for the old body");
    assert_eq!(answer.reply(), "Fresh answer.");
    assert_eq!(answer.header("idempotent-replayed"), None);
}
