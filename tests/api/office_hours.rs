//! When a person will answer (contract 32), through the function and the
//! desk on moto's tables: outside hours the customer reads when the team is
//! back, within hours the usual reply time (the median of the desk's own
//! first replies once five give one), the sentence once per change; the
//! desk sees when each handoff is due, what is overdue first, and a
//! person's first reply ends the clock.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use refund_chat::clock::now_ms;
use refund_chat::handoff::{self, Reason};
use refund_chat::ledger::ConversationStore;
use refund_chat::office_hours::Schedule;
use refund_chat::office_hours::expected::Office;
use serde_json::{Value, json};

use refund_chat_testkit::*;

const MINUTE_MS: u64 = 60_000;

/// A shop in UTC open every day from `from` to `to` minutes after the
/// present minute (an interval may run past midnight).
fn hours_from_now(from: u64, to: u64) -> String {
    let minute = now_ms() / MINUTE_MS;
    let at = |offset: u64| {
        let of_day = (minute + offset) % (24 * 60);
        format!("{:02}:{:02}", of_day / 60, of_day % 60)
    };
    let interval = format!("{}-{}", at(from), at(to));
    let week: serde_json::Map<String, Value> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        .iter()
        .map(|day| ((*day).to_owned(), json!([interval])))
        .collect();
    json!({"tz": "UTC", "week": week}).to_string()
}

async fn shop(hours: &str) -> (TestApp, StaffDesk) {
    let office = Office {
        schedule: Some(Schedule::parse(hours).expect("a schedule")),
        // Each handoff reads the reply time afresh here.
        reply_time_cache: std::time::Duration::ZERO,
        ..Office::default()
    };
    let h = TestApp::builder()
        .configure(move |config| config.office = office)
        .build()
        .await;
    let desk = StaffDesk::new(
        &h.aws,
        desk_config(&h.table, &h.payments.uri(), &[("OFFICE_HOURS", hours)]),
    );
    (h, desk)
}

fn ms(rfc3339: &Value) -> u64 {
    refund_chat::clock::parse_utc(rfc3339.as_str().expect("a time")).expect("RFC 3339")
}

fn handoff_of<'q>(queue: &'q Value, conversation: &str) -> &'q Value {
    queue["handoffs"]
        .as_array()
        .expect("handoffs")
        .iter()
        .find(|item| item["conversation_id"] == conversation)
        .expect("in the queue")
}

/// Sam's reply in conversation `id` from the desk, which must take it.
async fn sam_replies(desk: &StaffDesk, id: &str, text: &str, key: &str) {
    let replied = desk
        .post(
            &format!("/support/staff/conversations/{id}/reply"),
            json!({ "text": text }),
            key,
            SAM,
        )
        .await;
    assert_eq!(replied.status, StatusCode::OK, "{}", replied.raw);
}

#[tokio::test]
async fn outside_hours_the_customer_reads_when_the_team_is_back_and_the_desk_when_it_is_due() {
    let (h, desk) = shop(&hours_from_now(120, 180)).await;
    let before = now_ms() / MINUTE_MS * MINUTE_MS;

    let asked = h.say(None, "I want to talk to a person").await;

    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    let expected = &asked.body["person_expected"];
    assert_eq!(expected["open"], false, "{}", asked.raw);
    assert_eq!(expected["within_minutes"], Value::Null);
    let back = ms(&expected["at"]);
    assert!(
        (before + 120 * MINUTE_MS..=before + 121 * MINUTE_MS).contains(&back),
        "{}",
        asked.raw
    );
    let at: jiff::Timestamp = expected["at"].as_str().unwrap().parse().unwrap();
    let sentence = format!(
        "Our team is back {} ({}); you can leave this page, the answer will be here.",
        at.to_zoned(jiff::tz::TimeZone::UTC).strftime("%A at %H:%M"),
        "UTC"
    );
    assert_eq!(expected["sentence"], sentence.as_str());
    assert_eq!(
        asked.reply(),
        format!("{} {sentence}", handoff::fixed_reply(Reason::CustomerAsked))
    );
    let id = asked.conversation_id().to_owned();

    // The page reads the same while the handoff is open.
    let read = h.read(&id, "").await;
    assert_eq!(read.body["person_expected"], *expected, "{}", read.raw);
    // The sentence once after the handoff, then no words: the page says
    // "sent to our team".
    let hello = h.say(Some(&id), "hello?").await;
    assert_eq!(hello.reply(), format!("{} {sentence}", handoff::WITH_A_PERSON));
    let again = h.say(Some(&id), "anyone?").await;
    assert_eq!(again.reply(), "", "{}", again.raw);
    assert_eq!(again.body["handed_off"], true);
    let shown = h.read(&id, "").await;
    let froms: Vec<&str> = shown.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["from"].as_str().unwrap())
        .collect();
    assert_eq!(froms, ["customer", "agent", "customer", "agent", "customer"]);

    // The desk: due 60 office minutes after the opening, not yet overdue.
    let queue = desk.get("/support/staff/queue", SAM).await;
    let item = handoff_of(&queue.body, &id);
    assert_eq!(ms(&item["due_at"]), back + 60 * MINUTE_MS, "{}", queue.raw);
    assert_eq!(item["overdue"], false);
    assert_eq!(item["first_reply_at"], Value::Null);

    // A person's first reply ends the clock, once; it is kept for the median.
    sam_replies(&desk, &id, "Sam here, early.", "r1").await;
    let first = handoff_of(&desk.get("/support/staff/queue", SAM).await.body, &id)["first_reply_at"].clone();
    assert!(first.is_string());
    sam_replies(&desk, &id, "And again.", "r2").await;
    assert_eq!(
        handoff_of(&desk.get("/support/staff/queue", SAM).await.body, &id)["first_reply_at"],
        first,
        "the first reply stands"
    );
    assert_eq!(h.conversations().first_replies().await.unwrap().len(), 1);

    // Closed, the page is told nothing of times.
    let closed = desk
        .post(
            &format!("/support/staff/handoffs/{}/close", handoff::handoff_id(&id)),
            json!({}),
            "close",
            SAM,
        )
        .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.raw);
    assert_eq!(h.read(&id, "").await.body["person_expected"], Value::Null);
}

#[tokio::test]
async fn within_hours_the_reply_time_is_the_median_of_the_desks_first_replies() {
    let (h, desk) = shop(&hours_from_now(24 * 60 - 60, 120)).await;
    // Five handoffs within hours, each answered at once by the desk.
    for n in 0..5 {
        let asked = h.say(None, "I want to talk to a person").await;
        assert_eq!(
            asked.reply(),
            told(handoff::fixed_reply(Reason::CustomerAsked)),
            "fewer than five: the setting's 30 minutes"
        );
        let id = asked.conversation_id();
        sam_replies(&desk, id, "Here.", &format!("r{n}")).await;
    }

    let sixth = h.say(None, "I want to talk to a person").await;

    assert_eq!(
        sixth.body["person_expected"],
        json!({"open": true, "at": null, "within_minutes": 5,
               "sentence": "A person usually answers within 5 minutes."}),
        "{}",
        sixth.raw
    );
    assert!(sixth.reply().ends_with("A person usually answers within 5 minutes."));
}

#[tokio::test]
async fn the_desk_shows_what_is_due_first_and_marks_and_counts_what_is_overdue() {
    let (h, desk) = shop(&hours_from_now(24 * 60 - 60, 120)).await;
    let first = h.say(None, "I want to talk to a person").await;
    let second = h.say(None, "I want to talk to a person").await;
    let (first, second) = (first.conversation_id(), second.conversation_id());
    // The second is due first, and is overdue (a shorter due time when it
    // was made, say): written as the function would have.
    aws_sdk_dynamodb::Client::new(&h.aws)
        .update_item()
        .table_name(conversation_table(&h.table))
        .key("pk", AttributeValue::S(second.to_owned()))
        .key("sk", AttributeValue::S("head".into()))
        .update_expression("SET handoff_due_at = :due")
        .expression_attribute_values(
            ":due",
            AttributeValue::S(refund_chat::clock::rfc3339(now_ms() - MINUTE_MS)),
        )
        .send()
        .await
        .unwrap();

    let queue = desk.get("/support/staff/queue", SAM).await;

    let order: Vec<&str> = queue.body["handoffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["conversation_id"].as_str().unwrap())
        .collect();
    assert_eq!(order, [second, first], "{}", queue.raw);
    assert_eq!(queue.body["handoffs"][0]["overdue"], true);
    assert_eq!(queue.body["handoffs"][1]["overdue"], false);
    // The terminal lists them in the same order, the overdue one marked.
    let listed = crate::approvals::admin(&h.table, &moto().endpoint, &h.payments.uri(), &["handoffs"]).await;
    let listed = crate::approvals::stdout(&listed);
    let (at_second, at_first) = (listed.find(second).unwrap(), listed.find(first).unwrap());
    assert!(at_second < at_first, "{listed}");
    assert_eq!(listed.matches("OVERDUE").count(), 1, "{listed}");
    // The sweep's count, which HandoffsOverdue's alarm watches.
    assert_eq!(
        refund_chat::staff::read::overdue_handoffs(&h.conversations(), now_ms())
            .await
            .unwrap(),
        1
    );
    // Answered, it is no longer overdue.
    sam_replies(&desk, second, "Sorry for the wait.", "r1").await;
    let queue = desk.get("/support/staff/queue", SAM).await;
    assert_eq!(handoff_of(&queue.body, second)["overdue"], false, "{}", queue.raw);
    assert_eq!(
        refund_chat::staff::read::overdue_handoffs(&h.conversations(), now_ms())
            .await
            .unwrap(),
        0
    );
    let report = crate::approvals::admin(&h.table, &moto().endpoint, &h.payments.uri(), &["routing"]).await;
    assert!(
        crate::approvals::stdout(&report).contains("first replies to handoffs begun within hours, last 7 days: 1 ("),
        "{}",
        crate::approvals::stdout(&report)
    );
}
