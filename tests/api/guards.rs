//! Rules 2 and 3 over time (contract 8): whatever TTL removes and however
//! late a person decides, a refund that may have moved money keeps counting,
//! a release never counts below zero nor brings back a removed guard, and an
//! approval never shortens a guard. TTL is played by deleting the guard
//! items, as DynamoDB's TTL would (moto never expires items itself).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use refund_chat::clock::{now_ms, utc_day};
use refund_chat::config::DEFAULT_LIMITS;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{AutomaticWrite, CountsFor, RefundLedger};
use refund_chat::ledger::{Confirmed, StaffDecision};
use refund_chat::refund::message::CustomerMessage;
use refund_chat::refund::money::AmountCents;
use refund_chat::refund::{Attempt, PaymentOutcome, RefundError, RefundRequest, RefundScope, WriterMark};
use serde_json::json;

use refund_chat_testkit::*;

type Item = HashMap<String, AttributeValue>;

fn staff_ledger<K>(h: &TestApp<K>) -> DynamoLedger {
    DynamoLedger::from_sdk_config(&h.aws, &h.table, LEDGER_TIMEOUT)
}

/// The guard items (rule 2's per order, rule 3's per customer and day).
async fn guards<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) -> Vec<Item> {
    h.ledger()
        .await
        .into_iter()
        // By key, not `kind`: an item an update created by itself has no `kind`.
        .filter(|item| attr(item, "pk").is_some_and(|pk| pk.starts_with("order#") || pk.starts_with("daily#")))
        .collect()
}

/// What DynamoDB's TTL does once the guards' `expires_at` has passed.
async fn expire_guards<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) {
    let client = aws_sdk_dynamodb::Client::new(&h.aws);
    for guard in guards(h).await {
        client
            .delete_item()
            .table_name(&h.table)
            .key("pk", guard["pk"].clone())
            .send()
            .await
            .expect("delete a guard as TTL would");
    }
}

/// The approval id the model was told in the last turn.
async fn last_approval_id<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) -> String {
    let requests = h.model_requests().await;
    let told = tool_content(&tool_messages(requests.last().expect("a model request"))[0]);
    assert_eq!(told["status"], "pending_approval", "{told}");
    told["approval_id"].as_str().expect("an approval id").to_owned()
}

/// No guard counts below zero: every number a guard holds is 0 or more.
async fn assert_no_negative_guard<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) {
    for guard in guards(h).await {
        for (name, value) in &guard {
            if let Ok(number) = value.as_n() {
                assert!(!number.starts_with('-'), "{name} = {number} in {guard:?}");
            }
        }
    }
}

#[tokio::test]
async fn a_rejection_after_the_guard_expired_lets_no_two_automatic_refunds_of_the_order_through() {
    let h = TestApp::builder().model_responder(refunding_model).build().await;
    // Friday 18:00: 80.00 on X-1 goes to a person.
    chat_as(&h, "req-friday", "refund X-1 8000").await;
    let approval = last_approval_id(&h).await;
    // The weekend: TTL removes the guard.
    expire_guards(&h).await;
    // Monday 09:00: staff reject it.
    let rejected = staff_ledger(&h)
        .reject(
            &approval,
            refund_chat::conversation::person::Person::named("carol"),
            "not eligible",
            now_ms(),
        )
        .await;
    assert!(matches!(rejected, Ok(StaffDecision::Done(_))), "{rejected:?}");

    // Two automatic refunds of 40.00 on X-1: together within rule 3's 100.00.
    chat_as(&h, "req-monday-1", "refund X-1 4000").await;
    chat_as(&h, "req-monday-2", "refund X-1 4000").await;

    assert_eq!(h.payments_requests().await.len(), 1, "the second goes to a person");
    assert_eq!(last_approval_id(&h).await.len(), "rr-".len() + 32);
    assert_no_negative_guard(&h).await;
}

#[tokio::test]
async fn a_release_never_goes_below_zero_nor_brings_back_a_removed_guard() {
    let h = TestApp::builder().model_responder(refunding_model).build().await;
    chat_as(&h, "req-1", "refund X-2 8000").await;
    let approval = last_approval_id(&h).await;
    expire_guards(&h).await;

    let rejected = staff_ledger(&h)
        .reject(
            &approval,
            refund_chat::conversation::person::Person::named("carol"),
            "duplicate",
            now_ms(),
        )
        .await;

    assert!(matches!(rejected, Ok(StaffDecision::Done(_))), "{rejected:?}");
    assert!(guards(&h).await.is_empty(), "{:?}", guards(&h).await);
}

#[tokio::test]
async fn a_late_rejection_never_releases_a_later_refunds_guard() {
    let h = TestApp::builder().model_responder(refunding_model).build().await;
    chat_as(&h, "req-friday", "refund X-3 8000").await;
    let friday = last_approval_id(&h).await;
    expire_guards(&h).await;
    // Monday 08:00: an automatic refund of the order, rightly: Friday's is out of the window.
    chat_as(&h, "req-monday-1", "refund X-3 2000").await;
    assert_eq!(h.payments_requests().await.len(), 1);
    // Monday 09:00: Friday's is rejected; its release must not free Monday's guard.
    let rejected = staff_ledger(&h)
        .reject(
            &friday,
            refund_chat::conversation::person::Person::named("carol"),
            "late",
            now_ms(),
        )
        .await;
    assert!(matches!(rejected, Ok(StaffDecision::Done(_))), "{rejected:?}");

    chat_as(&h, "req-monday-2", "refund X-3 2000").await;

    assert_eq!(h.payments_requests().await.len(), 1, "Monday's refund still counts");
    let record = h
        .refund_records()
        .await
        .into_iter()
        .find(|r| attr(r, "request_id") == Some("req-monday-2"))
        .expect("the second Monday refund's record");
    assert_eq!(attr(&record, "state"), Some("awaiting_approval"));
    assert_no_negative_guard(&h).await;
}

#[tokio::test]
async fn an_approval_never_shortens_a_guard() {
    let h = TestApp::builder()
        .model_responder(refunding_model)
        .configure(|config| config.limits.order_window = std::time::Duration::from_secs(72 * 3600))
        .build()
        .await;
    let expiry = |guards: Vec<Item>| {
        guards
            .iter()
            .find(|g| attr(g, "pk").is_some_and(|pk| pk.starts_with("order#")))
            .and_then(|g| refund_chat::ledger::dynamo::number(g, "expires_at"))
            .expect("the order guard's expiry")
    };
    let before = now_ms() / 1000;
    chat_as(&h, "req-1", "refund X-4 1000").await;
    let automatic = expiry(guards(&h).await);
    assert!(automatic >= before + 72 * 3600, "the guard outlives the 72 h window");

    chat_as(&h, "req-2", "refund X-4 9000").await;
    last_approval_id(&h).await;

    assert!(
        expiry(guards(&h).await) >= automatic,
        "the approval kept or extended the guard"
    );
}

#[tokio::test]
async fn order_ids_that_differ_in_case_or_white_space_are_one_order() {
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1000),
            text("Refunded."),
            refund_call("c2", " a-1001 ", 1000),
            text("A person will look at it."),
        ],
        receipt(),
    )
    .await;

    chat_as(&h, "req-1", "refund A-1001 1000").await;
    chat_as(&h, "req-2", "and again for a-1001").await;

    assert_eq!(h.payments_requests().await.len(), 1);
    let told = tool_content(&tool_messages(h.model_requests().await.last().unwrap())[0]);
    assert_eq!(told["reasons"], json!(["order_refunded_recently"]), "{told}");
}

#[tokio::test]
async fn an_approval_days_later_counts_for_the_order_from_its_payment() {
    let h = TestApp::builder().model_responder(refunding_model).build().await;
    chat_as(&h, "req-friday", "refund X-5 8000").await;
    let friday = last_approval_id(&h).await;
    expire_guards(&h).await;
    let http = refund_chat::http_client::money_path_client().unwrap();
    let payments = refund_chat::refund::payments::HttpPayments::new(http, &h.payments.uri(), PAYMENTS_TIMEOUT);

    let orders = refund_chat::orders::http::HttpOrders::new(
        refund_chat::http_client::money_path_client().unwrap(),
        &h.payments.uri(),
        PAYMENTS_TIMEOUT,
    );
    let approved = refund_chat::record_then_pay::approvals::approve(
        &staff_ledger(&h),
        &payments,
        &orders,
        &friday,
        refund_chat::conversation::person::Person::named("alice"),
        &WriterMark::fixed("staff:alice/1"),
        &DEFAULT_LIMITS,
    )
    .await;
    assert!(approved.is_ok(), "{approved:?}");
    chat_as(&h, "req-monday", "refund X-5 1000").await;

    assert_eq!(h.payments_requests().await.len(), 1, "the approved refund only");
    last_approval_id(&h).await;
}

fn direct_request(request_id: &str, order_id: &str, cents: u64, writer: &str) -> RefundRequest {
    RefundRequest {
        routed: Default::default(),
        attempt: Attempt {
            scope: RefundScope::for_request(USER, request_id),
            writer: WriterMark::fixed(format!("{request_id}/{writer}")),
            conversation: None,
            day_owner: None,
        },
        order_id: order_id.to_owned(),
        amount: AmountCents::new(cents),
        message: CustomerMessage::new(""),
        order: refund_chat::doubles::a_delivered_order(),
    }
}

#[tokio::test]
async fn a_late_outcome_never_lands_on_a_resolved_record() {
    let h = TestApp::builder().build().await;
    let ledger = staff_ledger(&h);
    let now = now_ms();
    let counted = CountsFor::Rules2And3 { day: utc_day(now) };
    for (request_id, late) in [
        (
            "req-late-rejected",
            PaymentOutcome::Rejected {
                status: 409,
                detail: "no".into(),
            },
        ),
        ("req-late-unknown", PaymentOutcome::Unknown(RefundError::Timeout)),
    ] {
        let request = direct_request(request_id, &format!("L-{request_id}"), 1000, "w-sleepy-laptop");
        assert_eq!(
            ledger.record_automatic(&request, &DEFAULT_LIMITS, now).await,
            Ok(AutomaticWrite::Recorded)
        );
        let id = request.scope().record_id();
        // A person checked with payments and resolved it while the answer was on its way.
        let resolved = ledger
            .resolve(
                &id,
                &Confirmed::NotExecuted,
                refund_chat::conversation::person::Person::named("dan"),
                now_ms() + 1,
                now_ms(),
            )
            .await;
        assert!(matches!(resolved, Ok(StaffDecision::Done(_))), "{resolved:?}");
        let before = ledger.record(&id).await.unwrap().unwrap();

        let landed = ledger.record_outcome(&request, &late, &counted, now_ms()).await;

        assert!(landed.is_err(), "{request_id}: the late outcome was refused");
        assert_eq!(ledger.record(&id).await.unwrap().unwrap(), before, "{request_id}");
    }
    assert_no_negative_guard(&h).await;
    let daily = guards(&h)
        .await
        .into_iter()
        .find(|g| attr(g, "pk").is_some_and(|pk| pk.starts_with("daily#")));
    let total = daily.and_then(|d| refund_chat::ledger::dynamo::number(&d, "total_cents"));
    assert_eq!(total.unwrap_or(0), 0, "released once each, by the resolutions");
}

#[tokio::test]
async fn a_refund_rejected_by_payments_after_its_guard_expired_releases_nothing() {
    let h = TestApp::builder().build().await;
    let ledger = staff_ledger(&h);
    let now = now_ms();
    let request = direct_request("req-slow", "S-1", 1000, "w-slow");
    assert_eq!(
        ledger.record_automatic(&request, &DEFAULT_LIMITS, now).await,
        Ok(AutomaticWrite::Recorded)
    );
    expire_guards(&h).await;
    let rejected = PaymentOutcome::Rejected {
        status: 422,
        detail: "order not found".into(),
    };

    let recorded = ledger
        .record_outcome(
            &request,
            &rejected,
            &CountsFor::Rules2And3 { day: utc_day(now) },
            now_ms(),
        )
        .await;

    assert_eq!(recorded, Ok(()));
    assert!(guards(&h).await.is_empty(), "{:?}", guards(&h).await);
    let record = ledger.record(&request.scope().record_id()).await.unwrap().unwrap();
    assert_eq!(record.state, refund_chat::refund::RefundState::Rejected);
}
