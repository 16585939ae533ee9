//! Timeouts and provider errors through the real OpenAI adapter: what a
//! timeout, a retry and the budget look like on the wire, and which status
//! each ends in. (The exact timings are asserted with a paused clock in
//! `src/turn/tests.rs`.)

use std::time::Instant;

use lambda_http::http::StatusCode;
use serde_json::json;
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

#[tokio::test]
async fn a_timed_out_call_is_retried_with_the_same_request() {
    let h = TestApp::new(vec![hang(), text("Hello again.")], receipt()).await;
    let started = Instant::now();

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.reply(), "Hello again.");
    let arrivals = h.model_script.arrivals();
    assert_eq!(arrivals.len(), 2);
    assert!(
        started.elapsed() < HANG,
        "the timeout, not the slow server, ended the first call"
    );
    let model = h.model_requests().await;
    assert_eq!(model[0], model[1], "the retry sends the same request");
}

#[tokio::test]
async fn a_timeout_after_a_refund_resumes_without_refunding_again() {
    let h = TestApp::new(
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
    let h = TestApp::new(vec![hang(), hang()], receipt()).await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert!(!answer.detail().is_empty());
    assert_eq!(h.model_requests().await.len(), 2);
}

#[tokio::test]
async fn a_timeout_on_the_fifth_call_answers_502() {
    let invalid = tool_calls(&[("c", "issue_refund", "{}")]);
    let h = TestApp::new(
        vec![invalid.clone(), invalid.clone(), invalid.clone(), invalid, hang()],
        receipt(),
    )
    .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(h.model_requests().await.len(), 5);
}

#[tokio::test]
async fn a_model_that_keeps_asking_for_tools_stops_at_five_calls() {
    let again = || tool_calls(&[("c", "lookup_order", r#"{"order_id":"A-1001"}"#)]);
    let h = TestApp::new((0..6).map(|_| again()).collect(), receipt()).await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(h.model_requests().await.len(), 5);
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
        let h = TestApp::new(vec![response, text("never")], receipt()).await;

        let answer = h.chat("hello").await;

        assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{case}");
        assert_eq!(h.model_requests().await.len(), 1, "{case}: exactly one HTTP request");
        assert!(
            !answer.raw.contains("upstream failure") && !answer.raw.contains("proxy"),
            "{case}: upstream body leaked"
        );
    }
}
