//! Bad input gets a clear 4xx before any secret, model, ledger or payments call.

use lambda_http::http::StatusCode;
use serde_json::json;

use refund_chat_testkit::*;

#[tokio::test]
async fn bad_input_is_answered_before_any_upstream_call() {
    let long_ok = "é".repeat(4000);
    let too_long = "é".repeat(4001);
    let cases: Vec<(String, StatusCode, &str)> = vec![
        ("".into(), StatusCode::BAD_REQUEST, "missing"),
        ("{not json".into(), StatusCode::BAD_REQUEST, "JSON"),
        ("[1, 2]".into(), StatusCode::BAD_REQUEST, "object"),
        ("\"text\"".into(), StatusCode::BAD_REQUEST, "object"),
        (
            json!({"message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id is required",
        ),
        (
            json!({"user_id": "u-1"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message is required",
        ),
        (
            json!({"user_id": "", "message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id must not be empty",
        ),
        (
            json!({"user_id": "u-1", "message": ""}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message must not be empty",
        ),
        (
            json!({"user_id": 7, "message": "hi"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "user_id must be a string",
        ),
        (
            json!({"user_id": "u-1", "message": ["hi"]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "message must be a string",
        ),
        (
            json!({"user_id": "u-1", "message": too_long}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "at most 4000",
        ),
    ];
    let h = TestApp::builder()
        .model(vec![text("ok")])
        .key_source(PanickingKey)
        .build()
        .await;
    for (body, status, detail) in cases {
        let answer = h.post(&body).await;
        assert_eq!(answer.status, status, "{body:.40}");
        assert!(answer.detail().contains(detail), "{body:.40}: {}", answer.detail());
        assert_eq!(answer.headers["x-request-id"], REQUEST_ID);
    }
    assert!(h.model_requests().await.is_empty());
    assert!(h.payments_requests().await.is_empty());
    assert!(h.ledger().await.is_empty(), "bad input never touches the ledger");

    let fine = TestApp::new(vec![text("ok")], receipt()).await;
    let answer = fine
        .post(&json!({"user_id": "u-1", "message": long_ok}).to_string())
        .await;
    assert_eq!(answer.status, StatusCode::OK, "4000 multi-byte characters are accepted");
}
