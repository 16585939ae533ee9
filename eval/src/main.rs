//! `make eval`: every task of `eval/tasks/` run k times, each against a fresh
//! sandbox and ledger, through the real handler, graded on the end state and
//! then on the reply; a pass^k table, a markdown report and a JSON file.
//!
//! The model is `OPENAI_BASE_URL` with the key `OPENAI_API_KEY` when both are
//! set, else the project's local model; `--model adversarial` uses a
//! scripted model that always asks for the most damaging refund it can.
//!
//! usage: refund-chat-eval [--k 4] [--model local|adversarial|openai]
//!        [--families a,b] [--concurrency 4] [--out target/eval] [--check]
//!
//! `--check` (CI) exits 1 unless the rules held in every run of every safety
//! family and, with the local model, exactly the tasks marked
//! `local_model_fails` failed.

mod adversary;
mod grade;
mod report;
mod run;
mod tasks;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use run::{Bench, RunResult};
use tasks::Family;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// `make eval`: the tasks of eval/tasks, k times each, graded on the end state.
#[derive(clap::Parser)]
#[command(name = "refund-chat-eval")]
struct Cli {
    /// Runs of every task.
    #[arg(long, default_value_t = 4)]
    k: usize,
    /// local, adversarial, or openai (the default when OPENAI_BASE_URL and OPENAI_API_KEY are set).
    #[arg(long)]
    model: Option<String>,
    /// Only these families (comma-separated).
    #[arg(long, value_delimiter = ',')]
    families: Option<Vec<String>>,
    /// Runs at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Where the report goes (default target/eval).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Exit 1 unless the rules held in every safety run (and, with the local model, exactly the known failures failed).
    #[arg(long)]
    check: bool,
    /// The task files (default eval/tasks), with the replayed ones of its `replayed/`.
    #[arg(long)]
    tasks: Option<PathBuf>,
}

/// The command line with its defaults applied.
struct Args {
    k: usize,
    model: String,
    families: Option<Vec<String>>,
    concurrency: usize,
    out: PathBuf,
    check: bool,
    tasks: PathBuf,
}

fn args() -> Args {
    let cli = <Cli as clap::Parser>::parse();
    let real = std::env::var("OPENAI_BASE_URL").is_ok() && std::env::var("OPENAI_API_KEY").is_ok();
    Args {
        k: cli.k,
        model: cli
            .model
            .unwrap_or_else(|| if real { "openai" } else { "local" }.to_owned()),
        families: cli.families,
        concurrency: cli.concurrency,
        out: cli
            .out
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/eval")),
        check: cli.check,
        tasks: cli
            .tasks
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")),
    }
}

/// A model server on a free port: its API base.
async fn serve(router: axum::Router) -> Result<String, Error> {
    Ok(format!("http://{}/v1", refund_chat_local::spawn(0, router).await?))
}

#[tokio::main]
async fn main() -> ExitCode {
    match evaluate().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("the evaluation could not run: {error}");
            ExitCode::from(2)
        }
    }
}

async fn evaluate() -> Result<bool, Error> {
    let args = args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut families = tasks::load_with_replayed(&args.tasks)?;
    if let Some(wanted) = &args.families {
        families.retain(|f| wanted.contains(&f.family));
    }
    let (model_base, api_key, timeout) = match args.model.as_str() {
        "openai" => (
            std::env::var("OPENAI_BASE_URL")?.trim_end_matches('/').to_owned(),
            std::env::var("OPENAI_API_KEY")?,
            20.0,
        ),
        "adversarial" => (serve(adversary::router()).await?, "sk-local".to_owned(), 5.0),
        _ => (
            serve(refund_chat_local::local_model::LocalModel::new(None).router()).await?,
            "sk-local".to_owned(),
            5.0,
        ),
    };
    let moto_server = refund_chat_local::moto::Moto::start(&root)?;
    let moto = moto_server.endpoint.clone();
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "eval", "eval", None, None, "eval",
        ))
        .endpoint_url(&moto)
        .load()
        .await;
    let bench = Arc::new(Bench {
        aws,
        model_base,
        api_key,
        completion_timeout_secs: timeout,
    });
    // No log output: these are synthetic customers, and the report has the transcripts.
    let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::new());

    let jobs: Vec<(String, tasks::Task, usize)> = families
        .iter()
        .flat_map(|f| {
            f.tasks
                .iter()
                .flat_map(|t| (0..args.k).map(|a| (f.family.clone(), t.clone(), a + 1)))
        })
        .collect();
    let total = jobs.len();
    println!(
        "evaluating {} tasks x {} runs against the {} model",
        total / args.k.max(1),
        args.k,
        args.model
    );
    let permits = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut handles = Vec::new();
    for (family, task, attempt) in jobs {
        let (bench, permits, done) = (Arc::clone(&bench), Arc::clone(&permits), Arc::clone(&done));
        handles.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await;
            let result =
                tokio::time::timeout(Duration::from_secs(300), run::run(&bench, &family, &task, attempt)).await;
            let finished = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            progress(finished, total);
            match result {
                Ok(Ok(run)) => Ok(run),
                Ok(Err(error)) => Err(format!("{} run {attempt}: {error}", task.id)),
                Err(_) => Err(format!("{} run {attempt}: no answer within 300 s", task.id)),
            }
        }));
    }
    let mut runs: Vec<RunResult> = Vec::new();
    for handle in handles {
        runs.push(handle.await.map_err(|e| e.to_string())??);
    }
    eprintln!();
    runs.sort_by(|a, b| (&a.task, a.attempt).cmp(&(&b.task, b.attempt)));

    let report = report::summarise(&args.model, args.k, &families, runs);
    std::fs::create_dir_all(&args.out)?;
    let markdown = report::markdown(&report);
    std::fs::write(args.out.join("report.md"), &markdown)?;
    std::fs::write(args.out.join("report.json"), serde_json::to_string_pretty(&report)?)?;
    print_tables(&markdown);
    println!("\nreport: {} and report.json", args.out.join("report.md").display());
    Ok(!args.check || checked(&args, &families, &report))
}

/// The two tables of the markdown report, for the terminal.
fn print_tables(markdown: &str) {
    let end = markdown.find("\n## Failures").unwrap_or(markdown.len());
    println!("{}", &markdown[..end]);
}

fn progress(done: usize, total: usize) {
    let width = 40;
    let filled = done * width / total.max(1);
    eprint!(
        "\r[{}{}] {done}/{total} runs",
        "#".repeat(filled),
        ".".repeat(width - filled)
    );
    let _ = std::io::stderr().flush();
}

/// CI's view: the rules held in every safety run; with the local model,
/// exactly the tasks known to fail failed (the grader and the marks are honest).
fn checked(args: &Args, families: &[Family], report: &report::Report) -> bool {
    let mut ok = true;
    for task in report.tasks.iter().filter(|t| t.safety && !t.rules_held) {
        println!(
            "CHECK FAILED: the rules did not hold in {} ({})",
            task.task, task.family
        );
        ok = false;
    }
    if args.model == "local" {
        for task in &report.tasks {
            let known = families
                .iter()
                .flat_map(|f| &f.tasks)
                .find(|t| t.id == task.task)
                .and_then(|t| t.local_model_fails.as_ref());
            match (known, task.pass_k) {
                (None, false) => {
                    println!("CHECK FAILED: {} failed with the local model", task.task);
                    ok = false;
                }
                (Some(_), true) => {
                    println!(
                        "CHECK FAILED: {} passes now: remove its local_model_fails mark",
                        task.task
                    );
                    ok = false;
                }
                _ => {}
            }
        }
    }
    if ok {
        println!(
            "check passed: the rules held in every safety run{}",
            if args.model == "local" {
                ", and exactly the known local-model failures failed"
            } else {
                ""
            }
        );
    }
    ok
}
