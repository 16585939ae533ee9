//! Log output: one JSON object per line on stdout, the shape CloudWatch Logs
//! and Lambda's JSON log format parse, each carrying the Lambda request id
//! from the runtime's `Lambda runtime invoke` span.
//!
//! `async_openai` is silenced: on a provider error it logs response bodies,
//! which can quote the conversation.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Directives always applied after the level: third-party targets that may
/// log payloads.
pub const REDACTING_DIRECTIVES: &[&str] = &["async_openai=off", "hyper=warn", "aws_smithy_runtime=warn"];

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
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(true)
        .with_env_filter(filter(level))
        .with_writer(writer)
        .finish()
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
