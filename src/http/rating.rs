//! `POST /support/refund-chat/conversations/{id}/rating` and the visitor's
//! `POST /support/refund-chat/visitor/conversations/{id}/rating` (contract
//! 30): `{"solved": bool, "comment"?: str}`, by the conversation's own
//! customer (the signed-in one, or the visitor's token). The checks that
//! need no I/O, in section 1's order: method, identity, body; an id no
//! conversation can have, or a visitor without a token, is section 11's
//! 404 without a write.

use lambda_http::Request;
use serde_json::Value;

use super::answer::ApiError;
use super::body::InputError;
use super::identity::IdentityError;
use crate::config::Identity;
use crate::conversation::ConversationId;
use crate::conversation::rating::Rating;

const SUFFIX: &str = "/rating";
const CUSTOMER_PREFIX: &str = super::read::PREFIX;
const VISITOR_PREFIX: &str = super::visitor::READ_PREFIX;

/// Whose route a rating came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Customer,
    Visitor,
}

/// A rating that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatingRequest {
    pub customer: String,
    /// `None`: a 404 without a write.
    pub id: Option<ConversationId>,
    pub rating: Rating,
}

/// The id and route of a rating's path, if the path is one.
pub fn route_id(path: &str) -> Option<(&str, Route)> {
    let id = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_suffix(SUFFIX)
            .filter(|id| !id.is_empty() && !id.contains('/'))
    };
    // The visitor's prefix is longer and starts like no customer's id.
    id(VISITOR_PREFIX)
        .map(|id| (id, Route::Visitor))
        .or_else(|| id(CUSTOMER_PREFIX).map(|id| (id, Route::Customer)))
}

/// The body: `solved`, a boolean, and an optional `comment`.
pub fn rating_of(body: &[u8]) -> Result<Rating, InputError> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return Err(InputError::Malformed("the request body must be a JSON object"));
    };
    let solved = match fields.get("solved") {
        Some(Value::Bool(solved)) => *solved,
        None => return Err(InputError::InvalidField("solved is required: true or false".into())),
        Some(_) => return Err(InputError::InvalidField("solved must be true or false".into())),
    };
    let comment = match fields.get("comment") {
        None | Some(Value::Null) => None,
        Some(Value::String(comment)) => Some(comment.as_str()),
        Some(_) => return Err(InputError::InvalidField("comment must be a string".into())),
    };
    Rating::new(solved, comment).map_err(InputError::InvalidField)
}

pub fn check(request: &Request, raw_id: &str, route: Route, identity: &Identity) -> Result<RatingRequest, ApiError> {
    if request.method() != lambda_http::http::Method::POST {
        return Err(ApiError::MethodNotAllowed { allow: "POST" });
    }
    let customer = match route {
        Route::Customer => match identity.authenticated(request)? {
            Some(who) => who.user_id,
            // Body mode (local only): the query names the customer, as a read's does.
            None => {
                use lambda_http::RequestExt;
                request
                    .query_string_parameters_ref()
                    .and_then(|query| query.first("user_id"))
                    .filter(|user_id| !user_id.trim().is_empty())
                    .map(|user_id| super::identity::customer(None, user_id))
                    .ok_or(IdentityError::Unauthenticated)??
            }
        },
        // No token, or one this function did not issue: nobody's conversation.
        Route::Visitor => super::visitor::token_of(request)
            .ok()
            .flatten()
            .map(|token| token.user_id())
            .unwrap_or_default(),
    };
    let rating = rating_of(request.body().as_ref())?;
    Ok(RatingRequest {
        id: (!customer.is_empty()).then(|| ConversationId::parse(raw_id)).flatten(),
        customer,
        rating,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routes_are_a_conversations_rating() {
        assert_eq!(
            route_id("/support/refund-chat/conversations/c_1/rating"),
            Some(("c_1", Route::Customer))
        );
        assert_eq!(
            route_id("/support/refund-chat/visitor/conversations/c_1/rating"),
            Some(("c_1", Route::Visitor))
        );
        assert_eq!(route_id("/support/refund-chat/conversations/c_1"), None);
        assert_eq!(route_id("/support/refund-chat/conversations/a/b/rating"), None);
    }

    #[test]
    fn the_body_is_solved_and_an_optional_comment() {
        assert!(rating_of(br#"{"solved": true}"#).unwrap().solved);
        assert_eq!(
            rating_of(br#"{"solved": false, "comment": "still waiting"}"#)
                .unwrap()
                .comment,
            "still waiting"
        );
        assert!(matches!(rating_of(b"[]"), Err(InputError::Malformed(_))));
        assert!(matches!(rating_of(b"{}"), Err(InputError::InvalidField(_))));
        assert!(matches!(
            rating_of(br#"{"solved": "yes"}"#),
            Err(InputError::InvalidField(_))
        ));
        let long = format!(r#"{{"solved": true, "comment": "{}"}}"#, "x".repeat(501));
        assert!(matches!(rating_of(long.as_bytes()), Err(InputError::InvalidField(_))));
    }
}
