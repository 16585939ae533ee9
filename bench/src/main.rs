//! `make bench`: what a refund turn costs besides the model.
//!
//! Drives the release bootstrap through a Lambda Runtime API emulator, against
//! zero-latency stand-ins for OpenAI, payments and Secrets Manager on
//! 127.0.0.1, and prints one table. The emulator's own floor is measured with
//! a no-op runtime client (this binary, `noop-runtime`) and subtracted, as is
//! the stand-ins' own handler time. Figures are printed, never asserted.
//!
//! usage: refund-chat-bench BOOTSTRAP [--cold N] [--warm N]

mod procfs;
mod runtime_api;
mod stand_ins;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::body::Bytes;
use runtime_api::RuntimeApi;
use stand_ins::Meter;
use tokio::process::{Child, Command};

const EVENT: &str = include_str!("../../events/refund.json");

type Error = Box<dyn std::error::Error>;

// One thread, like the function: on 2 cores, a multi-threaded bench would
// compete with the process it measures.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("noop-runtime") {
        return noop_runtime().await;
    }
    let Some(bootstrap) = args.first().map(PathBuf::from) else {
        return Err("usage: refund-chat-bench BOOTSTRAP [--cold N] [--warm N]".into());
    };
    let count = |name: &str, default: usize| -> Result<usize, Error> {
        match args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)) {
            Some(n) => Ok(n.parse()?),
            None => Ok(default),
        }
    };
    let (cold_runs, warm_turns) = (count("--cold", 21)?, count("--warm", 2000)?);

    let stand_ins = StandIns::start().await?;
    let floor = measure_floor(warm_turns).await?;
    let cold = measure_cold_starts(&bootstrap, &stand_ins, cold_runs).await?;
    let warm = measure_warm(&bootstrap, &stand_ins, warm_turns).await?;
    let (raw, zipped) = sizes(&bootstrap)?;
    print_table(&Figures {
        cold,
        floor,
        warm,
        raw,
        zipped,
        cold_runs,
        warm_turns,
    });
    Ok(())
}

struct StandIns {
    openai: (SocketAddr, Meter),
    payments: (SocketAddr, Meter),
    secrets: (SocketAddr, Meter),
}

impl StandIns {
    async fn start() -> Result<Self, Error> {
        let (openai, payments, secrets) = (Meter::default(), Meter::default(), Meter::default());
        Ok(StandIns {
            openai: (serve(stand_ins::openai(&openai)).await?, openai),
            payments: (serve(stand_ins::payments(&payments)).await?, payments),
            secrets: (serve(stand_ins::secrets(&secrets)).await?, secrets),
        })
    }

    /// The stand-ins' own handler time so far, all three together.
    fn busy_ns(&self) -> u64 {
        self.openai.1.busy_ns() + self.payments.1.busy_ns() + self.secrets.1.busy_ns()
    }
}

async fn serve(router: axum::Router) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await;
    });
    Ok(address)
}

async fn start_runtime_api() -> Result<(RuntimeApi, SocketAddr), Error> {
    let api = RuntimeApi::new();
    let address = serve(api.router()).await?;
    Ok((api, address))
}

/// The function as Lambda starts it: a clean environment, the Runtime API
/// address, and the contract's configuration pointing at the stand-ins.
fn spawn_function(bootstrap: &Path, runtime_api: SocketAddr, stand_ins: &StandIns) -> Result<Child, Error> {
    Ok(Command::new(bootstrap)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "refund-chat")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env(
            "AWS_ENDPOINT_URL_SECRETS_MANAGER",
            format!("http://{}", stand_ins.secrets.0),
        )
        .env("OPENAI_API_KEY_SECRET_ID", "bench")
        .env("OPENAI_BASE_URL", format!("http://{}/v1", stand_ins.openai.0))
        .env("PAYMENTS_BASE_URL", format!("http://{}", stand_ins.payments.0))
        // As template.yaml does on Lambda: one bundle, not the bundle plus a directory.
        .env(
            "SSL_CERT_FILE",
            std::env::var("SSL_CERT_FILE").unwrap_or_else(|_| "/etc/ssl/certs/ca-certificates.crt".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?)
}

fn spawn_noop(runtime_api: SocketAddr) -> Result<Child, Error> {
    Ok(Command::new(std::env::current_exe()?)
        .arg("noop-runtime")
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string())
        .kill_on_drop(true)
        .spawn()?)
}

/// Invokes with the refund event and checks that the function answered 200
/// with a reply (a benchmark of wrong answers would measure nothing).
async fn refund_turn(api: &RuntimeApi) -> Result<Duration, Error> {
    let (answer, latency) = api.invoke(Bytes::from_static(EVENT.as_bytes())).await;
    let answer = answer.map_err(|e| format!("the function failed: {}", String::from_utf8_lossy(&e)))?;
    let text = String::from_utf8_lossy(&answer);
    if !(text.contains(r#""statusCode":200"#) && text.contains("reply")) {
        return Err(format!("unexpected answer: {text}").into());
    }
    Ok(latency)
}

async fn measure_floor(turns: usize) -> Result<Vec<Duration>, Error> {
    let (api, address) = start_runtime_api().await?;
    let _noop = spawn_noop(address)?;
    let mut latencies = Vec::with_capacity(turns);
    for _ in 0..turns + 10 {
        latencies.push(api.invoke(Bytes::from_static(EVENT.as_bytes())).await.1);
    }
    Ok(latencies.split_off(10))
}

async fn measure_cold_starts(bootstrap: &Path, stand_ins: &StandIns, runs: usize) -> Result<Vec<Duration>, Error> {
    let mut starts = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (api, address) = start_runtime_api().await?;
        // The event waits in the queue, so the figure is process start to first answer.
        let invocation = tokio::spawn(async move { refund_turn(&api).await.map_err(|e| e.to_string()) });
        let started = std::time::Instant::now();
        let mut function = spawn_function(bootstrap, address, stand_ins)?;
        invocation.await??;
        starts.push(started.elapsed());
        stop(&mut function).await?;
    }
    Ok(starts)
}

struct Warm {
    latency: Vec<Duration>,
    added: Vec<Duration>,
    cpu_per_turn: Duration,
    /// The share of that CPU time spent in user space (the rest is the kernel).
    user_share: f64,
    peak_rss_kib: u64,
    openai_connections: usize,
    openai_requests: u64,
}

async fn measure_warm(bootstrap: &Path, stand_ins: &StandIns, turns: usize) -> Result<Warm, Error> {
    let (api, address) = start_runtime_api().await?;
    let connections_before = stand_ins.openai.1.connections();
    let requests_before = stand_ins.openai.1.requests();
    let mut function = spawn_function(bootstrap, address, stand_ins)?;
    let pid = function.id().ok_or("the function exited at once")?;
    refund_turn(&api).await?; // the cold start, not measured here

    let cpu_before = procfs::cpu_ns(pid);
    let ticks_before = procfs::cpu_ticks(pid);
    let mut latency = Vec::with_capacity(turns);
    let mut added = Vec::with_capacity(turns);
    for _ in 0..turns {
        let busy_before = stand_ins.busy_ns();
        let took = refund_turn(&api).await?;
        let stand_in_time = Duration::from_nanos(stand_ins.busy_ns() - busy_before);
        latency.push(took);
        added.push(took.saturating_sub(stand_in_time));
    }
    let cpu_per_turn = Duration::from_nanos((procfs::cpu_ns(pid) - cpu_before) / turns as u64);
    let ticks_after = procfs::cpu_ticks(pid);
    let (user, system) = (ticks_after.0 - ticks_before.0, ticks_after.1 - ticks_before.1);
    let user_share = if user + system == 0 {
        0.0
    } else {
        user as f64 / (user + system) as f64
    };
    let peak_rss_kib = procfs::peak_rss_kib(pid);
    stop(&mut function).await?;
    Ok(Warm {
        latency,
        added,
        cpu_per_turn,
        user_share,
        peak_rss_kib,
        openai_connections: stand_ins.openai.1.connections() - connections_before,
        openai_requests: stand_ins.openai.1.requests() - requests_before,
    })
}

/// Stops the function as Lambda does, with SIGTERM, so that a wrapper such as
/// `perf record` can finish its output; SIGKILL if it lingers.
async fn stop(function: &mut Child) -> Result<(), Error> {
    if let Some(pid) = function.id() {
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        if tokio::time::timeout(Duration::from_secs(10), function.wait())
            .await
            .is_ok()
        {
            return Ok(());
        }
    }
    Ok(function.kill().await?)
}

/// The bootstrap's size, raw and as a Lambda deployment zip (deflate, via Python's zipfile).
fn sizes(bootstrap: &Path) -> Result<(u64, u64), Error> {
    let raw = std::fs::metadata(bootstrap)?.len();
    let zip = std::env::temp_dir().join(format!("refund-chat-bench-{}.zip", std::process::id()));
    let status = std::process::Command::new("python3")
        .args(["-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED).write(sys.argv[2], 'bootstrap')"])
        .arg(&zip)
        .arg(bootstrap)
        .status()?;
    if !status.success() {
        return Err("zipping the bootstrap failed".into());
    }
    let zipped = std::fs::metadata(&zip)?.len();
    std::fs::remove_file(&zip)?;
    Ok((raw, zipped))
}

/// A no-op Lambda function: takes each event and answers at once. Its latency
/// is the emulator's floor.
async fn noop_runtime() -> Result<(), Error> {
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API")?;
    let client = reqwest::Client::new();
    loop {
        let event = client
            .get(format!("http://{api}/2018-06-01/runtime/invocation/next"))
            .send()
            .await?;
        let id = event
            .headers()
            .get("lambda-runtime-aws-request-id")
            .ok_or("no request id")?
            .to_str()?
            .to_owned();
        let _ = event.bytes().await?;
        client
            .post(format!("http://{api}/2018-06-01/runtime/invocation/{id}/response"))
            .body(r#"{"statusCode":200}"#)
            .send()
            .await?;
    }
}

struct Figures {
    cold: Vec<Duration>,
    floor: Vec<Duration>,
    warm: Warm,
    raw: u64,
    zipped: u64,
    cold_runs: usize,
    warm_turns: usize,
}

fn percentile(values: &[Duration], p: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn print_table(f: &Figures) {
    let floor = percentile(&f.floor, 0.5);
    let own_work: Vec<Duration> = f.warm.added.iter().map(|d| d.saturating_sub(floor)).collect();
    let mib = |bytes: u64| format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0));
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    let cold = percentile(&f.cold, 0.5);
    let rss = f.warm.peak_rss_kib * 1024;
    let rows = [
        (
            format!("cold start to first answer, median of {}", f.cold_runs),
            ms(cold),
            "< 15 ms",
            verdict(cold < Duration::from_millis(15)),
        ),
        (
            format!("warm refund turn latency p50 ({} turns)", f.warm_turns),
            ms(percentile(&f.warm.latency, 0.5)),
            "",
            "",
        ),
        (
            "warm refund turn latency p99".into(),
            ms(percentile(&f.warm.latency, 0.99)),
            "",
            "",
        ),
        ("runtime emulator floor p50 (no-op runtime)".into(), ms(floor), "", ""),
        (
            "added beyond stand-ins p50".into(),
            ms(percentile(&f.warm.added, 0.5)),
            "",
            "",
        ),
        (
            "function's own work p50 (beyond stand-ins and floor)".into(),
            ms(percentile(&own_work, 0.5)),
            "< 0.35 ms",
            verdict(percentile(&own_work, 0.5) < Duration::from_micros(350)),
        ),
        (
            "function's own work p99".into(),
            ms(percentile(&own_work, 0.99)),
            "",
            "",
        ),
        (
            "CPU time per turn".into(),
            ms(f.warm.cpu_per_turn),
            "< 0.4 ms",
            verdict(f.warm.cpu_per_turn < Duration::from_micros(400)),
        ),
        (
            "  of which user space / kernel".into(),
            format!(
                "{} / {}",
                ms(f.warm.cpu_per_turn.mul_f64(f.warm.user_share)),
                ms(f.warm.cpu_per_turn.mul_f64(1.0 - f.warm.user_share))
            ),
            "",
            "",
        ),
        (
            "peak RSS after the warm loop".into(),
            mib(rss),
            "< 16 MiB",
            verdict(rss < 16 * 1024 * 1024),
        ),
        (
            format!("TCP connections to OpenAI ({} requests)", f.warm.openai_requests),
            f.warm.openai_connections.to_string(),
            "1",
            verdict(f.warm.openai_connections == 1),
        ),
        ("bootstrap size".into(), mib(f.raw), "", ""),
        (
            "bootstrap size, zipped".into(),
            mib(f.zipped),
            "< 8 MB",
            verdict(f.zipped < 8_000_000),
        ),
    ];
    println!("| figure | measured | target | |");
    println!("| --- | --- | --- | --- |");
    for (name, value, target, verdict) in rows {
        println!("| {name} | {value} | {target} | {verdict} |");
    }
}
