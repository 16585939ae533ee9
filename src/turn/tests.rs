//! The turn against in-memory stand-ins, with tokio's clock paused: durations
//! are the contract's real ones (20 s calls, 2 s backoff), asserted exactly,
//! and the tests still finish at once.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::chat::{Completion, CompletionError, Message, ToolCall};
use crate::refund::{Receipt, RefundError, RefundRequest};

const CALL_TIMEOUT: Duration = Duration::from_secs(20);
const BACKOFF: Duration = Duration::from_secs(2);

enum Step {
    Reply(Completion),
    Timeout,
    Status(u16),
}

/// Plays a script of completion results and records what each call was sent, and when.
struct ScriptedModel {
    steps: Mutex<VecDeque<Step>>,
    calls: Mutex<Vec<(Instant, Vec<Message>)>>,
}

impl ScriptedModel {
    fn new(steps: Vec<Step>) -> Self {
        ScriptedModel {
            steps: Mutex::new(steps.into()),
            calls: Mutex::new(Vec::new()),
        }
    }
    fn calls(&self) -> Vec<(Instant, Vec<Message>)> {
        self.calls.lock().unwrap().clone()
    }
}

impl ChatModel for ScriptedModel {
    async fn complete(&self, messages: &[Message]) -> Result<Completion, CompletionError> {
        self.calls.lock().unwrap().push((Instant::now(), messages.to_vec()));
        let step = self
            .steps
            .lock()
            .unwrap()
            .pop_front()
            .expect("the model was called more often than scripted");
        match step {
            Step::Reply(completion) => Ok(completion),
            Step::Timeout => {
                tokio::time::sleep(CALL_TIMEOUT).await;
                Err(CompletionError::Timeout)
            }
            Step::Status(status) => Err(CompletionError::Status { status }),
        }
    }
}

/// Answers every refund with the same result and records each request.
struct RecordingPayments {
    result: Result<Receipt, RefundError>,
    requests: Mutex<Vec<RefundRequest>>,
}

impl RecordingPayments {
    fn answering(result: Result<Receipt, RefundError>) -> Self {
        RecordingPayments {
            result,
            requests: Mutex::new(Vec::new()),
        }
    }
    fn requests(&self) -> Vec<RefundRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl RefundGateway for RecordingPayments {
    async fn refund(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        self.requests.lock().unwrap().push(request.clone());
        self.result.clone()
    }
}

fn receipt() -> Receipt {
    Receipt {
        refund_id: "rf_1".into(),
        status: "succeeded".into(),
        amount_cents: 1250,
    }
}

fn text(reply: &str) -> Step {
    Step::Reply(Completion {
        content: Some(reply.into()),
        ..Completion::default()
    })
}

fn tools(calls: &[(&str, &str, &str)]) -> Step {
    Step::Reply(Completion {
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        ..Completion::default()
    })
}

const REFUND_ARGS: &str = r#"{"order_id":"A-1","amount_cents":1250}"#;

async fn run(
    model: &ScriptedModel,
    payments: &RecordingPayments,
) -> (Result<String, TurnError>, TurnStats, Vec<Message>) {
    let mut turn = Turn::new(model, payments, BACKOFF, "user-7", "refund A-1, 12.50");
    let result = turn.run().await;
    (result, turn.stats().clone(), turn.messages().to_vec())
}

fn tool_contents(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_refund_runs_once_with_the_requests_user_id() {
    let model = ScriptedModel::new(vec![tools(&[("c1", TOOL_NAME, REFUND_ARGS)]), text("Done.")]);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Done.");
    assert_eq!(
        payments.requests(),
        vec![RefundRequest {
            order_id: "A-1".into(),
            amount_cents: 1250,
            user_id: "user-7".into()
        }]
    );
    assert_eq!(stats.completion_calls, 2);
    assert_eq!(
        stats.refund,
        RefundOutcome::Executed {
            refund_id: "rf_1".into(),
            amount_cents: 1250
        }
    );
    let receipt_json: serde_json::Value = serde_json::from_str(&tool_contents(&messages)[0]).unwrap();
    assert_eq!(
        receipt_json,
        serde_json::json!({"refund_id": "rf_1", "status": "succeeded", "amount_cents": 1250})
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_retried_after_the_backoff_with_the_same_history() {
    let model = ScriptedModel::new(vec![Step::Timeout, text("Hello.")]);
    let payments = RecordingPayments::answering(Ok(receipt()));
    let start = Instant::now();

    let (result, stats, _) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Hello.");
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].0 - start,
        CALL_TIMEOUT + BACKOFF,
        "retry must wait 1 x backoff after the timeout"
    );
    assert_eq!(
        calls[0].1, calls[1].1,
        "the retry resends exactly what the timed-out call sent"
    );
    assert_eq!((stats.attempts, stats.timeouts), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_refund_resumes_the_turn_without_refunding_again() {
    let model = ScriptedModel::new(vec![
        tools(&[("c1", TOOL_NAME, REFUND_ARGS)]),
        Step::Timeout,
        tools(&[("c2", TOOL_NAME, REFUND_ARGS)]),
        text("Refunded once."),
    ]);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Refunded once.");
    assert_eq!(payments.requests().len(), 1);
    let calls = model.calls();
    assert_eq!(
        calls[1].1, calls[2].1,
        "the retry resends the assistant tool call and the receipt"
    );
    assert!(
        calls[2]
            .1
            .iter()
            .any(|m| matches!(m, Message::Tool { tool_call_id, .. } if tool_call_id == "c1"))
    );
    assert!(tool_contents(&messages)[1].contains("already attempted"));
    assert_eq!(stats.second_refunds_refused, 1);
}

#[tokio::test(start_paused = true)]
async fn two_timeouts_end_the_turn_as_timed_out() {
    let model = ScriptedModel::new(vec![Step::Timeout, Step::Timeout]);
    let payments = RecordingPayments::answering(Ok(receipt()));
    let start = Instant::now();

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::TimedOut)), "{result:?}");
    assert_eq!(stats.completion_calls, 2);
    assert_eq!(start.elapsed(), CALL_TIMEOUT * 2 + BACKOFF);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_on_the_fifth_call_exhausts_the_budget_without_backoff() {
    let invalid = r#"{"order_id":""}"#;
    let mut steps: Vec<Step> = (0..4)
        .map(|i| tools(&[(["c1", "c2", "c3", "c4"][i], TOOL_NAME, invalid)]))
        .collect();
    steps.push(Step::Timeout);
    let model = ScriptedModel::new(steps);
    let payments = RecordingPayments::answering(Ok(receipt()));
    let start = Instant::now();

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::BudgetExhausted)), "{result:?}");
    assert_eq!(stats.completion_calls, 5);
    assert_eq!(start.elapsed(), CALL_TIMEOUT, "no backoff after the fifth call");
}

#[tokio::test(start_paused = true)]
async fn timeouts_on_the_fourth_and_fifth_calls_exhaust_the_budget() {
    let invalid = "not json";
    let model = ScriptedModel::new(vec![
        tools(&[("c1", TOOL_NAME, invalid)]),
        tools(&[("c2", TOOL_NAME, invalid)]),
        tools(&[("c3", TOOL_NAME, invalid)]),
        Step::Timeout,
        Step::Timeout,
    ]);
    let payments = RecordingPayments::answering(Ok(receipt()));
    let start = Instant::now();

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::BudgetExhausted)), "{result:?}");
    assert_eq!((stats.completion_calls, stats.attempts), (5, 2));
    assert_eq!(start.elapsed(), CALL_TIMEOUT * 2 + BACKOFF);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_keeps_asking_for_tools_stops_after_five_calls() {
    let steps = (0..5).map(|_| tools(&[("c", "lookup_order", "{}")])).collect();
    let model = ScriptedModel::new(steps);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::BudgetExhausted)), "{result:?}");
    assert_eq!(stats.completion_calls, 5);
    assert_eq!(model.calls().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn tool_calls_of_the_fifth_call_are_not_executed() {
    let invalid = r#"{"order_id":""}"#;
    let mut steps: Vec<Step> = (0..4).map(|_| tools(&[("c", TOOL_NAME, invalid)])).collect();
    steps.push(tools(&[("c5", TOOL_NAME, REFUND_ARGS)]));
    let model = ScriptedModel::new(steps);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::BudgetExhausted)), "{result:?}");
    assert!(
        payments.requests().is_empty(),
        "a refund nobody would be told about must not run"
    );
    assert_eq!(stats.refund, RefundOutcome::NotAttempted);
}

#[tokio::test(start_paused = true)]
async fn a_provider_error_is_not_retried() {
    let model = ScriptedModel::new(vec![Step::Status(503)]);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, _) = run(&model, &payments).await;

    assert!(
        matches!(
            result,
            Err(TurnError::Provider(CompletionError::Status { status: 503 }))
        ),
        "{result:?}"
    );
    assert_eq!(stats.completion_calls, 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_refund_attempt_still_spends_the_latch() {
    let model = ScriptedModel::new(vec![
        tools(&[("c1", TOOL_NAME, REFUND_ARGS)]),
        tools(&[("c2", TOOL_NAME, r#"{"order_id":"A-2","amount_cents":100}"#)]),
        text("Sorry."),
    ]);
    let payments = RecordingPayments::answering(Err(RefundError::Timeout));

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Sorry.");
    assert_eq!(payments.requests().len(), 1);
    assert_eq!(stats.refund, RefundOutcome::Failed { class: "timeout" });
    let contents = tool_contents(&messages);
    assert!(contents[0].contains("may or may not have been made"), "{}", contents[0]);
    assert!(contents[1].contains("already attempted"), "{}", contents[1]);
}

#[tokio::test(start_paused = true)]
async fn invalid_calls_do_not_spend_the_latch() {
    let model = ScriptedModel::new(vec![
        tools(&[
            ("c1", TOOL_NAME, r#"{"order_id":"A-1","amount_cents":0}"#),
            ("c2", TOOL_NAME, REFUND_ARGS),
        ]),
        text("Done."),
    ]);
    let payments = RecordingPayments::answering(Ok(receipt()));

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Done.");
    assert_eq!(payments.requests().len(), 1);
    assert_eq!(stats.invalid_tool_calls, 1);
    let contents = tool_contents(&messages);
    assert!(contents[0].starts_with(r#"{"error":"#), "{}", contents[0]);
    assert!(contents[1].contains("rf_1"), "{}", contents[1]);
}

#[test]
fn worst_case_is_the_contracts_112_seconds() {
    let worst = worst_case_duration(CALL_TIMEOUT, BACKOFF, Duration::from_secs(10));
    assert_eq!(worst, Duration::from_secs(112));
}
