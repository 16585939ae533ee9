//! What one request leaves behind for the people who run the function: one
//! summary log line and CloudWatch metrics (Embedded Metric Format).
//!
//! Everything is recorded here, at the end of the request, from the turn's
//! [`TurnStats`]: the domain stays free of metrics calls, and every figure in
//! the summary line matches the metrics of the same request. The `metrics`
//! macros are no-ops until [`init_metrics`] installs the EMF recorder.

use std::time::Duration;

use lambda_http::http::StatusCode;
use metrics_cloudwatch_embedded::Collector;

use crate::handoff::Reason;
use crate::refund::RefundOutcome;
use crate::router::Routing;
use crate::turn::TurnStats;

pub const METRICS_NAMESPACE: &str = "RefundChat";

/// OpenAI's list prices for the pinned `gpt-4o-mini-2024-07-18`, in US
/// dollars per million tokens (as published when the snapshot was pinned;
/// update them here if they change). The summary line's cost is an estimate.
pub const PRICE_PER_MILLION_INPUT_TOKENS_USD: f64 = 0.15;
pub const PRICE_PER_MILLION_OUTPUT_TOKENS_USD: f64 = 0.60;

pub fn estimated_cost_usd(prompt_tokens: u64, completion_tokens: u64) -> f64 {
    (prompt_tokens as f64 * PRICE_PER_MILLION_INPUT_TOKENS_USD
        + completion_tokens as f64 * PRICE_PER_MILLION_OUTPUT_TOKENS_USD)
        / 1_000_000.0
}

/// Every counter the function emits (and `TurnDuration`, a histogram): the
/// names `template.yaml`'s alarms and dashboard may use (`tests/template.rs`).
pub const COUNTERS: &[&str] = &[
    "Responses",
    // A live poke that did not reach the Event API (contract 31; `push::publish`).
    "LivePublishFailures",
    "CompletionCalls",
    "CompletionTimeouts",
    "SecondRefundsRefused",
    "RefundsExecuted",
    "RefundFailures",
    "RefundOutcomesUnknown",
    "RefundsAlreadyRecorded",
    "RefundsAwaitingApproval",
    "RefundsRefusedByOrder",
    // The order system's adapter: reads that failed both tries (contract 16).
    "OrderSystemUnavailable",
    "IdempotentReplays",
    "IdempotencyConflicts",
    "ConversationsBusy",
    "ConversationAppendFailures",
    "Handoffs",
    // Every handoff in one series, whatever its reason: what HandoffsAlarm watches.
    "HandoffsTotal",
    "BudgetRefusals",
    "Tokens",
    "LedgerFailures",
    "LedgerContended",
    "ColdStarts",
    // The widget's reads of a conversation (contract 18), by status class.
    "ConversationReads",
    // The sweep's (`refund-chat-sweep`): refunds an invocation left executing.
    "RefundsLeftExecuting",
    // The router (contract 21): routing calls, turns per intent (`unknown`
    // for a failed router), and the calls that failed.
    "RoutingCalls",
    "RoutedTurns",
    "RoutingFailures",
    // The desk (contract 24): decisions by kind and outcome.
    "StaffDecisions",
    // Contract 26: address writes by outcome (changed, shipped_meanwhile, unknown).
    "AddressChanges",
    "VisitorTokens",
    // The guests' shared day (contract 27), which GuestDayAlarm watches.
    "GuestTokens",
    // Contract 30: the customers' "Did this solve it?", and visitors' apart
    // (anyone can send those: they never move the customers' figure).
    "Ratings",
    "VisitorRatings",
];
/// `StaffQueueOldestWait`: the sweep's measure of the support team's queue, in seconds.
/// `FirstReplyMinutes`: a handoff begun within hours, to its first person's
/// words (the desk's); `HandoffsOverdue`: the sweep's count of open handoffs
/// past their due time, none answered (contract 32).
pub const HISTOGRAMS: &[&str] = &[
    "TurnDuration",
    "StaffQueueOldestWait",
    "FirstReplyMinutes",
    "HandoffsOverdue",
];

/// Installs the EMF recorder: one document per invocation, flushed to stdout
/// by the runtime layer in `main`, carrying the request id as a property.
pub fn init_metrics() -> Result<&'static Collector, metrics_cloudwatch_embedded::Error> {
    let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| env!("CARGO_PKG_NAME").to_owned());
    let collector = metrics_cloudwatch_embedded::Builder::new()
        .cloudwatch_namespace(METRICS_NAMESPACE)
        .with_dimension("FunctionName", function)
        .with_lambda_request_id("requestId")
        .with_lambda_xray_trace_id("xrayTraceId")
        .init()?;
    metrics::describe_histogram!("TurnDuration", metrics::Unit::Milliseconds, "duration of one request");
    metrics::describe_histogram!(
        "StaffQueueOldestWait",
        metrics::Unit::Seconds,
        "the queue's oldest wait"
    );
    metrics::describe_histogram!(
        "FirstReplyMinutes",
        metrics::Unit::Count,
        "minutes from a handoff begun within hours to its first reply"
    );
    metrics::describe_histogram!(
        "HandoffsOverdue",
        metrics::Unit::Count,
        "open handoffs past their due time"
    );
    for counter in COUNTERS {
        metrics::describe_counter!(*counter, metrics::Unit::Count, "");
    }
    Ok(collector)
}

/// What a request did with its `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyUse {
    /// No key (or the request ended before it was looked at).
    #[default]
    None,
    /// The first request with the key.
    New,
    /// A retry that took over a key whose first request died.
    TakenOver,
    /// Answered with the stored answer.
    Replayed,
    /// 409, 422 or 503.
    Refused,
}

impl KeyUse {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyUse::None => "none",
            KeyUse::New => "new",
            KeyUse::TakenOver => "taken_over",
            KeyUse::Replayed => "replayed",
            KeyUse::Refused => "refused",
        }
    }
}

/// What a request did with its conversation (contract 11), for the summary
/// line: never its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationUse {
    /// Known once the request passed its checks.
    pub id: Option<String>,
    /// Earlier exchanges sent to the model.
    pub history_exchanges: usize,
    /// Refused because its previous turn still runs.
    pub busy: bool,
    /// `appended`, `already_there` or `failed`, once the turn ended.
    pub appended: Option<&'static str>,
    /// A person has it: the message got the fixed reply.
    pub with_a_person: bool,
}

/// What the request's end looked like, for [`finish_request`].
pub struct RequestEnd<'a> {
    pub status: StatusCode,
    pub error: Option<&'a dyn std::fmt::Display>,
    /// Known once the body passed validation.
    pub user_id: Option<&'a str>,
    pub stats: Option<&'a TurnStats>,
    pub key_use: KeyUse,
    /// `stored` or `released` once a keyed request's answer was settled.
    pub key_settled: Option<&'static str>,
    pub conversation: &'a ConversationUse,
    /// The handoff the request made.
    pub handoff: Option<Reason>,
    /// What the budget said: `taken`, `turns`, `tokens` or `unavailable`.
    pub budget: Option<&'static str>,
    /// The routing call's labels (contract 21), when one was made.
    pub routing: Option<&'a Routing>,
    pub cold_start: bool,
    pub duration: Duration,
}

/// What a read of a conversation (contract 18) did, for its summary line.
pub struct ReadEnd<'a> {
    pub status: StatusCode,
    pub error: Option<&'a dyn std::fmt::Display>,
    pub user_id: Option<&'a str>,
    pub conversation_id: &'a str,
    /// Messages returned.
    pub messages: usize,
    pub cold_start: bool,
    pub duration: Duration,
}

/// Logs a read's summary line and records its metrics. Its own event: a
/// poll every few seconds from each waiting chat must not blur the turns'
/// figures (`TurnDuration`, tokens), but its errors count in `Responses`,
/// which the alarms watch.
pub fn finish_read(end: ReadEnd<'_>) {
    tracing::info!(
        event = "read_summary",
        status = end.status.as_u16(),
        user_id = end.user_id.unwrap_or_default(),
        conversation_id = end.conversation_id,
        messages = end.messages,
        duration_ms = end.duration.as_secs_f64() * 1000.0,
        cold_start = end.cold_start,
        error = %end.error.map(|e| e.to_string()).unwrap_or_default(),
    );
    let status_class = status_class(end.status);
    metrics::counter!("Responses", "StatusClass" => status_class).increment(1);
    metrics::counter!("ConversationReads", "StatusClass" => status_class).increment(1);
    if end.cold_start {
        metrics::counter!("ColdStarts").increment(1);
    }
}

fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=299 => "2xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Logs the summary line and records the request's metrics.
pub fn finish_request(end: RequestEnd<'_>) {
    let stats = end.stats.cloned().unwrap_or_default();
    let refund = stats.refund.as_ref();
    let (refund_id, refund_amount_cents, refund_failure) = match refund {
        Some(RefundOutcome::Executed(receipt)) => (receipt.refund_id.as_str(), receipt.amount_cents.cents(), ""),
        Some(RefundOutcome::Unknown(error)) => ("", 0, error.class()),
        Some(RefundOutcome::Rejected { .. }) => ("", 0, "rejected"),
        Some(RefundOutcome::OrderRefused(refusal)) => ("", 0, refusal.as_str()),
        _ => ("", 0, ""),
    };
    let refund_outcome = refund.map_or("not_attempted", RefundOutcome::name);
    let total_tokens = stats.prompt_tokens + stats.completion_tokens;
    // The router's labels (contract 21): `unknown` when it failed, empty when none ran.
    let (intents, risk, router_confidence) = match end.routing {
        Some(Routing::Labelled(labels)) => (
            labels.intents.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(","),
            labels.risk.as_str(),
            labels.confidence,
        ),
        Some(Routing::Failed(_)) => ("unknown".to_owned(), "unknown", 0.0),
        None => (String::new(), "", 0.0),
    };
    tracing::info!(
        event = "summary",
        status = end.status.as_u16(),
        user_id = end.user_id.unwrap_or_default(),
        completion_calls = stats.completion_calls,
        attempts = stats.attempts,
        timeouts = stats.timeouts,
        refund_outcome,
        refund_id,
        refund_amount_cents,
        refund_failure,
        receipt_status = match refund {
            Some(RefundOutcome::Executed(receipt)) => receipt.status.as_str(),
            _ => "",
        },
        idempotency = end.key_use.as_str(),
        idempotency_settled = end.key_settled.unwrap_or_default(),
        conversation_id = end.conversation.id.as_deref().unwrap_or_default(),
        history_exchanges = end.conversation.history_exchanges,
        conversation_appended = end.conversation.appended.unwrap_or_default(),
        handoff = end.handoff.map(Reason::as_str).unwrap_or_default(),
        budget = end.budget.unwrap_or_default(),
        intents,
        risk,
        router_confidence,
        with_a_person = end.conversation.with_a_person,
        replayed = end.key_use == KeyUse::Replayed,
        second_refunds_refused = stats.second_refunds_refused,
        invalid_tool_calls = stats.invalid_tool_calls,
        order_reads = stats.order_reads,
        refund_checks = stats.refund_checks,
        // Changes of address (contract 26): outcomes only, never an address.
        address_changes = %stats.addresses.iter().map(|record| record.outcome).collect::<Vec<_>>().join(" "),
        // Returns (contract 28): outcomes only, never a label.
        returns = %stats.returns.iter().map(|record| record.outcome.as_str()).collect::<Vec<_>>().join(" "),
        // Which rule was live: ids and versions, never passages (contract 17).
        articles = %stats.articles.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
        prompt_tokens = stats.prompt_tokens,
        completion_tokens = stats.completion_tokens,
        total_tokens,
        estimated_cost_usd = estimated_cost_usd(stats.prompt_tokens, stats.completion_tokens),
        duration_ms = end.duration.as_secs_f64() * 1000.0,
        cold_start = end.cold_start,
        error = %end.error.map(|e| e.to_string()).unwrap_or_default(),
    );

    metrics::counter!("Responses", "StatusClass" => status_class(end.status)).increment(1);
    metrics::counter!("CompletionCalls").increment(u64::from(stats.completion_calls));
    metrics::counter!("CompletionTimeouts").increment(u64::from(stats.timeouts));
    metrics::counter!("SecondRefundsRefused").increment(u64::from(stats.second_refunds_refused));
    match refund {
        Some(RefundOutcome::Executed(_)) => metrics::counter!("RefundsExecuted").increment(1),
        Some(RefundOutcome::Unknown(_)) => {
            // Money may have moved: a person must check it with payments.
            metrics::counter!("RefundFailures").increment(1);
            metrics::counter!("RefundOutcomesUnknown").increment(1);
        }
        Some(RefundOutcome::Rejected { .. } | RefundOutcome::Unrecorded) => {
            metrics::counter!("RefundFailures").increment(1)
        }
        Some(RefundOutcome::AlreadyRecorded(_)) => metrics::counter!("RefundsAlreadyRecorded").increment(1),
        Some(RefundOutcome::PendingApproval { .. }) => metrics::counter!("RefundsAwaitingApproval").increment(1),
        // The order refused it (contract 16): no record, nothing near payments.
        Some(RefundOutcome::OrderRefused(_)) => metrics::counter!("RefundsRefusedByOrder").increment(1),
        None => {}
    }
    if end.key_use == KeyUse::Replayed {
        metrics::counter!("IdempotentReplays").increment(1);
    }
    if end.status == StatusCode::CONFLICT && end.key_use == KeyUse::Refused {
        metrics::counter!("IdempotencyConflicts").increment(1);
    }
    if end.conversation.busy {
        metrics::counter!("ConversationsBusy").increment(1);
    }
    if let Some(spent @ ("turns" | "tokens")) = end.budget {
        metrics::counter!("BudgetRefusals", "Budget" => spent).increment(1);
    }
    metrics::counter!("Tokens").increment(total_tokens);
    // The visitors' shared day (contract 27), which VisitorDayAlarm watches.
    if end.user_id.is_some_and(crate::visitor::is_visitor) {
        metrics::counter!("VisitorTokens").increment(total_tokens);
    }
    // The guests' (GuestDayAlarm).
    if end.user_id.is_some_and(crate::guest::is_guest) {
        metrics::counter!("GuestTokens").increment(total_tokens);
    }
    if let Some(reason) = end.handoff {
        metrics::counter!("Handoffs", "Reason" => reason.as_str()).increment(1);
        metrics::counter!("HandoffsTotal").increment(1);
    }
    match end.routing {
        None => {}
        Some(Routing::Labelled(labels)) => {
            metrics::counter!("RoutingCalls").increment(1);
            for intent in &labels.intents {
                metrics::counter!("RoutedTurns", "Intent" => intent.as_str()).increment(1);
            }
        }
        Some(Routing::Failed(_)) => {
            metrics::counter!("RoutingCalls").increment(1);
            metrics::counter!("RoutedTurns", "Intent" => "unknown").increment(1);
            metrics::counter!("RoutingFailures").increment(1);
        }
    }
    if end.conversation.appended == Some("failed") {
        metrics::counter!("ConversationAppendFailures").increment(1);
    }
    if end.cold_start {
        metrics::counter!("ColdStarts").increment(1);
    }
    metrics::histogram!("TurnDuration").record(end.duration.as_secs_f64() * 1000.0);
}
