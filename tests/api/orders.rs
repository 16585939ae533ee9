//! The order, seen and checked (contract 16), end to end: the order system
//! read over HTTP as the verified customer, `get_order`'s answer without the
//! address, and the refund checked against the order code read itself:
//! refused before any record, or sent to a person with the order's facts on
//! the record, which `pending` and `show` print.

use lambda_http::http::StatusCode;
use serde_json::Value;
use wiremock::{Request, ResponseTemplate};

use crate::approvals::{admin, stdout};
use crate::observability::logged_turn;
use refund_chat_testkit::*;

const PERSONAL: [&str; 4] = ["Ada Quokka", "1 Zanzibar Lane", "Lyon", "69002"];

/// The order reads the function made: (path, `X-Customer-Id`).
async fn order_reads(h: &TestApp) -> Vec<(String, String)> {
    h.payments
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.method.as_str() == "GET")
        .map(|r| {
            let customer = r
                .headers
                .get("x-customer-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            (r.url.path().to_owned(), customer.to_owned())
        })
        .collect()
}

/// Every order the customer asks for, as `order_json` makes it.
fn orders_answering(status: &'static str, delivered_days_ago: Option<u64>) -> impl Fn(&Request) -> ResponseTemplate {
    move |request: &Request| {
        let order_id = request.url.path().trim_start_matches("/orders/").to_owned();
        ResponseTemplate::new(200).set_body_json(order_json(&order_id, USER, status, delivered_days_ago))
    }
}

#[tokio::test]
async fn get_order_reads_as_the_verified_customer_and_the_address_reaches_no_prompt_log_or_exchange() {
    let h = TestApp::new(
        vec![
            tool_calls(&[("g1", "get_order", r#"{"order_id":"A 1/ü"}"#)]),
            text("Your order was delivered yesterday."),
        ],
        receipt(),
    )
    .await;

    let (answer, logs) = logged_turn(&h, "where is my order A 1/ü?").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(
        order_reads(&h).await,
        vec![("/orders/A%201%2F%C3%BC".to_owned(), USER.to_owned())],
        "the id percent-encoded as a path segment, the customer the authorizer's"
    );
    let told = tool_content(&tool_messages(&h.model_requests().await[1])[0]);
    assert_eq!(told["status"], "delivered");
    assert_eq!(told["ship_to"], "address ending in 002");
    assert!(told["refundable_cents"].is_u64(), "{told}");
    let prompts = serde_json::to_string(&h.model_requests().await).unwrap();
    let stored = format!("{:?}", items(&h.aws, &conversation_table(&h.table)).await);
    assert!(stored.contains("address ending in 002"), "the exchange was stored");
    for personal in PERSONAL {
        assert!(!prompts.contains(personal), "{personal} reached the model");
        assert!(!logs.text().contains(personal), "{personal} reached a log line");
        assert!(!stored.contains(personal), "{personal} reached a stored exchange");
    }
    assert!(h.payments_requests().await.is_empty(), "a lookup moves no money");
}

#[tokio::test]
async fn another_customers_order_is_refused_before_any_record_and_the_model_may_try_again() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "A-1001", 1250),
            refund_call("c2", "A-1002", 1250),
            text("Done."),
        ])
        .orders(|request: &Request| {
            let order_id = request.url.path().trim_start_matches("/orders/").to_owned();
            // The order system answers 200 with someone else's order for A-1001.
            let owner = if order_id == "A-1001" { "u-someone-else" } else { USER };
            ResponseTemplate::new(200).set_body_json(order_json(&order_id, owner, "delivered", Some(1)))
        })
        .build()
        .await;

    let answer = h.chat("refund A-1001, or else A-1002").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let second = &h.model_requests().await[1];
    assert_eq!(
        tool_error(&tool_messages(second)[0]).as_deref(),
        Some("no order A-1001 for this customer")
    );
    let payments: Vec<Value> = h.payments_requests().await;
    assert_eq!(payments.len(), 1, "only the customer's own order was paid");
    assert_eq!(payments[0]["order_id"], "A-1002");
    let records = h.refund_records().await;
    assert_eq!(records.len(), 1, "the refusal wrote no record");
    assert_eq!(attr(&records[0], "order_id"), Some("A-1002"));
}

#[tokio::test]
async fn outside_the_refund_window_waits_for_a_person_and_pending_and_show_print_the_order() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "F-6001", 1250),
            text("A person will review it."),
        ])
        .orders(orders_answering("delivered", Some(45)))
        .build()
        .await;

    let answer = h.chat("my lamp from F-6001 broke, refund 12.50").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert!(h.payments_requests().await.is_empty(), "nothing paid");
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "state"), Some("awaiting_approval"));
    assert_eq!(
        record["reasons"].as_l().unwrap()[0].as_s().unwrap(),
        "outside_refund_window"
    );
    assert_eq!(attr(record, "order_status"), Some("delivered"));
    assert!(attr(record, "order_delivered_at").is_some());
    assert_eq!(record["order_paid_cents"].as_n().unwrap(), "10000000");
    assert_eq!(attr(record, "order_currency"), Some("EUR"));
    for name in record.keys() {
        assert!(
            !name.contains("ship") && !name.contains("address"),
            "{name} on the record"
        );
    }

    let aws = moto().endpoint.clone();
    let pending = stdout(&admin(&h.table, &aws, &h.payments.uri(), &["pending"]).await);
    assert!(pending.contains("outside_refund_window"), "{pending}");
    assert!(
        pending.contains("paid 100000.00 EUR"),
        "the approver sees the order: {pending}"
    );
    let id = attr(record, "record_id").unwrap();
    let show = stdout(&admin(&h.table, &aws, &h.payments.uri(), &["show", id]).await);
    assert!(
        show.contains("order_status") && show.contains("order_paid_cents"),
        "{show}"
    );
}

#[tokio::test]
async fn a_refund_of_an_order_not_delivered_waits_for_a_person() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "E-5001", 1250),
            text("A person will review it."),
        ])
        .orders(orders_answering("shipped", None))
        .build()
        .await;

    h.chat("E-5001 never came, refund 12.50").await;

    assert!(h.payments_requests().await.is_empty());
    let record = &h.refund_records().await[0];
    assert_eq!(record["reasons"].as_l().unwrap()[0].as_s().unwrap(), "not_delivered");
    assert_eq!(attr(record, "order_status"), Some("shipped"));
}

#[tokio::test]
async fn an_order_system_that_fails_is_read_twice_then_the_refund_waits_for_a_person() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "A-1001", 1250),
            text("A person will review it."),
        ])
        .orders(ResponseTemplate::new(503))
        .build()
        .await;

    let answer = h.chat(REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(order_reads(&h).await.len(), 2, "a 5xx is tried once more");
    assert!(
        h.payments_requests().await.is_empty(),
        "never paid on an order code could not read"
    );
    let record = &h.refund_records().await[0];
    assert_eq!(record["reasons"].as_l().unwrap()[0].as_s().unwrap(), "order_unverified");
    assert_eq!(attr(record, "order_status"), None, "no facts: none were read");
}
