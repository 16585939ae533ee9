//! The OpenAI key: read through the real Secrets Manager client from moto,
//! as a raw string and as JSON, sent only to OpenAI; read on first use; a
//! failed read answers 500 and is tried again.

use lambda_http::http::StatusCode;

use refund_chat::secrets::{ApiKeySource, SecretError, SecretsManagerKey};

use refund_chat_testkit::*;

#[tokio::test]
async fn an_unreadable_secret_answers_500_and_is_tried_again() {
    let h = TestApp::builder()
        .model(vec![text("second time lucky")])
        .key_source(FlakyKey::default())
        .build()
        .await;

    let first = h.chat("hello").await;
    assert_eq!(first.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!first.raw.contains("AccessDenied"), "{}", first.raw);
    assert!(h.model_requests().await.is_empty());

    let second = h.chat("hello").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.reply(), "second time lucky");
}

async fn create_secret(client: &aws_sdk_secretsmanager::Client, name: &str, value: &str) {
    client
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .expect("create secret in moto");
}

#[tokio::test]
async fn the_key_is_read_from_secrets_manager_and_only_sent_to_openai() {
    let client = aws_sdk_secretsmanager::Client::new(&aws_at(&moto().endpoint).await);
    let raw_key = "sk-raw-6b1f0c";
    let json_key = "sk-json-93ad2e";
    create_secret(&client, "openai/raw", raw_key).await;
    create_secret(
        &client,
        "openai/json",
        &format!(r#"{{"api_key": "{json_key}", "note": "rotated 2026-11"}}"#),
    )
    .await;

    for (secret_id, key) in [("openai/raw", raw_key), ("openai/json", json_key)] {
        let source = SecretsManagerKey::new(client.clone(), secret_id);
        let h = TestApp::builder()
            .model(vec![refund_call("c1", "A-1001", 1250), text("Refunded.")])
            .key_source(source)
            .build()
            .await;

        let answer = h.chat("refund A-1001, 12.50").await;

        assert_eq!(answer.status, StatusCode::OK, "{secret_id}");
        let requests = h.openai.received_requests().await.unwrap();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.headers["authorization"], format!("Bearer {key}"), "{secret_id}");
            assert!(
                !String::from_utf8_lossy(&request.body).contains(key),
                "the key is a header, never in a body"
            );
        }
        for request in h.payments.received_requests().await.unwrap() {
            assert!(!format!("{:?}{}", request.headers, String::from_utf8_lossy(&request.body)).contains(key));
        }
        assert!(!answer.raw.contains(key) && !format!("{:?}", answer.headers).contains(key));
    }
}

#[tokio::test]
async fn a_missing_secret_is_a_read_error() {
    let client = aws_sdk_secretsmanager::Client::new(&aws_at(&moto().endpoint).await);
    let source = SecretsManagerKey::new(client, "does/not/exist");

    let error = source.fetch().await.unwrap_err();

    assert!(
        matches!(&error, SecretError::Read(message) if message.contains("ResourceNotFound")),
        "{error}"
    );
}
