//! The CloudWatch Embedded Metric Format documents real turns produce.
//! The recorder is process-global, so this binary holds this one test only:
//! the customer's function, the desk's decisions, a rating and a change of
//! address.

use lambda_http::http::StatusCode;
use refund_chat_testkit::*;
use serde_json::{Value, json};

fn flush(collector: &metrics_cloudwatch_embedded::Collector) -> Vec<Value> {
    let mut buffer = Vec::new();
    collector.flush(&mut buffer).unwrap();
    String::from_utf8(buffer)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The value of `metric` in the document whose dimensions include `dimension` (if any).
fn value(documents: &[Value], metric: &str, dimension: Option<(&str, &str)>) -> Option<Value> {
    documents
        .iter()
        .filter(|doc| dimension.is_none_or(|(key, val)| doc[key] == val))
        .find_map(|doc| doc.get(metric).cloned())
}

/// Run on a thread of its own with 8 MiB of stack: polled on one thread, a
/// whole turn through the AWS SDK's debug-build frames (the ledger's
/// transaction under the recorder's) passed a test thread's 2 MiB once the
/// turn grew. Lambda polls the handler on its main thread (8 MiB), and a
/// release build's frames are a fraction of these.
#[test]
fn turns_emit_emf_documents() {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(emitted())
        })
        .expect("a thread")
        .join()
        .expect("the test's thread");
}

async fn emitted() {
    let collector = refund_chat::ops::telemetry::init_metrics().unwrap();
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1250),
            refund_call("c2", "A-1001", 1250),
            text("Refunded."),
            hang(),
            hang(),
            text("Hello."),
            refund_call("c9", "D-4001", 12000),
            text("A person will review it."),
        ],
        receipt(),
    )
    .await;

    let first = h.chat("refund A-1001 12.50").await;
    assert_eq!(first.status, StatusCode::OK);
    let documents = flush(collector);

    for doc in &documents {
        let directive = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "RefundChat");
        assert!(doc["_aws"]["Timestamp"].is_u64());
        assert!(
            directive["Dimensions"][0]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d == "FunctionName")
        );
        for metric in directive["Metrics"].as_array().unwrap() {
            assert!(
                doc.get(metric["Name"].as_str().unwrap()).is_some(),
                "a declared metric has a value"
            );
        }
    }
    assert_eq!(value(&documents, "RefundsExecuted", None), Some(1.into()));
    assert_eq!(value(&documents, "CompletionCalls", None), Some(3.into()));
    assert_eq!(value(&documents, "SecondRefundsRefused", None), Some(1.into()));
    assert_eq!(value(&documents, "ColdStarts", None), Some(1.into()));
    // The router (contract 21): one call, its intent, no failure.
    assert_eq!(value(&documents, "RoutingCalls", None), Some(1.into()));
    assert_eq!(
        value(&documents, "RoutedTurns", Some(("Intent", "refund"))),
        Some(1.into())
    );
    assert_eq!(value(&documents, "RoutingFailures", None), None);
    assert_eq!(
        value(&documents, "Responses", Some(("StatusClass", "2xx"))),
        Some(1.into())
    );
    assert!(
        value(&documents, "TurnDuration", None)
            .unwrap()
            .as_array()
            .is_some_and(|v| v.len() == 1)
    );

    let second = h.chat("hello").await;
    assert_eq!(second.status, StatusCode::GATEWAY_TIMEOUT);
    let documents = flush(collector);
    assert_eq!(value(&documents, "CompletionTimeouts", None), Some(2.into()));
    assert_eq!(
        value(&documents, "Responses", Some(("StatusClass", "5xx"))),
        Some(1.into())
    );
    assert_eq!(
        value(&documents, "ColdStarts", None),
        None,
        "only the first request is a cold start"
    );
    assert_eq!(value(&documents, "RefundsExecuted", None), None);

    let first = h.chat_with_key("hello", "k-1").await;
    let replay = h.chat_with_key("hello", "k-1").await;
    assert_eq!(replay.raw, first.raw);
    let documents = flush(collector);
    assert_eq!(value(&documents, "IdempotentReplays", None), Some(1.into()));

    // Its own invocation: a new refund scope.
    let big = send_as(
        &h.app,
        post_event(&chat_body("refund D-4001 120.00"), &[]),
        "req-big",
        0,
    )
    .await;
    assert_eq!(big.status, StatusCode::OK);
    let documents = flush(collector);
    assert_eq!(value(&documents, "RefundsAwaitingApproval", None), Some(1.into()));
    assert_eq!(value(&documents, "RefundsExecuted", None), None);

    // The desk (contract 24): the queue's oldest wait, and each decision
    // counted by kind, outcome and person (the verified `sub`).
    let desk = StaffDesk::new(&h.aws, desk_config(&h.table, &h.payments.uri(), &[]));
    let queue = desk.get("/support/staff/queue", ANN).await;
    assert_eq!(queue.status, StatusCode::OK, "{}", queue.raw);
    let documents = flush(collector);
    let waits = value(&documents, "StaffQueueOldestWait", None).expect("the queue's oldest wait");
    assert!(waits.as_array().is_some_and(|v| v.len() == 1), "{waits}");
    assert_eq!(
        value(&documents, "StaffDecisions", None),
        None,
        "reading decides nothing"
    );
    let approve = format!(
        "/support/staff/refunds/{}/approve",
        queue.body["approvals"][0]["id"].as_str().unwrap()
    );
    let first = desk.post(&approve, json!({}), "click-1", ANN).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    let second = desk.post(&approve, json!({}), "click-2", BEN).await;
    assert_eq!(second.status, StatusCode::CONFLICT, "{}", second.raw);
    let member = desk.post(&approve, json!({}), "click-3", SAM).await;
    assert_eq!(member.status, StatusCode::FORBIDDEN, "{}", member.raw);
    let documents = flush(collector);
    let decided = |outcome: &str, who: Who| {
        documents
            .iter()
            .filter(|doc| doc["Kind"] == "approve" && doc["Outcome"] == outcome && doc["Person"] == who.sub)
            .find_map(|doc| doc.get("StaffDecisions").cloned())
    };
    assert_eq!(decided("done", ANN), Some(1.into()));
    assert_eq!(decided("already_decided", BEN), Some(1.into()));
    assert_eq!(
        decided("done", SAM).or(decided("already_decided", SAM)),
        None,
        "a refusal at the door is no decision"
    );

    // Contract 30: the customer's answer, counted by outcome and intent.
    let rated = send_as(
        &h.app,
        rating_event(big.conversation_id(), &json!({"solved": false}), Some(USER)),
        "req-rate",
        0,
    )
    .await;
    assert_eq!(rated.status, StatusCode::OK, "{}", rated.raw);
    let documents = flush(collector);
    let ratings = documents
        .iter()
        .filter(|doc| doc["Outcome"] == "not_solved" && doc["Intent"] == "refund")
        .find_map(|doc| doc.get("Ratings").cloned());
    assert_eq!(ratings, Some(1.into()), "{documents:?}");

    // Contract 26: a proposal is no change; the customer's yes writes, counted once.
    let (shop, writes) = address_shop("order_status,refund,policy_question,other,address_change").await;
    let proposed = shop.say(None, ADDRESS_ASKED).await;
    assert_eq!(proposed.status, StatusCode::OK, "{}", proposed.raw);
    assert_eq!(value(&flush(collector), "AddressChanges", None), None);
    let yes = shop.say(Some(proposed.conversation_id()), "yes").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert_eq!(writes.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        value(&flush(collector), "AddressChanges", Some(("Outcome", "changed"))),
        Some(1.into())
    );

    // A router that fails: counted, its turn under `unknown`, the customer answered.
    let failing = TestApp::builder()
        .router(wiremock::ResponseTemplate::new(500))
        .model(vec![text("Hello.")])
        .build()
        .await;
    assert_eq!(failing.chat("hello").await.status, StatusCode::OK);
    let documents = flush(collector);
    assert_eq!(value(&documents, "RoutingCalls", None), Some(1.into()));
    assert_eq!(value(&documents, "RoutingFailures", None), Some(1.into()));
    assert_eq!(
        value(&documents, "RoutedTurns", Some(("Intent", "unknown"))),
        Some(1.into())
    );

    let bad = h.post("{").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        value(&flush(collector), "Responses", Some(("StatusClass", "4xx"))),
        Some(1.into())
    );
}
