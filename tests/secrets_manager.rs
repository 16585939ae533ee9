//! The API key read through the real `aws-sdk-secretsmanager` client from
//! moto's server on 127.0.0.1 (installed into `.venv` by `make test`), as a raw
//! string and as JSON, then used for a real turn.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
use lambda_http::http::StatusCode;
use refund_chat::secrets::{ApiKeySource, SecretError, SecretsManagerKey};
use support::*;

/// moto's server on a free port, stopped when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Moto {
    fn start() -> Moto {
        let binary = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): run `make test`, which installs moto",
                    binary.display()
                )
            });
        // moto announces itself on stderr once it listens; reading blocks until then.
        let mut output = String::new();
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Running on") => break,
                Some(Ok(line)) => output.push_str(&line),
                _ => panic!("moto_server exited before listening: {output}"),
            }
        }
        // Keep draining stderr so moto never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn client(&self) -> aws_sdk_secretsmanager::Client {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new("eu-west-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
            .endpoint_url(&self.endpoint)
            .load()
            .await;
        aws_sdk_secretsmanager::Client::new(&config)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let moto = Moto::start();
    let client = moto.client().await;
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
        let h = Harness::with_key_source(
            vec![refund_call("c1", "A-1001", 1250), text("Refunded.")],
            receipt(),
            source,
        )
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
    let moto = Moto::start();
    let source = SecretsManagerKey::new(moto.client().await, "does/not/exist");

    let error = source.fetch().await.unwrap_err();

    assert!(
        matches!(&error, SecretError::Read(message) if message.contains("ResourceNotFound")),
        "{error}"
    );
}
