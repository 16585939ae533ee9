//! `refund-chat-staff`: the support team's desk (contract 24), a function
//! of its own on the customers' REST API under `/support/staff/`, behind
//! the staff pool's authorizer. Reads the configuration, wires
//! [`refund_chat::staff::Staff`], runs.

use std::sync::Arc;

use lambda_http::{Error, Request};
use refund_chat::config::{DeskConfig, StaffIdentity};
use refund_chat::staff::Staff;
use refund_chat::staff::http::StaffApp;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = DeskConfig::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let app = Arc::new(build(config).await?);
    if app.config().identity == StaffIdentity::Header {
        tracing::warn!(
            event = "configuration",
            "STAFF_IDENTITY=header: the person is read from request headers; for local development only"
        );
    }
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    let streaming = app.config().response_mode == refund_chat::config::ResponseMode::Streaming;
    refund_chat::ops::runtime::serve(streaming, metrics, move |request: Request| {
        let app = Arc::clone(&app);
        async move { app.answer(request).await }
    })
    .await
}

/// The desk as deployed: the function's own HTTP client (the SDK's calls
/// too), its AWS configuration from the environment, the help centre's
/// origins for the page's links.
async fn build(config: DeskConfig) -> Result<StaffApp, Error> {
    let http = refund_chat::http_client::money_path_client()?;
    let aws = refund_chat::startup::function_aws_config(&http).await;
    let placeholders = refund_chat::help::Placeholders::of_limits(&config.staff.limits);
    let dir = std::env::var("HELP_ARTICLES_DIR").ok().filter(|d| !d.trim().is_empty());
    let origins = refund_chat::help::link_origins(dir.as_deref().map(std::path::Path::new), &placeholders)?;
    let staff = Staff::new(&config.staff, &aws, http);
    Ok(StaffApp::new(config, staff, origins))
}
