//! The DynamoDB operations of each kind of turn: as few as the guarantees
//! allow (`docs/benchmarks.md` says why each one is needed). A new
//! operation on the hot path fails here before it shows in `make bench`.

use lambda_http::http::StatusCode;

use refund_chat_testkit::*;

/// An app whose every DynamoDB call, to either table, is logged.
async fn logged(model: Vec<wiremock::ResponseTemplate>) -> (TestApp, OperationLog) {
    let log = OperationLog::default();
    let endpoint = proxy(&moto().endpoint, false, log.hook(|_| Action::Forward)).await;
    let h = TestApp::builder()
        .model(model)
        .ledger_at(endpoint.clone())
        .conversations_at(endpoint)
        .build()
        .await;
    (h, log)
}

fn refund_turn() -> Vec<wiremock::ResponseTemplate> {
    vec![refund_call("c1", "A-1001", 1250), text("Refunded.")]
}

#[tokio::test]
async fn an_unkeyed_refund_in_a_new_conversation_takes_four_operations() {
    let (h, log) = logged(refund_turn()).await;

    let answer = h.say(None, REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(h.payments_requests().await.len(), 1);
    assert_eq!(
        log.names(),
        [
            "TransactWriteItems", // the turn taken from the budget
            "TransactWriteItems", // the refund record, with its guards
            "TransactWriteItems", // the payments outcome
            "TransactWriteItems", // the conversation created with its exchange, the tokens
        ]
    );
    assert_eq!(h.exchanges(answer.conversation_id()).await.len(), 1);
}

#[tokio::test]
async fn a_keyed_refund_in_a_new_conversation_takes_four_operations() {
    let (h, log) = logged(refund_turn()).await;

    let answer = h.say_with(None, REFUND_MESSAGE, &[("idempotency-key", "k-ops")]).await;
    let replay = h.say_with(None, REFUND_MESSAGE, &[("idempotency-key", "k-ops")]).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.raw, answer.raw, "the answer was stored with the exchange");
    assert_eq!(
        log.names(),
        [
            "TransactWriteItems", // the key claimed and the turn taken
            "TransactWriteItems", // the refund record
            "TransactWriteItems", // the payments outcome
            "TransactWriteItems", // the exchange, the tokens and the stored answer
            "TransactWriteItems", // the replay: its claim finds the answer
        ]
    );
}

#[tokio::test]
async fn a_keyed_refund_in_a_conversation_reads_its_window_once() {
    let (h, log) = logged(vec![
        text("Hello."),
        refund_call("c1", "A-1001", 1250),
        text("Refunded."),
    ])
    .await;
    let first = h.say(None, "hello").await;
    let before = log.names().len();

    let answer = h
        .say_with(
            Some(first.conversation_id()),
            REFUND_MESSAGE,
            &[("idempotency-key", "k-ops-2")],
        )
        .await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(
        log.names()[before..],
        [
            "TransactWriteItems", // the key claimed and the turn taken
            "UpdateItem",         // the conversation's lease
            "Query",              // its window
            "TransactWriteItems", // the refund record
            "TransactWriteItems", // the payments outcome
            "TransactWriteItems", // the exchange, the tokens and the stored answer
        ]
    );
    assert_eq!(h.exchanges(first.conversation_id()).await.len(), 2);
}
