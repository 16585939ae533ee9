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
        // The turn's two calls and its routing call: each carries the key.
        let requests = h.openai.received_requests().await.unwrap();
        assert_eq!(requests.len(), 3);
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

/// A model that answers 401 to `Bearer sk-old` once it is revoked, and
/// "ok" to every other key.
fn revocable_model(
    revoked: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> impl Fn(&wiremock::Request) -> wiremock::ResponseTemplate + Send + Sync + 'static {
    move |request: &wiremock::Request| {
        let old = request.headers["authorization"] == "Bearer sk-old";
        if old && revoked.load(std::sync::atomic::Ordering::SeqCst) {
            wiremock::ResponseTemplate::new(401)
                .set_body_json(serde_json::json!({"error": {"message": "Incorrect API key"}}))
        } else {
            text("ok")
        }
    }
}

async fn rotating_secret(name: &str) -> aws_sdk_secretsmanager::Client {
    let client = aws_sdk_secretsmanager::Client::new(&aws_at(&moto().endpoint).await);
    create_secret(&client, name, "sk-old").await;
    client
}

async fn rotate(client: &aws_sdk_secretsmanager::Client, name: &str) {
    client
        .put_secret_value()
        .secret_id(name)
        .secret_string("sk-new")
        .send()
        .await
        .expect("rotate the secret in moto");
}

/// The keys the agent's calls carried (a routing call makes one attempt
/// with the key it has, and is left out).
fn keys_sent(requests: &[wiremock::Request]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| !is_routing_call(&serde_json::from_slice(&r.body).unwrap_or_default()))
        .map(|r| r.headers["authorization"].to_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn after_a_rotation_a_401_reads_the_key_again_and_makes_the_same_call_once_more() {
    let name = format!("openai/rotating-{}", std::process::id());
    let client = rotating_secret(&name).await;
    let revoked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h = TestApp::builder()
        .model_responder(revocable_model(revoked.clone()))
        .key_source(SecretsManagerKey::new(client.clone(), &name))
        .build()
        .await;
    assert_eq!(h.chat("hello").await.status, StatusCode::OK);

    // The key is rotated and the old one revoked; this container still holds it.
    rotate(&client, &name).await;
    revoked.store(true, std::sync::atomic::Ordering::SeqCst);
    let after = h.chat("hello again").await;
    let then = h.chat("and again").await;

    assert_eq!(after.status, StatusCode::OK, "{}", after.raw);
    assert_eq!(after.reply(), "ok");
    assert_eq!(then.status, StatusCode::OK, "{}", then.raw);
    let requests = h.openai.received_requests().await.unwrap();
    assert_eq!(
        keys_sent(&requests),
        ["Bearer sk-old", "Bearer sk-old", "Bearer sk-new", "Bearer sk-new"],
        "the refused call once more with the fresh key, then the fresh key only"
    );
    let agent: Vec<_> = requests
        .iter()
        .filter(|r| !is_routing_call(&serde_json::from_slice(&r.body).unwrap_or_default()))
        .collect();
    assert_eq!(agent[1].body, agent[2].body, "the same call");
}

/// The routing call carries the rotated key too: after a rotation, a
/// container's first turn is routed, not `unknown`.
#[tokio::test]
async fn after_a_rotation_the_routing_call_reads_the_key_again() {
    let name = format!("openai/rotating-router-{}", std::process::id());
    let client = rotating_secret(&name).await;
    let revoked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let router_revoked = revoked.clone();
    let h = TestApp::builder()
        .model_responder(revocable_model(revoked.clone()))
        .router_responder(move |request: &wiremock::Request| {
            let old = request.headers["authorization"] == "Bearer sk-old";
            if old && router_revoked.load(std::sync::atomic::Ordering::SeqCst) {
                wiremock::ResponseTemplate::new(401)
                    .set_body_json(serde_json::json!({"error": {"message": "Incorrect API key"}}))
            } else {
                routed(&["refund"], "low", 0.95)
            }
        })
        .key_source(SecretsManagerKey::new(client.clone(), &name))
        .build()
        .await;
    assert_eq!(h.chat("hello").await.status, StatusCode::OK);
    rotate(&client, &name).await;
    revoked.store(true, std::sync::atomic::Ordering::SeqCst);
    let after = h.chat("hello again").await;
    assert_eq!(after.status, StatusCode::OK, "{}", after.raw);
    let requests = h.openai.received_requests().await.unwrap();
    let routing_keys: Vec<&str> = requests
        .iter()
        .filter(|r| is_routing_call(&serde_json::from_slice(&r.body).unwrap_or_default()))
        .map(|r| r.headers["authorization"].to_str().unwrap_or_default())
        .collect();
    assert_eq!(
        routing_keys,
        ["Bearer sk-old", "Bearer sk-old", "Bearer sk-new"],
        "the refused routing call once more with the fresh key"
    );
    // The agent's calls after it carry the fresh key from the start.
    assert_eq!(keys_sent(&requests), ["Bearer sk-old", "Bearer sk-new"]);
}

#[tokio::test]
async fn the_re_read_and_the_re_send_share_the_calls_deadline() {
    // The 401 and the re-sent call each take 60% of the call's timeout:
    // together they pass it, so the call is a timeout (and the turn's retry
    // carries the fresh key), never one call that runs past its deadline.
    let name = format!("openai/slow-rotation-{}", std::process::id());
    let client = rotating_secret(&name).await;
    let revoked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow = OPENAI_TIMEOUT.mul_f64(0.6);
    let model = revocable_model(revoked.clone());
    let h = TestApp::builder()
        .model_responder(move |request| {
            let routing = is_routing_call(&serde_json::from_slice(&request.body).unwrap_or_default());
            let answer = model(request);
            if routing { answer } else { answer.set_delay(slow) }
        })
        .key_source(SecretsManagerKey::new(client.clone(), &name))
        .build()
        .await;
    assert_eq!(h.chat("hello").await.status, StatusCode::OK);
    rotate(&client, &name).await;
    revoked.store(true, std::sync::atomic::Ordering::SeqCst);

    let after = h.chat("hello again").await;

    assert_eq!(after.status, StatusCode::OK, "{}", after.raw);
    assert_eq!(
        keys_sent(&h.openai.received_requests().await.unwrap()),
        ["Bearer sk-old", "Bearer sk-old", "Bearer sk-new", "Bearer sk-new"],
        "the re-send ran out of the call's time; the turn's retry made the call again"
    );
}

#[tokio::test]
async fn a_key_still_refused_after_it_was_read_again_is_a_502() {
    let name = format!("openai/revoked-{}", std::process::id());
    let client = rotating_secret(&name).await;
    let revoked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let h = TestApp::builder()
        .model_responder(revocable_model(revoked))
        .key_source(SecretsManagerKey::new(client, &name))
        .build()
        .await;

    let answer = h.chat("hello").await;

    assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{}", answer.raw);
    assert_eq!(
        keys_sent(&h.openai.received_requests().await.unwrap()),
        ["Bearer sk-old"],
        "the same key read again is not sent again"
    );
}

#[tokio::test]
async fn a_key_held_longer_than_its_cache_time_is_read_again() {
    let name = format!("openai/cached-{}", std::process::id());
    let client = rotating_secret(&name).await;
    let h = TestApp::builder()
        .model_responder(revocable_model(std::sync::Arc::default()))
        .key_source(SecretsManagerKey::new(client.clone(), &name))
        .configure(|config| config.openai_key_cache = std::time::Duration::ZERO)
        .build()
        .await;
    assert_eq!(h.chat("hello").await.status, StatusCode::OK);

    rotate(&client, &name).await;
    assert_eq!(h.chat("hello again").await.status, StatusCode::OK);

    assert_eq!(
        keys_sent(&h.openai.received_requests().await.unwrap()),
        ["Bearer sk-old", "Bearer sk-new"],
        "read again, with no 401 needed"
    );
}
