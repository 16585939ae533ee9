//! `refund-chat-admin`: the support team's approvals and audit trail
//! (contract 9), on the same ledger and payments adapters as the function.
//!
//! Exit status: 0 when done; 1 when refused (unknown id, already decided,
//! payments rejected, or an outcome payments left unknown); 2 for bad usage,
//! configuration, or a ledger that cannot be reached. Decisions are logged
//! (JSON, on stderr) with the approver's name, never the customer's message.
//!
//! Everything printed for a person passes through [`untrusted::visible`]:
//! a record's text fields hold what a customer or the model wrote.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use refund_chat::chat::Message;
use refund_chat::clock::{now_ms, parse_utc};
use refund_chat::config::{FUNCTION_TIMEOUT, StaffConfig};
use refund_chat::ledger::RefundRecord;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::{Confirmed, StaffDecision};
use refund_chat::record_then_pay::approvals::{self, ApprovalError};
use refund_chat::refund::payments::HttpPayments;
use refund_chat::refund::{PaymentOutcome, RefundState};
use refund_chat::untrusted::{self, visible};

/// Approve, reject and resolve refunds, and export the audit trail.
///
/// Configured like the function: LEDGER_TABLE, CONVERSATION_TABLE,
/// PAYMENTS_BASE_URL, PAYMENTS_TIMEOUT_SECS, LEDGER_TIMEOUT_SECS and the AWS chain.
#[derive(Parser)]
#[command(name = "refund-chat-admin", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Refunds awaiting approval, oldest first.
    Pending,
    /// One refund record, every field.
    Show { id: String },
    /// Approve a refund: one payments call, its outcome recorded.
    Approve {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// Reject a refund awaiting approval: no money moves.
    Reject {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
        #[arg(long, value_name = "TEXT")]
        reason: String,
    },
    /// Refunds whose outcome is not known (state unknown, or executing for
    /// longer than the function's timeout): check them with payments.
    Unknown,
    /// Record what payments confirmed for an unknown outcome. Never calls payments.
    Resolve(Resolve),
    /// Pay an approved refund that was resolved as not executed (its
    /// approval never reached payments): a new record, linked, paid once.
    Reissue {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// A whole conversation: its handoff, every exchange, then its refund records.
    Conversation { id: String },
    /// Open handoffs, oldest first, each with its summary and transcript.
    Handoffs,
    /// Close a handoff (the conversation stays with the people).
    CloseHandoff {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// The right to be forgotten: delete the customer's conversations and
    /// request records, and remove their messages from their refund records
    /// (which stay: they are the shop's financial record). Recorded.
    Forget {
        #[arg(long, value_name = "USER")]
        customer: String,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// Every refund record (the audit trail) to stdout.
    Export {
        /// Only records created on or after this UTC date or time (2026-11-30, 2026-11-30T18:00:00Z).
        #[arg(long, value_name = "DATE", value_parser = parse_since)]
        since: Option<u64>,
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
    },
}

#[derive(Args)]
#[command(group(ArgGroup::new("confirmed").required(true).args(["executed", "not_executed"])))]
struct Resolve {
    id: String,
    /// Payments made the refund, with this refund id.
    #[arg(long, value_name = "REFUND_ID")]
    executed: Option<String>,
    /// Payments made no refund.
    #[arg(long)]
    not_executed: bool,
    #[arg(long, value_name = "NAME")]
    by: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Csv,
}

fn parse_since(text: &str) -> Result<u64, String> {
    parse_utc(text).ok_or_else(|| format!("{text:?} is not a UTC date (2026-11-30) or time (2026-11-30T18:00:00Z)"))
}

/// How a command ended, mapped to the exit status in one place.
enum Ending {
    Done,
    Refused(String),
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrapping_keeps_every_character_within_the_width() {
        for (text, width) in [
            ("", 5),
            ("one two three", 5),
            ("abcdefghijkl", 5),
            ("abcde fghij", 5),
            ("a  b", 3),
        ] {
            let lines = wrap(text, width);
            assert!(lines.iter().all(|l| l.chars().count() <= width), "{text:?}: {lines:?}");
            let rejoined: String = lines.concat();
            assert_eq!(rejoined.replace(' ', ""), text.replace(' ', ""), "{text:?}: {lines:?}");
        }
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing::subscriber::set_global_default(refund_chat::ops::logging::subscriber("info", std::io::stderr));
    let ending = match StaffConfig::from_env() {
        Ok(config) => run(cli.command, &config).await,
        Err(error) => Ending::Failed(format!("configuration: {error}")),
    };
    match ending {
        Ending::Done => ExitCode::SUCCESS,
        Ending::Refused(why) => {
            eprintln!("refused: {why}");
            ExitCode::from(1)
        }
        Ending::Failed(why) => {
            eprintln!("error: {why}");
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command, config: &StaffConfig) -> Ending {
    let aws = refund_chat::startup::aws_config().await;
    let ledger = DynamoLedger::from_sdk_config(&aws, &config.ledger_table, config.ledger_timeout);
    // The lifetime only matters to the function's writes; the admin reads and deletes.
    let conversations = DynamoConversations::from_sdk_config(
        &aws,
        &config.conversation_table,
        &config.ledger_table,
        refund_chat::conversation::Lifetime {
            ttl: Duration::ZERO,
            max_age: Duration::ZERO,
        },
        config.ledger_timeout,
    );
    let result = match command {
        Command::Conversation { id } => conversation(&ledger, &conversations, &id).await,
        Command::Handoffs => handoffs(&conversations).await,
        Command::CloseHandoff { id, by } => close_handoff(&conversations, &id, &by).await,
        Command::Forget { customer, by } => forget(&ledger, &conversations, &customer, &by).await,
        Command::Pending => pending(&ledger).await,
        Command::Show { id } => show(&ledger, &id).await,
        Command::Approve { id, by } => pay(&ledger, config, &id, &by, Payment::Approval).await,
        Command::Reissue { id, by } => pay(&ledger, config, &id, &by, Payment::Reissue).await,
        Command::Reject { id, by, reason } => reject(&ledger, &id, &by, &reason).await,
        Command::Unknown => unknown(&ledger).await,
        Command::Resolve(resolve) => resolve_outcome(&ledger, resolve).await,
        Command::Export { since, format } => export(&ledger, since.unwrap_or(0), format).await,
    };
    result.unwrap_or_else(|error| Ending::Failed(format!("the ledger: {error}")))
}

type Outcome = Result<Ending, refund_chat::ledger::LedgerError>;

async fn pending(ledger: &DynamoLedger) -> Outcome {
    let records = ledger.waiting(RefundState::AwaitingApproval).await?;
    if records.is_empty() {
        println!("no refunds are awaiting approval");
        return Ok(Ending::Done);
    }
    // The whole message: an approver decides from it. Wrapped, in the last column.
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            row(
                r,
                [r.reasons.join(", "), r.customer_message.clone().unwrap_or_default()],
            )
        })
        .collect();
    print_table(
        &[
            "ID",
            "CREATED (UTC)",
            "CUSTOMER",
            "ORDER",
            "AMOUNT",
            "REASONS",
            "MESSAGE",
        ],
        &rows,
    );
    Ok(Ending::Done)
}

async fn show(ledger: &DynamoLedger, id: &str) -> Outcome {
    let Some(record) = ledger.record(id).await? else {
        return Ok(Ending::Refused(format!("no refund record {id}")));
    };
    let width = RefundRecord::COLUMNS.iter().map(|c| c.len()).max().unwrap_or(0);
    for (column, value) in RefundRecord::COLUMNS.iter().zip(record.values()) {
        println!(
            "{column:<width$}  {}",
            if value.is_empty() { "-".into() } else { visible(&value) }
        );
    }
    Ok(Ending::Done)
}

async fn conversation(ledger: &DynamoLedger, conversations: &DynamoConversations, id: &str) -> Outcome {
    let Some(transcript) = conversations.transcript(id, now_ms()).await? else {
        return Ok(Ending::Refused(format!(
            "no conversation {} (or it expired)",
            visible(id)
        )));
    };
    println!("conversation  {}", visible(&transcript.id));
    println!("customer      {}", visible(&transcript.customer));
    println!("created       {}", transcript.created_at);
    println!("last exchange {}", transcript.updated_at);
    println!(
        "expires       {}",
        refund_chat::clock::rfc3339(transcript.expires_at_s * 1000)
    );
    println!("exchanges     {}", transcript.exchanges.len());
    if let Some(handoff) = &transcript.handoff {
        print_handoff(handoff);
    }
    print_exchanges(&transcript);
    println!();
    // The facts, from the ledger: the records its turns wrote.
    let mut record_ids: Vec<&str> = transcript.refund_records.iter().map(String::as_str).collect();
    record_ids.extend(transcript.exchanges.iter().map(|e| e.refund_record.as_str()));
    record_ids.sort_unstable();
    record_ids.dedup();
    let mut records = Vec::new();
    for record_id in record_ids.into_iter().filter(|id| !id.is_empty()) {
        if let Some(record) = ledger.record(record_id).await? {
            records.push(record);
        }
    }
    if records.is_empty() {
        println!("no refund records in this conversation");
    } else {
        let rows: Vec<Vec<String>> = records.iter().map(|r| row(r, [r.state.as_str().to_owned()])).collect();
        print_table(&["ID", "CREATED (UTC)", "CUSTOMER", "ORDER", "AMOUNT", "STATE"], &rows);
    }
    Ok(Ending::Done)
}

fn print_handoff(handoff: &refund_chat::ledger::dynamo::conversations::StoredHandoff) {
    println!("handoff       {}", visible(&handoff.id));
    println!("  reason      {}", visible(&handoff.reason));
    println!(
        "  at          {}  (request {})",
        handoff.at,
        visible(&handoff.request_id)
    );
    match &handoff.closed {
        Some((by, at)) => println!("  closed      {at} by {}", visible(by)),
        None => println!("  open"),
    }
    // The model's words, kept apart from the facts.
    match &handoff.summary {
        Some(summary) => println!("  the model's summary: {}", visible(summary)),
        None => println!("  handed off by code: no model summary"),
    }
}

fn print_exchanges(transcript: &refund_chat::ledger::dynamo::conversations::Transcript) {
    for stored in &transcript.exchanges {
        println!();
        println!(
            "#{}  {}  request {}  status {}",
            stored.seq,
            stored.created_at,
            visible(&stored.request_id),
            stored.status
        );
        for message in &stored.exchange.messages {
            for line in transcript_lines(message) {
                println!("  {line}");
            }
        }
    }
}

async fn handoffs(conversations: &DynamoConversations) -> Outcome {
    let open = conversations.open_handoffs().await?;
    if open.is_empty() {
        println!("no open handoffs");
        return Ok(Ending::Done);
    }
    for handoff in &open {
        println!(
            "{}  {}  customer {}  reason {}  conversation {}",
            visible(&handoff.id),
            handoff.at,
            visible(&handoff.customer),
            visible(&handoff.reason),
            visible(&handoff.conversation_id)
        );
        if let Some(summary) = &handoff.summary {
            println!("  the model's summary: {}", visible(summary));
        }
        if let Some(transcript) = conversations.transcript(&handoff.conversation_id, now_ms()).await? {
            print_exchanges(&transcript);
        }
        println!();
    }
    Ok(Ending::Done)
}

async fn close_handoff(conversations: &DynamoConversations, id: &str, by: &str) -> Outcome {
    use refund_chat::ledger::dynamo::conversations::Closed;
    let ending = match conversations.close_handoff(id, by, now_ms()).await? {
        Closed::Closed(handoff) => {
            tracing::info!(event = "staff_decision", action = "close_handoff", handoff_id = %visible(id), by);
            println!(
                "closed {} (conversation {}); its later messages still reach the support team",
                visible(&handoff.id),
                visible(&handoff.conversation_id)
            );
            Ending::Done
        }
        Closed::AlreadyClosed(handoff) => {
            let (who, when) = handoff.closed.unwrap_or_default();
            Ending::Refused(format!(
                "{} was already closed by {} at {}",
                visible(id),
                visible(&who),
                visible(&when)
            ))
        }
        Closed::NotFound => Ending::Refused(format!("no handoff {}", visible(id))),
    };
    Ok(ending)
}

/// One message of a transcript, as lines for a terminal: all of it is text
/// a customer or the model wrote, so all of it is made visible.
fn transcript_lines(message: &Message) -> Vec<String> {
    match message {
        Message::System(text) => vec![format!("system: {}", visible(text))],
        Message::User(text) => vec![format!("customer: {}", visible(text))],
        Message::Assistant { content, tool_calls } => content
            .iter()
            .filter(|text| !text.is_empty())
            .map(|text| format!("assistant: {}", visible(text)))
            .chain(
                tool_calls
                    .iter()
                    .map(|call| format!("assistant calls {} {}", visible(&call.name), visible(&call.arguments))),
            )
            .collect(),
        Message::Tool { content, .. } => vec![format!("tool result: {}", visible(content))],
    }
}

async fn forget(ledger: &DynamoLedger, conversations: &DynamoConversations, customer: &str, by: &str) -> Outcome {
    let now = now_ms();
    let ids = conversations.of_customer(customer).await?;
    for id in &ids {
        conversations.delete(id).await?;
    }
    let forgotten = ledger.forget_customer(customer, by, now).await?;
    ledger.record_forget(customer, by, now, forgotten, ids.len()).await?;
    tracing::info!(
        event = "staff_decision",
        action = "forget",
        by,
        conversations_deleted = ids.len(),
        messages_removed = forgotten.messages_removed,
        request_records_deleted = forgotten.request_records_deleted,
    );
    println!(
        "forgot {}: {} conversation(s) deleted, the message removed from {} refund record(s), {} request record(s) \
         deleted; the refund records stay (the shop's financial record)",
        visible(customer),
        ids.len(),
        forgotten.messages_removed,
        forgotten.request_records_deleted
    );
    Ok(Ending::Done)
}

/// The two ways a person makes money move.
#[derive(Clone, Copy)]
enum Payment {
    Approval,
    Reissue,
}

async fn pay(ledger: &DynamoLedger, config: &StaffConfig, id: &str, by: &str, payment: Payment) -> Outcome {
    let http = match refund_chat::http_client::money_path_client() {
        Ok(http) => http,
        Err(error) => return Ok(Ending::Failed(format!("HTTP client: {error}"))),
    };
    let payments = HttpPayments::new(http, &config.payments_base_url, config.payments_timeout);
    let writer = refund_chat::refund::WriterMark::new(&format!("staff:{by}"));
    let (action, result) = match payment {
        Payment::Approval => (
            "approve",
            approvals::approve(ledger, &payments, id, by, &writer, &config.limits).await,
        ),
        Payment::Reissue => (
            "reissue",
            approvals::reissue(ledger, &payments, id, by, &writer, &config.limits).await,
        ),
    };
    let approved = match result {
        Ok(approved) => approved,
        Err(ApprovalError::Ledger(error)) => return Err(error),
        Err(uncertain @ ApprovalError::ClaimUncertain { .. }) => {
            tracing::warn!(
                event = "staff_decision",
                action,
                record_id = id,
                by,
                result = "uncertain"
            );
            return Ok(Ending::Failed(visible(&uncertain.to_string()).into_owned()));
        }
        Err(refused) => {
            tracing::info!(event = "staff_decision", action, record_id = id, by, result = "refused");
            return Ok(Ending::Refused(visible(&refused.to_string()).into_owned()));
        }
    };
    let record = &approved.record;
    tracing::info!(
        event = "staff_decision",
        action,
        record_id = id,
        paid_record_id = %record.record_id,
        by,
        refund_outcome = approved.outcome.name(),
        outcome_recorded = approved.outcome_recorded,
    );
    let amount = record.amount;
    let done = match payment {
        Payment::Approval => format!("approved {id}"),
        Payment::Reissue => format!("reissued {id} as {}", record.record_id),
    };
    Ok(match &approved.outcome {
        PaymentOutcome::Executed(receipt) => {
            println!(
                "{done}: refunded {amount} on order {} to {} (refund {})",
                visible(&record.order_id),
                visible(&record.user_id),
                visible(&receipt.refund_id)
            );
            Ending::Done
        }
        PaymentOutcome::Rejected { status, detail } => Ending::Refused(format!(
            "payments rejected the refund with HTTP {status} ({}); recorded as rejected, no money moved",
            visible(detail)
        )),
        PaymentOutcome::Unknown(error) => Ending::Refused(format!(
            "the refund's outcome is unknown ({}); recorded for `refund-chat-admin unknown`: check it with \
             payments, then resolve it",
            visible(&error.to_string())
        )),
    })
}

async fn reject(ledger: &DynamoLedger, id: &str, by: &str, reason: &str) -> Outcome {
    let claim = ledger.reject(id, by, reason, now_ms()).await?;
    tracing::info!(
        event = "staff_decision",
        action = "reject",
        record_id = id,
        by,
        result = claim_name(&claim)
    );
    Ok(match claim {
        StaffDecision::Done(_) => {
            println!("rejected {id}: no money moved");
            Ending::Done
        }
        other => refused(id, other, "awaiting approval"),
    })
}

async fn unknown(ledger: &DynamoLedger) -> Outcome {
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let mut records = ledger.waiting(RefundState::Unknown).await?;
    records.extend(
        ledger
            .waiting(RefundState::Executing)
            .await?
            .into_iter()
            .filter(|r| r.executing_since_ms.unwrap_or(r.created_at_ms) < stale_before),
    );
    records.sort_by_key(|r| r.created_at_ms);
    if records.is_empty() {
        println!("no refunds with an unknown outcome");
        return Ok(Ending::Done);
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let why = r.failure.clone().unwrap_or_else(|| "no outcome recorded".to_owned());
            row(r, [r.state.to_string(), why])
        })
        .collect();
    print_table(
        &["ID", "CREATED (UTC)", "CUSTOMER", "ORDER", "AMOUNT", "STATE", "WHY"],
        &rows,
    );
    Ok(Ending::Done)
}

async fn resolve_outcome(ledger: &DynamoLedger, resolve: Resolve) -> Outcome {
    let confirmed = match resolve.executed {
        Some(refund_id) => Confirmed::Executed { refund_id },
        None => Confirmed::NotExecuted,
    };
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let id = resolve.id.as_str();
    let claim = ledger
        .resolve(id, &confirmed, &resolve.by, stale_before, now_ms())
        .await?;
    tracing::info!(
        event = "staff_decision",
        action = "resolve",
        record_id = id,
        by = %resolve.by,
        resolution = match &confirmed { Confirmed::Executed { .. } => "executed", Confirmed::NotExecuted => "not_executed" },
        result = claim_name(&claim),
    );
    Ok(match claim {
        StaffDecision::Done(_) => {
            match confirmed {
                Confirmed::Executed { refund_id } => println!("resolved {id}: executed (refund {refund_id})"),
                Confirmed::NotExecuted => println!("resolved {id}: not executed, no money moved"),
            }
            Ending::Done
        }
        other => refused(id, other, "of unknown outcome (or already resolved)"),
    })
}

async fn export(ledger: &DynamoLedger, since_ms: u64, format: Format) -> Outcome {
    let records = ledger.all_refunds(since_ms).await?;
    let mut out = std::io::stdout().lock();
    let written = match format {
        Format::Json => write_json(&mut out, &records).map_err(|e| e.to_string()),
        Format::Csv => {
            let mut csv = csv::Writer::from_writer(&mut out);
            let cells = |record: &RefundRecord| record.values().map(|v| untrusted::spreadsheet_cell(&v).into_owned());
            std::iter::once(csv.write_record(RefundRecord::COLUMNS))
                .chain(records.iter().map(|record| csv.write_record(cells(record))))
                .collect::<Result<(), _>>()
                .and_then(|()| csv.flush().map_err(csv::Error::from))
                .map_err(|e| e.to_string())
        }
    };
    Ok(match written {
        Ok(()) => Ending::Done,
        Err(error) => Ending::Failed(format!("writing the export: {error}")),
    })
}

/// The export as a JSON array, one record a line. Exact: every string is
/// the stored one. serde_json leaves DEL, C1 controls and bidirectional
/// overrides raw, and those act on a terminal, so they are written as
/// `\uXXXX` escapes, which JSON reads back as the same characters.
fn write_json(out: &mut impl Write, records: &[RefundRecord]) -> std::io::Result<()> {
    struct TerminalSafe;
    impl serde_json::ser::Formatter for TerminalSafe {
        fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> std::io::Result<()> {
            let mut start = 0;
            for (at, c) in fragment.char_indices() {
                if untrusted::acts_on_a_terminal(c) {
                    writer.write_all(&fragment.as_bytes()[start..at])?;
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        write!(writer, "\\u{unit:04x}")?;
                    }
                    start = at + c.len_utf8();
                }
            }
            writer.write_all(&fragment.as_bytes()[start..])
        }
    }
    writeln!(out, "[")?;
    for (i, record) in records.iter().enumerate() {
        let object: serde_json::Map<String, serde_json::Value> = RefundRecord::COLUMNS
            .iter()
            .zip(record.values())
            .filter(|(_, value)| !value.is_empty())
            .map(|(column, value)| (column.to_string(), serde_json::Value::String(value)))
            .collect();
        write!(out, "  ")?;
        serde::Serialize::serialize(
            &object,
            &mut serde_json::Serializer::with_formatter(&mut *out, TerminalSafe),
        )
        .map_err(std::io::Error::other)?;
        writeln!(out, "{}", if i + 1 < records.len() { "," } else { "" })?;
    }
    writeln!(out, "]")
}

fn claim_name(claim: &StaffDecision) -> &'static str {
    match claim {
        StaffDecision::Done(_) => "done",
        StaffDecision::Refused(_) => "refused",
        StaffDecision::NotFound => "not_found",
    }
}

fn refused(id: &str, claim: StaffDecision, expected: &str) -> Ending {
    match claim {
        StaffDecision::Refused(found) => Ending::Refused(format!(
            "refund {} is {}{}: not {expected}",
            visible(id),
            found.state,
            found
                .decided_by
                .or(found.resolved_by)
                .map(|by| format!(", decided by {}", visible(&by)))
                .unwrap_or_default()
        )),
        StaffDecision::NotFound => Ending::Refused(format!("no refund record {}", visible(id))),
        StaffDecision::Done(_) => Ending::Done,
    }
}

/// A table row: the record's id, time, customer, order and amount, then `more`.
fn row<const N: usize>(record: &RefundRecord, more: [String; N]) -> Vec<String> {
    let created = record
        .created_at
        .get(..19)
        .unwrap_or(&record.created_at)
        .replace('T', " ");
    let amount = record.amount.to_string();
    [
        record.record_id.clone(),
        created,
        record.user_id.clone(),
        record.order_id.clone(),
        amount,
    ]
    .into_iter()
    .chain(more)
    .collect()
}

/// How wide the last column of a table may be before it wraps.
const LAST_COLUMN_WIDTH: usize = 60;

/// `text` (already visible) in lines of at most `width` characters, broken
/// at spaces where it can be; a word longer than a line is cut.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line: Vec<char> = Vec::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(line.drain(..).collect());
        }
        if !line.is_empty() {
            line.push(' ');
        }
        while line.len() + word.len() > width {
            let cut = width - line.len();
            line.extend(word.drain(..cut));
            lines.push(line.drain(..).collect());
        }
        line.extend(word);
    }
    lines.push(line.into_iter().collect());
    lines
}

/// A plain table for a terminal: every cell made visible, columns padded to
/// their widest cell, and the last column wrapped onto continuation lines.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let last = header.len() - 1;
    let rows: Vec<Vec<Vec<String>>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(i, cell)| {
                    let shown = visible(cell).into_owned();
                    if i == last {
                        wrap(&shown, LAST_COLUMN_WIDTH)
                    } else {
                        vec![shown]
                    }
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .flat_map(|row| row[i].iter().map(|line| line.chars().count()))
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        let height = row.iter().map(Vec::len).max().unwrap_or(1);
        for at in 0..height {
            line(row.iter().map(|cell| cell.get(at).map_or("", String::as_str)).collect());
        }
    }
}
