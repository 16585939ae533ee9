//! Every answer of the suite checked against `docs/openapi.yaml`.

use std::sync::OnceLock;

use lambda_http::http::{HeaderMap, StatusCode};
use serde_json::Value;
use wiremock::MockServer;

/// The API description, as JSON.
pub fn openapi() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let text = std::fs::read_to_string(crate::root().join("docs/openapi.yaml")).expect("docs/openapi.yaml");
        serde_norway::from_str(&text).expect("docs/openapi.yaml is YAML")
    })
}

/// An operation of the document: its path (as the document writes it) and method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub path: &'static str,
    pub method: &'static str,
}

/// `POST /support/refund-chat`: one message, one turn.
pub const CHAT: Operation = Operation {
    path: "/support/refund-chat",
    method: "post",
};
/// `GET /support/refund-chat/conversations/{id}` (contract 18).
pub const READ: Operation = Operation {
    path: "/support/refund-chat/conversations/{id}",
    method: "get",
};

/// `POST /support/refund-chat/conversations/{id}/claim` (contract 27).
pub const CLAIM: Operation = Operation {
    path: "/support/refund-chat/conversations/{id}/claim",
    method: "post",
};
/// `POST /support/refund-chat/visitor` (contract 27).
pub const VISITOR_CHAT: Operation = Operation {
    path: "/support/refund-chat/visitor",
    method: "post",
};
/// `GET /support/refund-chat/visitor/conversations/{id}` (contract 27).
pub const VISITOR_READ: Operation = Operation {
    path: "/support/refund-chat/visitor/conversations/{id}",
    method: "get",
};

/// `POST /support/refund-chat/conversations/{id}/rating` (contract 30).
pub const RATE: Operation = Operation {
    path: "/support/refund-chat/conversations/{id}/rating",
    method: "post",
};
/// `POST /support/refund-chat/visitor/conversations/{id}/rating` (contract 30).
pub const VISITOR_RATE: Operation = Operation {
    path: "/support/refund-chat/visitor/conversations/{id}/rating",
    method: "post",
};

/// The operation a request's path belongs to; any other path answers as the chat's route does (404).
pub fn operation_of(path: &str) -> Operation {
    if path.starts_with("/support/refund-chat/visitor/conversations/") && path.ends_with("/rating") {
        VISITOR_RATE
    } else if path.starts_with("/support/refund-chat/conversations/") && path.ends_with("/rating") {
        RATE
    } else if path.starts_with("/support/refund-chat/conversations/") && path.ends_with("/claim") {
        CLAIM
    } else if path.starts_with("/support/refund-chat/conversations/") && path.matches('/').count() == 4 {
        READ
    } else if path.starts_with("/support/refund-chat/visitor/conversations/") && path.matches('/').count() == 5 {
        VISITOR_READ
    } else if path == "/support/refund-chat/visitor" {
        VISITOR_CHAT
    } else {
        CHAT
    }
}

/// The desk's operation (contract 24) a request's path and method belong
/// to; none for the page and its files (HTML, script, style: not JSON).
pub fn staff_operation(path: &str, method: &str) -> Option<Operation> {
    let rest = path.strip_prefix("/support/staff/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let documented: &'static str = match parts.as_slice() {
        ["queue"] => "/support/staff/queue",
        ["refunds", _] => "/support/staff/refunds/{id}",
        ["conversations", _] => "/support/staff/conversations/{id}",
        ["refunds", _, "approve"] => "/support/staff/refunds/{id}/approve",
        ["refunds", _, "reject"] => "/support/staff/refunds/{id}/reject",
        ["refunds", _, "resolve"] => "/support/staff/refunds/{id}/resolve",
        ["conversations", _, "reply"] => "/support/staff/conversations/{id}/reply",
        ["conversations", _, "claim"] => "/support/staff/conversations/{id}/claim",
        ["conversations", _, "release"] => "/support/staff/conversations/{id}/release",
        ["conversations", _, "notes"] => "/support/staff/conversations/{id}/notes",
        ["handoffs", _, "close"] => "/support/staff/handoffs/{id}/close",
        ["search"] => "/support/staff/search",
        ["saved-replies"] => "/support/staff/saved-replies",
        ["saved-replies", _] => "/support/staff/saved-replies/{id}",
        _ => return None,
    };
    let method: &'static str = match method {
        "get" => "get",
        "post" => "post",
        "put" => "put",
        "delete" => "delete",
        _ => return None,
    };
    Some(Operation {
        path: documented,
        method,
    })
}

/// The documented response of `operation` for `status`.
pub fn documented_response(operation: Operation, status: u16) -> Option<&'static Value> {
    openapi()["paths"][operation.path][operation.method]["responses"]
        .get(status.to_string())
        .filter(|response| response.is_object())
}

/// Whether `instance` is valid against `schema`, whose `$ref`s point into the document.
pub fn openapi_validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let mut rooted = schema.clone();
    if let Value::Object(fields) = &mut rooted {
        fields.insert("components".into(), openapi()["components"].clone());
    }
    let validator = jsonschema::validator_for(&rooted).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| e.to_string()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// A response of `operation`: its status, headers and body against the document.
pub fn openapi_check(operation: Operation, status: u16, headers: &HeaderMap, body: &Value) -> Result<(), String> {
    let response = documented_response(operation, status).ok_or_else(|| {
        format!(
            "status {status} of {} {} is not documented",
            operation.method, operation.path
        )
    })?;
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let header = match header["$ref"].as_str() {
            Some(reference) => &openapi()["components"]["headers"][reference.rsplit('/').next().unwrap_or_default()],
            None => header,
        };
        match headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
            Some(value) => openapi_validate(&header["schema"], &Value::String(value.to_owned()))
                .map_err(|e| format!("header {name}: {e}"))?,
            None if header["required"] == true => return Err(format!("header {name} is missing")),
            None => {}
        }
    }
    openapi_validate(&response["content"]["application/json"]["schema"], body).map_err(|e| format!("body: {e}"))
}

/// The body alone: a `done` event carries JSON mode's status and body, not its headers.
pub fn openapi_check_body(operation: Operation, status: u16, body: &Value) -> Result<(), String> {
    let response = documented_response(operation, status).ok_or_else(|| {
        format!(
            "status {status} of {} {} is not documented",
            operation.method, operation.path
        )
    })?;
    openapi_validate(&response["content"]["application/json"]["schema"], body).map_err(|e| format!("body: {e}"))
}

pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        // The order system's reads share the payments mock: only POSTs are calls with bodies.
        .filter(|r| r.method.as_str() == "POST")
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: String,
}

impl Answer {
    /// The conversation the answer names (a 200, 502 or 504 always does).
    pub fn conversation_id(&self) -> &str {
        self.body["conversation_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no conversation_id in {} ({})", self.raw, self.status))
    }

    pub fn reply(&self) -> &str {
        self.body["reply"]
            .as_str()
            .unwrap_or_else(|| panic!("no reply in {} ({})", self.raw, self.status))
    }
    pub fn detail(&self) -> &str {
        self.body["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {} ({})", self.raw, self.status))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn load_event(name: &str) -> Value {
    let path = crate::root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("event file")).expect("event JSON")
}
