//! The sweep (contract 14): run by an EventBridge schedule every five
//! minutes, it moves the refund records that an invocation left `executing`
//! (it died between the record and the outcome) to `unknown`, so that the
//! ledger's stream raises `RefundOutcomeUnknown` and the alarm fires with
//! nobody polling: within the function's timeout plus five minutes.
//! Wiring only; the move is [`DynamoLedger::sweep_executing`].

use std::sync::Arc;

use lambda_http::lambda_runtime::{Error, LambdaEvent, service_fn};
use refund_chat::clock::now_ms;
use refund_chat::config::SweepConfig;
use refund_chat::ledger::dynamo::DynamoLedger;
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = SweepConfig::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let http = refund_chat::http_client::money_path_client()?;
    let aws = refund_chat::startup::function_aws_config(&http).await;
    let ledger = Arc::new(DynamoLedger::new(
        refund_chat::ledger::dynamo::client_on(&aws, config.ledger_timeout, http),
        &config.ledger_table,
    ));
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    metrics_cloudwatch_embedded::lambda::service::run(
        metrics,
        service_fn(move |_: LambdaEvent<Value>| {
            let (ledger, after) = (Arc::clone(&ledger), config.executing_after);
            async move {
                let now = now_ms();
                let cutoff = now.saturating_sub(after.as_millis() as u64);
                let moved = ledger.sweep_executing(cutoff, now).await.inspect_err(|error| {
                    tracing::error!(event = "sweep", error = %error);
                })?;
                metrics::counter!("RefundsLeftExecuting").increment(moved.len() as u64);
                tracing::info!(event = "sweep", moved = moved.len(), record_ids = ?moved);
                Ok::<_, Error>(json!({ "moved": moved }))
            }
        }),
    )
    .await
}
