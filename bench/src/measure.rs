//! Running the function and measuring it: cold starts, warm turns (CPU, RSS,
//! connections), the emulator's floor, and the bootstrap's size. Nothing here
//! judges a figure; [`crate::report`] does.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use axum::body::Bytes;
use tokio::process::{Child, Command};

use crate::Error;
use crate::procfs;
use crate::stand_ins::{self, Meter};
use refund_chat_local::runtime_api::RuntimeApi;

pub struct StandIns {
    pub openai: (SocketAddr, Meter),
    pub payments: (SocketAddr, Meter),
    pub secrets: (SocketAddr, Meter),
    pub dynamodb: (SocketAddr, Meter),
    /// `RESPONSE_MODE` of the functions started from now on (contract 20).
    pub response_mode: std::sync::Mutex<&'static str>,
}

impl StandIns {
    /// From now on, functions answer in `mode` (`streaming` or `buffered`).
    pub fn answer_in(&self, mode: &'static str) {
        if let Ok(mut current) = self.response_mode.lock() {
            *current = mode;
        }
    }

    fn mode(&self) -> &'static str {
        self.response_mode.lock().map(|mode| *mode).unwrap_or("streaming")
    }

    pub async fn start() -> Result<Self, Error> {
        let meters = [Meter::default(), Meter::default(), Meter::default(), Meter::default()];
        let [openai, payments, secrets, dynamodb] = meters;
        Ok(StandIns {
            openai: (serve(stand_ins::openai(&openai)).await?, openai),
            payments: (serve(stand_ins::payments(&payments)).await?, payments),
            secrets: (serve(stand_ins::secrets(&secrets)).await?, secrets),
            dynamodb: (serve(stand_ins::dynamodb(&dynamodb)).await?, dynamodb),
            response_mode: std::sync::Mutex::new("streaming"),
        })
    }

    /// The stand-ins' own handler time so far, all together.
    fn busy_ns(&self) -> u64 {
        [&self.openai.1, &self.payments.1, &self.secrets.1, &self.dynamodb.1]
            .iter()
            .map(|meter| meter.busy_ns())
            .sum()
    }
}

async fn serve(router: axum::Router) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    // As a real provider's servers do: a stream's small chunks go out as
    // they are written, not held back by Nagle for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
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
        .envs(refund_chat_local::runtime_api::lambda_environment(runtime_api))
        .env(
            "AWS_ENDPOINT_URL_SECRETS_MANAGER",
            format!("http://{}", stand_ins.secrets.0),
        )
        .env("AWS_ENDPOINT_URL_DYNAMODB", format!("http://{}", stand_ins.dynamodb.0))
        .env("OPENAI_API_KEY_SECRET_ID", "bench")
        .env("OPENAI_BASE_URL", format!("http://{}/v1", stand_ins.openai.0))
        .env("PAYMENTS_BASE_URL", format!("http://{}", stand_ins.payments.0))
        .env("ORDERS_BASE_URL", format!("http://{}", stand_ins.payments.0))
        .env("LEDGER_TABLE", "bench-ledger")
        .env("CONVERSATION_TABLE", "bench-conversations")
        .env("RESPONSE_MODE", stand_ins.mode())
        // One customer sends every turn: the budget must not be what is measured.
        .env("CUSTOMER_TURNS_PER_HOUR", "100000000")
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
    Ok(Command::new(std::env::current_exe()?.with_file_name("noop-runtime"))
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string())
        .kill_on_drop(true)
        .spawn()?)
}

/// Invokes with `event` and checks that the function answered 200 with a
/// reply (a benchmark of wrong answers would measure nothing).
async fn refund_turn(api: &RuntimeApi, event: Bytes) -> Result<Duration, Error> {
    Ok(timed_turn(api, event).await?.0)
}

/// The same, with when the first `delta` of an event stream arrived, and when the request was sent.
async fn timed_turn(
    api: &RuntimeApi,
    event: Bytes,
) -> Result<(Duration, Option<std::time::Instant>, std::time::Instant), Error> {
    // The bench's one read is of an id no turn issued: its answer is the 404.
    let read = serde_json::from_slice::<serde_json::Value>(&event).is_ok_and(|e| e["httpMethod"] == "GET");
    let sent = std::time::Instant::now();
    let (id, answer, latency) = api.invoke_with_id(event).await;
    let first_delta = api.first_delta(&id);
    let answer = answer.map_err(|e| format!("the function failed: {}", String::from_utf8_lossy(&e)))?;
    let text = String::from_utf8_lossy(&answer);
    let expected = if read {
        text.contains(r#""statusCode":404"#) && text.contains("does not exist")
    } else {
        text.contains(r#""statusCode":200"#) && text.contains("reply")
    };
    if !expected {
        return Err(format!("unexpected answer: {text}").into());
    }
    Ok((latency, first_delta, sent))
}

/// The emulator's own round trip, with a runtime that does nothing.
pub async fn floor(event: &Bytes, turns: usize) -> Result<Vec<Duration>, Error> {
    let (api, address) = start_runtime_api().await?;
    let _noop = spawn_noop(address)?;
    let mut latencies = Vec::with_capacity(turns);
    for _ in 0..turns + 10 {
        latencies.push(api.invoke(event.clone()).await.1);
    }
    Ok(latencies.split_off(10))
}

/// Process start to first answer, `runs` times.
pub async fn cold_starts(
    bootstrap: &Path,
    stand_ins: &StandIns,
    event: &Bytes,
    runs: usize,
) -> Result<Vec<Duration>, Error> {
    let mut starts = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (api, address) = start_runtime_api().await?;
        // The event waits in the queue, so the figure is process start to first answer.
        let event = event.clone();
        let invocation = tokio::spawn(async move { refund_turn(&api, event).await.map_err(|e| e.to_string()) });
        let started = std::time::Instant::now();
        let mut function = spawn_function(bootstrap, address, stand_ins)?;
        invocation.await??;
        starts.push(started.elapsed());
        stop(&mut function).await?;
    }
    Ok(starts)
}

pub struct Warm {
    pub latency: Vec<Duration>,
    /// Latency minus the stand-ins' own handler time.
    pub added: Vec<Duration>,
    pub cpu_per_turn: Duration,
    /// The share of that CPU time spent in user space (the rest is the kernel).
    pub user_share: f64,
    pub peak_rss_kib: u64,
    pub openai_connections: usize,
    pub openai_requests: u64,
    pub dynamodb_connections: usize,
    pub dynamodb_requests: u64,
    /// Event-stream mode: from the model's first content chunk written to the
    /// first `delta` read by the client (the function's own added latency).
    pub first_word_added: Vec<Duration>,
    /// From the request to the first `delta`.
    pub first_word: Vec<Duration>,
    /// From the routing call's arrival at the model to the agent's first
    /// call's (contract 21): what routing adds to a turn besides the
    /// model's own time.
    pub routing_added: Vec<Duration>,
}

/// One warm container answering `events` in turn, after a first (cold) one.
pub async fn warm(bootstrap: &Path, stand_ins: &StandIns, events: Vec<Bytes>) -> Result<Warm, Error> {
    let turns = events.len().saturating_sub(1).max(1);
    let (api, address) = start_runtime_api().await?;
    let (openai_connections, openai_requests) = (stand_ins.openai.1.connections(), stand_ins.openai.1.requests());
    let (dynamodb_connections, dynamodb_requests) =
        (stand_ins.dynamodb.1.connections(), stand_ins.dynamodb.1.requests());
    let mut function = spawn_function(bootstrap, address, stand_ins)?;
    let pid = function.id().ok_or("the function exited at once")?;
    let mut events = events.into_iter();
    refund_turn(&api, events.next().ok_or("no events")?).await?; // the cold start, not measured here

    let cpu_before = procfs::cpu_ns(pid);
    let ticks_before = procfs::cpu_ticks(pid);
    let mut latency = Vec::with_capacity(turns);
    let mut added = Vec::with_capacity(turns);
    let (mut first_word_added, mut first_word, mut routing_added) = (Vec::new(), Vec::new(), Vec::new());
    for event in events {
        let busy_before = stand_ins.busy_ns();
        let (took, first_delta, sent) = timed_turn(&api, event).await?;
        let first_content = stand_ins.openai.1.first_content();
        if let (Some(delta), Some(content)) = (first_delta, first_content) {
            first_word_added.push(delta.saturating_duration_since(content));
            first_word.push(delta.saturating_duration_since(sent));
        }
        routing_added.extend(stand_ins.openai.1.routing_gap());
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
        openai_connections: stand_ins.openai.1.connections() - openai_connections,
        openai_requests: stand_ins.openai.1.requests() - openai_requests,
        dynamodb_connections: stand_ins.dynamodb.1.connections() - dynamodb_connections,
        dynamodb_requests: stand_ins.dynamodb.1.requests() - dynamodb_requests,
        first_word_added,
        first_word,
        routing_added,
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
pub fn sizes(bootstrap: &Path) -> Result<(u64, u64), Error> {
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
