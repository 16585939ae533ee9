//! Who the customer is (contract 7): the one API Gateway authenticated, not
//! whatever the body's `user_id` says.
//!
//! With `USER_IDENTITY=authorizer` (the default) the user id is read from the
//! request context's authorizer, in one of three shapes:
//! - REST API, Cognito user pool authorizer: `authorizer.claims.<claim>`;
//! - REST API, Lambda authorizer: `authorizer.principalId`;
//! - HTTP API, JWT authorizer: `authorizer.jwt.claims.<claim>`;
//!
//! where `<claim>` is `USER_ID_CLAIM` (`sub` by default). No identity there is
//! a 401; a body `user_id` that differs is a 403. `USER_IDENTITY=body` trusts
//! the body, for local runs only (`cargo lambda watch` sends no authorizer).

use lambda_http::{Request, RequestExt};

use crate::config::IdentitySource;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("no authenticated customer in the request")]
    Unauthenticated,
    #[error("user_id is not the authenticated customer")]
    Mismatch,
}

impl IdentitySource {
    /// The authenticated user id, if this source needs one from the request:
    /// `Ok(None)` for [`IdentitySource::Body`].
    pub fn authenticated(&self, request: &Request) -> Result<Option<String>, IdentityError> {
        match self {
            IdentitySource::Body => Ok(None),
            IdentitySource::Authorizer { claim } => authorizer_user_id(request, claim)
                .map(Some)
                .ok_or(IdentityError::Unauthenticated),
        }
    }
}

/// The customer: the authenticated one, who must be the body's `user_id`
/// too; or, with no authenticated one (body mode), the body's.
pub fn customer(authenticated: Option<String>, body_user_id: &str) -> Result<String, IdentityError> {
    match authenticated {
        Some(user_id) if user_id == body_user_id => Ok(user_id),
        Some(_) => Err(IdentityError::Mismatch),
        None => Ok(body_user_id.to_owned()),
    }
}

fn authorizer_user_id(request: &Request, claim: &str) -> Option<String> {
    let authorizer = request.request_context_ref()?.authorizer()?;
    let user_id = if let Some(jwt) = &authorizer.jwt {
        jwt.claims.get(claim).cloned()
    } else if let Some(claims) = authorizer.fields.get("claims") {
        claims.get(claim).and_then(|v| v.as_str()).map(str::to_owned)
    } else {
        authorizer
            .fields
            .get("principalId")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    user_id.filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn rest(authorizer: Value) -> Request {
        let event = json!({
            "resource": "/support/refund-chat", "path": "/support/refund-chat", "httpMethod": "POST",
            "headers": {}, "multiValueHeaders": {}, "body": "{}", "isBase64Encoded": false,
            "requestContext": {"accountId": "1", "resourceId": "r", "stage": "Prod", "requestId": "x",
                "httpMethod": "POST", "path": "/Prod/support/refund-chat", "resourcePath": "/support/refund-chat",
                "identity": {}, "authorizer": authorizer}
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    fn http_api(authorizer: Value) -> Request {
        let event = json!({
            "version": "2.0", "routeKey": "POST /support/refund-chat", "rawPath": "/support/refund-chat",
            "rawQueryString": "", "headers": {}, "body": "{}", "isBase64Encoded": false,
            "requestContext": {"accountId": "1", "apiId": "a", "domainName": "d", "domainPrefix": "d",
                "http": {"method": "POST", "path": "/support/refund-chat", "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "t"},
                "requestId": "x", "routeKey": "POST /support/refund-chat", "stage": "$default",
                "time": "29/Nov/2026:10:00:00 +0000", "timeEpoch": 0, "authorizer": authorizer}
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    fn sub() -> IdentitySource {
        IdentitySource::Authorizer { claim: "sub".into() }
    }

    #[test]
    fn each_authorizer_shape() {
        let cognito = rest(json!({"claims": {"sub": "u-1", "email": "a@example.com"}}));
        let lambda_authorizer = rest(json!({"principalId": "u-2", "integrationLatency": 3}));
        let jwt = http_api(json!({"jwt": {"claims": {"sub": "u-3"}, "scopes": null}}));
        assert_eq!(sub().authenticated(&cognito), Ok(Some("u-1".into())));
        assert_eq!(sub().authenticated(&lambda_authorizer), Ok(Some("u-2".into())));
        assert_eq!(sub().authenticated(&jwt), Ok(Some("u-3".into())));
        let email = IdentitySource::Authorizer { claim: "email".into() };
        assert_eq!(email.authenticated(&cognito), Ok(Some("a@example.com".into())));
    }

    #[test]
    fn no_identity_is_unauthenticated() {
        for request in [
            rest(json!({})),
            rest(json!({"claims": {"email": "a@example.com"}})),
            rest(json!({"claims": {"sub": ""}})),
            http_api(json!({"jwt": {"claims": {}}})),
        ] {
            assert_eq!(sub().authenticated(&request), Err(IdentityError::Unauthenticated));
        }
        assert_eq!(IdentitySource::Body.authenticated(&rest(json!({}))), Ok(None));
    }

    #[test]
    fn the_body_must_name_the_authenticated_customer() {
        assert_eq!(customer(Some("u-1".into()), "u-1"), Ok("u-1".into()));
        assert_eq!(customer(Some("u-1".into()), "u-2"), Err(IdentityError::Mismatch));
        assert_eq!(customer(None, "u-2"), Ok("u-2".into()));
    }
}
