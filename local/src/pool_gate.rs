//! A door under `make run`: what API Gateway's Cognito user pool
//! authorizer does, done by the page server against one of moto's pools.
//! An ID token of the pool passes when its RS256 signature verifies
//! against the pool's JWKS and its issuer, audience (the app client),
//! `token_use` and expiry are right. A refused token never reaches the
//! function, as in production.
//!
//! The desk's door (contract 24) checks the staff pool's: the person then
//! travels to the function (run with `STAFF_IDENTITY=header`) in
//! `x-staff-sub`, `x-staff-name` and `x-staff-groups`, and any such header
//! the browser sent is dropped first. The chat's door (contract 27) checks
//! the guest pool's, and hands the token's claims over whole, as the
//! authorizer's `claims` ([`PoolGate::claims`]).

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

/// A pool, as the page server checks its tokens.
pub struct PoolGate {
    jwks_url: String,
    issuer: String,
    client_id: String,
    http: reqwest::Client,
    keys: Mutex<Option<JwkSet>>,
}

/// The person a token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub sub: String,
    pub name: String,
    pub groups: Vec<String>,
}

/// Why a token was refused, as API Gateway answers it (401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no token")]
    Missing,
    #[error("the token does not verify: {0}")]
    Invalid(String),
    #[error("the pool's keys could not be read: {0}")]
    Keys(String),
}

impl PoolGate {
    /// `endpoint`: where the pool lives (moto: `http://127.0.0.1:5005`);
    /// `pool_id`, `issuer`, `client_id` as the setup printed them.
    pub fn new(endpoint: &str, pool_id: &str, issuer: &str, client_id: &str) -> PoolGate {
        PoolGate {
            jwks_url: format!("{}/{pool_id}/.well-known/jwks.json", endpoint.trim_end_matches('/')),
            issuer: issuer.to_owned(),
            client_id: client_id.to_owned(),
            http: reqwest::Client::new(),
            keys: Mutex::new(None),
        }
    }

    async fn keys(&self) -> Result<JwkSet, Refused> {
        let mut keys = self.keys.lock().await;
        if let Some(keys) = keys.as_ref() {
            return Ok(keys.clone());
        }
        let fetched: JwkSet = self
            .http
            .get(&self.jwks_url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| Refused::Keys(e.to_string()))?
            .json()
            .await
            .map_err(|e| Refused::Keys(e.to_string()))?;
        *keys = Some(fetched.clone());
        Ok(fetched)
    }

    /// The person of an `Authorization` header's ID token (bare, as API
    /// Gateway takes it, or after `Bearer `).
    pub async fn person(&self, authorization: Option<&str>) -> Result<Person, Refused> {
        let claims = self.claims(authorization).await?;
        let text = |name: &str| claims[name].as_str().filter(|v| !v.is_empty()).map(str::to_owned);
        let sub = text("sub").ok_or_else(|| Refused::Invalid("no sub".into()))?;
        Ok(Person {
            name: text("name")
                .or_else(|| text("email"))
                .or_else(|| text("cognito:username"))
                .unwrap_or_else(|| sub.clone()),
            groups: claims["cognito:groups"]
                .as_array()
                .map(|groups| groups.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
            sub,
        })
    }

    /// The verified claims of an `Authorization` header's ID token.
    pub async fn claims(&self, authorization: Option<&str>) -> Result<Value, Refused> {
        let token = authorization
            .map(|value| {
                let value = value.trim();
                // "Bearer" with nothing after it is no token, not a malformed one.
                value
                    .strip_prefix("Bearer")
                    .filter(|rest| rest.is_empty() || rest.starts_with(' '))
                    .unwrap_or(value)
                    .trim()
            })
            .filter(|token| !token.is_empty())
            .ok_or(Refused::Missing)?;
        let header = jsonwebtoken::decode_header(token).map_err(|e| Refused::Invalid(e.to_string()))?;
        let keys = self.keys().await?;
        let jwk = match header.kid.as_deref() {
            Some(kid) => keys.find(kid),
            None => keys.keys.first(),
        }
        .ok_or_else(|| Refused::Invalid("no key of the pool signed it".into()))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| Refused::Invalid(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| Refused::Invalid(e.to_string()))?
            .claims;
        if claims["token_use"] != "id" {
            return Err(Refused::Invalid("not an ID token".into()));
        }
        Ok(claims)
    }
}
