//! The Lambda bootstrap: reads the configuration, wires the ports
//! ([`refund_chat::startup`]), runs.

use std::sync::Arc;

use lambda_http::{Error, Request};
use refund_chat::config::Config;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = Config::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let streaming = config.response_mode == refund_chat::config::ResponseMode::Streaming;
    let app = Arc::new(refund_chat::startup::build(config).await?);
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    // The runtime with its tracing layer (request id on every log line) and
    // the EMF layer (one metrics document per invocation, written once the
    // answer's body has been sent). Streaming: a JSON answer is returned
    // once the turn has ended, so the prelude (status and headers) is
    // written then and every status keeps its meaning; an event stream's
    // prelude is written at the agent's first completion call (contract 20).
    refund_chat::ops::runtime::serve(streaming, metrics, move |request: Request| {
        let app = Arc::clone(&app);
        async move { app.answer(request).await }
    })
    .await
}
