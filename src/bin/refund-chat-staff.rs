//! `refund-chat-staff`: the support team's desk (contract 24), a function
//! of its own on the customers' REST API under `/support/staff/`, behind
//! the staff pool's authorizer. Reads the configuration, wires
//! [`refund_chat::staff::Staff`], runs.

use std::sync::Arc;

use http_body_util::BodyExt;
use lambda_http::{Body, Error, Request, Response, StreamAdapter, service_fn};
use refund_chat::config::{DeskConfig, ResponseMode, StaffIdentity};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = DeskConfig::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let app = Arc::new(refund_chat::staff::desk::build(config).await?);
    if app.config().identity == StaffIdentity::Header {
        tracing::warn!(
            event = "configuration",
            "STAFF_IDENTITY=header: the person is read from request headers; for local development only"
        );
    }
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    match app.config().response_mode {
        ResponseMode::Streaming => {
            let handler = service_fn(move |request: Request| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Error>(app.answer(request).await) }
            });
            metrics_cloudwatch_embedded::lambda::service::run(metrics, StreamAdapter::from(handler)).await
        }
        ResponseMode::Buffered => {
            let handler = service_fn(move |request: Request| {
                let app = Arc::clone(&app);
                async move {
                    let (parts, body) = app.answer(request).await.into_parts();
                    let bytes = body.collect().await.map(|whole| whole.to_bytes()).unwrap_or_default();
                    let body = match String::from_utf8(bytes.to_vec()) {
                        Ok(text) => Body::Text(text),
                        Err(_) => Body::Binary(bytes.to_vec()),
                    };
                    Ok::<_, Error>(Response::from_parts(parts, body))
                }
            });
            metrics_cloudwatch_embedded::lambda::service::run_http(metrics, handler).await
        }
    }
}
