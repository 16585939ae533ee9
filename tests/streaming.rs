//! Contract 20's JSON mode: the function binary, as Lambda runs it, answers
//! every event of `events/` in the runtime's streaming response mode, and
//! what a caller reads is what the buffered mode answers: the same status,
//! headers and body, every route. Each mode runs against a Runtime API
//! emulator of its own and a stack of its own (moto, the payments sandbox,
//! the local model), the events sent in the same order.

use std::path::Path;
use std::time::Duration;

use refund_chat_local::runtime_api::RuntimeApi;
use serde_json::Value;

use refund_chat_testkit::*;

/// One answer as a caller reads it: status, headers, body (JSON where it is).
fn read(answer: &[u8]) -> (u64, Value, Value) {
    let answer: Value = serde_json::from_slice(answer).expect("the emulator's JSON");
    let body = answer["body"].as_str().unwrap_or_default();
    let mut body: Value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(without_conversation_ids(body)));
    // Issued at random, once per conversation: the one thing two runs never share.
    if let Some(id) = body.get_mut("conversation_id") {
        *id = Value::String("c_…".into());
    }
    // A buffered REST answer puts its headers in `multiValueHeaders`.
    let mut headers = answer["headers"].as_object().cloned().unwrap_or_default();
    for (name, values) in answer["multiValueHeaders"].as_object().into_iter().flatten() {
        if let Some(first) = values.get(0) {
            headers.entry(name.to_lowercase()).or_insert_with(|| first.clone());
        }
    }
    (
        answer["statusCode"].as_u64().unwrap_or_default(),
        Value::Object(headers),
        body,
    )
}

/// An event stream's text with each conversation id (`c_` and 32 hex digits) as `c_…`.
fn without_conversation_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\"c_") {
        let id_len = rest[at + 3..].chars().take_while(char::is_ascii_hexdigit).count();
        out.push_str(&rest[..at + 3]);
        out.push_str(if id_len == 32 { "…" } else { "" });
        rest = &rest[at + 3 + if id_len == 32 { id_len } else { 0 }..];
    }
    out.push_str(rest);
    out
}

/// Every event file, in name order.
fn events() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("events");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// Every event through the function in `mode`: what each answered, and how
/// many answers came streamed.
async fn answers(mode: &str) -> (Vec<(String, (u64, Value, Value))>, u64) {
    let aws = aws_at(&moto().endpoint).await;
    let table = format!("streaming-{mode}-{}", std::process::id());
    let secret = format!("streaming-{mode}-{}/openai-api-key", std::process::id());
    set_up_local_aws(&aws, &table, &secret, "sk-streaming").await.unwrap();
    let sandbox = refund_chat_local::payments_sandbox::Sandbox::open(None).unwrap();
    let shop = refund_chat_local::spawn(0, sandbox.router()).await.unwrap();
    let model = refund_chat_local::local_model::LocalModel::new(None);
    let model = refund_chat_local::spawn(0, model.router()).await.unwrap();
    let api = RuntimeApi::with_timeout(Duration::from_secs(30));
    let api_address = refund_chat_local::spawn(0, api.router()).await.unwrap();
    let mut function = tokio::process::Command::new(env!("CARGO_BIN_EXE_refund-chat"))
        .env_clear()
        .envs(refund_chat_local::runtime_api::lambda_environment(api_address))
        .envs([
            ("RESPONSE_MODE", mode.to_owned()),
            ("AWS_ENDPOINT_URL", moto().endpoint.clone()),
            ("OPENAI_API_KEY_SECRET_ID", secret),
            ("OPENAI_BASE_URL", format!("http://{model}/v1")),
            ("PAYMENTS_BASE_URL", format!("http://{shop}")),
            ("ORDERS_BASE_URL", format!("http://{shop}")),
            ("LEDGER_TABLE", table.clone()),
            ("CONVERSATION_TABLE", conversation_table(&table)),
            ("USER_IDENTITY", "authorizer".to_owned()),
        ])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the function binary");
    let mut answered = Vec::new();
    for (name, event) in events() {
        let (answer, _) = api.invoke(event.into()).await;
        let answer = answer.unwrap_or_else(|e| panic!("{name}: {}", String::from_utf8_lossy(&e)));
        answered.push((name, read(&answer)));
    }
    let _ = function.kill().await;
    (answered, api.streamed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_streamed_exactly_as_it_would_buffered() {
    let (streamed, streamed_count) = answers("streaming").await;
    let (buffered, buffered_count) = answers("buffered").await;

    assert_eq!(
        streamed_count as usize,
        streamed.len(),
        "every answer in the streaming mode"
    );
    assert_eq!(buffered_count, 0);
    let statuses: Vec<u64> = streamed.iter().map(|(_, (status, ..))| *status).collect();
    for status in [200, 400, 401, 403, 404, 405, 422] {
        assert!(statuses.contains(&status), "the events cover {status}: {statuses:?}");
    }
    for ((name, streamed), (_, buffered)) in streamed.iter().zip(&buffered) {
        assert_eq!(streamed, buffered, "{name}: the streamed answer is the buffered one");
        if name.contains("event-stream") {
            // Contract 20's event-stream mode, through the real runtime: a 200 stream ending in done.
            assert_eq!(streamed.1["content-type"], "text/event-stream", "{name}");
            let text = streamed.2.as_str().unwrap_or_default();
            assert!(
                text.starts_with("event: delta\n") && text.contains("event: done\n"),
                "{text}"
            );
            continue;
        }
        assert_eq!(streamed.1["content-type"], "application/json", "{name}");
        assert!(streamed.1["x-request-id"].is_string(), "{name}");
        assert!(!streamed.2.is_null(), "{name}: a body");
    }
}
