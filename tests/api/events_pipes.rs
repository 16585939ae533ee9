//! The events (contract 14), as the Pipes derive them: stream records made
//! from items the function really wrote, each pipe's filter run with
//! EventBridge's pattern semantics (moto's matcher, `tools/event_pattern.py`),
//! and its input template rendered as Pipes render it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use refund_chat::ops::events::{PIPES, Pipe};
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use refund_chat_testkit::*;

type Item = HashMap<String, AttributeValue>;

/// An item in DynamoDB's JSON, as a stream record carries it.
fn ddb_json(item: &Item) -> Value {
    fn value(v: &AttributeValue) -> Value {
        match v {
            AttributeValue::S(s) => json!({"S": s}),
            AttributeValue::N(n) => json!({"N": n}),
            AttributeValue::Bool(b) => json!({"BOOL": b}),
            AttributeValue::Ss(list) => json!({"SS": list}),
            AttributeValue::L(list) => json!({"L": list.iter().map(value).collect::<Vec<_>>()}),
            AttributeValue::M(map) => {
                json!({"M": map.iter().map(|(k, v)| (k.clone(), value(v))).collect::<serde_json::Map<_, _>>()})
            }
            _ => json!({"NULL": true}),
        }
    }
    Value::Object(item.iter().map(|(k, v)| (k.clone(), value(v))).collect())
}

fn record(id: &str, name: &str, old: Option<&Item>, new: &Item) -> Value {
    let mut dynamodb = json!({"NewImage": ddb_json(new), "StreamViewType": "NEW_AND_OLD_IMAGES"});
    if let Some(old) = old {
        dynamodb["OldImage"] = ddb_json(old);
    }
    json!({"eventID": id, "eventName": name, "eventSource": "aws:dynamodb", "dynamodb": dynamodb})
}

fn with(item: &Item, name: &str, value: &str) -> Item {
    let mut item = item.clone();
    item.insert(name.into(), AttributeValue::S(value.into()));
    item
}

fn without(item: &Item, prefix: &str) -> Item {
    item.iter()
        .filter(|(k, _)| !k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Which of the pipes each record reaches, by moto's EventBridge matcher.
fn matches(records: &[Value]) -> Vec<Vec<&'static str>> {
    let pairs: Vec<Value> = records
        .iter()
        .flat_map(|record| {
            PIPES
                .iter()
                .map(move |pipe| json!([serde_json::from_str::<Value>(pipe.pattern).unwrap(), record]))
        })
        .collect();
    let mut child = std::process::Command::new(root().join(".venv/bin/python3"))
        .arg(root().join("tools/event_pattern.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the .venv's python (make test installs moto there)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(pairs).to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let matched: Vec<bool> = serde_json::from_slice(&output.stdout).expect("the matcher's answer");
    matched
        .chunks(PIPES.len())
        .map(|row| {
            PIPES
                .iter()
                .zip(row)
                .filter(|(_, hit)| **hit)
                .map(|(pipe, _)| pipe.detail_type)
                .collect()
        })
        .collect()
}

/// The detail a Pipes input template makes of a record: `"<$.path>"` is the
/// string at the path, `<$.path>` its JSON.
fn render(pipe: &Pipe, record: &Value) -> Value {
    let mut out = String::new();
    let mut rest = pipe.input_template;
    while let Some(start) = rest.find("<$.") {
        let end = start + rest[start..].find('>').unwrap();
        let path = &rest[start + 3..end];
        let value = path.split('.').fold(record, |node, key| &node[key]);
        let quoted = rest[..start].ends_with('"');
        out.push_str(&rest[..start]);
        match (quoted, value) {
            (true, Value::String(text)) => out.push_str(serde_json::to_string(text).unwrap().trim_matches('"')),
            (_, Value::String(text)) => out.push_str(text),
            (_, other) => out.push_str(&other.to_string()),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}: {out}", pipe.detail_type))
}

#[tokio::test]
async fn each_event_comes_from_its_write_and_carries_no_text_a_person_wrote() {
    // An approval, an unknown outcome, a paid refund, and a handoff, for real.
    let h = TestApp::builder()
        .model_responder(refunding_model)
        .payments(ResponseTemplate::new(500).set_body_string("payments exploded"))
        .build()
        .await;
    let approval = h.say(None, "refund D-4001 12000 Zanzibar-quokka sofa torn").await;
    let unknown = h.say(None, "refund A-1001 1250").await;
    let handed = h.say(None, "Zanzibar-quokka: I want to talk to a person").await;
    assert_eq!((approval.status.as_u16(), unknown.status.as_u16()), (200, 200));
    let refunds = h.refund_records().await;
    let record_of = |state: &str| {
        refunds
            .iter()
            .find(|r| attr(r, "state") == Some(state))
            .cloned()
            .unwrap()
    };
    let (waiting, lost) = (record_of("awaiting_approval"), record_of("unknown"));
    let conversations = items(&h.aws, &conversation_table(&h.table)).await;
    let header = conversations
        .iter()
        .find(|i| attr(i, "pk") == Some(handed.conversation_id()) && attr(i, "sk") == Some("head"))
        .cloned()
        .unwrap();
    let exchange = conversations
        .iter()
        .find(|i| attr(i, "sk").is_some_and(|sk| sk.starts_with("x#")))
        .cloned()
        .unwrap();
    let request = h
        .ledger()
        .await
        .into_iter()
        .find(|i| attr(i, "kind") == Some("budget"))
        .unwrap();

    let records = [
        record("e1", "INSERT", None, &waiting),
        record("e2", "MODIFY", Some(&with(&lost, "state", "executing")), &lost),
        record("e3", "INSERT", None, &with(&lost, "state", "executing")),
        record("e4", "MODIFY", Some(&lost), &with(&lost, "state", "executed")),
        record("e5", "MODIFY", Some(&lost), &lost),
        record("e6", "MODIFY", Some(&without(&header, "handoff")), &header),
        record("e7", "INSERT", None, &header),
        record("e8", "MODIFY", Some(&header), &header),
        record("e9", "INSERT", None, &exchange),
        record("e10", "INSERT", None, &request),
        record("e11", "MODIFY", Some(&with(&waiting, "state", "executing")), &waiting),
    ];
    assert_eq!(
        matches(&records),
        vec![
            vec!["RefundAwaitingApproval"],
            vec!["RefundOutcomeUnknown"],
            vec![],
            vec![],
            vec![],
            vec!["ConversationHandedOff"],
            vec!["ConversationHandedOff"],
            vec![],
            vec![],
            vec![],
            vec![],
        ]
    );

    let [awaiting_pipe, unknown_pipe, handoff_pipe] = &PIPES;
    let detail = render(awaiting_pipe, &records[0]);
    assert_eq!(
        detail["event_id"], "e1",
        "a consumer deduplicates by the stream record's id"
    );
    assert_eq!(detail["record_id"], attr(&waiting, "record_id").unwrap());
    assert_eq!(
        (detail["order_id"].as_str(), detail["amount_cents"].as_u64()),
        (Some("D-4001"), Some(12000))
    );
    assert!(detail["reasons"].to_string().contains("amount_above_limit"), "{detail}");
    let detail = render(unknown_pipe, &records[1]);
    assert_eq!(detail["record_id"], attr(&lost, "record_id").unwrap());
    assert_eq!(detail["amount_cents"], 1250);
    assert!(detail.get("failure").is_none(), "payments' words stay out: {detail}");
    let detail = render(handoff_pipe, &records[5]);
    assert_eq!(detail["conversation_id"], handed.conversation_id());
    assert_eq!(
        (detail["reason"].as_str(), detail["user_id"].as_str()),
        (Some("customer_asked"), Some(USER))
    );
    for (pipe, record) in [
        (awaiting_pipe, &records[0]),
        (unknown_pipe, &records[1]),
        (handoff_pipe, &records[5]),
    ] {
        let text = render(pipe, record).to_string();
        assert!(!text.contains("Zanzibar-quokka"), "{}: {text}", pipe.detail_type);
        assert!(!text.contains("payments exploded"), "{}: {text}", pipe.detail_type);
    }
}

#[tokio::test]
async fn an_order_id_that_does_not_look_like_one_never_reaches_an_event() {
    let written = "D-4001 </script> call me on +44 7700 900123";
    let h = TestApp::new(
        vec![refund_call("c1", written, 12000), text("A person will review it.")],
        receipt(),
    )
    .await;

    let answer = h.say(None, "refund it all").await;

    assert_eq!(answer.status.as_u16(), 200, "{}", answer.raw);
    let waiting = h.refund_records().await.into_iter().next().unwrap();
    assert_eq!(
        attr(&waiting, "order_id"),
        Some(written),
        "the record keeps what the model wrote"
    );
    let [awaiting_pipe, unknown_pipe, _] = &PIPES;
    let executing = with(&waiting, "state", "executing");
    for (pipe, record) in [
        (awaiting_pipe, record("e1", "INSERT", None, &waiting)),
        (
            unknown_pipe,
            record("e2", "MODIFY", Some(&executing), &with(&waiting, "state", "unknown")),
        ),
    ] {
        let detail = render(pipe, &record);
        assert_eq!(detail["order_id"], "", "{}: {detail}", pipe.detail_type);
        assert!(!detail.to_string().contains("7700"), "{detail}");
    }
}

/// A payments service that takes the call and never answers in time,
/// saying when the call arrived.
struct Stalls(std::sync::Arc<tokio::sync::Notify>);

impl wiremock::Respond for Stalls {
    fn respond(&self, _: &wiremock::Request) -> ResponseTemplate {
        self.0.notify_one();
        ResponseTemplate::new(200).set_delay(std::time::Duration::from_secs(30))
    }
}

#[tokio::test]
async fn a_refund_left_executing_by_a_dead_invocation_raises_refund_outcome_unknown_with_nobody_polling() {
    let reached = std::sync::Arc::new(tokio::sync::Notify::new());
    let payments = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Stalls(reached.clone()))
        .mount(&payments)
        .await;
    let h = TestApp::builder()
        .model(vec![refund_call("c1", "A-1001", 1250)])
        .payments_at(payments.uri())
        .build()
        .await;
    // The container dies once payments has the call: between the record and its outcome.
    tokio::select! {
        answer = h.say(None, REFUND_MESSAGE) => panic!("the invocation was to die: {}", answer.raw),
        () = reached.notified() => {}
    }
    let executing = h.refund_records().await.into_iter().next().unwrap();
    assert_eq!(attr(&executing, "state"), Some("executing"));
    let ledger = refund_chat::ledger::dynamo::DynamoLedger::from_sdk_config(&h.aws, &h.table, LEDGER_TIMEOUT);
    let now = refund_chat::clock::now_ms();
    assert!(
        ledger.sweep_executing(now - 60_000, now).await.unwrap().is_empty(),
        "not before the function's timeout has passed"
    );

    // The schedule's run, once the function's timeout has passed.
    let moved = ledger.sweep_executing(now + 1_000, now + 1_000).await.unwrap();

    assert_eq!(moved, [attr(&executing, "record_id").unwrap()]);
    let unknown = h.refund_records().await.into_iter().next().unwrap();
    assert_eq!(attr(&unknown, "state"), Some("unknown"));
    assert_eq!(
        attr(&unknown, "waiting_for"),
        Some("unknown"),
        "refund-chat-admin unknown lists it"
    );
    let change = record("e1", "MODIFY", Some(&executing), &unknown);
    assert_eq!(
        matches(std::slice::from_ref(&change)),
        vec![vec!["RefundOutcomeUnknown"]]
    );
    let detail = render(&PIPES[1], &change);
    assert_eq!(detail["record_id"], attr(&unknown, "record_id").unwrap());
    assert!(
        ledger
            .sweep_executing(now + 2_000, now + 2_000)
            .await
            .unwrap()
            .is_empty(),
        "moved once"
    );
}
