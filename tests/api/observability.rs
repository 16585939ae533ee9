//! The logs of real turns, captured at TRACE level: every line is JSON with
//! the Lambda request id, the trace tells the turn's story, and neither the
//! API key, an Authorization header nor the customer's message ever appears.

use std::io::Write;
use std::sync::{Arc, Mutex};

use lambda_http::http::StatusCode;
use lambda_http::lambda_runtime::Context;
use lambda_http::lambda_runtime::layers::trace::request_span;
use serde_json::{Value, json};
use tracing::Instrument;
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

/// A message whose every word would be easy to spot in a log.
const CUSTOMER_MESSAGE: &str = "Zanzibar-quokka says: my mug from order A-1001 arrived broken, refund 12.50 please";

#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
            .collect()
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Runs one request through the handler inside the runtime's own request span
/// (as `lambda_runtime` does), with every log line captured at TRACE.
pub(crate) async fn logged_turn<K: refund_chat::secrets::ApiKeySource>(
    h: &TestApp<K>,
    message: &str,
) -> (Answer, Captured) {
    let (captured, _guard, span) = capturing();
    let answer = h.chat(message).instrument(span).await;
    (answer, captured)
}

/// Every log line of this thread captured at TRACE, and the runtime's
/// request span for [`REQUEST_ID`], as `lambda_runtime` makes it.
pub(crate) fn capturing() -> (Captured, tracing::subscriber::DefaultGuard, tracing::Span) {
    let captured = Captured::default();
    let writer = captured.clone();
    let guard =
        tracing::subscriber::set_default(refund_chat::ops::logging::subscriber("trace", move || writer.clone()));
    let mut context = Context::default();
    context.request_id = REQUEST_ID.to_owned();
    (captured, guard, request_span(&context))
}

fn events<'a>(lines: &'a [Value], name: &str) -> Vec<&'a Value> {
    lines.iter().filter(|line| line["event"] == name).collect()
}

fn assert_redacted(captured: &Captured) {
    let text = captured.text();
    assert!(!text.contains(API_KEY), "the API key reached a log line");
    assert!(
        !text.to_lowercase().contains("bearer"),
        "an Authorization header reached a log line"
    );
    assert!(
        !text.contains("Zanzibar-quokka"),
        "the customer's message reached a log line"
    );
    for line in captured.lines() {
        assert_eq!(line["requestId"], REQUEST_ID, "a line without the request id: {line}");
        assert!(line["timestamp"].is_string() && line["level"].is_string(), "{line}");
    }
}

#[tokio::test]
async fn a_refund_turn_is_traced_without_secrets_or_the_message() {
    let h = TestApp::new(
        vec![refund_call("call_1", "A-1001", 1250), text("Refunded.")],
        receipt(),
    )
    .await;

    let (answer, captured) = logged_turn(&h, CUSTOMER_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert_redacted(&captured);
    let lines = captured.lines();

    let request = events(&lines, "request");
    assert_eq!(request.len(), 1);
    assert_eq!(request[0]["message_chars"], CUSTOMER_MESSAGE.chars().count());
    // An unsalted hash of a short message can be reversed by trying guesses.
    assert!(request[0].get("message_sha256_12").is_none(), "{}", request[0]);

    let completions = events(&lines, "completion");
    assert_eq!(completions.len(), 2);
    assert_eq!(
        (completions[0]["call"].as_u64(), completions[1]["call"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(completions[0]["attempt"], 1);
    assert_eq!(completions[0]["outcome"], "ok");
    assert_eq!(completions[0]["finish_reason"], "tool_calls");
    assert_eq!(completions[0]["prompt_tokens"], 120);
    assert!(completions[0]["latency_ms"].as_f64().is_some());

    let tools = events(&lines, "tool_call");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["tool"], "issue_refund");
    assert_eq!(tools[0]["validation"], "ok");
    assert_eq!(tools[0]["order_id"], "A-1001");
    assert_eq!(tools[0]["amount_cents"], 1250);
    assert_eq!(tools[0]["refund_outcome"], "executed");
    assert_eq!(tools[0]["refund_id"], "rf_42");
    assert!(tools[0]["latency_ms"].as_f64().is_some());

    let summary = events(&lines, "summary");
    assert_eq!(summary.len(), 1);
    let summary = summary[0];
    assert_eq!(summary["status"], 200);
    assert_eq!(summary["user_id"], "u-1001");
    assert_eq!(summary["completion_calls"], 2);
    assert_eq!(summary["attempts"], 1);
    assert_eq!(summary["refund_outcome"], "executed");
    assert_eq!(summary["refund_id"], "rf_42");
    assert_eq!(summary["receipt_status"], "succeeded");
    assert_eq!(summary["idempotency"], "none");
    assert_eq!(summary["replayed"], false);
    assert_eq!(summary["total_tokens"], 270);
    let expected_cost = (240.0 * 0.15 + 30.0 * 0.60) / 1_000_000.0;
    assert!(
        (summary["estimated_cost_usd"].as_f64().unwrap() - expected_cost).abs() < 1e-12,
        "{summary}"
    );
    assert_eq!(summary["cold_start"], true);
}

#[tokio::test]
async fn failures_are_traced_with_their_class() {
    let rejection = ResponseTemplate::new(409).set_body_json(json!({"detail": "order A-1001 was refunded in full"}));
    let h = TestApp::new(
        vec![
            tool_calls(&[("c0", "issue_refund", r#"{"order_id":"A-1001"}"#)]),
            refund_call("c1", "A-1001", 1250),
            refund_call("c2", "A-1001", 1250),
            hang(),
            ResponseTemplate::new(500).set_body_string(format!("echo: {CUSTOMER_MESSAGE} {API_KEY}")),
        ],
        rejection,
    )
    .await;

    let (answer, captured) = logged_turn(&h, CUSTOMER_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_redacted(&captured);
    let lines = captured.lines();
    let tools = events(&lines, "tool_call");
    assert_eq!(tools[0]["validation"], "rejected");
    assert_eq!(tools[1]["refund_outcome"], "rejected");
    assert_eq!(tools[1]["rejection_detail"], "order A-1001 was refunded in full");
    assert_eq!(tools[2]["refused_second_refund"], true);
    let completions = events(&lines, "completion");
    assert_eq!(completions[3]["outcome"], "timeout");
    assert_eq!(completions[4]["outcome"], "provider_error");
    assert_eq!(completions[4]["provider_status"], 500);
    let summary = events(&lines, "summary")[0];
    assert_eq!(summary["status"], 502);
    assert_eq!(summary["refund_outcome"], "rejected");
    assert_eq!(summary["refund_failure"], "rejected");
    assert_eq!(summary["second_refunds_refused"], 1);
    assert_eq!(summary["timeouts"], 1);
    assert_eq!(summary["attempts"], 2);
}

#[tokio::test]
async fn a_keyed_turn_and_its_replay_are_traced_without_the_message() {
    let h = TestApp::new(vec![refund_call("c1", "A-1001", 1250), text("Refunded.")], receipt()).await;
    let captured = Captured::default();
    let writer = captured.clone();
    let _guard =
        tracing::subscriber::set_default(refund_chat::ops::logging::subscriber("trace", move || writer.clone()));
    let mut context = Context::default();
    context.request_id = REQUEST_ID.to_owned();

    for _ in 0..2 {
        let answer = h
            .chat_with_key(CUSTOMER_MESSAGE, "key-1")
            .instrument(request_span(&context))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
    }

    assert_redacted(&captured);
    let lines = captured.lines();
    let summaries = events(&lines, "summary");
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0]["idempotency"], "new");
    assert_eq!(summaries[0]["idempotency_settled"], "stored");
    assert_eq!(summaries[0]["refund_outcome"], "executed");
    assert_eq!(summaries[1]["idempotency"], "replayed");
    assert_eq!(summaries[1]["replayed"], true);
    assert_eq!(summaries[1]["completion_calls"], 0);
    assert_eq!(events(&lines, "request")[0]["idempotency_key"], true);
    assert!(
        !captured.text().contains("key-1"),
        "the key is the customer's: not logged either"
    );
}

#[tokio::test]
async fn text_the_model_copied_from_the_customer_never_reaches_a_log_line() {
    // A model can put the customer's words anywhere it writes: a tool's name,
    // an order id, or an argument the schema refuses (which the schema error quotes).
    let words = "Zanzibar-quokka says: my mug arrived broken";
    let h = TestApp::new(
        vec![
            tool_calls(&[
                ("c1", words, "{}"),
                (
                    "c2",
                    "issue_refund",
                    &json!({"order_id": 7, "amount_cents": words}).to_string(),
                ),
            ]),
            tool_calls(&[(
                "c3",
                "issue_refund",
                &json!({"order_id": format!("{words}\u{1b}[2J"), "amount_cents": 1250}).to_string(),
            )]),
            text("Done."),
        ],
        receipt(),
    )
    .await;

    let (answer, captured) = logged_turn(&h, "refund please").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_redacted(&captured);
    assert!(!captured.text().contains("\\u001b"), "no escape sequence either");
    let lines = captured.lines();
    let calls = events(&lines, "tool_call");
    assert_eq!(calls.len(), 3, "every call is still traced: {calls:?}");
    assert_eq!(calls[0]["tool_chars"], words.chars().count(), "{}", calls[0]);
    assert!(calls[1]["schema_failures"].is_string(), "{}", calls[1]);
    assert_eq!(calls[2]["order_id"], "<not an order id>", "{}", calls[2]);
    assert!(calls[2]["order_id_chars"].is_u64(), "{}", calls[2]);
}

#[tokio::test]
async fn a_conversation_is_traced_by_its_id_and_history_never_by_its_text() {
    let h = TestApp::new(
        vec![
            text("Zanzibar-quokka: which order, and how much?"),
            refund_call("c1", "A-1001", 1250),
            text("Refunded."),
        ],
        receipt(),
    )
    .await;
    let first = h.say(None, CUSTOMER_MESSAGE).await;
    let id = first.conversation_id().to_owned();

    let captured = Captured::default();
    let writer = captured.clone();
    let answer = {
        let _guard =
            tracing::subscriber::set_default(refund_chat::ops::logging::subscriber("trace", move || writer.clone()));
        let mut context = Context::default();
        context.request_id = REQUEST_ID.to_owned();
        h.post(&conversation_body("Zanzibar-quokka again: A-1001, 12.50", Some(&id)))
            .instrument(request_span(&context))
            .await
    };

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    // Neither the earlier message, nor the model's earlier words, nor the new message.
    assert_redacted(&captured);
    let lines = captured.lines();
    let summary = events(&lines, "summary")[0];
    assert_eq!(summary["conversation_id"], id.as_str());
    assert_eq!(summary["history_exchanges"], 1);
    assert_eq!(summary["conversation_appended"], "appended");
    assert_eq!(events(&lines, "request")[0]["conversation_id"], id.as_str());
}

#[tokio::test]
async fn a_handoff_is_traced_by_its_reason_and_never_by_the_models_summary() {
    let h = TestApp::new(
        vec![
            tool_calls(&[(
                "h1",
                "hand_off_to_person",
                &json!({"reason": "cannot_help", "summary": "Zanzibar-quokka wants a new address"}).to_string(),
            )]),
            text("A person will take over."),
        ],
        receipt(),
    )
    .await;

    let (answer, captured) = logged_turn(&h, "Zanzibar-quokka: please change my delivery address").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_redacted(&captured);
    let lines = captured.lines();
    assert_eq!(events(&lines, "summary")[0]["handoff"], "cannot_help");
    let call = events(&lines, "tool_call")[0];
    assert_eq!(call["tool"], "hand_off_to_person");
    assert_eq!(call["summary_chars"], 35);
}

#[tokio::test]
async fn a_streamed_turn_runs_in_its_invocations_span_without_secrets_or_the_message() {
    let h = TestApp::new(
        vec![
            streamed_refund_call("call_1", "A-1001", 1250),
            streamed_text("Refunded."),
        ],
        receipt(),
    )
    .await;
    let (captured, _guard, span) = capturing();

    // The turn runs on a task of its own: its lines must still be the invocation's.
    let streamed = h.say_streamed(None, CUSTOMER_MESSAGE, &[]).instrument(span).await;

    assert_eq!(streamed.done().0, 200, "{}", streamed.raw);
    assert_redacted(&captured);
    let lines = captured.lines();
    assert_eq!(events(&lines, "summary").len(), 1, "one summary line");
    assert_eq!(events(&lines, "completion").len(), 2);
}

/// A key that cannot be read: the error is decided before any completion
/// call, so no routing call was made and the summary line names no labels
/// (`unknown` is for a routing call that failed).
#[tokio::test]
async fn a_turn_whose_key_could_not_be_read_reports_no_routing() {
    let h = TestApp::builder()
        .key_source(FlakyKey::default())
        .model(vec![text("never sent")])
        .build()
        .await;

    let (answer, captured) = logged_turn(&h, "hello").await;

    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", answer.raw);
    assert!(h.routing_requests().await.is_empty());
    let lines = captured.lines();
    let summary = events(&lines, "summary")[0];
    assert_eq!(summary["intents"], "", "{summary}");
    assert_eq!(summary["risk"], "", "{summary}");
}
