//! The Lambda bootstrap: reads the configuration, wires the ports
//! ([`refund_chat::startup`]), runs.

use std::sync::Arc;

use http_body_util::BodyExt;
use lambda_http::{Body, Error, Request, Response, StreamAdapter, service_fn};
use refund_chat::config::{Config, ResponseMode};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = Config::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let mode = config.response_mode;
    let app = Arc::new(refund_chat::startup::build(config).await?);
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    // The runtime with its tracing layer (request id on every log line) and
    // the EMF layer (one metrics document per invocation, written once the
    // answer's body has been sent). Streaming: a JSON answer is returned
    // once the turn has ended, so the prelude (status and headers) is
    // written then and every status keeps its meaning; an event stream's
    // prelude is written at the agent's first completion call (contract 20).
    match mode {
        ResponseMode::Streaming => {
            let handler = service_fn(move |request: Request| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Error>(app.answer(request).await) }
            });
            metrics_cloudwatch_embedded::lambda::service::run(metrics, StreamAdapter::from(handler)).await
        }
        // Buffered: an event stream is sent whole, once it has ended.
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
