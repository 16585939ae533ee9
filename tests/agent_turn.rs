//! The whole function, handler to adapters, against mock OpenAI and payments
//! servers on 127.0.0.1. Each test checks what the mocks received (bodies,
//! order, counts) as well as the answer.

mod support;

use std::time::Instant;

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use support::*;
use wiremock::ResponseTemplate;

const REFUND_MESSAGE: &str = "Order A-1001 arrived broken, please refund 12.50";

#[tokio::test]
async fn refund_happy_path() {
    let h = Harness::new(
        vec![
            refund_call("call_1", "A-1001", 1250),
            text("Your 12.50 refund is on its way."),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, json!({"reply": "Your 12.50 refund is on its way."}));
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
    assert_eq!(first["tools"][0]["function"]["name"], "issue_refund");
    assert_eq!(first["tools"][0]["function"]["strict"], true);
    // Derived from the contract's schema; `minLength` would make OpenAI's strict mode answer 400.
    assert_eq!(
        first["tools"][0]["function"]["parameters"],
        *refund_chat::refund_tool::declared_parameters()
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

    let openai_requests = h.openai.received_requests().await.unwrap();
    assert_eq!(openai_requests[0].headers["authorization"], format!("Bearer {API_KEY}"));
    assert!(!answer.raw.contains(API_KEY));
}

#[tokio::test]
async fn plain_reply_without_tools() {
    let h = Harness::new(vec![text("Refunds reach your card in 3 to 5 days.")], receipt()).await;

    let answer = h.chat("How long do refunds take?").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Refunds reach your card in 3 to 5 days.");
    assert_eq!(h.model_requests().await.len(), 1);
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn a_final_message_without_text_is_an_empty_reply() {
    let h = Harness::new(
        vec![completion(json!({"role": "assistant", "content": null}))],
        receipt(),
    )
    .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, json!({"reply": ""}));
}

#[tokio::test]
async fn two_refunds_in_one_message_reach_payments_once() {
    let args_a = json!({"order_id": "A-1001", "amount_cents": 1250}).to_string();
    let args_b = json!({"order_id": "A-1002", "amount_cents": 500}).to_string();
    let h = Harness::new(
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
    let h = Harness::new(
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
        let h = Harness::new(
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
    let h = Harness::new(
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
    let openai = wiremock::MockServer::start().await;
    let script = Script::new(vec![
        refund_call("call_1", "A-1001", 1250),
        refund_call("call_2", "A-1001", 1250),
        text("A person will check."),
    ]);
    wiremock::Mock::given(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(script)
        .mount(&openai)
        .await;
    let app = refund_chat::api::App::new(
        config(&format!("{}/v1", openai.uri()), &payments_base),
        refund_chat::secrets::FixedKey::new(API_KEY),
    )
    .unwrap();
    let h = Harness {
        openai,
        payments: wiremock::MockServer::start().await,
        model_script: Script::new(vec![]),
        app,
    };

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

#[tokio::test]
async fn a_timeout_then_success_answers_after_the_backoff() {
    let h = Harness::new(vec![hang(), text("Hello again.")], receipt()).await;
    let started = Instant::now();

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Hello again.");
    let arrivals = h.model_script.arrivals();
    assert_eq!(arrivals.len(), 2);
    // The first call's timer started after `started`, so the retry cannot come
    // before `started` + timeout + backoff (without the backoff: + timeout only).
    let retry_at = arrivals[1] - started;
    assert!(
        retry_at >= OPENAI_TIMEOUT + BACKOFF,
        "retry came {retry_at:?} after the request"
    );
    assert!(
        started.elapsed() < HANG,
        "the timeout, not the slow server, ended the first call"
    );
    let model = h.model_requests().await;
    assert_eq!(model[0], model[1], "the retry sends the same request");
}

#[tokio::test]
async fn a_timeout_after_a_refund_resumes_without_refunding_again() {
    let h = Harness::new(
        vec![
            refund_call("call_1", "A-1001", 1250),
            hang(),
            refund_call("call_2", "A-1001", 1250),
            text("Refunded once."),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Refunded once.");
    assert_eq!(h.payments_requests().await.len(), 1);
    let model = h.model_requests().await;
    assert_eq!(model.len(), 4);
    assert_eq!(
        model[1], model[2],
        "the retry resends the full history, tool call and receipt included"
    );
    assert_eq!(tool_messages(&model[2])[0]["tool_call_id"], "call_1");
    assert!(
        tool_error(&tool_messages(&model[3])[1])
            .unwrap()
            .contains("already attempted")
    );
}

#[tokio::test]
async fn two_timeouts_answer_504() {
    let h = Harness::new(vec![hang(), hang()], receipt()).await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert!(!answer.detail().is_empty());
    assert_eq!(h.model_requests().await.len(), 2);
}

#[tokio::test]
async fn a_timeout_on_the_fifth_call_answers_502() {
    let invalid = tool_calls(&[("c", "issue_refund", "{}")]);
    let h = Harness::new(
        vec![invalid.clone(), invalid.clone(), invalid.clone(), invalid, hang()],
        receipt(),
    )
    .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(h.model_requests().await.len(), 5);
}

#[tokio::test]
async fn timeouts_on_the_fourth_and_fifth_calls_answer_502() {
    let invalid = tool_calls(&[("c", "issue_refund", "{}")]);
    let h = Harness::new(
        vec![invalid.clone(), invalid.clone(), invalid, hang(), hang()],
        receipt(),
    )
    .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    let arrivals = h.model_script.arrivals();
    assert_eq!(arrivals.len(), 5);
    // Call 4 started after call 3 arrived, so its retry comes at least
    // timeout + backoff after that.
    assert!(
        arrivals[4] - arrivals[2] >= OPENAI_TIMEOUT + BACKOFF,
        "call 5 is the retry of call 4, after the backoff"
    );
}

#[tokio::test]
async fn a_model_that_keeps_asking_for_tools_stops_at_five_calls() {
    let again = || tool_calls(&[("c", "lookup_order", r#"{"order_id":"A-1001"}"#)]);
    let h = Harness::new((0..6).map(|_| again()).collect(), receipt()).await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(h.model_requests().await.len(), 5);
}

#[tokio::test]
async fn a_refund_asked_for_on_the_fifth_call_is_not_executed() {
    let invalid = tool_calls(&[("c", "issue_refund", "{}")]);
    let h = Harness::new(
        vec![
            invalid.clone(),
            invalid.clone(),
            invalid.clone(),
            invalid,
            refund_call("c5", "A-1001", 1250),
        ],
        receipt(),
    )
    .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(h.model_requests().await.len(), 5);
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn cors_origin_is_sent_when_configured() {
    let openai = wiremock::MockServer::start().await;
    let mut config = config(&format!("{}/v1", openai.uri()), "http://127.0.0.1:9");
    config.cors_allow_origin = Some("https://shop.example.com".to_owned());
    let app = refund_chat::api::App::new(config, refund_chat::secrets::FixedKey::new(API_KEY)).unwrap();

    let answer = send_with(&app, load_event("invalid-json.json")).await;

    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.headers["access-control-allow-origin"],
        "https://shop.example.com"
    );
    let without = Harness::new(vec![], receipt())
        .await
        .send(load_event("invalid-json.json"))
        .await;
    assert!(without.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn provider_errors_answer_502_after_one_request() {
    let cases = [
        ("500", ResponseTemplate::new(500).set_body_string("upstream failure")),
        (
            "429",
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "rate limited", "type": "rate_limit_error"}})),
        ),
        (
            "not JSON",
            ResponseTemplate::new(200).set_body_string("<html>proxy</html>"),
        ),
        (
            "no choices",
            ResponseTemplate::new(200).set_body_json(json!({"id": "x", "choices": []})),
        ),
    ];
    for (case, response) in cases {
        let h = Harness::new(vec![response, text("never")], receipt()).await;

        let answer = h.chat("hello").await;

        assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{case}");
        assert_eq!(h.model_requests().await.len(), 1, "{case}: exactly one HTTP request");
        assert!(
            !answer.raw.contains("upstream failure") && !answer.raw.contains("proxy"),
            "{case}: upstream body leaked"
        );
    }
}

#[tokio::test]
async fn bad_input_is_answered_before_any_upstream_call() {
    let long_ok = "é".repeat(4000);
    let too_long = "é".repeat(4001);
    let cases: Vec<(String, StatusCode, &str)> = vec![
        ("".into(), StatusCode::BAD_REQUEST, "missing"),
        ("{not json".into(), StatusCode::BAD_REQUEST, "JSON"),
        ("[1, 2]".into(), StatusCode::BAD_REQUEST, "object"),
        ("\"text\"".into(), StatusCode::BAD_REQUEST, "object"),
        (
            json!({"message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id is required",
        ),
        (
            json!({"user_id": "u-1"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message is required",
        ),
        (
            json!({"user_id": "", "message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id must not be empty",
        ),
        (
            json!({"user_id": "u-1", "message": ""}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message must not be empty",
        ),
        (
            json!({"user_id": 7, "message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id must be a string",
        ),
        (
            json!({"user_id": "u-1", "message": ["hi"]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message must be a string",
        ),
        (
            json!({"user_id": "u-1", "message": too_long}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "at most 4000",
        ),
    ];
    let h = Harness::with_key_source(vec![text("ok")], receipt(), PanickingKey).await;
    for (body, status, detail) in cases {
        let answer = h.post(&body).await;
        assert_eq!(answer.status, status, "{body:.40}");
        assert!(answer.detail().contains(detail), "{body:.40}: {}", answer.detail());
        assert_eq!(answer.headers["x-request-id"], REQUEST_ID);
    }
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());

    let fine = Harness::new(vec![text("ok")], receipt()).await;
    let answer = fine
        .post(&json!({"user_id": "u-1", "message": long_ok}).to_string())
        .await;
    assert_eq!(answer.status, StatusCode::OK, "4000 multi-byte characters are accepted");
}

/// Fails the test if bad input ever gets as far as reading the secret.
struct PanickingKey;

impl refund_chat::secrets::ApiKeySource for PanickingKey {
    async fn fetch(&self) -> Result<refund_chat::secrets::ApiKey, refund_chat::secrets::SecretError> {
        panic!("the secret was read for bad input")
    }
}

#[tokio::test]
async fn routing_by_method_and_path() {
    let h = Harness::new(vec![text("REST reply"), text("v2 reply")], receipt()).await;

    let wrong_method = h.send(load_event("wrong-method.json")).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.headers["allow"], "POST");
    assert!(!wrong_method.detail().is_empty());

    let unknown = h.send(load_event("unknown-path.json")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(!unknown.detail().is_empty());
    assert!(h.model_requests().await.is_empty());

    // REST v1 with the `Prod` stage in the request context's path: still routed.
    let rest = h.send(load_event("question.json")).await;
    assert_eq!(rest.status, StatusCode::OK);
    assert_eq!(rest.reply(), "REST reply");

    let v2 = h.send(load_event("http-api-v2-refund.json")).await;
    assert_eq!(v2.status, StatusCode::OK);
    assert_eq!(v2.reply(), "v2 reply");
    assert_eq!(v2.headers["x-request-id"], REQUEST_ID);
}

#[tokio::test]
async fn an_unreadable_secret_answers_500_and_is_tried_again() {
    let h = Harness::with_key_source(vec![text("second time lucky")], receipt(), FlakyKey::default()).await;

    let first = h.chat("hello").await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!first.raw.contains("AccessDenied"), "{}", first.raw);
    assert!(h.model_requests().await.is_empty());

    let second = h.chat("hello").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.reply(), "second time lucky");
}

/// Fails its first read, then returns the key.
#[derive(Default)]
struct FlakyKey(std::sync::atomic::AtomicUsize);

impl refund_chat::secrets::ApiKeySource for FlakyKey {
    async fn fetch(&self) -> Result<refund_chat::secrets::ApiKey, refund_chat::secrets::SecretError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return Err(refund_chat::secrets::SecretError::Read("AccessDeniedException".into()));
        }
        refund_chat::secrets::parse_secret_string(API_KEY)
    }
}
