//! Guests (contract 27): people without an account who proved their e-mail
//! through the guest pool. The authorizer's token makes them `guest:<sub>`;
//! the order system is asked by that e-mail (`X-Customer-Email`) and the
//! e-mail reaches nothing else: no model request, payments call, ledger
//! record, stored exchange or log line. An unverified e-mail is a 401; a
//! guest is served `GUEST_INTENTS`; a guest may claim the conversation they
//! began as a visitor.

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use tracing::Instrument;
use wiremock::{Request, ResponseTemplate};

use crate::observability::capturing;
use crate::policy::{reasons, refund_records_by_state};
use refund_chat_testkit::*;

const SUB: &str = "6f1c2b9e-guest";
const GUEST: &str = "guest:6f1c2b9e-guest";
const EMAIL: &str = "Ada.Guest@Example.com";

/// The order system: orders placed with [`EMAIL`] (whatever its case), asked
/// by `X-Customer-Email`; any other e-mail, or a customer id, finds none.
fn orders_of_the_guest(request: &Request) -> ResponseTemplate {
    let email = request
        .headers
        .get("x-customer-email")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !email.eq_ignore_ascii_case(EMAIL) || request.headers.contains_key("x-customer-id") {
        return ResponseTemplate::new(404);
    }
    let order_id = request.url.path().trim_start_matches("/orders/");
    let mut order = order_json(order_id, "", "delivered", Some(1));
    order["customer_id"] = Value::Null;
    order["email"] = json!("ada.guest@example.com");
    ResponseTemplate::new(200).set_body_json(order)
}

fn said(message: &str) -> String {
    json!({"user_id": GUEST, "message": message}).to_string()
}

async fn as_guest(h: &TestApp, verified: &str, body: &str) -> Answer {
    send_as(
        &h.app,
        guest_post_event(SUB, EMAIL, verified, body, &[]),
        &fresh_request_id(),
        0,
    )
    .await
}

/// `message` from the guest `sub` of the pool (its e-mail [`EMAIL`], verified).
async fn guest_says(h: &TestApp, sub: &str, message: &str) -> Answer {
    guest_of(h, sub, EMAIL, message).await
}

/// `message` from the guest `sub` whose verified e-mail is `email`.
async fn guest_of(h: &TestApp, sub: &str, email: &str, message: &str) -> Answer {
    let body = json!({"user_id": format!("guest:{sub}"), "message": message}).to_string();
    send_as(
        &h.app,
        guest_post_event(sub, email, "true", &body, &[]),
        &fresh_request_id(),
        0,
    )
    .await
}

/// Every header the order system received, lowercased name: value.
async fn order_headers(h: &TestApp) -> Vec<Vec<(String, String)>> {
    h.payments
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().starts_with("/orders/"))
        .map(|r| {
            r.headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn a_guest_is_refunded_by_the_verified_email_which_reaches_nothing_but_the_order_system() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .model(vec![
            tool_calls(&[("g1", "get_order", r#"{"order_id":"G-5001"}"#)]),
            refund_call("r1", "G-5001", 1250),
            text("Refunded 12.50 EUR."),
        ])
        .build()
        .await;
    let (captured, _guard, span) = capturing();

    let answer = as_guest(
        &h,
        "true",
        &said("my mug from G-5001 arrived broken, refund 12.50 please"),
    )
    .instrument(span)
    .await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let reads = order_headers(&h).await;
    assert_eq!(reads.len(), 2, "get_order, then the refund's own check");
    for headers in &reads {
        assert!(
            headers.contains(&("x-customer-email".into(), EMAIL.into())),
            "{headers:?}"
        );
        assert!(!headers.iter().any(|(name, _)| name == "x-customer-id"), "{headers:?}");
    }
    let payments = h.payments_requests().await;
    assert_eq!(payments.len(), 1, "the guest's refund is made once");
    assert_eq!(payments[0]["user_id"], GUEST, "paid with the guest's user id");
    let email = EMAIL.to_lowercase();
    let everywhere = [
        ("the model", serde_json::to_string(&h.model_requests().await).unwrap()),
        (
            "the routing call",
            serde_json::to_string(&h.routing_requests().await).unwrap(),
        ),
        ("payments", serde_json::to_string(&payments).unwrap()),
        ("the ledger", format!("{:?}", h.ledger().await)),
        (
            "the conversations",
            format!("{:?}", items(&h.aws, &conversation_table(&h.table)).await),
        ),
        ("a log line", captured.text()),
        ("the answer", answer.raw.clone()),
    ];
    for (sink, text) in everywhere {
        assert!(!text.to_lowercase().contains(&email), "the e-mail reached {sink}");
    }
}

#[tokio::test]
async fn a_guest_token_without_a_verified_email_is_a_401_before_any_model_call() {
    let h = TestApp::builder().orders(orders_of_the_guest).build().await;

    for verified in ["false", ""] {
        let answer = as_guest(&h, verified, &said("where is G-5001?")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{verified:?}: {}", answer.raw);
    }
    // The body must name the guest, as section 7 says of a customer.
    let named_otherwise = as_guest(&h, "true", &json!({"user_id": SUB, "message": "hi"}).to_string()).await;
    assert_eq!(named_otherwise.status, StatusCode::FORBIDDEN, "{}", named_otherwise.raw);
    assert!(h.model_requests().await.is_empty());
    assert!(h.orders_requests().await.is_empty());
}

#[tokio::test]
async fn an_order_of_another_email_is_not_found_and_moves_no_money() {
    let h = TestApp::builder()
        // The order system answers with an order of someone else's e-mail.
        .orders(|request: &Request| {
            let order_id = request.url.path().trim_start_matches("/orders/");
            let mut order = order_json(order_id, "", "delivered", Some(1));
            order["email"] = json!("someone.else@example.com");
            ResponseTemplate::new(200).set_body_json(order)
        })
        .model(vec![
            refund_call("r1", "G-5001", 1250),
            text("I could not find that order."),
        ])
        .build()
        .await;

    let answer = as_guest(&h, "true", &said("refund 12.50 for G-5001")).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let told = tool_content(&tool_messages(&h.model_requests().await[1])[0]);
    assert_eq!(told["error"], "no order G-5001 for this customer", "{told}");
    assert!(h.payments_requests().await.is_empty(), "another's order moves no money");
}

/// `GUEST_INTENTS` (default without `address_change`): what the shop serves
/// its customers is not served to a guest unless it says so.
#[tokio::test]
async fn a_guest_is_served_the_guest_intents_only() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .router(routed(&["address_change"], "low", 0.95))
        .model(vec![text("I can change that address.")])
        .configure(|config| {
            config.router.served = refund_chat::router::Served::parse("order_status,refund,address_change").unwrap();
            config.guest_intents = refund_chat::router::Served::parse("order_status,refund").unwrap();
        })
        .build()
        .await;

    let guest = as_guest(&h, "true", &said("please send G-5001 to my new address")).await;
    assert_eq!(guest.status, StatusCode::OK, "{}", guest.raw);
    assert_eq!(guest.body["handed_off"], true, "not a guest's intent: a person");
    assert_eq!(
        h.model_requests().await.len(),
        0,
        "no agent call for an intent a guest is not served"
    );

    let customer = h.chat("please send A-1001 to my new address").await;
    assert_eq!(customer.status, StatusCode::OK, "{}", customer.raw);
    assert_ne!(
        customer.body["handed_off"], true,
        "a customer is served it: {}",
        customer.raw
    );
}

/// One conversation throughout: a visitor asks, proves their e-mail, and the
/// guest claims the conversation and goes on in it.
#[tokio::test]
async fn a_guest_claims_the_conversation_begun_as_a_visitor_and_goes_on_in_it() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .router(routed(&["order_status"], "low", 0.95))
        .model(vec![
            tool_calls(&[("g1", "get_order", r#"{"order_id":"G-5001"}"#)]),
            text("G-5001 was delivered yesterday."),
        ])
        .build()
        .await;
    let asked = send_as(
        &h.app,
        visitor_post_event(
            &json!({"message": "where is my order G-5001?"}).to_string(),
            "203.0.113.9",
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    assert!(asked.body["verify"]["intents"].is_array(), "{}", asked.raw);
    assert!(h.orders_requests().await.is_empty(), "a visitor reads no order");
    let token = asked.body["visitor"].as_str().unwrap().to_owned();
    let id = asked.conversation_id().to_owned();

    let mut claim = guest_post_event(SUB, EMAIL, "true", "{}", &[("x-visitor-token", &token)]);
    let path = format!("/support/refund-chat/conversations/{id}/claim");
    claim["rawPath"] = json!(path);
    claim["requestContext"]["http"]["path"] = json!(path);
    let claimed = send_as(&h.app, claim, &fresh_request_id(), 0).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.raw);

    let again = as_guest(
        &h,
        "true",
        &json!({"user_id": GUEST, "message": "where is my order G-5001?", "conversation_id": id}).to_string(),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    assert_eq!(again.conversation_id(), id, "the same conversation");
    assert_eq!(h.orders_requests().await, vec!["/orders/G-5001".to_owned()]);
    let header = conversation_header(&h, &id).await;
    assert_eq!(header["claimed_by"].as_s().unwrap(), GUEST);
    assert!(
        !format!("{header:?}").to_lowercase().contains("example.com"),
        "no e-mail in the claim"
    );
}

async fn conversation_header(
    h: &TestApp,
    id: &str,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| item.get("claimed_by").is_some() && format!("{item:?}").contains(id))
        .expect("the conversation's header")
}

/// A guest in moto's guest pool, as the page's sign-in leaves them: signed
/// up by e-mail, the e-mail verified. Returns the pool and the guest's sub.
async fn guest_in_the_pool(h: &TestApp, email: &str) -> (String, String) {
    let idp = aws_sdk_cognitoidentityprovider::Client::new(&h.aws);
    let pool = idp
        .create_user_pool()
        .pool_name("refund-chat-guests")
        .username_attributes(aws_sdk_cognitoidentityprovider::types::UsernameAttributeType::Email)
        .send()
        .await
        .unwrap();
    let pool_id = pool.user_pool().unwrap().id().unwrap().to_owned();
    let attribute = |name: &str, value: &str| {
        aws_sdk_cognitoidentityprovider::types::AttributeType::builder()
            .name(name)
            .value(value)
            .build()
            .unwrap()
    };
    let made = idp
        .admin_create_user()
        .user_pool_id(&pool_id)
        .username(email)
        .user_attributes(attribute("email", email))
        .user_attributes(attribute("email_verified", "true"))
        .message_action(aws_sdk_cognitoidentityprovider::types::MessageActionType::Suppress)
        .send()
        .await
        .unwrap();
    let sub = made
        .user()
        .unwrap()
        .attributes()
        .iter()
        .find(|a| a.name() == "sub")
        .and_then(|a| a.value())
        .unwrap()
        .to_owned();
    (pool_id, sub)
}

/// A guest's refund above the limit waits for a person; the approval reads
/// the order afresh by the e-mail the guest pool holds for the guest's sub
/// (kept nowhere of ours), and pays the guest's user id once. Without the
/// guest pool nothing is paid, and the order system is not asked.
#[tokio::test]
async fn a_person_approves_a_guests_refund_with_the_order_read_by_the_pools_email() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .model(vec![
            refund_call("r1", "G-5001", 9000),
            text("A person will review it."),
        ])
        .build()
        .await;
    let (pool_id, sub) = guest_in_the_pool(&h, EMAIL).await;
    let guest = format!("guest:{sub}");
    let asked = guest_says(&h, &sub, "refund 90.00 for G-5001").await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    assert_eq!(asked.body["awaiting_approval"], true, "{}", asked.raw);
    let record_id = attr(&h.refund_records().await[0], "record_id").unwrap().to_owned();
    let reads_before = order_headers(&h).await.len();

    // Without the guest pool: the guest's order is unavailable, nothing is paid.
    let blind = h.staff();
    let refused = refund_chat::staff::decide::approve(
        &blind,
        &record_id,
        refund_chat::conversation::person::Person::named("ann"),
    )
    .await;
    assert!(
        refused.as_ref().is_ok_and(|d| !d.text.contains("refunded")),
        "{:?}",
        refused.map(|d| d.text)
    );
    assert!(h.payments_requests().await.is_empty());
    assert_eq!(
        order_headers(&h).await.len(),
        reads_before,
        "not asked without an e-mail"
    );

    let config = desk_config(&h.table, &h.payments.uri(), &[("GUEST_POOL_ID", &pool_id)]);
    let http = refund_chat::http_client::money_path_client().unwrap();
    let staff = refund_chat::staff::Staff::new(&config.staff, &h.aws, http);
    let approved = refund_chat::staff::decide::approve(
        &staff,
        &record_id,
        refund_chat::conversation::person::Person::named("ann"),
    )
    .await
    .unwrap();
    assert!(approved.text.contains("refunded 90.00"), "{}", approved.text);
    let reads = order_headers(&h).await;
    let last = reads.last().unwrap();
    assert!(last.contains(&("x-customer-email".into(), EMAIL.into())), "{last:?}");
    let payments = h.payments_requests().await;
    assert_eq!(payments.len(), 1);
    assert_eq!(payments[0]["user_id"], guest.as_str());
    assert!(
        !format!("{:?}", h.ledger().await)
            .to_lowercase()
            .contains(&EMAIL.to_lowercase()),
        "no e-mail in the ledger"
    );
}

/// Forgetting a guest (contracts 11 and 27), found by the e-mail they
/// proved: their conversation goes, and so does the guest pool's user; a
/// guest is not forgotten half-way without the guest pool.
#[tokio::test]
async fn forgetting_a_guest_by_email_deletes_the_conversation_and_the_pools_user() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .router(routed(&["policy_question"], "low", 0.95))
        .model(vec![text("Within 30 days.")])
        .build()
        .await;
    let (pool_id, sub) = guest_in_the_pool(&h, EMAIL).await;
    let guest = format!("guest:{sub}");
    let said = guest_says(&h, &sub, "how long may I ask?").await;
    assert_eq!(said.status, StatusCode::OK, "{}", said.raw);
    let (moto_endpoint, payments) = (moto().endpoint.clone(), h.payments.uri());

    let without_pool = crate::approvals::admin(
        &h.table,
        &moto_endpoint,
        &payments,
        &["forget", "--customer", &guest, "--by", "dpo@shop"],
    )
    .await;
    assert_eq!(
        without_pool.status.code(),
        Some(2),
        "{}",
        crate::approvals::stderr(&without_pool)
    );
    assert!(
        !h.exchanges(said.conversation_id()).await.is_empty(),
        "nothing forgotten half-way"
    );

    let pool = [("GUEST_POOL_ID", pool_id.as_str())];
    let forgot = crate::approvals::admin_with(
        &h.table,
        &moto_endpoint,
        &payments,
        &pool,
        &["forget", "--email", EMAIL, "--by", "dpo@shop"],
    )
    .await;
    assert_eq!(forgot.status.code(), Some(0), "{}", crate::approvals::stderr(&forgot));
    let printed = crate::approvals::stdout(&forgot);
    assert!(
        printed.contains(&guest) && printed.contains("deleted the guest pool's user"),
        "{printed}"
    );
    assert!(
        !printed.to_lowercase().contains("example.com"),
        "the e-mail is not printed: {printed}"
    );
    assert!(h.exchanges(said.conversation_id()).await.is_empty());
    let idp = aws_sdk_cognitoidentityprovider::Client::new(&h.aws);
    assert!(
        idp.admin_get_user()
            .user_pool_id(&pool_id)
            .username(&sub)
            .send()
            .await
            .is_err(),
        "the pool's user is gone"
    );
    let again = crate::approvals::admin_with(
        &h.table,
        &moto_endpoint,
        &payments,
        &pool,
        &["forget", "--email", "ada.guest@example.com", "--by", "dpo@shop"],
    )
    .await;
    assert_eq!(again.status.code(), Some(1), "{}", crate::approvals::stderr(&again));
}

/// A guest who asks for a person is handed off as anyone is, and the desk
/// says who it is (contract 27): a guest, not a customer or a visitor.
#[tokio::test]
async fn a_guest_handed_to_a_person_is_marked_a_guest_on_the_desk() {
    let h = TestApp::builder().model(vec![text("never")]).build().await;

    let answer = as_guest(&h, "true", &said("I want to talk to a person")).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(answer.body["handed_off"], true);
    assert_eq!(
        crate::visitors::who_the_desk_says(&h, answer.conversation_id()).await,
        "guest"
    );
    let queue = refund_chat::staff::read::queue(&h.staff()).await.unwrap();
    assert!(
        !format!("{:?}", queue.handoffs).to_lowercase().contains("example.com"),
        "no e-mail on the desk"
    );
}

/// Section 8's rule 3 (the seventh review): a guest who deletes their pool
/// user and signs up again with the same e-mail is a new `sub` of the same
/// guest, with the same day. Two `sub`s of one address refund 40.00 each;
/// the third 40.00 of the day would pass 100.00 and waits for a person,
/// whichever `sub` asks. Each refund is still paid and recorded under its
/// own `guest:<sub>`.
#[tokio::test]
async fn two_subs_of_one_address_share_one_day_of_automatic_refunds() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .model_responder(refunding_model)
        .build()
        .await;

    for (sub, message) in [
        ("sub-before", "refund G-6001 4000"),
        ("sub-before", "refund G-6002 4000"),
        ("sub-after", "refund G-6003 4000"),
    ] {
        let answer = guest_says(&h, sub, message).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    }

    let paid: Vec<(String, String)> = h
        .payments_requests()
        .await
        .iter()
        .map(|r| {
            (
                r["order_id"].as_str().unwrap_or_default().to_owned(),
                r["user_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        paid,
        vec![
            ("G-6001".to_owned(), "guest:sub-before".to_owned()),
            ("G-6002".to_owned(), "guest:sub-before".to_owned())
        ],
        "80.00 automatic; the new sub's 40.00 would make 120.00"
    );
    let records = h.refund_records().await;
    let waiting = refund_records_by_state(&records, "awaiting_approval");
    assert_eq!(waiting.len(), 1);
    assert_eq!(attr(waiting[0], "user_id"), Some("guest:sub-after"));
    assert_eq!(reasons(waiting[0]), vec!["daily_limit_exceeded"]);
    let ledger = format!("{:?}", h.ledger().await).to_lowercase();
    assert!(
        !ledger.contains(&EMAIL.to_lowercase()),
        "the e-mail is hashed in every key"
    );
}

/// Contract 13: a guest's turns count by the e-mail too, so a new `sub`
/// buys no turn.
#[tokio::test]
async fn a_new_sub_of_the_same_address_has_no_new_turns() {
    let h = TestApp::builder()
        .orders(orders_of_the_guest)
        .model_responder(|_| text("ok"))
        .configure(|config| {
            config.budget = refund_chat::budget::BudgetLimits {
                turns_per_hour: 1,
                ..config.budget
            }
        })
        .build()
        .await;

    let first = guest_says(&h, "sub-before", "hello").await;
    let renewed = guest_says(&h, "sub-after", "hello again").await;

    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    assert_eq!(renewed.status, StatusCode::TOO_MANY_REQUESTS, "{}", renewed.raw);
}

/// Contract 27: all guests together share one day (`GUEST_TOKENS_PER_DAY`),
/// so a domain that catches every address buys no budget; customers are
/// never refused for what guests spent.
#[tokio::test]
async fn guests_of_other_addresses_share_one_day_and_customers_keep_theirs() {
    let h = TestApp::builder()
        .model_responder(|_| text("ok"))
        .configure(|config| config.guest_tokens_per_day = 100)
        .build()
        .await;
    let first = guest_of(&h, "sub-a", "a@catch-all.example", "hello").await;
    let second = guest_of(&h, "sub-b", "b@catch-all.example", "hello").await;
    let customer = h.say(None, "hello").await;

    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{}", second.raw);
    assert!(second.header("retry-after").is_some());
    assert_eq!(customer.status, StatusCode::OK, "{}", customer.raw);
    assert_eq!(h.model_requests().await.len(), 2, "the refused guest reaches no model");
    let guests_day: Vec<_> = h
        .ledger()
        .await
        .into_iter()
        .filter(|item| attr(item, "pk").is_some_and(|pk| pk.starts_with("budget#tokens#guests#")))
        .collect();
    assert_eq!(guests_day.len(), 1);
    assert_eq!(
        guests_day[0]["tokens"].as_n().unwrap(),
        "270",
        "settled to the provider's usage, as the guest's own day"
    );
}
