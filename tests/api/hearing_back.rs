//! The customer hears back (contract 18): a person's decision leaves one
//! note in the record's conversation, a person's reply lands there too, the
//! model sees both as what happened, and the chat reads them through
//! `GET /support/refund-chat/conversations/{id}`, with the POST's identity
//! rules and one 404.

use std::process::Output;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use refund_chat::conversation::person::PERSON_MARK;
use refund_chat::handoff::{self, Reason};
use serde_json::{Value, json};
use wiremock::MockServer;

use crate::approvals::{Desk, admin, stderr, stdout};
use refund_chat_testkit::*;

const BIG_REFUND: &str = "The sofa from order D-4001 arrived torn: refund D-4001 12000";
const APPROVED: &str = "A person approved your refund of 120.00 EUR for order D-4001.";

impl Desk {
    /// A refund above the limit, in a new conversation: (conversation, approval id).
    async fn waiting_refund(&self) -> (String, String) {
        let answer = self.h.say(None, BIG_REFUND).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        let told = tool_content(&tool_messages(self.h.model_requests().await.last().unwrap())[0]);
        assert_eq!(told["status"], "pending_approval", "{told}");
        let approval = told["approval_id"].as_str().unwrap().to_owned();
        (answer.conversation_id().to_owned(), approval)
    }

    /// The person's words in the conversation, oldest first.
    async fn person_words(&self, conversation: &str) -> Vec<String> {
        self.h
            .exchanges(conversation)
            .await
            .iter()
            .filter_map(|stored| stored.exchange.person_text().map(str::to_owned))
            .collect()
    }

    /// The conversation as its customer reads it (a 200).
    async fn read(&self, conversation: &str, query: &str) -> Value {
        let read = self.h.read(conversation, query).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.raw);
        read.body
    }
}

fn ok(output: &Output) {
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(output), stderr(output));
}

fn messages(read: &Value) -> Vec<(u64, String, String)> {
    read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["seq"].as_u64().unwrap(),
                m["from"].as_str().unwrap().to_owned(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Moves the conversation's end into the past, as if its TTL had run out
/// (DynamoDB deletes lazily: every read and condition checks `expires_at`).
async fn expire(h: &TestApp, conversation: &str) {
    set_expiry(h, conversation, 1).await;
}

async fn set_expiry(h: &TestApp, conversation: &str, at_s: u64) {
    aws_sdk_dynamodb::Client::new(&h.aws)
        .update_item()
        .table_name(conversation_table(&h.table))
        .key("pk", AttributeValue::S(conversation.into()))
        .key("sk", AttributeValue::S("head".into()))
        .update_expression("SET expires_at = :at")
        .expression_attribute_values(":at", AttributeValue::N(at_s.to_string()))
        .send()
        .await
        .unwrap();
}

async fn header_number(h: &TestApp, conversation: &str, name: &str) -> u64 {
    let head = items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| attr(item, "pk") == Some(conversation) && attr(item, "sk") == Some("head"))
        .expect("the header");
    head.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

#[tokio::test]
async fn an_approval_tells_the_customer_once_and_the_chat_reads_it_as_a_persons() {
    let desk = Desk::new(receipt()).await;
    let (conversation, id) = desk.waiting_refund().await;

    ok(&desk.run(&["approve", &id, "--by", "sam"]).await);
    let again = desk.run(&["approve", &id, "--by", "bob"]).await;
    assert_eq!(again.status.code(), Some(1), "a second approval is refused");

    assert_eq!(
        desk.person_words(&conversation).await,
        [APPROVED],
        "one note, however often it is run"
    );
    let read = desk.read(&conversation, "").await;
    assert_eq!(read["conversation_id"], conversation.as_str());
    assert_eq!(read["handed_off"], false);
    let shown = messages(&read);
    assert_eq!(shown.len(), 3, "{read}");
    assert_eq!((shown[0].1.as_str(), shown[0].2.as_str()), ("customer", BIG_REFUND));
    assert_eq!(shown[1].1, "agent");
    assert_eq!(
        (shown[2].0, shown[2].1.as_str(), shown[2].2.as_str()),
        (2, "person", APPROVED)
    );
    let raw = read.to_string();
    for hidden in ["issue_refund", "pending_approval", "sam", PERSON_MARK.trim()] {
        assert!(!raw.contains(hidden), "{hidden} is shown: {raw}");
    }
    // Only what is new after the last message shown.
    let after = desk.read(&conversation, &format!("after={}", shown[1].0)).await;
    assert_eq!(messages(&after), shown[2..]);
    assert!(messages(&desk.read(&conversation, "after=2").await).is_empty());
    // The support team sees who wrote it, and for which record.
    let transcript = stdout(&desk.run(&["conversation", &conversation]).await);
    assert!(transcript.contains(&format!("note by sam on {id}")), "{transcript}");
    assert_eq!(bodies(&desk.payments).await.len(), 1);
}

#[tokio::test]
async fn the_model_sees_a_persons_note_as_what_happened_and_pays_nothing_again_for_it() {
    let desk = Desk::new(receipt()).await;
    let (conversation, id) = desk.waiting_refund().await;
    ok(&desk.run(&["approve", &id, "--by", "sam"]).await);

    let next = desk.h.say(Some(&conversation), "refund A-1001 500").await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.raw);

    let requests = desk.h.model_requests().await;
    let window = &requests[requests.len() - 2]["messages"];
    let note = format!("{PERSON_MARK}{APPROVED}");
    let marked: Vec<&Value> = window
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"].as_str() == Some(note.as_str()))
        .collect();
    assert_eq!(marked.len(), 1, "{window}");
    assert_eq!(marked[0]["role"], "assistant");
    // Its own refund only: the approval in history is never run.
    assert_eq!(desk.h.payments_requests().await.len(), 1);
    assert_eq!(bodies(&desk.payments).await.len(), 1);
    // The turn's exchange follows the note.
    let shown = messages(&desk.read(&conversation, "after=2").await);
    assert_eq!(shown.iter().map(|m| m.0).collect::<Vec<_>>(), [4, 5]);
}

#[tokio::test]
async fn a_rejection_and_a_resolution_are_told_in_fixed_words_without_the_reason() {
    let desk = Desk::new(receipt()).await;
    let (conversation, id) = desk.waiting_refund().await;

    ok(&desk
        .run(&["reject", &id, "--by", "carol", "--reason", "internal: customer flagged"])
        .await);
    desk.run(&["reject", &id, "--by", "carol", "--reason", "again"]).await;

    let words = desk.person_words(&conversation).await;
    assert_eq!(
        words,
        ["A person reviewed your refund of 120.00 EUR for order D-4001 and did not approve it. No money was moved."]
    );
    assert!(!desk.read(&conversation, "").await.to_string().contains("flagged"));
    assert!(bodies(&desk.payments).await.is_empty());
}

#[tokio::test]
async fn an_unknown_outcome_resolved_tells_the_customer_what_payments_confirmed() {
    let h = TestApp::new(
        vec![refund_call("c1", "A-1001", 1250), text("A person will confirm.")],
        receipt().set_delay(HANG),
    )
    .await;
    let said = h.say(None, "refund A-1001 1250").await;
    let conversation = said.conversation_id().to_owned();
    let id = attr(&h.refund_records().await[0], "record_id").unwrap().to_owned();
    let payments = MockServer::start().await;

    let resolved = admin(
        &h.table,
        &moto().endpoint,
        &payments.uri(),
        &["resolve", &id, "--executed", "rf_9", "--by", "dana"],
    )
    .await;
    ok(&resolved);

    let shown = messages(&h.read(&conversation, "").await.body);
    assert_eq!(
        shown.last().map(|m| (m.1.as_str(), m.2.as_str())),
        Some((
            "person",
            "A person confirmed that your refund of 12.50 EUR for order A-1001 was made."
        ))
    );
}

#[tokio::test]
async fn an_expired_conversation_gets_no_note_and_the_approval_still_pays() {
    let desk = Desk::new(receipt()).await;
    let (conversation, id) = desk.waiting_refund().await;
    expire(&desk.h, &conversation).await;

    let approved = desk.run(&["approve", &id, "--by", "sam"]).await;

    ok(&approved);
    assert_eq!(bodies(&desk.payments).await.len(), 1);
    let items = items(&desk.h.aws, &conversation_table(&desk.h.table)).await;
    assert!(
        !items.iter().any(|item| attr(item, "from") == Some("person")),
        "nothing appended to an expired conversation"
    );
    assert_eq!(desk.h.read(&conversation, "").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_approval_whose_payment_is_unknown_still_told_the_customer_once() {
    let desk = Desk::new(receipt().set_delay(HANG)).await;
    let (conversation, id) = desk.waiting_refund().await;

    let approved = desk.run(&["approve", &id, "--by", "sam"]).await;

    assert_eq!(approved.status.code(), Some(1), "{}", stderr(&approved));
    assert!(stderr(&approved).contains("unknown"), "{}", stderr(&approved));
    assert_eq!(desk.person_words(&conversation).await, [APPROVED]);
}

#[tokio::test]
async fn racing_approvers_and_replies_append_one_note_and_every_reply() {
    let desk = Desk::new(receipt()).await;
    let (conversation, id) = desk.waiting_refund().await;
    // One DynamoDB request at a time, as DynamoDB serialises writes of one
    // item: every writer reads the header before any of them writes it.
    let proxy = one_at_a_time(&moto().endpoint).await;
    let payments = desk.payments.uri();
    let run = |args: Vec<String>| {
        let (table, proxy, payments) = (desk.h.table.clone(), proxy.clone(), payments.clone());
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            admin(&table, &proxy, &payments, &args).await
        }
    };
    let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();

    let (a, b, r1, r2) = tokio::join!(
        run(argv(&["approve", &id, "--by", "alice"])),
        run(argv(&["approve", &id, "--by", "bob"])),
        run(argv(&[
            "reply",
            &conversation,
            "--by",
            "carol",
            "--text",
            "Looking at it now."
        ])),
        // One person's two replies: another's would be refused while
        // carol has the conversation (contract 30).
        run(argv(&[
            "reply",
            &conversation,
            "--by",
            "carol",
            "--text",
            "We are on it."
        ])),
    );

    let mut codes = vec![a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(codes, [Some(0), Some(1)], "{} / {}", stderr(&a), stderr(&b));
    ok(&r1);
    ok(&r2);
    let mut words = desk.person_words(&conversation).await;
    words.sort();
    assert_eq!(words, [APPROVED, "Looking at it now.", "We are on it."]);
    let seqs: Vec<u64> = desk.h.exchanges(&conversation).await.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3], "one sequence, no gaps, none overwritten");
    assert_eq!(bodies(&desk.payments).await.len(), 1);
}

#[tokio::test]
async fn a_reply_reaches_a_handed_off_conversation_which_still_gets_no_model_call() {
    let desk = Desk::new(receipt()).await;
    let asked = desk.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let handoff_id = handoff::handoff_id(&conversation);
    // About to expire: a person's reply counts as an exchange for its expiry.
    let now_s = refund_chat::clock::now_ms() / 1000;
    set_expiry(&desk.h, &conversation, now_s + 60).await;

    ok(&desk
        .run(&[
            "reply",
            &handoff_id,
            "--by",
            "sam",
            "--text",
            "Hello, I am Sam. What happened?",
        ])
        .await);
    let expires = header_number(&desk.h, &conversation, "expires_at").await;
    assert!(
        expires > now_s + 23 * 3600,
        "a day after the reply, not a minute: {expires}"
    );
    let later = desk.h.say(Some(&conversation), "my sofa arrived torn").await;

    assert_eq!(later.reply(), told(handoff::WITH_A_PERSON));
    assert!(desk.h.model_requests().await.is_empty(), "a person has it: no model");
    let read = desk.read(&conversation, "").await;
    assert_eq!(read["handed_off"], true);
    let shown = messages(&read);
    let froms: Vec<&str> = shown.iter().map(|m| m.1.as_str()).collect();
    assert_eq!(froms, ["customer", "agent", "person", "customer", "agent"]);
    assert_eq!(shown[1].2, told(handoff::fixed_reply(Reason::CustomerAsked)));
    assert_eq!(shown[2].2, "Hello, I am Sam. What happened?");
    // A reply changes nothing about who has it.
    let open = stdout(&desk.run(&["handoffs"]).await);
    assert!(open.contains(&handoff_id), "{open}");

    let closed = desk
        .run(&[
            "close-handoff",
            &handoff_id,
            "--by",
            "sam",
            "--text",
            "Your new sofa ships Monday.",
        ])
        .await;
    ok(&closed);
    let last = messages(&desk.read(&conversation, &format!("after={}", shown[4].0)).await);
    assert_eq!(
        last.iter().map(|m| (m.1.as_str(), m.2.as_str())).collect::<Vec<_>>(),
        [("person", "Your new sofa ships Monday.")]
    );
}

#[tokio::test]
async fn a_reply_with_control_characters_or_to_no_conversation_is_refused_and_writes_nothing() {
    let desk = Desk::new(receipt()).await;
    let asked = desk.h.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let file = std::env::temp_dir().join(format!("reply-{}.txt", fresh_request_id()));
    // Paragraphs are a reply's (contract 24, tightened); a bell is no one's.
    std::fs::write(&file, "line one\n\nline two\u{7}\n").unwrap();

    for (args, why) in [
        (
            vec!["reply", conversation.as_str(), "--by", "sam", "--text", "hi\u{1b}[2J"],
            "control character",
        ),
        (
            vec![
                "reply",
                conversation.as_str(),
                "--by",
                "sam",
                "--text-file",
                file.to_str().unwrap(),
            ],
            "control character",
        ),
        (
            vec!["reply", conversation.as_str(), "--by", "sam", "--text", "  "],
            "empty",
        ),
        (
            vec!["reply", "c_0000", "--by", "sam", "--text", "hello"],
            "no conversation c_0000",
        ),
        (
            vec![
                "close-handoff",
                &handoff::handoff_id(&conversation),
                "--by",
                "sam",
                "--text",
                "bye\u{7}",
            ],
            "control character",
        ),
    ] {
        let refused = desk.run(&args).await;
        assert_eq!(refused.status.code(), Some(1), "{args:?}: {}", stderr(&refused));
        assert!(stderr(&refused).contains(why), "{args:?}: {}", stderr(&refused));
        assert!(
            !stderr(&refused).contains('\u{1b}'),
            "the terminal sees it made visible"
        );
    }
    let too_long = "x".repeat(4001);
    let refused = desk
        .run(&["reply", &conversation, "--by", "sam", "--text", &too_long])
        .await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(desk.person_words(&conversation).await.is_empty());
    let open = stdout(&desk.run(&["handoffs"]).await);
    assert!(open.contains(&handoff::handoff_id(&conversation)), "still open: {open}");
    std::fs::remove_file(file).ok();
}

#[tokio::test]
async fn a_read_has_the_posts_identity_rules_and_one_404() {
    let desk = Desk::new(receipt()).await;
    let (conversation, _) = desk.waiting_refund().await;
    let other = desk
        .h
        .send(post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "hello"}).to_string(),
            &[],
        ))
        .await;
    let others = other.conversation_id().to_owned();
    let expired = desk.h.say(None, "hello again").await.conversation_id().to_owned();
    expire(&desk.h, &expired).await;
    let (calls, stored) = (desk.h.model_requests().await.len(), desk.h.ledger().await);

    let unknown = desk.h.read("c_00000000000000000000000000000000", "").await;
    let someone_elses = desk.h.read(&others, "").await;
    let gone = desk.h.read(&expired, "").await;
    for answer in [&unknown, &someone_elses, &gone] {
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.raw);
        assert_eq!(answer.raw, unknown.raw, "one body for all three");
    }
    let app = &desk.h.app;
    let unsigned = send_as(app, read_event(&conversation, "", None), &fresh_request_id(), 0).await;
    assert_eq!(unsigned.status, StatusCode::UNAUTHORIZED);
    let mismatch = send_as(
        app,
        read_event(&conversation, "user_id=u-2002", Some(USER)),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(mismatch.status, StatusCode::FORBIDDEN);
    for bad in ["after=-1", "after=x", "after=", "after=1.5", "after=1&after=2"] {
        let answer = desk.h.read(&conversation, bad).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}: {}", answer.raw);
    }
    let mut post = read_event(&conversation, "", Some(USER));
    post["requestContext"]["http"]["method"] = json!("POST");
    let wrong = send_as(app, post, &fresh_request_id(), 0).await;
    assert_eq!(
        (wrong.status, wrong.header("allow")),
        (StatusCode::METHOD_NOT_ALLOWED, Some("GET"))
    );
    desk.read(&conversation, "").await;
    // No model, no budget: a read is never a turn, and writes nothing.
    assert_eq!(desk.h.model_requests().await.len(), calls);
    assert_eq!(desk.h.ledger().await, stored, "the budget and the ledger as they were");
}

#[tokio::test]
async fn under_body_identity_the_query_names_the_customer() {
    let h = TestApp::builder()
        .model(vec![text("Hello!")])
        .configure(|config| config.identity.source = refund_chat::config::IdentitySource::Body)
        .build()
        .await;
    let said = h.say(None, "hello").await;
    let conversation = said.conversation_id().to_owned();

    let mine = send_as(
        &h.app,
        read_event(&conversation, "user_id=u-1001", None),
        &fresh_request_id(),
        0,
    )
    .await;
    let theirs = send_as(
        &h.app,
        read_event(&conversation, "user_id=u-2002", None),
        &fresh_request_id(),
        0,
    )
    .await;
    let nobody = send_as(
        &h.app,
        read_event(&conversation, "after=0", None),
        &fresh_request_id(),
        0,
    )
    .await;

    assert_eq!(mine.status, StatusCode::OK, "{}", mine.raw);
    assert_eq!(messages(&mine.body).len(), 2);
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    assert_eq!(nobody.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_read_costs_what_it_returns_plus_the_header_however_long_the_conversation() {
    // What moto answered each read with: the items it read for it.
    let read_items: Arc<std::sync::Mutex<Vec<(String, u64)>>> = Arc::default();
    let operations = OperationLog::default();
    let store =
        refund_chat_local::proxy::Proxy::new(moto().endpoint.as_str(), false, operations.hook(|_| Action::Forward));
    let address = store.spawn().await.unwrap();
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .conversations_at(format!("http://{address}"))
        .build()
        .await;
    let id = h.say(None, "first").await.conversation_id().to_owned();
    for n in 1..30 {
        assert_eq!(h.say(Some(&id), &format!("message {n}")).await.status, StatusCode::OK);
    }
    let before = store.passed().len();

    let near_the_end = h.read(&id, "after=57").await;
    let past_the_end = h.read(&id, "after=18446744073709551615").await;

    assert_eq!(near_the_end.status, StatusCode::OK, "{}", near_the_end.raw);
    let shown: Vec<u64> = near_the_end.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, [58, 59], "exchange 29's two messages");
    assert_eq!(past_the_end.status, StatusCode::OK, "{}", past_the_end.raw);
    assert_eq!(past_the_end.body["messages"], json!([]));
    for passed in &store.passed()[before..] {
        let answer: Value = passed
            .answer
            .as_ref()
            .and_then(|a| serde_json::from_slice(a).ok())
            .unwrap_or(Value::Null);
        let request: Value = serde_json::from_slice(&passed.request).unwrap_or(Value::Null);
        let items = answer["ScannedCount"].as_u64().unwrap_or_default();
        let header = request["KeyConditionExpression"]
            .as_str()
            .is_some_and(|k| k.contains(":head"));
        let what = if header { "header" } else { "query" };
        read_items.lock().unwrap().push((what.to_owned(), items));
    }
    // Only what the function's role grants on this table (template.yaml; a
    // transaction's items are authorised as the writes they are).
    for operation in operations.names().iter().filter(|o| *o != "TransactWriteItems") {
        let action = format!("dynamodb:{operation}");
        assert!(
            refund_chat::ledger::dynamo::conversations::ACTIONS_USED.contains(&action.as_str()),
            "{action} is not granted on the conversation table"
        );
    }
    let mut reads = read_items.lock().unwrap().clone();
    reads.sort();
    assert_eq!(
        reads,
        [
            ("header".to_owned(), 1),
            ("header".to_owned(), 1),
            ("query".to_owned(), 1)
        ],
        "the header, then only exchange 29 (no query past the last exchange there can be): {reads:?}"
    );
}

#[tokio::test]
async fn a_refund_that_waits_for_a_person_says_so_until_it_is_decided() {
    let desk = Desk::new(receipt()).await;
    let answer = desk.h.say(None, BIG_REFUND).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.body["awaiting_approval"], true, "{}", answer.raw);
    let conversation = answer.conversation_id().to_owned();
    assert_eq!(desk.read(&conversation, "").await["awaiting_approval"], true);
    let plain = desk.h.say(Some(&conversation), "thank you").await;
    assert_eq!(
        plain.body.get("awaiting_approval"),
        None,
        "only the turn that sent it: {}",
        plain.raw
    );
    assert_eq!(
        desk.read(&conversation, "").await["awaiting_approval"],
        true,
        "still waiting: the page picks polling up after a reload"
    );
    let id = desk
        .h
        .refund_records()
        .await
        .iter()
        .find(|r| attr(r, "state") == Some("awaiting_approval"))
        .and_then(|r| attr(r, "record_id").map(str::to_owned))
        .expect("the refund that waits");

    ok(&desk
        .run(&["reject", &id, "--by", "sam", "--reason", "photo needed"])
        .await);

    assert_eq!(desk.read(&conversation, "").await["awaiting_approval"], false);
}
