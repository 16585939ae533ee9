//! The router (contract 21): one routing call after the screen and the
//! budget, before the agent; its labels are inputs to code. A high risk or
//! an intent the agent does not take goes to a person before the agent; an
//! unsure or failed router runs the agent, and every refund it proposes
//! waits for a person.

use lambda_http::http::StatusCode;

use refund_chat_testkit::*;

fn refund_turn() -> Vec<wiremock::ResponseTemplate> {
    vec![refund_call("c1", "A-1001", 1250), text("Refunded.")]
}

#[tokio::test]
async fn the_routing_call_is_strict_small_untooled_and_sees_only_the_customers_words() {
    let mut script = refund_turn();
    script.push(text("Which other one?"));
    let h = TestApp::new(script, receipt()).await;

    let first = h.say(None, "my mug from A-1001 broke, refund 12.50").await;
    let second = h.say(Some(first.conversation_id()), "thanks, and the other one?").await;

    assert_eq!(second.status, StatusCode::OK, "{}", second.raw);
    let routing = h.routing_requests().await;
    assert_eq!(routing.len(), 2, "one routing call a turn");
    let call = &routing[1];
    assert_eq!(call["max_completion_tokens"], 150);
    assert!(call.get("tools").is_none() && call.get("stream").is_none());
    assert_eq!(call["response_format"]["json_schema"]["strict"], true);
    let said: Vec<(&str, &str)> = call["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(said[0].0, "system");
    assert_eq!(
        &said[1..],
        [
            ("user", "my mug from A-1001 broke, refund 12.50"),
            ("user", "thanks, and the other one?")
        ],
        "the customer's own messages, no replies or tool results"
    );
    assert_eq!(
        h.payments_requests().await.len(),
        1,
        "a sure router: the rules alone decide"
    );
}

#[tokio::test]
async fn a_high_risk_goes_to_a_person_before_the_agent_whatever_the_confidence() {
    let h = TestApp::builder()
        .router(routed(&["refund"], "high", 0.99))
        .model(refund_turn())
        .build()
        .await;

    let answer = h.say(None, "refund A-1001 12.50 or I will make trouble").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.body["handed_off"], true);
    assert!(h.model_requests().await.is_empty(), "the agent never ran");
    assert!(h.payments_requests().await.is_empty());
    let header = h.exchanges(answer.conversation_id()).await;
    assert_eq!(header.len(), 1);
}

#[tokio::test]
async fn an_intent_the_agent_does_not_take_goes_to_a_person_with_a_fixed_reply() {
    let h = TestApp::builder()
        .router(routed(&["refund", "address_change"], "low", 0.95))
        .model(refund_turn())
        .configure(|config| {
            config.router.served = refund_chat::router::Served::parse("order_status,refund").unwrap();
        })
        .build()
        .await;

    let answer = h
        .say(None, "refund A-1001 12.50 and send the next one to my new address")
        .await;

    assert_eq!(answer.body["handed_off"], true, "{}", answer.raw);
    assert!(
        answer.reply().contains("takes care of this kind of request"),
        "{}",
        answer.raw
    );
    // Section 21's fixed reply carries when a person will answer (contract 32).
    assert!(answer.reply().ends_with(PERSON_USUALLY), "{}", answer.raw);
    assert_eq!(answer.body["person_expected"]["within_minutes"], 30);
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
}

#[tokio::test]
async fn an_unsure_or_failed_router_runs_the_agent_and_every_refund_waits_for_a_person() {
    for (why, router) in [
        ("unsure", routed(&["refund"], "low", 0.4)),
        ("outside the schema", routed(&["refund", "refund"], "low", 1.0)),
        ("garbage", text("approve it, risk none")),
        ("an error", wiremock::ResponseTemplate::new(500)),
        (
            "a timeout",
            routed(&["refund"], "low", 1.0).set_delay(std::time::Duration::from_secs(3)),
        ),
    ] {
        let h = TestApp::builder()
            .router(router)
            .model(refund_turn())
            .configure(|config| config.router.timeout = std::time::Duration::from_millis(300))
            .build()
            .await;

        let answer = h.say(None, "my mug from A-1001 broke, refund 12.50").await;

        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{why}: the customer is never refused: {}",
            answer.raw
        );
        assert_eq!(answer.body["awaiting_approval"], true, "{why}: {}", answer.raw);
        assert!(h.payments_requests().await.is_empty(), "{why}: no money moved");
        let records = h.refund_records().await;
        assert_eq!(records.len(), 1, "{why}");
        let reasons: Vec<&str> = records[0]["reasons"]
            .as_l()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_s().ok().map(String::as_str))
            .collect();
        assert_eq!(reasons, ["router_unsure"], "{why}: the approval says why");
        let labels = attr(&records[0], "router").unwrap_or_default().to_owned();
        assert!(why != "unsure" || labels == "refund;low;0.4", "{why}: {labels}");
        assert!(why == "unsure" || labels == "unknown", "{why}: {labels}");
    }
}

#[tokio::test]
async fn the_labels_are_kept_on_the_exchange_and_the_turn_pays_for_the_routing_call() {
    let h = TestApp::builder()
        .router(routed(&["order_status", "refund"], "low", 0.91))
        .model(refund_turn())
        .build()
        .await;

    let answer = h.say(None, "where is A-1001, and refund 12.50 of it").await;

    assert_eq!(h.payments_requests().await.len(), 1);
    let items = items(&h.aws, &conversation_table(&h.table)).await;
    let exchange = items
        .iter()
        .find(|i| attr(i, "sk").is_some_and(|sk| sk.starts_with("x#")))
        .unwrap();
    let _ = answer;
    assert_eq!(attr(exchange, "router"), Some("order_status,refund;low;0.91"));
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "router"), Some("order_status,refund;low;0.91"));
}

/// The reasons a refund record gives for waiting.
fn reasons_of(record: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> Vec<String> {
    record["reasons"]
        .as_l()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_s().ok().cloned())
        .collect()
}

#[tokio::test]
async fn a_refund_proposed_in_a_turn_not_routed_to_refunds_waits_for_a_person() {
    // A sure router that saw an order question: the agent may still propose a
    // refund (the customer's wording led it there), but code does not pay it.
    let h = TestApp::builder()
        .router(routed(&["order_status"], "low", 0.97))
        .model(refund_turn())
        .build()
        .await;

    let answer = h
        .say(
            None,
            "Where is my order A-1001? It came broken, it cost 12.50, do what is needed",
        )
        .await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.body["awaiting_approval"], true, "{}", answer.raw);
    assert!(h.payments_requests().await.is_empty(), "no money moved");
    let records = h.refund_records().await;
    assert_eq!(records.len(), 1);
    assert_eq!(reasons_of(&records[0]), ["refund_not_routed"]);
}

#[tokio::test]
async fn a_shop_that_has_not_turned_refunds_on_never_pays_one_without_a_person() {
    for labels in [&["order_status"][..], &["order_status", "other"][..]] {
        let h = TestApp::builder()
            .router(routed(labels, "low", 0.97))
            .model(refund_turn())
            .configure(|config| {
                config.router.served =
                    refund_chat::router::Served::parse("order_status,policy_question,other").unwrap();
            })
            .build()
            .await;

        let answer = h
            .say(
                None,
                "Where is my order A-1001? It came broken, it cost 12.50, do what is needed",
            )
            .await;

        assert_eq!(answer.body["awaiting_approval"], true, "{labels:?}: {}", answer.raw);
        assert!(h.payments_requests().await.is_empty(), "{labels:?}: no money moved");
        assert_eq!(reasons_of(&h.refund_records().await[0]), ["refund_not_routed"]);
    }
}

#[tokio::test]
async fn the_confidence_is_recorded_as_the_router_gave_it() {
    // 0.6999 is below the default 0.7: unsure. Rounded to "0.70" it would
    // read back as sure.
    let h = TestApp::builder()
        .router(routed(&["refund"], "low", 0.6999))
        .model(refund_turn())
        .build()
        .await;

    let answer = h.say(None, "my mug from A-1001 broke, refund 12.50").await;

    assert_eq!(answer.body["awaiting_approval"], true, "{}", answer.raw);
    let record = &h.refund_records().await[0];
    assert_eq!(attr(record, "router"), Some("refund;low;0.6999"));
    assert_eq!(reasons_of(record), ["router_unsure"]);
}
