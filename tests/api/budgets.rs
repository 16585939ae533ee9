//! Budgets (contract 13): a customer's turns per UTC hour and tokens per UTC
//! day, taken atomically before the turn, refused with 429 before the secret,
//! the model or payments, closed (503) when they cannot be read.

use lambda_http::http::StatusCode;
use refund_chat::budget::{Account, BudgetLimits, Reservation, Spent};
use refund_chat::clock::parse_utc;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::{BudgetStore, TakenTurn, TokenSettlement};
use serde_json::json;

use refund_chat_testkit::*;

/// A turn of these tests uses 270 tokens (the stand-in's `usage` of 135, for
/// the agent's call and for the routing call); it reserves more.
const TURN_TOKENS: i64 = 270;
const RESERVATION: u64 = 400;

fn limits(turns_per_hour: u64, tokens_per_day: u64) -> BudgetLimits {
    BudgetLimits {
        turns_per_hour,
        tokens_per_day,
        turn_reservation: RESERVATION,
    }
}

/// The customer's counter of `kind` (`turns`, `tokens`) as the ledger holds it.
async fn counter<K: refund_chat::secrets::ApiKeySource>(h: &TestApp<K>, kind: &str) -> Option<i64> {
    h.ledger()
        .await
        .into_iter()
        .find(|item| attr(item, "pk").is_some_and(|pk| pk.starts_with(&format!("budget#{kind}#"))))
        .and_then(|item| item.get(kind).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()))
}

/// DynamoDB's answer to a transaction whose `ClientRequestToken` it has seen
/// (within ten minutes): success, applying nothing. moto ignores the token,
/// so the hook plays DynamoDB's part.
fn token_seen(seen: &Seen, tokens: &std::sync::Mutex<Vec<String>>) -> bool {
    let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap_or_default();
    let Some(token) = body["ClientRequestToken"].as_str() else {
        return false;
    };
    let mut tokens = tokens.lock().unwrap();
    if tokens.iter().any(|t| t == token) {
        return true;
    }
    tokens.push(token.to_owned());
    false
}

#[tokio::test]
async fn six_requests_at_once_for_the_last_turn_get_exactly_one_200() {
    // moto is not atomic under concurrent conditional writes; DynamoDB is,
    // per item. The proxy passes one request at a time, as DynamoDB orders
    // the writes of one item.
    let serialised = proxy(&moto().endpoint, true, forward_all()).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(serialised)
        .configure(|config| config.budget = limits(3, 1_000_000))
        .build()
        .await;
    for _ in 0..2 {
        assert_eq!(h.say(None, "hello").await.status, StatusCode::OK);
    }

    let answers = futures::future::join_all((0..6).map(|_| h.say(None, "hello again"))).await;

    let ok = answers.iter().filter(|a| a.status == StatusCode::OK).count();
    let refused: Vec<_> = answers
        .iter()
        .filter(|a| a.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(
        (ok, refused.len()),
        (1, 5),
        "{:?}",
        answers.iter().map(|a| &a.raw).collect::<Vec<_>>()
    );
    for answer in &refused {
        let retry_after: u64 = answer.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=3600).contains(&retry_after), "{retry_after}");
    }
    assert_eq!(h.model_requests().await.len(), 3, "a refused turn reaches no model");
}

#[tokio::test]
async fn the_hour_rolls_over_at_its_end_and_the_day_at_midnight() {
    let aws = aws_at(&moto().endpoint).await;
    let ledger = DynamoLedger::from_sdk_config(&aws, new_table(&aws).await, LEDGER_TIMEOUT);
    let before = parse_utc("2026-12-01T10:59:59.500Z").unwrap();
    let limits = limits(2, 1000);
    let (u1, u2) = (Account::of_customer("u-1", limits), Account::of_customer("u-2", limits));

    for _ in 0..2 {
        assert_eq!(ledger.take_turn(&u1, before).await, Ok(TakenTurn::Taken));
    }
    assert_eq!(
        ledger.take_turn(&u1, before).await,
        Ok(TakenTurn::Refused(Spent::Turns { retry_after_secs: 1 })),
        "the last half second of the hour rounds up to 1"
    );
    assert_eq!(
        ledger.take_turn(&u2, before).await,
        Ok(TakenTurn::Taken),
        "per customer"
    );
    let next_hour = parse_utc("2026-12-01T11:00:00Z").unwrap();
    assert_eq!(ledger.take_turn(&u1, next_hour).await, Ok(TakenTurn::Taken));

    // The day's tokens: a turn may overshoot by itself; the next is refused until midnight.
    let reservation = Reservation {
        taken_at_ms: next_hour,
        tokens: RESERVATION,
    };
    ledger
        .settle_tokens(&TokenSettlement {
            reservation,
            used: 1200,
            counters: u1.token_counters(),
        })
        .await
        .unwrap();
    assert_eq!(
        ledger.take_turn(&u1, next_hour + 1000).await,
        Ok(TakenTurn::Refused(Spent::Tokens {
            retry_after_secs: 13 * 3600 - 1
        }))
    );
    let tomorrow = parse_utc("2026-12-02").unwrap();
    assert_eq!(ledger.take_turn(&u1, tomorrow).await, Ok(TakenTurn::Taken));
}

#[tokio::test]
async fn tokens_are_added_after_the_turn_and_refuse_the_next_one() {
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .configure(|config| config.budget = limits(100, 100))
        .build()
        .await;

    let first = h.say(None, "hello").await;
    let second = h.say(None, "hello again").await;

    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{}", second.raw);
    assert!(
        second.detail().contains("as much for you as it can today"),
        "{}",
        second.raw
    );
    assert_eq!(h.model_requests().await.len(), 1);
    let counted: Vec<_> = h
        .ledger()
        .await
        .into_iter()
        .filter(|item| attr(item, "pk").is_some_and(|pk| pk.starts_with("budget#tokens#")))
        .collect();
    assert_eq!(counted.len(), 1);
    assert_eq!(
        counted[0]["tokens"].as_n().unwrap(),
        &TURN_TOKENS.to_string(),
        "the provider's usage of the agent's call and the routing call"
    );
}

#[tokio::test]
async fn a_budget_that_cannot_be_read_is_a_503_before_any_model_call() {
    let failing = proxy(
        &moto().endpoint,
        false,
        OperationLog::default().hook(|seen| match seen.dynamodb_operation() {
            "TransactWriteItems" => dynamo_error("InternalServerError", "injected", json!({})),
            _ => Action::Forward,
        }),
    )
    .await;
    let h = TestApp::builder()
        .ledger_at(failing)
        .key_source(PanickingKey)
        .build()
        .await;

    let answer = h.say(None, REFUND_MESSAGE).await;

    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.raw);
    assert_eq!(answer.header("retry-after"), Some("2"));
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn replays_and_conversations_with_a_person_spend_nothing() {
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .configure(|config| config.budget = limits(1, 1_000_000))
        .build()
        .await;
    let key = [("idempotency-key", "k-budget")];
    let first = h.say_with(None, "hello", &key).await;
    assert_eq!(first.status, StatusCode::OK);

    let replay = h.say_with(None, "hello", &key).await;
    let person = h.say(None, "I want to talk to a person").await;
    let later = h.say(Some(person.conversation_id()), "are you there?").await;
    let spent = h.say(None, "one more question").await;

    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!((person.status, later.status), (StatusCode::OK, StatusCode::OK));
    assert_eq!(later.body["handed_off"], true);
    assert_eq!(spent.status, StatusCode::TOO_MANY_REQUESTS, "{}", spent.raw);
    assert_eq!(h.model_requests().await.len(), 1);
}

#[tokio::test]
async fn one_key_sent_six_times_at_once_takes_one_turn() {
    // The key's claim and the turn are one transaction: the five that find
    // the key held spend nothing.
    let serialised = proxy(&moto().endpoint, true, forward_all()).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(serialised.clone())
        .conversations_at(serialised)
        .configure(|config| config.budget = limits(2, 1_000_000))
        .build()
        .await;

    let answers =
        futures::future::join_all((0..6).map(|_| h.say_with(None, "hello", &[("idempotency-key", "k-once")]))).await;

    let first = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK && a.header("idempotent-replayed").is_none())
        .count();
    let held_or_replayed = answers
        .iter()
        .filter(|a| a.status == StatusCode::CONFLICT || a.header("idempotent-replayed") == Some("true"))
        .count();
    assert_eq!(
        (first, held_or_replayed),
        (1, 5),
        "{:?}",
        answers.iter().map(|a| &a.raw).collect::<Vec<_>>()
    );
    assert_eq!(h.model_requests().await.len(), 1);
    assert_eq!(
        h.say(None, "another").await.status,
        StatusCode::OK,
        "the second turn of two"
    );
    assert_eq!(h.say(None, "one more").await.status, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn a_spent_budget_still_lets_the_conversation_answer_first() {
    // Contract order: the conversation (404, a person's fixed answer) before
    // the budget, even though a keyed claim tries to take the turn with it.
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .configure(|config| config.budget = limits(1, 1_000_000))
        .build()
        .await;
    let person = h
        .say_with(None, "I want to talk to a person", &[("idempotency-key", "k-p1")])
        .await;
    assert_eq!(
        h.say_with(None, "hello", &[("idempotency-key", "k-p2")]).await.status,
        StatusCode::OK
    );

    let later = h
        .say_with(
            Some(person.conversation_id()),
            "are you there?",
            &[("idempotency-key", "k-p3")],
        )
        .await;
    let unknown = h
        .say_with(
            Some("c_0123456789abcdef0123456789abcdef"),
            "hello?",
            &[("idempotency-key", "k-p4")],
        )
        .await;
    let spent = h.say_with(None, "one more", &[("idempotency-key", "k-p5")]).await;

    assert_eq!(later.status, StatusCode::OK, "{}", later.raw);
    assert_eq!(later.body["handed_off"], true);
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.raw);
    assert_eq!(spent.status, StatusCode::TOO_MANY_REQUESTS, "{}", spent.raw);
    assert_eq!(h.model_requests().await.len(), 1);
}

/// A hook that cancels the first `conflicts` transactions with
/// `TransactionConflict`, as DynamoDB does when another transaction holds
/// one of their items, and forwards everything else.
fn conflicting(conflicts: usize, log: &OperationLog) -> Hook {
    let left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(conflicts));
    log.hook(move |seen| {
        let conflict = seen.dynamodb_operation() == "TransactWriteItems"
            && left
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |n| n.checked_sub(1),
                )
                .is_ok();
        if conflict {
            transaction_conflict(3)
        } else {
            Action::Forward
        }
    })
}

#[tokio::test]
async fn a_budget_write_cancelled_by_a_concurrent_transaction_is_retried_not_refused() {
    // Real DynamoDB cancels two transactions on one customer's budget items
    // at once with TransactionConflict (moto never does): injected here on
    // the key's claim with its turn, then on the turn of an unkeyed request.
    let log = OperationLog::default();
    let ledger = proxy(&moto().endpoint, false, conflicting(2, &log)).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(ledger)
        .build()
        .await;

    let keyed = h.say_with(None, "hello", &[("idempotency-key", "k-conflict")]).await;
    let unkeyed = h.say(None, "hello again").await;

    assert_eq!(keyed.status, StatusCode::OK, "{}", keyed.raw);
    assert_eq!(unkeyed.status, StatusCode::OK, "{}", unkeyed.raw);
    assert_eq!(h.model_requests().await.len(), 2);
    let transactions = log.names().iter().filter(|n| *n == "TransactWriteItems").count();
    assert!(
        transactions >= 4,
        "each cancelled transaction was sent again: {:?}",
        log.names()
    );
    assert_eq!(counter(&h, "turns").await, Some(2), "each turn counted once");
}

#[tokio::test]
async fn an_append_cancelled_by_a_concurrent_transaction_is_retried_not_lost() {
    let log = OperationLog::default();
    let conversations = proxy(&moto().endpoint, false, conflicting(1, &log)).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .conversations_at(conversations)
        .build()
        .await;

    let answer = h.say(None, "hello").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(
        h.exchanges(answer.conversation_id()).await.len(),
        1,
        "{:?}",
        log.names()
    );
}

#[tokio::test]
async fn six_turns_at_once_never_overshoot_the_days_tokens_by_more_than_one_turn() {
    // Each turn passes only while the day's tokens, reservations of the
    // turns still running included, are below the limit.
    // Both stores through one serialising proxy: the append settles the
    // turn's tokens on the budget item the next turn's take reads, and
    // moto, beside a transaction it cancels, restores the table's copy and
    // with it undoes a settlement that went around the proxy (one run in ten).
    let serialised = proxy(&moto().endpoint, true, forward_all()).await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(serialised.clone())
        .conversations_at(serialised)
        .configure(|config| config.budget = limits(100, 300))
        .build()
        .await;

    let answers = futures::future::join_all((0..6).map(|_| h.say(None, "hello"))).await;

    let ok = answers.iter().filter(|a| a.status == StatusCode::OK).count();
    assert!(ok >= 1, "{:?}", answers.iter().map(|a| &a.raw).collect::<Vec<_>>());
    let tokens = counter(&h, "tokens").await.unwrap();
    assert!(
        tokens <= 300 + TURN_TOKENS,
        "{ok} turns passed: {tokens} tokens against a day of 300"
    );
    // Each reservation settled to its usage; one whose append's outcome was
    // unknown (a slow moto under the whole suite) keeps its reservation.
    let kept = tokens - TURN_TOKENS * ok as i64;
    assert!(
        kept >= 0 && kept % (RESERVATION as i64 - TURN_TOKENS) == 0,
        "{tokens} tokens for {ok} turns"
    );
}

#[tokio::test]
async fn a_turn_given_back_whose_answer_was_lost_is_given_back_once() {
    // The give-back's answer is lost once; the client sends it again.
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
    let tokens = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ledger = proxy(&moto().endpoint, false, {
        let (armed, tokens) = (armed.clone(), tokens.clone());
        std::sync::Arc::new(move |seen: &Seen| {
            let operation = seen.dynamodb_operation();
            let action = if token_seen(seen, &tokens) {
                Action::Refuse(200, "{}".into())
            } else if matches!(operation, "TransactWriteItems" | "UpdateItem")
                && armed.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1
            {
                Action::DropAfter
            } else {
                Action::Forward
            };
            Box::pin(async move { action })
        })
    })
    .await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(ledger)
        .build()
        .await;
    assert_eq!(h.say(None, "hello").await.status, StatusCode::OK);
    // The keyed request's claim takes a second turn; its conversation is
    // unknown (404), so the turn is given back: that write's answer is lost.
    armed.store(2, std::sync::atomic::Ordering::SeqCst);

    let refused = h
        .say_with(
            Some("c_0123456789abcdef0123456789abcdef"),
            "hello",
            &[("idempotency-key", "k-lost-give-back")],
        )
        .await;

    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.raw);
    assert_eq!(counter(&h, "turns").await, Some(1), "the first turn only");
}

#[tokio::test]
async fn a_claim_that_lands_after_its_timeout_gives_its_key_and_turn_back() {
    // The claim reaches DynamoDB, but its answers (every attempt's) come
    // after the whole bound: a 503. The abandon's transaction gives a turn
    // back (`:minus_one`) and passes.
    let delayed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let ledger = proxy(&moto().endpoint, false, {
        let delayed = delayed.clone();
        std::sync::Arc::new(move |seen: &Seen| {
            let body = String::from_utf8_lossy(&seen.body);
            let late = seen.dynamodb_operation() == "TransactWriteItems"
                && !body.contains(":minus_one")
                && delayed.load(std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                if late {
                    Action::DelayAfter(LEDGER_TIMEOUT + std::time::Duration::from_millis(500))
                } else {
                    Action::Forward
                }
            })
        })
    })
    .await;
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .ledger_at(ledger)
        .build()
        .await;
    let key = [("idempotency-key", "k-late-claim")];

    let first = h.say_with(None, "hello", &key).await;
    delayed.store(false, std::sync::atomic::Ordering::SeqCst);
    delayed.store(false, std::sync::atomic::Ordering::SeqCst);
    let retry = h.say_with(None, "hello", &key).await;

    assert_eq!(first.status, StatusCode::SERVICE_UNAVAILABLE, "{}", first.raw);
    assert_eq!(
        retry.status,
        StatusCode::OK,
        "the key was not left blocked: {}",
        retry.raw
    );
    assert_eq!(
        counter(&h, "turns").await,
        Some(1),
        "the late claim's turn was given back"
    );
    assert_eq!(h.model_requests().await.len(), 1);
}

#[tokio::test]
async fn a_providers_outage_counts_no_tokens_so_it_never_spends_the_customers_day() {
    // Every call answered 500: each turn is a 502, and none was billed. A
    // day of 1,000 tokens outlasts many such turns (each once counted its
    // routing call's worst case, thousands of tokens).
    let h = TestApp::builder()
        .router(wiremock::ResponseTemplate::new(500))
        .model_responder(|_| wiremock::ResponseTemplate::new(500))
        .configure(|config| config.budget = limits(100, 1_000))
        .build()
        .await;

    for n in 0..3 {
        let answer = h.say(None, "hello").await;
        assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "turn {n}: {}", answer.raw);
    }

    assert_eq!(
        counter(&h, "tokens").await.unwrap_or(0),
        0,
        "an HTTP error is not billed"
    );
    assert_eq!(h.routing_requests().await.len(), 3);
}

#[tokio::test]
async fn a_call_that_timed_out_counts_the_turns_reserved_worst_case() {
    // The provider may have billed a call it did not finish in time.
    let h = TestApp::builder()
        .model(vec![hang(), hang()])
        .configure(|config| config.budget = limits(100, 100_000))
        .build()
        .await;

    let answer = h.say(None, "hello").await;

    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT, "{}", answer.raw);
    assert_eq!(counter(&h, "tokens").await, Some(RESERVATION as i64));
}
