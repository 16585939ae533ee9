//! `POST /support/refund-chat/conversations/{id}/claim` (contract 27): the
//! customer (or guest) who verified takes over the conversation they began
//! as a visitor. The claimer is the authenticated one (in body mode, the
//! query's `user_id`, as a read's); the visitor is the `X-Visitor-Token`
//! that began it. Without the token, with another, or for a conversation
//! already claimed: section 11's 404.

use lambda_http::{Request, RequestExt};
use serde_json::Value;

use super::answer::ApiError;
use super::body::InputError;
use super::identity::IdentityError;
use super::read::PREFIX;
use crate::config::Identity;
use crate::conversation::ConversationId;
use crate::visitor::{self, VisitorToken};

const SUFFIX: &str = "/claim";

/// A claim that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub claimer: String,
    /// `None`: no id a conversation can have, or no visitor token: a 404
    /// without a write.
    pub id: Option<ConversationId>,
    pub visitor: Option<String>,
}

/// The id in a claim route's path, if the path is one.
pub fn route_id(path: &str) -> Option<&str> {
    path.strip_prefix(PREFIX)?
        .strip_suffix(SUFFIX)
        .filter(|id| !id.contains('/'))
}

pub fn check(request: &Request, raw_id: &str, identity: &Identity) -> Result<ClaimRequest, ApiError> {
    if request.method() != lambda_http::http::Method::POST {
        return Err(ApiError::MethodNotAllowed { allow: "POST" });
    }
    let claimer = match identity.authenticated(request)? {
        Some(who) => who.user_id,
        // Body mode (local only): the query names the customer, as a read's does.
        None => request
            .query_string_parameters_ref()
            .and_then(|query| query.first("user_id"))
            .filter(|user_id| !user_id.trim().is_empty())
            .map(|user_id| super::identity::customer(None, user_id))
            .ok_or(IdentityError::Unauthenticated)??,
    };
    // A visitor claims nothing: only an authorizer's token verifies anyone.
    if visitor::is_visitor(&claimer) {
        return Err(IdentityError::Mismatch.into());
    }
    let body = request.body().as_ref();
    if !body.iter().all(u8::is_ascii_whitespace) && !matches!(serde_json::from_slice(body), Ok(Value::Object(_))) {
        return Err(InputError::Malformed("the request body must be a JSON object ({})").into());
    }
    let token = request
        .headers()
        .get(visitor::TOKEN_HEADER)
        .and_then(|value| VisitorToken::parse(value.as_bytes()));
    Ok(ClaimRequest {
        claimer,
        id: ConversationId::parse(raw_id),
        visitor: token.map(|token| token.user_id()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_is_a_conversations_claim() {
        assert_eq!(route_id("/support/refund-chat/conversations/c_1/claim"), Some("c_1"));
        assert_eq!(route_id("/support/refund-chat/conversations/c_1"), None);
        assert_eq!(route_id("/support/refund-chat/conversations/a/b/claim"), None);
    }
}
