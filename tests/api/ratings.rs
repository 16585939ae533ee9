//! "Did this solve it?" (contract 30) through the whole function, on moto's
//! tables: asked once a person closed the conversation or decided a refund,
//! answered once by the conversation's own customer (a visitor by their
//! token), the comment masked and shown on the desk, and counted per intent
//! in `refund-chat-admin routing`.

use lambda_http::http::StatusCode;
use serde_json::{Value, json};

use refund_chat_testkit::*;

use crate::approvals::Desk as Shop;

async fn rate(shop: &Shop, id: &str, body: Value, user: Option<&str>) -> Answer {
    send_as(&shop.h.app, rating_event(id, &body, user), &fresh_request_id(), 0).await
}

#[tokio::test]
async fn a_customer_answers_once_after_a_person_closed_it_and_the_team_reads_it() {
    let shop = Shop::new(receipt()).await;
    let desk = StaffDesk::new(&shop.h.aws, desk_config(&shop.h.table, &shop.payments.uri(), &[]));
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    assert_eq!(
        shop.h.read(&conversation, "").await.body["ask_rating"],
        false,
        "not yet"
    );

    crate::team_desk::close(&desk, &conversation).await;
    assert_eq!(shop.h.read(&conversation, "").await.body["ask_rating"], true);

    // Checked before anything is kept; another customer's is the one 404.
    for (body, status) in [
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"solved": "no"}), StatusCode::UNPROCESSABLE_ENTITY),
        (
            json!({"solved": false, "comment": "x".repeat(501)}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!([true]), StatusCode::BAD_REQUEST),
    ] {
        let answer = rate(&shop, &conversation, body.clone(), Some(USER)).await;
        assert_eq!(answer.status, status, "{body}: {}", answer.raw);
    }
    let others = rate(&shop, &conversation, json!({"solved": true}), Some("u-2002")).await;
    assert_eq!(others.status, StatusCode::NOT_FOUND, "{}", others.raw);
    let nobody = rate(
        &shop,
        "c_00000000000000000000000000000000",
        json!({"solved": true}),
        Some(USER),
    )
    .await;
    assert_eq!(nobody.status, StatusCode::NOT_FOUND);

    let rated = rate(
        &shop,
        &conversation,
        json!({"solved": false, "comment": "Still no refund on card 4242 4242 4242 4242."}),
        Some(USER),
    )
    .await;
    assert_eq!(rated.status, StatusCode::OK, "{}", rated.raw);
    assert_eq!(rated.body["rated"], "not_solved");
    let again = rate(&shop, &conversation, json!({"solved": true}), Some(USER)).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.raw);
    assert_eq!(
        shop.h.read(&conversation, "").await.body["ask_rating"],
        false,
        "asked once"
    );

    // The first stands, masked, on the desk and in the terminal.
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), SAM)
        .await;
    assert_eq!(read.body["rating"]["solved"], false, "{}", read.raw);
    assert_eq!(
        read.body["rating"]["comment"],
        "Still no refund on card [card ending 4242]."
    );
    let printed = crate::approvals::stdout(&shop.run(&["conversation", &conversation]).await);
    assert!(printed.contains("rated         not solved"), "{printed}");
    assert!(!printed.contains("4242 4242"), "{printed}");

    // Counted in `routing`, under the row the conversation counts in.
    let report = crate::approvals::stdout(&shop.run(&["routing"]).await);
    let row: Vec<&str> = report
        .lines()
        .find(|line| line.starts_with("not_routed"))
        .unwrap_or_else(|| panic!("{report}"))
        .split_whitespace()
        .collect();
    assert_eq!((row[6], row[7]), ("0", "1"), "solved, not solved: {report}");
    let csv = crate::approvals::stdout(&shop.run(&["routing", "--csv"]).await);
    assert!(csv.lines().next().unwrap().ends_with(",solved,not_solved"), "{csv}");
}

#[tokio::test]
async fn a_decided_refund_asks_too_and_a_visitor_rates_only_with_their_token() {
    let shop = Shop::new(receipt()).await;
    let desk = StaffDesk::new(&shop.h.aws, desk_config(&shop.h.table, &shop.payments.uri(), &[]));
    let id = shop.pending_refund("req-rate-1").await;
    let record = shop.record(&id).await;
    let conversation = attr(&record, "conversation_id").unwrap().to_owned();
    assert_eq!(shop.h.read(&conversation, "").await.body["ask_rating"], false);
    // Nothing is asked before a person closed it or decided (the seventh review).
    let early = rate(&shop, &conversation, json!({"solved": true}), Some(USER)).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.raw);
    let approved = desk
        .post(
            &format!("/support/staff/refunds/{id}/approve"),
            json!({}),
            "approve",
            ANN,
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.raw);
    assert_eq!(shop.h.read(&conversation, "").await.body["ask_rating"], true);
    let rated = rate(&shop, &conversation, json!({"solved": true}), Some(USER)).await;
    assert_eq!(rated.status, StatusCode::OK, "{}", rated.raw);

    // A visitor's conversation: rated by its token, and by nobody else.
    let visitor = send_as(
        &shop.h.app,
        visitor_post_event(
            &json!({"message": "I want to talk to a person"}).to_string(),
            "203.0.113.9",
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(visitor.status, StatusCode::OK, "{}", visitor.raw);
    let token = visitor.body["visitor"].as_str().unwrap().to_owned();
    let visitor_conversation = visitor.conversation_id().to_owned();
    let send = |headers: Vec<(&'static str, String)>| {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        visitor_rating_event(&visitor_conversation, &json!({"solved": true}), &headers)
    };
    let without = send_as(&shop.h.app, send(vec![]), &fresh_request_id(), 0).await;
    assert_eq!(without.status, StatusCode::NOT_FOUND, "{}", without.raw);
    let as_customer = rate(&shop, &visitor_conversation, json!({"solved": true}), Some(USER)).await;
    assert_eq!(as_customer.status, StatusCode::NOT_FOUND, "{}", as_customer.raw);
    let open = send_as(
        &shop.h.app,
        send(vec![("X-Visitor-Token", token.clone())]),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(open.status, StatusCode::CONFLICT, "not closed yet: {}", open.raw);
    crate::team_desk::close(&desk, &visitor_conversation).await;
    let with = send_as(
        &shop.h.app,
        send(vec![("X-Visitor-Token", token.clone())]),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(with.status, StatusCode::OK, "{}", with.raw);
}
