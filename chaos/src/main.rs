//! `make chaos`: the function run as Lambda runs it (several containers on a
//! Runtime API), under a chaotic model, a faulty payments service, a faulty
//! DynamoDB and impatient customers, all at once; then the books are checked.
//! Only 127.0.0.1; bounded in requests and time.
//!
//! usage: refund-chat-chaos [--seed N] [--requests N] [--clients N]
//!        [--functions N] [--bootstrap PATH] [--time-limit SECS]
//!
//! Each segment's verdicts are printed as it ends, so a run stopped by its
//! time limit (by default 120 s plus 0.4 s a request) still shows what it
//! checked, with the table of the segments it finished. Exits 1 on any
//! violated invariant or when the time limit stopped it, printing the seed
//! to replay it.

mod checks;
mod clients;
mod faults;
mod model;
mod rng;
mod staff;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use clients::{Clients, Shop};
use faults::{Fault, Faulty};
use refund_chat_local::payments_sandbox::Sandbox;
use refund_chat_local::runtime_api::RuntimeApi;
use rng::Rng;

type Error = Box<dyn std::error::Error>;

/// The function's settings for the run: short timeouts, so faults cost little time.
const COMPLETION_TIMEOUT: Duration = Duration::from_millis(400);
const PAYMENTS_TIMEOUT: Duration = Duration::from_millis(300);
const ORDERS_TIMEOUT: Duration = Duration::from_millis(200);
const REFUND_WINDOW_DAYS: u64 = 30;
/// moto answers one request at a time, and its transactions copy the tables
/// they touch: under six clients and five containers an answer takes a
/// few hundred milliseconds at times, which at 0.3 s made most requests a
/// 503 of the way out rather than a turn.
const LEDGER_TIMEOUT: Duration = Duration::from_millis(800);
/// One live poke's publish timeout (contract 31): a slow Event API is cut off at it.
const LIVE_PUBLISH_TIMEOUT: Duration = Duration::from_millis(300);
const AUTO_REFUND_LIMIT: u64 = 5000;
const DAILY_LIMIT: u64 = 10000;
const ORDER_WINDOW: Duration = Duration::from_secs(24 * 3600);
const TURNS_PER_HOUR: u64 = 16;
/// A turn reserves its worst case (about 120,000 tokens with the default
/// window and output limit) and a dead turn keeps it: five of them fit, so
/// that concurrent turns of one customer meet each other's reservations
/// without one killed container ending that customer's day.
const TOKENS_PER_DAY: u64 = 600_000;
/// All visitors' tokens a day: a few turns' worth, spent early in a run.
const VISITOR_TOKENS_PER_DAY: u64 = 60_000;

/// `make chaos`: the function under a misbehaving model, payments, DynamoDB and customers.
#[derive(clap::Parser)]
#[command(name = "refund-chat-chaos")]
struct Args {
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    /// Customers at their keyboards, at once.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// Function containers on the Runtime API.
    #[arg(long, default_value_t = 4)]
    functions: usize,
    /// The function's bootstrap.
    #[arg(long, default_value_os_t = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/refund-chat"))]
    bootstrap: PathBuf,
    /// Seconds the whole run may take (default: 120 plus 0.4 a request).
    #[arg(long = "time-limit")]
    time_limit_secs: Option<u64>,
    /// Requests per segment: each segment is a fresh stack (moto's memory
    /// grows with every transaction it has seen, about 1.4 MB each, so one
    /// moto cannot hold a long run), checked on its own books.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    segment: u64,
    /// Start at this segment (its seed is `seed × 1000 + segment`): a
    /// violation found in one segment is replayed without the ones before.
    #[arg(long = "from-segment", default_value_t = 0)]
    from_segment: usize,
}

/// What the payments service does wrong, per request.
fn payments_fault(rng: &mut Rng) -> Fault {
    match rng.below(100) {
        0..=59 => Fault::None,
        60..=67 => Fault::RefuseBefore(409, r#"{"detail":"chaos: the refund was declined"}"#),
        68..=75 => Fault::DelayAfter(PAYMENTS_TIMEOUT + Duration::from_millis(200)),
        76..=83 => Fault::DropAfter,
        84..=91 => Fault::ReplaceAfter(500, r#"{"detail":"chaos: failed after the refund was made"}"#),
        _ => Fault::ReplaceAfter(200, r#"{"not":"a receipt"}"#),
    }
}

/// What the order system (the sandbox, behind the proxy) does wrong, per
/// read: down, slow, a 5xx, an answer that is not an order. A read is
/// retried once, so a fault shows only when both tries meet one.
fn orders_fault(rng: &mut Rng) -> Fault {
    match rng.below(100) {
        0..=69 => Fault::None,
        70..=77 => Fault::DropBefore,
        78..=85 => Fault::DelayAfter(ORDERS_TIMEOUT + Duration::from_millis(200)),
        86..=91 => Fault::RefuseBefore(503, r#"{"detail":"chaos: the order system is down"}"#),
        92..=93 => Fault::ReplaceAfter(200, r#"{"not":"an order"}"#),
        // Answers that parse and must still not be believed (contract 16).
        94..=95 => Fault::OtherOrder,
        96..=97 => Fault::FutureDelivery,
        _ => Fault::HugeBody,
    }
}

/// What AppSync Events (the stand-in, behind the proxy) does wrong, per
/// publish (contract 31): down, slow past the publish's timeout, a 500, or
/// a 200 whose answer lists the event as failed. None changes an answer.
fn live_fault(rng: &mut Rng) -> Fault {
    match rng.below(100) {
        0..=59 => Fault::None,
        60..=69 => Fault::DropBefore,
        70..=79 => Fault::DelayBefore(LIVE_PUBLISH_TIMEOUT + Duration::from_millis(200)),
        80..=89 => Fault::RefuseBefore(500, r#"{"errors":[{"errorType":"InternalFailure"}]}"#),
        _ => Fault::ReplaceAfter(200, r#"{"successful":[],"failed":[{"identifier":"chaos","index":0}]}"#),
    }
}

/// What DynamoDB (moto, behind the proxy) does wrong, per request.
fn ledger_fault(rng: &mut Rng) -> Fault {
    const ERROR: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"chaos"}"#;
    // One operation in 100: a turn makes some fifteen of them (the key,
    // the budget, the conversation, the ledger), so at one in 25 nearly half
    // the requests met a fault before their turn (a 503) and the money path
    // was exercised a few hundred times a run; one in 100 leaves most of
    // them reaching a refund decision, with thousands of faults a run still.
    match rng.below(400) {
        0..=395 => Fault::None,
        396 => Fault::DelayBefore(LEDGER_TIMEOUT + Duration::from_millis(200)),
        397 => Fault::DropBefore,
        398 => match rng.below(2) {
            0 => Fault::RefuseBefore(500, ERROR),
            _ => Fault::ReplaceAfter(500, ERROR),
        },
        _ => Fault::DropAfter,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("chaos run failed to run: {error}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<bool, Error> {
    let args = <Args as clap::Parser>::parse();
    let started = Instant::now();
    let segment_size = args.segment as usize;
    let segments = args.requests.div_ceil(segment_size);
    println!(
        "chaos run: seed {}, {} requests in {segments} segment(s) of up to {}, {} clients, {} function containers",
        args.seed, args.requests, args.segment, args.clients, args.functions
    );
    let mut totals: Vec<checks::Invariant> = Vec::new();
    let mut sent = args.from_segment * segment_size;
    let mut first_violated: Option<usize> = None;
    let mut out_of_time = false;
    for segment in args.from_segment..segments {
        let requests = segment_size.min(args.requests.saturating_sub(sent)).max(1);
        let seed = args.seed.wrapping_mul(1000).wrapping_add(segment as u64);
        let (invariants, answered) = match segment_run(&args, seed, requests, started).await? {
            Segment::Checked(invariants, answered) => (invariants, answered),
            Segment::OutOfTime => {
                println!(
                    "\nthe time limit ({} s) stopped segment {segment}: the table below is of the {} segment(s) before it",
                    time_limit(&args).as_secs(),
                    segment - args.from_segment
                );
                out_of_time = true;
                break;
            }
        };
        sent += answered;
        if segments - args.from_segment > 1 {
            print_verdicts(&format!("segment {segment} (seed {seed})"), &invariants);
        }
        for invariant in invariants {
            if !invariant.violations.is_empty() {
                first_violated.get_or_insert(segment);
            }
            let violations: Vec<String> = invariant
                .violations
                .into_iter()
                .map(|v| format!("segment seed {seed}: {v}"))
                .collect();
            match totals.iter_mut().find(|t| t.name == invariant.name) {
                Some(total) => {
                    total.checked += invariant.checked;
                    total.violations.extend(violations);
                }
                None => totals.push(checks::Invariant {
                    name: invariant.name,
                    checked: invariant.checked,
                    violations,
                }),
            }
        }
    }
    println!();
    println!(
        "{sent} requests in {:.0} s, seed {}: every invariant over every{} segment",
        started.elapsed().as_secs_f64(),
        args.seed,
        if out_of_time { " finished" } else { "" }
    );
    let ok = print_verdicts("", &totals) && !out_of_time;
    for invariant in totals.iter().filter(|i| !i.violations.is_empty()) {
        println!("\nVIOLATED: {}", invariant.name);
        for violation in invariant.violations.iter().take(5) {
            println!("  {violation}");
        }
    }
    if out_of_time {
        println!("\nstopped by the time limit: raise --time-limit, or ask for fewer --requests");
    }
    if first_violated.is_some() {
        println!(
            "\nreplay with: cargo run -p refund-chat-chaos -- --seed {} --requests {} --segment {} --from-segment {} \
             (logs in target/chaos/)",
            args.seed,
            args.requests,
            args.segment,
            first_violated.unwrap_or_default()
        );
    }
    Ok(ok)
}

/// The run's time limit: as asked, or 120 s plus 0.4 s a request.
fn time_limit(args: &Args) -> Duration {
    Duration::from_secs(
        args.time_limit_secs
            .unwrap_or(120 + (args.requests as u64).saturating_mul(2) / 5),
    )
}

/// Prints `invariants` as a table headed by `title`; true if every one held.
fn print_verdicts(title: &str, invariants: &[checks::Invariant]) -> bool {
    println!();
    if !title.is_empty() {
        println!("{title}:");
    }
    println!("| invariant | checked | violations |");
    println!("| --- | --- | --- |");
    let mut held = true;
    for invariant in invariants {
        println!(
            "| {} | {} | {} |",
            invariant.name,
            invariant.checked,
            invariant.violations.len()
        );
        held &= invariant.violations.is_empty();
    }
    held
}

/// How a segment ended: its books checked (and the requests it sent), or
/// stopped by the run's time limit before they could be.
enum Segment {
    Checked(Vec<checks::Invariant>, usize),
    OutOfTime,
}

/// One segment: a fresh stack, `requests` requests, its books checked.
async fn segment_run(args: &Args, seed: u64, requests: usize, run_started: Instant) -> Result<Segment, Error> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let started = Instant::now();
    let logs = root.join(format!("target/chaos/seed-{seed}"));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs)?;

    let moto_server = refund_chat_local::moto::Moto::start(&root)?;
    let moto = moto_server.endpoint.clone();
    let table = format!("chaos-{seed}");
    let secret_key = format!("sk-chaos-{:016x}", Rng::derived(seed, &[0x5EC]).next());
    refund_chat_testkit::set_up_local_aws(
        &refund_chat_testkit::aws_at(&moto).await,
        &table,
        "refund-chat/openai-api-key",
        &secret_key,
    )
    .await
    .map_err(|e| e.to_string())?;

    let shop = Arc::new(Shop::new(seed, 40, 5));
    // A guest's order was placed with their e-mail and no customer id (contract 27).
    let seed_orders: Vec<(&str, &str, u64, u64)> = shop
        .orders
        .iter()
        .map(|(order, customer, paid)| {
            let owner = if refund_chat::guest::is_guest(customer) {
                ""
            } else {
                customer.as_str()
            };
            (order.as_str(), owner, *paid, 0)
        })
        .collect();
    let sandbox = Sandbox::with_orders(&seed_orders, None)?;
    for (order, customer, _) in &shop.orders {
        if let Some(email) = clients::email_of(customer) {
            sandbox.set_email(order, &email);
        }
    }
    // Each customer's last order has not shipped: its address may change (contract 26).
    for (order, _, _) in shop.orders.iter().filter(|(order, _, _)| order.ends_with("-4")) {
        sandbox.set_facts(order, "placed", 1, None);
    }
    let sandbox_address = refund_chat_local::spawn(0, sandbox.router()).await?;
    let payments = Faulty::new(format!("http://{sandbox_address}"), seed, payments_fault, false);
    let payments_address = payments.proxy.spawn().await?;
    let orders_proxy = Faulty::new(format!("http://{sandbox_address}"), seed ^ 0x0DE5, orders_fault, false);
    let orders_address = orders_proxy.proxy.spawn().await?;
    let ledger = Faulty::new(moto.clone(), seed ^ 0x1ED6E5, ledger_fault, true);
    let ledger_address = ledger.proxy.spawn().await?;
    // Live pokes (contract 31): the Event API's stand-in, which nobody
    // subscribes to here, behind a faulty proxy; it keeps what it heard.
    let event_api = refund_chat_local::event_api::EventApi::new(Arc::new(|_, _| {
        Box::pin(async { refund_chat::push::listen::AuthorizerResponse::refused() })
    }));
    let event_api_address = refund_chat_local::event_api::spawn(0, Arc::clone(&event_api)).await?;
    let live = Faulty::new(format!("http://{event_api_address}"), seed ^ 0x11FE, live_fault, false);
    let live_address = live.proxy.spawn().await?;
    let orders: Vec<String> = shop.orders.iter().map(|(order, _, _)| order.clone()).collect();
    let model = model::ChaoticModel::new(seed, COMPLETION_TIMEOUT + Duration::from_millis(200), orders);
    let deaths = Arc::clone(&model.deaths);
    let (model_requests, model_saw_labels) = (Arc::clone(&model.requests), Arc::clone(&model.labels_seen));
    let model_address = refund_chat_local::spawn(0, model.router()).await?;
    let api = RuntimeApi::with_timeout(Duration::from_secs(8));
    let api_address = refund_chat_local::spawn(0, api.router()).await?;

    let container = Container {
        bootstrap: args.bootstrap.clone(),
        env: [
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.clone()),
            ("AWS_ENDPOINT_URL_DYNAMODB", format!("http://{ledger_address}")),
            ("OPENAI_API_KEY_SECRET_ID", "refund-chat/openai-api-key".to_owned()),
            ("OPENAI_BASE_URL", format!("http://{model_address}/v1")),
            ("PAYMENTS_BASE_URL", format!("http://{payments_address}")),
            ("ORDERS_BASE_URL", format!("http://{orders_address}")),
            ("ORDERS_TIMEOUT_SECS", ORDERS_TIMEOUT.as_secs_f64().to_string()),
            ("REFUND_WINDOW_DAYS", REFUND_WINDOW_DAYS.to_string()),
            ("OPENAI_TIMEOUT_SECS", COMPLETION_TIMEOUT.as_secs_f64().to_string()),
            ("RETRY_BACKOFF_SECS", "0.05".to_owned()),
            ("PAYMENTS_TIMEOUT_SECS", PAYMENTS_TIMEOUT.as_secs_f64().to_string()),
            ("LEDGER_TABLE", table.clone()),
            ("CONVERSATION_TABLE", refund_chat_testkit::conversation_table(&table)),
            ("LEDGER_TIMEOUT_SECS", LEDGER_TIMEOUT.as_secs_f64().to_string()),
            ("IDEMPOTENCY_TTL_HOURS", "1".to_owned()),
            ("USER_IDENTITY", "authorizer".to_owned()),
            // Contracts 26 and 28: the agent changes a placed order's address
            // and starts a delivered order's return, each with the customer's yes.
            (
                "AGENT_INTENTS",
                "order_status,refund,policy_question,other,address_change,return".to_owned(),
            ),
            // The sandbox's labels are linked in replies: never in the model's window.
            ("RETURN_LABEL_ORIGINS", format!("http://{orders_address}")),
            ("AUTO_REFUND_LIMIT_CENTS", AUTO_REFUND_LIMIT.to_string()),
            ("USER_DAILY_AUTO_LIMIT_CENTS", DAILY_LIMIT.to_string()),
            ("ORDER_REFUND_WINDOW_HOURS", (ORDER_WINDOW.as_secs() / 3600).to_string()),
            // Low enough that some customers spend their hour: 429s are answers too.
            ("CUSTOMER_TURNS_PER_HOUR", TURNS_PER_HOUR.to_string()),
            ("CUSTOMER_TOKENS_PER_DAY", TOKENS_PER_DAY.to_string()),
            // Contract 27: visitors served, their day small enough to be
            // spent in a run (customers must never pay for it); guests are
            // the guest pool's tokens.
            ("VISITOR_ADDRESS_KEY", "chaos-visitor-address-key-0123456789".to_owned()),
            ("VISITOR_TOKENS_PER_DAY", VISITOR_TOKENS_PER_DAY.to_string()),
            ("VISITOR_TURNS_PER_HOUR_PER_ADDRESS", "40".to_owned()),
            ("GUEST_POOL_ISSUER", clients::GUEST_ISSUER.to_owned()),
            ("LIVE_EVENTS_URL", format!("http://{live_address}/event")),
            ("LIVE_PUBLISH_TIMEOUT_MS", LIVE_PUBLISH_TIMEOUT.as_millis().to_string()),
        ]
        .map(|(name, value)| (name.to_owned(), value))
        .into(),
    };
    let mut functions = Vec::new();
    for n in 0..args.functions {
        let log = std::fs::File::create(logs.join(format!("function-{n}.log")))?;
        functions.push(container.spawn(api_address, log)?);
    }
    // The mortal container: on its own Runtime API, killed (SIGKILL) in the
    // middle of a turn whenever the model says so, then started again, as
    // Lambda replaces a container that died.
    let mortal_api = RuntimeApi::with_timeout_and_ids(Duration::from_secs(8), "mortal");
    let mortal_address = refund_chat_local::spawn(0, mortal_api.router()).await?;
    let mortal_log = logs.join("function-mortal.log");
    let append = |path: &Path| std::fs::OpenOptions::new().create(true).append(true).open(path);
    let mut mortal = container.spawn(mortal_address, append(&mortal_log)?)?;
    let killed = Arc::new(AtomicUsize::new(0));
    let (stop_killing, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let respawn = {
        let killed = Arc::clone(&killed);
        let respawn = move || container.spawn(mortal_address, append(&mortal_log)?);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = deaths.notified() => {}
                    _ = &mut stopped => break,
                }
                let _ = mortal.start_kill();
                let _ = mortal.wait().await;
                killed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match respawn() {
                    Ok(next) => mortal = next,
                    Err(error) => {
                        eprintln!("the mortal container could not be started again: {error}");
                        break;
                    }
                }
            }
            let _ = mortal.start_kill();
            let _ = mortal.wait().await;
        })
    };

    let clients = Arc::new(Clients {
        seed,
        requests,
        shop: Arc::clone(&shop),
        api,
        mortal_api,
        conversations: std::sync::Mutex::default(),
        ticks: AtomicUsize::new(0),
        next: AtomicUsize::new(0),
        sent: AtomicUsize::new(0),
        exchanges: std::sync::Mutex::default(),
        reads: std::sync::Mutex::default(),
        others: clients::Others::default(),
    });
    // The support team's ledger leaves its decisions' notes in the
    // conversations (contract 18), through the same faulty DynamoDB.
    let staff_ledger = refund_chat::ledger::dynamo::DynamoLedger::from_sdk_config(
        &refund_chat_testkit::aws_at(&format!("http://{ledger_address}")).await,
        &table,
        LEDGER_TIMEOUT,
    );
    let notes = refund_chat::ledger::dynamo::notes::PersonNotes::new(
        staff_ledger.client().clone(),
        refund_chat_testkit::conversation_table(&table),
        refund_chat::conversation::Lifetime {
            ttl: Duration::from_secs(3600),
            max_age: Duration::ZERO,
        },
    );
    let staff = Arc::new(staff::Staff {
        seed,
        ledger: staff_ledger.with_notes(notes.clone()),
        notes,
        ttl: aws_sdk_dynamodb::Client::new(&refund_chat_testkit::aws_at(&moto).await),
        table: table.clone(),
        payments: refund_chat::refund::payments::HttpPayments::new(
            refund_chat::http_client::money_path_client()?,
            &format!("http://{sandbox_address}"),
            PAYMENTS_TIMEOUT,
        ),
        orders: refund_chat::orders::http::HttpOrders::new(
            refund_chat::http_client::money_path_client()?,
            &format!("http://{orders_address}"),
            ORDERS_TIMEOUT,
        ),
        limits: refund_chat::refund::policy::Limits {
            auto_refund_limit: refund_chat::refund::money::AmountCents::new(AUTO_REFUND_LIMIT),
            order_window: ORDER_WINDOW,
            user_daily_auto_limit: refund_chat::refund::money::AmountCents::new(DAILY_LIMIT),
            refund_window: Duration::from_secs(REFUND_WINDOW_DAYS * 86_400),
        },
        expiries: std::sync::Mutex::default(),
        decisions: std::sync::Mutex::default(),
    });
    let clients_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let staff_task = tokio::spawn(Arc::clone(&staff).run(Arc::clone(&clients_done)));
    let tasks: Vec<_> = (0..args.clients)
        .map(|_| tokio::spawn(Arc::clone(&clients).run()))
        .collect();
    let progress = {
        let clients = Arc::clone(&clients);
        let total = requests;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let sent = clients.sent.load(std::sync::atomic::Ordering::SeqCst);
                println!("  {sent} of {total} requests sent");
            }
        })
    };
    let time_left = time_limit(args).saturating_sub(run_started.elapsed());
    let finished = tokio::select! {
        done = tokio::time::timeout(time_left, futures_all(tasks)) => Ok(done.is_ok()),
        exited = a_function_exits(&mut functions) => Err(exited),
    };
    progress.abort();
    clients_done.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = staff_task.await;
    let _ = stop_killing.send(());
    let _ = respawn.await;
    let in_time = finished?;
    for function in &mut functions {
        if let Some(pid) = function.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), function.wait()).await;
    }
    if !in_time {
        return Ok(Segment::OutOfTime);
    }

    let exchanges = clients.exchanges.lock().map(|e| e.clone()).unwrap_or_default();
    // A request its caller gave up on may still be on its way to moto
    // (delayed by a fault): the sweep and the books go around the proxy, and
    // moto's rollback of a transaction beside them would undo their writes.
    ledger.proxy.drained().await;
    payments.proxy.drained().await;
    let left_executing = sweep(&moto, &table).await?;
    let ledger_items = refund_chat_testkit::plain_items(&refund_chat_testkit::aws_at(&moto).await, &table)
        .await
        .map_err(|e| e.to_string())?;
    let mut log_lines = Vec::new();
    let log_files = (0..args.functions)
        .map(|n| format!("function-{n}.log"))
        .chain(["function-mortal.log".to_owned()]);
    for name in log_files {
        let text = std::fs::read_to_string(logs.join(name))?;
        log_lines.extend(text.lines().map(str::to_owned));
    }
    let conversation_items = refund_chat_testkit::plain_items(
        &refund_chat_testkit::aws_at(&moto).await,
        &refund_chat_testkit::conversation_table(&table),
    )
    .await
    .map_err(|e| e.to_string())?;
    let reads = clients.reads.lock().map(|r| r.clone()).unwrap_or_default();
    let evidence = checks::Evidence {
        exchanges: &exchanges,
        reads: &reads,
        money_moved: sandbox
            .refunds_made()
            .into_iter()
            .map(|e| (e.user_id, e.order_id, e.amount_cents))
            .collect(),
        overdrawn: sandbox
            .overdrawn()
            .into_iter()
            .map(|e| (e.user_id, e.order_id, e.amount_cents))
            .collect(),
        payments_requests: payments
            .proxy
            .passed()
            .iter()
            .filter_map(|p| serde_json::from_slice(&p.request).ok())
            .collect(),
        ledger: ledger_items,
        conversations: conversation_items,
        addresses_written: sandbox.addresses_written(),
        order_paid: shop
            .orders
            .iter()
            .map(|(order, _, paid)| (order.clone(), *paid))
            .collect(),
        returns_started: sandbox
            .returns_started()
            .into_iter()
            .map(|(order, started)| {
                (
                    order,
                    serde_json::json!({
                        "items": started["items"],
                        "reason": started["reason"],
                        "refund_cents": started["refund_cents"],
                    }),
                )
            })
            .collect(),
        model_requests: model_requests.load(std::sync::atomic::Ordering::SeqCst),
        model_saw_labels: model_saw_labels.load(std::sync::atomic::Ordering::SeqCst),
        log_lines,
        secret_key: &secret_key,
        auto_refund_limit: AUTO_REFUND_LIMIT,
        daily_limit: DAILY_LIMIT,
        guard_expiries: staff.expiries.lock().map(|e| e.clone()).unwrap_or_default(),
        tokens_per_day: TOKENS_PER_DAY,
        turn_reservation: refund_chat::turn::worst_case_tokens(
            refund_chat::config::DEFAULT_MAX_OUTPUT_TOKENS,
            refund_chat::config::DEFAULT_CONVERSATION_WINDOW.max_chars,
        ),
        left_executing,
        visitor_exchanges: clients
            .others
            .visitor_exchanges
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default(),
        visitor_reads: clients
            .others
            .visitor_reads
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default(),
        claims: clients.others.claims.lock().map(|e| e.clone()).unwrap_or_default(),
        unverified: clients.others.unverified.lock().map(|e| e.clone()).unwrap_or_default(),
        turns_per_hour: TURNS_PER_HOUR,
        pokes: event_api.heard(),
    };
    let invariants = checks::check(&evidence);
    report(
        seed,
        &exchanges,
        &evidence,
        [&payments, &orders_proxy, &ledger],
        started.elapsed(),
    );
    println!(
        "mortal container killed mid-turn {} time(s)",
        killed.load(std::sync::atomic::Ordering::SeqCst)
    );
    println!(
        "staff decisions: {:?}",
        staff.decisions.lock().map(|d| d.clone()).unwrap_or_default()
    );
    Ok(Segment::Checked(invariants, exchanges.len()))
}

/// The sweep's run (`refund-chat-sweep`), as its schedule would make it once
/// the function's timeout has passed: every invocation has ended, so every
/// record still `executing` was left by one that died (or whose outcome's
/// write failed). Returns each such record with its state after the sweep.
async fn sweep(moto: &str, table: &str) -> Result<Vec<(String, String)>, Error> {
    let aws = refund_chat_testkit::aws_at(moto).await;
    let ledger = refund_chat::ledger::dynamo::DynamoLedger::from_sdk_config(&aws, table, Duration::from_secs(5));
    let state_of_refunds = |items: Vec<serde_json::Value>| -> Vec<(String, String)> {
        items
            .iter()
            .filter(|i| i["kind"] == "refund")
            .map(|i| {
                let field = |name: &str| i[name].as_str().unwrap_or_default().to_owned();
                (field("record_id"), field("state"))
            })
            .collect()
    };
    let before = state_of_refunds(
        refund_chat_testkit::plain_items(&aws, table)
            .await
            .map_err(|e| e.to_string())?,
    );
    // Twice, as its schedule would: an approval left executing is watched
    // on the sweep's own clock, stamped by one run and moved by a later one.
    let mut moved = Vec::new();
    for _ in 0..2 {
        let now = refund_chat::clock::now_ms() + 1;
        moved.extend(ledger.sweep_executing(now, now).await.map_err(|e| e.to_string())?);
    }
    let after = state_of_refunds(
        refund_chat_testkit::plain_items(&aws, table)
            .await
            .map_err(|e| e.to_string())?,
    );
    println!("the sweep moved {} record(s) left executing to unknown", moved.len());
    Ok(before
        .into_iter()
        .filter(|(_, state)| state == "executing")
        .map(|(id, _)| {
            let state = after
                .iter()
                .find(|(a, _)| *a == id)
                .map(|(_, s)| s.clone())
                .unwrap_or_default();
            (id, state)
        })
        .collect())
}

/// How a function container is started: its bootstrap and environment.
#[derive(Clone)]
struct Container {
    bootstrap: PathBuf,
    env: Vec<(String, String)>,
}

impl Container {
    fn spawn(&self, api_address: std::net::SocketAddr, log: std::fs::File) -> Result<tokio::process::Child, Error> {
        Ok(tokio::process::Command::new(&self.bootstrap)
            .env_clear()
            .envs(refund_chat_local::runtime_api::lambda_environment(api_address))
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdout(Stdio::from(log))
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e} (build it first)", self.bootstrap.display()))?)
    }
}

/// Completes when a function container exits on its own: it crashed.
async fn a_function_exits(functions: &mut [tokio::process::Child]) -> String {
    loop {
        for (n, function) in functions.iter_mut().enumerate() {
            if let Ok(Some(status)) = function.try_wait() {
                return format!("function container {n} exited ({status}): see its log");
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn futures_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}

/// What happened, in numbers: statuses, outcomes, faults.
fn report(
    seed: u64,
    exchanges: &[clients::Exchange],
    evidence: &checks::Evidence<'_>,
    [payments, orders, ledger]: [&Faulty; 3],
    took: Duration,
) {
    let mut statuses = std::collections::BTreeMap::new();
    for exchange in exchanges {
        *statuses.entry(exchange.status.unwrap_or(0)).or_insert(0) += 1;
    }
    let replays = exchanges.iter().filter(|e| e.replayed()).count();
    let faults = |proxy: &Faulty| {
        let mut counts = std::collections::BTreeMap::new();
        for fault in proxy.faults() {
            *counts.entry(fault.name()).or_insert(0) += 1;
        }
        counts
    };
    let mut states = std::collections::BTreeMap::new();
    for item in evidence.ledger.iter().filter(|i| i["kind"] == "refund") {
        *states
            .entry(item["state"].as_str().unwrap_or("?").to_owned())
            .or_insert(0) += 1;
    }
    println!(
        "segment seed {seed}: {} requests in {:.1} s ({:.0}/s); statuses {statuses:?}; {replays} replays",
        exchanges.len(),
        took.as_secs_f64(),
        exchanges.len() as f64 / took.as_secs_f64()
    );
    println!(
        "refund records by state: {states:?}; refunds the sandbox made: {}",
        evidence.money_moved.len()
    );
    // How much of the run reached the money path, not only the way out.
    let turns = evidence
        .log_lines
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["event"] == "summary" && line["completion_calls"].as_u64().unwrap_or_default() > 0)
        .count();
    // A refund decision: the rules decided a refund the agent proposed
    // (paid, sent to a person, refused on the order, or already recorded).
    let decisions = evidence
        .log_lines
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["event"] == "summary"
                && line["refund_outcome"]
                    .as_str()
                    .is_some_and(|outcome| outcome != "not_attempted")
        })
        .count();
    println!(
        "reached a turn: {turns} of {} requests ({:.0}%); reached a refund decision: {decisions} ({:.0}%); \
         reached payments: {}",
        exchanges.len(),
        100.0 * turns as f64 / exchanges.len().max(1) as f64,
        100.0 * decisions as f64 / exchanges.len().max(1) as f64,
        evidence.payments_requests.len()
    );
    println!("payments faults: {:?}", faults(payments));
    println!("order system faults: {:?}", faults(orders));
    println!("DynamoDB faults: {:?}", faults(ledger));
}
