//! The real handler, wired as `main` wires it ([`refund_chat::startup::wire`]),
//! against local servers on 127.0.0.1: wiremock for OpenAI and payments,
//! moto's server for DynamoDB and Secrets Manager. Timeouts come from
//! configuration and are short. [`TestApp::builder`] lets a test replace any
//! part.

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::http::{HeaderMap, StatusCode};
use lambda_http::lambda_runtime::Context;
use lambda_http::{Body, RequestExt};
use refund_chat::config::Config;
use refund_chat::secrets::{ApiKey, ApiKeySource, FixedKey, SecretError};
use refund_chat::startup::FunctionApp;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const API_KEY: &str = "sk-test-4f9a1c0e";
pub const REQUEST_ID: &str = "req-0123456789";
pub const USER: &str = "u-1001";
pub const REFUND_MESSAGE: &str = "Order A-1001 arrived broken, please refund 12.50";
pub const OPENAI_TIMEOUT: Duration = Duration::from_millis(500);
pub const BACKOFF: Duration = Duration::from_millis(200);
pub const PAYMENTS_TIMEOUT: Duration = Duration::from_millis(500);
pub const LEDGER_TIMEOUT: Duration = Duration::from_secs(2);
/// Long enough that a stand-in "hangs" past every timeout above.
pub const HANG: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------- moto

/// One moto server per test binary, on a free port. It runs under a shell
/// that kills it when our end of its stdin closes, i.e. when this process
/// exits, however it exits.
pub struct Moto {
    pub endpoint: String,
    _child: Child,
    _stdin: ChildStdin,
}

pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let binary = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server"));
        let port = free_port();
        let mut child = Command::new("sh")
            .args(["-c", r#""$0" -H 127.0.0.1 -p "$1" & pid=$!; read _; kill $pid"#])
            .arg(&binary)
            .arg(port.to_string())
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): run `make test`, which installs moto",
                    binary.display()
                )
            });
        let stdin = child.stdin.take().expect("piped stdin");
        // moto announces itself on stderr once it listens; reading blocks until then.
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let mut output = String::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Running on") => break,
                Some(Ok(line)) => output.push_str(&line),
                _ => panic!("moto_server exited before listening ({}): {output}", binary.display()),
            }
        }
        // Keep draining stderr so moto never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            _child: child,
            _stdin: stdin,
        }
    })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// An AWS configuration whose every service is at `endpoint`.
pub async fn aws_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("eu-west-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// A fresh ledger table in moto, as `template.yaml` defines it.
pub async fn new_table(aws: &SdkConfig) -> String {
    static TABLES: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "ledger-{}-{}",
        std::process::id(),
        TABLES.fetch_add(1, Ordering::SeqCst)
    );
    refund_chat::ledger::dynamo::DynamoLedger::create_table(&aws_sdk_dynamodb::Client::new(aws), &name)
        .await
        .expect("create the ledger table in moto");
    name
}

/// Every item of a table (a scan: fine for a test's handful of items).
pub async fn items(aws: &SdkConfig, table: &str) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    aws_sdk_dynamodb::Client::new(aws)
        .scan()
        .table_name(table)
        .send()
        .await
        .expect("scan")
        .items()
        .to_vec()
}

pub fn attr<'a>(item: &'a std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<&'a str> {
    refund_chat::ledger::dynamo::text(item, name)
}

// ---------------------------------------------------------------- the app

/// A global subscriber that keeps nothing but is interested in every
/// callsite. Without one, a callsite first hit on a thread with no
/// subscriber can be cached as "never" while another test's scoped
/// subscriber is being registered (tracing's interest cache races), and
/// that test then misses lines it logged.
pub fn interested_global_subscriber() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    });
}

/// `make run`'s stack in process: the local model, the seeded payments
/// sandbox, a fresh ledger table, and the configuration that points at them.
pub struct LocalStack {
    pub sandbox: refund_chat_local::payments_sandbox::Sandbox,
    pub aws: SdkConfig,
    pub config: Config,
}

pub async fn local_stack() -> LocalStack {
    let sandbox = refund_chat_local::payments_sandbox::Sandbox::open(None).expect("sandbox");
    let payments = refund_chat_local::spawn(0, sandbox.router()).await.expect("payments");
    let model = refund_chat_local::local_model::LocalModel::new(Some(Duration::from_secs(2)));
    let model = refund_chat_local::spawn(0, model.router()).await.expect("model");
    let aws = aws_at(&moto().endpoint).await;
    let table = new_table(&aws).await;
    let config = config(&format!("http://{model}/v1"), &format!("http://{payments}"), &table);
    LocalStack { sandbox, aws, config }
}

pub fn config(openai_base: &str, payments_base: &str, table: &str) -> Config {
    let vars = [
        ("OPENAI_API_KEY_SECRET_ID", "openai-key".to_owned()),
        ("OPENAI_BASE_URL", openai_base.to_owned()),
        ("PAYMENTS_BASE_URL", payments_base.to_owned()),
        ("OPENAI_TIMEOUT_SECS", OPENAI_TIMEOUT.as_secs_f64().to_string()),
        ("RETRY_BACKOFF_SECS", BACKOFF.as_secs_f64().to_string()),
        ("PAYMENTS_TIMEOUT_SECS", PAYMENTS_TIMEOUT.as_secs_f64().to_string()),
        ("LEDGER_TABLE", table.to_owned()),
        ("LEDGER_TIMEOUT_SECS", LEDGER_TIMEOUT.as_secs_f64().to_string()),
        // As deployed: the customer is the authorizer's (the events carry one).
        ("USER_IDENTITY", "authorizer".to_owned()),
    ];
    Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())).expect("test config")
}

/// A model stand-in that answers each request by looking at it.
type ModelResponder = Box<dyn Fn(&Request) -> ResponseTemplate + Send + Sync>;

struct FnResponder(ModelResponder);

impl Respond for FnResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        (self.0)(request)
    }
}

/// A model that refunds what the customer's message names, as
/// "refund ORDER CENTS", then answers in words once it sees the tool result.
pub fn refunding_model(request: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.iter().any(|m| m["role"] == "tool") {
        return text("Done.");
    }
    let said = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let words: Vec<&str> = said.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "refund").unwrap_or(0);
    let order = words.get(at + 1).copied().unwrap_or("A-1001");
    let cents = words.get(at + 2).and_then(|c| c.parse().ok()).unwrap_or(1250u64);
    refund_call("call_1", order, cents)
}

/// A proxy that forwards one request at a time to `target`. moto's server
/// is not atomic under concurrent requests (two conditional writes of the
/// same item at the same moment can both pass), so concurrency tests put
/// this in front of it: one request at a time is what DynamoDB guarantees
/// per item.
pub async fn one_at_a_time(target: &str) -> String {
    proxy(target, true, forward_all()).await
}

/// One request as a proxy hook sees it: DynamoDB's operation name (from
/// `x-amz-target`, e.g. `TransactWriteItems`) and the JSON body.
pub struct Proxied {
    pub operation: String,
    pub body: Value,
}

/// What a proxy does with one request.
pub enum Action {
    Forward,
    /// Answer this instead of forwarding.
    Reply(u16, Value),
    /// Forward it, so that it lands, then hold the answer this long (a lost answer).
    ForwardThenStall(Duration),
}

pub type Hook = Arc<dyn Fn(Proxied) -> futures::future::BoxFuture<'static, Action> + Send + Sync>;

pub fn forward_all() -> Hook {
    Arc::new(|_| Box::pin(async { Action::Forward }))
}

/// A DynamoDB error answer in the JSON protocol, as the SDK parses it.
pub fn dynamo_error(kind: &str, message: &str, extra: Value) -> Action {
    let mut body = json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"), "message": message});
    if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
        body.extend(extra);
    }
    Action::Reply(400, body)
}

/// A transaction cancelled because another transaction held one of its items.
pub fn transaction_conflict(items: usize) -> Action {
    let reasons: Vec<Value> = (0..items)
        .map(|i| {
            if i == 0 {
                json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    dynamo_error(
        "TransactionCanceledException",
        "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
        json!({"CancellationReasons": reasons}),
    )
}

/// A forwarding proxy in front of `target`, on 127.0.0.1: every request goes
/// through `hook` first; with `serialise`, one request at a time.
pub async fn proxy(target: &str, serialise: bool, hook: Hook) -> String {
    use axum::extract::State;
    #[derive(Clone)]
    struct Forward {
        target: String,
        http: reqwest::Client,
        turn: Option<Arc<tokio::sync::Mutex<()>>>,
        hook: Hook,
    }
    async fn forward(State(forward): State<Forward>, request: axum::extract::Request) -> axum::response::Response {
        let (parts, body) = request.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
        let operation = parts
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let proxied = Proxied {
            operation,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        let stall = match (forward.hook)(proxied).await {
            Action::Forward => None,
            Action::ForwardThenStall(stall) => Some(stall),
            Action::Reply(status, body) => {
                return axum::response::Response::builder()
                    .status(status)
                    .header("content-type", "application/x-amz-json-1.0")
                    .body(axum::body::Body::from(body.to_string()))
                    .unwrap_or_default();
            }
        };
        let _turn = match &forward.turn {
            Some(turn) => Some(turn.lock().await),
            None => None,
        };
        let mut outgoing = forward
            .http
            .request(parts.method, format!("{}{}", forward.target, parts.uri))
            .body(body);
        for (name, value) in parts.headers.iter().filter(|(name, _)| *name != "host") {
            outgoing = outgoing.header(name, value);
        }
        let response = match outgoing.send().await {
            Ok(answer) => {
                let mut response = axum::response::Response::builder().status(answer.status());
                for (name, value) in answer.headers() {
                    response = response.header(name, value);
                }
                let bytes = answer.bytes().await.unwrap_or_default();
                response.body(axum::body::Body::from(bytes)).unwrap_or_default()
            }
            Err(_) => axum::response::Response::builder()
                .status(502)
                .body(axum::body::Body::empty())
                .unwrap_or_default(),
        };
        if let Some(stall) = stall {
            tokio::time::sleep(stall).await;
        }
        response
    }
    let state = Forward {
        target: target.to_owned(),
        http: reqwest::Client::new(),
        turn: serialise.then(Arc::default),
        hook,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let router = axum::Router::new().fallback(forward).with_state(state);
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

/// Counts the DynamoDB operations that pass through it, by name, in order.
#[derive(Clone, Default)]
pub struct OperationLog(Arc<Mutex<Vec<String>>>);

impl OperationLog {
    pub fn names(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    /// A hook that records each operation, then lets `then` decide.
    pub fn hook(&self, then: impl Fn(&Proxied) -> Action + Send + Sync + 'static) -> Hook {
        let log = self.0.clone();
        Arc::new(move |proxied| {
            log.lock().unwrap().push(proxied.operation.clone());
            let action = then(&proxied);
            Box::pin(async move { action })
        })
    }
}

/// Answers requests from a script, in order, and records when each arrived.
#[derive(Clone)]
pub struct Script {
    responses: Arc<Mutex<VecDeque<ResponseTemplate>>>,
    arrivals: Arc<Mutex<Vec<Instant>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Script {
    pub fn new(responses: Vec<ResponseTemplate>) -> Self {
        Script {
            responses: Arc::new(Mutex::new(responses.into())),
            arrivals: Arc::default(),
            arrived: Arc::default(),
        }
    }
    pub fn arrivals(&self) -> Vec<Instant> {
        self.arrivals.lock().unwrap().clone()
    }
    /// Completes once `count` requests have arrived.
    pub async fn arrived(&self, count: usize) {
        loop {
            let notified = self.arrived.notified();
            tokio::pin!(notified);
            // Registered before the check, so no arrival can slip in between.
            notified.as_mut().enable();
            if self.arrivals.lock().unwrap().len() >= count {
                return;
            }
            notified.await;
        }
    }
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.arrivals.lock().unwrap().push(Instant::now());
        self.arrived.notify_waiters();
        self.responses
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(599).set_body_string("script exhausted"))
    }
}

pub struct TestApp<K = FixedKey> {
    pub openai: MockServer,
    pub payments: MockServer,
    pub model_script: Script,
    pub aws: SdkConfig,
    pub table: String,
    pub app: FunctionApp<K>,
}

/// A change a test makes to the configuration before the app is built.
type ConfigChange = Box<dyn FnOnce(&mut Config)>;

/// Builds a [`TestApp`]; every part has a default a test may replace.
pub struct Builder<K> {
    model: Vec<ResponseTemplate>,
    model_responder: Option<ModelResponder>,
    payments: ResponseTemplate,
    key_source: K,
    payments_base: Option<String>,
    ledger_endpoint: Option<String>,
    configure: Vec<ConfigChange>,
}

impl TestApp<FixedKey> {
    pub fn builder() -> Builder<FixedKey> {
        Builder {
            model: Vec::new(),
            model_responder: None,
            payments: receipt(),
            key_source: FixedKey::new(API_KEY),
            payments_base: None,
            ledger_endpoint: None,
            configure: Vec::new(),
        }
    }

    /// The model answers with `model` in order; payments answer every refund with `payments`.
    pub async fn new(model: Vec<ResponseTemplate>, payments: ResponseTemplate) -> Self {
        TestApp::builder().model(model).payments(payments).build().await
    }
}

impl<K: ApiKeySource> Builder<K> {
    pub fn model(mut self, model: Vec<ResponseTemplate>) -> Self {
        self.model = model;
        self
    }
    /// The model answers each request with `respond(request)` instead of a script.
    pub fn model_responder(mut self, respond: impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static) -> Self {
        self.model_responder = Some(Box::new(respond));
        self
    }
    pub fn payments(mut self, payments: ResponseTemplate) -> Self {
        self.payments = payments;
        self
    }
    /// Payments at another address (a server of the test's own).
    pub fn payments_at(mut self, base: String) -> Self {
        self.payments_base = Some(base);
        self
    }
    /// DynamoDB (the ledger) at another address: moto's table is still made.
    pub fn ledger_at(mut self, endpoint: String) -> Self {
        self.ledger_endpoint = Some(endpoint);
        self
    }
    pub fn configure(mut self, change: impl FnOnce(&mut Config) + 'static) -> Self {
        self.configure.push(Box::new(change));
        self
    }
    pub fn key_source<K2: ApiKeySource>(self, key_source: K2) -> Builder<K2> {
        Builder {
            model: self.model,
            model_responder: self.model_responder,
            payments: self.payments,
            key_source,
            payments_base: self.payments_base,
            ledger_endpoint: self.ledger_endpoint,
            configure: self.configure,
        }
    }

    pub async fn build(self) -> TestApp<K> {
        interested_global_subscriber();
        let openai = MockServer::start().await;
        let payments = MockServer::start().await;
        let model_script = Script::new(self.model);
        let model_mock = Mock::given(method("POST")).and(path("/v1/chat/completions"));
        match self.model_responder {
            Some(respond) => model_mock.respond_with(FnResponder(respond)),
            None => model_mock.respond_with(model_script.clone()),
        }
        .mount(&openai)
        .await;
        Mock::given(method("POST"))
            .and(path("/refunds"))
            .respond_with(self.payments)
            .mount(&payments)
            .await;
        let aws = aws_at(&moto().endpoint).await;
        let table = new_table(&aws).await;
        let payments_base = self.payments_base.unwrap_or_else(|| payments.uri());
        let mut config = config(&format!("{}/v1", openai.uri()), &payments_base, &table);
        for change in self.configure {
            change(&mut config);
        }
        let ledger_aws = match &self.ledger_endpoint {
            Some(endpoint) => aws_at(endpoint).await,
            None => aws.clone(),
        };
        let app = refund_chat::startup::wire(config, &ledger_aws, self.key_source).expect("app");
        TestApp {
            openai,
            payments,
            model_script,
            aws,
            table,
            app,
        }
    }
}

impl<K: ApiKeySource> TestApp<K> {
    /// POSTs `body` to the route through an HTTP API v2 event.
    pub async fn post(&self, body: &str) -> Answer {
        self.post_with(body, &[]).await
    }

    /// POSTs `body` with extra headers.
    pub async fn post_with(&self, body: &str, headers: &[(&str, &str)]) -> Answer {
        self.send(post_event(body, headers)).await
    }

    pub async fn chat(&self, message: &str) -> Answer {
        self.post(&chat_body(message)).await
    }

    /// The same, with an `Idempotency-Key`.
    pub async fn chat_with_key(&self, message: &str, key: &str) -> Answer {
        self.post_with(&chat_body(message), &[("idempotency-key", key)]).await
    }

    pub async fn send(&self, event: Value) -> Answer {
        send_as(&self.app, event, REQUEST_ID, 0).await
    }

    /// The JSON bodies the model received, in order.
    pub async fn model_requests(&self) -> Vec<Value> {
        bodies(&self.openai).await
    }

    /// The JSON bodies the payments service received, in order.
    pub async fn payments_requests(&self) -> Vec<Value> {
        bodies(&self.payments).await
    }

    /// Every ledger item.
    pub async fn ledger(&self) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        items(&self.aws, &self.table).await
    }

    /// The ledger's refund records.
    pub async fn refund_records(&self) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        self.ledger()
            .await
            .into_iter()
            .filter(|item| attr(item, "kind") == Some("refund"))
            .collect()
    }
}

pub fn chat_body(message: &str) -> String {
    json!({"user_id": USER, "message": message}).to_string()
}

/// An HTTP API v2 event POSTing `body` to the route, signed in (JWT
/// authorizer) as the body's `user_id`, or as [`USER`] when it has no
/// usable one.
pub fn post_event(body: &str, headers: &[(&str, &str)]) -> Value {
    let user = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| value["user_id"].as_str().map(str::to_owned))
        .filter(|user| !user.is_empty())
        .unwrap_or_else(|| USER.to_owned());
    post_event_as(&user, body, headers)
}

/// The same, signed in as `user`.
pub fn post_event_as(user: &str, body: &str, headers: &[(&str, &str)]) -> Value {
    let mut event = load_event("http-api-v2-refund.json");
    event["body"] = Value::String(body.to_owned());
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = Value::String(user.to_owned());
    for (name, value) in headers {
        event["headers"][*name] = Value::String((*value).to_owned());
    }
    event
}

/// The customer's `message`, as the Lambda request `request_id` (a scope of its own).
pub async fn chat_as<K: ApiKeySource>(h: &TestApp<K>, request_id: &str, message: &str) -> Answer {
    send_as(&h.app, post_event(&chat_body(message), &[]), request_id, 0).await
}

/// Sends an API Gateway event through `app`'s handler as the runtime would,
/// with the given request id and deadline (epoch ms; 0 for none).
pub async fn send_as<K: ApiKeySource>(
    app: &FunctionApp<K>,
    event: Value,
    request_id: &str,
    deadline_ms: u64,
) -> Answer {
    let mut context = Context::default();
    context.request_id = request_id.to_owned();
    context.deadline = deadline_ms;
    let request = lambda_http::request::from_str(&event.to_string())
        .expect("event")
        .with_lambda_context(context);
    let response = app.handle(request).await;
    let status = response.status();
    let headers = response.headers().clone();
    let raw = match response.body() {
        Body::Text(text) => text.clone(),
        other => String::from_utf8_lossy(other.as_ref()).into_owned(),
    };
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    // Every answer of the suite is checked against the published API description.
    if let Err(problem) = openapi_check(status.as_u16(), &headers, &body) {
        panic!("the answer does not match docs/openapi.yaml: {problem}\n{status} {raw}");
    }
    Answer {
        status,
        headers,
        body,
        raw,
    }
}

// ---------------------------------------------------------------- docs/openapi.yaml

/// The API description, as JSON.
pub fn openapi() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.yaml"))
            .expect("docs/openapi.yaml");
        serde_yaml::from_str(&text).expect("docs/openapi.yaml is YAML")
    })
}

/// The documented response for a status of `POST /support/refund-chat`.
pub fn documented_response(status: u16) -> Option<&'static Value> {
    openapi()["paths"]["/support/refund-chat"]["post"]["responses"]
        .get(status.to_string())
        .filter(|response| response.is_object())
}

/// Whether `instance` is valid against `schema`, whose `$ref`s point into the document.
pub fn openapi_validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let mut rooted = schema.clone();
    if let Value::Object(fields) = &mut rooted {
        fields.insert("components".into(), openapi()["components"].clone());
    }
    let validator = jsonschema::validator_for(&rooted).map_err(|e| format!("bad schema: {e}"))?;
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| e.to_string()).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// A response's status, headers and body against the document.
pub fn openapi_check(status: u16, headers: &HeaderMap, body: &Value) -> Result<(), String> {
    let response = documented_response(status).ok_or_else(|| format!("status {status} is not documented"))?;
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let header = match header["$ref"].as_str() {
            Some(reference) => &openapi()["components"]["headers"][reference.rsplit('/').next().unwrap_or_default()],
            None => header,
        };
        match headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
            Some(value) => openapi_validate(&header["schema"], &Value::String(value.to_owned()))
                .map_err(|e| format!("header {name}: {e}"))?,
            None if header["required"] == true => return Err(format!("header {name} is missing")),
            None => {}
        }
    }
    openapi_validate(&response["content"]["application/json"]["schema"], body).map_err(|e| format!("body: {e}"))
}

pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: String,
}

impl Answer {
    pub fn reply(&self) -> &str {
        self.body["reply"]
            .as_str()
            .unwrap_or_else(|| panic!("no reply in {} ({})", self.raw, self.status))
    }
    pub fn detail(&self) -> &str {
        self.body["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {} ({})", self.raw, self.status))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn load_event(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("event file")).expect("event JSON")
}

// ---------------------------------------------------------------- key sources

/// Fails the test if a request ever gets as far as reading the secret.
pub struct PanickingKey;

impl ApiKeySource for PanickingKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        panic!("the secret was read")
    }
}

/// Fails its first read, then returns the key.
#[derive(Default)]
pub struct FlakyKey(AtomicUsize);

impl ApiKeySource for FlakyKey {
    async fn fetch(&self) -> Result<ApiKey, SecretError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(SecretError::Read("AccessDeniedException".into()));
        }
        refund_chat::secrets::parse_secret_string(API_KEY)
    }
}

// ---------------------------------------------------------------- model and payments answers

pub fn completion(message: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::completion(message))
}

pub fn text(reply: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::text(reply))
}

pub fn tool_calls(calls: &[(&str, &str, &str)]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(refund_chat_local::completions::tool_calls(calls))
}

pub fn refund_call(id: &str, order_id: &str, amount_cents: u64) -> ResponseTemplate {
    tool_calls(&[(
        id,
        "issue_refund",
        &json!({"order_id": order_id, "amount_cents": amount_cents}).to_string(),
    )])
}

pub fn hang() -> ResponseTemplate {
    text("too late").set_delay(HANG)
}

pub fn receipt() -> ResponseTemplate {
    ResponseTemplate::new(201)
        .set_body_json(json!({"refund_id": "rf_42", "status": "succeeded", "amount_cents": 1250, "currency": "eur"}))
}

/// The `role: "tool"` messages of one model request.
pub fn tool_messages(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

/// The `error` of a tool message's content, if it is one.
pub fn tool_error(message: &Value) -> Option<String> {
    let content: Value = serde_json::from_str(message["content"].as_str()?).ok()?;
    content["error"].as_str().map(str::to_owned)
}

/// The parsed content of a tool message.
pub fn tool_content(message: &Value) -> Value {
    message["content"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}
