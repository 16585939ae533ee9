//! Routing, methods, CORS: answered before anything else happens.

use lambda_http::http::StatusCode;

use refund_chat_testkit::*;

#[tokio::test]
async fn routing_by_method_and_path() {
    let h = TestApp::new(vec![text("REST reply"), text("v2 reply")], receipt()).await;

    let wrong_method = h.send(load_event("wrong-method.json")).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.headers["allow"], "POST");
    assert!(!wrong_method.detail().is_empty());

    let unknown = h.send(load_event("unknown-path.json")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(!unknown.detail().is_empty());
    assert!(h.model_requests().await.is_empty());

    // REST v1 with the `Prod` stage in the request context's path: still routed.
    let rest = h.send(load_event("question.json")).await;
    assert_eq!(rest.status, StatusCode::OK);
    assert_eq!(rest.reply(), "REST reply");

    let v2 = h.send(load_event("http-api-v2-refund.json")).await;
    assert_eq!(v2.status, StatusCode::OK);
    assert_eq!(v2.reply(), "v2 reply");
    assert_eq!(v2.headers["x-request-id"], REQUEST_ID);
}

#[tokio::test]
async fn cors_origin_is_sent_when_configured() {
    let h = TestApp::builder()
        .configure(|config| config.cors_allow_origin = Some("https://shop.example.com".to_owned()))
        .build()
        .await;

    let answer = h.send(load_event("invalid-json.json")).await;

    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.headers["access-control-allow-origin"],
        "https://shop.example.com"
    );
    assert_eq!(
        answer.headers["access-control-expose-headers"], "x-request-id, idempotent-replayed, retry-after",
        "a browser widget can read the request id, the replay mark and Retry-After"
    );
    let without = TestApp::new(vec![], receipt())
        .await
        .send(load_event("invalid-json.json"))
        .await;
    assert!(without.headers.get("access-control-allow-origin").is_none());
}
