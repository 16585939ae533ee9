//! The turn against in-memory stand-ins, with tokio's clock paused: durations
//! are the contract's real ones (20 s calls, 2 s backoff), asserted exactly,
//! and the tests still finish at once.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::chat::{CompletionError, Message};
use crate::doubles::{AnyOrder, RecordingRefunds, ScriptedModel, Step, a_delivered_order, shipped_help_centre};
use crate::refund::money::AmountCents;
use crate::refund::tool::TOOL_NAME;
use crate::refund::{Attempt, Receipt, RefundError, RefundOutcome, RefundRequest, RefundScope, WriterMark};

const CALL_TIMEOUT: Duration = Duration::from_secs(20);
const BACKOFF: Duration = Duration::from_secs(2);

fn receipt() -> RefundOutcome {
    RefundOutcome::Executed(Receipt {
        refund_id: "rf_1".into(),
        status: "succeeded".into(),
        amount_cents: AmountCents::new(1250),
    })
}

fn text(reply: &str) -> Step {
    Step::text(reply)
}

fn tools(calls: &[(&str, &str, &str)]) -> Step {
    Step::tools(calls)
}

fn timeout() -> Step {
    Step::Timeout(CALL_TIMEOUT)
}

fn context() -> Attempt {
    Attempt {
        scope: RefundScope::for_request("user-7", "req-1"),
        writer: WriterMark::fixed("req-1/w"),
        conversation: None,
        day_owner: None,
    }
}

const REFUND_ARGS: &str = r#"{"order_id":"A-1","amount_cents":1250}"#;

fn with_tools(refunds: &RecordingRefunds) -> Ports<'_, RecordingRefunds, AnyOrder> {
    Ports {
        refunds,
        orders: &AnyOrder,
        help: shipped_help_centre(),
    }
}

async fn run(
    model: &ScriptedModel,
    payments: &RecordingRefunds,
) -> (Result<String, TurnError>, TurnStats, Vec<Message>) {
    let message = CustomerMessage::new("refund A-1, 12.50");
    let mut turn = Turn::new(model, with_tools(payments), BACKOFF, context(), Vec::new(), &message);
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
    let payments = RecordingRefunds::answering(receipt());

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Done.");
    assert_eq!(
        payments.requests(),
        vec![RefundRequest {
            routed: Default::default(),
            attempt: Attempt {
                scope: RefundScope::for_request("user-7", "req-1"),
                writer: WriterMark::fixed("req-1/w"),
                conversation: None,
                day_owner: None,
            },
            order_id: "A-1".into(),
            amount: AmountCents::new(1250),
            message: CustomerMessage::new("refund A-1, 12.50"),
            order: a_delivered_order(),
        }]
    );
    assert_eq!(stats.completion_calls, 2);
    assert_eq!(stats.refund, Some(receipt()));
    let receipt_json: serde_json::Value = serde_json::from_str(&tool_contents(&messages)[0]).unwrap();
    assert_eq!(
        receipt_json,
        serde_json::json!({"refund_id": "rf_1", "status": "succeeded", "amount_cents": 1250})
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_retried_after_the_backoff_with_the_same_history() {
    let model = ScriptedModel::new(vec![timeout(), text("Hello.")]);
    let payments = RecordingRefunds::answering(receipt());
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
        timeout(),
        tools(&[("c2", TOOL_NAME, REFUND_ARGS)]),
        text("Refunded once."),
    ]);
    let payments = RecordingRefunds::answering(receipt());

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
    let model = ScriptedModel::new(vec![timeout(), timeout()]);
    let payments = RecordingRefunds::answering(receipt());
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
    steps.push(timeout());
    let model = ScriptedModel::new(steps);
    let payments = RecordingRefunds::answering(receipt());
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
        timeout(),
        timeout(),
    ]);
    let payments = RecordingRefunds::answering(receipt());
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
    let payments = RecordingRefunds::answering(receipt());

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
    let payments = RecordingRefunds::answering(receipt());

    let (result, stats, _) = run(&model, &payments).await;

    assert!(matches!(result, Err(TurnError::BudgetExhausted)), "{result:?}");
    assert!(
        payments.requests().is_empty(),
        "a refund nobody would be told about must not run"
    );
    assert_eq!(stats.refund, None);
}

#[tokio::test(start_paused = true)]
async fn a_provider_error_is_not_retried() {
    let model = ScriptedModel::new(vec![Step::Status(503)]);
    let payments = RecordingRefunds::answering(receipt());

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
    let payments = RecordingRefunds::answering(RefundOutcome::Unknown(RefundError::Timeout));

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Sorry.");
    assert_eq!(payments.requests().len(), 1);
    assert_eq!(stats.refund, Some(RefundOutcome::Unknown(RefundError::Timeout)));
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
    let payments = RecordingRefunds::answering(receipt());

    let (result, stats, messages) = run(&model, &payments).await;

    assert_eq!(result.unwrap(), "Done.");
    assert_eq!(payments.requests().len(), 1);
    assert_eq!(stats.invalid_tool_calls, 1);
    let contents = tool_contents(&messages);
    assert!(contents[0].starts_with(r#"{"error":"#), "{}", contents[0]);
    assert!(contents[1].contains("rf_1"), "{}", contents[1]);
}

#[test]
fn worst_case_is_the_contracts_112_seconds_and_the_order_reads() {
    let worst = worst_case_duration(CALL_TIMEOUT, BACKOFF, Duration::from_secs(10), Duration::ZERO);
    assert_eq!(worst, Duration::from_secs(112));
    let reads = worst_case_duration(Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::from_secs(3));
    assert_eq!(
        reads,
        Duration::from_secs(36),
        "3 lookups and 3 refund checks, two tries each"
    );
}

#[tokio::test(start_paused = true)]
async fn outcomes_that_moved_no_money_still_spend_the_latch_and_tell_the_model() {
    let prior = crate::refund::PriorRefund {
        state: crate::refund::RefundState::Executed,
        order_id: "A-1".into(),
        amount: AmountCents::new(1250),
        receipt: Some(Receipt {
            refund_id: "rf_0".into(),
            status: "succeeded".into(),
            amount_cents: AmountCents::new(1250),
        }),
        resolution: None,
    };
    let cases = [
        (RefundOutcome::AlreadyRecorded(prior), r#""already_refunded":true"#),
        (
            RefundOutcome::PendingApproval {
                approval_id: "ap-1".into(),
                reasons: vec!["amount_above_limit".into()],
            },
            r#"{"status":"pending_approval","approval_id":"ap-1","reasons":["amount_above_limit"]}"#,
        ),
        (RefundOutcome::Unrecorded, "refunds cannot be made right now"),
        (
            RefundOutcome::Rejected {
                status: 409,
                detail: "fully refunded".into(),
            },
            "rejected the refund: fully refunded",
        ),
    ];
    for (outcome, told) in cases {
        let model = ScriptedModel::new(vec![
            tools(&[("c1", TOOL_NAME, REFUND_ARGS)]),
            tools(&[("c2", TOOL_NAME, REFUND_ARGS)]),
            text("Done."),
        ]);
        let payments = RecordingRefunds::answering(outcome.clone());

        let (result, stats, messages) = run(&model, &payments).await;

        assert_eq!(result.unwrap(), "Done.");
        assert_eq!(payments.requests().len(), 1, "{outcome:?}");
        let contents = tool_contents(&messages);
        assert!(contents[0].contains(told), "{outcome:?}: {}", contents[0]);
        assert!(contents[1].contains("already attempted"), "{outcome:?}");
        assert_eq!(stats.refund, Some(outcome));
    }
}

#[test]
fn next_step_is_the_contracts_rules() {
    let tool_call = || {
        Ok(crate::chat::Completion {
            tool_calls: vec![crate::chat::ToolCall {
                id: "c".into(),
                name: TOOL_NAME.into(),
                arguments: "{}".into(),
            }],
            ..Default::default()
        })
    };
    assert!(matches!(next_step(1, 1, tool_call()), NextStep::RunTools(_)));
    assert!(matches!(
        next_step(5, 1, tool_call()),
        NextStep::End(TurnError::BudgetExhausted)
    ));
    assert!(matches!(
        next_step(1, 1, Err(CompletionError::Timeout)),
        NextStep::RetryAfterBackoffs(1)
    ));
    assert!(matches!(
        next_step(2, 2, Err(CompletionError::Timeout)),
        NextStep::End(TurnError::TimedOut)
    ));
    assert!(matches!(
        next_step(5, 1, Err(CompletionError::Timeout)),
        NextStep::End(TurnError::BudgetExhausted)
    ));
    assert!(matches!(
        next_step(1, 1, Err(CompletionError::Status { status: 429 })),
        NextStep::End(TurnError::Provider(_))
    ));
    assert!(matches!(next_step(5, 2, Ok(Default::default())), NextStep::Reply(reply) if reply.is_empty()));
}

/// An earlier exchange in which a refund was made: the history a later
/// turn of the conversation is sent.
fn history_with_a_refund() -> Vec<Message> {
    vec![
        Message::User("refund A-1, 12.50".into()),
        Message::Assistant {
            content: None,
            tool_calls: vec![crate::chat::ToolCall {
                id: "old_call".into(),
                name: TOOL_NAME.into(),
                arguments: REFUND_ARGS.into(),
            }],
        },
        Message::Tool {
            tool_call_id: "old_call".into(),
            content: r#"{"refund_id":"rf_0","status":"succeeded","amount_cents":1250}"#.into(),
        },
        Message::Assistant {
            content: Some("Done.".into()),
            tool_calls: Vec::new(),
        },
    ]
}

#[tokio::test(start_paused = true)]
async fn history_is_sent_to_the_model_and_never_run() {
    let model = ScriptedModel::new(vec![text("You are welcome.")]);
    let payments = RecordingRefunds::answering(receipt());
    let history = history_with_a_refund();
    let message = CustomerMessage::new("thanks!");
    let mut turn = Turn::new(
        &model,
        with_tools(&payments),
        BACKOFF,
        context(),
        history.clone(),
        &message,
    );

    assert_eq!(turn.run().await.unwrap(), "You are welcome.");

    assert!(
        payments.requests().is_empty(),
        "a refund in the history is never made again"
    );
    let sent = &model.calls()[0].1;
    assert_eq!(sent[0], Message::System(SYSTEM_PROMPT.to_owned()));
    assert_eq!(&sent[1..5], history.as_slice());
    assert_eq!(sent[5], Message::User("thanks!".into()));
    assert_eq!(turn.own_messages(), &[Message::User("thanks!".into())]);
}

#[tokio::test(start_paused = true)]
async fn the_latch_and_the_budget_are_per_request_whatever_the_history() {
    // The history already holds a refund: this message may still make one,
    // and only one, and its calls count from zero.
    let model = ScriptedModel::new(vec![
        tools(&[("c1", TOOL_NAME, REFUND_ARGS)]),
        tools(&[("c2", TOOL_NAME, REFUND_ARGS)]),
        text("Done."),
    ]);
    let payments = RecordingRefunds::answering(receipt());
    let message = CustomerMessage::new("and the other one too");
    let mut turn = Turn::new(
        &model,
        with_tools(&payments),
        BACKOFF,
        context(),
        history_with_a_refund(),
        &message,
    );

    assert_eq!(turn.run().await.unwrap(), "Done.");

    assert_eq!(payments.requests().len(), 1);
    assert_eq!(turn.stats().completion_calls, 3);
    assert_eq!(turn.stats().second_refunds_refused, 1);
    // Its own messages: the new message, two assistant turns with their results.
    assert_eq!(turn.own_messages().len(), 5);
}

#[test]
fn the_prompt_says_what_is_true_of_conversations() {
    assert!(!SYSTEM_PROMPT.contains("per conversation"));
    assert!(SYSTEM_PROMPT.contains("at most one refund for each new customer message"));
    assert!(SYSTEM_PROMPT.contains("earlier ones of this conversation"));
}

#[test]
fn the_token_reservation_covers_every_declared_tool_and_the_prompt() {
    let request = crate::chat::openai::build_request(
        &[],
        1,
        &crate::chat::Offered {
            tools: crate::tools::Tool::ALL.iter().map(|tool| tool.declared()).collect(),
        },
    );
    let declared = serde_json::to_string(&request.tools).unwrap().chars().count() as u64;
    assert!(
        declared < TOOLS_DECLARED_CHARS,
        "the tools' declarations are {declared} characters: raise TOOLS_DECLARED_CHARS"
    );
}

#[test]
fn the_prompt_tells_the_model_what_a_persons_mark_means() {
    let mark = crate::conversation::person::PERSON_MARK.trim_end();
    assert!(SYSTEM_PROMPT.contains(mark), "the prompt names {mark}");
}

/// What a live turn let its listener hear, `Begun` included.
fn heard_all(mut from: tokio::sync::mpsc::UnboundedReceiver<crate::live::Heard>) -> Vec<crate::live::Heard> {
    let mut all = Vec::new();
    while let Ok(heard) = from.try_recv() {
        all.push(heard);
    }
    all
}

#[tokio::test(start_paused = true)]
async fn a_live_turn_hears_its_steps_and_drops_the_text_of_a_call_that_went_on_to_tools() {
    use crate::live::{Heard, Live, Step as Shown};
    let mut asking = tools(&[("c1", TOOL_NAME, REFUND_ARGS)]);
    if let Step::Reply(completion) = &mut asking {
        completion.content = Some("Let me check that.".into());
    }
    let model = ScriptedModel::new(vec![asking, text("Done.")]);
    let payments = RecordingRefunds::answering(receipt());
    let (live, from) = Live::listened();
    let message = CustomerMessage::new("refund A-1, 12.50");

    let mut turn = Turn::new(&model, with_tools(&payments), BACKOFF, context(), Vec::new(), &message).with_live(&live);
    let reply = turn.run().await.unwrap();

    assert_eq!(reply, "Done.");
    assert_eq!(
        heard_all(from),
        [
            Heard::Begun,
            Heard::Delta("Let me check that.".into()),
            Heard::Discard,
            Heard::Progress(Shown::RefundCheck),
            Heard::Progress(Shown::Payments),
            Heard::Delta("Done.".into()),
        ]
    );
    assert_eq!(payments.requests().len(), 1, "the same one refund as in JSON mode");
    assert!(!turn.stats().usage_unreported);
}

/// Writes half a sentence, then times out; answers whole on the retry.
struct HalfThenTimeout(std::sync::atomic::AtomicU32);

impl ChatModel for HalfThenTimeout {
    async fn complete(
        &self,
        _messages: &[Message],
        _offered: &crate::chat::Offered,
    ) -> Result<Completion, CompletionError> {
        unreachable!("a live turn streams")
    }

    async fn complete_live(
        &self,
        _messages: &[Message],
        _offered: &crate::chat::Offered,
        live: &crate::live::Live,
    ) -> Result<Completion, CompletionError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            live.delta("Your refund of");
            return Err(CompletionError::Timeout);
        }
        live.delta("Hello.");
        Ok(Completion {
            content: Some("Hello.".into()),
            finish_reason: Some("stop".into()),
            ..Completion::default()
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_draft_cut_by_a_timeout_is_discarded_before_the_retry_writes_and_a_missing_usage_is_noted() {
    use crate::live::{Heard, Live};
    let model = HalfThenTimeout(Default::default());
    let payments = RecordingRefunds::answering(receipt());
    let (live, from) = Live::listened();
    let message = CustomerMessage::new("hello");

    let mut turn = Turn::new(&model, with_tools(&payments), BACKOFF, context(), Vec::new(), &message).with_live(&live);
    let reply = turn.run().await.unwrap();

    assert_eq!(reply, "Hello.");
    assert_eq!(
        heard_all(from),
        [
            Heard::Begun,
            Heard::Delta("Your refund of".into()),
            Heard::Discard,
            Heard::Delta("Hello.".into()),
        ]
    );
    assert_eq!(turn.stats().attempts, 2);
    assert!(turn.stats().usage_unreported, "the reply came without its usage");
}
