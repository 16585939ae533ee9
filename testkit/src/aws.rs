//! moto's server, AWS configurations pointing at it, and the ledger table made from the code's own schema.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;

/// One moto server per test binary, shared by its tests.
pub fn moto() -> &'static refund_chat_local::moto::Moto {
    static MOTO: OnceLock<refund_chat_local::moto::Moto> = OnceLock::new();
    MOTO.get_or_init(|| refund_chat_local::moto::Moto::start(crate::root()).unwrap_or_else(|e| panic!("{e}")))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// An AWS configuration whose every service is at `endpoint`.
pub async fn aws_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// A fresh ledger table in moto, as `template.yaml` defines it, and its
/// conversation table beside it ([`conversation_table`]).
pub async fn new_table(aws: &SdkConfig) -> String {
    static TABLES: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "ledger-{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::SeqCst)
    );
    let client = aws_sdk_dynamodb::Client::new(aws);
    refund_chat::ledger::dynamo::schema::create_table(&client, &name)
        .await
        .expect("create the ledger table in moto");
    refund_chat::ledger::dynamo::schema::create_conversation_table(&client, &conversation_table(&name))
        .await
        .expect("create the conversation table in moto");
    name
}

/// The conversation table that goes with a ledger table of the local stack or a test.
pub fn conversation_table(ledger_table: &str) -> String {
    format!("{ledger_table}-conversations")
}

/// Every item of a table (a scan: fine for a test's handful of items).
pub async fn items(aws: &SdkConfig, table: &str) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    aws_sdk_dynamodb::Client::new(aws)
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan")
        .items()
        .to_vec()
}

pub fn attr<'a>(item: &'a std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<&'a str> {
    refund_chat::ledger::dynamo::text(item, name)
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The local stack's AWS side in moto at `aws`'s endpoint: the OpenAI key
/// secret (`SecretString` `{"api_key": ...}`), the ledger table and its
/// conversation table ([`conversation_table`]) as the code defines them.
pub async fn set_up_local_aws(aws: &SdkConfig, table: &str, secret_id: &str, api_key: &str) -> Result<(), Error> {
    aws_sdk_secretsmanager::Client::new(aws)
        .create_secret()
        .name(secret_id)
        .secret_string(serde_json::json!({"api_key": api_key}).to_string())
        .send()
        .await
        .map_err(|e| aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string())?;
    let client = aws_sdk_dynamodb::Client::new(aws);
    refund_chat::ledger::dynamo::schema::create_table(&client, table).await?;
    refund_chat::ledger::dynamo::schema::create_conversation_table(&client, &conversation_table(table)).await?;
    Ok(())
}

/// A secret in moto with `value` as its `SecretString` (the replay task's hash key).
pub async fn put_secret(aws: &SdkConfig, name: &str, value: &str) -> Result<(), Error> {
    aws_sdk_secretsmanager::Client::new(aws)
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .map_err(|e| aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string())?;
    Ok(())
}

/// Every item of the table as plain JSON (each value without its type tag:
/// numbers as text, sets as lists), oldest first by `created_at`.
pub async fn plain_items(aws: &SdkConfig, table: &str) -> Result<Vec<serde_json::Value>, Error> {
    use serde_json::Value;
    fn plain(value: &AttributeValue) -> Value {
        match value {
            AttributeValue::S(s) | AttributeValue::N(s) => Value::String(s.clone()),
            AttributeValue::Bool(b) => Value::Bool(*b),
            AttributeValue::Ss(list) | AttributeValue::Ns(list) => list.iter().cloned().map(Value::String).collect(),
            AttributeValue::L(list) => list.iter().map(plain).collect(),
            AttributeValue::M(map) => map.iter().map(|(k, v)| (k.clone(), plain(v))).collect(),
            _ => Value::Null,
        }
    }
    let pages = aws_sdk_dynamodb::Client::new(aws)
        .scan()
        .table_name(table)
        .into_paginator()
        .items()
        .send();
    let items: Vec<_> = pages
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?;
    let mut plain_items: Vec<Value> = items
        .iter()
        .map(|item| item.iter().map(|(k, v)| (k.clone(), plain(v))).collect())
        .collect();
    plain_items.sort_by(|a: &Value, b: &Value| a["created_at"].as_str().cmp(&b["created_at"].as_str()));
    Ok(plain_items)
}
