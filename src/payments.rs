//! The payments adapter: `POST {PAYMENTS_BASE_URL}/refunds`, one attempt.
//!
//! Every accepted call moves money and there is no idempotency key, so this
//! client never retries and never follows a redirect (which would re-send the
//! POST). The timeout covers the whole exchange, body included; every way the
//! call can go wrong becomes a typed [`RefundError`].

use std::time::Duration;

use serde::Deserialize;

use crate::refund::{Receipt, RefundError, RefundGateway, RefundRequest};

pub struct HttpPayments {
    http: reqwest::Client,
    refunds_url: String,
    timeout: Duration,
}

impl HttpPayments {
    /// `http` must come from [`crate::openai::http_client`] (or be built the same way).
    pub fn new(http: reqwest::Client, base_url: &str, timeout: Duration) -> Self {
        HttpPayments {
            http,
            refunds_url: format!("{}/refunds", base_url.trim_end_matches('/')),
            timeout,
        }
    }

    async fn exchange(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        let response = self
            .http
            .post(&self.refunds_url)
            .json(request)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            return serde_json::from_slice::<Receipt>(&body).map_err(|_| RefundError::InvalidResponse {
                status: status.as_u16(),
                expected: "a refund receipt",
            });
        }
        let rejection: Rejection = serde_json::from_slice(&body).map_err(|_| RefundError::InvalidResponse {
            status: status.as_u16(),
            expected: "a JSON {\"detail\"} object",
        })?;
        let detail = match rejection.detail {
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        };
        // The contract: any non-2xx carries a detail for the model. Only a 4xx
        // says the refund was refused; a 5xx may come after the money moved.
        let status = status.as_u16();
        if (500..600).contains(&status) {
            Err(RefundError::Failed { status, detail })
        } else {
            Err(RefundError::Rejected { status, detail })
        }
    }
}

#[derive(Deserialize)]
struct Rejection {
    detail: serde_json::Value,
}

fn transport(error: reqwest::Error) -> RefundError {
    if error.is_timeout() {
        RefundError::Timeout
    } else if error.is_connect() {
        RefundError::Transport("connect".to_owned())
    } else {
        RefundError::Transport("connection broke before the answer was complete".to_owned())
    }
}

impl RefundGateway for HttpPayments {
    async fn refund(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        tokio::time::timeout(self.timeout, self.exchange(request))
            .await
            .unwrap_or(Err(RefundError::Timeout))
    }
}
