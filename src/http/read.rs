//! `GET /support/refund-chat/conversations/{id}?after=N` (contract 18):
//! the widget reads what it has not shown yet, a person's words among it.
//! The checks that need no I/O, in the contract's order: method, identity
//! (401, or 403 for a `user_id` that is not the signed-in customer), the
//! `after` parameter (400), the id's syntax (one 404 with the unknown, the
//! expired and another customer's). Then one read.

use lambda_http::{Request, RequestExt};
use serde_json::json;

use super::answer::ApiError;
use super::body::InputError;
use super::identity::{IdentityError, customer};
use crate::config::Identity;
use crate::conversation::ConversationId;
use crate::conversation::shown::Shown;

/// Where a conversation is read: this, then its id.
pub const PREFIX: &str = "/support/refund-chat/conversations/";

const MALFORMED_AFTER: &str = "after must be a non-negative integer";

/// A read that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub customer: String,
    /// `None`: no id a conversation can have (a 404 without a read).
    pub id: Option<ConversationId>,
    pub after: Option<u64>,
}

/// The id in a read route's path, if the path is one.
pub fn route_id(path: &str) -> Option<&str> {
    path.strip_prefix(PREFIX).filter(|id| !id.contains('/'))
}

/// The checks of a request to a read route (`id` from [`route_id`]).
pub fn check(request: &Request, id: &str, identity: &Identity) -> Result<ReadRequest, ApiError> {
    if request.method() != lambda_http::http::Method::GET {
        return Err(ApiError::MethodNotAllowed { allow: "GET" });
    }
    let authenticated = identity.authenticated(request)?;
    let user_id = one_query(request, "user_id")?;
    let customer = match (authenticated, user_id) {
        (Some(authenticated), Some(user_id)) => customer(Some(&authenticated), user_id)?,
        (Some(authenticated), None) => authenticated.user_id,
        // Body mode (local only): the query names the customer, as the body does a POST's.
        (None, Some(user_id)) if !user_id.trim().is_empty() => customer(None, user_id)?,
        (None, _) => return Err(IdentityError::Unauthenticated.into()),
    };
    let after = after_of(request)?;
    Ok(ReadRequest {
        customer,
        id: ConversationId::parse(id),
        after,
    })
}

/// A query parameter given at most once.
fn one_query<'r>(request: &'r Request, name: &str) -> Result<Option<&'r str>, ApiError> {
    let query = request.query_string_parameters_ref();
    match query.and_then(|q| q.all(name)).unwrap_or_default().as_slice() {
        [] => Ok(None),
        [value] => Ok(Some(value)),
        _ => Err(InputError::Malformed("a query parameter may be given once").into()),
    }
}

/// The `after` parameter, checked.
pub fn after_of(request: &Request) -> Result<Option<u64>, ApiError> {
    one_query(request, "after")?.map(parse_after).transpose()
}

/// Digits only: no sign, no space, no fraction, within 64 bits.
fn parse_after(raw: &str) -> Result<u64, ApiError> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(InputError::Malformed(MALFORMED_AFTER).into());
    }
    raw.parse().map_err(|_| InputError::Malformed(MALFORMED_AFTER).into())
}

/// The 200's body: `person_expected` while a handoff is open (contract 32),
/// with the sentence the page shows under it.
pub fn render(id: &ConversationId, shown: &Shown) -> String {
    let mut body = json!({
        "conversation_id": id.as_str(),
        "handed_off": shown.handed_off,
        "awaiting_approval": shown.awaiting_approval,
        "ask_rating": shown.ask_rating,
        "messages": shown.messages,
    });
    if let Some(expected) = &shown.person_expected {
        body["person_expected"] = expected.json();
    }
    body.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(query: &str) -> Request {
        let event = json!({
            "version": "2.0", "routeKey": "GET /support/refund-chat/conversations/{id}",
            "rawPath": "/support/refund-chat/conversations/c_1", "rawQueryString": query,
            "headers": {}, "isBase64Encoded": false,
            "requestContext": {"accountId": "1", "apiId": "a", "domainName": "d", "domainPrefix": "d",
                "http": {"method": "GET", "path": "/support/refund-chat/conversations/c_1", "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "t"},
                "requestId": "x", "routeKey": "GET /support/refund-chat/conversations/{id}", "stage": "$default",
                "time": "29/Nov/2026:10:00:00 +0000", "timeEpoch": 0,
                "authorizer": {"jwt": {"claims": {"sub": "u-1"}, "scopes": null}}}
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    fn sub() -> Identity {
        crate::config::IdentitySource::Authorizer { claim: "sub".into() }.into()
    }

    #[test]
    fn after_is_a_non_negative_integer_and_nothing_else() {
        for good in ["0", "7", "18446744073709551615"] {
            assert!(parse_after(good).is_ok(), "{good}");
        }
        for bad in ["", "-1", "+1", "1.5", " 1", "1e3", "x", "18446744073709551616"] {
            let error = parse_after(bad).unwrap_err();
            assert_eq!(error.status(), 400, "{bad}");
        }
    }

    #[test]
    fn the_route_holds_one_id_after_its_prefix() {
        assert_eq!(route_id("/support/refund-chat/conversations/c_1"), Some("c_1"));
        assert_eq!(route_id("/support/refund-chat/conversations/c_1/x"), None);
        assert_eq!(route_id("/support/refund-chat"), None);
    }

    #[test]
    fn the_customer_is_the_signed_in_one_and_a_query_user_id_must_be_theirs() {
        let read = check(&get("after=3"), "c_1", &sub()).unwrap();
        assert_eq!((read.customer.as_str(), read.after), ("u-1", Some(3)));
        assert_eq!(check(&get("user_id=u-1"), "c_1", &sub()).unwrap().customer, "u-1");
        let other = check(&get("user_id=u-2"), "c_1", &sub()).unwrap_err();
        assert_eq!(other.status(), 403);
        // Body mode: the query's user_id, and none is a 401.
        assert_eq!(
            check(&get("user_id=u-9"), "c_1", &crate::config::IdentitySource::Body.into())
                .unwrap()
                .customer,
            "u-9"
        );
        assert_eq!(
            check(&get(""), "c_1", &crate::config::IdentitySource::Body.into())
                .unwrap_err()
                .status(),
            401
        );
        assert_eq!(check(&get("after=1&after=2"), "c_1", &sub()).unwrap_err().status(), 400);
    }
}
