//! `refund-chat-admin` (contract 9), the real binary against moto and a
//! mock payments service: approvals are exactly-once, rejections and
//! resolutions never call payments, and the export is the whole trail.

use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use refund_chat::ledger::StaffLedger;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate};

use refund_chat_testkit::*;

const BIG_REFUND: &str = "The sofa from order D-4001 arrived torn: refund D-4001 12000";

/// A claim as `approve` makes it, with the order's guard as read now.
pub(crate) async fn claim(
    ledger: &refund_chat::ledger::dynamo::DynamoLedger,
    id: &str,
    by: &str,
    writer: &str,
) -> Result<refund_chat::ledger::StaffDecision, refund_chat::ledger::LedgerError> {
    let record = ledger.record(id).await?.expect("the record");
    let seen = ledger.in_flight(&record.order_id, id).await?;
    let writer = refund_chat::refund::WriterMark::fixed(writer);
    let claim = refund_chat::ledger::Claim {
        record_id: id,
        by: refund_chat::conversation::person::Person::named(by),
        writer: &writer,
        now_ms: refund_chat::clock::now_ms(),
        limits: &refund_chat::config::DEFAULT_LIMITS,
    };
    ledger.claim_approval(&claim, seen).await
}

/// Runs the admin binary against `ledger` (an AWS endpoint) and `payments`.
pub(crate) async fn admin(table: &str, ledger: &str, payments: &str, args: &[&str]) -> Output {
    admin_with(table, ledger, payments, &[], args).await
}

/// The same, with more environment variables.
pub(crate) async fn admin_with(
    table: &str,
    ledger: &str,
    payments: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    tokio::process::Command::new(admin_binary())
        .args(args)
        .env_clear()
        .env("LEDGER_TABLE", table)
        .env("CONVERSATION_TABLE", conversation_table(table))
        .env("PAYMENTS_BASE_URL", payments)
        .env("PAYMENTS_TIMEOUT_SECS", "0.5")
        // The approver's payments mock is the order system too, as the sandbox is.
        .env("ORDERS_BASE_URL", payments)
        .env("ORDERS_TIMEOUT_SECS", "0.5")
        .env("AWS_ENDPOINT_URL", ledger)
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        // The test's own, last: they win.
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run refund-chat-admin")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The function, and the approver's payments service of its own.
pub(crate) struct Desk {
    pub(crate) h: TestApp,
    pub(crate) payments: MockServer,
}

impl Desk {
    /// The function, with the approver's payments service of its own.
    pub(crate) async fn new(payments_answer: ResponseTemplate) -> Desk {
        let h = TestApp::builder().model_responder(refunding_model).build().await;
        let payments = MockServer::start().await;
        Mock::given(wiremock::matchers::path("/refunds"))
            .respond_with(payments_answer)
            .mount(&payments)
            .await;
        Mock::given(wiremock::matchers::method("GET"))
            .and(wiremock::matchers::path_regex("^/orders/"))
            .respond_with(AnyOrder)
            .mount(&payments)
            .await;
        Desk { h, payments }
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        admin(&self.h.table, &moto().endpoint, &self.payments.uri(), args).await
    }

    /// A refund the rules send to a person; its approval id.
    pub(crate) async fn pending_refund(&self, request_id: &str) -> String {
        self.pending_refund_saying(request_id, BIG_REFUND).await
    }

    /// The same, for a customer's message of the test's own.
    pub(crate) async fn pending_refund_saying(&self, request_id: &str, message: &str) -> String {
        let answer = send_as(&self.h.app, post_event(&chat_body(message), &[]), request_id, 0).await;
        assert_eq!(answer.status, lambda_http::http::StatusCode::OK);
        let told = tool_content(&tool_messages(self.h.model_requests().await.last().unwrap())[0]);
        assert_eq!(told["status"], "pending_approval", "{told}");
        told["approval_id"].as_str().unwrap().to_owned()
    }

    pub(crate) async fn paid(&self) -> Vec<Value> {
        bodies(&self.payments).await
    }

    pub(crate) async fn record(
        &self,
        id: &str,
    ) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
        self.h
            .refund_records()
            .await
            .into_iter()
            .find(|r| attr(r, "record_id") == Some(id))
            .expect("the record")
    }
}

#[tokio::test]
async fn pending_lists_the_refund_with_its_reasons_and_the_customers_words() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;

    let pending = desk.run(&["pending"]).await;

    assert_eq!(pending.status.code(), Some(0), "{}", stderr(&pending));
    let table = stdout(&pending);
    assert!(table.starts_with("ID "), "{table}");
    for shown in [
        id.as_str(),
        "u-1001",
        "D-4001",
        "120.00",
        "amount_above_limit",
        "The sofa from order D-4001",
    ] {
        assert!(table.contains(shown), "{shown} missing from:\n{table}");
    }
}

#[tokio::test]
async fn approve_pays_once_with_the_records_customer_and_amount_and_logs_the_approver() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;

    let approved = desk.run(&["approve", &id, "--by", "alice"]).await;

    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert!(stdout(&approved).contains("refunded 120.00"), "{}", stdout(&approved));
    assert_eq!(
        desk.paid().await,
        vec![json!({"order_id": "D-4001", "amount_cents": 12000, "user_id": "u-1001"})]
    );
    let record = desk.record(&id).await;
    assert_eq!(attr(&record, "state"), Some("executed"));
    assert_eq!(attr(&record, "decided_by"), Some("alice"));
    assert_eq!(attr(&record, "refund_id"), Some("rf_42"));
    assert!(!record.contains_key("waiting_for"), "off the queue");
    assert!(
        stderr(&approved).contains(r#""by":"alice""#),
        "the decision is logged with the approver"
    );
    assert!(!stderr(&approved).contains("sofa"), "never the customer's message");
}

#[tokio::test]
async fn a_second_approval_is_refused_names_the_first_approver_and_pays_nothing() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;
    let first = desk.run(&["approve", &id, "--by", "alice"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));

    let again = desk.run(&["approve", &id, "--by", "bob"]).await;

    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("decided by alice"), "{}", stderr(&again));
    assert_eq!(desk.paid().await.len(), 1);
    assert!(stdout(&desk.run(&["pending"]).await).contains("no refunds are awaiting approval"));
}

#[tokio::test]
async fn two_approvers_racing_make_one_payments_call() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;
    // One DynamoDB request at a time, as DynamoDB serialises writes of one item.
    let proxy = one_at_a_time(&moto().endpoint).await;

    let payments = desk.payments.uri();
    let (alice, bob) = (["approve", &id, "--by", "alice"], ["approve", &id, "--by", "bob"]);
    let (a, b) = tokio::join!(
        admin(&desk.h.table, &proxy, &payments, &alice),
        admin(&desk.h.table, &proxy, &payments, &bob),
    );

    let mut codes = vec![a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(codes, vec![Some(0), Some(1)], "{} / {}", stderr(&a), stderr(&b));
    assert_eq!(desk.paid().await.len(), 1);
}

#[tokio::test]
async fn reject_makes_no_payments_call_and_approve_after_it_is_refused() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;

    let rejected = desk
        .run(&[
            "reject",
            &id,
            "--by",
            "carol",
            "--reason",
            "torn by the customer, card 4242.4242.4242.4242",
        ])
        .await;
    assert_eq!(rejected.status.code(), Some(0), "{}", stderr(&rejected));
    let approve = desk.run(&["approve", &id, "--by", "alice"]).await;
    assert_eq!(approve.status.code(), Some(1));
    assert!(stderr(&approve).contains("rejected_by_staff"), "{}", stderr(&approve));

    assert!(desk.paid().await.is_empty());
    let record = desk.record(&id).await;
    assert_eq!(attr(&record, "state"), Some("rejected_by_staff"));
    assert_eq!(
        attr(&record, "rejection_reason"),
        Some("torn by the customer, card [card ending 4242]"),
        "a person's free text is masked as a customer's is"
    );
    // A rejected refund moved no money: the order may be refunded again automatically.
    send_as(
        &desk.h.app,
        post_event(&chat_body("refund D-4001 1000"), &[]),
        "req-2",
        0,
    )
    .await;
    assert_eq!(desk.h.payments_requests().await.len(), 1);
}

#[tokio::test]
async fn a_payments_rejection_during_approval_is_recorded_and_refused() {
    let desk = Desk::new(ResponseTemplate::new(409).set_body_json(json!({"detail": "order already refunded"}))).await;
    let id = desk.pending_refund("req-1").await;

    let approve = desk.run(&["approve", &id, "--by", "alice"]).await;

    assert_eq!(approve.status.code(), Some(1));
    assert!(
        stderr(&approve).contains("order already refunded"),
        "{}",
        stderr(&approve)
    );
    assert_eq!(attr(&desk.record(&id).await, "state"), Some("rejected"));
}

/// A refund whose payments call timed out in the function (money may have
/// moved), the admin tool runnable against its ledger, and the approver's own
/// payments service, which must never be called.
async fn an_unknown_outcome() -> (Desk, TestApp, String) {
    let desk = Desk::new(receipt()).await;
    let h = TestApp::new(
        vec![refund_call("c1", "A-1001", 1250), text("A person will confirm.")],
        receipt().set_delay(HANG),
    )
    .await;
    h.chat(REFUND_MESSAGE).await;
    let id = attr(&h.refund_records().await[0], "record_id").unwrap().to_owned();
    (desk, h, id)
}

async fn admin_on(h: &TestApp, desk: &Desk, args: &[&str]) -> Output {
    admin(&h.table, &moto().endpoint, &desk.payments.uri(), args).await
}

#[tokio::test]
async fn unknown_lists_a_refund_whose_payments_call_gave_no_answer() {
    let (desk, h, id) = an_unknown_outcome().await;

    let unknown = admin_on(&h, &desk, &["unknown"]).await;

    assert_eq!(unknown.status.code(), Some(0));
    assert!(stdout(&unknown).contains(&id), "{}", stdout(&unknown));
    assert!(
        stdout(&unknown).contains("did not answer in time"),
        "{}",
        stdout(&unknown)
    );
}

#[tokio::test]
async fn resolve_records_what_payments_confirmed_once_and_never_calls_payments() {
    let (desk, h, id) = an_unknown_outcome().await;

    let resolved = admin_on(&h, &desk, &["resolve", &id, "--executed", "rf_777", "--by", "dan"]).await;
    let twice = admin_on(&h, &desk, &["resolve", &id, "--not-executed", "--by", "erin"]).await;

    assert_eq!(resolved.status.code(), Some(0), "{}", stderr(&resolved));
    assert_eq!(twice.status.code(), Some(1));
    assert!(desk.paid().await.is_empty(), "resolve never calls payments");
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "state"), Some("unknown"), "the original state is kept");
    assert_eq!(attr(record, "resolution"), Some("executed"));
    assert_eq!(attr(record, "resolved_refund_id"), Some("rf_777"));
    assert_eq!(attr(record, "resolved_by"), Some("dan"));
    assert!(!stdout(&admin_on(&h, &desk, &["unknown"]).await).contains(&id));
}

#[tokio::test]
async fn the_export_keeps_the_failure_and_who_resolved_it() {
    let (desk, h, id) = an_unknown_outcome().await;
    admin_on(&h, &desk, &["resolve", &id, "--executed", "rf_777", "--by", "dan"]).await;

    let export: Vec<Value> = serde_json::from_slice(&admin_on(&h, &desk, &["export"]).await.stdout).unwrap();

    assert_eq!(export[0]["resolved_by"], "dan");
    assert!(export[0]["resolved_at"].is_string());
    assert_eq!(
        export[0]["failure"]
            .as_str()
            .map(|f| f.contains("did not answer in time")),
        Some(true)
    );
}

#[tokio::test]
async fn export_lists_every_state_with_who_decided_in_both_formats() {
    let desk = Desk::new(receipt()).await;
    let approved = desk.pending_refund("req-1").await;
    desk.run(&["approve", &approved, "--by", "alice"]).await;
    let rejected = {
        let answer = send_as(
            &desk.h.app,
            post_event(&chat_body("refund D-4002 9000"), &[]),
            "req-2",
            0,
        )
        .await;
        assert_eq!(answer.status, lambda_http::http::StatusCode::OK);
        let told = tool_content(&tool_messages(desk.h.model_requests().await.last().unwrap())[0]);
        told["approval_id"].as_str().unwrap().to_owned()
    };
    desk.run(&[
        "reject",
        &rejected,
        "--by",
        "carol",
        "--reason",
        "duplicate",
        "--intent",
        "return",
    ])
    .await;
    send_as(
        &desk.h.app,
        post_event(&chat_body("refund A-1001 1250"), &[]),
        "req-3",
        0,
    )
    .await;
    let still_pending = desk.pending_refund("req-4").await;

    let json_export = desk.run(&["export", "--format", "json"]).await;
    assert_eq!(json_export.status.code(), Some(0), "{}", stderr(&json_export));
    let records: Vec<Value> = serde_json::from_slice(&json_export.stdout).unwrap();
    let states: Vec<&str> = records.iter().filter_map(|r| r["state"].as_str()).collect();
    assert_eq!(states.len(), 4);
    for state in ["executed", "rejected_by_staff", "awaiting_approval"] {
        assert!(states.contains(&state), "{states:?}");
    }
    let by_id = |id: &str| records.iter().find(|r| r["record_id"] == id).unwrap().clone();
    assert_eq!(by_id(&approved)["decided_by"], "alice");
    assert!(by_id(&approved)["decided_at"].is_string());
    assert_eq!(by_id(&rejected)["decided_by"], "carol");
    assert_eq!(by_id(&rejected)["rejection_reason"], "duplicate");
    // The person's verdict beside the router's labels (contract 21).
    assert_eq!(by_id(&rejected)["verdict"], "return");
    assert!(by_id(&approved).get("verdict").is_none());
    assert!(by_id(&still_pending).get("decided_by").is_none());

    let csv_export = desk.run(&["export", "--format", "csv"]).await;
    let mut reader = csv::Reader::from_reader(csv_export.stdout.as_slice());
    let headers = reader.headers().unwrap().clone();
    let mut columns = refund_chat::ledger::RefundRecord::COLUMNS.to_vec();
    columns.push("verdict");
    assert_eq!(headers.iter().collect::<Vec<_>>(), columns);
    assert_eq!(reader.records().count(), 4);

    let future = desk.run(&["export", "--since", "2999-01-01"]).await;
    assert_eq!(serde_json::from_slice::<Vec<Value>>(&future.stdout).unwrap().len(), 0);
}

#[tokio::test]
async fn refusals_and_usage_have_their_exit_statuses() {
    let desk = Desk::new(receipt()).await;

    assert_eq!(desk.run(&["show", "rr-nope"]).await.status.code(), Some(1));
    assert_eq!(
        desk.run(&["approve", "rr-nope", "--by", "a"]).await.status.code(),
        Some(1)
    );
    assert_eq!(
        desk.run(&["approve", "rr-nope"]).await.status.code(),
        Some(2),
        "--by is required"
    );
    assert_eq!(
        desk.run(&["resolve", "rr-nope", "--by", "a"]).await.status.code(),
        Some(2)
    );
    assert_eq!(
        desk.run(&["export", "--since", "yesterday"]).await.status.code(),
        Some(2)
    );
    let unconfigured = tokio::process::Command::new(admin_binary())
        .arg("pending")
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(unconfigured.status.code(), Some(2));
    assert!(
        stderr(&unconfigured).contains("LEDGER_TABLE"),
        "{}",
        stderr(&unconfigured)
    );
}

#[tokio::test]
async fn the_loser_of_a_cancelled_transaction_is_told_who_decided() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;
    // Bob's approval commits while Alice's transaction is in flight: DynamoDB
    // cancels hers with TransactionConflict rather than a failed condition.
    let (aws, table, bobs_id) = (desk.h.aws.clone(), desk.h.table.clone(), id.clone());
    let injected = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hook: Hook = Arc::new(move |seen: &Seen| {
        let (aws, table, id, injected) = (aws.clone(), table.clone(), bobs_id.clone(), injected.clone());
        let operation = seen.dynamodb_operation().to_owned();
        let body: Value = serde_json::from_slice(&seen.body).unwrap_or(Value::Null);
        Box::pin(async move {
            if operation != "TransactWriteItems" || injected.swap(true, Ordering::SeqCst) {
                return Action::Forward;
            }
            let ledger = refund_chat::ledger::dynamo::DynamoLedger::from_sdk_config(&aws, &table, LEDGER_TIMEOUT);
            let bob = claim(&ledger, &id, "bob", "staff:bob/1").await;
            assert!(
                matches!(bob, Ok(refund_chat::ledger::StaffDecision::Done(_))),
                "{bob:?}"
            );
            transaction_conflict(body["TransactItems"].as_array().map_or(1, Vec::len))
        })
    });
    let proxy = proxy(&moto().endpoint, false, hook).await;

    let alice = admin(
        &desk.h.table,
        &proxy,
        &desk.payments.uri(),
        &["approve", &id, "--by", "alice"],
    )
    .await;

    assert_eq!(alice.status.code(), Some(1), "{}", stderr(&alice));
    assert!(stderr(&alice).contains("decided by bob"), "{}", stderr(&alice));
    assert!(desk.paid().await.is_empty(), "Alice never reached payments");
}

#[tokio::test]
async fn an_approval_whose_claim_answer_was_lost_still_pays_exactly_once() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;
    // The claim lands in DynamoDB, but its answer arrives after LEDGER_TIMEOUT_SECS.
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = OperationLog::default();
    let hook = log.hook(move |seen| {
        if seen.dynamodb_operation() == "TransactWriteItems" && !stalled.swap(true, Ordering::SeqCst) {
            Action::DelayAfter(std::time::Duration::from_millis(1500))
        } else {
            Action::Forward
        }
    });
    let proxy = proxy(&moto().endpoint, false, hook).await;

    let approved = admin_with(
        &desk.h.table,
        &proxy,
        &desk.payments.uri(),
        &[("LEDGER_TIMEOUT_SECS", "0.5")],
        &["approve", &id, "--by", "alice"],
    )
    .await;

    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert_eq!(desk.paid().await.len(), 1);
    let record = desk.record(&id).await;
    assert_eq!(attr(&record, "state"), Some("executed"));
    assert_eq!(attr(&record, "decided_by"), Some("alice"));
}

/// A customer's message that tries to rewrite the approver's screen: move the
/// cursor up, erase the line, recolour, an 8-bit CSI, and a right-to-left override.
const ESCAPING: &str =
    "Sofa torn \u{1b}[7A\u{1b}[2K\u{1b}[31mAMOUNT 1.00\u{9b}2J\u{202e}00.021 refund D-4001\u{1b}[1A 12000";

fn assert_no_control_characters(shown: &str) {
    for forbidden in ['\u{1b}', '\u{9b}', '\u{202e}', '\u{7}'] {
        assert!(
            !shown.contains(forbidden),
            "{forbidden:?} reached the terminal:\n{shown:?}"
        );
    }
}

#[tokio::test]
async fn control_characters_in_a_message_never_reach_the_approvers_terminal() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund_saying("req-1", ESCAPING).await;

    for args in [vec!["pending"], vec!["show", id.as_str()]] {
        let output = desk.run(&args).await;
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let shown = stdout(&output);
        assert_no_control_characters(&shown);
        assert!(shown.contains("\\u{1b}[7A"), "made visible, not dropped: {shown}");
        assert!(shown.contains("120.00") || shown.contains("12000"), "{shown}");
    }
    let exported = desk.run(&["export"]).await;
    assert_no_control_characters(&stdout(&exported));
    let records: Vec<Value> = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(records[0]["customer_message"], ESCAPING, "the JSON export is exact");
    let approved = desk.run(&["approve", &id, "--by", "alice"]).await;
    assert_no_control_characters(&stdout(&approved));
    assert_no_control_characters(&stderr(&approved));
}

#[tokio::test]
async fn pending_shows_the_customers_whole_message() {
    let desk = Desk::new(receipt()).await;
    let words: Vec<String> = (1..=60).map(|i| format!("word{i}")).collect();
    let message = format!("{} refund D-4001 12000", words.join(" "));
    desk.pending_refund_saying("req-1", &message).await;

    let shown = stdout(&desk.run(&["pending"]).await);

    for word in &words {
        assert!(shown.contains(word.as_str()), "{word} missing:\n{shown}");
    }
    let column = shown
        .lines()
        .next()
        .and_then(|header| header.find("MESSAGE"))
        .expect("a MESSAGE column");
    assert!(shown.lines().count() > 2, "wrapped onto continuation lines:\n{shown}");
    assert!(
        shown.lines().all(|line| line.chars().count() <= column + 60),
        "wrapped at 60 characters:\n{shown}"
    );
}

#[tokio::test]
async fn the_csv_export_neutralises_formulas_and_the_json_export_is_exact() {
    let desk = Desk::new(receipt()).await;
    let message = "=HYPERLINK(\"http://evil.example\",\"click\") refund @D-4001 12000";
    desk.pending_refund_saying("req-1", message).await;

    let csv_export = desk.run(&["export", "--format", "csv"]).await;
    let mut reader = csv::Reader::from_reader(csv_export.stdout.as_slice());
    let headers = reader.headers().unwrap().clone();
    let row = reader.records().next().unwrap().unwrap();
    let cell = |name: &str| {
        row.get(headers.iter().position(|h| h == name).unwrap())
            .unwrap()
            .to_owned()
    };
    assert_eq!(cell("customer_message"), format!("'{message}"));
    assert_eq!(cell("order_id"), "'@D-4001");
    assert_eq!(cell("amount_cents"), "12000", "numbers are left alone");

    let json_export: Vec<Value> = serde_json::from_slice(&desk.run(&["export"]).await.stdout).unwrap();
    assert_eq!(json_export[0]["customer_message"], message);
    assert_eq!(json_export[0]["order_id"], "@D-4001");
}

#[tokio::test]
async fn a_stuck_approval_is_paid_only_after_a_person_resolved_it_and_only_once() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund("req-1").await;
    let ledger = refund_chat::ledger::dynamo::DynamoLedger::from_sdk_config(&desk.h.aws, &desk.h.table, LEDGER_TIMEOUT);
    let now = refund_chat::clock::now_ms();
    // Alice's claim landed and her process died before it called payments.
    let claimed = claim(&ledger, &id, "alice", "staff:alice/lost").await;
    assert!(matches!(claimed, Ok(refund_chat::ledger::StaffDecision::Done(_))));

    // Before a person has checked with payments, nothing pays it.
    let early = desk.run(&["reissue", &id, "--by", "erin"]).await;
    assert_eq!(early.status.code(), Some(1), "{}", stderr(&early));
    let again = desk.run(&["approve", &id, "--by", "bob"]).await;
    assert!(stderr(&again).contains("decided by alice"), "{}", stderr(&again));
    // The sweep watched it on its own clock (a cut-off in the future plays
    // the function's timeout passing) and called it unknown; then Dan
    // checked with payments: no refund was made.
    for _ in 0..2 {
        let later = refund_chat::clock::now_ms() + 1;
        ledger.sweep_executing(later, later).await.unwrap();
    }
    assert_eq!(attr(&desk.record(&id).await, "state"), Some("unknown"));
    let resolved = ledger
        .resolve(
            &id,
            &refund_chat::ledger::Confirmed::NotExecuted,
            refund_chat::conversation::person::Person::named("dan"),
            now + 1,
            now,
        )
        .await;
    assert!(matches!(resolved, Ok(refund_chat::ledger::StaffDecision::Done(_))));

    let reissued = desk.run(&["reissue", &id, "--by", "erin"]).await;
    let twice = desk.run(&["reissue", &id, "--by", "frank"]).await;

    assert_eq!(reissued.status.code(), Some(0), "{}", stderr(&reissued));
    assert!(stdout(&reissued).contains("refunded 120.00"), "{}", stdout(&reissued));
    assert_eq!(twice.status.code(), Some(1), "{}", stderr(&twice));
    assert!(stderr(&twice).contains("already reissued"), "{}", stderr(&twice));
    assert_eq!(
        desk.paid().await,
        vec![json!({"order_id": "D-4001", "amount_cents": 12000, "user_id": "u-1001"})]
    );
    let original = desk.record(&id).await;
    let reissue_id = attr(&original, "reissued_as")
        .expect("linked to its reissue")
        .to_owned();
    assert_eq!(
        attr(&original, "resolution"),
        Some("not_executed"),
        "the original is kept"
    );
    let reissue = desk.record(&reissue_id).await;
    assert_eq!(attr(&reissue, "state"), Some("executed"));
    assert_eq!(attr(&reissue, "reissue_of"), Some(id.as_str()));
    assert_eq!(attr(&reissue, "decided_by"), Some("erin"));
}
