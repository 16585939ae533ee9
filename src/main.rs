//! The Lambda bootstrap: reads the configuration, wires the ports
//! ([`refund_chat::startup`]), runs.

use std::sync::Arc;

use lambda_http::{Error, Request, StreamAdapter, service_fn};
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
    let handler = service_fn(move |request: Request| {
        let app = Arc::clone(&app);
        async move { Ok::<_, Error>(app.handle(request).await) }
    });

    // The runtime with its tracing layer (request id on every log line) and
    // the EMF layer (one metrics document per invocation). Streaming: the
    // handler returns once the turn has ended, so the prelude (status and
    // headers) is written then, and every status keeps its meaning.
    match mode {
        ResponseMode::Streaming => {
            metrics_cloudwatch_embedded::lambda::service::run(metrics, StreamAdapter::from(handler)).await
        }
        ResponseMode::Buffered => metrics_cloudwatch_embedded::lambda::service::run_http(metrics, handler).await,
    }
}
