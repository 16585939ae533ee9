//! Handoff to a person (contract 12): code hands off before any model call
//! (the phrases, the risk screen, a second failed turn), the model with its
//! tool, and a handed-off conversation is answered without the model, no
//! money moving, ever.

use lambda_http::http::StatusCode;
use refund_chat::handoff::{self, Reason};
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

/// The conversation's header, as stored.
async fn header<K: refund_chat::secrets::ApiKeySource>(
    h: &TestApp<K>,
    id: &str,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| attr(item, "pk") == Some(id) && attr(item, "sk") == Some("head"))
        .expect("the conversation's header")
}

fn handoff_call(reason: &str, summary: &str) -> ResponseTemplate {
    tool_calls(&[(
        "h1",
        "hand_off_to_person",
        &json!({"reason": reason, "summary": summary}).to_string(),
    )])
}

#[tokio::test]
async fn asking_for_a_person_hands_off_without_the_model_even_when_its_key_cannot_be_read() {
    let h = TestApp::builder().key_source(PanickingKey).build().await;

    let asked = h.say(None, "I want to talk to a person").await;

    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    assert_eq!(asked.reply(), told(handoff::fixed_reply(Reason::CustomerAsked)));
    assert_eq!(asked.body["person_expected"]["within_minutes"], 30);
    assert_eq!(asked.body["handed_off"], true);
    let id = asked.conversation_id().to_owned();
    let head = header(&h, &id).await;
    assert_eq!(attr(&head, "handoff_reason"), Some("customer_asked"));
    assert_eq!(attr(&head, "handoff_open"), Some("open"));
    assert_eq!(attr(&head, "handoff_id"), Some(handoff::handoff_id(&id).as_str()));
    assert!(h.model_requests().await.is_empty());

    // From now on every message is kept and answered without the model.
    let later = h.say(Some(&id), "refund 12.50 on A-1001 please").await;
    assert_eq!(later.status, StatusCode::OK, "{}", later.raw);
    assert_eq!(later.reply(), told(handoff::WITH_A_PERSON));
    assert_eq!(later.body["handed_off"], true);
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
    let exchanges = h.exchanges(&id).await;
    assert_eq!(exchanges.len(), 2);
    assert_eq!(
        exchanges[1].exchange.customer_message(),
        Some("refund 12.50 on A-1001 please")
    );
}

#[tokio::test]
async fn pasted_or_disguised_requests_for_a_person_reach_one_with_the_model_down() {
    let h = TestApp::builder().key_source(PanickingKey).build().await;

    for (message, reason) in [
        ("can I speak to a manager", "customer_asked"),
        ("a real human please", "customer_asked"),
        ("get me a supervisor", "customer_asked"),
        ("I want to talk to a per\u{200b}son", "customer_asked"),
        ("voy a llamar a la polici\u{301}a", "risk"),
        ("this is fr\u{430}ud", "risk"),
        ("this is ｆｒａｕｄ", "risk"),
    ] {
        let answer = h.say(None, message).await;
        assert_eq!(answer.status, StatusCode::OK, "{message:?}: {}", answer.raw);
        assert_eq!(answer.body["handed_off"], true, "{message:?}");
        let head = header(&h, answer.conversation_id()).await;
        assert_eq!(attr(&head, "handoff_reason"), Some(reason), "{message:?}");
    }
    assert!(h.model_requests().await.is_empty());
}

#[tokio::test]
async fn the_risk_screen_hands_off_before_the_model_in_words_that_decide_nothing() {
    let h = TestApp::new(vec![refund_call("c1", "A-1001", 1250)], receipt()).await;

    let answer = h
        .say(None, "Refund 12.50 on A-1001 now or I file a CHARGEBACK with my bank")
        .await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.reply(), told(handoff::fixed_reply(Reason::Risk)));
    assert_eq!(answer.body["handed_off"], true);
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
    let head = header(&h, answer.conversation_id()).await;
    assert_eq!(attr(&head, "handoff_reason"), Some("risk"));
    assert_eq!(attr(&head, "handoff_summary"), None, "code hands off without a summary");
}

#[tokio::test]
async fn the_model_hands_off_with_its_tool_moving_no_money() {
    let h = TestApp::new(
        vec![
            handoff_call("cannot_help", "Wants the delivery address of A-1001 changed."),
            text("A person from our team will take over."),
        ],
        receipt(),
    )
    .await;

    let answer = h.say(None, "Please send order A-1001 to my new address").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    // The model's words, then code's of when a person will answer (contract 32).
    assert_eq!(
        answer.reply(),
        format!("A person from our team will take over.\n\n{PERSON_USUALLY}")
    );
    assert_eq!(answer.body["person_expected"]["sentence"], PERSON_USUALLY);
    assert_eq!(answer.body["handed_off"], true);
    let id = answer.conversation_id().to_owned();
    let told = tool_content(&tool_messages(&h.model_requests().await[1])[0]);
    assert_eq!(
        told,
        json!({"status": "handed_off", "handoff_id": handoff::handoff_id(&id)})
    );
    let head = header(&h, &id).await;
    assert_eq!(attr(&head, "handoff_reason"), Some("cannot_help"));
    assert_eq!(
        attr(&head, "handoff_summary"),
        Some("Wants the delivery address of A-1001 changed.")
    );
    assert!(h.payments_requests().await.is_empty());
    // The tools are declared side by side, strict, as the contract's schemas.
    let requests = h.model_requests().await;
    let declared: Vec<&Value> = requests[0]["tools"].as_array().unwrap().iter().collect();
    let names: Vec<&str> = declared.iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(
        names,
        ["issue_refund", "hand_off_to_person", "get_order", "search_help_centre"]
    );
    assert_eq!(declared[1]["function"]["strict"], true);
    assert_eq!(declared[2]["function"]["strict"], true);
    assert_eq!(declared[3]["function"]["strict"], true);
    assert_eq!(
        declared[3]["function"]["parameters"],
        *refund_chat::help::tool::declared_parameters()
    );
    assert_eq!(
        declared[2]["function"]["parameters"],
        *refund_chat::orders::tool::declared_parameters()
    );
}

#[tokio::test]
async fn a_handoff_spends_no_refund_latch_and_a_second_one_is_a_tool_error() {
    let h = TestApp::new(
        vec![
            tool_calls(&[
                (
                    "h1",
                    "hand_off_to_person",
                    &json!({"reason": "customer_asked", "summary": "wants a person"}).to_string(),
                ),
                (
                    "c1",
                    "issue_refund",
                    &json!({"order_id": "A-1001", "amount_cents": 1250}).to_string(),
                ),
                (
                    "h2",
                    "hand_off_to_person",
                    &json!({"reason": "other", "summary": "again"}).to_string(),
                ),
            ]),
            text("Refunded, and a person will take over."),
        ],
        receipt(),
    )
    .await;

    let answer = h.say(None, "refund A-1001 12.50, and my address needs changing").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(h.payments_requests().await.len(), 1, "the refund still ran");
    let results = tool_messages(&h.model_requests().await[1]);
    assert_eq!(tool_content(&results[0])["status"], "handed_off");
    assert!(tool_content(&results[1])["refund_id"].is_string(), "{}", results[1]);
    let second = tool_error(&results[2]).unwrap();
    assert!(second.contains("already with a person"), "{second}");
    let head = header(&h, answer.conversation_id()).await;
    assert_eq!(attr(&head, "handoff_reason"), Some("customer_asked"));
}

#[tokio::test]
async fn two_failed_turns_in_a_row_hand_off_and_keep_their_status() {
    let boom = || ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "boom"}}));
    let h = TestApp::new(vec![boom(), boom()], receipt()).await;

    let first = h.say(None, "hello").await;
    assert_eq!(first.status, StatusCode::BAD_GATEWAY, "{}", first.raw);
    assert_eq!(first.body.get("handed_off"), None, "one failure is not a pattern");
    let id = first.conversation_id().to_owned();
    let second = h.say(Some(&id), "hello?").await;

    assert_eq!(second.status, StatusCode::BAD_GATEWAY, "{}", second.raw);
    assert_eq!(second.body["handed_off"], true);
    assert!(second.detail().contains(handoff::AFTER_FAILURES), "{}", second.raw);
    assert_eq!(attr(&header(&h, &id).await, "handoff_reason"), Some("agent_failed"));
    let third = h.say(Some(&id), "anyone?").await;
    assert_eq!(third.status, StatusCode::OK);
    assert_eq!(third.reply(), told(handoff::WITH_A_PERSON));
    assert_eq!(h.model_requests().await.len(), 2, "the third message reached no model");
}

#[tokio::test]
async fn the_support_team_lists_open_handoffs_with_their_transcripts_and_closes_them() {
    let h = TestApp::new(
        vec![
            handoff_call("cannot_help", "Wants \u{1b}[2J a new address."),
            text("A person will take over."),
        ],
        receipt(),
    )
    .await;
    let first = h.say(None, "Bitte mit einem Mitarbeiter sprechen").await;
    let second = h.say(None, "Please change my address").await;
    let payments = wiremock::MockServer::start().await;
    let admin = |args: Vec<String>| {
        let (table, endpoint, uri) = (h.table.clone(), moto().endpoint.clone(), payments.uri());
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            crate::approvals::admin(&table, &endpoint, &uri, &args).await
        }
    };

    let listed = admin(vec!["handoffs".into()]).await;

    let out = crate::approvals::stdout(&listed);
    assert_eq!(listed.status.code(), Some(0), "{}", crate::approvals::stderr(&listed));
    let (a, b) = (
        handoff::handoff_id(first.conversation_id()),
        handoff::handoff_id(second.conversation_id()),
    );
    let (at_a, at_b) = (out.find(&a).unwrap(), out.find(&b).unwrap());
    assert!(at_a < at_b, "oldest first: {out}");
    assert!(
        out.contains("reason customer_asked") && out.contains("reason cannot_help"),
        "{out}"
    );
    assert!(
        out.contains("the model's summary: Wants \\u{1b}[2J a new address."),
        "{out}"
    );
    assert!(
        out.contains("customer: Please change my address"),
        "the transcript: {out}"
    );
    // The labels of the turn that handed off (contract 21); the screen's
    // handoff made no routing call.
    let (of_a, of_b) = (&out[at_a..at_b], &out[at_b..]);
    assert!(of_a.contains("  router: -"), "{of_a}");
    assert!(of_b.contains("  router: refund;low;0.95"), "{of_b}");
    assert!(!out.contains('\u{1b}'));

    let closed = admin(vec!["close-handoff".into(), a.clone(), "--by".into(), "ana".into()]).await;
    assert_eq!(closed.status.code(), Some(0), "{}", crate::approvals::stderr(&closed));
    let again = admin(vec!["close-handoff".into(), a.clone(), "--by".into(), "bo".into()]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(crate::approvals::stderr(&again).contains("already closed by ana"));
    let listed = crate::approvals::stdout(&admin(vec!["handoffs".into()]).await);
    assert!(!listed.contains(&a) && listed.contains(&b), "{listed}");
    let shown = crate::approvals::stdout(&admin(vec!["conversation".into(), first.conversation_id().into()]).await);
    assert!(shown.contains("closed") && shown.contains("by ana"), "{shown}");
    // Closed, the conversation stays with the people.
    let later = h.say(Some(first.conversation_id()), "hello again").await;
    assert_eq!(later.reply(), told(handoff::WITH_A_PERSON));
}
