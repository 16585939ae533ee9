//! The Lambda bootstrap: reads the configuration, wires the ports
//! ([`refund_chat::startup`]), runs.

use std::sync::Arc;

use lambda_http::{Error, Request, service_fn};
use refund_chat::config::Config;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = Config::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let app = Arc::new(refund_chat::startup::build(config).await?);
    let metrics = refund_chat::ops::telemetry::init_metrics()?;

    // The runtime with its tracing layer (request id on every log line) and
    // the EMF layer (one metrics document per invocation).
    metrics_cloudwatch_embedded::lambda::service::run_http(
        metrics,
        service_fn(move |request: Request| {
            let app = Arc::clone(&app);
            async move { Ok::<_, Error>(app.handle(request).await) }
        }),
    )
    .await
}
