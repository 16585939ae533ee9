//! The intake's orchestration on the memory ledger, in milliseconds: what it
//! refuses before the secret, the model or the budget, and what it leaves
//! behind when a step fails. The HTTP answers are the API tests'; here the
//! edge's rendering is a stand-in that names the refusal.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::admission::IdempotencyKey;
use super::*;
use crate::doubles::{AnyOrder, RecordingRefunds};
use crate::ledger::memory::MemoryLedger;
use crate::refund::RefundOutcome;
use crate::secrets::{ApiKey, SecretError};

/// A key source that counts its reads and never has a key: a turn that
/// reaches the model shows as a 500 and a read.
#[derive(Default)]
struct CountingKey(AtomicUsize);

impl ApiKeySource for CountingKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(SecretError::NoKey)
    }
}

type TestIntake = Intake<CountingKey, RecordingRefunds, MemoryLedger, MemoryLedger, AnyOrder>;

/// The edge's rendering stands in as the refusal's name.
fn render(reply: &Reply) -> StoredResponse {
    let (status, body) = match &reply.result {
        Ok(text) => (200, json!({ "reply": text })),
        Err(refused) => (499, json!({ "refused": format!("{refused:?}") })),
    };
    let mut body = body;
    if let Some(id) = &reply.conversation {
        body["conversation_id"] = json!(id.as_str());
    }
    body["handed_off"] = json!(reply.handed_off);
    if let Some(expected) = &reply.person_expected {
        body["person_expected"] = expected.json();
    }
    StoredResponse {
        status,
        body: body.to_string(),
    }
}

fn config(turns_per_hour: u64) -> Config {
    let vars = [
        ("OPENAI_API_KEY_SECRET_ID", "openai-key".to_owned()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1".to_owned()),
        ("PAYMENTS_BASE_URL", "http://127.0.0.1:9/".to_owned()),
        ("ORDERS_BASE_URL", "http://127.0.0.1:9/".to_owned()),
        ("LEDGER_TABLE", "ledger".to_owned()),
        ("CONVERSATION_TABLE", "conversations".to_owned()),
        ("CUSTOMER_TURNS_PER_HOUR", turns_per_hour.to_string()),
    ];
    Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())).expect("test config")
}

fn intake(turns_per_hour: u64) -> TestIntake {
    let mut config = config(turns_per_hour);
    // Each handed-off answer reads the reply time afresh here.
    config.office.reply_time_cache = std::time::Duration::ZERO;
    intake_with(config)
}

fn intake_with(config: Config) -> TestIntake {
    let books = MemoryLedger::new();
    let ports = Ports {
        key_source: CountingKey::default(),
        refunds: RecordingRefunds::answering(RefundOutcome::Unrecorded),
        orders: AnyOrder,
        ledger: books.clone(),
        conversations: books,
        http: reqwest::Client::new(),
    };
    Intake::new(config, ports, render)
}

fn message(customer: &str, text: &str, conversation: Option<&ConversationId>, key: Option<&str>) -> Message {
    Message {
        customer: customer.to_owned(),
        text: CustomerMessage::new(text.to_owned()),
        conversation_id: conversation.cloned(),
        key: key.map(|key| Keyed {
            key: IdempotencyKey::parse(key.as_bytes()).expect("a valid key"),
            body_sha256: "hash".to_owned(),
        }),
        who: Who::Customer,
    }
}

/// A conversation of `customer` with one exchange already in it.
async fn stored_conversation(store: &MemoryLedger, customer: &str) -> ConversationId {
    store.stored_conversation(customer).await
}

fn invocation(request_id: &str) -> Invocation {
    Invocation::new(request_id, 0)
}

#[tokio::test]
async fn another_customers_conversation_is_refused_before_the_secret_and_its_turn_given_back() {
    let intake = intake(10);
    let theirs = stored_conversation(&intake.conversations, "u-2").await;
    let mut trace = Trace::default();

    let outcome = intake
        .take(
            message("u-1", "refund A-1", Some(&theirs), Some("k-1")),
            &invocation("r-1"),
            &mut trace,
            &Live::silent(),
        )
        .await;

    assert!(
        matches!(outcome.refused, Some(Refused::ConversationNotFound)),
        "{outcome:?}"
    );
    assert_eq!(intake.key_source.0.load(Ordering::SeqCst), 0, "no secret read");
    assert_eq!(
        intake.ledger.turns_counted("u-1", now_ms()),
        0,
        "the claim's turn is given back"
    );
    assert_eq!(
        intake.conversations.exchanges(&theirs).len(),
        1,
        "nothing appended to theirs"
    );
    // The answer is not stored: the retry it asks for runs.
    let retry = intake
        .take(
            message("u-1", "refund A-1", None, Some("k-1")),
            &invocation("r-2"),
            &mut Trace::default(),
            &Live::silent(),
        )
        .await;
    assert!(!retry.replayed);
}

#[tokio::test]
async fn a_spent_budget_refuses_before_the_model_and_frees_the_conversation() {
    let intake = intake(1);
    let conversation = stored_conversation(&intake.conversations, "u-1").await;
    intake
        .ledger
        .take_turn(
            &crate::budget::Account::of_customer("u-1", intake.config.budget),
            now_ms(),
        )
        .await
        .expect("the hour's one turn");
    let mut trace = Trace::default();

    let outcome = intake
        .take(
            message("u-1", "refund A-1", Some(&conversation), None),
            &invocation("r-1"),
            &mut trace,
            &Live::silent(),
        )
        .await;

    assert!(matches!(outcome.refused, Some(Refused::BudgetSpent(_))), "{outcome:?}");
    assert_eq!(trace.budget, Some("turns"));
    assert_eq!(intake.key_source.0.load(Ordering::SeqCst), 0, "no secret read");
    assert!(
        !intake.conversations.conversation_leased(&conversation),
        "the lease is given back"
    );
    assert_eq!(
        intake.conversations.exchanges(&conversation).len(),
        1,
        "no exchange for a refused message"
    );
}

#[tokio::test]
async fn a_message_the_screen_hands_off_gets_a_person_with_no_model_and_no_budget() {
    let intake = intake(10);
    let mut trace = Trace::default();

    let outcome = intake
        .take(
            message("u-1", "I want to talk to a person", None, Some("k-1")),
            &invocation("r-1"),
            &mut trace,
            &Live::silent(),
        )
        .await;

    assert_eq!(outcome.status, 200, "{outcome:?}");
    let body: serde_json::Value = serde_json::from_str(&outcome.body).expect("json");
    assert_eq!(body["handed_off"], true);
    // Code's words of when a person will answer (contract 32): always open
    // here, the setting's 30 minutes while no five first replies give a median.
    let when = "A person usually answers within 30 minutes.";
    assert_eq!(
        body["reply"],
        format!(
            "{} {when}",
            crate::handoff::fixed_reply(crate::handoff::Reason::CustomerAsked)
        )
    );
    assert_eq!(
        body["person_expected"],
        serde_json::json!({"open": true, "at": null, "within_minutes": 30, "sentence": when})
    );
    assert_eq!(intake.key_source.0.load(Ordering::SeqCst), 0, "no secret read");
    assert_eq!(
        intake.ledger.turns_counted("u-1", now_ms()),
        0,
        "a code handoff spends no budget"
    );
    let id = ConversationId::parse(body["conversation_id"].as_str().expect("named")).expect("an id");
    assert_eq!(intake.conversations.exchanges(&id).len(), 1, "the exchange is kept");
    // Due an hour of office hours later (always open here).
    let due = intake.conversations.handoff_due_at_ms(&id).expect("a due time");
    assert!(due.abs_diff(now_ms() + 3_600_000) < 60_000, "{due}");
    // The conversation is a person's now: the next message gets the fixed
    // sentence once, and the ones after it no words (contract 12).
    let next = |text: &'static str, request: &'static str| {
        let (intake, id) = (&intake, id.clone());
        async move {
            let answer = intake
                .take(
                    message("u-1", text, Some(&id), None),
                    &invocation(request),
                    &mut Trace::default(),
                    &Live::silent(),
                )
                .await;
            serde_json::from_str::<serde_json::Value>(&answer.body).expect("json")
        }
    };
    let first = next("hello?", "r-2").await;
    assert_eq!(first["reply"], format!("{} {when}", crate::handoff::WITH_A_PERSON));
    assert_eq!(first["handed_off"], true);
    let second = next("are you there?", "r-3").await;
    assert_eq!(second["reply"], "");
    assert_eq!(second["person_expected"]["within_minutes"], 30);
    // Five first replies within hours give a median: the sentence changed, so it is said again.
    let begun = now_ms() - 3_600_000;
    for minutes in [4, 6, 9, 12, 40] {
        intake.conversations.keep_first_reply(begun, begun + minutes * 60_000);
    }
    let third = next("still waiting", "r-4").await;
    assert_eq!(
        third["reply"],
        format!(
            "{} A person usually answers within 10 minutes.",
            crate::handoff::WITH_A_PERSON
        )
    );
    assert_eq!(next("ok", "r-5").await["reply"], "");
    // A message with no words from us has no reply in the conversation.
    let kept = intake.conversations.exchanges(&id);
    assert_eq!(kept.len(), 5);
    assert_eq!(kept[2].reply(), None);
    assert_eq!(intake.key_source.0.load(Ordering::SeqCst), 0, "still no secret read");
}

/// The measured reply time is read once a minute per container, not at
/// every answer and read of an open handoff (contract 32's hot path).
#[tokio::test]
async fn the_reply_time_is_read_once_a_minute_not_at_every_answer() {
    let intake = intake_with(config(10));
    let asked = intake
        .take(
            message("u-1", "I want to talk to a person", None, None),
            &invocation("r-1"),
            &mut Trace::default(),
            &Live::silent(),
        )
        .await;
    let asked: serde_json::Value = serde_json::from_str(&asked.body).expect("json");
    assert_eq!(asked["person_expected"]["within_minutes"], 30);
    let begun = now_ms() - 3_600_000;
    for minutes in [4, 6, 9, 12, 40] {
        intake.conversations.keep_first_reply(begun, begun + minutes * 60_000);
    }
    let id = ConversationId::parse(asked["conversation_id"].as_str().expect("named")).expect("an id");
    let read = intake.read(&id, "u-1", None, now_ms()).await.expect("read");
    assert_eq!(
        read.person_expected.map(|expected| expected.within_minutes),
        Some(Some(30)),
        "within the minute, the reply time read at the handoff"
    );
}

#[tokio::test]
async fn an_append_that_fails_frees_the_conversation_and_the_answer_stands() {
    let intake = intake(10);
    let conversation = stored_conversation(&intake.conversations, "u-1").await;
    intake.conversations.fail_appends(true);
    let mut trace = Trace::default();

    let outcome = intake
        .take(
            message("u-1", "can I speak to a human", Some(&conversation), Some("k-1")),
            &invocation("r-1"),
            &mut trace,
            &Live::silent(),
        )
        .await;

    assert_eq!(outcome.status, 200, "the answer stands: {outcome:?}");
    assert_eq!(trace.conversation.appended, Some("failed"));
    assert!(
        !intake.conversations.conversation_leased(&conversation),
        "a turn that ended does not hold its conversation"
    );
    // The key's answer is stored on its own: a retry replays it.
    intake.conversations.fail_appends(false);
    let retry = intake
        .take(
            message("u-1", "can I speak to a human", Some(&conversation), Some("k-1")),
            &invocation("r-2"),
            &mut Trace::default(),
            &Live::silent(),
        )
        .await;
    assert!(retry.replayed, "{retry:?}");
    assert_eq!(retry.body, outcome.body);
}

#[tokio::test]
async fn a_turn_that_cannot_read_the_key_leaves_no_exchange_and_gives_the_key_back() {
    let intake = intake(10);
    let conversation = stored_conversation(&intake.conversations, "u-1").await;
    let mut trace = Trace::default();

    let outcome = intake
        .take(
            message("u-1", "refund A-1", Some(&conversation), Some("k-1")),
            &invocation("r-1"),
            &mut trace,
            &Live::silent(),
        )
        .await;

    assert!(matches!(outcome.refused, Some(Refused::Secret(_))), "{outcome:?}");
    assert_eq!(intake.key_source.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        trace.key_settled,
        Some("released"),
        "a 500 that moved no money gives the key back"
    );
    assert!(!intake.conversations.conversation_leased(&conversation));
    assert_eq!(
        intake.conversations.exchanges(&conversation).len(),
        1,
        "no turn ran, no exchange"
    );
}
