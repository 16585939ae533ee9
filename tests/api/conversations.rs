//! Conversations (contract 11): kept by the function, one turn at a time,
//! each exchange appended once, a bounded window sent to the model, and
//! nobody's conversation visible to another customer.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::StatusCode;
use refund_chat::conversation::ConversationId;
use refund_chat::ledger::dynamo::conversations::HEAD;
use refund_chat::ledger::{Begun, ConversationLease, ConversationStore};
use refund_chat::refund::WriterMark;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

/// The `(role, content)` of every message of one model request after the system prompt.
fn sent(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_owned(), content.to_owned())
}

/// The states of the ledger's request records (the keys).
async fn key_states<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) -> Vec<String> {
    h.ledger()
        .await
        .iter()
        .filter(|item| attr(item, "kind") == Some("request"))
        .filter_map(|item| attr(item, "state").map(str::to_owned))
        .collect()
}

/// Another invocation holds the conversation's lease until `lease_until_ms`.
async fn hold_lease<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>, id: &str, lease_until_ms: u64) {
    let lease = ConversationLease {
        id: ConversationId::parse(id).unwrap(),
        customer: USER.to_owned(),
        writer: WriterMark::fixed("req-other/w"),
        lease_until_ms,
        scope: "req-other".into(),
    };
    let begun = h
        .conversations()
        .begin(&lease, false, refund_chat::clock::now_ms())
        .await;
    assert!(matches!(begun, Ok(Begun::Held(_))), "{begun:?}");
}

#[tokio::test]
async fn a_detail_given_in_the_next_message_completes_the_refund() {
    let h = TestApp::new(
        vec![
            text("Which order is it, and how much should I refund?"),
            refund_call("c1", "A-1001", 1250),
            text("Done: 12.50 refunded for A-1001."),
        ],
        receipt(),
    )
    .await;

    let first = h.say(None, "my mug arrived broken").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    let id = first.conversation_id().to_owned();
    let second = h.say(Some(&id), "A-1001, the whole 12.50").await;

    assert_eq!(second.status, StatusCode::OK, "{}", second.raw);
    assert_eq!(second.conversation_id(), id);
    assert_eq!(second.reply(), "Done: 12.50 refunded for A-1001.");
    let requests = h.model_requests().await;
    assert_eq!(
        sent(&requests[1]),
        vec![
            pair("user", "my mug arrived broken"),
            pair("assistant", "Which order is it, and how much should I refund?"),
            pair("user", "A-1001, the whole 12.50"),
        ],
        "the model sees the earlier exchange, then the new message"
    );
    assert_eq!(h.payments_requests().await.len(), 1);
    let exchanges = h.exchanges(&id).await;
    assert_eq!(exchanges.len(), 2);
    assert_eq!(
        exchanges[1].exchange.customer_message(),
        Some("A-1001, the whole 12.50")
    );
    assert_eq!(exchanges[1].exchange.reply(), Some("Done: 12.50 refunded for A-1001."));
    // The refund record names the conversation of the turn that wrote it.
    let records = h.refund_records().await;
    assert_eq!(attr(&records[0], "conversation_id"), Some(id.as_str()));
}

#[tokio::test]
async fn a_refund_in_the_history_is_sent_to_the_model_and_never_made_again() {
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1250),
            text("Done."),
            text("You are welcome."),
        ],
        receipt(),
    )
    .await;

    let first = h.say(None, REFUND_MESSAGE).await;
    let second = h.say(Some(first.conversation_id()), "thanks").await;

    assert_eq!(second.status, StatusCode::OK, "{}", second.raw);
    assert_eq!(h.payments_requests().await.len(), 1, "history is data, never run");
    let third_request = &h.model_requests().await[2];
    assert_eq!(
        tool_messages(third_request).len(),
        1,
        "the tool call is sent with its result"
    );
    let call = &third_request["messages"][2]["tool_calls"][0];
    assert_eq!(call["id"], "c1");
    assert_eq!(third_request["messages"][3]["tool_call_id"], "c1");
}

#[tokio::test]
async fn an_unknown_expired_or_foreign_conversation_is_one_404_before_any_model_call() {
    let h = TestApp::new(vec![text("Hello.")], receipt()).await;
    let mine = h.say(None, "hello").await.conversation_id().to_owned();
    let foreign = send_as(
        &h.app,
        post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "hi", "conversation_id": mine}).to_string(),
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await;
    let unknown = h.say(Some("c_00000000000000000000000000000000"), "hi").await;
    // Expired: TTL deletes lazily, so the item is still there.
    aws_sdk_dynamodb::Client::new(&h.aws)
        .update_item()
        .table_name(conversation_table(&h.table))
        .key("pk", AttributeValue::S(mine.clone()))
        .key("sk", AttributeValue::S(HEAD.into()))
        .update_expression("SET expires_at = :past")
        .expression_attribute_values(
            ":past",
            AttributeValue::N((refund_chat::clock::now_ms() / 1000 - 1).to_string()),
        )
        .send()
        .await
        .unwrap();
    let expired = h.say(Some(&mine), "hi again").await;

    for answer in [&foreign, &unknown, &expired] {
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.raw);
        assert_eq!(answer.raw, unknown.raw, "no one learns which of the three it was");
    }
    assert_eq!(
        h.model_requests().await.len(),
        1,
        "only the first message reached the model"
    );
}

#[tokio::test]
async fn a_message_while_the_previous_turn_runs_is_a_409_with_its_leases_retry_after() {
    let h = TestApp::new(vec![text("Hello.")], receipt()).await;
    let id = h.say(None, "hello").await.conversation_id().to_owned();
    hold_lease(&h, &id, refund_chat::clock::now_ms() + 7_500).await;

    let busy = h
        .say_with(Some(&id), "are you there?", &[("idempotency-key", "k-busy")])
        .await;

    assert_eq!(busy.status, StatusCode::CONFLICT, "{}", busy.raw);
    let retry_after: u64 = busy.header("retry-after").unwrap().parse().unwrap();
    assert!((7..=8).contains(&retry_after), "{retry_after}");
    assert_eq!(h.model_requests().await.len(), 1);
    // The key was given back, not stored: the re-send the 409 asks for runs.
    assert_eq!(key_states(&h).await, ["released"]);
}

#[tokio::test]
async fn a_dead_invocations_lease_runs_out_by_itself() {
    let h = TestApp::new(vec![text("Hello."), text("Still here.")], receipt()).await;
    let id = h.say(None, "hello").await.conversation_id().to_owned();
    hold_lease(&h, &id, refund_chat::clock::now_ms() - 1).await;

    let answer = h.say(Some(&id), "are you there?").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(h.exchanges(&id).await.len(), 2);
}

#[tokio::test]
async fn messages_sent_at_once_to_one_conversation_take_turns() {
    // The model takes most of its timeout, so the messages overlap even on a
    // loaded machine. moto is not atomic under concurrent conditional writes
    // (two leases can both pass); DynamoDB is, per item, and the proxy
    // passes one request at a time, as DynamoDB orders the writes of one item.
    let serialised = proxy(&moto().endpoint, true, forward_all()).await;
    let h = TestApp::builder()
        .model_responder(|_| text("Noted.").set_delay(Duration::from_millis(400)))
        .ledger_at(serialised.clone())
        .conversations_at(serialised)
        .build()
        .await;
    let id = h.say(None, "hello").await.conversation_id().to_owned();

    let messages: Vec<String> = (0..6).map(|i| format!("message {i}")).collect();
    let answers = futures::future::join_all(messages.iter().map(|m| h.say(Some(&id), m))).await;

    let ok: Vec<_> = answers.iter().filter(|a| a.status == StatusCode::OK).collect();
    let busy = answers.iter().filter(|a| a.status == StatusCode::CONFLICT).count();
    assert_eq!(
        ok.len() + busy,
        6,
        "{:?}",
        answers.iter().map(|a| &a.raw).collect::<Vec<_>>()
    );
    assert!(busy >= 1, "the messages overlapped");
    let exchanges = h.exchanges(&id).await;
    assert_eq!(exchanges.len(), 1 + ok.len(), "one exchange per 200, none per 409");
    assert_eq!(
        h.model_requests().await.len(),
        1 + ok.len(),
        "a 409 costs no model call"
    );
    let seqs: Vec<u64> = exchanges.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..exchanges.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_replayed_message_appends_nothing() {
    let h = TestApp::new(vec![text("Hello.")], receipt()).await;
    let key = [("idempotency-key", "k-replay")];

    let first = h.say_with(None, "hello", &key).await;
    let again = h.say_with(None, "hello", &key).await;

    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.raw, first.raw);
    assert_eq!(h.exchanges(first.conversation_id()).await.len(), 1);
    assert_eq!(h.model_requests().await.len(), 1);
}

/// Puts the key's request record back to `in_progress` with an ended lease:
/// the state a dead invocation leaves when it died after the append.
async fn kill_after_the_append<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>) {
    let records: Vec<_> = h
        .ledger()
        .await
        .into_iter()
        .filter(|i| attr(i, "kind") == Some("request"))
        .collect();
    assert_eq!(records.len(), 1);
    aws_sdk_dynamodb::Client::new(&h.aws)
        .update_item()
        .table_name(&h.table)
        .key("pk", records[0]["pk"].clone())
        .update_expression(
            "SET #state = :in_progress, lease_until_ms = :ended, writer = :dead REMOVE response_status, response_body",
        )
        .expression_attribute_names("#state", "state")
        .expression_attribute_values(":in_progress", AttributeValue::S("in_progress".into()))
        .expression_attribute_values(":ended", AttributeValue::N("1".into()))
        .expression_attribute_values(":dead", AttributeValue::S("req-dead/w".into()))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_takeover_of_a_dead_invocations_key_never_appends_the_exchange_twice() {
    let h = TestApp::new(
        vec![
            text("Hello."),
            refund_call("c1", "A-1001", 1250),
            text("Done."),
            refund_call("c2", "A-1001", 1250),
            text("Done again."),
        ],
        receipt(),
    )
    .await;
    let id = h.say(None, "hello").await.conversation_id().to_owned();
    let key = [("idempotency-key", "k-dead")];
    let first = h.say_with(Some(&id), REFUND_MESSAGE, &key).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    kill_after_the_append(&h).await;

    let retry = h.say_with(Some(&id), REFUND_MESSAGE, &key).await;

    assert_eq!(retry.status, StatusCode::OK, "{}", retry.raw);
    assert_eq!(h.exchanges(&id).await.len(), 2, "the message's exchange is there once");
    assert_eq!(h.payments_requests().await.len(), 1, "and its refund was made once");
}

#[tokio::test]
async fn a_takeover_continues_the_conversation_its_dead_first_request_began() {
    let h = TestApp::new(vec![text("Hello."), text("Hello again.")], receipt()).await;
    let key = [("idempotency-key", "k-new")];
    let first = h.say_with(None, "hello", &key).await;
    kill_after_the_append(&h).await;

    let retry = h.say_with(None, "hello", &key).await;

    assert_eq!(retry.status, StatusCode::OK, "{}", retry.raw);
    assert_eq!(
        retry.conversation_id(),
        first.conversation_id(),
        "not a second conversation"
    );
    assert_eq!(h.exchanges(first.conversation_id()).await.len(), 1);
}

#[tokio::test]
async fn an_unreachable_conversation_store_is_a_503_before_any_model_call() {
    let h = TestApp::builder()
        .model(vec![text("Hello.")])
        .conversations_at(format!("http://127.0.0.1:{}", free_port()))
        .configure(|config| config.budget.turns_per_hour = 1)
        .build()
        .await;

    // A new conversation needs the store only at its append; one continued needs its lease.
    let answer = h
        .say_with(
            Some("c_0123456789abcdef0123456789abcdef"),
            REFUND_MESSAGE,
            &[("idempotency-key", "k-503")],
        )
        .await;

    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.raw);
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
    assert_eq!(key_states(&h).await, ["released"], "the key was given back");
    let turn = h.say(None, "hello").await;
    assert_eq!(
        turn.status,
        StatusCode::OK,
        "the turn taken with the key was given back: {}",
        turn.raw
    );
}

#[tokio::test]
async fn a_failed_append_never_changes_the_answer() {
    let log = OperationLog::default();
    let conversations = proxy(
        &moto().endpoint,
        false,
        log.hook(|seen| match seen.dynamodb_operation() {
            "TransactWriteItems" => dynamo_error("InternalServerError", "injected", json!({})),
            _ => Action::Forward,
        }),
    )
    .await;
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250), text("Done.")])
        .conversations_at(conversations)
        .build()
        .await;

    let answer = h.say(None, REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.reply(), "Done.");
    assert_eq!(h.payments_requests().await.len(), 1);
    assert!(h.exchanges(answer.conversation_id()).await.is_empty());
    assert!(
        log.names().contains(&"TransactWriteItems".to_owned()),
        "{:?}",
        log.names()
    );
}

#[tokio::test]
async fn a_turn_whose_append_failed_leaves_its_conversation_free() {
    // The second message's append fails on every attempt; the third must run.
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let conversations = proxy(&moto().endpoint, false, {
        let failing = failing.clone();
        std::sync::Arc::new(move |seen: &Seen| {
            let fail =
                seen.dynamodb_operation() == "TransactWriteItems" && failing.load(std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                if fail {
                    dynamo_error("InternalServerError", "injected", json!({}))
                } else {
                    Action::Forward
                }
            })
        })
    })
    .await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .conversations_at(conversations)
        .build()
        .await;
    let id = h.say(None, "first").await.conversation_id().to_owned();
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let second = h.say(Some(&id), "second").await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.raw);
    failing.store(false, std::sync::atomic::Ordering::SeqCst);

    let third = h.say(Some(&id), "third").await;

    assert_eq!(
        third.status,
        StatusCode::OK,
        "the ended turn still held the conversation: {}",
        third.raw
    );
    assert_eq!(h.exchanges(&id).await.len(), 2, "the first and the third");
}

#[tokio::test]
async fn the_window_is_the_most_recent_whole_exchanges_within_both_limits() {
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .configure(|config| {
            config.conversation_window.max_exchanges = 3;
            // Each exchange is its message (2 characters) and "ok": 4. 10 fit two.
            config.conversation_window.max_chars = 10;
        })
        .build()
        .await;
    let id = h.say(None, "m0").await.conversation_id().to_owned();
    for i in 1..5 {
        assert_eq!(h.say(Some(&id), &format!("m{i}")).await.status, StatusCode::OK);
    }

    let requests = h.model_requests().await;
    assert_eq!(
        sent(&requests[4]),
        vec![
            pair("user", "m2"),
            pair("assistant", "ok"),
            pair("user", "m3"),
            pair("assistant", "ok"),
            pair("user", "m4"),
        ]
    );
    assert_eq!(h.exchanges(&id).await.len(), 5, "the whole conversation is kept");
}

#[tokio::test]
async fn a_conversation_of_100_exchanges_of_4000_characters_fits() {
    let long_reply = "r".repeat(4000);
    let reply = long_reply.clone();
    let h = TestApp::builder().model_responder(move |_| text(&reply)).build().await;
    let message = "é".repeat(4000);
    let id = h.say(None, &message).await.conversation_id().to_owned();
    for _ in 1..100 {
        let answer = h.say(Some(&id), &message).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    }

    let exchanges = h.exchanges(&id).await;
    assert_eq!(exchanges.len(), 100);
    assert!(
        exchanges
            .iter()
            .all(|e| e.exchange.reply() == Some(long_reply.as_str()))
    );
    let largest = items(&h.aws, &conversation_table(&h.table))
        .await
        .iter()
        .map(|item| {
            item.iter()
                .map(|(k, v)| k.len() + v.as_s().map_or(16, String::len))
                .sum::<usize>()
        })
        .max()
        .unwrap();
    assert!(
        largest < 40_000,
        "the largest item is {largest} bytes, far below 400 KB"
    );
    // The prompt stays flat: the window, not the conversation.
    let last = h.model_requests().await.pop().unwrap();
    let prompt_chars: usize = sent(&last).iter().map(|(_, content)| content.chars().count()).sum();
    assert!(prompt_chars <= 24_000 + 4000, "{prompt_chars}");
}

#[tokio::test]
async fn the_answer_of_a_failed_turn_names_its_conversation_and_is_kept() {
    let h = TestApp::new(
        vec![ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "boom"}}))],
        receipt(),
    )
    .await;

    let answer = h.say(None, "hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{}", answer.raw);
    let exchanges = h.exchanges(answer.conversation_id()).await;
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0].status, 502);
    assert_eq!(exchanges[0].exchange.reply(), None);
}

/// The epoch-seconds number `name` of an item.
fn seconds(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> u64 {
    item[name].as_n().unwrap().parse().unwrap()
}

/// A conversation's items, its header first.
async fn conversation_items<K: refund_chat::secrets::ApiKeySource>(
    h: &TestApp<K>,
    id: &str,
) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    let mut found: Vec<_> = items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .filter(|item| attr(item, "pk") == Some(id))
        .collect();
    found.sort_by_key(|item| attr(item, "sk") != Some(HEAD));
    found
}

#[tokio::test]
async fn every_item_lives_as_long_as_its_conversation_and_an_append_costs_the_same_however_long() {
    let log = OperationLog::default();
    let conversations = proxy(&moto().endpoint, false, log.hook(|_| Action::Forward)).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .conversations_at(conversations)
        .build()
        .await;
    let first_s = refund_chat::clock::now_ms() / 1000;
    let id = h.say(None, "hello").await.conversation_id().to_owned();
    let mut operations = Vec::new();
    for i in 0..6 {
        let before = log.names().len();
        assert_eq!(h.say(Some(&id), &format!("message {i}")).await.status, StatusCode::OK);
        operations.push(log.names()[before..].to_vec());
    }

    assert!(
        operations.windows(2).all(|pair| pair[0] == pair[1]),
        "the same operations for the 2nd and the 7th exchange: {operations:?}"
    );
    let found = conversation_items(&h, &id).await;
    assert_eq!(found.len(), 1 + 7 + 7, "the header, seven exchanges, seven scope marks");
    let (head, rest) = found.split_first().unwrap();
    let ends_by = seconds(head, "ends_by");
    let max_age = h.app.config().conversation_max_age.as_secs();
    assert!(
        (first_s + max_age..=first_s + max_age + 5).contains(&ends_by),
        "{ends_by}"
    );
    assert!(seconds(head, "expires_at") <= ends_by);
    for item in rest {
        assert_eq!(
            seconds(item, "expires_at"),
            ends_by,
            "{item:?} must live as long as its conversation"
        );
        assert_eq!(attr(item, "customer"), Some(USER), "forget finds it without its header");
    }
}

#[tokio::test]
async fn a_conversation_ends_at_its_maximum_age_however_recent_its_last_exchange() {
    let h = TestApp::builder().model_responder(|_| text("ok")).build().await;
    let id = h.say(None, "hello").await.conversation_id().to_owned();
    // As if its first exchange were older than CONVERSATION_MAX_AGE_HOURS.
    let past = AttributeValue::N((refund_chat::clock::now_ms() / 1000 - 1).to_string());
    aws_sdk_dynamodb::Client::new(&h.aws)
        .update_item()
        .table_name(conversation_table(&h.table))
        .key("pk", AttributeValue::S(id.clone()))
        .key("sk", AttributeValue::S(HEAD.to_owned()))
        .update_expression("SET ends_by = :past")
        .expression_attribute_values(":past", past)
        .send()
        .await
        .unwrap();

    let last = h.say(Some(&id), "still there?").await;
    let after = h.say(Some(&id), "hello?").await;

    assert_eq!(last.status, StatusCode::OK, "{}", last.raw);
    assert_eq!(after.status, StatusCode::NOT_FOUND, "{}", after.raw);
}

#[tokio::test]
async fn the_transcript_shows_every_exchange_its_refunds_and_no_control_character() {
    let h = TestApp::new(
        vec![text("Which order?"), refund_call("c1", "A-1001", 1250), text("Done.")],
        receipt(),
    )
    .await;
    let payments = wiremock::MockServer::start().await;
    let id = h
        .say(None, "my mug \u{1b}[2Jarrived broken")
        .await
        .conversation_id()
        .to_owned();
    h.say(Some(&id), "A-1001, 12.50").await;
    let record_id = attr(&h.refund_records().await[0], "record_id").unwrap().to_owned();

    let shown = crate::approvals::admin(&h.table, &moto().endpoint, &payments.uri(), &["conversation", &id]).await;

    assert_eq!(shown.status.code(), Some(0), "{}", crate::approvals::stderr(&shown));
    let out = crate::approvals::stdout(&shown);
    assert!(!out.contains('\u{1b}'), "{out}");
    assert!(out.contains("customer: my mug \\u{1b}[2Jarrived broken"), "{out}");
    assert!(out.contains("assistant: Which order?"), "{out}");
    assert!(out.contains("assistant calls issue_refund"), "{out}");
    assert!(out.contains("tool result: "), "{out}");
    assert!(out.contains(&record_id), "the conversation's refund records: {out}");
    let record = crate::approvals::admin(&h.table, &moto().endpoint, &payments.uri(), &["show", &record_id]).await;
    let out = crate::approvals::stdout(&record);
    assert!(
        out.lines()
            .any(|line| line.starts_with("conversation_id") && line.ends_with(&id)),
        "show names the conversation: {out}"
    );
}

#[tokio::test]
async fn forgetting_a_customer_deletes_their_conversations_and_messages_and_keeps_their_refunds() {
    let h = TestApp::builder().model_responder(refunding_model).build().await;
    // Above the automatic limit: the record keeps the message for an approver.
    let mine = h
        .say_with(
            None,
            "refund D-4001 12000 Zanzibar-quokka",
            &[("idempotency-key", "k-1")],
        )
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.raw);
    let other = send_as(
        &h.app,
        post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "refund B-1 100"}).to_string(),
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await;
    let payments = wiremock::MockServer::start().await;

    let forgot = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &payments.uri(),
        &["forget", "--customer", USER, "--by", "dpo@shop"],
    )
    .await;

    assert_eq!(forgot.status.code(), Some(0), "{}", crate::approvals::stderr(&forgot));
    assert!(h.exchanges(mine.conversation_id()).await.is_empty());
    let left: Vec<_> = items(&h.aws, &conversation_table(&h.table)).await;
    // The other customer's conversation, and the posting of the order it
    // named (contract 30's search): nothing of the forgotten one's.
    assert!(
        left.iter().all(|item| attr(item, "pk") == Some(other.conversation_id())
            || (attr(item, "sk") == Some(other.conversation_id()) && attr(item, "customer") == Some("u-2002"))),
        "{left:?}"
    );
    let ledger = h.ledger().await;
    let records: Vec<_> = ledger.iter().filter(|i| attr(i, "kind") == Some("refund")).collect();
    assert_eq!(records.len(), 2, "every refund record stays");
    let record = records.iter().find(|r| attr(r, "user_id") == Some(USER)).unwrap();
    assert_eq!(attr(record, "customer_message"), None);
    assert_eq!(attr(record, "message_forgotten_by"), Some("dpo@shop"));
    assert!(attr(record, "message_forgotten_at").is_some());
    assert!(
        !ledger.iter().any(|i| attr(i, "kind") == Some("request")),
        "the customer's stored answers went too"
    );
    let audit: Vec<_> = ledger.iter().filter(|i| attr(i, "kind") == Some("forget")).collect();
    assert_eq!(audit.len(), 1);
    assert_eq!(attr(audit[0], "by"), Some("dpo@shop"));
    assert!(
        !format!("{ledger:?}").contains("Zanzibar-quokka"),
        "the message is nowhere in the ledger"
    );
}

#[tokio::test]
async fn forgetting_a_customer_finds_the_exchanges_of_a_conversation_whose_header_ttl_removed() {
    let h = TestApp::builder().model_responder(|_| text("ok")).build().await;
    let id = h.say(None, "my secret words").await.conversation_id().to_owned();
    h.say_with(Some(&id), "more words", &[("idempotency-key", "k-forget")])
        .await;
    // TTL removes the header first (it expires a TTL after the last exchange).
    aws_sdk_dynamodb::Client::new(&h.aws)
        .delete_item()
        .table_name(conversation_table(&h.table))
        .key("pk", AttributeValue::S(id.clone()))
        .key("sk", AttributeValue::S(HEAD.to_owned()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        conversation_items(&h, &id).await.len(),
        4,
        "two exchanges, two scope marks"
    );
    let payments = wiremock::MockServer::start().await;

    let forgot = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &payments.uri(),
        &["forget", "--customer", USER, "--by", "dpo@shop"],
    )
    .await;

    assert_eq!(forgot.status.code(), Some(0), "{}", crate::approvals::stderr(&forgot));
    assert!(conversation_items(&h, &id).await.is_empty(), "every item of it went");
    assert!(
        !h.ledger().await.iter().any(|i| attr(i, "kind") == Some("request")),
        "and the request records"
    );
}

#[tokio::test]
async fn a_message_re_sent_after_a_released_failure_appears_once_to_the_model() {
    // The first try fails with no refund recorded, so the key is released
    // and the re-send (the same body) runs afresh: in the conversation the
    // first try began, with its 200 kept there.
    let h = TestApp::new(
        vec![
            ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "boom"}})),
            text("Hello, how can I help?"),
            text("Sure."),
        ],
        receipt(),
    )
    .await;
    let key = [("idempotency-key", "k-released")];
    let failed = h.say_with(None, "hello", &key).await;
    assert_eq!(failed.status, StatusCode::BAD_GATEWAY, "{}", failed.raw);

    let retried = h.say_with(None, "hello", &key).await;

    assert_eq!(retried.status, StatusCode::OK, "{}", retried.raw);
    assert_eq!(
        retried.conversation_id(),
        failed.conversation_id(),
        "the same conversation"
    );
    let exchanges = h.exchanges(retried.conversation_id()).await;
    let statuses: Vec<u16> = exchanges.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [502, 200], "the failed try, then the answer");
    assert_eq!(exchanges[1].exchange.reply(), Some("Hello, how can I help?"));
    // One refund scope, one exchange for the model: the re-sent message
    // is sent once, in its retry and in the next turn's window.
    let next = h.say(Some(retried.conversation_id()), "and another thing").await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.raw);
    let requests = h.model_requests().await;
    assert_eq!(sent(&requests[1]), vec![pair("user", "hello")], "the retry");
    assert_eq!(
        sent(&requests[2]),
        vec![
            pair("user", "hello"),
            pair("assistant", "Hello, how can I help?"),
            pair("user", "and another thing"),
        ]
    );
    // The released key still names its body: another message needs another key.
    let other = h.say_with(None, "something else", &key).await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", other.raw);
}

/// What a person's note does to a conversation (contract 18): the header's
/// count moves on and an exchange item takes its place, while no turn holds
/// the lease it does not need.
async fn note_lands<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>, id: &str, seq: u64) {
    let table = conversation_table(&h.table);
    let client = aws_sdk_dynamodb::Client::new(&h.aws);
    let key = |sk: String| {
        [
            ("pk".to_owned(), AttributeValue::S(id.to_owned())),
            ("sk".to_owned(), AttributeValue::S(sk)),
        ]
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>()
    };
    client
        .update_item()
        .table_name(&table)
        .set_key(Some(key(HEAD.to_owned())))
        .update_expression("SET exchanges = :next")
        .condition_expression("exchanges = :seq")
        .expression_attribute_values(":seq", AttributeValue::N(seq.to_string()))
        .expression_attribute_values(":next", AttributeValue::N((seq + 1).to_string()))
        .send()
        .await
        .expect("the note's header update");
    let note = refund_chat::conversation::Exchange {
        messages: vec![refund_chat::chat::Message::Assistant {
            content: Some("A person approved your refund.".into()),
            tool_calls: Vec::new(),
        }],
    };
    let mut item = key(format!("x#{seq:06}"));
    for (name, value) in [
        ("seq", AttributeValue::N(seq.to_string())),
        ("customer", AttributeValue::S(USER.to_owned())),
        ("refund_record", AttributeValue::S(String::new())),
        ("messages", AttributeValue::S(note.to_json())),
    ] {
        item.insert(name.to_owned(), value);
    }
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(item))
        .send()
        .await
        .expect("the note's exchange");
}

#[tokio::test]
async fn an_exchange_appended_while_a_turn_runs_moves_the_turns_own_after_it() {
    let h = TestApp::new(vec![text("Hello."), text("You're welcome.")], receipt()).await;
    let first = h.say(None, "hello").await;
    assert_eq!(first.status, StatusCode::OK);
    let id = first.conversation_id().to_owned();
    let lease = ConversationLease {
        id: ConversationId::parse(&id).unwrap(),
        customer: USER.to_owned(),
        writer: WriterMark::fixed("req-2/w"),
        lease_until_ms: refund_chat::clock::now_ms() + 60_000,
        scope: "req-2".into(),
    };
    let conversations = h.conversations();
    let Ok(Begun::Held(held)) = conversations.begin(&lease, false, refund_chat::clock::now_ms()).await else {
        panic!("the lease");
    };
    assert_eq!(held.exchanges, 1);
    // A person's note lands while the turn runs.
    note_lands(&h, &id, 1).await;
    let new = refund_chat::ledger::NewExchange {
        verifying: false,
        from_visitor: false,
        label: None,
        handoff_due_at_ms: None,
        told: None,
        router: None,
        writes: Default::default(),
        orders: Vec::new(),
        exchange: refund_chat::conversation::Exchange::of_turn(
            &[refund_chat::chat::Message::User("and now?".into())],
            Some("Still here."),
        ),
        status: 200,
        scope: refund_chat::refund::RefundScope::for_request(USER, "req-2"),
        marked: true,
        refund_recorded: false,
        awaiting_approval: false,
        handoff: None,
        tokens: None,
        key: None,
    };
    let appended = conversations
        .append(&lease, &held, &new, refund_chat::clock::now_ms())
        .await;
    assert_eq!(appended.ok(), Some(refund_chat::ledger::Appended::Appended));
    let exchanges = h.exchanges(&id).await;
    let seqs: Vec<u64> = exchanges.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        vec![0, 1, 2],
        "the note keeps its place, the turn's exchange follows it"
    );
    assert_eq!(exchanges[2].exchange.reply(), Some("Still here."));
    // Given back: the next message is not refused as busy.
    let next = h.say(Some(&id), "thanks").await;
    assert_eq!(next.status, StatusCode::OK);
    // Sent once more, the same scope appends nothing.
    let again = conversations
        .append(&lease, &held, &new, refund_chat::clock::now_ms())
        .await;
    assert_eq!(again.ok(), Some(refund_chat::ledger::Appended::AlreadyThere));
}

#[tokio::test]
async fn a_lease_that_lands_after_its_turn_ended_never_holds_the_conversation() {
    // An attempt of `begin` the SDK gave up on (it timed out, and its retry
    // took the lease) is still on its way, and lands after the turn has
    // ended and given the lease back: played here by sending the second
    // message's `begin` once more, as it was, after its turn. The chaos run
    // saw this as 409s after a 200.
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    type Captured = Option<(reqwest::header::HeaderMap, Vec<u8>)>;
    let captured: std::sync::Arc<std::sync::Mutex<Captured>> = std::sync::Arc::default();
    let hook: Hook = {
        let (armed, captured) = (armed.clone(), captured.clone());
        std::sync::Arc::new(move |seen: &Seen| {
            let begin = seen.dynamodb_operation() == "UpdateItem"
                && String::from_utf8_lossy(&seen.body).contains("lease_until_ms = :until");
            if begin && armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
                let mut headers = reqwest::header::HeaderMap::new();
                for (name, value) in &seen.headers {
                    if let (Ok(name), Ok(value)) = (
                        reqwest::header::HeaderName::from_bytes(name.as_str().as_bytes()),
                        reqwest::header::HeaderValue::from_bytes(value.as_bytes()),
                    ) {
                        headers.insert(name, value);
                    }
                }
                *captured.lock().unwrap() = Some((headers, seen.body.to_vec()));
            }
            Box::pin(async { Action::Forward })
        })
    };
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .conversations_at(proxy(&moto().endpoint, false, hook).await)
        .build()
        .await;
    let id = h.say(None, "first").await.conversation_id().to_owned();
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let second = h.say(Some(&id), "second").await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.raw);

    let (headers, body) = captured.lock().unwrap().take().expect("the second turn's begin");
    let landed = reqwest::Client::new()
        .post(&moto().endpoint)
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("moto answers");
    assert!(
        landed.status().is_success() || landed.status() == 400,
        "a write or a failed condition: {}",
        landed.status()
    );
    let third = h.say(Some(&id), "third").await;

    assert_eq!(
        third.status,
        StatusCode::OK,
        "a late attempt of an ended turn's lease holds the conversation: {}",
        third.raw
    );
    assert_eq!(h.exchanges(&id).await.len(), 3);
}
