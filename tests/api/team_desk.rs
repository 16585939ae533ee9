//! The desk for a team (contract 30) through `refund-chat-staff`'s handler
//! and `refund-chat-admin`, on moto's tables: who has a conversation (a
//! claim raced by two people, a reply or a close by the other refused with
//! who and since when, a take-over recorded, a reply claiming a
//! conversation nobody has), when the customer last wrote, and internal
//! notes the customer, the model and the customer's read never see.

use lambda_http::http::StatusCode;
use serde_json::{Value, json};

use refund_chat_testkit::*;

use crate::approvals::Desk as Shop;

/// The desk on the shop's tables, its DynamoDB calls one at a time (as
/// DynamoDB serialises writes of one item, where moto may not).
async fn desk(shop: &Shop) -> StaffDesk {
    let serialised = aws_at(&one_at_a_time(&moto().endpoint).await).await;
    StaffDesk::new(&serialised, desk_config(&shop.h.table, &shop.payments.uri(), &[]))
}

fn path(conversation: &str, verb: &str) -> String {
    format!("/support/staff/conversations/{conversation}/{verb}")
}

/// What a person wrote in the customer's own read of the conversation.
async fn persons_words(shop: &Shop, conversation: &str) -> Vec<String> {
    let read = shop.h.read(conversation, "").await;
    read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "person")
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// Sam closes the conversation's handoff (a 200).
pub(crate) async fn close(desk: &StaffDesk, conversation: &str) {
    let handoff = refund_chat::handoff::handoff_id(conversation);
    let closed = desk
        .post(
            &format!("/support/staff/handoffs/{handoff}/close"),
            json!({}),
            "close",
            SAM,
        )
        .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.raw);
}

fn held_by(queue: &Value) -> Value {
    queue["handoffs"][0]["held_by"]["name"].clone()
}

#[tokio::test]
async fn of_two_claiming_at_once_one_has_it_and_the_other_cannot_reply_or_close_without_taking_over() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let handoff = refund_chat::handoff::handoff_id(&conversation);
    assert_eq!(held_by(&desk.get("/support/staff/queue", SAM).await.body), Value::Null);

    let claim = path(&conversation, "claim");
    let (ann, sam) = tokio::join!(
        desk.post(&claim, json!({}), "ann-claims", ANN),
        desk.post(&claim, json!({}), "sam-claims", SAM),
    );
    let mut statuses = [ann.status.as_u16(), sam.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{} / {}", ann.raw, sam.raw);
    let (winner, loser, lost) = if ann.status == StatusCode::OK {
        (ANN, SAM, &sam)
    } else {
        (SAM, ANN, &ann)
    };
    assert_eq!(lost.body["held_by"], winner.name, "{}", lost.raw);
    assert!(lost.body["held_since"].is_string(), "{}", lost.raw);
    let queue = desk.get("/support/staff/queue", loser).await;
    assert_eq!(held_by(&queue.body), winner.name, "{}", queue.raw);

    // The other one can neither answer nor close it.
    let reply = json!({"text": "Hello, I am on it too."});
    let refused = desk
        .post(&path(&conversation, "reply"), reply.clone(), "loser-reply", loser)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.raw);
    assert_eq!(refused.body["held_by"], winner.name);
    let close = format!("/support/staff/handoffs/{handoff}/close");
    let refused = desk.post(&close, json!({}), "loser-close", loser).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.raw);
    let refused = desk
        .post(&path(&conversation, "release"), json!({}), "loser-release", loser)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.raw);
    assert!(persons_words(&shop, &conversation).await.is_empty(), "nothing was sent");
    assert_eq!(
        desk.get("/support/staff/queue", loser).await.body["handoffs"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "still open"
    );

    // Taking over is recorded; then the first holder is the one refused.
    let taken = desk
        .post(&claim, json!({"take_over": true}), "loser-takes-over", loser)
        .await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.raw);
    assert!(
        taken.body["text"].as_str().unwrap().contains(winner.name),
        "{}",
        taken.raw
    );
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), loser)
        .await;
    assert_eq!(read.body["held_by"]["name"], loser.name, "{}", read.raw);
    assert_eq!(read.body["held_by"]["taken_over_from"], winner.name, "{}", read.raw);
    let refused = desk
        .post(&path(&conversation, "reply"), reply.clone(), "winner-reply", winner)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.raw);
    assert_eq!(refused.body["held_by"], loser.name);
    let replied = desk
        .post(&path(&conversation, "reply"), reply, "loser-reply-2", loser)
        .await;
    assert_eq!(replied.status, StatusCode::OK, "{}", replied.raw);
    assert_eq!(persons_words(&shop, &conversation).await, ["Hello, I am on it too."]);

    // Released, nobody has it; then anyone may close it.
    let released = desk
        .post(&path(&conversation, "release"), json!({}), "release", loser)
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.raw);
    assert_eq!(
        held_by(&desk.get("/support/staff/queue", winner).await.body),
        Value::Null
    );
    let closed = desk.post(&close, json!({}), "winner-close", winner).await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.raw);
}

#[tokio::test]
async fn a_reply_to_a_conversation_nobody_has_claims_it_and_the_terminal_keeps_the_same_rule() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let before = desk.get("/support/staff/queue", SAM).await;
    let first_wrote = before.body["handoffs"][0]["customer_wrote_at"].clone();
    assert!(first_wrote.is_string(), "{}", before.raw);

    let replied = desk
        .post(&path(&conversation, "reply"), json!({"text": "Sam here."}), "r1", SAM)
        .await;
    assert_eq!(replied.status, StatusCode::OK, "{}", replied.raw);
    let queue = desk.get("/support/staff/queue", ANN).await;
    assert_eq!(held_by(&queue.body), SAM.name, "{}", queue.raw);
    // A person's words do not move when the customer last wrote.
    assert_eq!(queue.body["handoffs"][0]["customer_wrote_at"], first_wrote);

    // The terminal has the same verbs, keyed by the name it is given.
    let by_terminal = shop
        .run(&["reply", &conversation, "--by", "Kim", "--text", "Kim here."])
        .await;
    assert_eq!(
        by_terminal.status.code(),
        Some(1),
        "{}",
        crate::approvals::stdout(&by_terminal)
    );
    assert!(
        crate::approvals::stderr(&by_terminal).contains("Sam Staff has"),
        "{}",
        crate::approvals::stderr(&by_terminal)
    );
    let taken = shop.run(&["claim", &conversation, "--by", "Kim", "--take-over"]).await;
    assert_eq!(taken.status.code(), Some(0), "{}", crate::approvals::stderr(&taken));
    let refused = desk
        .post(&path(&conversation, "reply"), json!({"text": "Sam again."}), "r2", SAM)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.raw);
    assert_eq!(refused.body["held_by"], "Kim");
    let printed = shop.run(&["conversation", &conversation]).await;
    assert!(
        crate::approvals::stdout(&printed).contains("held by       Kim since"),
        "{}",
        crate::approvals::stdout(&printed)
    );
    assert_eq!(persons_words(&shop, &conversation).await, ["Sam here."]);

    // The customer writes again: the queue shows it.
    let _ = shop.h.say(Some(&conversation), "Hello? Anyone there?").await;
    let queue = desk.get("/support/staff/queue", ANN).await;
    let wrote = queue.body["handoffs"][0]["customer_wrote_at"].as_str().unwrap();
    assert!(wrote > first_wrote.as_str().unwrap(), "{}", queue.raw);
}

#[tokio::test]
async fn an_internal_note_is_the_teams_alone_and_kept_once_per_click() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let asked = shop.h.say(None, "Where is my order A-1001?").await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    let conversation = asked.conversation_id().to_owned();

    let note = json!({"text": "Shift change: customer's card 4242 4242 4242 4242 came up; check the courier first."});
    let notes = path(&conversation, "notes");
    let (one, two) = tokio::join!(
        desk.post(&notes, note.clone(), "note-click", SAM),
        desk.post(&notes, note.clone(), "note-click", SAM),
    );
    assert!(
        [one.status, two.status].contains(&StatusCode::OK),
        "{} / {}",
        one.raw,
        two.raw
    );
    let empty = desk.post(&notes, json!({"text": "  "}), "empty-note", SAM).await;
    assert_eq!(empty.status, StatusCode::UNPROCESSABLE_ENTITY);
    let long = desk
        .post(&notes, json!({"text": "x".repeat(4001)}), "long-note", SAM)
        .await;
    assert_eq!(long.status, StatusCode::UNPROCESSABLE_ENTITY);
    let by_terminal = shop
        .run(&["note", &conversation, "--by", "Kim", "--text", "Kim: courier called."])
        .await;
    assert_eq!(
        by_terminal.status.code(),
        Some(0),
        "{}",
        crate::approvals::stderr(&by_terminal)
    );

    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), ANN)
        .await;
    let kept = read.body["internal_notes"].as_array().unwrap();
    assert_eq!(kept.len(), 2, "one per click: {}", read.raw);
    assert_eq!(kept[0]["by"], SAM.name);
    assert_eq!(
        kept[0]["text"],
        "Shift change: customer's card [card ending 4242] came up; check the courier first."
    );
    assert_eq!(kept[1]["by"], "Kim");
    let printed = crate::approvals::stdout(&shop.run(&["conversation", &conversation]).await);
    assert!(printed.contains("internal note by Sam Staff at "), "{printed}");

    // Never the customer's, nor the model's: the customer's read and next turn.
    let customer = shop.h.read(&conversation, "").await;
    assert!(!customer.raw.contains("Shift change"), "{}", customer.raw);
    assert!(!customer.raw.contains("courier"), "{}", customer.raw);
    let again = shop.h.say(Some(&conversation), "Any news?").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    assert!(!again.raw.contains("courier"), "{}", again.raw);
    let requests = shop.h.model_requests().await;
    assert!(requests.len() >= 2, "the next turn reached the model");
    for request in requests {
        assert!(!request.to_string().contains("courier"), "{request}");
    }
    // A reply is not a note: the team's note claims nothing either.
    assert_eq!(read.body["held_by"], Value::Null);
    // Kept in the staff's own partition, which the customer function's
    // role is denied (the seventh review): none in the conversation's.
    let stored = items(&shop.h.aws, &conversation_table(&shop.h.table)).await;
    let notes_at: Vec<&str> = stored
        .iter()
        .filter(|item| attr(item, "sk").is_some_and(|sk| sk.starts_with("n#")))
        .filter_map(|item| attr(item, "pk"))
        .collect();
    assert_eq!(notes_at.len(), 2);
    let staff_partition = format!("staff-notes#{conversation}");
    assert!(notes_at.iter().all(|pk| *pk == staff_partition), "{notes_at:?}");
    assert!(refund_chat::ledger::dynamo::schema::STAFF_ONLY_KEYS.iter().any(|key| {
        key.strip_suffix('*')
            .is_some_and(|prefix| staff_partition.starts_with(prefix))
    }));
}

fn put(id: &str, title: &str, text: &str, who: Who) -> Value {
    staff_event(
        "PUT",
        &format!("/support/staff/saved-replies/{id}"),
        Some(json!({"title": title, "text": text})),
        &[],
        Some(who),
    )
}

fn titles(list: &Value) -> Vec<String> {
    list["saved_replies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn saved_replies_are_the_approvers_to_change_at_most_100_and_every_change_is_recorded() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let saved = desk
        .send(put(
            "on-its-way",
            "Refund on its way",
            "Your refund is on its way; card 4242 4242 4242 4242 is credited.",
            ANN,
        ))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.raw);
    let list = desk.get("/support/staff/saved-replies", SAM).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.raw);
    assert_eq!(titles(&list.body), ["Refund on its way"]);
    assert_eq!(
        list.body["saved_replies"][0]["text"],
        "Your refund is on its way; card [card ending 4242] is credited."
    );
    assert_eq!(list.body["saved_replies"][0]["changed_by"], ANN.name);

    // The staff group alone reads them and changes none.
    let refused = desk.send(put("sams", "Sam's", "Hello", SAM)).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.raw);
    let refused = desk
        .send(staff_event(
            "DELETE",
            "/support/staff/saved-replies/on-its-way",
            None,
            &[],
            Some(SAM),
        ))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.raw);
    for bad in [
        put("on-its-way", &"t".repeat(81), "text", ANN),
        put("on-its-way", "Title", " ", ANN),
        put("on-its-way", "Title", &"x".repeat(4001), ANN),
        put("on%20its%20way", "Title", "text", ANN),
    ] {
        let answer = desk.send(bad).await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", answer.raw);
    }
    assert_eq!(
        titles(&desk.get("/support/staff/saved-replies", SAM).await.body),
        ["Refund on its way"],
        "nothing written"
    );

    // Up to 100; of two approvers adding the hundredth at once, one is refused.
    for i in 1..99 {
        let answer = desk
            .send(put(&format!("r{i:03}"), &format!("Reply {i:03}"), "text", ANN))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    }
    let (a, b) = tokio::join!(
        desk.send(put("last-a", "Last A", "text", ANN)),
        desk.send(put("last-b", "Last B", "text", ANN)),
    );
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{} / {}", a.raw, b.raw);
    let list = desk.get("/support/staff/saved-replies", SAM).await;
    assert_eq!(titles(&list.body).len(), 100);
    // A change of one in use is not a new one.
    let changed = desk
        .send(put(
            "on-its-way",
            "Refund on its way",
            "Your refund is on its way.",
            ANN,
        ))
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.raw);

    // Deleted: out of the list, its record kept with who and when.
    let delete = || {
        staff_event(
            "DELETE",
            "/support/staff/saved-replies/on-its-way",
            None,
            &[],
            Some(ANN),
        )
    };
    let deleted = desk.send(delete()).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.raw);
    assert_eq!(desk.send(delete()).await.status, StatusCode::NOT_FOUND);
    let list = desk.get("/support/staff/saved-replies", SAM).await;
    assert!(!titles(&list.body).contains(&"Refund on its way".to_owned()));
    let kept = aws_sdk_dynamodb::Client::new(&shop.h.aws)
        .get_item()
        .table_name(conversation_table(&shop.h.table))
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("saved-replies".into()))
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("r#on-its-way".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(attr(&kept, "deleted_by"), Some(ANN.name));
    let changes = kept["changes"].as_l().unwrap();
    let what: Vec<&str> = changes
        .iter()
        .map(|c| c.as_m().unwrap()["what"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(what, ["saved", "saved", "deleted"]);
    // Room again: a new one fits.
    let again = desk.send(put("last-c", "Last C", "text", ANN)).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
}

/// `GET /support/staff/search?q=…` as Sam, the query where API Gateway puts it.
async fn search(desk: &StaffDesk, q: &str) -> Answer {
    let mut event = staff_event("GET", "/support/staff/search", None, &[], Some(SAM));
    event["queryStringParameters"] = json!({"q": q});
    event["multiValueQueryStringParameters"] = json!({"q": [q]});
    desk.send(event).await
}

#[tokio::test]
async fn a_search_by_exact_id_finds_closed_chats_and_the_panel_shows_the_customers_others() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    // A refund of A-1001 (its order read by code), then a person, then closed.
    let first = shop.h.say(None, "please refund A-1001 500").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    let conversation = first.conversation_id().to_owned();
    let asked = shop.h.say(Some(&conversation), "I want to talk to a person").await;
    assert_eq!(asked.body["handed_off"], true, "{}", asked.raw);
    let handoff = refund_chat::handoff::handoff_id(&conversation);
    close(&desk, &conversation).await;
    let other = shop.h.say(None, "please refund B-2002 300").await;
    let other_conversation = other.conversation_id().to_owned();

    let found = search(&desk, "A-1001").await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.raw);
    let ids: Vec<&str> = found.body["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [conversation.as_str()], "{}", found.raw);
    assert_eq!(found.body["conversations"][0]["handoff"], "closed");
    let refunds = found.body["refunds"].as_array().unwrap();
    assert_eq!(refunds.len(), 1, "{}", found.raw);
    assert_eq!(refunds[0]["order_id"], "A-1001");
    let record_id = refunds[0]["id"].as_str().unwrap().to_owned();

    // By the conversation, its handoff, the record, the customer.
    for (q, conversations) in [
        (conversation.clone(), 1),
        (handoff.clone(), 1),
        (record_id.clone(), 1),
        ("u-1001".to_owned(), 2),
        ("A-9999".to_owned(), 0),
    ] {
        let found = search(&desk, &q).await;
        assert_eq!(found.status, StatusCode::OK, "{q}: {}", found.raw);
        assert_eq!(
            found.body["conversations"].as_array().unwrap().len(),
            conversations,
            "{q}: {}",
            found.raw
        );
    }
    assert_eq!(search(&desk, "").await.status, StatusCode::UNPROCESSABLE_ENTITY);

    // The customer panel beside the conversation: their other one, their refunds.
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), SAM)
        .await;
    let panel = &read.body["customer_panel"];
    assert_eq!(panel["who"], "customer", "{}", read.raw);
    let others: Vec<&str> = panel["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(others, [other_conversation.as_str()]);
    assert_eq!(panel["refunds"]["count"], 2);
    assert_eq!(panel["refunds"]["refunded"], "8.00");
    // The page's re-read every 10 s reads no panel.
    let mut reread = staff_event(
        "GET",
        &format!("/support/staff/conversations/{conversation}"),
        None,
        &[],
        Some(SAM),
    );
    reread["queryStringParameters"] = json!({"panel": "false"});
    reread["multiValueQueryStringParameters"] = json!({"panel": ["false"]});
    let reread = desk.send(reread).await;
    assert_eq!(reread.status, StatusCode::OK, "{}", reread.raw);
    assert!(reread.body.get("customer_panel").is_none(), "{}", reread.raw);
    assert_eq!(reread.body["exchanges"], read.body["exchanges"]);

    // Forgotten: the order no longer finds anything of theirs.
    let forgot = shop.run(&["forget", "--customer", "u-1001", "--by", "Kim"]).await;
    assert_eq!(forgot.status.code(), Some(0), "{}", crate::approvals::stderr(&forgot));
    let found = search(&desk, "A-1001").await;
    assert!(
        found.body["conversations"].as_array().unwrap().is_empty(),
        "{}",
        found.raw
    );
    let postings = aws_sdk_dynamodb::Client::new(&shop.h.aws)
        .query()
        .table_name(conversation_table(&shop.h.table))
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S("order#A-1001".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(postings.count(), 0, "the order's posting went with them");
}

/// Contract 30 (the seventh review): what is one's own the server says,
/// from the verified `sub`. Two people an administrator named alike are
/// told apart: the one who claimed reads `yours`, the other does not.
#[tokio::test]
async fn yours_is_said_by_the_server_so_two_people_of_one_name_are_told_apart() {
    let shop = Shop::new(receipt()).await;
    let desk = desk(&shop).await;
    let asked = shop.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let alex = Who {
        sub: "7d1c2a4e-0000-4000-8000-00000000d005",
        name: "Alex",
        ..SAM
    };
    let other_alex = Who {
        sub: "7d1c2a4e-0000-4000-8000-00000000d006",
        ..alex
    };
    let claimed = desk
        .post(&path(&conversation, "claim"), json!({}), "alex-claims", alex)
        .await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.raw);

    for (who, yours) in [(alex, true), (other_alex, false)] {
        let queue = desk.get("/support/staff/queue", who).await;
        assert_eq!(queue.body["handoffs"][0]["held_by"]["name"], "Alex");
        assert_eq!(queue.body["handoffs"][0]["held_by"]["yours"], yours, "{}", queue.raw);
        let read = desk
            .get(&format!("/support/staff/conversations/{conversation}"), who)
            .await;
        assert_eq!(read.body["held_by"]["yours"], yours, "{}", read.raw);
    }
}

/// Contract 30 (the seventh review): with thousands of open handoffs the
/// desk still answers, in pages of `QUEUE_PAGE` with how many more wait,
/// visitors' apart, and still shows the approval that waits. The handoffs
/// are written straight to the table, 25 a request, so the test is quick.
#[tokio::test]
async fn thousands_of_open_handoffs_leave_the_queue_a_page_and_the_approval_in_view() {
    use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
    let shop = Shop::new(receipt()).await;
    let approval = shop.pending_refund("req-queue-page").await;
    let table = conversation_table(&shop.h.table);
    let client = aws_sdk_dynamodb::Client::new(&shop.h.aws);
    let s = |text: String| AttributeValue::S(text);
    let (people, visitors) = (2_600, 600);
    let writes: Vec<WriteRequest> = (0..people + visitors)
        .map(|n| {
            let id = format!("c_{n:032x}");
            let customer = if n < people {
                format!("u-{n}")
            } else {
                format!("visitor:{n:032x}")
            };
            let open = if n < people { "open" } else { "visitor" };
            let item = [
                ("pk", s(id.clone())),
                ("sk", s("head".into())),
                ("customer", s(customer)),
                ("handoff_id", s(refund_chat::handoff::handoff_id(&id))),
                ("handoff_reason", s("customer_asked".into())),
                ("handoff_open", s(open.into())),
                (
                    "handoff_at",
                    s(format!(
                        "2026-12-01T00:{:02}:{:02}.{:03}Z",
                        n / 6000,
                        (n / 100) % 60,
                        n % 1000
                    )),
                ),
                ("expires_at", AttributeValue::N("4102444800".into())),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                .build()
        })
        .collect();
    for batch in writes.chunks(25) {
        client
            .batch_write_item()
            .request_items(&table, batch.to_vec())
            .send()
            .await
            .unwrap();
    }

    let desk = StaffDesk::new(
        &shop.h.aws,
        desk_config(&shop.h.table, &shop.payments.uri(), &[("QUEUE_PAGE", "100")]),
    );
    let queue = desk.get("/support/staff/queue", ANN).await;

    assert_eq!(queue.status, StatusCode::OK);
    let ids = |list: &str| -> Vec<String> {
        queue.body[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(ids("approvals"), [approval], "the approval is in view");
    let handoffs = ids("handoffs");
    assert_eq!(handoffs.len(), 100);
    assert_eq!(
        handoffs[0],
        refund_chat::handoff::handoff_id(&format!("c_{:032x}", 0)),
        "oldest first"
    );
    assert_eq!(ids("visitor_handoffs").len(), 100, "visitors' apart");
    assert_eq!(queue.body["more"]["handoffs"], 1000, "2,500 more, counted to 1,000");
    assert_eq!(
        queue.body["more"]["visitor_handoffs"], 500,
        "counted exactly below 1,000"
    );
    assert!(
        queue.raw.len() < 200_000,
        "the answer is a page: {} bytes",
        queue.raw.len()
    );
}
