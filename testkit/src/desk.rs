//! The desk (`refund-chat-staff`, contract 24), wired as its `main` wires
//! it, on a test's ledger and payments: REST API events as the staff pool's
//! authorizer passes them (or, with `STAFF_IDENTITY=header`, the headers
//! the local page server sets), every answer checked against `docs/openapi.yaml`.

use std::sync::Arc;

use aws_config::SdkConfig;
use lambda_http::lambda_runtime::Context;
use lambda_http::{Body, RequestExt};
use refund_chat::config::DeskConfig;
use refund_chat::staff::Staff;
use refund_chat::staff::http::StaffApp;
use serde_json::{Value, json};

use crate::*;

/// The staff pool's issuer in `events/staff/`.
pub const STAFF_ISSUER: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_StaffPool";

/// A person of the staff pool.
#[derive(Debug, Clone, Copy)]
pub struct Who {
    pub sub: &'static str,
    pub name: &'static str,
    /// `cognito:groups` as API Gateway passes it: a comma-separated string.
    pub groups: &'static str,
    pub issuer: &'static str,
}

pub const ANN: Who = Who {
    sub: "7d1c2a4e-0000-4000-8000-00000000a001",
    name: "Ann Approver",
    groups: "support-staff,refund-approvers",
    issuer: STAFF_ISSUER,
};
pub const BEN: Who = Who {
    sub: "7d1c2a4e-0000-4000-8000-00000000a003",
    name: "Ben Approver",
    groups: "refund-approvers,support-staff",
    issuer: STAFF_ISSUER,
};
pub const SAM: Who = Who {
    sub: "7d1c2a4e-0000-4000-8000-00000000b002",
    name: "Sam Staff",
    groups: "support-staff",
    issuer: STAFF_ISSUER,
};
/// Signed in to the staff pool, in no group.
pub const NOBODY: Who = Who {
    sub: "7d1c2a4e-0000-4000-8000-00000000c004",
    name: "Nora New",
    groups: "",
    issuer: STAFF_ISSUER,
};
/// A customer's token: the shop's pool, even with a group of the staff's name.
pub const CUSTOMER: Who = Who {
    sub: "u-1001",
    name: "u-1001",
    groups: "support-staff,refund-approvers",
    issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Example",
};

/// A staff pool in moto's Cognito as `make run` makes it
/// (`tools/local-staff-pool.py`), with Nia, who has not signed in yet:
/// the pool, its client, its issuer, the sign-in URL and the people.
pub fn local_staff_pool() -> Value {
    python(&[
        "tools/local-staff-pool.py",
        "--endpoint",
        &moto().endpoint,
        "--newcomer",
    ])
}

/// A real sign-in to `pool` as `username`: `{"id": ..., "access": ...}`.
pub fn staff_tokens(pool: &Value, username: &str) -> Value {
    let password = pool["people"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|person| person["username"] == username)
        .and_then(|person| person["password"].as_str())
        .unwrap_or_else(|| panic!("no {username} in the pool"));
    let client = pool["client_id"].as_str().expect("the pool's client");
    python(&[
        "tools/staff-token.py",
        "sign-in",
        &moto().endpoint,
        client,
        username,
        password,
    ])
}

/// A token signed with moto's own key, carrying `claims` (what a real
/// sign-in never hands out: an expired token, another client's).
pub fn forged_staff_token(claims: &Value) -> String {
    python(&["tools/staff-token.py", "forge", &claims.to_string()])["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

/// One of the project's Python tools, in the `.venv` `make test` installs: its JSON answer.
fn python(args: &[&str]) -> Value {
    let (script, rest) = args.split_first().expect("a script");
    let output = std::process::Command::new(root().join(".venv/bin/python"))
        .arg(root().join(script))
        .args(rest)
        .output()
        .unwrap_or_else(|error| panic!("{script} (make test installs .venv): {error}"));
    assert!(
        output.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

pub struct StaffDesk {
    pub app: Arc<StaffApp>,
}

/// The desk's settings on `table`, payments and orders at `payments`; `more` win.
pub fn desk_config(table: &str, payments: &str, more: &[(&str, &str)]) -> DeskConfig {
    let mut vars: Vec<(String, String)> = vec![
        ("LEDGER_TABLE".into(), table.to_owned()),
        ("CONVERSATION_TABLE".into(), conversation_table(table)),
        ("PAYMENTS_BASE_URL".into(), payments.to_owned()),
        (
            "PAYMENTS_TIMEOUT_SECS".into(),
            PAYMENTS_TIMEOUT.as_secs_f64().to_string(),
        ),
        ("ORDERS_BASE_URL".into(), payments.to_owned()),
        ("ORDERS_TIMEOUT_SECS".into(), ORDERS_TIMEOUT.as_secs_f64().to_string()),
        ("LEDGER_TIMEOUT_SECS".into(), LEDGER_TIMEOUT.as_secs_f64().to_string()),
        ("STAFF_POOL_ISSUER".into(), STAFF_ISSUER.to_owned()),
        (
            "STAFF_SIGN_IN_URL".into(),
            "https://cognito-idp.eu-west-1.amazonaws.com/".to_owned(),
        ),
        ("STAFF_POOL_CLIENT_ID".into(), "staffclient".to_owned()),
        (
            "TRACE_URL_TEMPLATE".into(),
            "https://logs.example/trace?id={request_id}".to_owned(),
        ),
        (
            "ORDER_URL_TEMPLATE".into(),
            "https://shop.example/admin/orders/{order_id}".to_owned(),
        ),
    ];
    for (name, value) in more {
        vars.retain(|(n, _)| n != name);
        vars.push(((*name).to_owned(), (*value).to_owned()));
    }
    DeskConfig::from_lookup(move |name| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()))
        .expect("desk config")
}

impl StaffDesk {
    /// The desk on `aws`'s DynamoDB.
    pub fn new(aws: &SdkConfig, config: DeskConfig) -> StaffDesk {
        let http = refund_chat::http_client::money_path_client().expect("an HTTP client");
        let staff = Staff::new(&config.staff, aws, http);
        StaffDesk {
            app: Arc::new(StaffApp::new(config, staff, vec!["https://help.shop.example".into()])),
        }
    }

    pub async fn get(&self, path: &str, who: Who) -> Answer {
        self.send(staff_event("GET", path, None, &[], Some(who))).await
    }

    /// A click: `body` POSTed with `key` as its `Idempotency-Key`.
    pub async fn post(&self, path: &str, body: Value, key: &str, who: Who) -> Answer {
        self.send(staff_event(
            "POST",
            path,
            Some(body),
            &[("Idempotency-Key", key)],
            Some(who),
        ))
        .await
    }

    pub async fn send(&self, event: Value) -> Answer {
        send_staff(&self.app, event).await
    }
}

/// A REST API event of the desk, as the staff pool's authorizer passes it
/// (none: no authorizer, as the page's own route).
pub fn staff_event(method: &str, path: &str, body: Option<Value>, headers: &[(&str, &str)], who: Option<Who>) -> Value {
    let mut event = load_event("staff/queue.json");
    event["httpMethod"] = json!(method);
    event["path"] = json!(path);
    event["requestContext"]["httpMethod"] = json!(method);
    event["requestContext"]["path"] = json!(format!("/Prod{path}"));
    event["body"] = body.map_or(Value::Null, |b| Value::String(b.to_string()));
    for (name, value) in headers {
        event["headers"][*name] = json!(value);
        event["multiValueHeaders"][*name] = json!([value]);
    }
    match who {
        Some(who) => {
            let claims = &mut event["requestContext"]["authorizer"]["claims"];
            claims["sub"] = json!(who.sub);
            claims["name"] = json!(who.name);
            claims["cognito:groups"] = json!(who.groups);
            claims["iss"] = json!(who.issuer);
            if who.groups.is_empty()
                && let Some(claims) = claims.as_object_mut()
            {
                claims.remove("cognito:groups");
            }
        }
        None => {
            if let Some(context) = event["requestContext"].as_object_mut() {
                context.remove("authorizer");
            }
        }
    }
    event
}

/// The same person as the local page server passes them (`STAFF_IDENTITY=header`).
pub fn with_staff_headers(mut event: Value, who: Who) -> Value {
    for (name, value) in [
        ("x-staff-sub", who.sub),
        ("x-staff-name", who.name),
        ("x-staff-groups", who.groups),
    ] {
        event["headers"][name] = json!(value);
        event["multiValueHeaders"][name] = json!([value]);
    }
    if let Some(context) = event["requestContext"].as_object_mut() {
        context.remove("authorizer");
    }
    event
}

/// Sends `event` to the desk; the answer checked against the API description.
pub async fn send_staff(app: &StaffApp, event: Value) -> Answer {
    let path = event["path"].as_str().unwrap_or_default().to_owned();
    let method = event["httpMethod"].as_str().unwrap_or_default().to_ascii_lowercase();
    let mut context = Context::default();
    context.request_id = fresh_request_id();
    let request = lambda_http::request::from_str(&event.to_string())
        .expect("event")
        .with_lambda_context(context);
    let response = app.answer(request).await;
    let status = response.status();
    let headers = response.headers().clone();
    let raw = match response.body() {
        Body::Text(text) => text.clone(),
        other => String::from_utf8_lossy(other.as_ref()).into_owned(),
    };
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    if let Some(operation) = staff_operation(&path, &method)
        && let Err(problem) = openapi_check(operation, status.as_u16(), &headers, &body)
    {
        panic!("the answer does not match docs/openapi.yaml: {problem}\n{method} {path}: {status} {raw}");
    }
    Answer {
        status,
        headers,
        body,
        raw,
    }
}
