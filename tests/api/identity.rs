//! Who the customer is (contract 7): the authorizer's identity in each shape
//! API Gateway sends it, a 401 without one and a 403 when the body names
//! someone else, both before the secret, the model, the ledger or payments
//! are touched; and `USER_IDENTITY=body` for local runs.

use lambda_http::http::StatusCode;
use refund_chat::config::IdentitySource;
use serde_json::json;

use refund_chat_testkit::*;

fn payments_user_ids(requests: &[serde_json::Value]) -> Vec<&str> {
    requests.iter().filter_map(|r| r["user_id"].as_str()).collect()
}

#[tokio::test]
async fn each_authorizer_shape_names_the_customer() {
    let h = TestApp::new(
        vec![
            refund_call("c1", "A-1001", 1250),
            text("Refunded."),
            text("3 to 5 days."),
            refund_call("c2", "B-2001", 500),
            text("Refunded."),
        ],
        receipt(),
    )
    .await;

    // REST API, Cognito user pool authorizer: requestContext.authorizer.claims.sub.
    let cognito = send_as(&h.app, load_event("refund.json"), "req-cognito", 0).await;
    // REST API, Lambda authorizer: requestContext.authorizer.principalId.
    let lambda = send_as(&h.app, load_event("lambda-authorizer-question.json"), "req-lambda", 0).await;
    // HTTP API, JWT authorizer: requestContext.authorizer.jwt.claims.sub.
    let jwt = send_as(
        &h.app,
        post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "refund B-2001 5.00"}).to_string(),
            &[],
        ),
        "req-jwt",
        0,
    )
    .await;

    assert_eq!(
        (cognito.status, lambda.status, jwt.status),
        (StatusCode::OK, StatusCode::OK, StatusCode::OK),
        "{} {} {}",
        cognito.raw,
        lambda.raw,
        jwt.raw
    );
    assert_eq!(
        payments_user_ids(&h.payments_requests().await),
        vec!["u-1001", "u-2002"]
    );
}

#[tokio::test]
async fn no_identity_is_a_401_and_someone_else_is_a_403_before_anything_is_touched() {
    let h = TestApp::builder().key_source(PanickingKey).build().await;

    let anonymous = h.send(load_event("not-signed-in.json")).await;
    let someone_else = h.send(load_event("signed-in-as-someone-else.json")).await;
    // Identity comes before the body: an anonymous bad body is still a 401.
    let mut anonymous_bad_body = load_event("not-signed-in.json");
    anonymous_bad_body["body"] = json!("{not json");
    let anonymous_bad_body = h.send(anonymous_bad_body).await;
    // The body comes before the match: a signed-in bad body is a 400/422.
    let signed_in_bad_body = h
        .send(post_event_as("u-2002", &json!({"message": "hi"}).to_string(), &[]))
        .await;
    // And the match before the key: someone else with a malformed key is a 403.
    let mut someone_else_bad_key = load_event("signed-in-as-someone-else.json");
    someone_else_bad_key["headers"]["Idempotency-Key"] = json!("has space");

    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous_bad_body.status, StatusCode::UNAUTHORIZED);
    assert_eq!(someone_else.status, StatusCode::FORBIDDEN);
    assert_eq!(signed_in_bad_body.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(h.send(someone_else_bad_key).await.status, StatusCode::FORBIDDEN);
    assert!(!anonymous.detail().is_empty() && !someone_else.detail().is_empty());
    assert_eq!(anonymous.header("x-request-id"), Some(REQUEST_ID));
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
    assert!(h.ledger().await.is_empty());
}

#[tokio::test]
async fn another_claim_can_name_the_customer() {
    let h = TestApp::builder()
        .model(vec![text("Hello.")])
        .configure(|config| {
            config.identity.source = IdentitySource::Authorizer {
                claim: "cognito:username".into(),
            }
        })
        .build()
        .await;

    assert_eq!(h.send(load_event("question.json")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn body_mode_trusts_the_body_as_before() {
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250), text("Refunded.")])
        .configure(|config| config.identity.source = IdentitySource::Body)
        .build()
        .await;

    let answer = h.send(load_event("not-signed-in.json")).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(payments_user_ids(&h.payments_requests().await), vec!["u-1001"]);
}

/// `CUSTOMER_POOL_CLIENT_IDS` (contract 29): API Gateway's authorizer checks
/// no audience, so with the shop's clients listed a token of another app
/// client of the pool, or an access token, is a 401 before anything is
/// touched; a listed client's ID token is served.
#[tokio::test]
async fn with_the_shops_clients_listed_another_clients_token_is_a_401() {
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250), text("Refunded.")])
        .configure(|config| config.identity.customer_audiences = Some(vec!["shop-web".into()]))
        .build()
        .await;
    let with_claims = |aud: &str, token_use: &str| {
        let mut event = load_event("refund.json");
        let claims = &mut event["requestContext"]["authorizer"]["claims"];
        claims["aud"] = json!(aud);
        claims["token_use"] = json!(token_use);
        event
    };

    let test_client = h.send(with_claims("a-test-client", "id")).await;
    let access = h.send(with_claims("shop-web", "access")).await;
    // The HTTP API event carries an access token with no audience.
    let jwt = h
        .send(post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "hello"}).to_string(),
            &[],
        ))
        .await;
    assert_eq!(
        (test_client.status, access.status, jwt.status),
        (
            StatusCode::UNAUTHORIZED,
            StatusCode::UNAUTHORIZED,
            StatusCode::UNAUTHORIZED
        )
    );
    assert!(h.model_requests().await.is_empty());
    assert!(h.ledger().await.is_empty());

    let shop = h.send(with_claims("shop-web", "id")).await;
    assert_eq!(shop.status, StatusCode::OK, "{}", shop.raw);
    assert_eq!(payments_user_ids(&h.payments_requests().await), vec!["u-1001"]);
}
