//! An approval pays on the order as it is now (contract 16): the order read
//! afresh, less the refunds of the order still in flight, and a claim that
//! only one of two approvals of one order can win; an approver that slept
//! between its claim and payments pays nothing; an outcome the ledger could
//! not record is said with an exit status of its own (contract 9). The
//! real `refund-chat-admin` against moto and the payments sandbox, which
//! is the order system too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{RefundLedger, StaffLedger};
use refund_chat::record_then_pay::approvals::{self, ApprovalError};
use refund_chat_local::payments_sandbox::Sandbox;
use serde_json::json;

use super::approvals::{Desk, admin_with, stderr, stdout};
use refund_chat_testkit::*;

/// Order D-4001 of u-1001 paid 100.00, nothing refunded yet.
const PAID: u64 = 10_000;
const EIGHTY: &str = "The lamp from order D-4001 arrived broken: refund D-4001 8000";

/// The sandbox (payments and the order system) with D-4001, on 127.0.0.1.
async fn shop() -> (Sandbox, String) {
    let sandbox = Sandbox::with_orders(&[("D-4001", "u-1001", PAID, 0)], None).unwrap();
    let address = refund_chat_local::spawn(0, sandbox.router()).await.unwrap();
    (sandbox, format!("http://{address}"))
}

async fn approve(desk: &Desk, ledger: &str, shop: &str, id: &str, by: &str) -> std::process::Output {
    admin_with(&desk.h.table, ledger, shop, &[], &["approve", id, "--by", by]).await
}

fn state(record: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> String {
    attr(record, "state").unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_second_approval_of_one_order_pays_only_what_the_order_has_left() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    // Both asked on the same day; the order then had 100.00 to refund.
    let first = desk.pending_refund_saying("req-1", EIGHTY).await;
    let second = desk.pending_refund_saying("req-2", EIGHTY).await;

    let paid = approve(&desk, &moto().endpoint, &shop, &first, "sam").await;
    let refused = approve(&desk, &moto().endpoint, &shop, &second, "kim").await;

    assert_eq!(paid.status.code(), Some(0), "{}", stderr(&paid));
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("20.00") && stderr(&refused).contains("still awaits a decision"),
        "says how much remains: {}",
        stderr(&refused)
    );
    assert_eq!(sandbox.refunds_made().len(), 1, "80.00 once, never 160.00 of 100.00");
    assert_eq!(state(&desk.record(&second).await), "awaiting_approval");
    assert!(!stdout(&refused).contains("refunded"));
}

#[tokio::test]
async fn two_approvals_of_one_order_at_once_pay_once() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    let first = desk.pending_refund_saying("req-1", EIGHTY).await;
    let second = desk.pending_refund_saying("req-2", EIGHTY).await;
    // Both claims are held until both approvers have read the order and
    // sent theirs, so each checked the order before the other claimed;
    // then one request at a time, as DynamoDB orders writes of one item.
    let both_claimed = Arc::new(tokio::sync::Barrier::new(2));
    let ledger = proxy(
        &moto().endpoint,
        true,
        Arc::new(move |seen: &Seen| {
            let claim = seen.dynamodb_operation() == "TransactWriteItems"
                && String::from_utf8_lossy(&seen.body).contains("approval_step = :claimed");
            let both_claimed = both_claimed.clone();
            Box::pin(async move {
                if claim {
                    both_claimed.wait().await;
                }
                Action::Forward
            })
        }),
    )
    .await;

    let (a, b) = tokio::join!(
        approve(&desk, &ledger, &shop, &first, "sam"),
        approve(&desk, &ledger, &shop, &second, "kim"),
    );

    let codes = [a.status.code(), b.status.code()];
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(1)),
        "one pays, one is refused: {codes:?}\n{}\n{}",
        stderr(&a),
        stderr(&b)
    );
    assert_eq!(sandbox.refunds_made().len(), 1);
    let states = [state(&desk.record(&first).await), state(&desk.record(&second).await)];
    assert!(
        states.contains(&"executed".to_owned()) && states.contains(&"awaiting_approval".to_owned()),
        "{states:?}"
    );
}

#[tokio::test]
async fn an_approval_counts_the_refunds_of_the_order_still_in_flight() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    let id = desk.pending_refund_saying("req-1", EIGHTY).await;
    // An automatic refund of 40.00 of the same order, recorded and not yet
    // answered by payments: the order system cannot show it yet.
    let ledger = DynamoLedger::from_sdk_config(&desk.h.aws, &desk.h.table, LEDGER_TIMEOUT);
    let in_flight = refund_chat::refund::RefundRequest {
        routed: Default::default(),
        attempt: refund_chat::refund::Attempt {
            scope: refund_chat::refund::RefundScope::for_request("u-1001", "req-other-tab"),
            writer: refund_chat::refund::WriterMark::fixed("req-other-tab/w"),
            conversation: None,
            day_owner: None,
        },
        order_id: "D-4001".into(),
        amount: refund_chat::refund::money::AmountCents::new(4000),
        message: refund_chat::refund::message::CustomerMessage::new("refund 40"),
        order: refund_chat::doubles::a_delivered_order(),
    };
    let mut limits = refund_chat::config::DEFAULT_LIMITS;
    // Rule 2 would send it to a person: this one is the other tab's automatic refund.
    limits.order_window = std::time::Duration::ZERO;
    let recorded = ledger
        .record_automatic(&in_flight, &limits, refund_chat::clock::now_ms())
        .await;
    assert!(
        matches!(recorded, Ok(refund_chat::ledger::AutomaticWrite::Recorded)),
        "{recorded:?}"
    );

    let refused = approve(&desk, &moto().endpoint, &shop, &id, "sam").await;

    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("60.00") && stderr(&refused).contains("40.00 in refunds"),
        "{}",
        stderr(&refused)
    );
    assert!(sandbox.refunds_made().is_empty());
    assert_eq!(state(&desk.record(&id).await), "awaiting_approval");
}

#[tokio::test]
async fn an_order_that_cannot_be_read_is_refused_and_pays_nothing() {
    let desk = Desk::new(receipt()).await;
    let id = desk.pending_refund_saying("req-1", EIGHTY).await;
    let down = format!("http://127.0.0.1:{}", free_port());

    let refused = admin_with(
        &desk.h.table,
        &moto().endpoint,
        &desk.payments.uri(),
        &[("ORDERS_BASE_URL", down.as_str())],
        &["approve", &id, "--by", "sam"],
    )
    .await;

    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("try again"), "{}", stderr(&refused));
    assert!(desk.paid().await.is_empty());
    assert_eq!(state(&desk.record(&id).await), "awaiting_approval");
}

#[tokio::test]
async fn an_outcome_the_ledger_could_not_record_has_an_exit_status_of_its_own() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    let id = desk.pending_refund_saying("req-1", EIGHTY).await;
    // Every write of the executed outcome fails.
    let ledger = proxy(
        &moto().endpoint,
        false,
        Arc::new(|seen: &Seen| {
            let outcome = String::from_utf8_lossy(&seen.body).contains(":receipt_status");
            Box::pin(async move {
                if outcome {
                    dynamo_error("InternalServerError", "injected", json!({}))
                } else {
                    Action::Forward
                }
            })
        }),
    )
    .await;

    let approved = approve(&desk, &ledger, &shop, &id, "sam").await;

    assert_eq!(approved.status.code(), Some(3), "{}", stderr(&approved));
    assert!(
        stderr(&approved).contains("could not record") && stderr(&approved).contains("--executed"),
        "{}",
        stderr(&approved)
    );
    assert!(!stdout(&approved).contains("refunded"), "never printed as done");
    assert_eq!(sandbox.refunds_made().len(), 1);
    assert_eq!(state(&desk.record(&id).await), "executing");
}

/// An approver (the library, as the admin runs it) against `ledger`, paying to `shop`.
async fn approver(
    table: &str,
    ledger_endpoint: &str,
    shop: &str,
    id: &str,
) -> Result<approvals::Approved, ApprovalError> {
    let aws = aws_at(ledger_endpoint).await;
    let ledger = DynamoLedger::from_sdk_config(&aws, table, LEDGER_TIMEOUT);
    let http = refund_chat::http_client::money_path_client().unwrap();
    let payments = refund_chat::refund::payments::HttpPayments::new(http.clone(), shop, PAYMENTS_TIMEOUT);
    let orders = refund_chat::orders::http::HttpOrders::new(http, shop, PAYMENTS_TIMEOUT);
    approvals::approve(
        &ledger,
        &payments,
        &orders,
        id,
        refund_chat::conversation::person::Person::named("sam"),
        &refund_chat::refund::WriterMark::fixed("staff:sam/laptop"),
        &refund_chat::config::DEFAULT_LIMITS,
    )
    .await
}

/// The sweep's run at `now_ms` on its own clock, the function's timeout passed.
async fn sweep(desk: &Desk, now_ms: u64) -> Vec<String> {
    let ledger = DynamoLedger::from_sdk_config(&desk.h.aws, &desk.h.table, LEDGER_TIMEOUT);
    ledger.sweep_executing(now_ms, now_ms).await.unwrap()
}

#[tokio::test]
async fn an_approver_that_slept_after_its_claim_never_pays_what_the_sweep_called_unknown() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    let id = desk.pending_refund_saying("req-1", EIGHTY).await;
    // The laptop is closed right after the claim landed: its next write
    // (the last step before payments) waits until it is opened again.
    let (asleep, wake) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let ledger = proxy(&moto().endpoint, false, {
        let (asleep, wake) = (asleep.clone(), wake.clone());
        let once = Arc::new(AtomicBool::new(false));
        Arc::new(move |seen: &Seen| {
            let paying = String::from_utf8_lossy(&seen.body).contains("approval_step = :paying")
                && !once.swap(true, Ordering::SeqCst);
            let (asleep, wake) = (asleep.clone(), wake.clone());
            Box::pin(async move {
                if paying {
                    asleep.notify_one();
                    wake.notified().await;
                }
                Action::Forward
            })
        })
    })
    .await;
    let approval = tokio::spawn({
        let (table, ledger, shop, id) = (desk.h.table.clone(), ledger.clone(), shop.clone(), id.clone());
        async move { approver(&table, &ledger, &shop, &id).await }
    });
    asleep.notified().await;

    // Meanwhile the sweep watches it on its own clock: seen once, then
    // seen again a function's timeout later, and called unknown.
    let now = refund_chat::clock::now_ms();
    assert!(sweep(&desk, now + 1).await.is_empty(), "first seen: only watched");
    assert_eq!(sweep(&desk, now + 2).await, std::slice::from_ref(&id));
    assert_eq!(state(&desk.record(&id).await), "unknown");
    wake.notify_one();
    let woke = approval.await.unwrap();

    assert!(
        matches!(woke, Err(ApprovalError::NotPaid { .. })),
        "payments is never called for it: {woke:?}"
    );
    assert!(sandbox.refunds_made().is_empty());
    assert_eq!(state(&desk.record(&id).await), "unknown", "for a person to resolve");
}

#[tokio::test]
async fn a_slow_approver_clock_never_lets_the_sweep_call_a_live_approval_unknown() {
    let desk = Desk::new(receipt()).await;
    let (sandbox, shop) = shop().await;
    let id = desk.pending_refund_saying("req-1", EIGHTY).await;
    let ledger = DynamoLedger::from_sdk_config(&desk.h.aws, &desk.h.table, LEDGER_TIMEOUT);
    // The approver's clock is an hour slow: its claim says it began long ago.
    let record = ledger.record(&id).await.unwrap().unwrap();
    let seen = ledger.in_flight(&record.order_id, &id).await.unwrap();
    let writer = refund_chat::refund::WriterMark::fixed("staff:sam/slow");
    let an_hour_ago = refund_chat::clock::now_ms() - 3_600_000;
    let claim = refund_chat::ledger::Claim {
        record_id: &id,
        by: refund_chat::conversation::person::Person::named("sam"),
        writer: &writer,
        now_ms: an_hour_ago,
        limits: &refund_chat::config::DEFAULT_LIMITS,
    };
    assert!(matches!(
        ledger.claim_approval(&claim, seen).await,
        Ok(refund_chat::ledger::StaffDecision::Done(_))
    ));

    // The sweep's ordinary run: the function's timeout before its own now.
    let now = refund_chat::clock::now_ms();
    let moved = ledger
        .sweep_executing(now - refund_chat::config::FUNCTION_TIMEOUT.as_millis() as u64, now)
        .await
        .unwrap();

    assert!(moved.is_empty(), "watched on the sweep's clock, not the approver's");
    assert_eq!(state(&desk.record(&id).await), "executing");
    assert!(
        ledger.start_paying(&id, &writer).await.unwrap(),
        "the approval goes on to payments"
    );
    let resolved = ledger
        .resolve(
            &id,
            &refund_chat::ledger::Confirmed::NotExecuted,
            refund_chat::conversation::person::Person::named("dan"),
            now,
            now,
        )
        .await
        .unwrap();
    assert!(
        matches!(resolved, refund_chat::ledger::StaffDecision::Refused(_)),
        "a live approval is never resolved as not executed (a reissue would pay it twice): {resolved:?}"
    );
    assert!(sandbox.refunds_made().is_empty());
    let _ = shop;
}
