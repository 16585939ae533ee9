//! The function, wired as `main` wires it, against stand-ins a test may replace; sending it API Gateway events; model stand-ins that answer by script.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::lambda_runtime::Context;
use lambda_http::{Body, RequestExt};
use refund_chat::config::Config;
use refund_chat::secrets::{ApiKeySource, FixedKey};
use refund_chat::startup::FunctionApp;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::*;

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
        // The sandbox is the order system too; a test's mock server serves both routes.
        ("ORDERS_BASE_URL", payments_base.to_owned()),
        ("ORDERS_TIMEOUT_SECS", ORDERS_TIMEOUT.as_secs_f64().to_string()),
        ("OPENAI_TIMEOUT_SECS", OPENAI_TIMEOUT.as_secs_f64().to_string()),
        ("RETRY_BACKOFF_SECS", BACKOFF.as_secs_f64().to_string()),
        ("PAYMENTS_TIMEOUT_SECS", PAYMENTS_TIMEOUT.as_secs_f64().to_string()),
        ("LEDGER_TABLE", table.to_owned()),
        ("CONVERSATION_TABLE", conversation_table(table)),
        // Budgets out of the way; the budget tests set their own.
        ("CUSTOMER_TURNS_PER_HOUR", "100000".to_owned()),
        ("CUSTOMER_TOKENS_PER_DAY", "100000000".to_owned()),
        ("LEDGER_TIMEOUT_SECS", LEDGER_TIMEOUT.as_secs_f64().to_string()),
        // As deployed: the customer is the authorizer's (the events carry one).
        ("USER_IDENTITY", "authorizer".to_owned()),
        // As deployed: visitors served (contract 27), with a key for their addresses.
        ("VISITOR_ADDRESS_KEY", VISITOR_ADDRESS_KEY.to_owned()),
        // As deployed: the guest pool's tokens are guests' (contract 27).
        ("GUEST_POOL_ISSUER", GUEST_ISSUER.to_owned()),
        ("GUEST_POOL_CLIENT_ID", GUEST_CLIENT.to_owned()),
        (
            "GUEST_SIGN_IN_URL",
            "https://cognito-idp.eu-west-1.amazonaws.com/".to_owned(),
        ),
    ];
    Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())).expect("test config")
}

/// A model stand-in that answers each request by looking at it.
type ModelResponder = Box<dyn Fn(&Request) -> ResponseTemplate + Send + Sync>;

struct FnResponder(ModelResponder);

struct BoxedRespond(Box<dyn Respond>);

impl Respond for BoxedRespond {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

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
    // This turn's messages: from the newest customer message on (earlier
    // exchanges of the conversation come before it).
    let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
    let this_turn = &messages[newest..];
    if this_turn.iter().any(|m| m["role"] == "tool") {
        return text("Done.");
    }
    let said = this_turn
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let words: Vec<&str> = said.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "refund").unwrap_or(0);
    let order = words.get(at + 1).copied().unwrap_or("A-1001");
    let cents = words.get(at + 2).and_then(|c| c.parse().ok()).unwrap_or(1250u64);
    refund_call("call_1", order, cents)
}

/// An order system that has every order the asker asks for (contract 16):
/// delivered yesterday, with far more paid than any test refunds, so tests
/// about other rules never meet the order's. The customer is the request's
/// `X-Customer-Id`, so the function's own check of it is exercised.
pub struct AnyOrder;

impl Respond for AnyOrder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let customer = request
            .headers
            .get("x-customer-id")
            .and_then(|value| value.to_str().ok())
            .map(percent_decode)
            .unwrap_or_default();
        let order_id = request.url.path().trim_start_matches("/orders/");
        ResponseTemplate::new(200).set_body_json(order_json(&percent_decode(order_id), &customer, "delivered", Some(1)))
    }
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// An order as the order system sends it: `delivered_days_ago` sets
/// `delivered_at` (`None`: not delivered yet).
pub fn order_json(order_id: &str, customer: &str, status: &str, delivered_days_ago: Option<u64>) -> Value {
    let now = refund_chat::clock::now_ms();
    let day = 86_400_000;
    json!({
        "order_id": order_id,
        "customer_id": customer,
        "status": status,
        "placed_at": refund_chat::clock::rfc3339(now - 40 * day),
        "delivered_at": delivered_days_ago.map(|days| refund_chat::clock::rfc3339(now - days * day)),
        "currency": "EUR",
        "paid_cents": 10_000_000,
        "refunded_cents": 0,
        "items": [{"name": "Parcel", "quantity": 1, "unit_price_cents": 10_000_000}],
        "ship_to": {"name": "Ada Quokka", "line1": "1 Zanzibar Lane", "city": "Lyon", "postcode": "69002", "country": "FR"},
    })
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
    pub app: Arc<FunctionApp<K>>,
}

/// A change a test makes to the configuration before the app is built.
type ConfigChange = Box<dyn FnOnce(&mut Config)>;

/// Builds a [`TestApp`]; every part has a default a test may replace.
pub struct Builder<K> {
    model: Vec<ResponseTemplate>,
    /// The routing call's answer (contract 21).
    router: Option<Box<dyn Respond>>,
    model_responder: Option<ModelResponder>,
    payments: ResponseTemplate,
    orders: Option<Box<dyn Respond>>,
    key_source: K,
    payments_base: Option<String>,
    ledger_endpoint: Option<String>,
    conversations_endpoint: Option<String>,
    configure: Vec<ConfigChange>,
}

impl TestApp<FixedKey> {
    pub fn builder() -> Builder<FixedKey> {
        Builder {
            model: Vec::new(),
            router: None,
            model_responder: None,
            payments: receipt(),
            orders: None,
            key_source: FixedKey::new(API_KEY),
            payments_base: None,
            ledger_endpoint: None,
            conversations_endpoint: None,
            configure: Vec::new(),
        }
    }

    /// The model answers with `model` in order; payments answer every refund with `payments`.
    pub async fn new(model: Vec<ResponseTemplate>, payments: ResponseTemplate) -> Self {
        TestApp::builder().model(model).payments(payments).build().await
    }
}

impl<K: ApiKeySource> Builder<K> {
    /// What the routing call answers (see [`routed`]).
    pub fn router(mut self, answer: ResponseTemplate) -> Self {
        self.router = Some(Box::new(answer));
        self
    }

    /// The routing call answered by the request (its key, say).
    pub fn router_responder(mut self, respond: impl Respond + 'static) -> Self {
        self.router = Some(Box::new(respond));
        self
    }

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
    /// The order system answers with `orders` (by default [`AnyOrder`]).
    pub fn orders(mut self, orders: impl Respond + 'static) -> Self {
        self.orders = Some(Box::new(orders));
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
    /// The conversation table's DynamoDB at another address.
    pub fn conversations_at(mut self, endpoint: String) -> Self {
        self.conversations_endpoint = Some(endpoint);
        self
    }
    pub fn configure(mut self, change: impl FnOnce(&mut Config) + 'static) -> Self {
        self.configure.push(Box::new(change));
        self
    }
    pub fn key_source<K2: ApiKeySource>(self, key_source: K2) -> Builder<K2> {
        Builder {
            model: self.model,
            router: self.router,
            model_responder: self.model_responder,
            payments: self.payments,
            orders: self.orders,
            key_source,
            payments_base: self.payments_base,
            ledger_endpoint: self.ledger_endpoint,
            conversations_endpoint: self.conversations_endpoint,
            configure: self.configure,
        }
    }

    pub async fn build(self) -> TestApp<K> {
        interested_global_subscriber();
        let openai = MockServer::start().await;
        let payments = MockServer::start().await;
        let model_script = Script::new(self.model);
        // The routing call (contract 21) has its own answer, sure and low-risk
        // unless the test says otherwise: the script is the agent's.
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(wiremock::matchers::body_partial_json(
                json!({"response_format": {"type": "json_schema"}}),
            ))
            .respond_with(BoxedRespond(
                self.router
                    .unwrap_or_else(|| Box::new(routed(&["refund"], "low", 0.95))),
            ))
            .with_priority(1)
            .mount(&openai)
            .await;
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
        // The order system lives on the payments mock (as on the sandbox).
        let orders = Mock::given(method("GET")).and(wiremock::matchers::path_regex("^/orders/"));
        match self.orders {
            Some(orders_respond) => orders.respond_with(BoxedRespond(orders_respond)),
            None => orders.respond_with(BoxedRespond(Box::new(AnyOrder))),
        }
        .mount(&payments)
        .await;
        let aws = aws_at(&moto().endpoint).await;
        let table = new_table(&aws).await;
        let payments_base = self.payments_base.unwrap_or_else(|| payments.uri());
        let mut config = config(&format!("{}/v1", openai.uri()), &payments_base, &table);
        config.orders_base_url = payments.uri();
        for change in self.configure {
            change(&mut config);
        }
        let ledger_aws = match &self.ledger_endpoint {
            Some(endpoint) => aws_at(endpoint).await,
            None => aws.clone(),
        };
        let conversations_aws = match &self.conversations_endpoint {
            Some(endpoint) => Some(aws_at(endpoint).await),
            None if self.ledger_endpoint.is_some() => Some(aws.clone()),
            None => None,
        };
        let app = refund_chat::startup::wire_on(
            config,
            refund_chat::http_client::money_path_client().expect("an HTTP client"),
            &ledger_aws,
            conversations_aws.as_ref(),
            self.key_source,
        )
        .expect("app");
        TestApp {
            openai,
            payments,
            model_script,
            aws,
            table,
            app: Arc::new(app),
        }
    }
}

impl<K: ApiKeySource + Send + Sync + 'static> TestApp<K> {
    /// Says `message` in event-stream mode (contract 20), in `conversation`.
    pub async fn say_streamed(&self, conversation: Option<&str>, message: &str, headers: &[(&str, &str)]) -> Streamed {
        let mut headers = headers.to_vec();
        headers.push(("accept", "text/event-stream"));
        let event = post_event(&conversation_body(message, conversation), &headers);
        send_streamed_as(&self.app, event, &fresh_request_id()).await
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

    /// Reads conversation `id` as [`USER`] (contract 18), `after` as the query says.
    pub async fn read(&self, id: &str, query: &str) -> Answer {
        send_as(&self.app, read_event(id, query, Some(USER)), &fresh_request_id(), 0).await
    }

    /// The JSON bodies the agent's model calls carried, in order (the
    /// routing calls apart: [`Self::routing_requests`]).
    pub async fn model_requests(&self) -> Vec<Value> {
        bodies(&self.openai)
            .await
            .into_iter()
            .filter(|r| !is_routing_call(r))
            .collect()
    }

    /// The routing calls' bodies (contract 21), in order.
    pub async fn routing_requests(&self) -> Vec<Value> {
        bodies(&self.openai).await.into_iter().filter(is_routing_call).collect()
    }

    /// The JSON bodies the payments service received, in order.
    pub async fn payments_requests(&self) -> Vec<Value> {
        bodies(&self.payments).await
    }

    /// The paths of the order system's reads (`GET /orders/...`), in order.
    pub async fn orders_requests(&self) -> Vec<String> {
        self.payments
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path().starts_with("/orders/"))
            .map(|r| r.url.path().to_owned())
            .collect()
    }

    /// The support team's library on this app's tables, payments and orders.
    pub fn staff(&self) -> refund_chat::staff::Staff {
        let config = crate::desk_config(&self.table, &self.payments.uri(), &[]);
        let http = refund_chat::http_client::money_path_client().expect("an HTTP client");
        refund_chat::staff::Staff::new(&config.staff, &self.aws, http)
    }

    /// Every ledger item.
    pub async fn ledger(&self) -> Vec<std::collections::HashMap<String, AttributeValue>> {
        items(&self.aws, &self.table).await
    }

    /// A message in `conversation` (none: a new one), as a request of its
    /// own Lambda request id, as every invocation on Lambda has.
    pub async fn say(&self, conversation: Option<&str>, message: &str) -> Answer {
        self.say_with(conversation, message, &[]).await
    }

    /// The same, with extra headers (an `Idempotency-Key`).
    pub async fn say_with(&self, conversation: Option<&str>, message: &str, headers: &[(&str, &str)]) -> Answer {
        let event = post_event(&conversation_body(message, conversation), headers);
        send_as(&self.app, event, &fresh_request_id(), 0).await
    }

    /// The conversation table, as the function's adapter sees it.
    pub fn conversations(&self) -> refund_chat::ledger::dynamo::conversations::DynamoConversations {
        refund_chat::ledger::dynamo::conversations::DynamoConversations::from_sdk_config(
            &self.aws,
            conversation_table(&self.table),
            &self.table,
            self.app.config().conversation_lifetime(),
            LEDGER_TIMEOUT,
        )
    }

    /// A conversation's stored exchanges, oldest first (none if it is absent).
    pub async fn exchanges(&self, id: &str) -> Vec<refund_chat::ledger::dynamo::conversations::StoredExchange> {
        self.conversations()
            .transcript(id, refund_chat::clock::now_ms())
            .await
            .expect("the conversation table")
            .map(|transcript| transcript.exchanges)
            .unwrap_or_default()
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

/// [`USER`]'s message in `conversation` (none: a new one).
pub fn conversation_body(message: &str, conversation: Option<&str>) -> String {
    let mut body = json!({"user_id": USER, "message": message});
    if let Some(id) = conversation {
        body["conversation_id"] = json!(id);
    }
    body.to_string()
}

/// A Lambda request id no other request of the test binary has.
pub fn fresh_request_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!("req-{:06}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
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

/// The same, signed in with a guest pool's token (contract 27): the
/// authorizer's claims carry the pool's issuer, `sub`, `email` and
/// `email_verified` as given.
pub fn guest_post_event(sub: &str, email: &str, verified: &str, body: &str, headers: &[(&str, &str)]) -> Value {
    let mut event = post_event_as(sub, body, headers);
    let claims = &mut event["requestContext"]["authorizer"]["jwt"]["claims"];
    claims["iss"] = Value::String(GUEST_ISSUER.to_owned());
    claims["aud"] = Value::String(GUEST_CLIENT.to_owned());
    claims["email"] = Value::String(email.to_owned());
    claims["email_verified"] = Value::String(verified.to_owned());
    event
}

/// An HTTP API v2 event reading conversation `id` (contract 18), signed in
/// as `user` (none: no authorizer), with `query` as its query string.
pub fn read_event(id: &str, query: &str, user: Option<&str>) -> Value {
    let mut event = load_event("http-api-v2-read.json");
    let path = format!("/support/refund-chat/conversations/{id}");
    event["rawPath"] = Value::String(path.clone());
    event["requestContext"]["http"]["path"] = Value::String(path);
    event["rawQueryString"] = Value::String(query.to_owned());
    event["queryStringParameters"] = Value::Object(
        // The tests' queries need no decoding.
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, value)| (name.to_owned(), Value::String(value.to_owned())))
            .collect(),
    );
    match user {
        Some(user) => event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = Value::String(user.to_owned()),
        None => {
            if let Some(context) = event["requestContext"].as_object_mut() {
                context.remove("authorizer");
            }
        }
    }
    event
}

/// A customer's "Did this solve it?" of conversation `id` (contract 30),
/// as `user` (none: no authorizer).
pub fn rating_event(id: &str, body: &Value, user: Option<&str>) -> Value {
    let mut event = read_event(id, "", user);
    let path = format!("/support/refund-chat/conversations/{id}/rating");
    event["rawPath"] = Value::String(path.clone());
    event["routeKey"] = Value::String("POST /support/refund-chat/conversations/{id}/rating".into());
    event["requestContext"]["http"]["path"] = Value::String(path);
    event["requestContext"]["http"]["method"] = Value::String("POST".into());
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["body"] = Value::String(body.to_string());
    event["isBase64Encoded"] = Value::Bool(false);
    event
}

/// A visitor's rating of conversation `id` (contract 30), `headers` as sent.
pub fn visitor_rating_event(id: &str, body: &Value, headers: &[(&str, &str)]) -> Value {
    let mut event = visitor_read_event(id, "", headers);
    let path = format!("/support/refund-chat/visitor/conversations/{id}/rating");
    event["path"] = Value::String(path.clone());
    event["httpMethod"] = Value::String("POST".into());
    event["resource"] = Value::String("/support/refund-chat/visitor/conversations/{id}/rating".into());
    event["requestContext"]["httpMethod"] = Value::String("POST".into());
    event["requestContext"]["path"] = Value::String(path);
    event["body"] = Value::String(body.to_string());
    event
}

/// A visitor's POST (contract 27) as API Gateway's REST API passes it: no
/// authorizer, `address` as the source address, `headers` as sent (the
/// visitor's token among them, once it has one).
pub fn visitor_post_event(body: &str, address: &str, headers: &[(&str, &str)]) -> Value {
    let mut event = load_event("visitor-question.json");
    event["body"] = Value::String(body.to_owned());
    event["requestContext"]["identity"]["sourceIp"] = Value::String(address.to_owned());
    for (name, value) in headers {
        event["headers"][*name] = Value::String((*value).to_owned());
        event["multiValueHeaders"][*name] = serde_json::json!([value]);
    }
    event
}

/// A visitor's read of conversation `id` (contract 27), with `headers` as
/// sent (none: no token) and `query` as its query string.
pub fn visitor_read_event(id: &str, query: &str, headers: &[(&str, &str)]) -> Value {
    let mut event = load_event("visitor-read-another.json");
    event["path"] = Value::String(format!("/support/refund-chat/visitor/conversations/{id}"));
    event["pathParameters"]["id"] = Value::String(id.to_owned());
    // The event file's own token is another visitor's: only `headers` count.
    for sent in ["headers", "multiValueHeaders"] {
        if let Some(sent) = event[sent].as_object_mut() {
            sent.remove("X-Visitor-Token");
        }
    }
    for (name, value) in headers {
        event["headers"][*name] = Value::String((*value).to_owned());
        event["multiValueHeaders"][*name] = serde_json::json!([value]);
    }
    let pairs: serde_json::Map<String, Value> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), Value::String(value.to_owned())))
        .collect();
    if !pairs.is_empty() {
        event["multiValueQueryStringParameters"] =
            Value::Object(pairs.iter().map(|(k, v)| (k.clone(), serde_json::json!([v]))).collect());
        event["queryStringParameters"] = Value::Object(pairs);
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
    let path = event["rawPath"]
        .as_str()
        .or_else(|| event["path"].as_str())
        .unwrap_or_default()
        .to_owned();
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
    if let Err(problem) = openapi_check(operation_of(&path), status.as_u16(), &headers, &body) {
        panic!("the answer does not match docs/openapi.yaml: {problem}\n{status} {raw}");
    }
    Answer {
        status,
        headers,
        body,
        raw,
    }
}

/// An answer in event-stream mode, as a client reads it: a JSON answer
/// (decided before the turn), or the events of a `200` stream.
#[derive(Debug)]
pub struct Streamed {
    pub status: lambda_http::http::StatusCode,
    pub headers: lambda_http::http::HeaderMap,
    /// The body as sent, whole.
    pub raw: String,
    /// Each event's name and data, in order (comments left out).
    pub events: Vec<(String, Value)>,
    /// `: keep-alive` comments.
    pub keep_alives: usize,
}

impl Streamed {
    pub fn is_stream(&self) -> bool {
        self.headers
            .get("content-type")
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"))
    }

    pub fn names(&self) -> Vec<&str> {
        self.events.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// The `done` event's status and body (panics if there is not exactly one, last).
    pub fn done(&self) -> (u16, &Value) {
        let dones = self.names().iter().filter(|n| **n == "done").count();
        assert_eq!(dones, 1, "exactly one done: {:?}", self.names());
        let (name, data) = self.events.last().expect("an event");
        assert_eq!(name, "done", "done is last: {:?}", self.names());
        (data["status"].as_u64().unwrap_or_default() as u16, &data["body"])
    }

    /// The text of the `delta` events since the last `discard`.
    pub fn draft(&self) -> String {
        let from = self
            .events
            .iter()
            .rposition(|(name, _)| name == "discard")
            .map_or(0, |i| i + 1);
        self.events[from..]
            .iter()
            .filter(|(name, _)| name == "delta")
            .filter_map(|(_, data)| data["text"].as_str())
            .collect()
    }

    /// The `progress` steps, in order.
    pub fn steps(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|(name, _)| name == "progress")
            .filter_map(|(_, data)| data["step"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Parses an event stream's body: blocks split on a blank line, each an
/// `event:` and a `data:` line, or a comment.
pub fn parse_event_stream(raw: &str) -> (Vec<(String, Value)>, usize) {
    let (mut events, mut comments) = (Vec::new(), 0);
    for block in raw.split("\n\n").filter(|block| !block.is_empty()) {
        if block.starts_with(':') {
            comments += 1;
            continue;
        }
        let mut lines = block.lines();
        let name = lines
            .next()
            .and_then(|l| l.strip_prefix("event: "))
            .expect("an event line");
        let data = lines
            .next()
            .and_then(|l| l.strip_prefix("data: "))
            .expect("a data line");
        assert!(lines.next().is_none(), "one event line and one data line: {block:?}");
        events.push((name.to_owned(), serde_json::from_str(data).expect("JSON data")));
    }
    (events, comments)
}

/// Sends `event` through the function's own answer (either mode) and reads
/// the body to its end.
pub async fn send_streamed_as<K: ApiKeySource + Send + Sync + 'static>(
    app: &Arc<FunctionApp<K>>,
    event: Value,
    request_id: &str,
) -> Streamed {
    use http_body_util::BodyExt;
    let path = event["rawPath"]
        .as_str()
        .or_else(|| event["path"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut context = Context::default();
    context.request_id = request_id.to_owned();
    let request = lambda_http::request::from_str(&event.to_string())
        .expect("event")
        .with_lambda_context(context);
    let (parts, body) = Arc::clone(app).answer(request).await.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let raw = String::from_utf8(bytes.to_vec()).expect("UTF-8");
    let mut streamed = Streamed {
        status: parts.status,
        headers: parts.headers,
        raw,
        events: Vec::new(),
        keep_alives: 0,
    };
    if streamed.is_stream() {
        (streamed.events, streamed.keep_alives) = parse_event_stream(&streamed.raw);
        let (status, body) = streamed.done();
        if let Err(problem) = openapi_check_body(operation_of(&path), status, body) {
            panic!(
                "done's body does not match docs/openapi.yaml: {problem}\n{}",
                streamed.raw
            );
        }
    } else {
        let body = serde_json::from_str(&streamed.raw).unwrap_or(Value::Null);
        if let Err(problem) = openapi_check(operation_of(&path), streamed.status.as_u16(), &streamed.headers, &body) {
            panic!(
                "the answer does not match docs/openapi.yaml: {problem}\n{}",
                streamed.raw
            );
        }
    }
    streamed
}
