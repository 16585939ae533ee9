//! `make bench`: what a refund turn costs besides the model.
//!
//! Drives the release bootstrap (in the streaming response mode, and its cold
//! start and refund turn in the buffered mode beside) through a Lambda Runtime API emulator, against
//! zero-latency stand-ins for OpenAI, payments, Secrets Manager and DynamoDB
//! on 127.0.0.1, and prints one table: cold start, a refund turn without an
//! `Idempotency-Key`, one with (which adds the ledger's request record), and
//! one with in a conversation of 20 earlier exchanges (which adds reading
//! the window); DynamoDB operations per turn; the prompt's size at 1, 10
//! and 50 earlier exchanges; the latency the routing call adds to a turn.
//! The emulator's own floor is measured with a no-op runtime (the
//! `noop-runtime` binary of this package) and subtracted, as is the
//! stand-ins' own handler time. Figures are printed, never asserted.
//!
//! usage: refund-chat-bench BOOTSTRAP [--cold N] [--warm N]

mod measure;
mod procfs;
mod report;
mod stand_ins;

use std::path::PathBuf;
use std::time::Duration;

use axum::body::Bytes;
use measure::{StandIns, Warm};
use report::{Row, Target, Unit, percentile};

const EVENT: &str = include_str!("../../events/refund.json");
const KEYED_EVENT: &str = include_str!("../../events/keyed-refund.json");
const READ_EVENT: &str = include_str!("../../events/read-after-malformed.json");
const MIB: f64 = 1024.0 * 1024.0;

pub type Error = Box<dyn std::error::Error>;

/// `make bench`: the release bootstrap through a Runtime API emulator.
#[derive(clap::Parser)]
#[command(name = "refund-chat-bench")]
struct Cli {
    /// The release bootstrap to measure.
    bootstrap: PathBuf,
    /// Cold starts to measure.
    #[arg(long, default_value_t = 21)]
    cold: usize,
    /// Warm turns to measure.
    #[arg(long, default_value_t = 2000)]
    warm: usize,
}

// One thread, like the function: on 2 cores, a multi-threaded bench would
// compete with the process it measures.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let Cli {
        bootstrap,
        cold: cold_runs,
        warm: warm_turns,
    } = <Cli as clap::Parser>::parse();

    let stand_ins = StandIns::start().await?;
    let event = Bytes::from_static(EVENT.as_bytes());
    let floor = percentile(&measure::floor(&event, warm_turns).await?, 0.5);
    let cold = measure::cold_starts(&bootstrap, &stand_ins, &event, cold_runs).await?;
    let unkeyed = measure::warm(&bootstrap, &stand_ins, vec![event.clone(); warm_turns + 1]).await?;
    let keyed = measure::warm(&bootstrap, &stand_ins, keyed_events(warm_turns + 1, None)?).await?;
    let in_conversation = measure::warm(&bootstrap, &stand_ins, keyed_events(warm_turns + 1, Some(20))?).await?;
    // The chat's poll (contract 18), after one turn: no budget, no model, one Query.
    let reads = measure::warm(
        &bootstrap,
        &stand_ins,
        std::iter::once(event.clone())
            .chain(std::iter::repeat_n(read_event()?, warm_turns))
            .collect(),
    )
    .await?;
    // Event-stream mode (contract 20): the refund turn with `Accept: text/event-stream`.
    let event_stream = measure::warm(&bootstrap, &stand_ins, vec![event_stream_event()?; warm_turns + 1]).await?;
    // The same turn and cold start in the buffered mode, beside the streamed ones above.
    stand_ins.answer_in("buffered");
    let cold_buffered = measure::cold_starts(&bootstrap, &stand_ins, &event, cold_runs).await?;
    let unkeyed_buffered = measure::warm(&bootstrap, &stand_ins, vec![event.clone(); warm_turns + 1]).await?;
    stand_ins.answer_in("streaming");
    let mut prompts = Vec::new();
    for earlier in PROMPT_SIZES_AT {
        measure::warm(&bootstrap, &stand_ins, keyed_events(2, Some(earlier))?).await?;
        prompts.push((earlier, stand_ins.openai.1.prompt_bytes()));
    }
    let (raw, zipped) = measure::sizes(&bootstrap)?;

    let mut rows = vec![
        Row::millis(
            format!("cold start to first answer, median of {cold_runs}"),
            percentile(&cold, 0.5),
        )
        .target(Target::Below(8.0)),
        Row::millis(
            format!("cold start to first answer, buffered mode, median of {cold_runs}"),
            percentile(&cold_buffered, 0.5),
        ),
        Row::millis("runtime emulator floor p50 (no-op runtime)", floor),
    ];
    rows.extend(warm_rows("refund turn", &unkeyed, floor, None, Some(0.8)));
    rows.extend(warm_rows(
        "refund turn, buffered mode",
        &unkeyed_buffered,
        floor,
        None,
        None,
    ));
    rows.extend(warm_rows(
        "refund turn, event-stream mode",
        &event_stream,
        floor,
        None,
        None,
    ));
    rows.push(
        Row::millis(
            format!(
                "event-stream mode: first word, model's chunk to the client's delta p50 ({} turns)",
                event_stream.first_word_added.len()
            ),
            percentile(&event_stream.first_word_added, 0.5),
        )
        .target(Target::Below(5.0)),
    );
    rows.push(
        Row::millis(
            "event-stream mode: first word, model's chunk to the client's delta p99",
            percentile(&event_stream.first_word_added, 0.99),
        )
        .target(Target::Below(5.0)),
    );
    rows.push(Row::millis(
        "event-stream mode: request to the first delta p50",
        percentile(&event_stream.first_word, 0.5),
    ));
    rows.push(Row::millis(
        "event-stream mode: request to the first delta p99",
        percentile(&event_stream.first_word, 0.99),
    ));
    // The router (contract 21): its call's request reaching the model to the
    // agent's first call reaching it, the model answering at once: the
    // function's part of what routing adds (a real model adds its own time
    // for a short prompt and at most 150 tokens).
    rows.push(Row::millis(
        format!(
            "refund turn: the routing call's added latency, the model's own time aside p50 ({} turns)",
            unkeyed.routing_added.len()
        ),
        percentile(&unkeyed.routing_added, 0.5),
    ));
    rows.push(Row::millis(
        "refund turn: the routing call's added latency, the model's own time aside p99",
        percentile(&unkeyed.routing_added, 0.99),
    ));
    rows.extend(warm_rows("keyed refund turn", &keyed, floor, Some(1.0), None));
    rows.extend(warm_rows(
        "keyed refund turn, 20 earlier exchanges",
        &in_conversation,
        floor,
        None,
        Some(1.0),
    ));
    rows.extend(warm_rows(
        "conversation read (an unknown id: the one Query, a 404)",
        &reads,
        floor,
        None,
        None,
    ));
    // Budgets have no off switch (contract 13): every turn above takes one.
    rows.push(Row::new(
        "keyed refund turn with budgets",
        0.0,
        Unit::Text("the keyed turn above: its turn rides in the claim, its tokens in the append".into()),
    ));
    for (name, warm) in [
        ("refund turn", &unkeyed),
        ("keyed refund turn", &keyed),
        ("keyed refund turn, 20 earlier exchanges", &in_conversation),
        ("conversation read", &reads),
    ] {
        rows.push(Row::new(
            format!("{name}: DynamoDB operations per turn"),
            warm.dynamodb_requests as f64 / (warm.latency.len() + 1) as f64,
            Unit::Count,
        ));
    }
    for (earlier, bytes) in &prompts {
        rows.push(Row::new(
            format!("prompt sent to the model, {earlier} earlier exchange(s)"),
            0.0,
            Unit::Text(format!("{bytes} bytes")),
        ));
    }
    rows.push(
        Row::new(
            format!(
                "TCP connections to DynamoDB, keyed ({} requests)",
                keyed.dynamodb_requests
            ),
            keyed.dynamodb_connections as f64,
            Unit::Count,
        )
        .target(Target::Exactly(1.0)),
    );
    rows.push(Row::new("bootstrap size", raw as f64 / MIB, Unit::Mebibytes));
    rows.push(
        Row::new("bootstrap size, zipped", zipped as f64 / MIB, Unit::Mebibytes).target(Target::Below(8e6 / MIB)),
    );
    report::print(&rows);
    Ok(())
}

/// Earlier exchanges at which the prompt's size is reported: one, a full
/// window (`CONVERSATION_MAX_EXCHANGES`, 10), and far beyond it.
const PROMPT_SIZES_AT: [u64; 3] = [1, 10, 50];

/// The refund event, asking for an event stream.
fn event_stream_event() -> Result<Bytes, Error> {
    let mut event: serde_json::Value = serde_json::from_str(EVENT)?;
    event["headers"]["Accept"] = "text/event-stream".into();
    event["multiValueHeaders"]["Accept"] = serde_json::json!(["text/event-stream"]);
    Ok(Bytes::from(serde_json::to_vec(&event)?))
}

/// The chat's read of a conversation, `after=0`: valid, of an id no turn issued.
fn read_event() -> Result<Bytes, Error> {
    let mut event: serde_json::Value = serde_json::from_str(READ_EVENT)?;
    event["queryStringParameters"] = serde_json::json!({"after": "0"});
    event["multiValueQueryStringParameters"] = serde_json::json!({"after": ["0"]});
    Ok(Bytes::from(serde_json::to_vec(&event)?))
}

/// The keyed event with a fresh `Idempotency-Key` each, as a widget sends
/// them; in a conversation of `earlier` exchanges when given.
fn keyed_events(count: usize, earlier: Option<u64>) -> Result<Vec<Bytes>, Error> {
    let template: serde_json::Value = serde_json::from_str(KEYED_EVENT)?;
    (0..count)
        .map(|i| {
            let mut event = template.clone();
            let key = format!("bench-{}-{i}-{earlier:?}", std::process::id());
            event["headers"]["Idempotency-Key"] = key.clone().into();
            event["multiValueHeaders"]["Idempotency-Key"] = serde_json::json!([key]);
            if let Some(earlier) = earlier {
                let mut body: serde_json::Value = serde_json::from_str(event["body"].as_str().unwrap_or("{}"))?;
                body["conversation_id"] = format!("c_bench_n{earlier}").into();
                event["body"] = body.to_string().into();
            }
            Ok(Bytes::from(serde_json::to_vec(&event)?))
        })
        .collect()
}

fn own_work(warm: &Warm, floor: Duration) -> Vec<Duration> {
    warm.added.iter().map(|d| d.saturating_sub(floor)).collect()
}

/// The rows of one warm loop, with its own-work p50 and CPU targets.
fn warm_rows(
    name: &str,
    warm: &Warm,
    floor: Duration,
    own_work_target_ms: Option<f64>,
    cpu_target_ms: Option<f64>,
) -> Vec<Row> {
    let own_work = own_work(warm, floor);
    let turns = warm.latency.len();
    vec![
        Row::millis(
            format!("{name}: latency p50 ({turns} turns)"),
            percentile(&warm.latency, 0.5),
        ),
        Row::millis(format!("{name}: latency p99"), percentile(&warm.latency, 0.99)),
        Row::millis(
            format!("{name}: added beyond stand-ins p50"),
            percentile(&warm.added, 0.5),
        ),
        Row {
            target: own_work_target_ms.map(Target::Below),
            ..Row::millis(
                format!("{name}: own work p50 (beyond stand-ins and floor)"),
                percentile(&own_work, 0.5),
            )
        },
        Row::millis(format!("{name}: own work p99"), percentile(&own_work, 0.99)),
        Row {
            target: cpu_target_ms.map(Target::Below),
            ..Row::millis(format!("{name}: CPU time per turn"), warm.cpu_per_turn)
        },
        Row::new(
            format!("{name}:   of which user space / kernel"),
            0.0,
            Unit::Text(format!(
                "{:.3} / {:.3} ms",
                warm.cpu_per_turn.mul_f64(warm.user_share).as_secs_f64() * 1000.0,
                warm.cpu_per_turn.mul_f64(1.0 - warm.user_share).as_secs_f64() * 1000.0
            )),
        ),
        Row::new(
            format!("{name}: peak RSS after the loop"),
            (warm.peak_rss_kib * 1024) as f64 / MIB,
            Unit::Mebibytes,
        )
        .target(Target::Below(16.0)),
        Row::new(
            format!("{name}: TCP connections to OpenAI ({} requests)", warm.openai_requests),
            warm.openai_connections as f64,
            Unit::Count,
        )
        .target(Target::Exactly(1.0)),
    ]
}
