//! The sweep (contract 14): run by an EventBridge schedule every five
//! minutes, it moves the refund records that an invocation left `executing`
//! (it died between the record and the outcome) to `unknown`, so that the
//! ledger's stream raises `RefundOutcomeUnknown` and the alarm fires with
//! nobody polling: within the function's timeout plus five minutes.
//! It also measures how long the oldest item of the support team's queue
//! has waited (`StaffQueueOldestWait`, contract 24), and how many open
//! handoffs are past their due time with no reply (`HandoffsOverdue`,
//! contract 32). Wiring only; the move is [`DynamoLedger::sweep_executing`].

use std::sync::Arc;

use lambda_http::lambda_runtime::{Error, LambdaEvent, service_fn};
use refund_chat::clock::now_ms;
use refund_chat::config::SweepConfig;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    refund_chat::ops::logging::init();
    let config = SweepConfig::from_env().inspect_err(|error| {
        tracing::error!(event = "configuration_error", error = %error);
    })?;
    let http = refund_chat::http_client::money_path_client()?;
    let aws = refund_chat::startup::function_aws_config(&http).await;
    let client = refund_chat::ledger::dynamo::client_on(&aws, config.ledger_timeout, http);
    let conversations = config.conversation_table.as_ref().map(|table| {
        Arc::new(DynamoConversations::new(
            client.clone(),
            table,
            &config.ledger_table,
            // Only read: the open handoffs' index.
            refund_chat::conversation::Lifetime {
                ttl: std::time::Duration::ZERO,
                max_age: std::time::Duration::ZERO,
            },
        ))
    });
    let ledger = Arc::new(DynamoLedger::new(client, &config.ledger_table));
    let metrics = refund_chat::ops::telemetry::init_metrics()?;
    metrics_cloudwatch_embedded::lambda::service::run(
        metrics,
        service_fn(move |_: LambdaEvent<Value>| {
            let (ledger, after) = (Arc::clone(&ledger), config.executing_after);
            let conversations = conversations.clone();
            async move {
                let now = now_ms();
                let cutoff = now.saturating_sub(after.as_millis() as u64);
                let moved = ledger.sweep_executing(cutoff, now).await.inspect_err(|error| {
                    tracing::error!(event = "sweep", error = %error);
                })?;
                metrics::counter!("RefundsLeftExecuting").increment(moved.len() as u64);
                tracing::info!(event = "sweep", moved = moved.len(), record_ids = ?moved);
                // What waits for a person (contract 24), watched whether or not anyone has the desk open.
                let waited = refund_chat::staff::read::oldest_wait_secs(&ledger, conversations.as_deref(), now)
                    .await
                    .inspect_err(|error| tracing::error!(event = "staff_queue", error = %error))?;
                metrics::histogram!("StaffQueueOldestWait").record(waited as f64);
                let overdue = match conversations.as_deref() {
                    Some(conversations) => refund_chat::staff::read::overdue_handoffs(conversations, now)
                        .await
                        .inspect_err(|error| tracing::error!(event = "handoffs_overdue", error = %error))?,
                    None => 0,
                };
                metrics::histogram!("HandoffsOverdue").record(overdue as f64);
                Ok::<_, Error>(json!({
                    "moved": moved,
                    "staff_queue_oldest_wait_secs": waited,
                    "handoffs_overdue": overdue,
                }))
            }
        }),
    )
    .await
}
