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
//!
//! A guest (contract 27) is told apart by the token's issuer: claims whose
//! `iss` is `GUEST_POOL_ISSUER` are the guest pool's, and the guest is
//! `guest:<sub>` with the e-mail Cognito verified; a guest token whose
//! `email_verified` is not `true`, or whose audience is not the guest pool's
//! client (`GUEST_POOL_CLIENT_ID`, which the authorizer does not check), is
//! a 401. With `CUSTOMER_POOL_CLIENT_IDS`, a customer's token is an ID
//! token of one of those app clients: another client's, or an access token,
//! is a 401. In body mode the page server's
//! door ([`DOOR_CLAIMS_HEADER`]) hands over the claims of a guest token it
//! verified, as API Gateway's authorizer would.

use lambda_http::{Request, RequestExt};
use serde_json::Value;

use crate::config::{Identity, IdentitySource};
use crate::guest::{self, GuestEmail};

/// Body mode only (`make run`): the claims of a guest pool token that the
/// page server's door verified, as JSON. The door drops any a browser sent;
/// the deployed function (authorizer mode) never reads it.
pub const DOOR_CLAIMS_HEADER: &str = "x-local-authorizer-claims";

/// Who an authorizer verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub user_id: String,
    /// A guest's verified e-mail; `None` for a customer.
    pub guest: Option<GuestEmail>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("no authenticated customer in the request")]
    Unauthenticated,
    #[error("user_id is not the authenticated customer")]
    Mismatch,
}

impl Identity {
    /// Whose day a guest counts in ([`GuestEmail::day_owner`]). Without the
    /// key (which configuration requires with guests) their user id.
    pub fn guest_day_owner(&self, email: &GuestEmail, user_id: &str) -> String {
        match &self.guest_key {
            Some(key) => email.day_owner(key),
            None => user_id.to_owned(),
        }
    }

    /// Who the request's authorizer verified: `Ok(None)` in body mode
    /// when the door handed over no guest's claims.
    pub fn authenticated(&self, request: &Request) -> Result<Option<Authenticated>, IdentityError> {
        let guests = GuestTokens {
            issuer: self.guest_issuer.as_deref(),
            audience: self.guest_audience.as_deref(),
        };
        match &self.source {
            IdentitySource::Body => match door_claims(request) {
                None => Ok(None),
                Some(claims) => match guest_of(&claims, &guests) {
                    Some(guest) => guest.map(Some),
                    None => Err(IdentityError::Unauthenticated),
                },
            },
            IdentitySource::Authorizer { claim } => {
                // Without a guest pool there is nothing to tell apart: no claims copied.
                if guests.issuer.is_some()
                    && let Some(guest) = authorizer_claims(request).and_then(|claims| guest_of(&claims, &guests))
                {
                    return guest.map(Some);
                }
                let user_id = authorizer_user_id(request, claim).ok_or(IdentityError::Unauthenticated)?;
                // No customer id may pass for a guest's or a visitor's.
                if guest::is_guest(&user_id) || crate::visitor::is_visitor(&user_id) {
                    return Err(IdentityError::Unauthenticated);
                }
                if !self.a_customers_token(authorizer_claims(request).as_ref()) {
                    return Err(IdentityError::Unauthenticated);
                }
                Ok(Some(Authenticated { user_id, guest: None }))
            }
        }
    }
}

impl Identity {
    /// With `CUSTOMER_POOL_CLIENT_IDS`, an ID token of one of them: its
    /// `aud` listed and its `token_use` not `access` (a Lambda authorizer
    /// hands over no claims: then none passes). Without, whatever the
    /// authorizer let through, as an HTTP API's JWT authorizer takes access
    /// tokens.
    fn a_customers_token(&self, claims: Option<&serde_json::Map<String, Value>>) -> bool {
        let Some(clients) = &self.customer_audiences else {
            return true;
        };
        let claim = |name: &str| claims.and_then(|claims| claims.get(name)).and_then(Value::as_str);
        claim("token_use") != Some("access")
            && claim("aud").is_some_and(|aud| clients.iter().any(|client| client == aud))
    }
}

/// What a guest pool token must say: its issuer, and its client when known.
struct GuestTokens<'a> {
    issuer: Option<&'a str>,
    audience: Option<&'a str>,
}

/// The guest of claims from the guest pool (`None`: not the guest pool's):
/// `guest:<sub>` with a verified e-mail, of the pool's client, else a 401.
fn guest_of(
    claims: &serde_json::Map<String, Value>,
    pool: &GuestTokens<'_>,
) -> Option<Result<Authenticated, IdentityError>> {
    let issuer = pool.issuer?;
    if claims.get("iss").and_then(Value::as_str) != Some(issuer) {
        return None;
    }
    let audience = claims.get("aud").and_then(Value::as_str);
    if pool.audience.is_some_and(|client| audience != Some(client)) {
        return Some(Err(IdentityError::Unauthenticated));
    }
    // REST API's claims are strings ("true"); a JWT's are JSON (true).
    let verified = matches!(claims.get("email_verified"), Some(Value::Bool(true)))
        || claims.get("email_verified").and_then(Value::as_str) == Some("true");
    let sub = claims.get("sub").and_then(Value::as_str).filter(|sub| !sub.is_empty());
    let email = claims.get("email").and_then(Value::as_str).and_then(GuestEmail::parse);
    Some(match (verified, sub, email) {
        (true, Some(sub), Some(email)) => Ok(Authenticated {
            user_id: guest::user_id(sub),
            guest: Some(email),
        }),
        _ => Err(IdentityError::Unauthenticated),
    })
}

/// The token's claims as a Cognito user pool authorizer (REST) or a JWT
/// authorizer (HTTP API) hands them over; a Lambda authorizer has none.
fn authorizer_claims(request: &Request) -> Option<serde_json::Map<String, Value>> {
    let authorizer = request.request_context_ref()?.authorizer()?;
    if let Some(jwt) = &authorizer.jwt {
        return Some(
            jwt.claims
                .iter()
                .map(|(name, value)| (name.clone(), Value::String(value.clone())))
                .collect(),
        );
    }
    authorizer.fields.get("claims")?.as_object().cloned()
}

/// The door's claims (body mode): present only when it verified a token.
fn door_claims(request: &Request) -> Option<serde_json::Map<String, Value>> {
    let raw = request.headers().get(DOOR_CLAIMS_HEADER)?;
    match serde_json::from_slice(raw.as_bytes()) {
        Ok(Value::Object(claims)) => Some(claims),
        _ => Some(serde_json::Map::new()),
    }
}

/// The customer: the authenticated one, who must be the body's `user_id`
/// too; or, with no authenticated one (body mode), the body's.
pub fn customer(authenticated: Option<&Authenticated>, body_user_id: &str) -> Result<String, IdentityError> {
    match authenticated {
        Some(who) if who.user_id == body_user_id => Ok(who.user_id.clone()),
        Some(_) => Err(IdentityError::Mismatch),
        // Only a guest pool's token makes a guest, and only the visitors'
        // route a visitor, even locally.
        None if guest::is_guest(body_user_id) || crate::visitor::is_visitor(body_user_id) => {
            Err(IdentityError::Unauthenticated)
        }
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

    fn sub() -> Identity {
        IdentitySource::Authorizer { claim: "sub".into() }.into()
    }

    fn user(user_id: &str) -> Option<Authenticated> {
        Some(Authenticated {
            user_id: user_id.into(),
            guest: None,
        })
    }

    const GUESTS: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_guests";

    fn with_guests(source: IdentitySource) -> Identity {
        Identity {
            source,
            guest_issuer: Some(GUESTS.into()),
            guest_audience: None,
            guest_key: None,
            customer_audiences: None,
        }
    }

    /// `CUSTOMER_POOL_CLIENT_IDS`: an ID token of a listed client is a
    /// customer's; another client's, an access token, or a token whose
    /// claims the authorizer did not hand over is not. None listed: as
    /// before.
    #[test]
    fn a_customers_token_is_an_id_token_of_a_listed_client() {
        let listed = Identity {
            customer_audiences: Some(vec!["shop-web".into(), "shop-app".into()]),
            ..sub()
        };
        let id_token = |aud: &str| json!({"sub": "u-1", "aud": aud, "token_use": "id"});
        for request in [
            rest(json!({ "claims": id_token("shop-app") })),
            http_api(json!({"jwt": {"claims": id_token("shop-web")}})),
        ] {
            assert_eq!(listed.authenticated(&request), Ok(user("u-1")));
        }
        let access = json!({"sub": "u-1", "client_id": "shop-web", "token_use": "access"});
        for refused in [
            rest(json!({ "claims": id_token("a-test-client") })),
            rest(json!({ "claims": access })),
            rest(json!({"principalId": "u-1"})),
        ] {
            assert_eq!(listed.authenticated(&refused), Err(IdentityError::Unauthenticated));
        }
        // None listed: whatever the authorizer let through.
        let unlisted = |claims: Value| sub().authenticated(&rest(json!({ "claims": claims })));
        assert_eq!(unlisted(id_token("a-test-client")), Ok(user("u-1")));
        assert_eq!(unlisted(access), Ok(user("u-1")));
    }

    #[test]
    fn each_authorizer_shape() {
        let cognito = rest(json!({"claims": {"sub": "u-1", "email": "a@example.com"}}));
        let lambda_authorizer = rest(json!({"principalId": "u-2", "integrationLatency": 3}));
        let jwt = http_api(json!({"jwt": {"claims": {"sub": "u-3"}, "scopes": null}}));
        assert_eq!(sub().authenticated(&cognito), Ok(user("u-1")));
        assert_eq!(sub().authenticated(&lambda_authorizer), Ok(user("u-2")));
        assert_eq!(sub().authenticated(&jwt), Ok(user("u-3")));
        let email = Identity::from(IdentitySource::Authorizer { claim: "email".into() });
        assert_eq!(email.authenticated(&cognito), Ok(user("a@example.com")));
    }

    /// Contract 27: the guest pool's token makes `guest:<sub>` with its
    /// verified e-mail, in either shape of claims; the customers' pool
    /// stays as it was.
    #[test]
    fn a_guest_is_told_apart_by_the_issuer() {
        let claims = json!({"sub": "g-1", "iss": GUESTS, "email": "g@example.com", "email_verified": "true"});
        let identity = with_guests(IdentitySource::Authorizer { claim: "sub".into() });
        for request in [
            rest(json!({ "claims": claims })),
            http_api(json!({"jwt": {"claims": claims}})),
        ] {
            let who = identity.authenticated(&request).unwrap().unwrap();
            assert_eq!(who.user_id, "guest:g-1");
            assert!(who.guest.unwrap().is("g@example.com"));
        }
        let customer = rest(
            json!({"claims": {"sub": "u-1", "iss": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_shop"}}),
        );
        assert_eq!(identity.authenticated(&customer), Ok(user("u-1")));
        // Without GUEST_POOL_ISSUER there are no guests: the pool's token is a customer's.
        assert_eq!(sub().authenticated(&rest(json!({ "claims": claims }))), Ok(user("g-1")));
    }

    #[test]
    fn a_guest_without_a_verified_email_is_unauthenticated() {
        let identity = with_guests(IdentitySource::Authorizer { claim: "sub".into() });
        for claims in [
            json!({"sub": "g-1", "iss": GUESTS, "email": "g@example.com", "email_verified": "false"}),
            json!({"sub": "g-1", "iss": GUESTS, "email": "g@example.com"}),
            json!({"sub": "g-1", "iss": GUESTS, "email_verified": "true"}),
            json!({"sub": "", "iss": GUESTS, "email": "g@example.com", "email_verified": "true"}),
        ] {
            assert_eq!(
                identity.authenticated(&rest(json!({ "claims": claims }))),
                Err(IdentityError::Unauthenticated),
                "{claims}"
            );
        }
        // Another client of the guest pool than the page's: the authorizer
        // lets its token through; the function does not.
        let of_the_page = Identity {
            guest_audience: Some("page-client".into()),
            ..identity.clone()
        };
        let page = json!({"sub": "g-1", "iss": GUESTS, "aud": "page-client", "email": "g@example.com", "email_verified": "true"});
        let other = json!({"sub": "g-1", "iss": GUESTS, "aud": "other-client", "email": "g@example.com", "email_verified": "true"});
        assert!(of_the_page.authenticated(&rest(json!({ "claims": page }))).is_ok());
        assert_eq!(
            of_the_page.authenticated(&rest(json!({ "claims": other }))),
            Err(IdentityError::Unauthenticated)
        );
        // A customer's claim can never read as a guest's or a visitor's id.
        for id in ["guest:g-1", "visitor:ab"] {
            assert_eq!(
                identity.authenticated(&rest(json!({"claims": {"sub": id}}))),
                Err(IdentityError::Unauthenticated)
            );
        }
    }

    /// Body mode (local): only the door's claims make a guest; a body's
    /// `guest:` id without them is refused.
    #[test]
    fn locally_the_door_hands_over_a_guests_claims() {
        let identity = with_guests(IdentitySource::Body);
        let mut request = rest(json!({}));
        assert_eq!(identity.authenticated(&request), Ok(None));
        let claims = json!({"sub": "g-1", "iss": GUESTS, "email": "g@example.com", "email_verified": true});
        request
            .headers_mut()
            .insert(DOOR_CLAIMS_HEADER, claims.to_string().parse().unwrap());
        assert_eq!(identity.authenticated(&request).unwrap().unwrap().user_id, "guest:g-1");
        request
            .headers_mut()
            .insert(DOOR_CLAIMS_HEADER, "not json".parse().unwrap());
        assert_eq!(identity.authenticated(&request), Err(IdentityError::Unauthenticated));
        assert_eq!(customer(None, "guest:g-1"), Err(IdentityError::Unauthenticated));
        assert_eq!(customer(None, "visitor:ab"), Err(IdentityError::Unauthenticated));
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
        assert_eq!(
            Identity::from(IdentitySource::Body).authenticated(&rest(json!({}))),
            Ok(None)
        );
    }

    #[test]
    fn the_body_must_name_the_authenticated_customer() {
        assert_eq!(customer(user("u-1").as_ref(), "u-1"), Ok("u-1".into()));
        assert_eq!(customer(user("u-1").as_ref(), "u-2"), Err(IdentityError::Mismatch));
        assert_eq!(customer(None, "u-2"), Ok("u-2".into()));
    }
}
