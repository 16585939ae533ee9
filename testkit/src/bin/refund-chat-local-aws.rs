//! The local stack's AWS side in moto, for `make run` and `make ledger`:
//! `setup` creates the OpenAI key secret, the ledger table and its
//! conversation table (the code's
//! own schema, [`refund_chat::ledger::dynamo::schema`]); `ledger` prints the
//! table's items, one JSON object a line, oldest first.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "refund-chat-local-aws")]
struct Cli {
    /// moto's endpoint.
    #[arg(long, default_value = "http://127.0.0.1:5005")]
    endpoint: String,
    /// The ledger table.
    #[arg(long, default_value = "refund-chat-ledger")]
    table: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the key secret and the ledger table.
    Setup {
        #[arg(long, default_value = "refund-chat/openai-api-key")]
        secret_id: String,
        #[arg(long)]
        api_key: String,
    },
    /// Print the ledger's items, oldest first.
    Ledger,
}

/// local.env's `REVIEW_HASH_KEY_SECRET`.
const LOCAL_REVIEW_HASH_KEY_SECRET: &str = "refund-chat/review-hash-key";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let aws = refund_chat_testkit::aws_at(&cli.endpoint).await;
    let result = match cli.command {
        Command::Setup { secret_id, api_key } => {
            match refund_chat_testkit::set_up_local_aws(&aws, &cli.table, &secret_id, &api_key).await {
                // The key of replay-task's hash (REVIEW_HASH_KEY_SECRET in local.env),
                // a value of this run's own.
                Ok(()) => {
                    let key = format!(
                        "local-review-key-{}-{}",
                        std::process::id(),
                        refund_chat::clock::now_ms()
                    );
                    refund_chat_testkit::put_secret(&aws, LOCAL_REVIEW_HASH_KEY_SECRET, &key).await
                }
                Err(error) => Err(error),
            }
        }
        Command::Ledger => refund_chat_testkit::plain_items(&aws, &cli.table).await.map(|items| {
            if items.is_empty() {
                eprintln!("the ledger is empty");
            }
            for item in items {
                println!("{item}");
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
