//! `refund-chat-admin`: the support team's approvals and audit trail
//! (contract 9), on the same ledger and payments adapters as the function.
//!
//! Exit status: 0 when done; 1 when refused (unknown id, already decided,
//! payments rejected, or an outcome payments left unknown); 2 for bad usage,
//! configuration, or a ledger that cannot be reached. Decisions are logged
//! (JSON, on stderr) with the approver's name, never the customer's message.

use std::io::Write;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use refund_chat::approvals::{self, ApprovalError};
use refund_chat::clock::{now_ms, parse_utc};
use refund_chat::config::{FUNCTION_TIMEOUT, StaffConfig};
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::staff::{Confirmed, StaffClaim};
use refund_chat::ledger::{RefundRecord, new_writer};
use refund_chat::money::AmountCents;
use refund_chat::payments::HttpPayments;
use refund_chat::refund::{RefundOutcome, RefundState};

/// Approve, reject and resolve refunds, and export the audit trail.
///
/// Configured like the function: LEDGER_TABLE, PAYMENTS_BASE_URL,
/// PAYMENTS_TIMEOUT_SECS, LEDGER_TIMEOUT_SECS and the AWS chain.
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing::subscriber::set_global_default(refund_chat::logging::subscriber("info", std::io::stderr));
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
    let result = match command {
        Command::Pending => pending(&ledger).await,
        Command::Show { id } => show(&ledger, &id).await,
        Command::Approve { id, by } => approve(&ledger, config, &id, &by).await,
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
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let message = one_line(r.customer_message.as_deref().unwrap_or_default(), 60);
            row(r, [r.reasons.join(", "), message])
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
        println!("{column:<width$}  {}", if value.is_empty() { "-" } else { &value });
    }
    Ok(Ending::Done)
}

async fn approve(ledger: &DynamoLedger, config: &StaffConfig, id: &str, by: &str) -> Outcome {
    let http = match refund_chat::http_client::money_path_client() {
        Ok(http) => http,
        Err(error) => return Ok(Ending::Failed(format!("HTTP client: {error}"))),
    };
    let payments = HttpPayments::new(http, &config.payments_base_url, config.payments_timeout);
    let approved = match approvals::approve(ledger, &payments, id, by, &new_writer(&format!("staff:{by}"))).await {
        Ok(approved) => approved,
        Err(ApprovalError::Ledger(error)) => return Err(error),
        Err(refused) => {
            tracing::info!(
                event = "staff_decision",
                action = "approve",
                record_id = id,
                by,
                result = "refused"
            );
            return Ok(Ending::Refused(refused.to_string()));
        }
    };
    let record = &approved.record;
    tracing::info!(
        event = "staff_decision",
        action = "approve",
        record_id = id,
        by,
        refund_outcome = approved.outcome.name(),
        outcome_recorded = approved.outcome_recorded,
    );
    let amount = AmountCents::new(record.amount_cents);
    Ok(match &approved.outcome {
        RefundOutcome::Executed(receipt) => {
            println!(
                "approved {id}: refunded {amount} on order {} to {} (refund {})",
                record.order_id, record.user_id, receipt.refund_id
            );
            Ending::Done
        }
        RefundOutcome::Rejected { detail, .. } => Ending::Refused(format!(
            "payments rejected the refund ({detail}); recorded as rejected, no money moved"
        )),
        other => Ending::Refused(format!(
            "the refund's outcome is unknown ({}); recorded for `refund-chat-admin unknown`: check it with \
             payments, then resolve it",
            match other {
                RefundOutcome::Unknown(error) => error.to_string(),
                other => other.name().to_owned(),
            }
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
        StaffClaim::Done(_) => {
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
            let why = one_line(r.failure.as_deref().unwrap_or("no outcome recorded"), 60);
            row(r, [r.state.clone(), why])
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
        StaffClaim::Done(_) => {
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
        Format::Json => {
            let objects: Vec<serde_json::Value> = records
                .iter()
                .map(|record| {
                    RefundRecord::COLUMNS
                        .iter()
                        .zip(record.values())
                        .filter(|(_, value)| !value.is_empty())
                        .map(|(column, value)| (column.to_string(), serde_json::Value::String(value)))
                        .collect::<serde_json::Map<_, _>>()
                        .into()
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &objects)
                .map_err(|e| e.to_string())
                .and_then(|()| writeln!(out).map_err(|e| e.to_string()))
        }
        Format::Csv => {
            let mut csv = csv::Writer::from_writer(&mut out);
            std::iter::once(csv.write_record(RefundRecord::COLUMNS))
                .chain(records.iter().map(|record| csv.write_record(record.values())))
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

fn claim_name(claim: &StaffClaim) -> &'static str {
    match claim {
        StaffClaim::Done(_) => "done",
        StaffClaim::Refused(_) => "refused",
        StaffClaim::NotFound => "not_found",
    }
}

fn refused(id: &str, claim: StaffClaim, expected: &str) -> Ending {
    match claim {
        StaffClaim::Refused(found) => Ending::Refused(format!(
            "refund {id} is {}{}: not {expected}",
            found.state,
            found
                .decided_by
                .or(found.resolved_by)
                .map(|by| format!(", decided by {by}"))
                .unwrap_or_default()
        )),
        StaffClaim::NotFound => Ending::Refused(format!("no refund record {id}")),
        StaffClaim::Done(_) => Ending::Done,
    }
}

/// A table row: the record's id, time, customer, order and amount, then `more`.
fn row<const N: usize>(record: &RefundRecord, more: [String; N]) -> Vec<String> {
    let created = record
        .created_at
        .get(..19)
        .unwrap_or(&record.created_at)
        .replace('T', " ");
    let amount = AmountCents::new(record.amount_cents).to_string();
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

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    }
}

/// A plain table for a terminal: columns padded to their widest cell.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
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
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
