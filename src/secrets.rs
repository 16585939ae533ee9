//! The OpenAI API key, read from Secrets Manager.
//!
//! The key is read on first use (never at start-up, so bad input is answered
//! without touching it) and cached by the desk for `OPENAI_KEY_CACHE_SECS`,
//! then read again; a 401 from OpenAI reads it again at once (a rotation).
//! A failed first read is not cached: the next request tries again.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use aws_sdk_secretsmanager::error::DisplayErrorContext;

/// The longest the secret read may take, retries included; part of a
/// request's worst case (see `template.yaml`).
pub const SECRET_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The key itself. Its `Debug` never shows it, so it cannot leak through a
/// `{:?}` in a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The read itself failed; the message is the SDK's, which names no secret value.
    #[error("reading the secret failed: {0}")]
    Read(String),
    #[error("the secret has no SecretString")]
    NotAString,
    #[error("the secret's SecretString is empty or its JSON has no non-empty \"api_key\" string")]
    NoKey,
    /// A key an HTTP header cannot carry (async-openai would panic building it).
    #[error("the API key in the secret has characters other than visible ASCII")]
    InvalidKey,
}

/// Where the API key comes from. Tests and benchmarks use a fixed key; the
/// function uses [`SecretsManagerKey`].
pub trait ApiKeySource: Sync {
    fn fetch(&self) -> impl Future<Output = Result<ApiKey, SecretError>> + Send;
}

pub struct SecretsManagerKey {
    client: aws_sdk_secretsmanager::Client,
    secret_id: String,
}

impl SecretsManagerKey {
    pub fn new(client: aws_sdk_secretsmanager::Client, secret_id: impl Into<String>) -> Self {
        SecretsManagerKey {
            client,
            secret_id: secret_id.into(),
        }
    }
}

impl ApiKeySource for SecretsManagerKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        let output = self
            .client
            .get_secret_value()
            .secret_id(&self.secret_id)
            .send()
            .await
            .map_err(|error| SecretError::Read(DisplayErrorContext(error).to_string()))?;
        parse_secret_string(output.secret_string().ok_or(SecretError::NotAString)?)
    }
}

/// A key that is already known (tests, benchmarks, local tools).
pub struct FixedKey(pub ApiKey);

impl FixedKey {
    pub fn new(key: impl Into<String>) -> Self {
        FixedKey(ApiKey(key.into()))
    }
}

impl ApiKeySource for FixedKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        Ok(self.0.clone())
    }
}

/// The `SecretString` is the key itself, or a JSON object with an `api_key` field.
pub fn parse_secret_string(secret: &str) -> Result<ApiKey, SecretError> {
    let secret = secret.trim();
    let key = if secret.starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(secret).map_err(|_| SecretError::NoKey)?;
        value
            .get("api_key")
            .and_then(|key| key.as_str())
            .ok_or(SecretError::NoKey)?
            .trim()
            .to_owned()
    } else {
        secret.to_owned()
    };
    if key.is_empty() {
        return Err(SecretError::NoKey);
    }
    if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(SecretError::InvalidKey);
    }
    Ok(ApiKey(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_json_secret_strings() {
        assert_eq!(parse_secret_string("sk-raw\n").unwrap().expose(), "sk-raw");
        assert_eq!(
            parse_secret_string(r#"{"api_key": "sk-json", "other": 1}"#)
                .unwrap()
                .expose(),
            "sk-json"
        );
        for bad in ["", "  ", "{}", r#"{"api_key": ""}"#, r#"{"api_key": 5}"#, "{not json"] {
            assert!(
                matches!(parse_secret_string(bad), Err(SecretError::NoKey)),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn a_key_no_header_can_carry_is_refused() {
        for bad in ["sk-a\nb", "sk-ä", "sk a", r#"{"api_key": "sk-\u0000"}"#] {
            assert!(
                matches!(parse_secret_string(bad), Err(SecretError::InvalidKey)),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = parse_secret_string("sk-very-secret").unwrap();
        assert!(!format!("{key:?}").contains("sk-very-secret"));
    }
}
