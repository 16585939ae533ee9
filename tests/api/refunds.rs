//! Refunds through the handler: what reaches payments (body, count), what
//! the model is told, and the one-refund latch within a request.

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

#[tokio::test]
async fn refund_happy_path() {
    let h = TestApp::new(
        vec![
            refund_call("call_1", "A-1001", 1250),
            text("Your 12.50 refund is on its way."),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Your 12.50 refund is on its way.");
    assert!(answer.conversation_id().starts_with("c_"), "{}", answer.raw);
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(answer.headers["x-request-id"], REQUEST_ID);
    assert_eq!(
        h.payments_requests().await,
        vec![json!({"order_id": "A-1001", "amount_cents": 1250, "user_id": "u-1001"})]
    );

    let model = h.model_requests().await;
    assert_eq!(model.len(), 2);
    let first = &model[0];
    assert_eq!(first["model"], "gpt-4o-mini-2024-07-18");
    assert_eq!(first["parallel_tool_calls"], false);
    assert_eq!(
        first["max_completion_tokens"], 1024,
        "every call is bounded (OPENAI_MAX_OUTPUT_TOKENS)"
    );
    assert_eq!(first["tools"][0]["function"]["name"], "issue_refund");
    assert_eq!(first["tools"][0]["function"]["strict"], true);
    // Derived from the contract's schema; `minLength` would make OpenAI's strict mode answer 400.
    assert_eq!(
        first["tools"][0]["function"]["parameters"],
        *refund_chat::refund::tool::declared_parameters()
    );
    assert!(
        first["tools"][0]["function"]["parameters"]["properties"]["order_id"]
            .get("minLength")
            .is_none()
    );
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(first["messages"][1], json!({"role": "user", "content": REFUND_MESSAGE}));

    let second = &model[1]["messages"];
    assert_eq!(second.as_array().unwrap().len(), 4);
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "issue_refund");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
    let receipt: Value = serde_json::from_str(second[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        receipt,
        json!({"refund_id": "rf_42", "status": "succeeded", "amount_cents": 1250})
    );

    let records = h.refund_records().await;
    assert_eq!(records.len(), 1, "one refund record");
    let record = &records[0];
    assert_eq!(attr(record, "state"), Some("executed"));
    assert_eq!(attr(record, "refund_id"), Some("rf_42"));
    assert_eq!(attr(record, "receipt_status"), Some("succeeded"));
    assert_eq!(attr(record, "user_id"), Some("u-1001"));
    assert_eq!(attr(record, "order_id"), Some("A-1001"));
    assert_eq!(record["amount_cents"].as_n().ok().map(String::as_str), Some("1250"));
    assert_eq!(attr(record, "request_id"), Some(REQUEST_ID));
    assert_eq!(record.get("expires_at"), None, "refund records never expire");

    let openai_requests = h.openai.received_requests().await.unwrap();
    assert_eq!(openai_requests[0].headers["authorization"], format!("Bearer {API_KEY}"));
    assert!(!answer.raw.contains(API_KEY));
}

#[tokio::test]
async fn plain_reply_without_tools() {
    let h = TestApp::new(vec![text("Refunds reach your card in 3 to 5 days.")], receipt()).await;

    let answer = h.chat("How long do refunds take?").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Refunds reach your card in 3 to 5 days.");
    assert_eq!(h.model_requests().await.len(), 1);
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn a_final_message_without_text_is_an_empty_reply() {
    let h = TestApp::new(
        vec![completion(json!({"role": "assistant", "content": null}))],
        receipt(),
    )
    .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.body,
        json!({"reply": "", "conversation_id": answer.conversation_id()})
    );
}

#[tokio::test]
async fn two_refunds_in_one_message_reach_payments_once() {
    let args_a = json!({"order_id": "A-1001", "amount_cents": 1250}).to_string();
    let args_b = json!({"order_id": "A-1002", "amount_cents": 500}).to_string();
    let h = TestApp::new(
        vec![
            tool_calls(&[("call_a", "issue_refund", &args_a), ("call_b", "issue_refund", &args_b)]),
            text("One refund made."),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        h.payments_requests().await,
        vec![json!({"order_id": "A-1001", "amount_cents": 1250, "user_id": "u-1001"})]
    );
    let tools = tool_messages(&h.model_requests().await[1]);
    assert_eq!(tools.len(), 2, "every tool call gets its own tool message");
    assert_eq!(
        (tools[0]["tool_call_id"].as_str(), tools[1]["tool_call_id"].as_str()),
        (Some("call_a"), Some("call_b"))
    );
    assert!(tool_error(&tools[0]).is_none());
    assert!(tool_error(&tools[1]).unwrap().contains("already attempted"));
}

#[tokio::test]
async fn a_refund_in_a_later_round_is_refused() {
    let h = TestApp::new(
        vec![
            refund_call("call_1", "A-1001", 1250),
            refund_call("call_2", "A-1001", 1250),
            text("Done."),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(h.payments_requests().await.len(), 1);
    let model = h.model_requests().await;
    assert_eq!(model.len(), 3);
    let tools = tool_messages(&model[2]);
    assert!(tool_error(&tools[1]).unwrap().contains("already attempted"));
}

#[tokio::test]
async fn every_argument_rule_is_a_tool_error_and_a_later_valid_call_still_runs() {
    let cases: [(&str, &str, &str); 11] = [
        ("missing field", "issue_refund", r#"{"order_id":"A-1001"}"#),
        (
            "extra field",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":1250,"reason":"x"}"#,
        ),
        (
            "zero amount",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":0}"#,
        ),
        (
            "negative amount",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":-1250}"#,
        ),
        (
            "string amount",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":"1250"}"#,
        ),
        (
            "fractional amount",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":12.5}"#,
        ),
        (
            "empty order id",
            "issue_refund",
            r#"{"order_id":"","amount_cents":1250}"#,
        ),
        (
            "non-string order id",
            "issue_refund",
            r#"{"order_id":1001,"amount_cents":1250}"#,
        ),
        (
            "malformed JSON",
            "issue_refund",
            r#"{"order_id":"A-1001","amount_cents":"#,
        ),
        ("unknown tool", "cancel_order", r#"{"order_id":"A-1001"}"#),
        ("not an object", "issue_refund", r#"["A-1001",1250]"#),
    ];
    for (case, name, arguments) in cases {
        let h = TestApp::new(
            vec![
                tool_calls(&[("bad", name, arguments)]),
                refund_call("good", "A-1001", 1250),
                text("Done."),
            ],
            receipt(),
        )
        .await;

        let answer = h.chat(REFUND_MESSAGE).await;

        assert_eq!(answer.status, StatusCode::OK, "{case}");
        let model = h.model_requests().await;
        assert_eq!(model.len(), 3, "{case}");
        let error = tool_error(&tool_messages(&model[1])[0]);
        assert!(error.is_some(), "{case}: no tool error");
        assert_eq!(
            h.payments_requests().await,
            vec![json!({"order_id": "A-1001", "amount_cents": 1250, "user_id": "u-1001"})],
            "{case}: only the later valid call reaches payments"
        );
        assert!(
            tool_error(&tool_messages(&model[2])[1]).is_none(),
            "{case}: the valid call got a receipt"
        );
    }
}

/// Every payments failure spends the one attempt: the model is told
/// (`first_error` is in the tool error) and a later call is refused.
async fn assert_payments_failure_spends_the_attempt(payments: ResponseTemplate, case: &str, first_error: &str) {
    let h = TestApp::new(
        vec![
            refund_call("call_1", "A-1001", 1250),
            refund_call("call_2", "A-1001", 1250),
            text("A person will check."),
        ],
        payments,
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK, "{case}");
    assert_eq!(h.payments_requests().await.len(), 1, "{case}");
    let model = h.model_requests().await;
    let error = tool_error(&tool_messages(&model[1])[0]).unwrap();
    assert!(error.contains(first_error), "{case}: {error}");
    assert!(
        tool_error(&tool_messages(&model[2])[1])
            .unwrap()
            .contains("already attempted"),
        "{case}"
    );
}

#[tokio::test]
async fn a_payments_rejection_reaches_the_model_and_spends_the_attempt() {
    let rejection =
        ResponseTemplate::new(409).set_body_json(json!({"detail": "order A-1001 has only 3.00 left to refund"}));
    assert_payments_failure_spends_the_attempt(rejection, "rejection", "order A-1001 has only 3.00 left to refund")
        .await;
}

#[tokio::test]
async fn a_payments_server_error_passes_its_detail_but_not_as_a_refusal() {
    let failure = ResponseTemplate::new(500).set_body_json(json!({"detail": "ledger write failed"}));
    assert_payments_failure_spends_the_attempt(failure.clone(), "500 with detail", "ledger write failed").await;
    assert_payments_failure_spends_the_attempt(failure, "500 with detail", "may or may not").await;
}

#[tokio::test]
async fn a_payments_timeout_counts_as_an_attempt() {
    assert_payments_failure_spends_the_attempt(receipt().set_delay(HANG), "timeout", "may or may not").await;
}

#[tokio::test]
async fn a_success_status_without_a_receipt_counts_as_an_attempt() {
    let not_receipt = ResponseTemplate::new(200).set_body_json(json!({"ok": true}));
    assert_payments_failure_spends_the_attempt(not_receipt, "200 without receipt", "may or may not").await;
    let not_json = ResponseTemplate::new(502).set_body_string("<html>bad gateway</html>");
    assert_payments_failure_spends_the_attempt(not_json, "non-JSON error", "may or may not").await;
}

#[tokio::test]
async fn a_dropped_payments_connection_counts_as_an_attempt() {
    // A server that reads the request and closes the connection without answering.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let payments_base = format!("http://{}", listener.local_addr().unwrap());
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = dropped.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buffer = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buffer).await;
            drop(socket);
        }
    });
    let h = TestApp::builder()
        .model(vec![
            refund_call("call_1", "A-1001", 1250),
            refund_call("call_2", "A-1001", 1250),
            text("A person will check."),
        ])
        .payments_at(payments_base)
        .build()
        .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one connection, no retry"
    );
    let model = h.model_requests().await;
    assert!(
        tool_error(&tool_messages(&model[1])[0])
            .unwrap()
            .contains("may or may not")
    );
    assert!(
        tool_error(&tool_messages(&model[2])[1])
            .unwrap()
            .contains("already attempted")
    );
}
