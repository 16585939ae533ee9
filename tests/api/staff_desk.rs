//! The support team's desk (contract 24), `refund-chat-staff`'s handler on
//! the same ledger, payments and order system as the function: who may read
//! and decide, one payment however many clicks and people, a reply posted
//! once, the queue, a refund and a conversation as people read them, and
//! the events of `events/staff/`. Every answer is checked against
//! `docs/openapi.yaml`.

use std::path::Path;

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

use crate::approvals::Desk as Shop;

/// The desk on the shop's tables. Its DynamoDB calls reach moto one at a
/// time: clicks race here, and DynamoDB serialises writes of an item where
/// moto lets two conditional writes both pass.
async fn desk(shop: &Shop) -> StaffDesk {
    let serialised = aws_at(&one_at_a_time(&moto().endpoint).await).await;
    StaffDesk::new(&serialised, desk_config(&shop.h.table, &shop.payments.uri(), &[]))
}

fn approve_path(id: &str) -> String {
    format!("/support/staff/refunds/{id}/approve")
}

#[tokio::test]
async fn an_approver_approves_once_from_the_queue_and_the_customer_reads_the_note() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let id = shop.pending_refund("req-desk-1").await;

    let queue = desk.get("/support/staff/queue", ANN).await;
    assert_eq!(queue.status, StatusCode::OK, "{}", queue.raw);
    let item = &queue.body["approvals"][0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(
        (item["amount"].as_str(), item["order_id"].as_str()),
        (Some("120.00 EUR"), Some("D-4001"))
    );
    assert_eq!(item["router"], "refund;low;0.95", "the router's labels beside it");
    // In words, for the desk (contract 36).
    assert_eq!(item["router_in_words"], "refund (low risk, 95% sure)");
    assert_eq!(
        item["reasons_in_words"],
        json!([
            "above the automatic limit of 50.00 EUR",
            "above the customer's daily limit of 100.00 EUR"
        ]),
        "{item}"
    );
    assert!(
        item["summary"][0].as_str().unwrap().contains("paid"),
        "the order's facts: {item}"
    );
    assert_eq!(queue.body["you"], json!({"name": "Ann Approver", "approver": true}));

    let refund = desk.get(&format!("/support/staff/refunds/{id}"), ANN).await;
    assert_eq!(refund.status, StatusCode::OK, "{}", refund.raw);
    assert_eq!(refund.body["order_now"]["read"], "found", "the order read afresh");
    assert!(refund.body["order_now"].get("ship_to").is_none() && !refund.raw.contains("street"));
    assert_eq!(refund.body["state"], "awaiting_approval");

    let first = desk
        .post(&approve_path(&id), json!({"intent": "refund"}), "click-1", ANN)
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    assert!(
        first.body["text"].as_str().unwrap().contains("refunded 120.00"),
        "{}",
        first.raw
    );
    // The same click again (a double click, a re-send after a lost answer): the first answer.
    let again = desk
        .post(&approve_path(&id), json!({"intent": "refund"}), "click-1", ANN)
        .await;
    assert_eq!(
        (again.status, again.header("idempotent-replayed")),
        (StatusCode::OK, Some("true"))
    );
    assert_eq!(again.body, first.body);
    assert_eq!(shop.paid().await.len(), 1, "one payments call");

    let record = shop.record(&id).await;
    assert_eq!(attr(&record, "decided_by"), Some("Ann Approver"));
    assert_eq!(
        attr(&record, "decided_by_sub"),
        Some(ANN.sub),
        "the verified person beside the name"
    );
    let conversation = attr(&record, "conversation_id").unwrap().to_owned();
    let read = shop.h.read(&conversation, "").await;
    let notes: Vec<&Value> = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "person")
        .collect();
    assert_eq!(notes.len(), 1, "{}", read.raw);
    assert!(
        notes[0]["text"]
            .as_str()
            .unwrap()
            .contains("approved your refund of 120.00 EUR")
    );
    let verdicts = shop
        .h
        .conversations()
        .transcript(&conversation, refund_chat::clock::now_ms())
        .await
        .unwrap()
        .unwrap()
        .verdicts;
    assert_eq!(
        (verdicts[0].intent.as_str(), verdicts[0].by.as_str()),
        ("refund", "Ann Approver")
    );
    let queue = desk.get("/support/staff/queue", ANN).await;
    assert_eq!(queue.body["approvals"], json!([]), "decided: gone from the queue");
}

#[tokio::test]
async fn two_people_approving_at_once_make_one_payment_and_the_other_is_told_who_decided() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let id = shop.pending_refund("req-desk-2").await;
    let path = approve_path(&id);
    let (ann, ben) = tokio::join!(
        desk.post(&path, json!({}), "ann-click", ANN),
        desk.post(&path, json!({}), "ben-click", BEN),
    );
    assert_eq!(shop.paid().await.len(), 1, "exactly one payments call");
    let (won, lost, winner) = match (ann.status, ben.status) {
        (StatusCode::OK, _) => (ann, ben, "Ann Approver"),
        _ => (ben, ann, "Ben Approver"),
    };
    assert_eq!(won.status, StatusCode::OK, "{}", won.raw);
    assert_eq!(lost.status, StatusCode::CONFLICT, "{}", lost.raw);
    assert_eq!(lost.body["decided_by"], winner, "{}", lost.raw);
    assert!(lost.body["decided_at"].is_string(), "{}", lost.raw);
}

#[tokio::test]
async fn a_member_of_the_staff_group_alone_reads_but_cannot_decide_money() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let id = shop.pending_refund("req-desk-3").await;
    let queue = desk.get("/support/staff/queue", SAM).await;
    assert_eq!(queue.status, StatusCode::OK);
    assert_eq!(queue.body["you"]["approver"], false);
    for (path, body) in [
        (approve_path(&id), json!({})),
        (format!("/support/staff/refunds/{id}/reject"), json!({"reason": "no"})),
        (
            format!("/support/staff/refunds/{id}/resolve"),
            json!({"not_executed": true}),
        ),
    ] {
        let forged = desk.post(&path, body, &format!("sam-{path}"), SAM).await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "{path}: {}", forged.raw);
    }
    assert!(shop.paid().await.is_empty());
    assert_eq!(attr(&shop.record(&id).await, "state"), Some("awaiting_approval"));
}

#[tokio::test]
async fn a_customers_token_no_group_or_no_person_is_refused_before_anything_is_read() {
    // The desk on a DynamoDB that is not there: any read would be a 503.
    let nowhere = aws_at(&format!("http://127.0.0.1:{}", free_port())).await;
    let desk = StaffDesk::new(&nowhere, desk_config("no-table", "http://127.0.0.1:9", &[]));
    for who in [CUSTOMER, NOBODY] {
        for path in [
            "/support/staff/queue",
            "/support/staff/refunds/r_1",
            "/support/staff/conversations/c_1",
        ] {
            assert_eq!(
                desk.get(path, who).await.status,
                StatusCode::FORBIDDEN,
                "{who:?} {path}"
            );
        }
        let approve = desk.post(&approve_path("r_1"), json!({}), "k", who).await;
        assert_eq!(approve.status, StatusCode::FORBIDDEN, "{who:?}");
    }
    let nobody = desk
        .send(staff_event("GET", "/support/staff/queue", None, &[], None))
        .await;
    assert_eq!(nobody.status, StatusCode::UNAUTHORIZED);
    let forged = desk.post(&approve_path("r_1"), json!({}), "k", SAM).await;
    assert_eq!(
        forged.status,
        StatusCode::FORBIDDEN,
        "money needs an approver, checked before any read"
    );
    // Before the body is read, too: a bad field from the wrong person is still a 403.
    let bad = desk
        .post(&approve_path("r_1"), json!({"intent": "groceries"}), "k2", SAM)
        .await;
    assert_eq!(bad.status, StatusCode::FORBIDDEN);
    // An approver's token of another app client of the staff pool: the
    // authorizer checks no audience, the function does.
    let mut other_client = staff_event("GET", "/support/staff/queue", None, &[], Some(ANN));
    other_client["requestContext"]["authorizer"]["claims"]["aud"] = json!("another-client");
    assert_eq!(desk.send(other_client).await.status, StatusCode::FORBIDDEN);
    // The same desk does read for a person of the team: this is what a read costs here.
    assert_eq!(
        desk.get("/support/staff/queue", ANN).await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Header identity deployed behind the authorizer fails closed, before any read.
    let misconfigured = StaffDesk::new(
        &nowhere,
        desk_config("no-table", "http://127.0.0.1:9", &[("STAFF_IDENTITY", "header")]),
    );
    let mut behind_an_authorizer = with_staff_headers(staff_event("GET", "/support/staff/queue", None, &[], None), ANN);
    behind_an_authorizer["requestContext"]["authorizer"] =
        staff_event("GET", "/support/staff/queue", None, &[], Some(ANN))["requestContext"]["authorizer"].clone();
    let refused = misconfigured.send(behind_an_authorizer).await;
    assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", refused.raw);
}

#[tokio::test]
async fn a_reply_clicked_twice_reaches_the_customer_once() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let queue = desk.get("/support/staff/queue", SAM).await;
    let handoff = queue.body["handoffs"][0].clone();
    assert_eq!(handoff["conversation_id"], conversation.as_str(), "{}", queue.raw);
    assert_eq!(handoff["kind"], "handoff");

    let path = format!("/support/staff/conversations/{conversation}/reply");
    let text = json!({"text": "Hello, this is Sam. Your card 4242 4242 4242 4242 is not needed."});
    let (one, two) = tokio::join!(
        desk.post(&path, text.clone(), "reply-click", SAM),
        desk.post(&path, text.clone(), "reply-click", SAM),
    );
    let again = desk.post(&path, text.clone(), "reply-click", SAM).await;
    let statuses = [one.status.as_u16(), two.status.as_u16(), again.status.as_u16()];
    assert!(
        statuses.contains(&200) && statuses.iter().all(|s| [200, 409].contains(s)),
        "{statuses:?}"
    );
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let read = shop.h.read(&conversation, "").await;
    let replies: Vec<&Value> = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "person")
        .collect();
    assert_eq!(replies.len(), 1, "posted once: {}", read.raw);
    assert!(
        replies[0]["text"].as_str().unwrap().contains("[card ending 4242]"),
        "masked"
    );
    let stored = shop.h.exchanges(&conversation).await;
    let person = stored.iter().find(|e| e.by.is_some()).unwrap();
    assert_eq!(person.by.as_deref(), Some("Sam Staff"));

    // A click whose append landed and whose answer was lost (the desk let
    // its key go, as after a 503): the page sends the same key again, and
    // the append, conditional on the click itself, posts nothing more.
    let paragraphs = json!({"text": "Hello,\n\nyour card 4242 4242\n4242 4242 is not needed.\nSam"});
    let landed = desk.post(&path, paragraphs.clone(), "lost-click", SAM).await;
    assert_eq!(landed.status, StatusCode::OK, "{}", landed.raw);
    aws_sdk_dynamodb::Client::new(&shop.h.aws)
        .update_item()
        .table_name(&shop.h.table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("staffclick#{}#lost-click", SAM.sub)),
        )
        .update_expression("SET click_state = :released")
        .expression_attribute_values(
            ":released",
            aws_sdk_dynamodb::types::AttributeValue::S("released".into()),
        )
        .send()
        .await
        .unwrap();
    let retried = desk.post(&path, paragraphs, "lost-click", SAM).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.raw);
    let read = shop.h.read(&conversation, "").await;
    let replies: Vec<&str> = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "person")
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(replies.len(), 2, "the lost click's reply once: {}", read.raw);
    // Paragraphs kept, and a card split across a line break masked.
    assert_eq!(replies[1], "Hello,\n\nyour card [card ending 4242] is not needed.\nSam");

    // The same key with other words is another request: refused, nothing written.
    let other = desk
        .post(&path, json!({"text": "Something else"}), "reply-click", SAM)
        .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    let no_key = desk.send(staff_event("POST", &path, Some(text), &[], Some(SAM))).await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    let too_long = desk.post(&path, json!({"text": "x".repeat(4001)}), "long", SAM).await;
    assert_eq!(too_long.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        shop.h.exchanges(&conversation).await.len(),
        stored.len() + 1,
        "nothing more written than the lost click's reply"
    );
}

#[tokio::test]
async fn the_transcript_reads_in_words_and_a_handoff_closes_once() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    shop.pending_refund("req-desk-4").await;
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let handoff = refund_chat::handoff::handoff_id(&conversation);

    let refund_conversation = shop.h.refund_records().await[0].clone();
    let refund_conversation = attr(&refund_conversation, "conversation_id").unwrap().to_owned();
    let read = desk
        .get(&format!("/support/staff/conversations/{refund_conversation}"), SAM)
        .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.raw);
    let exchange = &read.body["exchanges"][0];
    let who: Vec<&str> = exchange["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["who"].as_str().unwrap())
        .collect();
    assert_eq!(who, ["customer", "tool", "agent"], "{}", read.raw);
    let tool = exchange["lines"][1]["text"].as_str().unwrap();
    assert!(
        tool.starts_with("refund check of 120.00 on order D-4001"),
        "in words, not JSON: {tool}"
    );
    assert_eq!(exchange["router"], "refund;low;0.95");
    assert_eq!(
        exchange["trace_url"],
        format!(
            "https://logs.example/trace?id={}",
            exchange["request_id"].as_str().unwrap()
        )
        .as_str()
    );
    assert_eq!(
        read.body["orders"][0]["url"],
        "https://shop.example/admin/orders/D-4001"
    );

    let closed = desk
        .post(
            &format!("/support/staff/handoffs/{handoff}/close"),
            json!({"intent": "other"}),
            "close-1",
            SAM,
        )
        .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.raw);
    let twice = desk
        .post(
            &format!("/support/staff/handoffs/{handoff}/close"),
            json!({}),
            "close-2",
            ANN,
        )
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.raw);
    assert_eq!(twice.body["decided_by"], "Sam Staff");
    let bad = desk
        .post(
            &format!("/support/staff/handoffs/{handoff}/close"),
            json!({"intent": "groceries"}),
            "close-3",
            SAM,
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown = desk
        .post("/support/staff/handoffs/h_nothing/close", json!({}), "close-4", SAM)
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let by_handoff = desk.get(&format!("/support/staff/conversations/{handoff}"), SAM).await;
    assert_eq!(
        by_handoff.body["handoff"]["closed_by"], "Sam Staff",
        "{}",
        by_handoff.raw
    );
}

#[tokio::test]
async fn a_rejection_needs_a_reason_records_the_verdict_and_a_second_decision_is_told_who() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let id = shop.pending_refund("req-desk-5").await;
    let path = format!("/support/staff/refunds/{id}/reject");
    let no_reason = desk.post(&path, json!({}), "r-1", ANN).await;
    assert_eq!(no_reason.status, StatusCode::UNPROCESSABLE_ENTITY);
    let bad_intent = desk
        .post(&path, json!({"reason": "x", "intent": "groceries"}), "r-2", ANN)
        .await;
    assert_eq!(bad_intent.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        attr(&shop.record(&id).await, "state"),
        Some("awaiting_approval"),
        "nothing written"
    );
    let rejected = desk
        .post(
            &path,
            json!({"reason": "refunded by bank transfer", "intent": "return"}),
            "r-3",
            ANN,
        )
        .await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.raw);
    let record = shop.record(&id).await;
    assert_eq!(attr(&record, "state"), Some("rejected_by_staff"));
    assert_eq!(attr(&record, "decided_by_sub"), Some(ANN.sub));
    let late = desk.post(&approve_path(&id), json!({}), "a-1", BEN).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.raw);
    assert_eq!(late.body["decided_by"], "Ann Approver");
    assert!(shop.paid().await.is_empty());
    let unknown = desk.post(&approve_path("r_nothing"), json!({}), "a-2", BEN).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let view = desk.get(&format!("/support/staff/refunds/{id}"), SAM).await;
    assert_eq!(view.body["verdict"], "return", "the person's verdict beside the labels");
    assert_eq!(view.body["record"]["decided_by_sub"], ANN.sub);
}

#[tokio::test]
async fn an_outcome_payments_left_unknown_is_listed_and_resolved_without_a_payments_call() {
    let shop = Shop::new(ResponseTemplate::new(201).set_delay(HANG)).await;
    let desk = desk(&shop).await;
    let id = shop.pending_refund("req-desk-6").await;
    let approved = desk.post(&approve_path(&id), json!({}), "u-1", ANN).await;
    assert_eq!(approved.status, StatusCode::BAD_GATEWAY, "{}", approved.raw);
    let queue = desk.get("/support/staff/queue", ANN).await;
    assert_eq!(queue.body["unknown_outcomes"][0]["id"], id.as_str(), "{}", queue.raw);
    let calls = shop.paid().await.len();
    let resolved = desk
        .post(
            &format!("/support/staff/refunds/{id}/resolve"),
            json!({"not_executed": true}),
            "u-2",
            ANN,
        )
        .await;
    assert_eq!(resolved.status, StatusCode::OK, "{}", resolved.raw);
    assert_eq!(shop.paid().await.len(), calls, "resolving never calls payments");
    let record = shop.record(&id).await;
    assert_eq!(
        (attr(&record, "resolved_by"), attr(&record, "resolved_by_sub")),
        (Some("Ann Approver"), Some(ANN.sub))
    );
    let both = desk
        .post(
            &format!("/support/staff/refunds/{id}/resolve"),
            json!({"executed": "rf_1", "not_executed": true}),
            "u-3",
            ANN,
        )
        .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn with_header_identity_the_person_comes_from_the_local_page_servers_headers() {
    let shop = Shop::new(receipt()).await;
    let config = desk_config(&shop.h.table, &shop.payments.uri(), &[("STAFF_IDENTITY", "header")]);
    let desk = StaffDesk::new(&shop.h.aws, config);
    let id = shop.pending_refund("req-desk-7").await;
    let event = staff_event(
        "POST",
        &approve_path(&id),
        Some(json!({})),
        &[("Idempotency-Key", "h-1")],
        None,
    );
    assert_eq!(
        desk.send(event.clone()).await.status,
        StatusCode::UNAUTHORIZED,
        "no headers, nobody"
    );
    let approved = desk.send(with_staff_headers(event, ANN)).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.raw);
    assert_eq!(attr(&shop.record(&id).await, "decided_by_sub"), Some(ANN.sub));
}

#[tokio::test]
async fn the_page_holds_no_data_and_allows_no_inline_script() {
    let nowhere = aws_at(&format!("http://127.0.0.1:{}", free_port())).await;
    let desk = StaffDesk::new(&nowhere, desk_config("no-table", "http://127.0.0.1:9", &[]));
    let page = desk.send(load_event("staff/page.json")).await;
    assert_eq!(page.status, StatusCode::OK);
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert!(
        policy.contains("connect-src 'self' https://cognito-idp.eu-west-1.amazonaws.com"),
        "{policy}"
    );
    assert!(page.raw.contains(r#"<script src="desk.js"></script>"#));
    assert!(page.raw.contains("staffclient"), "the app client, for the sign-in");
    for file in ["desk.js", "desk.css"] {
        let asset = desk
            .send(staff_event("GET", &format!("/support/staff/{file}"), None, &[], None))
            .await;
        assert_eq!(asset.status, StatusCode::OK, "{file}");
    }
    // The script shows customers' and models' words as text, never as markup.
    assert!(!page.raw.contains("innerHTML") && !desk_script().contains("innerHTML"));
    // Without its slash, the page would load its files from one folder up: a redirect.
    let bare = desk.send(staff_event("GET", "/support/staff", None, &[], None)).await;
    assert_eq!(bare.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(bare.header("location"), Some("staff/"));
}

fn desk_script() -> String {
    std::fs::read_to_string(root().join("web/staff/desk.js")).unwrap()
}

#[tokio::test]
async fn every_staff_event_file_produces_its_stated_status() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("events/staff");
    let table = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let rows: Vec<(String, u16)> = table
        .lines()
        .filter(|line| line.starts_with("| ") && line.contains(".json"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_owned(), cells[2].parse().unwrap())
        })
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = rows.iter().map(|(f, _)| f.clone()).collect();
    listed.sort();
    assert_eq!(files, listed, "every event file has one row in events/staff/README.md");
    for (file, status) in rows {
        let answer = desk.send(load_event(&format!("staff/{file}"))).await;
        assert_eq!(answer.status.as_u16(), status, "{file}: {}", answer.raw);
    }
}

/// Contract 24: the approval task shows the help-centre passage the agent
/// relied on in the turn that asked for the refund.
#[tokio::test]
async fn a_refund_shows_the_passage_its_turn_looked_up() {
    let h = TestApp::new(
        vec![
            tool_calls(&[(
                "s1",
                "search_help_centre",
                r#"{"query":"refund for an item that arrived damaged"}"#,
            )]),
            refund_call("r1", "D-4001", 12000),
            text("A person will review it."),
        ],
        receipt(),
    )
    .await;
    let asked = h
        .chat("The sofa from order D-4001 arrived torn. Please refund 120.00.")
        .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    let desk = StaffDesk::new(&h.aws, desk_config(&h.table, &h.payments.uri(), &[]));
    let queue = desk.get("/support/staff/queue", SAM).await;
    let id = queue.body["approvals"][0]["id"].as_str().unwrap().to_owned();

    let refund = desk.get(&format!("/support/staff/refunds/{id}"), SAM).await;
    assert_eq!(refund.status, StatusCode::OK, "{}", refund.raw);
    let cited = refund.body["cited"].as_array().unwrap();
    let damaged = cited
        .iter()
        .find(|p| p["article_id"] == "damaged-items")
        .unwrap_or_else(|| panic!("the passage the turn was shown: {}", refund.raw));
    assert_eq!(damaged["version"], "1");
    assert_eq!(damaged["url"], "https://shop.example/help/damaged-items");
    assert_eq!(damaged["title"], "An item arrived damaged or broken");
    assert!(!damaged["passage"].as_str().unwrap().is_empty());
    assert!(h.payments_requests().await.is_empty(), "waiting for a person");
}

/// Contract 24: handed-off conversations wait in the order their customers
/// first asked, to the millisecond; writing again never moves one up or down.
#[tokio::test]
async fn a_handoff_keeps_its_place_in_the_queue_however_often_its_customer_writes() {
    let h = TestApp::new(vec![], receipt()).await;
    let mut asked = Vec::new();
    for _ in 0..3 {
        let answer = h.say(None, "I want to talk to a person").await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        asked.push(answer.conversation_id().to_owned());
    }
    for conversation in [&asked[0], &asked[1], &asked[0]] {
        let again = h.say(Some(conversation), "Hello? Is anyone there?").await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    }
    let desk = StaffDesk::new(&h.aws, desk_config(&h.table, &h.payments.uri(), &[]));
    let queue = desk.get("/support/staff/queue", SAM).await;
    assert_eq!(queue.status, StatusCode::OK, "{}", queue.raw);
    let listed: Vec<&str> = queue.body["handoffs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["conversation_id"].as_str())
        .collect();
    assert_eq!(listed, asked, "first asked, first listed");
    assert!(h.model_requests().await.is_empty(), "the screen handed them off");
}

/// The desk's door under `make run` (`local/src/pool_gate.rs`) checks a
/// staff token as API Gateway's Cognito authorizer does in production: a
/// real ID token of the pool passes with its groups; an expired one,
/// another app client's, another pool's, an access token, a signature that
/// does not verify and no token at all are refused, before the function.
#[tokio::test]
async fn the_local_door_checks_a_staff_token_as_the_authorizer_would() {
    use refund_chat_local::pool_gate::{PoolGate, Refused};
    let pool = local_staff_pool();
    let text = |name: &str| pool[name].as_str().unwrap().to_owned();
    let gate = PoolGate::new(&moto().endpoint, &text("pool_id"), &text("issuer"), &text("client_id"));
    let tokens = staff_tokens(&pool, "ann");
    let id = tokens["id"].as_str().unwrap();

    let ann = gate.person(Some(id)).await.expect("a real ID token passes");
    let mut groups = ann.groups.clone();
    groups.sort();
    assert_eq!(groups, ["refund-approvers", "support-staff"]);
    assert_eq!(gate.person(Some(&format!("Bearer {id}"))).await, Ok(ann.clone()));
    let sam = gate.person(staff_tokens(&pool, "sam")["id"].as_str()).await.unwrap();
    assert_eq!(sam.groups, ["support-staff"], "no approver group");

    let now = refund_chat::clock::now_ms() / 1000;
    let right = json!({"sub": ann.sub, "iss": text("issuer"), "aud": text("client_id"),
        "token_use": "id", "cognito:username": "ann", "cognito:groups": ["support-staff", "refund-approvers"],
        "iat": now, "exp": now + 600});
    let with = |field: &str, value: Value| {
        let mut claims = right.clone();
        claims[field] = value;
        forged_staff_token(&claims)
    };
    // The forger's own token passes: what refuses the others is the one claim changed.
    assert!(gate.person(Some(&forged_staff_token(&right))).await.is_ok());
    for (why, token) in [
        ("expired", with("exp", json!(now - 60))),
        ("another app client", with("aud", json!("another-client"))),
        ("another pool", with("iss", json!(CUSTOMER.issuer))),
        ("an access token", with("token_use", json!("access"))),
        (
            "an access token from a sign-in",
            tokens["access"].as_str().unwrap().to_owned(),
        ),
        (
            "signed by another key",
            format!("{}x", id.trim_end_matches(|c| c != '.')),
        ),
    ] {
        let refused = gate.person(Some(&token)).await;
        assert!(matches!(refused, Err(Refused::Invalid(_))), "{why}: {refused:?}");
    }
    assert_eq!(gate.person(None).await, Err(Refused::Missing));
    assert_eq!(gate.person(Some("Bearer ")).await, Err(Refused::Missing));
}

/// The desk's role (`template.yaml`, checked by `tests/template.rs` against
/// `refund_chat::staff`'s lists) grants what the desk sends: every
/// operation of a queue read, a refund, a conversation, an approval and a
/// reply passes through a recording proxy, and none is outside the lists.
#[tokio::test]
async fn the_desk_sends_only_what_its_role_grants() {
    let shop = Shop::new(receipt()).await;
    let id = shop.pending_refund("req-desk-ops").await;
    let operations = OperationLog::default();
    let recorded = proxy(&moto().endpoint, true, operations.hook(|_| Action::Forward)).await;
    let desk = StaffDesk::new(
        &aws_at(&recorded).await,
        desk_config(&shop.h.table, &shop.payments.uri(), &[]),
    );
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    assert_eq!(desk.get("/support/staff/queue", ANN).await.status, StatusCode::OK);
    assert_eq!(
        desk.get(&format!("/support/staff/refunds/{id}"), ANN).await.status,
        StatusCode::OK
    );
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), ANN)
        .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.raw);
    let approved = desk.post(&approve_path(&id), json!({}), "ops-1", ANN).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.raw);
    let path = format!("/support/staff/conversations/{conversation}/reply");
    assert_eq!(
        desk.post(&path, json!({"text": "Hello"}), "ops-2", ANN).await.status,
        StatusCode::OK
    );
    let granted: Vec<&str> = refund_chat::staff::LEDGER_ACTIONS_USED
        .iter()
        .chain(refund_chat::staff::CONVERSATION_ACTIONS_USED)
        .copied()
        .collect();
    let sent = operations.names();
    assert!(sent.len() > 5, "the proxy saw the desk's calls: {sent:?}");
    for operation in sent.iter().filter(|o| *o != "TransactWriteItems") {
        let action = format!("dynamodb:{operation}");
        assert!(
            granted.contains(&action.as_str()),
            "{action} is not granted to the desk"
        );
    }
}
