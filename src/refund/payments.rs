//! The payments adapter: `POST {PAYMENTS_BASE_URL}/refunds`, one attempt.
//!
//! Every accepted call moves money and there is no idempotency key, so this
//! client never retries and never follows a redirect (which would re-send the
//! POST). The timeout covers the whole exchange, body included; every way the
//! call can go wrong becomes a typed [`RefundError`], and only a 4xx is
//! taken as proof that no money moved.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::refund::money::AmountCents;
use crate::refund::{PaymentOutcome, Payments, Receipt, RefundError, RefundRequest};

pub struct HttpPayments {
    http: reqwest::Client,
    refunds_url: String,
    timeout: Duration,
}

/// The body the payments service takes: `user_id` is the refund scope's,
/// which is the verified customer's.
#[derive(Serialize)]
struct RefundBody<'a> {
    order_id: &'a str,
    amount_cents: AmountCents,
    user_id: &'a str,
}

#[derive(Deserialize)]
struct Rejection {
    detail: serde_json::Value,
}

impl HttpPayments {
    /// `http` comes from [`crate::http_client::money_path_client`].
    pub fn new(http: reqwest::Client, base_url: &str, timeout: Duration) -> Self {
        HttpPayments {
            http,
            refunds_url: format!("{}/refunds", base_url.trim_end_matches('/')),
            timeout,
        }
    }

    /// One payments call, bounded by the timeout.
    pub async fn call(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        tokio::time::timeout(self.timeout, self.exchange(request))
            .await
            .unwrap_or(Err(RefundError::Timeout))
    }

    async fn exchange(&self, request: &RefundRequest) -> Result<Receipt, RefundError> {
        let body = RefundBody {
            order_id: &request.order_id,
            amount_cents: request.amount,
            user_id: request.scope().user_id(),
        };
        let response = self
            .http
            .post(&self.refunds_url)
            .json(&body)
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
        // Only a 4xx says the refund was refused. A 5xx may come after the
        // money moved, and a 1xx or 3xx is no answer the contract knows.
        let status = status.as_u16();
        if proves_no_money_moved(status) {
            Err(RefundError::Rejected { status, detail })
        } else {
            Err(RefundError::Failed { status, detail })
        }
    }
}

/// Whether a payments status proves that no money moved (contract 3): a 4xx only.
pub fn proves_no_money_moved(status: u16) -> bool {
    (400..500).contains(&status)
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

impl Payments for HttpPayments {
    async fn pay(&self, request: &RefundRequest) -> PaymentOutcome {
        self.call(request).await.into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::{body_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::refund::{Attempt, RefundScope, WriterMark};

    const TIMEOUT: Duration = Duration::from_millis(300);

    fn request() -> RefundRequest {
        RefundRequest {
            routed: Default::default(),
            attempt: Attempt {
                scope: RefundScope::for_request("u-1001", "req-1"),
                writer: WriterMark::fixed("req-1/w"),
                conversation: None,
                day_owner: None,
            },
            order_id: "A-1001".into(),
            amount: AmountCents::new(1250),
            message: crate::refund::message::CustomerMessage::new("refund A-1001"),
            order: crate::refund::policy::OrderFacts::Unverified,
        }
    }

    async fn payments_answering(response: ResponseTemplate) -> (MockServer, HttpPayments) {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/refunds"))
            .and(body_json(
                json!({"order_id": "A-1001", "amount_cents": 1250, "user_id": "u-1001"}),
            ))
            .respond_with(response)
            .expect(1)
            .mount(&server)
            .await;
        let http = crate::http_client::money_path_client().unwrap();
        let payments = HttpPayments::new(http, &format!("{}/", server.uri()), TIMEOUT);
        (server, payments)
    }

    #[tokio::test]
    async fn a_receipt_is_executed_and_extra_fields_are_dropped() {
        let receipt = json!({"refund_id": "rf_1", "status": "succeeded", "amount_cents": 1250, "currency": "eur"});
        let (_server, payments) = payments_answering(ResponseTemplate::new(201).set_body_json(receipt)).await;

        assert_eq!(
            payments.pay(&request()).await,
            PaymentOutcome::Executed(Receipt {
                refund_id: "rf_1".into(),
                status: "succeeded".into(),
                amount_cents: AmountCents::new(1250),
            })
        );
    }

    #[tokio::test]
    async fn only_a_4xx_with_a_detail_is_a_rejection() {
        let detail = json!({"detail": "order A-1001 has only 3.00 left to refund"});
        let (_server, payments) = payments_answering(ResponseTemplate::new(409).set_body_json(detail)).await;
        assert_eq!(
            payments.pay(&request()).await,
            PaymentOutcome::Rejected {
                status: 409,
                detail: "order A-1001 has only 3.00 left to refund".into()
            }
        );
    }

    #[tokio::test]
    async fn everything_else_is_unknown() {
        let cases = [
            (
                ResponseTemplate::new(500).set_body_json(json!({"detail": "ledger write failed"})),
                RefundError::Failed {
                    status: 500,
                    detail: "ledger write failed".into(),
                },
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({"ok": true})),
                RefundError::InvalidResponse {
                    status: 200,
                    expected: "a refund receipt",
                },
            ),
            (
                ResponseTemplate::new(200)
                    .set_body_json(json!({"refund_id": "rf_1", "status": "succeeded", "amount_cents": -5})),
                RefundError::InvalidResponse {
                    status: 200,
                    expected: "a refund receipt",
                },
            ),
            (
                ResponseTemplate::new(502).set_body_string("<html>bad gateway</html>"),
                RefundError::InvalidResponse {
                    status: 502,
                    expected: "a JSON {\"detail\"} object",
                },
            ),
        ];
        for (response, expected) in cases {
            let (_server, payments) = payments_answering(response).await;
            assert_eq!(payments.pay(&request()).await, PaymentOutcome::Unknown(expected));
        }
    }

    #[tokio::test]
    async fn a_redirect_with_a_detail_is_unknown_and_never_followed() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/refunds"))
            .respond_with(
                ResponseTemplate::new(302)
                    .insert_header("location", format!("{}/elsewhere", server.uri()))
                    .set_body_json(json!({"detail": "moved"})),
            )
            .expect(1)
            .mount(&server)
            .await;
        let http = crate::http_client::money_path_client().unwrap();
        let payments = HttpPayments::new(http, &server.uri(), TIMEOUT);

        let outcome = payments.pay(&request()).await;

        assert_eq!(
            outcome,
            PaymentOutcome::Unknown(RefundError::Failed {
                status: 302,
                detail: "moved".into()
            })
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 1, "not followed");
    }

    /// A server that answers every connection with `raw` bytes, then closes it.
    async fn answering_raw(raw: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buffer = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buffer).await;
                let _ = tokio::io::AsyncWriteExt::write_all(&mut socket, raw.as_bytes()).await;
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn a_1xx_class_answer_is_unknown_never_a_rejection() {
        let base = answering_raw(
            "HTTP/1.1 199 Odd\r\ncontent-type: application/json\r\ncontent-length: 18\r\n\r\n{\"detail\":\"odd!\"}",
        )
        .await;
        let http = crate::http_client::money_path_client().unwrap();
        let payments = HttpPayments::new(http, &base, TIMEOUT);

        let outcome = payments.pay(&request()).await;

        assert!(matches!(outcome, PaymentOutcome::Unknown(_)), "{outcome:?}");
    }

    #[test]
    fn only_a_4xx_proves_that_no_money_moved() {
        for status in [100u16, 199, 300, 302, 399, 500, 599] {
            assert!(!proves_no_money_moved(status), "{status}");
        }
        for status in [400u16, 404, 409, 422, 499] {
            assert!(proves_no_money_moved(status), "{status}");
        }
    }

    #[tokio::test]
    async fn a_dropped_connection_is_unknown_and_not_retried() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buffer = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buffer).await;
            }
        });
        let http = crate::http_client::money_path_client().unwrap();
        let payments = HttpPayments::new(http, &format!("http://{address}"), TIMEOUT);

        let outcome = payments.pay(&request()).await;

        assert!(
            matches!(outcome, PaymentOutcome::Unknown(RefundError::Transport(_))),
            "{outcome:?}"
        );
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "one connection, no retry"
        );
    }

    #[tokio::test]
    async fn a_slow_server_trips_the_timeout() {
        let (_server, payments) =
            payments_answering(ResponseTemplate::new(201).set_delay(Duration::from_secs(5))).await;
        let started = std::time::Instant::now();

        assert_eq!(
            payments.pay(&request()).await,
            PaymentOutcome::Unknown(RefundError::Timeout)
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }
}
