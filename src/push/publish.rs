//! Publishing pokes to AppSync Events' HTTP endpoint (`LIVE_EVENTS_URL`):
//! `POST {"channel", "events": [string]}`, signed with SigV4 (service
//! `appsync`) by the function's own role, with the SDK's own signer
//! (`aws-sigv4`; there is no Rust data-plane client for Event APIs).
//!
//! Best effort by design: it runs after the write has committed, every
//! channel of every poke is sent at once under one timeout
//! (`LIVE_PUBLISH_TIMEOUT_MS`), nothing is retried, and nothing it meets
//! reaches the caller. A 200 is not delivery: the answer lists `failed`
//! events, and one there is a failure too. A failure is logged without the
//! poke (the reason and a count only) and counted as `LivePublishFailures`.

use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use futures_util::future::join_all;
use serde_json::json;

use super::Poke;

/// The SigV4 service name of AppSync, Event APIs included.
const SERVICE: &str = "appsync";

/// Publishes pokes, or (with no `LIVE_EVENTS_URL`) does nothing at all.
#[derive(Clone)]
pub struct Publisher {
    target: Option<Target>,
}

#[derive(Clone)]
struct Target {
    url: String,
    host: String,
    region: String,
    credentials: Option<SharedCredentialsProvider>,
    http: reqwest::Client,
    timeout: Duration,
}

/// Why one channel's publish failed (the log's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No credentials or region to sign with: nothing was sent.
    Unsigned,
    /// Not answered within the timeout, or not reached.
    Unanswered,
    /// A non-2xx answer.
    Status,
    /// A 2xx whose answer lists the event as `failed`, or cannot be read.
    Failed,
}

impl Failure {
    fn as_str(self) -> &'static str {
        match self {
            Failure::Unsigned => "unsigned",
            Failure::Unanswered => "unanswered",
            Failure::Status => "status",
            Failure::Failed => "failed",
        }
    }
}

impl Publisher {
    /// Publishes nothing: the pages poll as before.
    pub fn off() -> Publisher {
        Publisher { target: None }
    }

    /// Publishes to `url` (the Event API's `https://.../event`), signed with
    /// `aws`'s credentials and region, on `http`, each publish bounded by `timeout`.
    pub fn new(url: Option<&str>, aws: &SdkConfig, http: reqwest::Client, timeout: Duration) -> Publisher {
        let Some(url) = url else {
            return Publisher::off();
        };
        let host = Some(crate::web_page::host_of(Some(url))).filter(|host| !host.is_empty());
        let region = aws.region().map(ToString::to_string);
        let credentials = aws.credentials_provider();
        if host.is_none() || region.is_none() || credentials.is_none() {
            // Configured but unusable: every publish fails, counted, and the alarm says so.
            tracing::error!(
                event = "configuration",
                "LIVE_EVENTS_URL is set but there is no region or credentials to sign with"
            );
        }
        Publisher {
            target: Some(Target {
                url: url.to_owned(),
                host: host.unwrap_or_default(),
                region: region.unwrap_or_default(),
                credentials,
                http,
                timeout,
            }),
        }
    }

    pub fn is_on(&self) -> bool {
        self.target.is_some()
    }

    /// Publishes every channel of every poke at once, under one timeout.
    /// Returns how many channel publishes failed (each logged and counted).
    pub async fn publish(&self, pokes: &[Poke]) -> usize {
        let Some(target) = &self.target else {
            return 0;
        };
        let sends: Vec<_> = pokes
            .iter()
            .flat_map(|poke| poke.channels().into_iter().map(move |channel| (channel, poke)))
            .map(|(channel, poke)| target.send(channel, poke.event()))
            .collect();
        let total = sends.len();
        if total == 0 {
            return 0;
        }
        let failures: Vec<Failure> = match tokio::time::timeout(target.timeout, join_all(sends)).await {
            Ok(results) => results.into_iter().filter_map(Result::err).collect(),
            Err(_) => vec![Failure::Unanswered; total],
        };
        for failure in &failures {
            // The reason only: never the channel, the conversation or the kind.
            tracing::warn!(event = "live_publish_failed", reason = failure.as_str());
        }
        if !failures.is_empty() {
            metrics::counter!("LivePublishFailures").increment(failures.len() as u64);
        }
        failures.len()
    }
}

impl Target {
    async fn send(&self, channel: String, event: String) -> Result<(), Failure> {
        if self.host.is_empty() || self.region.is_empty() {
            return Err(Failure::Unsigned);
        }
        let body = json!({"channel": channel, "events": [event]}).to_string();
        let headers = self.signed(&body).await?;
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|_| Failure::Unanswered)?;
        if !response.status().is_success() {
            return Err(Failure::Status);
        }
        let answer: serde_json::Value = response.json().await.map_err(|_| Failure::Failed)?;
        match answer.get("failed").and_then(serde_json::Value::as_array) {
            Some(failed) if !failed.is_empty() => Err(Failure::Failed),
            _ => Ok(()),
        }
    }

    /// The SigV4 headers of a publish of `body` (`authorization`,
    /// `x-amz-date`, and `x-amz-security-token` with a role's credentials).
    async fn signed(&self, body: &str) -> Result<Vec<(String, String)>, Failure> {
        let credentials = self
            .credentials
            .as_ref()
            .ok_or(Failure::Unsigned)?
            .provide_credentials()
            .await
            .map_err(|_| Failure::Unsigned)?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| Failure::Unsigned)?
            .into();
        let headers = [("host", self.host.as_str()), ("content-type", "application/json")];
        let signable = SignableRequest::new(
            "POST",
            &self.url,
            headers.into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|_| Failure::Unsigned)?;
        let (instructions, _) = sign(signable, &params).map_err(|_| Failure::Unsigned)?.into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect())
    }
}
