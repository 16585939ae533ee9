//! What one DynamoDB operation costs the function's thread, by client: the
//! SDK as the function sends every call (and with one part configured away
//! at a time), a minimal thin client (what the hand-written client it once
//! had came close to), and the bare HTTP exchange.
//! `make bench` prints it after the turn's table.
//!
//! The stand-in (the bench's DynamoDB, answering `{}`) runs on a thread of
//! its own; the client's CPU is its thread's (`/proc/thread-self/schedstat`),
//! which runs the connection's tasks too (a current-thread runtime). Every
//! operation is the payments outcome's shape: an `UpdateItem` with a
//! condition and six values.
//!
//! usage: sdk-op-cost [--ops N]

use std::time::{Duration, Instant, SystemTime};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::endpoint::{Endpoint, EndpointFuture, Params, ResolveEndpoint};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::types::{AttributeValue, Update};
use aws_smithy_runtime_api::client::identity::Identity;

const LEDGER_TIMEOUT: Duration = Duration::from_secs(2);
const WARM_UP: usize = 300;
const ROUNDS: usize = 5;

#[derive(clap::Parser)]
struct Cli {
    /// Operations measured per configuration.
    #[arg(long, default_value_t = 5000)]
    ops: usize,
}

/// Nanoseconds this thread has run on a CPU.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|stat| stat.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Cli { ops } = <Cli as clap::Parser>::parse();
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        if let Ok(runtime) = runtime {
            runtime.block_on(async {
                if let Ok(address) = stand_in().await {
                    let _ = address_tx.send(address);
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    let endpoint = format!("http://{}", address_rx.recv()?);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let sdk = sdk_config(&endpoint).await;
        let function = refund_chat::ledger::dynamo::client_for(&sdk, LEDGER_TIMEOUT);
        let retries_off = Client::from_conf(
            function
                .config()
                .to_builder()
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        let fixed = Client::from_conf(
            function
                .config()
                .to_builder()
                .endpoint_resolver(Fixed(endpoint.clone()))
                .build(),
        );
        let thin = Thin::new(&endpoint)?;
        let update = outcome_update()?;
        let names = [
            "SDK, as the function builds it (attempt and operation timeouts)",
            "SDK, retries off",
            "SDK, a fixed endpoint (no rules engine)",
            "thin: aws-sigv4 + reqwest, JSON by hand",
            "floor: the same POST unsigned (the HTTP exchange alone)",
        ];
        // Rounds, each variant in turn, so that a slow moment of the VM
        // does not fall on one variant only; the median round is reported.
        let mut figures = vec![Vec::new(); names.len()];
        for _ in 0..ROUNDS {
            for (i, figure) in figures.iter_mut().enumerate() {
                figure.push(match i {
                    0 => measure(ops, || update_with_sdk(&function, &update)).await?,
                    1 => measure(ops, || update_with_sdk(&retries_off, &update)).await?,
                    2 => measure(ops, || update_with_sdk(&fixed, &update)).await?,
                    3 => measure(ops, || thin.update(true)).await?,
                    _ => measure(ops, || thin.update(false)).await?,
                });
            }
        }
        println!(
            "| DynamoDB client ({ops} UpdateItem, median of {ROUNDS} rounds) | CPU per operation | wall per operation |"
        );
        println!("| --- | --- | --- |");
        for (name, mut figure) in names.into_iter().zip(figures) {
            figure.sort();
            let (cpu, wall) = figure[figure.len() / 2];
            row(name, cpu, wall, ops);
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}

fn row(name: &str, cpu_ns: u64, wall: Duration, ops: usize) {
    println!(
        "| {name} | {:.1} µs | {:.1} µs |",
        cpu_ns as f64 / ops as f64 / 1000.0,
        wall.as_secs_f64() * 1e6 / ops as f64
    );
}

async fn measure<F, Fut>(ops: usize, mut operation: F) -> Result<(u64, Duration), Box<dyn std::error::Error>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Box<dyn std::error::Error>>>,
{
    for _ in 0..WARM_UP {
        operation().await?;
    }
    let (cpu, started) = (thread_cpu_ns(), Instant::now());
    for _ in 0..ops {
        operation().await?;
    }
    Ok((thread_cpu_ns() - cpu, started.elapsed()))
}

async fn sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "AKIDBENCH",
            "bench",
            None,
            None,
            "bench",
        ))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// The outcome's `UpdateItem`.
fn outcome_update() -> Result<Update, Box<dyn std::error::Error>> {
    let text = |value: &str| AttributeValue::S(value.into());
    Ok(Update::builder()
        .table_name("bench-ledger")
        .key("pk", text("refund#r_0123456789abcdef"))
        .update_expression("SET #state = :to, refund_id = :refund_id, receipt_status = :receipt, updated_at = :now")
        .condition_expression("#state = :executing AND writer = :writer")
        .expression_attribute_names("#state", "state")
        .expression_attribute_values(":to", text("executed"))
        .expression_attribute_values(":refund_id", text("rf_bench"))
        .expression_attribute_values(":receipt", text("succeeded"))
        .expression_attribute_values(":now", text("2026-12-01T12:00:00.000Z"))
        .expression_attribute_values(":executing", text("executing"))
        .expression_attribute_values(":writer", text("req-0123456789/w-abcdef"))
        .build()?)
}

/// It, through the SDK's fluent client (which takes its parts by value).
async fn update_with_sdk(client: &Client, update: &Update) -> Result<(), Box<dyn std::error::Error>> {
    client
        .update_item()
        .table_name(&update.table_name)
        .set_key(Some(update.key.clone()))
        .update_expression(&update.update_expression)
        .set_condition_expression(update.condition_expression.clone())
        .set_expression_attribute_names(update.expression_attribute_names.clone())
        .set_expression_attribute_values(update.expression_attribute_values.clone())
        .send()
        .await?;
    Ok(())
}

#[derive(Debug)]
struct Fixed(String);

impl ResolveEndpoint for Fixed {
    fn resolve_endpoint<'a>(&'a self, _: &'a Params) -> EndpointFuture<'a> {
        EndpointFuture::ready(Ok(Endpoint::builder().url(self.0.clone()).build()))
    }
}

/// The thin client: the same request, signed with `aws-sigv4`.
struct Thin {
    http: reqwest::Client,
    url: String,
    host: String,
    identity: Identity,
}

impl Thin {
    fn new(endpoint: &str) -> Result<Thin, Box<dyn std::error::Error>> {
        Ok(Thin {
            http: reqwest::Client::builder().timeout(LEDGER_TIMEOUT).build()?,
            url: format!("{endpoint}/"),
            host: endpoint.trim_start_matches("http://").to_owned(),
            identity: aws_credential_types::Credentials::new("AKIDBENCH", "bench", None, None, "bench").into(),
        })
    }

    async fn update(&self, signed: bool) -> Result<(), Box<dyn std::error::Error>> {
        let body = serde_json::to_vec(&serde_json::json!({
            "TableName": "bench-ledger",
            "Key": {"pk": {"S": "refund#r_0123456789abcdef"}},
            "UpdateExpression": "SET #state = :to, refund_id = :refund_id, receipt_status = :receipt, updated_at = :now",
            "ConditionExpression": "#state = :executing AND writer = :writer",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":to": {"S": "executed"}, ":refund_id": {"S": "rf_bench"}, ":receipt": {"S": "succeeded"},
                ":now": {"S": "2026-12-01T12:00:00.000Z"}, ":executing": {"S": "executing"},
                ":writer": {"S": "req-0123456789/w-abcdef"}
            }
        }))?;
        let headers = [
            ("host", self.host.as_str()),
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amz-target", "DynamoDB_20120810.UpdateItem"),
        ];
        let mut request = self.http.post(&self.url).body(body.clone());
        for (name, value) in headers.iter().skip(1) {
            request = request.header(*name, *value);
        }
        if signed {
            for (name, value) in self.signature(&headers, &body)? {
                request = request.header(name, value);
            }
        }
        let response = request.send().await?;
        let status = response.status();
        let answer: serde_json::Value = serde_json::from_slice(&response.bytes().await?)?;
        if !status.is_success() {
            return Err(format!("{status}: {answer}").into());
        }
        Ok(())
    }

    /// The SigV4 headers of a request with `headers` and `body`.
    fn signature(
        &self,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&self.identity)
            .region("eu-west-1")
            .name("dynamodb")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()?
            .into();
        let signable = SignableRequest::new("POST", &self.url, headers.iter().copied(), SignableBody::Bytes(body))?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect())
    }
}

/// The bench's DynamoDB stand-in, on 127.0.0.1.
async fn stand_in() -> std::io::Result<std::net::SocketAddr> {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/",
        post(|| async { ([("content-type", "application/x-amz-json-1.0")], "{}") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(address)
}
