//! The HTTP adapter against a mock order system: the request it makes, what each
//! answer means, which failures it tries once more.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::orders::{OrderLookup, OrderStatus, OrderSystem, OrdersError, Shopper};

fn order_json(order_id: &str, customer: &str) -> Value {
    json!({
        "order_id": order_id,
        "customer_id": customer,
        "status": "delivered",
        "placed_at": "2026-11-20T10:00:00Z",
        "delivered_at": "2026-11-24T09:30:00+01:00",
        "currency": "EUR",
        "paid_cents": 4500,
        "refunded_cents": 1000,
        "items": [{"name": "Mug", "quantity": 3, "unit_price_cents": 1500}],
        "ship_to": {"name": "Ada Quokka", "line1": "1 Zanzibar Lane", "city": "Lyon", "postcode": "69002", "country": "FR"},
        "carrier": "ignored"
    })
}

fn orders(server: &MockServer, timeout_ms: u64) -> HttpOrders {
    HttpOrders::new(reqwest::Client::new(), &server.uri(), Duration::from_millis(timeout_ms))
}

#[tokio::test]
async fn an_order_is_read_with_the_verified_customer_and_every_field_kept() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/A-1001"))
        .and(header(CUSTOMER_HEADER, "u-1001"))
        .respond_with(ResponseTemplate::new(200).set_body_json(order_json("A-1001", "u-1001")))
        .expect(1)
        .mount(&server)
        .await;

    let OrderLookup::Found(order) = orders(&server, 1000).order("A-1001", &"u-1001".into()).await else {
        panic!("the order is found");
    };

    assert_eq!(order.status, OrderStatus::Delivered);
    assert_eq!(order.refundable_cents(), 3500);
    assert_eq!(
        order.delivered_at_ms,
        Some(1_795_509_000_000),
        "an offset is read as the moment it names"
    );
    assert_eq!(order.ship_to.reference(), "address ending in 002");
    let debug = format!("{order:?}");
    for personal in ["Ada Quokka", "Zanzibar", "Lyon", "69002"] {
        assert!(!debug.contains(personal), "{personal} in {debug}");
    }
}

#[tokio::test]
async fn the_order_id_and_the_customer_are_percent_encoded() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;

    let found = orders(&server, 1000).order("A/10 01?x=é", &"u 1/é".into()).await;

    assert_eq!(found, OrderLookup::NotFound);
    let requests = server.received_requests().await.expect("recorded");
    assert_eq!(requests[0].url.path(), "/orders/A%2F10%2001%3Fx%3D%C3%A9");
    assert_eq!(requests[0].url.query(), None);
    assert_eq!(requests[0].headers[CUSTOMER_HEADER], "u%201%2F%C3%A9");
    assert_eq!(requests.len(), 1, "a 404 is an answer: not tried again");
}

#[tokio::test]
async fn another_customers_order_is_no_order() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(order_json("A-1001", "u-2002")))
        .mount(&server)
        .await;

    assert_eq!(
        orders(&server, 1000).order("A-1001", &"u-1001".into()).await,
        OrderLookup::NotFound
    );
}

fn guest(email: &str) -> Shopper {
    Shopper::Guest {
        user_id: "guest:0f1e".into(),
        email: crate::guest::GuestEmail::parse(email).unwrap(),
    }
}

fn guest_order(order_id: &str, email: &str) -> Value {
    let mut order = order_json(order_id, "");
    order["customer_id"] = Value::Null;
    order["email"] = json!(email);
    order
}

/// Contract 27: a guest's read sends the verified e-mail, and only that:
/// no customer id, and the guest's user id goes nowhere.
#[tokio::test]
async fn a_guests_order_is_read_by_the_verified_email() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/G-5001"))
        .and(header(EMAIL_HEADER, "Guest+1@Example.com"))
        .respond_with(ResponseTemplate::new(200).set_body_json(guest_order("G-5001", "guest+1@example.COM")))
        .expect(1)
        .mount(&server)
        .await;

    let OrderLookup::Found(order) = orders(&server, 1000)
        .order("G-5001", &guest("Guest+1@Example.com"))
        .await
    else {
        panic!("the guest's order is found, its e-mail compared without case");
    };

    assert_eq!(order.customer_id, "");
    let requests = server.received_requests().await.expect("recorded");
    assert!(!requests[0].headers.contains_key(CUSTOMER_HEADER));
    assert!(
        !format!("{order:?}").to_lowercase().contains("example.com"),
        "no e-mail in a Debug"
    );
}

/// Contract 27: a 200 for another e-mail, or with none, is a 404; so is a
/// customer's order asked for as a guest, and a guest's as a customer.
#[tokio::test]
async fn an_order_of_another_email_is_no_order() {
    for (answer, shopper) in [
        (guest_order("G-5001", "other@example.com"), guest("guest@example.com")),
        (order_json("G-5001", "u-1001"), guest("guest@example.com")),
        (guest_order("G-5001", "guest@example.com"), Shopper::from("u-1001")),
        (guest_order("G-5001", "guest@example.com"), Shopper::from("")),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .mount(&server)
            .await;
        assert_eq!(
            orders(&server, 1000).order("G-5001", &shopper).await,
            OrderLookup::NotFound
        );
    }
}

#[tokio::test]
async fn a_5xx_or_a_timeout_is_tried_once_more_then_unavailable() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .expect(2)
        .mount(&server)
        .await;
    assert_eq!(
        orders(&server, 1000).order("A-1", &"u-1".into()).await,
        OrderLookup::Unavailable(OrdersError::Status(503))
    );

    let slow = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(500)))
        .expect(2)
        .mount(&slow)
        .await;
    assert_eq!(
        orders(&slow, 50).order("A-1", &"u-1".into()).await,
        OrderLookup::Unavailable(OrdersError::Timeout)
    );
}

#[tokio::test]
async fn a_first_failure_then_an_order_is_the_order() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(502))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(order_json("A-1", "u-1")))
        .mount(&server)
        .await;

    assert!(matches!(
        orders(&server, 1000).order("A-1", &"u-1".into()).await,
        OrderLookup::Found(_)
    ));
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(2));
}

#[tokio::test]
async fn an_answer_that_is_not_an_order_is_unavailable_and_not_tried_again() {
    let mut unknown_status = order_json("A-1", "u-1");
    unknown_status["status"] = json!("lost");
    let mut negative = order_json("A-1", "u-1");
    negative["paid_cents"] = json!(-1);
    for body in [json!({"order_id": "A-1"}), unknown_status, negative] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .expect(1)
            .mount(&server)
            .await;
        assert_eq!(
            orders(&server, 1000).order("A-1", &"u-1".into()).await,
            OrderLookup::Unavailable(OrdersError::NotAnOrder)
        );
    }
}

#[tokio::test]
async fn a_dot_segment_order_id_is_never_sent() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(order_json("A-1", "u-1")))
        .mount(&server)
        .await;

    for dots in [".", ".."] {
        assert_eq!(
            orders(&server, 1000).order(dots, &"u-1".into()).await,
            OrderLookup::NotFound,
            "{dots:?} would be a dot segment: {{base}}/orders/ or {{base}}/"
        );
    }
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(0));
    // Dots inside an id are one segment, and are sent.
    let dotted = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/A.1"))
        .respond_with(ResponseTemplate::new(404))
        .expect(1)
        .mount(&dotted)
        .await;
    assert_eq!(
        orders(&dotted, 1000).order("A.1", &"u-1".into()).await,
        OrderLookup::NotFound
    );
}

#[tokio::test]
async fn a_200_for_another_order_is_unavailable() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(order_json("A-2", "u-1")))
        .expect(1)
        .mount(&server)
        .await;

    assert_eq!(
        orders(&server, 1000).order("A-1", &"u-1".into()).await,
        OrderLookup::Unavailable(OrdersError::OtherOrder)
    );
}

#[tokio::test]
async fn a_body_over_64_kib_is_unavailable() {
    let mut huge = order_json("A-1", "u-1");
    huge["notes"] = json!("x".repeat(MAX_BODY_BYTES));
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(huge))
        .expect(1)
        .mount(&server)
        .await;
    assert_eq!(
        orders(&server, 1000).order("A-1", &"u-1".into()).await,
        OrderLookup::Unavailable(OrdersError::TooLarge)
    );

    // The cap is on what is read, not on what the server says it sends.
    let mut just_under = order_json("A-1", "u-1");
    let room = MAX_BODY_BYTES - just_under.to_string().len() - r#","notes":"""#.len();
    just_under["notes"] = json!("x".repeat(room));
    assert_eq!(just_under.to_string().len(), MAX_BODY_BYTES);
    let fits = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(just_under))
        .mount(&fits)
        .await;
    assert!(matches!(
        orders(&fits, 1000).order("A-1", &"u-1".into()).await,
        OrderLookup::Found(_)
    ));
}

#[tokio::test]
async fn a_delivery_more_than_a_day_ahead_is_unavailable() {
    let ahead = |hours: u64| crate::clock::rfc3339(crate::clock::now_ms() + hours * 3_600_000);
    for (delivered_at, readable) in [
        ("9999-12-31T00:00:00Z".to_owned(), false),
        (ahead(25), false),
        // A clock a few hours apart is not a lie.
        (ahead(6), true),
    ] {
        let mut order = order_json("A-1", "u-1");
        order["delivered_at"] = json!(delivered_at);
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(order))
            .expect(1)
            .mount(&server)
            .await;
        let found = orders(&server, 1000).order("A-1", &"u-1".into()).await;
        if readable {
            assert!(matches!(found, OrderLookup::Found(_)), "{delivered_at}: {found:?}");
        } else {
            assert_eq!(
                found,
                OrderLookup::Unavailable(OrdersError::DeliveredInTheFuture),
                "{delivered_at}"
            );
        }
    }
}

fn new_address() -> crate::orders::address::Address {
    crate::orders::address::Address {
        name: "Ada Lovelace".into(),
        line1: "12 Byron Road".into(),
        line2: String::new(),
        postcode: "N1 7AA".into(),
        city: "London".into(),
        country: "GB".into(),
    }
}

/// Contract 26: the write is a POST with the customer, the proposal's key
/// and the address; 200 is done, 409 has shipped, anything else unknown.
#[tokio::test]
async fn the_address_write_says_who_which_key_and_what_and_reads_the_answer() {
    use crate::orders::address::AddressWrite;
    for (status, expected) in [
        (200, AddressWrite::Changed),
        (409, AddressWrite::Shipped),
        (500, AddressWrite::Unknown(OrdersError::Status(500))),
        (404, AddressWrite::Unknown(OrdersError::Status(404))),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/orders/A-1004/address"))
            .and(header(CUSTOMER_HEADER, "u-1001"))
            .and(header(IDEMPOTENCY_HEADER, "key-1"))
            .and(wiremock::matchers::body_json(
                json!({"name": "Ada Lovelace", "line1": "12 Byron Road",
                "line2": "", "postcode": "N1 7AA", "city": "London", "country": "GB"}),
            ))
            .respond_with(ResponseTemplate::new(status))
            .expect(1)
            .mount(&server)
            .await;
        let written = orders(&server, 1000)
            .change_address("A-1004", &"u-1001".into(), &new_address(), "key-1")
            .await;
        assert_eq!(written, expected, "{status}: answered once, never tried again");
    }
}

/// Contract 27: a guest's write names the guest by the verified e-mail.
#[tokio::test]
async fn a_guests_address_write_is_sent_with_the_verified_email() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders/G-5001/address"))
        .and(header(EMAIL_HEADER, "guest@example.com"))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&server)
        .await;
    let written = orders(&server, 1000)
        .change_address("G-5001", &guest("guest@example.com"), &new_address(), "key-1")
        .await;
    assert_eq!(written, crate::orders::address::AddressWrite::Changed);
    let requests = server.received_requests().await.expect("recorded");
    assert!(!requests[0].headers.contains_key(CUSTOMER_HEADER));
}

/// A timeout is tried once more with the same key (the order system
/// writes once per key); a second timeout is unknown.
#[tokio::test]
async fn an_address_write_that_timed_out_is_sent_once_more_with_the_same_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders/A-1004/address"))
        .and(header(IDEMPOTENCY_HEADER, "key-2"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(400)))
        .expect(2)
        .mount(&server)
        .await;
    let written = orders(&server, 100)
        .change_address("A-1004", &"u-1001".into(), &new_address(), "key-2")
        .await;
    assert_eq!(
        written,
        crate::orders::address::AddressWrite::Unknown(OrdersError::Timeout)
    );
}

fn mug_return() -> crate::orders::returns::ReturnArguments {
    crate::orders::returns::parse_arguments(
        r#"{"order_id":"A-1002","items":[{"name":"Blue mug","quantity":1}],"reason":"changed_mind"}"#,
    )
    .expect("a return")
}

/// Contract 28: the write is a POST with the customer, the proposal's key,
/// the items and the reason; 201 is started (its label kept for code), 409
/// not returnable with the order system's words, anything else unknown.
#[tokio::test]
async fn the_return_write_says_who_which_key_and_what_and_reads_the_answer() {
    use crate::orders::returns::{ReturnWrite, StartedReturn};
    let started = json!({"return_id": "ret_1", "label_url": "https://labels.example/ret_1",
                         "refund_cents": 1250, "expires_at": "2026-12-20T00:00:00Z"});
    for (status, body, expected) in [
        (
            201,
            started.clone(),
            ReturnWrite::Started(StartedReturn {
                return_id: "ret_1".into(),
                label_url: "https://labels.example/ret_1".into(),
                refund_cents: 1250,
                expires_at: "2026-12-20T00:00:00Z".into(),
            }),
        ),
        (
            409,
            json!({"detail": "order A-1002 has a return open already"}),
            ReturnWrite::NotReturnable("order A-1002 has a return open already".into()),
        ),
        (
            409,
            json!("nothing to read"),
            ReturnWrite::NotReturnable("not returnable now".into()),
        ),
        (
            201,
            json!({"return_id": "ret_1"}),
            ReturnWrite::Unknown(OrdersError::NotAnOrder),
        ),
        (500, json!({}), ReturnWrite::Unknown(OrdersError::Status(500))),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/orders/A-1002/returns"))
            .and(header(CUSTOMER_HEADER, "u-1001"))
            .and(header(IDEMPOTENCY_HEADER, "key-1"))
            .and(wiremock::matchers::body_json(
                json!({"items": [{"name": "Blue mug", "quantity": 1}], "reason": "changed_mind"}),
            ))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .expect(1)
            .mount(&server)
            .await;
        let written = orders(&server, 1000)
            .start_return("A-1002", &"u-1001".into(), &mug_return(), "key-1")
            .await;
        assert_eq!(written, expected, "{status}: answered once, never tried again");
    }
}

/// A timeout is tried once more with the same key; the second answer counts.
#[tokio::test]
async fn a_return_write_that_timed_out_is_sent_once_more_with_the_same_key() {
    let server = MockServer::start().await;
    let slow_then_fast = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tries = std::sync::Arc::clone(&slow_then_fast);
    Mock::given(method("POST"))
        .and(path("/orders/A-1002/returns"))
        .and(header(IDEMPOTENCY_HEADER, "key-2"))
        .respond_with(move |_: &wiremock::Request| {
            let delay = if tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                400
            } else {
                0
            };
            ResponseTemplate::new(201)
                .set_delay(Duration::from_millis(delay))
                .set_body_json(
                    json!({"return_id": "ret_2", "label_url": "https://labels.example/ret_2",
                                      "refund_cents": 1250, "expires_at": "2026-12-20T00:00:00Z"}),
                )
        })
        .expect(2)
        .mount(&server)
        .await;
    let written = orders(&server, 100)
        .start_return("A-1002", &"u-1001".into(), &mug_return(), "key-2")
        .await;
    assert!(
        matches!(written, crate::orders::returns::ReturnWrite::Started(ref s) if s.return_id == "ret_2"),
        "{written:?}"
    );
}
