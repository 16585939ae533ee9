//! `make load`: what a peak looks like. The function's containers (the
//! bootstrap, several processes) on the Runtime API emulator, the local model
//! answering at a real model's latency (and, with `--model-rpm`, a
//! provider's rate limit), the payments sandbox and moto, all on 127.0.0.1;
//! closed-loop customers holding two-message conversations (the agent asks
//! for the order, the customer gives it, the refund is made), at each level
//! of `--clients`. Prints one table; writes `load.json` for the plot. Bounded
//! in conversations and in time; touches nothing outside 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use refund_chat_local::runtime_api::RuntimeApi;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

const EVENT: &str = include_str!("../../../events/refund.json");

#[derive(clap::Parser)]
#[command(name = "refund-chat-load")]
struct Cli {
    /// The function's bootstrap.
    bootstrap: PathBuf,
    /// Concurrent customers, one level after another.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    clients: Vec<usize>,
    /// Conversations (two turns each) per level.
    #[arg(long, default_value_t = 24)]
    conversations: usize,
    /// Function containers.
    #[arg(long, default_value_t = 4)]
    functions: usize,
    /// The model's latency per call, mean and jitter (uniform), in ms.
    #[arg(long, default_value_t = 800)]
    latency_ms: u64,
    #[arg(long, default_value_t = 300)]
    jitter_ms: u64,
    /// The model's requests-per-minute limit (none by default).
    #[arg(long)]
    model_rpm: Option<usize>,
    /// Seconds the whole run may take.
    #[arg(long, default_value_t = 600)]
    time_limit: u64,
    /// Where load.json goes.
    #[arg(long, default_value = "target/load")]
    out: PathBuf,
}

/// One turn as a customer saw it.
struct Turn {
    status: u16,
    latency: Duration,
}

fn event(customer: &str, body: &Value, key: &str) -> Bytes {
    let mut event: Value = serde_json::from_str(EVENT).unwrap_or(Value::Null);
    event["body"] = Value::String(body.to_string());
    event["requestContext"]["authorizer"] = json!({"claims": {"sub": customer}});
    event["headers"]["Idempotency-Key"] = json!(key);
    event["multiValueHeaders"]["Idempotency-Key"] = json!([key]);
    Bytes::from(event.to_string())
}

/// The status and body of an invocation's API Gateway answer.
fn answer(result: Result<Bytes, Bytes>) -> (u16, Value) {
    let answer: Value = result
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    let body = answer["body"]
        .as_str()
        .and_then(|body| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null);
    (answer["statusCode"].as_u64().unwrap_or(0) as u16, body)
}

/// One customer's conversation: a refund in two messages.
async fn conversation(api: &RuntimeApi, customer: &str, order: &str) -> Vec<Turn> {
    let mut turns = Vec::new();
    let first = json!({"user_id": customer, "message": "My vase arrived broken, please refund 12.50"});
    let started = Instant::now();
    let (status, body) = answer(api.invoke(event(customer, &first, &format!("{customer}-1"))).await.0);
    turns.push(Turn {
        status,
        latency: started.elapsed(),
    });
    let Some(id) = body["conversation_id"].as_str() else {
        return turns;
    };
    let second = json!({"user_id": customer, "message": format!("It is order {order}."), "conversation_id": id});
    let started = Instant::now();
    let (status, _) = answer(api.invoke(event(customer, &second, &format!("{customer}-2"))).await.0);
    turns.push(Turn {
        status,
        latency: started.elapsed(),
    });
    turns
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    values.sort();
    values
        .get(((values.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let cli = <Cli as clap::Parser>::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let deadline = Instant::now() + Duration::from_secs(cli.time_limit);
    let moto = refund_chat_local::moto::Moto::start(&root)?;
    let aws = refund_chat_testkit::aws_at(&moto.endpoint).await;
    let table = "load-ledger";
    refund_chat_testkit::set_up_local_aws(&aws, table, "refund-chat/openai-api-key", "sk-load").await?;

    // Every conversation its own customer and order, so only the load decides.
    let customers: Vec<Vec<(String, String)>> = cli
        .clients
        .iter()
        .enumerate()
        .map(|(level, _)| {
            (0..cli.conversations)
                .map(|n| (format!("ld-{level}-{n}"), format!("L-{}", 100_000 + level * 1000 + n)))
                .collect()
        })
        .collect();
    let seed: Vec<(&str, &str, u64, u64)> = customers
        .iter()
        .flatten()
        .map(|(customer, order)| (order.as_str(), customer.as_str(), 5000, 0))
        .collect();
    let sandbox = refund_chat_local::payments_sandbox::Sandbox::with_orders(&seed, None)?;
    let payments = refund_chat_local::spawn(0, sandbox.router()).await?;
    let mut model = refund_chat_local::local_model::LocalModel::new(None).with_latency(
        Duration::from_millis(cli.latency_ms),
        Duration::from_millis(cli.jitter_ms),
    );
    if let Some(rpm) = cli.model_rpm {
        model = model.with_rate_limit(rpm);
    }
    let model = refund_chat_local::spawn(0, model.router()).await?;
    let api = RuntimeApi::with_timeout(Duration::from_secs(60));
    let api_address = refund_chat_local::spawn(0, api.router()).await?;
    std::fs::create_dir_all(&cli.out)?;
    let mut functions = Vec::new();
    for n in 0..cli.functions {
        let log = std::fs::File::create(cli.out.join(format!("function-{n}.log")))?;
        functions.push(
            tokio::process::Command::new(&cli.bootstrap)
                .env_clear()
                .envs(refund_chat_local::runtime_api::lambda_environment(api_address))
                .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", &moto.endpoint)
                .env("AWS_ENDPOINT_URL_DYNAMODB", &moto.endpoint)
                .env("OPENAI_API_KEY_SECRET_ID", "refund-chat/openai-api-key")
                .env("OPENAI_BASE_URL", format!("http://{model}/v1"))
                .env("PAYMENTS_BASE_URL", format!("http://{payments}"))
                .env("ORDERS_BASE_URL", format!("http://{payments}"))
                .env("LEDGER_TABLE", table)
                .env("CONVERSATION_TABLE", refund_chat_testkit::conversation_table(table))
                .env("USER_IDENTITY", "authorizer")
                .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
                .stdout(Stdio::from(log))
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()?,
        );
    }

    let mut levels = Vec::new();
    for (level, clients) in cli.clients.iter().copied().enumerate() {
        if Instant::now() >= deadline {
            eprintln!("time limit reached: later levels not run");
            break;
        }
        let queue = std::sync::Arc::new(std::sync::Mutex::new(customers[level].clone()));
        let started = Instant::now();
        let workers: Vec<_> = (0..clients.max(1))
            .map(|_| {
                let (api, queue) = (api.clone(), std::sync::Arc::clone(&queue));
                tokio::spawn(async move {
                    let mut turns = Vec::new();
                    while let Some((customer, order)) = queue.lock().ok().and_then(|mut q| q.pop()) {
                        turns.extend(conversation(&api, &customer, &order).await);
                    }
                    turns
                })
            })
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        let mut turns = Vec::new();
        for worker in workers {
            match tokio::time::timeout(left, worker).await {
                Ok(Ok(done)) => turns.extend(done),
                _ => eprintln!("a client did not finish in time"),
            }
        }
        let elapsed = started.elapsed();
        let mut latencies: Vec<Duration> = turns.iter().map(|t| t.latency).collect();
        let share =
            |status: u16| turns.iter().filter(|t| t.status == status).count() as f64 / turns.len().max(1) as f64;
        levels.push(json!({
            "clients": clients,
            "turns": turns.len(),
            "seconds": elapsed.as_secs_f64(),
            "turns_per_second": turns.len() as f64 / elapsed.as_secs_f64(),
            "p50_ms": percentile(&mut latencies, 0.5).as_secs_f64() * 1000.0,
            "p99_ms": percentile(&mut latencies, 0.99).as_secs_f64() * 1000.0,
            "share_200": share(200),
            "share_429": share(429),
            "share_502": share(502),
        }));
    }
    for function in &mut functions {
        if let Some(pid) = function.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), function.wait()).await;
    }

    // The cost of the turns, from the function's own summary lines.
    let (mut turns, mut model_usd, mut duration_ms) = (0u64, 0f64, 0f64);
    for n in 0..cli.functions {
        let text = std::fs::read_to_string(cli.out.join(format!("function-{n}.log")))?;
        for line in text.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()) {
            if line["event"] == "summary" {
                turns += 1;
                model_usd += line["estimated_cost_usd"].as_f64().unwrap_or(0.0);
                duration_ms += line["duration_ms"].as_f64().unwrap_or(0.0);
            }
        }
    }
    let per_thousand = |usd: f64| usd / turns.max(1) as f64 * 1000.0;
    // Lambda at 128 MB arm64 (GB-seconds of the measured durations, plus requests).
    let lambda_usd = duration_ms / 1000.0 * 0.125 * 0.000_013_333_4 + turns as f64 * 0.000_000_2;
    let report = json!({
        "latency_ms": cli.latency_ms,
        "jitter_ms": cli.jitter_ms,
        "model_rpm": cli.model_rpm,
        "functions": cli.functions,
        "levels": levels,
        "turns_logged": turns,
        "model_usd_per_1000_turns": per_thousand(model_usd),
        "lambda_usd_per_1000_turns": per_thousand(lambda_usd),
    });
    std::fs::write(cli.out.join("load.json"), serde_json::to_string_pretty(&report)?)?;
    println!(
        "model latency {} ± {} ms, {} containers, model rate limit {}\n",
        cli.latency_ms,
        cli.jitter_ms,
        cli.functions,
        cli.model_rpm.map_or("none".to_owned(), |rpm| format!("{rpm}/min"))
    );
    println!("| clients | turns | turns/s | p50 | p99 | 200 | 429 | 502 |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for level in report["levels"].as_array().into_iter().flatten() {
        println!(
            "| {} | {} | {:.2} | {:.0} ms | {:.0} ms | {:.0}% | {:.0}% | {:.0}% |",
            level["clients"],
            level["turns"],
            level["turns_per_second"].as_f64().unwrap_or(0.0),
            level["p50_ms"].as_f64().unwrap_or(0.0),
            level["p99_ms"].as_f64().unwrap_or(0.0),
            level["share_200"].as_f64().unwrap_or(0.0) * 100.0,
            level["share_429"].as_f64().unwrap_or(0.0) * 100.0,
            level["share_502"].as_f64().unwrap_or(0.0) * 100.0,
        );
    }
    println!(
        "\nfrom {turns} summary lines: model ${:.4} and Lambda ${:.4} per 1,000 turns (the local model reports a fixed usage: see docs/capacity.md for a real one)",
        per_thousand(model_usd),
        per_thousand(lambda_usd)
    );
    Ok(())
}
