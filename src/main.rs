//! The Lambda bootstrap: reads the configuration, wires the adapters, runs.

use std::sync::Arc;

use aws_config::timeout::TimeoutConfig;
use lambda_http::{Error, Request, service_fn};
use refund_chat::api::App;
use refund_chat::config::Config;
use refund_chat::secrets::{SECRET_READ_TIMEOUT, SecretsManagerKey};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::logging::init();
    let config = Config::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let aws = aws_config::from_env()
        .timeout_config(TimeoutConfig::builder().operation_timeout(SECRET_READ_TIMEOUT).build())
        .load()
        .await;
    let secrets = SecretsManagerKey::new(
        aws_sdk_secretsmanager::Client::new(&aws),
        config.openai_key_secret_id.clone(),
    );
    let app = Arc::new(App::new(config, secrets)?);
    let metrics = refund_chat::telemetry::init_metrics()?;

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
