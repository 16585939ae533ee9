//! A Cognito user pool's ID token, verified by code: its RS256 signature
//! against the pool's published keys (JWKS), its issuer, its audience (the
//! app client), `token_use` and expiry. API Gateway's authorizers do this
//! for the routes; where no API Gateway stands in front (AppSync Events'
//! Lambda authorizer, contract 31; the page server's door under `make
//! run`), this does the same checks, with the maintained `jsonwebtoken`.

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

/// One pool: where its keys are, and what its tokens must say.
pub struct PoolKeys {
    jwks_url: String,
    issuer: String,
    http: reqwest::Client,
    /// The keys, and when they were read.
    keys: Mutex<Option<(JwkSet, std::time::Instant)>>,
}

/// An unknown key id reads the keys again at most this often: a token with
/// a made-up `kid` must not make every request a fetch of the pool's keys.
const REFETCH_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no token")]
    Missing,
    #[error("the token does not verify: {0}")]
    Invalid(String),
    #[error("the pool's keys could not be read: {0}")]
    Keys(String),
}

impl PoolKeys {
    /// The pool whose tokens `issuer` issues, its keys at `jwks_url`
    /// (Cognito: the issuer's `/.well-known/jwks.json`).
    pub fn new(jwks_url: &str, issuer: &str, http: reqwest::Client) -> PoolKeys {
        PoolKeys {
            jwks_url: jwks_url.to_owned(),
            issuer: issuer.to_owned(),
            http,
            keys: Mutex::new(None),
        }
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The keys, read once; read again when a token names a key they lack
    /// (the pool rotated its keys), at most once a minute.
    async fn keys(&self, kid: Option<&str>) -> Result<JwkSet, Refused> {
        let mut keys = self.keys.lock().await;
        if let Some((known, read_at)) = keys.as_ref()
            && (kid.is_none_or(|kid| known.find(kid).is_some()) || read_at.elapsed() < REFETCH_AFTER)
        {
            return Ok(known.clone());
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
        *keys = Some((fetched.clone(), std::time::Instant::now()));
        Ok(fetched)
    }

    /// The verified claims of an ID token of this pool, whose audience is
    /// one of `audiences` (none given: any of the pool's clients).
    pub async fn verify(&self, token: &str, audiences: Option<&[String]>) -> Result<Map<String, Value>, Refused> {
        let token = bare(token).ok_or(Refused::Missing)?;
        let header = jsonwebtoken::decode_header(token).map_err(|e| Refused::Invalid(e.to_string()))?;
        let keys = self.keys(header.kid.as_deref()).await?;
        let jwk = match header.kid.as_deref() {
            Some(kid) => keys.find(kid),
            None => keys.keys.first(),
        }
        .ok_or_else(|| Refused::Invalid("no key of the pool signed it".into()))?;
        let key = DecodingKey::from_jwk(jwk).map_err(|e| Refused::Invalid(e.to_string()))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&self.issuer]);
        match audiences {
            Some(audiences) => validation.set_audience(audiences),
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| Refused::Invalid(e.to_string()))?
            .claims;
        if claims.get("token_use").and_then(Value::as_str) != Some("id") {
            return Err(Refused::Invalid("not an ID token".into()));
        }
        Ok(claims)
    }
}

/// A token as an `Authorization` value carries it: bare, or after
/// `Bearer ` ("Bearer" with nothing after it is no token).
pub fn bare(value: &str) -> Option<&str> {
    let value = value.trim();
    let token = value
        .strip_prefix("Bearer")
        .filter(|rest| rest.is_empty() || rest.starts_with(' '))
        .unwrap_or(value)
        .trim();
    (!token.is_empty()).then_some(token)
}

/// The issuer a token names, read without verifying it: only to choose
/// which pool verifies it.
pub fn claimed_issuer(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = bare(token)?.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_value_and_a_bare_one_carry_the_same_token() {
        assert_eq!(bare("Bearer abc"), Some("abc"));
        assert_eq!(bare(" abc "), Some("abc"));
        assert_eq!(bare("Bearer"), None);
        assert_eq!(bare("   "), None);
        assert_eq!(bare("Bearerabc"), Some("Bearerabc"));
    }

    /// A made-up key id reads the pool's keys once, not on every token.
    #[tokio::test]
    async fn an_unknown_key_id_reads_the_keys_at_most_once_a_minute() {
        use base64::Engine;
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("GET"))
            .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({"keys": []})))
            .mount(&server)
            .await;
        let keys = PoolKeys::new(
            &format!("{}/jwks.json", server.uri()),
            "https://pool",
            reqwest::Client::new(),
        );
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        for kid in ["made-up-1", "made-up-2", "made-up-3"] {
            let token = format!(
                "{}.{}.c2ln",
                encode(&format!(r#"{{"alg":"RS256","kid":"{kid}"}}"#)),
                encode(r#"{"iss":"https://pool"}"#)
            );
            assert!(matches!(keys.verify(&token, None).await, Err(Refused::Invalid(_))));
        }
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }

    #[test]
    fn the_claimed_issuer_is_read_from_the_payload() {
        use base64::Engine;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"iss":"https://pool"}"#);
        assert_eq!(
            claimed_issuer(&format!("h.{payload}.s")).as_deref(),
            Some("https://pool")
        );
        assert_eq!(claimed_issuer("not a token"), None);
    }
}
