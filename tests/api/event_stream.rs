//! Event-stream mode (contract 20): what is decided before the agent's first
//! completion call stays JSON with its status; from there a `200` stream of
//! `progress`, `delta`, `discard` and one last `done`, whose status and body
//! are JSON mode's, and the money path exactly as in JSON mode.

use std::time::Duration;

use http_body_util::BodyExt;
use lambda_http::http::StatusCode;
use serde_json::Value;

use refund_chat_testkit::*;

/// The body without what two runs never share.
fn comparable(mut body: Value) -> Value {
    if let Some(id) = body.get_mut("conversation_id") {
        *id = Value::String("c_…".into());
    }
    body
}

#[tokio::test]
async fn a_refund_streams_its_steps_and_words_and_done_is_what_json_mode_answers() {
    let reply = "I have refunded 12.50 for order A-1001; it reaches your card in a few days.";
    let streaming = TestApp::new(
        vec![streamed_refund_call("c1", "A-1001", 1250), streamed_text(reply)],
        receipt(),
    )
    .await;
    let json_mode = TestApp::new(vec![refund_call("c1", "A-1001", 1250), text(reply)], receipt()).await;

    let streamed = streaming
        .say_streamed(None, "refund 12.50 for A-1001", &[("idempotency-key", "k-stream")])
        .await;
    let answered = json_mode
        .say_with(None, "refund 12.50 for A-1001", &[("idempotency-key", "k-stream")])
        .await;

    assert_eq!(streamed.status, StatusCode::OK, "{}", streamed.raw);
    assert!(streamed.is_stream(), "{:?}", streamed.headers);
    assert_eq!(streamed.headers["cache-control"], "no-cache");
    assert!(streamed.headers.contains_key("x-request-id"));
    assert_eq!(streamed.steps(), ["refund_check", "payments"]);
    let (status, body) = streamed.done();
    assert_eq!(status, answered.status.as_u16());
    assert_eq!(comparable(body.clone()), comparable(answered.body.clone()));
    assert_eq!(
        streamed.draft(),
        reply,
        "the deltas since the last discard are the reply"
    );
    let deltas = streamed.names().iter().filter(|n| **n == "delta").count();
    assert!(deltas > 3, "the words came in pieces: {:?}", streamed.names());
    // The money path as in JSON mode: one refund, the model asked to stream.
    assert_eq!(streaming.payments_requests().await.len(), 1);
    for request in streaming.model_requests().await {
        assert_eq!(request["stream"], true);
        assert_eq!(request["stream_options"]["include_usage"], true);
    }
    for request in json_mode.model_requests().await {
        assert!(
            request.get("stream").is_none_or(|s| s == false),
            "JSON mode does not stream"
        );
    }

    // A re-send with the key gets the stored answer, as JSON (contract 6.3).
    let again = streaming
        .say_streamed(None, "refund 12.50 for A-1001", &[("idempotency-key", "k-stream")])
        .await;
    assert!(!again.is_stream());
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(serde_json::from_str::<Value>(&again.raw).unwrap(), *body);
    assert_eq!(streaming.payments_requests().await.len(), 1);
}

#[tokio::test]
async fn answers_decided_before_the_turn_stay_json_with_their_status() {
    let h = TestApp::new(vec![], receipt()).await;

    let invalid = h.say_streamed(None, "", &[]).await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(!invalid.is_stream());

    let bad_key = h.say_streamed(None, "hello", &[("idempotency-key", "")]).await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST);

    let screened = h.say_streamed(None, "I want to talk to a person", &[]).await;
    assert_eq!(screened.status, StatusCode::OK);
    assert!(
        !screened.is_stream(),
        "a screened message's fixed reply is JSON: {}",
        screened.raw
    );
    let body: Value = serde_json::from_str(&screened.raw).unwrap();
    assert_eq!(body["handed_off"], true);
    assert!(h.model_requests().await.is_empty(), "no completion call was made");
}

#[tokio::test]
async fn a_stream_that_breaks_off_is_discarded_and_ends_in_a_502_done() {
    let mut chunks = refund_chat_local::completions::chunks(
        &refund_chat_local::completions::text("I have refunded your order in full"),
        1,
        1,
    );
    chunks.truncate(4);
    let cut: String = chunks
        .iter()
        .map(|c| refund_chat_local::completions::event(&c.to_string()))
        .collect();
    let h = TestApp::new(
        vec![wiremock::ResponseTemplate::new(200).set_body_raw(cut, "text/event-stream")],
        receipt(),
    )
    .await;

    let streamed = h.say_streamed(None, "hello", &[]).await;

    assert_eq!(streamed.status, StatusCode::OK, "the stream had begun");
    assert_eq!(streamed.names().first(), Some(&"delta"));
    let (status, body) = streamed.done();
    assert_eq!(status, 502, "{}", streamed.raw);
    assert!(body["detail"].is_string());
    assert_eq!(streamed.draft(), "", "the broken-off words were discarded");
    assert_eq!(h.model_requests().await.len(), 1, "a provider error is not retried");
}

#[tokio::test]
async fn a_quiet_turn_sends_keep_alive_comments() {
    let h = TestApp::builder()
        .model(vec![
            streamed_refund_call("c1", "A-1001", 1250),
            streamed_text("Done.").set_delay(Duration::from_millis(400)),
        ])
        .configure(|config| config.stream_keep_alive = Duration::from_millis(50))
        .build()
        .await;

    let streamed = h.say_streamed(None, "refund 12.50 for A-1001", &[]).await;

    assert!(streamed.keep_alives >= 3, "{}", streamed.raw);
    assert_eq!(streamed.done().0, 200);
}

#[tokio::test]
async fn a_client_that_goes_away_ends_nothing_the_turn_appends_and_the_key_replays() {
    let h = TestApp::builder()
        .model(vec![
            streamed_refund_call("c1", "A-1001", 1250),
            streamed_text("Refunded.").set_delay(Duration::from_millis(200)),
        ])
        .build()
        .await;
    let mut headers = vec![("accept", "text/event-stream"), ("idempotency-key", "k-gone")];
    let event = post_event(&conversation_body("refund 12.50 for A-1001", None), &headers);
    let mut context = lambda_http::lambda_runtime::Context::default();
    context.request_id = fresh_request_id();
    let request = lambda_http::RequestExt::with_lambda_context(
        lambda_http::request::from_str(&event.to_string()).unwrap(),
        context,
    );

    let response = std::sync::Arc::clone(&h.app).answer(request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(first.starts_with(b"event: progress"), "{first:?}");
    drop(body); // the customer closed the tab
    h.app.turns_ended().await;

    assert_eq!(h.payments_requests().await.len(), 1, "the refund was made once");
    headers.retain(|(name, _)| *name != "accept");
    let again = h.say_with(None, "refund 12.50 for A-1001", &headers).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.reply(), "Refunded.");
    assert_eq!(
        h.exchanges(again.conversation_id()).await.len(),
        1,
        "its exchange was appended"
    );
    assert_eq!(h.payments_requests().await.len(), 1);
}

#[tokio::test]
async fn a_stream_without_its_usage_counts_the_turns_reserved_worst_case() {
    let mut chunks = refund_chat_local::completions::chunks(&refund_chat_local::completions::text("Hello."), 2, 4);
    chunks.pop(); // the usage chunk
    let mut body: String = chunks
        .iter()
        .map(|c| refund_chat_local::completions::event(&c.to_string()))
        .collect();
    body.push_str(&refund_chat_local::completions::event("[DONE]"));
    let h = TestApp::builder()
        .model(vec![
            wiremock::ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
        ])
        .configure(|config| {
            config.budget.turn_reservation = 4000;
            config.budget.tokens_per_day = 1_000_000;
        })
        .build()
        .await;

    let streamed = h.say_streamed(None, "hello", &[]).await;

    assert_eq!(streamed.done().0, 200);
    let tokens: Vec<_> = h
        .ledger()
        .await
        .into_iter()
        .filter(|item| attr(item, "pk").is_some_and(|pk| pk.starts_with("budget#tokens#")))
        .collect();
    assert_eq!(tokens[0]["tokens"].as_n().unwrap(), "4000", "the reserved worst case");
}

#[tokio::test]
async fn a_turn_that_times_out_after_the_stream_began_ends_in_a_504_done() {
    let h = TestApp::new(vec![hang(), hang()], receipt()).await;

    let streamed = h.say_streamed(None, "hello", &[]).await;

    assert_eq!(streamed.status, StatusCode::OK, "the stream began at the first call");
    assert_eq!(streamed.names(), ["done"]);
    let (status, body) = streamed.done();
    assert_eq!(status, 504, "{}", streamed.raw);
    assert!(body["detail"].is_string());
    assert_eq!(h.model_requests().await.len(), 2, "the retry, then the end");
}
