//! `docs/openapi.yaml` against the code: it documents exactly the contract's
//! statuses, its examples are valid, its limits are the code's, and the
//! check every other test runs (`helpers::send_as`) can fail.

use lambda_http::http::HeaderMap;
use serde_json::{Value, json};

use refund_chat_testkit::*;

const CHAT_STATUSES: [u16; 13] = [200, 400, 401, 403, 404, 405, 409, 422, 429, 500, 502, 503, 504];
/// The read's (contract 18): no budget, no model, no key, so no 409, 422, 429, 5xx of a turn.
const READ_STATUSES: [u16; 7] = [200, 400, 401, 403, 404, 405, 503];
/// A visitor's message (contract 27): no 403 (no identity to mismatch),
/// and no 401 (a token of another shape is another visitor's: a 404).
const VISITOR_CHAT_STATUSES: [u16; 11] = [200, 400, 404, 405, 409, 422, 429, 500, 502, 503, 504];
/// A visitor's read: no token is a 404, not a 401.
const VISITOR_READ_STATUSES: [u16; 5] = [200, 400, 404, 405, 503];
/// A claim (contract 27): one conditional write, no turn.
const CLAIM_STATUSES: [u16; 8] = [200, 400, 401, 403, 404, 405, 409, 503];
/// A rating (contract 30): one conditional write, its body checked.
const RATE_STATUSES: [u16; 9] = [200, 400, 401, 403, 404, 405, 409, 422, 503];
/// A visitor's rating: no token is a 404, not a 401.
const VISITOR_RATE_STATUSES: [u16; 7] = [200, 400, 404, 405, 409, 422, 503];

fn documented(operation: Operation) -> Vec<u16> {
    openapi()["paths"][operation.path][operation.method]["responses"]
        .as_object()
        .unwrap()
        .keys()
        .map(|status| status.parse().unwrap())
        .collect()
}

#[test]
fn every_status_of_the_contract_is_documented_and_no_other() {
    assert_eq!(documented(CHAT), CHAT_STATUSES);
    assert_eq!(documented(READ), READ_STATUSES);
    assert_eq!(documented(VISITOR_CHAT), VISITOR_CHAT_STATUSES);
    assert_eq!(documented(VISITOR_READ), VISITOR_READ_STATUSES);
    assert_eq!(documented(CLAIM), CLAIM_STATUSES);
    assert_eq!(documented(RATE), RATE_STATUSES);
    assert_eq!(documented(VISITOR_RATE), VISITOR_RATE_STATUSES);
    let mut paths: Vec<&String> = openapi()["paths"].as_object().unwrap().keys().collect();
    paths.sort();
    let mut expected = vec![
        CHAT.path,
        READ.path,
        VISITOR_CHAT.path,
        VISITOR_READ.path,
        CLAIM.path,
        RATE.path,
        VISITOR_RATE.path,
    ];
    expected.extend(STAFF.iter().map(|(operation, _)| operation.path));
    expected.sort();
    // A path of several methods (a saved reply's PUT and DELETE) once.
    expected.dedup();
    assert_eq!(paths, expected, "no other path");
    for (operation, statuses) in STAFF {
        assert_eq!(documented(operation), statuses, "{}", operation.path);
    }
}

/// The desk's operations (contracts 24 and 30) and their statuses.
const STAFF: [(Operation, &[u16]); 15] = [
    (op("/support/staff/queue", "get"), &[200, 401, 403, 500, 503]),
    (op("/support/staff/refunds/{id}", "get"), &[200, 401, 403, 404, 503]),
    (
        op("/support/staff/conversations/{id}", "get"),
        &[200, 401, 403, 404, 503],
    ),
    (
        op("/support/staff/refunds/{id}/approve", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 502, 503],
    ),
    (
        op("/support/staff/refunds/{id}/reject", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        op("/support/staff/refunds/{id}/resolve", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        op("/support/staff/conversations/{id}/reply", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        op("/support/staff/conversations/{id}/claim", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        op("/support/staff/conversations/{id}/release", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        op("/support/staff/conversations/{id}/notes", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (op("/support/staff/search", "get"), &[200, 401, 403, 422, 503]),
    (op("/support/staff/saved-replies", "get"), &[200, 401, 403, 503]),
    (
        op("/support/staff/saved-replies/{id}", "put"),
        &[200, 400, 401, 403, 409, 422, 503],
    ),
    (
        op("/support/staff/saved-replies/{id}", "delete"),
        &[200, 401, 403, 404, 503],
    ),
    (
        op("/support/staff/handoffs/{id}/close", "post"),
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
];

const fn op(path: &'static str, method: &'static str) -> Operation {
    Operation { path, method }
}

#[test]
fn every_example_is_valid() {
    let statuses = CHAT_STATUSES
        .iter()
        .map(|&status| (CHAT, status))
        .chain(READ_STATUSES.iter().map(|&status| (READ, status)))
        .chain(VISITOR_CHAT_STATUSES.iter().map(|&status| (VISITOR_CHAT, status)))
        .chain(VISITOR_READ_STATUSES.iter().map(|&status| (VISITOR_READ, status)))
        .chain(CLAIM_STATUSES.iter().map(|&status| (CLAIM, status)))
        .chain(RATE_STATUSES.iter().map(|&status| (RATE, status)))
        .chain(VISITOR_RATE_STATUSES.iter().map(|&status| (VISITOR_RATE, status)))
        .chain(
            STAFF
                .iter()
                .flat_map(|(operation, statuses)| statuses.iter().map(|&status| (*operation, status))),
        );
    for (operation, status) in statuses {
        let content = &documented_response(operation, status).unwrap()["content"]["application/json"];
        let examples: Vec<Value> = match content.get("examples") {
            Some(named) => named
                .as_object()
                .unwrap()
                .values()
                .map(|e| e["value"].clone())
                .collect(),
            None => vec![content["example"].clone()],
        };
        assert!(!examples.is_empty(), "{status} has an example");
        for example in examples {
            openapi_validate(&content["schema"], &example)
                .unwrap_or_else(|e| panic!("{} {status}: {e}", operation.path));
        }
    }
    let request = &openapi()["paths"]["/support/refund-chat"]["post"]["requestBody"]["content"]["application/json"];
    openapi_validate(&request["schema"], &request["example"]).unwrap();
}

#[test]
fn the_documented_limits_are_the_codes() {
    let schemas = &openapi()["components"]["schemas"];
    assert_eq!(
        schemas["ChatRequest"]["properties"]["message"]["maxLength"],
        refund_chat::http::body::MAX_MESSAGE_CHARS
    );
    let key = &openapi()["paths"]["/support/refund-chat"]["post"]["parameters"][0];
    assert_eq!(key["name"], "Idempotency-Key");
    let pattern = key["schema"]["pattern"].as_str().unwrap();
    assert!(pattern.contains(&format!("{{1,{}}}", refund_chat::http::idempotency::MAX_KEY_LENGTH)));
    assert_eq!(
        schemas["ConversationRead"]["properties"]["messages"]["maxItems"],
        refund_chat::conversation::shown::MAX_SHOWN
    );
    assert_eq!(
        READ.path.trim_end_matches("{id}"),
        refund_chat::http::read::PREFIX,
        "the documented path is the code's"
    );
}

#[test]
fn the_check_catches_an_answer_that_drifted() {
    let mut headers = HeaderMap::new();
    headers.insert("x-request-id", "req-1".parse().unwrap());
    assert!(openapi_check(CHAT, 200, &headers, &json!({"reply": "hi", "conversation_id": "c_1"})).is_ok());
    assert!(
        openapi_check(CHAT, 200, &headers, &json!({"reply": "hi"})).is_err(),
        "an answer of a turn names its conversation"
    );
    assert!(
        openapi_check(
            CHAT,
            200,
            &headers,
            &json!({"reply": "hi", "conversation_id": "c_1", "refund_id": "rf_1"})
        )
        .is_err()
    );
    assert!(openapi_check(CHAT, 418, &headers, &json!({"detail": "teapot"})).is_err());
    assert!(
        openapi_check(CHAT, 409, &headers, &json!({"detail": "busy"})).is_err(),
        "Retry-After is required"
    );
    assert!(
        openapi_check(CHAT, 400, &HeaderMap::new(), &json!({"detail": "x"})).is_err(),
        "x-request-id is required"
    );
}
