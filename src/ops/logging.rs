//! Log output: one JSON object per line on stdout, with the keys CloudWatch
//! Logs and Lambda's JSON log format use (`timestamp`, `level`, `message`,
//! `requestId`). `requestId` (and `xrayTraceId`) are lifted from the runtime's
//! `Lambda runtime invoke` span onto every line of an invocation, so one
//! filter finds a whole turn.
//!
//! Third-party targets that may log payloads are clamped whatever the level:
//! async-openai logs provider response bodies on errors, and HTTP stacks log
//! requests at debug/trace. A customer's message or the API key must never
//! reach a log line.

use json_subscriber::JsonLayer;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::time::SystemTime;
use tracing_subscriber::layer::SubscriberExt;

/// Applied after the level, so even `RUST_LOG=trace` cannot lift them.
/// Targets match by prefix: `aws` covers every AWS SDK crate (signing,
/// orchestration, DynamoDB, Secrets Manager), whose trace lines carry
/// requests, and ledger items can hold a customer's message.
pub const REDACTING_DIRECTIVES: &[&str] = &[
    "async_openai=off",
    "reqwest=warn",
    "hyper=warn",
    "h2=warn",
    "rustls=warn",
    "aws=warn",
];

/// The level comes from `AWS_LAMBDA_LOG_LEVEL` (Lambda's logging controls),
/// then `RUST_LOG`, then INFO.
pub fn init() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_owned());
    let _ = tracing::subscriber::set_global_default(subscriber(&level, std::io::stdout));
}

/// The subscriber, writing to `writer`: tests capture real turns' logs with it.
pub fn subscriber<W>(level: &str, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let mut layer = JsonLayer::new(writer);
    layer
        .with_timer("timestamp", SystemTime)
        .with_level("level")
        .with_target("target")
        .with_flattened_event()
        .with_top_level_flattened_current_span();
    tracing_subscriber::registry().with(filter(level)).with(layer)
}

fn filter(level: &str) -> EnvFilter {
    let mut filter = EnvFilter::builder().parse_lossy(level.to_lowercase());
    for directive in REDACTING_DIRECTIVES {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}
