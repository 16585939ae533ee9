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

use refund_chat::pool_token::PoolKeys;
use serde_json::Value;

/// A pool, as the page server checks its tokens: the project's own check
/// ([`refund_chat::pool_token`]), as AppSync Events' authorizer makes it.
pub struct PoolGate {
    keys: PoolKeys,
    client_id: String,
}

/// The person a token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub sub: String,
    pub name: String,
    pub groups: Vec<String>,
}

/// Why a token was refused, as API Gateway answers it (401).
pub use refund_chat::pool_token::Refused;

impl PoolGate {
    /// `endpoint`: where the pool lives (moto: `http://127.0.0.1:5005`);
    /// `pool_id`, `issuer`, `client_id` as the setup printed them.
    pub fn new(endpoint: &str, pool_id: &str, issuer: &str, client_id: &str) -> PoolGate {
        PoolGate {
            keys: PoolKeys::new(
                &format!("{}/{pool_id}/.well-known/jwks.json", endpoint.trim_end_matches('/')),
                issuer,
                reqwest::Client::new(),
            ),
            client_id: client_id.to_owned(),
        }
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
        let token = authorization.ok_or(Refused::Missing)?;
        let claims = self
            .keys
            .verify(token, Some(std::slice::from_ref(&self.client_id)))
            .await?;
        Ok(Value::Object(claims))
    }
}
