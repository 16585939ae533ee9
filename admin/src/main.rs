//! `refund-chat-admin`: the support team's approvals and audit trail
//! (contract 9), on the same ledger and payments adapters as the function.
//! Its own package: its command line, its table printing and the SDK's
//! default HTTPS client and credentials chain are no part of the Lambda
//! bootstrap. One file per verb in `cmd/` (as mini-redis's `cmd/`), the
//! printing they share in [`print`].
//!
//! Exit status: 0 when done; 1 when refused (unknown id, already decided,
//! more than the order has left, payments rejected, or an outcome payments
//! left unknown); 2 for bad usage, configuration, or a ledger that cannot be
//! reached; 3 when payments answered an approval or a reissue and the
//! ledger could not record what it answered (money may have moved: the
//! audit trail needs a person). Decisions are logged
//! (JSON, on stderr) with the approver's name, never the customer's message.
//!
//! Everything printed for a person passes through
//! [`refund_chat::untrusted::visible`]: a record's text fields hold what a
//! customer or the model wrote.

mod cmd;
mod print;
mod typed_address;

use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use refund_chat::clock::parse_utc;
use refund_chat::config::StaffConfig;
use refund_chat::conversation::person::Person;
use refund_chat::ledger::Confirmed;
use refund_chat::ledger::LedgerError;
use refund_chat::router::Intent;
use refund_chat::staff::{Staff, decide, hold, internal_note};

/// Approve, reject and resolve refunds, and export the audit trail.
///
/// Configured like the function: LEDGER_TABLE, CONVERSATION_TABLE,
/// CONVERSATION_TTL_HOURS, PAYMENTS_BASE_URL, PAYMENTS_TIMEOUT_SECS,
/// LEDGER_TIMEOUT_SECS and the AWS chain.
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
        /// The intent a person found (contract 21), from the router's list.
        #[arg(long, value_name = "INTENT", value_parser = cmd::decide::parse_intent)]
        intent: Option<Intent>,
    },
    /// Reject a refund awaiting approval: no money moves.
    Reject {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// The intent a person found (contract 21), from the router's list.
        #[arg(long, value_name = "INTENT", value_parser = cmd::decide::parse_intent)]
        intent: Option<Intent>,
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
    /// Close a handoff (the conversation stays with the people), with a
    /// last word to the customer if --text is given.
    CloseHandoff {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
        /// A reply to the customer, sent once the handoff is closed.
        #[arg(long, value_name = "TEXT")]
        text: Option<String>,
        /// The intent a person found (contract 21), from the router's list.
        #[arg(long, value_name = "INTENT", value_parser = cmd::decide::parse_intent)]
        intent: Option<Intent>,
    },
    /// Write to the customer in their chat: a person's message in the
    /// conversation (ID: the conversation's, or its handoff's).
    Reply(Reply),
    /// Have a conversation (contract 30): nobody else on the team replies
    /// to it or closes it until it is released (ID: the conversation's, or
    /// its handoff's).
    Claim {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Take it from whoever has it (recorded).
        #[arg(long)]
        take_over: bool,
    },
    /// Give back a conversation one has.
    Release {
        id: String,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// An internal note on a conversation: the support team reads it, the
    /// customer never does.
    Note(Reply),
    /// The right to be forgotten: delete the customer's conversations and
    /// request records, and remove their messages from their refund records
    /// (which stay: they are the shop's financial record). Recorded.
    ///
    /// A guest (contract 27) is forgotten by user id (`guest:<sub>`) or by
    /// the e-mail they proved, looked up in the guest pool (GUEST_POOL_ID);
    /// the guest pool's user is deleted too.
    Forget {
        #[arg(
            long,
            value_name = "USER",
            required_unless_present = "email",
            conflicts_with = "email"
        )]
        customer: Option<String>,
        /// A guest's e-mail, instead of --customer.
        #[arg(long, value_name = "EMAIL")]
        email: Option<String>,
        #[arg(long, value_name = "NAME")]
        by: String,
    },
    /// The nightly review's sample (contract 23): conversations gone quiet,
    /// chosen at random, one line each.
    Sample {
        /// Only conversations whose last exchange is younger than this (90s, 30m, 1h, 2d).
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = cmd::sample::parse_duration)]
        since: Duration,
        /// Only conversations quiet for at least this long.
        #[arg(long = "quiet-for", value_name = "DURATION", default_value = "1h", value_parser = cmd::sample::parse_duration)]
        quiet_for: Duration,
        /// How many, at most.
        #[arg(long, default_value_t = 20)]
        n: usize,
        /// The same seed, the same sample (default: the clock).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// One evaluation task from a real conversation (contract 23), with
    /// stand-ins for every personal detail: for eval/tasks/replayed/.
    ReplayTask {
        id: String,
        /// The family the task joins (above_limit, handoff, ...).
        #[arg(long, value_name = "NAME")]
        family: String,
        /// Why it is hard, in one line (the report shows it).
        #[arg(long, value_name = "TEXT")]
        why: String,
        /// Where to write it (default: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// The router against people (contract 21): per router intent the
    /// conversations, containment, handoffs and refunds; then the router's
    /// intent against the one a person recorded, and the share that agree.
    Routing {
        /// Conversations whose first exchange is on or after this UTC date or time (default: 7 days back).
        #[arg(long, value_name = "DATE", value_parser = parse_since)]
        since: Option<u64>,
        /// The same as CSV, formulas neutralised.
        #[arg(long)]
        csv: bool,
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
pub struct Resolve {
    pub id: String,
    /// Payments made the refund, with this refund id.
    #[arg(long, value_name = "REFUND_ID")]
    pub executed: Option<String>,
    /// Payments made no refund.
    #[arg(long)]
    pub not_executed: bool,
    #[arg(long, value_name = "NAME")]
    pub by: String,
}

#[derive(Args)]
#[command(group(ArgGroup::new("words").required(true).args(["text", "text_file"])))]
pub struct Reply {
    pub id: String,
    #[arg(long, value_name = "NAME")]
    pub by: String,
    /// The message: one line of plain text, at most 4000 characters.
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// The message, read from a file (its trailing line break is trimmed).
    #[arg(long, value_name = "FILE")]
    pub text_file: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Json,
    Csv,
}

/// The reply's words, from `--text` or the file `--text-file` names.
fn reply_text(reply: &Reply) -> Result<String, String> {
    match (&reply.text, &reply.text_file) {
        (Some(text), _) => Ok(text.clone()),
        (None, Some(path)) => std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display())),
        (None, None) => Err("--text or --text-file is required".into()),
    }
}

fn parse_since(text: &str) -> Result<u64, String> {
    parse_utc(text).ok_or_else(|| format!("{text:?} is not a UTC date (2026-11-30) or time (2026-11-30T18:00:00Z)"))
}

/// How a command ended, mapped to the exit status in one place.
pub enum Ending {
    Done,
    Refused(String),
    Failed(String),
    /// Payments answered; the ledger does not know what it said.
    Unrecorded(String),
}

/// A command's ending, or the ledger's error (exit status 2).
pub type Outcome = Result<Ending, LedgerError>;

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
        Ending::Unrecorded(why) => {
            eprintln!("not recorded: {why}");
            ExitCode::from(3)
        }
    }
}

async fn run(command: Command, config: &StaffConfig) -> Ending {
    // The standard chain (profiles, SSO): a person's machine. Loading it
    // makes no network call; the ledger sets its own timeouts.
    let aws = aws_config::from_env().load().await;
    let http = match refund_chat::http_client::money_path_client() {
        Ok(http) => http,
        Err(error) => return Ending::Failed(format!("HTTP client: {error}")),
    };
    let staff = Staff::new(config, &aws, http);
    let (ledger, conversations) = (&staff.ledger, &staff.conversations);
    let result = match command {
        Command::Conversation { id } => cmd::conversation::run(ledger, conversations, &id).await,
        Command::Handoffs => cmd::handoffs::run(conversations).await,
        Command::CloseHandoff { id, by, text, intent } => {
            let by = Person::named(&by);
            let conversation = refund_chat::handoff::conversation_of(&id);
            match decide::close_handoff(&staff, &id, by, text.as_deref()).await {
                Ok(closed) => decide::with_verdict(&staff, closed, conversation.as_deref(), intent, by)
                    .await
                    .map(cmd::decide::ending),
                Err(error) => Err(error),
            }
        }
        Command::Reply(reply) => match reply_text(&reply) {
            Ok(text) => decide::reply(&staff, &reply.id, Person::named(&reply.by), &text, None)
                .await
                .map(cmd::decide::ending),
            Err(why) => Ok(Ending::Failed(why)),
        },
        Command::Claim { id, by, take_over } => hold::claim(&staff, &id, Person::named(&by), take_over)
            .await
            .map(cmd::decide::ending),
        Command::Release { id, by } => hold::release(&staff, &id, Person::named(&by))
            .await
            .map(cmd::decide::ending),
        Command::Note(note) => match reply_text(&note) {
            Ok(text) => internal_note::add(&staff, &note.id, Person::named(&note.by), &text, None)
                .await
                .map(cmd::decide::ending),
            Err(why) => Ok(Ending::Failed(why)),
        },
        Command::Forget { customer, email, by } => {
            let who = match (customer, email) {
                (Some(customer), _) => cmd::forget::Who::UserId(customer),
                (None, Some(email)) => cmd::forget::Who::GuestEmail(email),
                (None, None) => return Ending::Failed("--customer or --email".into()),
            };
            cmd::forget::run(ledger, conversations, staff.orders.guests(), who, &by).await
        }
        Command::Pending => cmd::pending::run(ledger).await,
        Command::Show { id } => cmd::show::run(ledger, conversations, &id).await,
        Command::Approve { id, by, intent } => {
            let by = Person::named(&by);
            match decide::approve(&staff, &id, by).await {
                Ok(decided) => decide::with_verdict_on_record(&staff, decided, &id, intent, by)
                    .await
                    .map(cmd::decide::ending),
                Err(error) => Err(error),
            }
        }
        Command::Reissue { id, by } => decide::reissue(&staff, &id, Person::named(&by))
            .await
            .map(cmd::decide::ending),
        Command::Reject { id, by, reason, intent } => {
            let by = Person::named(&by);
            match decide::reject(&staff, &id, by, &reason).await {
                Ok(decided) => decide::with_verdict_on_record(&staff, decided, &id, intent, by)
                    .await
                    .map(cmd::decide::ending),
                Err(error) => Err(error),
            }
        }
        Command::Routing { since, csv } => cmd::routing::run(ledger, conversations, since, csv).await,
        Command::Unknown => cmd::unknown::run(&staff).await,
        Command::Resolve(resolve) => {
            let confirmed = match resolve.executed {
                Some(refund_id) => Confirmed::Executed { refund_id },
                None => Confirmed::NotExecuted,
            };
            decide::resolve(&staff, &resolve.id, Person::named(&resolve.by), &confirmed)
                .await
                .map(cmd::decide::ending)
        }
        Command::Export { since, format } => cmd::export::run(ledger, conversations, since.unwrap_or(0), format).await,
        Command::ReplayTask { id, family, why, out } => {
            let hash_key = match cmd::replay_task::hash_key(&aws).await {
                Ok(key) => key,
                Err(why) => return Ending::Failed(why),
            };
            let asked = cmd::replay_task::ReplayTask {
                id: &id,
                family: &family,
                why: &why,
                out: out.as_deref(),
                limits: &config.limits,
                hash_key: &hash_key,
            };
            cmd::replay_task::run(ledger, conversations, config, asked).await
        }
        Command::Sample {
            since,
            quiet_for,
            n,
            seed,
        } => {
            let sample = cmd::sample::Sample {
                since,
                quiet_for,
                n,
                seed: seed.unwrap_or_else(refund_chat::clock::now_ms),
            };
            cmd::sample::run(ledger, conversations, sample).await
        }
    };
    result.unwrap_or_else(|error| Ending::Failed(format!("the ledger: {error}")))
}
