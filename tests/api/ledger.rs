//! The refund ledger (contract 6.1, 6.2): the record is written before money
//! moves, a record already there stops the payments call, and a ledger that
//! cannot be reached or does not answer stops it too, within its timeout.

use std::time::{Duration, Instant};

use lambda_http::http::StatusCode;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{AutomaticWrite, CountsFor, LedgerError, RefundLedger, RequestLedger};
use refund_chat::refund::message::CustomerMessage;
use refund_chat::refund::money::AmountCents;
use refund_chat::refund::{Attempt, PaymentOutcome, RefundRequest, RefundScope, RefundState, WriterMark};
use serde_json::json;
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

use refund_chat_testkit::*;

/// A port where nothing listens: every connection is refused.
fn refused_endpoint() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

/// A server that accepts connections and never answers.
async fn silent_endpoint() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn an_unreachable_ledger_with_a_key_is_a_503_before_any_model_call() {
    let h = TestApp::builder()
        .ledger_at(refused_endpoint())
        .key_source(PanickingKey)
        .build()
        .await;

    let answer = h.chat_with_key(REFUND_MESSAGE, "k-1").await;

    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.raw);
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert!(!answer.detail().is_empty());
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
}

/// A ledger proxy that lets the budget's transactions (those that take a
/// turn) through and refuses every other transaction (the refund record's,
/// the append's).
async fn ledger_failing_after_the_budget(log: &OperationLog) -> String {
    proxy(
        &moto().endpoint,
        false,
        log.hook(move |seen| match seen.dynamodb_operation() {
            "TransactWriteItems" if !String::from_utf8_lossy(&seen.body).contains("budget#turns#") => {
                dynamo_error("ValidationException", "injected", json!({}))
            }
            _ => Action::Forward,
        }),
    )
    .await
}

#[tokio::test]
async fn a_ledger_that_fails_after_the_budget_runs_the_turn_but_never_pays() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "A-1001", 1250),
            text("A person will follow up."),
        ])
        .ledger_at(ledger_failing_after_the_budget(&OperationLog::default()).await)
        .build()
        .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK);
    assert!(h.payments_requests().await.is_empty(), "no record, no payment");
    let told = tool_error(&tool_messages(&h.model_requests().await[1])[0]).unwrap();
    assert!(told.contains("refunds cannot be made right now"), "{told}");
    assert!(told.contains("a person from the support team will follow up"), "{told}");
}

#[tokio::test]
async fn a_ledger_that_never_answers_is_bounded_by_its_timeout() {
    let timeout = Duration::from_millis(300);
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250), text("Later.")])
        .ledger_at(silent_endpoint().await)
        .configure(move |config| config.ledger_timeout = timeout)
        .build()
        .await;

    let started = Instant::now();
    let keyed = h.chat_with_key(REFUND_MESSAGE, "k-1").await;
    let keyed_took = started.elapsed();
    assert_eq!(keyed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(keyed_took >= timeout, "{keyed_took:?}");
    assert!(
        keyed_took < timeout * 5,
        "bounded by LEDGER_TIMEOUT_SECS, not the silence: {keyed_took:?}"
    );

    // Without a key the budget is the first ledger read: closed too, as bounded.
    let started = Instant::now();
    let unkeyed = h.chat(REFUND_MESSAGE).await;
    assert_eq!(unkeyed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < timeout * 5, "{:?}", started.elapsed());
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
}

/// Answers payments with a receipt, after reading the ledger as it stands
/// at that moment: what the refund record said when money was about to move.
struct CheckingPayments {
    aws: aws_config::SdkConfig,
    table: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl Respond for CheckingPayments {
    fn respond(&self, _: &wiremock::Request) -> ResponseTemplate {
        let (aws, table) = (self.aws.clone(), self.table.clone());
        // A runtime of its own on a thread of its own: wiremock calls this synchronously.
        let state = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                items(&aws, &table)
                    .await
                    .iter()
                    .find(|item| attr(item, "kind") == Some("refund"))
                    .and_then(|item| attr(item, "state").map(str::to_owned))
            })
        })
        .join()
        .unwrap();
        self.seen.lock().unwrap().push(state);
        receipt()
    }
}

#[tokio::test]
async fn the_refund_record_is_written_before_payments_is_called() {
    let payments = MockServer::start().await;
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250), text("Refunded.")])
        .payments_at(payments.uri())
        .build()
        .await;
    let seen = std::sync::Arc::default();
    Mock::given(wiremock::matchers::path("/refunds"))
        .respond_with(CheckingPayments {
            aws: h.aws.clone(),
            table: h.table.clone(),
            seen: std::sync::Arc::clone(&seen),
        })
        .mount(&payments)
        .await;

    assert_eq!(h.chat(REFUND_MESSAGE).await.status, StatusCode::OK);

    assert_eq!(*seen.lock().unwrap(), vec![Some("executing".to_owned())]);
    assert_eq!(attr(&h.refund_records().await[0], "state"), Some("executed"));
}

#[tokio::test]
async fn a_rejection_and_an_unknown_outcome_are_recorded_as_such() {
    let rejection = ResponseTemplate::new(409).set_body_json(serde_json::json!({"detail": "fully refunded"}));
    let h = TestApp::new(vec![refund_call("c1", "A-1001", 1250), text("No.")], rejection).await;
    h.chat(REFUND_MESSAGE).await;
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "state"), Some("rejected"));
    assert_eq!(attr(record, "payments_detail"), Some("fully refunded"));
    assert_eq!(record["payments_status"].as_n().ok().map(String::as_str), Some("409"));

    let h = TestApp::new(
        vec![refund_call("c1", "A-1001", 1250), text("Maybe.")],
        receipt().set_delay(HANG),
    )
    .await;
    h.chat(REFUND_MESSAGE).await;
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "state"), Some("unknown"));
    assert!(attr(record, "failure").unwrap().contains("did not answer in time"));
}

fn attempt(writer: &str) -> RefundRequest {
    RefundRequest {
        routed: Default::default(),
        attempt: Attempt {
            scope: RefundScope::for_request(USER, "req-1"),
            writer: WriterMark::fixed(format!("req-1/{writer}")),
            conversation: None,
            day_owner: None,
        },
        order_id: "A-1001".into(),
        amount: AmountCents::new(1250),
        message: CustomerMessage::new(REFUND_MESSAGE),
        order: refund_chat::doubles::a_delivered_order(),
    }
}

#[tokio::test]
async fn a_retried_write_knows_itself_and_another_writer_finds_the_record() {
    let aws = aws_at(&moto().endpoint).await;
    let table = new_table(&aws).await;
    let ledger = DynamoLedger::from_sdk_config(&aws, table.clone(), LEDGER_TIMEOUT);

    let limits = refund_chat::config::DEFAULT_LIMITS;
    assert_eq!(
        ledger.record_automatic(&attempt("w1"), &limits, 1).await,
        Ok(AutomaticWrite::Recorded)
    );
    // The SDK retrying a write that had already landed: the condition fails on our own item.
    assert_eq!(
        ledger.record_automatic(&attempt("w1"), &limits, 2).await,
        Ok(AutomaticWrite::Recorded)
    );
    let Ok(AutomaticWrite::Existing(prior)) = ledger.record_automatic(&attempt("w2"), &limits, 3).await else {
        panic!("another writer must find the record");
    };
    assert_eq!(
        (prior.state, prior.amount),
        (RefundState::Executing, AmountCents::new(1250))
    );

    // Only the writer that holds the record may record its outcome, and only once.
    let counted = CountsFor::Rules2And3 {
        day: refund_chat::clock::utc_day(1),
    };
    let executed = PaymentOutcome::Rejected {
        status: 409,
        detail: "no".into(),
    };
    assert!(matches!(
        ledger.record_outcome(&attempt("w2"), &executed, &counted, 4).await,
        Err(LedgerError::Conflict(_))
    ));
    assert_eq!(
        ledger.record_outcome(&attempt("w1"), &executed, &counted, 4).await,
        Ok(())
    );
    assert_eq!(
        ledger.record_outcome(&attempt("w1"), &executed, &counted, 5).await,
        Ok(()),
        "a retried update"
    );
    let items = items(&aws, &table).await;
    let records: Vec<_> = items
        .iter()
        .filter(|item| attr(item, "kind") == Some("refund"))
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(attr(records[0], "state"), Some("rejected"));
    assert_eq!(attr(records[0], "writer"), Some("req-1/w1"));
}

#[tokio::test]
async fn a_redelivered_request_id_without_a_key_never_pays_twice() {
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1250),
            text("Refunded."),
            refund_call("c2", "A-1001", 1250),
            text("Already refunded."),
        ],
        receipt(),
    )
    .await;

    // Same request id twice: the same scope (as if Lambda delivered the invocation again).
    assert_eq!(h.chat(REFUND_MESSAGE).await.status, StatusCode::OK);
    assert_eq!(h.chat(REFUND_MESSAGE).await.status, StatusCode::OK);

    assert_eq!(h.payments_requests().await.len(), 1);
    let told = tool_content(&tool_messages(&h.model_requests().await[3])[0]);
    assert_eq!(told["already_refunded"], true, "{told}");
    assert_eq!(told["refund_id"], "rf_42");
}

#[tokio::test]
async fn the_worst_path_makes_exactly_the_budgeted_ledger_operations() {
    // A retry takes over a dead invocation's key, the refund is above the
    // limit (the history is read for the reasons), the approval cannot be
    // written, the model then fails, and so does the append: the key is
    // checked and released, and the tokens added, on their own.
    let log = OperationLog::default();
    let proxy = ledger_failing_after_the_budget(&log).await;
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "D-4001", 12000),
            ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "boom"}})),
        ])
        .ledger_at(proxy.clone())
        .conversations_at(proxy)
        .build()
        .await;
    let body = chat_body("refund D-4001 120.00");
    let dead = refund_chat::ledger::RequestLease {
        scope: RefundScope::for_idempotency_key(USER, "k-worst"),
        writer: WriterMark::fixed("req-dead/w"),
        body_sha256: refund_chat::http::idempotency::body_fingerprint(USER, "refund D-4001 120.00", None),
        lease_until_ms: refund_chat::clock::now_ms() - 1,
        expires_at_s: refund_chat::clock::now_ms() / 1000 + 3600,
        conversation_id: None,
    };
    let ledger = DynamoLedger::from_sdk_config(&h.aws, &h.table, LEDGER_TIMEOUT);
    let claimed = ledger.claim_request(&dead, refund_chat::clock::now_ms()).await;
    assert_eq!(claimed, Ok(refund_chat::ledger::KeyClaim::Claimed));

    let answer = h.post_with(&body, &[("idempotency-key", "k-worst")]).await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{}", answer.raw);
    assert!(h.payments_requests().await.is_empty());
    let operations = log.names();
    assert_eq!(
        operations,
        [
            "TransactWriteItems", // claim the key with a turn: it finds the dead one's record
            "UpdateItem",         // take it over
            "UpdateItem",         // the conversation's lease (the dead one's id)
            "TransactWriteItems", // take a turn from the budget
            "GetItem",            // rule 2's history, for the reasons
            "GetItem",            // rule 3's history
            "TransactWriteItems", // the approval record (refused here)
            "GetItem",            // does the scope have a refund record?
            "TransactWriteItems", // no: the append, with the tokens and the key's release (refused here)
            "UpdateItem",         // the tokens on their own
            "UpdateItem",         // the key released on its own
        ]
    );
    // Of the worst case's operations, this path skips three: the window's
    // read (no earlier exchange), the lease given back or the items'
    // expiry moved after an append (refused here), and the reply time's
    // read of a turn that hands off (contract 32; none here).
    assert_eq!(
        operations.len() as u32 + 3,
        refund_chat::config::LEDGER_OPERATIONS_PER_REQUEST
            + refund_chat::config::CONVERSATION_OPERATIONS_PER_REQUEST
            + refund_chat::config::BUDGET_OPERATIONS_PER_REQUEST
    );
}

/// What a proxy, a load balancer or a wrong endpoint answers: a 200 that is
/// not DynamoDB's.
fn not_dynamodb() -> Action {
    Action::Page(200, "<html><body>Welcome to nginx!</body></html>".into())
}

#[tokio::test]
async fn a_2xx_that_is_not_dynamodbs_answer_is_never_a_written_record() {
    // Every write but the budget's turn is answered 200 text/html without
    // reaching DynamoDB: the refund record (automatic and for approval), the
    // outcome, the key's claim and settlement, the conversation's append.
    let fake = |seen: &Seen| {
        let write = matches!(
            seen.dynamodb_operation(),
            "TransactWriteItems" | "PutItem" | "UpdateItem"
        );
        let turn = String::from_utf8_lossy(&seen.body).contains("budget#turns#");
        if write && !turn {
            not_dynamodb()
        } else {
            Action::Forward
        }
    };
    let ledger = proxy(&moto().endpoint, false, OperationLog::default().hook(fake)).await;
    let conversations = proxy(&moto().endpoint, false, OperationLog::default().hook(fake)).await;
    let h = TestApp::builder()
        .model_responder(refunding_model)
        .ledger_at(ledger)
        .conversations_at(conversations)
        .build()
        .await;

    let automatic = h.say(None, "refund A-1001 1250").await;
    let approval = h.say(None, "refund D-4001 12000").await;
    let keyed = h
        .say_with(None, "refund A-1001 1250", &[("idempotency-key", "k-html")])
        .await;

    assert!(
        h.payments_requests().await.is_empty(),
        "payments was called with no record"
    );
    assert!(h.refund_records().await.is_empty(), "nothing was written");
    for answer in [&automatic, &approval, &keyed] {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    }
    let told: Vec<String> = h
        .model_requests()
        .await
        .iter()
        .filter_map(|request| tool_messages(request).first().and_then(tool_error))
        .collect();
    assert_eq!(told.len(), 3, "{told:?}");
    assert!(
        told.iter().all(|t| t.contains("refunds cannot be made right now")),
        "{told:?}"
    );
}
