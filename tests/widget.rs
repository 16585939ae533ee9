//! The chat page in a real browser (Debian's headless Chromium, driven over
//! WebDriver by fantoccini and chromedriver), against the local stack in
//! process: the page server of `make run`, the real handler, the local model,
//! the payments sandbox and moto. Checks what a customer sees and what the
//! sandbox's books say: one refund per message, whatever the network does.
//!
//! `make test` installs `chromium` and `chromium-driver` when they are missing.

// The in-process stack's future (the page server around the whole handler)
// nests deeper than rustc's default layout query depth on a clean build.
#![recursion_limit = "256"]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use lambda_http::RequestExt;
use refund_chat::config::IdentitySource;
use refund_chat::secrets::FixedKey;
use refund_chat::startup::FunctionApp;
use refund_chat_local::guest_pool::GuestPool;
use refund_chat_local::payments_sandbox::Sandbox;
use refund_chat_local::pool_gate::PoolGate;
use refund_chat_local::widget::Widget;
use refund_chat_testkit::*;
use serde_json::Value;

const ENTER: &str = "\u{e007}";
/// WebDriver's Control key: pressed until it is sent again.
const CONTROL: &str = "\u{e009}";
const WAIT: Duration = Duration::from_secs(20);
/// The model's, payments' and the order system's timeouts in these tests.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(5);

/// The function behind an HTTP port, as `cargo lambda watch` serves it:
/// each request becomes an API Gateway event for the real handler.
/// A request's head, its body read whole, and its headers that are text.
async fn taken_apart(
    request: axum::extract::Request,
) -> (axum::http::request::Parts, axum::body::Bytes, Vec<(String, String)>) {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect();
    (parts, body, headers)
}

/// One message through the real handler, as API Gateway passes it on
/// (`to_event` builds the event from the body and the headers), its
/// answer JSON or a stream as the function's own.
async fn answer_message(
    app: Arc<FunctionApp<FixedKey>>,
    request: axum::extract::Request,
    to_event: fn(&str, &[(&str, &str)]) -> Value,
    guests: Arc<PoolGate>,
) -> axum::response::Response {
    static INVOCATIONS: AtomicUsize = AtomicUsize::new(0);
    let (_, body, mut headers) = taken_apart(request).await;
    door(&guests, &mut headers).await;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    if let Some((_, token)) = headers.iter().find(|(name, _)| *name == "authorization") {
        AUTHORIZATIONS.lock().unwrap().push((*token).to_owned());
    }
    let event = to_event(&String::from_utf8_lossy(&body), &headers);
    let request_id = format!("req-widget-{}", INVOCATIONS.fetch_add(1, Ordering::SeqCst));
    let streams = headers
        .iter()
        .any(|(n, v)| *n == "accept" && v.contains("text/event-stream"));
    if !streams {
        let answer = send_as(&app, event, &request_id, 0).await;
        let mut response = axum::response::Response::builder().status(answer.status);
        for (name, value) in &answer.headers {
            response = response.header(name, value);
        }
        return response.body(axum::body::Body::from(answer.raw)).unwrap_or_default();
    }
    // The page's messages: the function's own answer, streamed as it comes.
    let mut context = lambda_http::lambda_runtime::Context::default();
    context.request_id = request_id;
    let request = lambda_http::request::from_str(&event.to_string())
        .expect("event")
        .with_lambda_context(context);
    Arc::clone(&app).answer(request).await.map(axum::body::Body::new)
}

/// The guest pool's authorizer (contract 27), as the page server's door
/// under `make run` is: a token of the pool that verifies goes on as its
/// claims (the function reads them in body mode), never a browser's own.
async fn door(guests: &PoolGate, headers: &mut Vec<(String, String)>) {
    let claims_header = refund_chat::http::identity::DOOR_CLAIMS_HEADER;
    headers.retain(|(name, _)| name != claims_header);
    let token = headers
        .iter()
        .find(|(name, _)| name == "authorization")
        .map(|(_, token)| token.clone());
    if let Some(token) = &token {
        GUEST_TOKENS_SEEN.lock().unwrap().push(token.clone());
        // An ID token past its hour, as the authorizer would refuse it.
        if EXPIRED.lock().unwrap().contains(token) {
            return;
        }
    }
    if let Ok(claims) = guests.claims(token.as_deref()).await {
        headers.push((claims_header.to_owned(), claims.to_string()));
    }
}

/// A visitor's message (contract 27): no authorizer, from the loopback address.
fn visitor_event(body: &str, headers: &[(&str, &str)]) -> Value {
    visitor_post_event(body, "127.0.0.1", headers)
}

/// Every token the door was shown, and those it takes as expired.
static GUEST_TOKENS_SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
static EXPIRED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The `Authorization` of every chat message the function was sent, in order.
static AUTHORIZATIONS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn serve_function(app: Arc<FunctionApp<FixedKey>>, guests: Arc<PoolGate>) -> SocketAddr {
    // The chat page and its files (contract 27), as API Gateway passes a GET on.
    let page = {
        let app = Arc::clone(&app);
        move |uri: axum::http::Uri| {
            let app = Arc::clone(&app);
            async move {
                let mut event = load_event("visitor-read-another.json");
                event["path"] = Value::String(uri.path().to_owned());
                event["pathParameters"] = Value::Null;
                let request = lambda_http::request::from_str(&event.to_string()).expect("event");
                let response = app.handle(request).await;
                let (parts, body) = response.into_parts();
                let body = match body {
                    lambda_http::Body::Text(text) => axum::body::Body::from(text),
                    lambda_http::Body::Binary(bytes) => axum::body::Body::from(bytes),
                    _ => axum::body::Body::empty(),
                };
                axum::response::Response::from_parts(parts, body)
            }
        }
    };
    let handler = {
        let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
        move |request: axum::extract::Request| {
            answer_message(Arc::clone(&app), request, post_event, Arc::clone(&guests))
        }
    };
    // A claim (contract 27): the customer in the query, as body mode reads it
    // (the page's token is no verified identity here), the visitor's header.
    let claims = {
        let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
        move |axum::extract::Path(id): axum::extract::Path<String>, headers: axum::http::HeaderMap| {
            let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
            async move {
                let subject = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|token| token.split('.').nth(1))
                    .and_then(|claims| {
                        use base64::Engine;
                        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).ok()
                    })
                    .and_then(|claims| serde_json::from_slice::<Value>(&claims).ok())
                    .and_then(|claims| claims["sub"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let mut event = read_event(&id, &format!("user_id={subject}"), None);
                let path = format!("{}{id}/claim", refund_chat::http::read::PREFIX);
                event["rawPath"] = Value::String(path.clone());
                event["requestContext"]["http"]["path"] = Value::String(path);
                event["requestContext"]["http"]["method"] = Value::String("POST".into());
                event["body"] = Value::String("{}".into());
                if let Some(token) = headers
                    .get(refund_chat::visitor::TOKEN_HEADER)
                    .and_then(|v| v.to_str().ok())
                {
                    event["headers"]["x-visitor-token"] = Value::String(token.to_owned());
                }
                guest_claims(&guests, &headers, &mut event).await;
                let answer = send_as(&app, event, &fresh_request_id(), 0).await;
                axum::response::Response::builder()
                    .status(answer.status)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.raw))
                    .unwrap_or_default()
            }
        }
    };
    let visitor = {
        let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
        move |request: axum::extract::Request| {
            answer_message(Arc::clone(&app), request, visitor_event, Arc::clone(&guests))
        }
    };
    // The page's reads of its conversation (contract 18), as API Gateway
    // passes them on: the path, the query string and the headers, no body.
    let reads = {
        let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
        move |axum::extract::Path(id): axum::extract::Path<String>,
              uri: axum::http::Uri,
              headers: axum::http::HeaderMap| {
            let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
            async move {
                let event = if uri.path().starts_with(refund_chat::http::visitor::READ_PREFIX) {
                    let token: Vec<(&str, &str)> = headers
                        .get(refund_chat::visitor::TOKEN_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(|token| vec![("X-Visitor-Token", token)])
                        .unwrap_or_default();
                    visitor_read_event(&id, uri.query().unwrap_or_default(), &token)
                } else {
                    read_event(&id, uri.query().unwrap_or_default(), None)
                };
                let mut event = event;
                guest_claims(&guests, &headers, &mut event).await;
                let answer = send_as(&app, event, &fresh_request_id(), 0).await;
                axum::response::Response::builder()
                    .status(answer.status)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.raw))
                    .unwrap_or_default()
            }
        }
    };
    // "Did this solve it?" (contract 30): a read's identity (the query's
    // customer, or the visitor's token), POSTed with its body.
    let ratings = {
        let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
        move |axum::extract::Path(id): axum::extract::Path<String>,
              uri: axum::http::Uri,
              headers: axum::http::HeaderMap,
              body: String| {
            let (app, guests) = (Arc::clone(&app), Arc::clone(&guests));
            async move {
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let mut event = if uri.path().starts_with(refund_chat::http::visitor::READ_PREFIX) {
                    let token: Vec<(&str, &str)> = headers
                        .get(refund_chat::visitor::TOKEN_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(|token| vec![("X-Visitor-Token", token)])
                        .unwrap_or_default();
                    visitor_rating_event(&id, &body, &token)
                } else {
                    let mut event = rating_event(&id, &body, None);
                    let query = uri.query().unwrap_or_default();
                    event["rawQueryString"] = Value::String(query.to_owned());
                    event["queryStringParameters"] = Value::Object(
                        query
                            .split('&')
                            .filter_map(|pair| pair.split_once('='))
                            .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
                            .collect(),
                    );
                    event
                };
                guest_claims(&guests, &headers, &mut event).await;
                let answer = send_as(&app, event, &fresh_request_id(), 0).await;
                axum::response::Response::builder()
                    .status(answer.status)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.raw))
                    .unwrap_or_default()
            }
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/support", axum::routing::get(page.clone()))
        .route("/support/", axum::routing::get(page.clone()))
        .route("/support/chat.js", axum::routing::get(page.clone()))
        .route("/support/chat.css", axum::routing::get(page))
        .route(refund_chat::http::ROUTE, axum::routing::post(handler))
        .route(
            &format!("{}{{id}}/claim", refund_chat::http::read::PREFIX),
            axum::routing::post(claims),
        )
        .route(refund_chat::http::visitor::ROUTE, axum::routing::post(visitor))
        .route(
            &format!("{}{{id}}/rating", refund_chat::http::read::PREFIX),
            axum::routing::post(ratings.clone()),
        )
        .route(
            &format!("{}{{id}}/rating", refund_chat::http::visitor::READ_PREFIX),
            axum::routing::post(ratings),
        )
        .route(
            &format!("{}{{id}}", refund_chat::http::read::PREFIX),
            axum::routing::get(reads.clone()),
        )
        .route(
            &format!("{}{{id}}", refund_chat::http::visitor::READ_PREFIX),
            axum::routing::get(reads),
        );
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// The door's claims of a guest token among `headers`, into `event`'s headers.
async fn guest_claims(guests: &PoolGate, headers: &axum::http::HeaderMap, event: &mut Value) {
    let mut passed: Vec<(String, String)> = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|token| vec![("authorization".to_owned(), token.to_owned())])
        .unwrap_or_default();
    door(guests, &mut passed).await;
    for (name, value) in passed {
        event["headers"][name] = Value::String(value);
    }
}

struct Stack {
    page: String,
    /// The function's own address: its page (`/support/`, contract 27) as deployed.
    function: String,
    /// The staff pool's people (`tools/local-staff-pool.py`'s answer).
    staff_pool: Value,
    /// The guest pool's stand-in, whose outbox holds the codes it "sent".
    guest_pool: Arc<GuestPool>,
    widget: Arc<Widget>,
    sandbox: Sandbox,
    /// What `refund-chat-admin` needs to act on this stack's ledger.
    admin_env: Vec<(&'static str, String)>,
    /// The function's conversations, for a test that writes one directly.
    conversations: refund_chat::ledger::dynamo::conversations::DynamoConversations,
    /// The stack's AWS (moto, one call at a time), for a test that sets a stored fact.
    aws: aws_config::SdkConfig,
    _chromedriver: tokio::process::Child,
    browser: Client,
    profile: PathBuf,
}

impl Drop for Stack {
    /// Chromium outlives a killed chromedriver: end every process of this
    /// test's profile, so none is left running after the test.
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .arg("-f")
            .arg(self.profile.as_os_str())
            .status();
    }
}

impl Stack {
    async fn start() -> Stack {
        Stack::start_configured(|_| {}).await
    }

    /// The stack, with the function's settings changed by `change` last.
    async fn start_configured(change: impl FnOnce(&mut refund_chat::config::Config)) -> Stack {
        Stack::start_with(change, None).await
    }

    /// The stack with live pokes (contract 31): the Event API's stand-in,
    /// deciding with the project's own code, both functions publishing to
    /// it, and every page's poll `poll_secs` apart whether its socket is up
    /// or not (far beyond a test: the fallback is off).
    async fn start_live(poll_secs: u32) -> (Stack, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stack = Stack::start_with(|_| {}, Some((listener, poll_secs))).await;
        (stack, base)
    }

    async fn start_with(
        change: impl FnOnce(&mut refund_chat::config::Config),
        live: Option<(tokio::net::TcpListener, u32)>,
    ) -> Stack {
        let LocalStack {
            sandbox, mut config, ..
        } = local_stack().await;
        // Two browsers approve at once here: DynamoDB serialises writes of
        // an item, moto does not, so everything reaches moto one at a time.
        let serialised = one_at_a_time(&moto().endpoint).await;
        let aws = aws_at(&serialised).await;
        // Chromium shares the two cores: the page is under test, not the timeouts.
        config.openai_timeout = BROWSER_TIMEOUT;
        config.payments_timeout = BROWSER_TIMEOUT;
        config.orders_timeout = BROWSER_TIMEOUT;
        config.identity.source = IdentitySource::Body; // as under make run: the page picks the customer
        // As local.env serves it: the agent changes a placed order's address
        // (contract 26) and starts a delivered order's return, linking the
        // sandbox's labels (contract 28).
        config.router.served =
            refund_chat::router::Served::parse("order_status,refund,policy_question,other,address_change,return")
                .unwrap();
        config.returns.label_origins = vec![config.orders_base_url.trim_end_matches('/').to_owned()];
        let admin_env = vec![
            ("LEDGER_TABLE", config.ledger_table.clone()),
            ("CONVERSATION_TABLE", config.conversation_table.clone()),
            ("PAYMENTS_BASE_URL", config.payments_base_url.clone()),
            ("ORDERS_BASE_URL", config.orders_base_url.clone()),
            ("AWS_ENDPOINT_URL", serialised.clone()),
            ("AWS_REGION", "eu-west-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ];
        let conversations = refund_chat::ledger::dynamo::conversations::DynamoConversations::from_sdk_config(
            &aws,
            config.conversation_table.clone(),
            config.ledger_table.clone(),
            refund_chat::conversation::Lifetime {
                ttl: Duration::from_secs(3600),
                max_age: Duration::from_secs(7200),
            },
            LEDGER_TIMEOUT,
        );
        // The desk (contract 24) as make run has it: the staff pool in moto,
        // the staff function reading the person from the door's headers.
        let mut staff_pool = local_staff_pool();
        // The page signs in through make run's door to moto's pool, which
        // answers RevokeToken (contract 30).
        let staff_door = refund_chat_local::staff_pool::spawn(
            0,
            refund_chat_local::staff_pool::StaffPoolDoor::new(&moto().endpoint),
        )
        .await
        .unwrap();
        staff_pool["sign_in_url"] = Value::String(format!("http://{staff_door}/"));
        let live_base = live
            .as_ref()
            .map(|(listener, _)| format!("127.0.0.1:{}", listener.local_addr().unwrap().port()));
        let mut desk_vars: Vec<(String, String)> = vec![
            ("STAFF_IDENTITY".into(), "header".into()),
            ("PAYMENTS_TIMEOUT_SECS".into(), BROWSER_TIMEOUT.as_secs().to_string()),
            ("ORDERS_TIMEOUT_SECS".into(), BROWSER_TIMEOUT.as_secs().to_string()),
            (
                "STAFF_SIGN_IN_URL".into(),
                staff_pool["sign_in_url"].as_str().unwrap().to_owned(),
            ),
            (
                "STAFF_POOL_CLIENT_ID".into(),
                staff_pool["client_id"].as_str().unwrap().to_owned(),
            ),
        ];
        if let (Some(base), Some((_, secs))) = (&live_base, &live) {
            desk_vars.push(("LIVE_EVENTS_URL".into(), format!("http://{base}/event")));
            desk_vars.push(("LIVE_REALTIME_URL".into(), format!("ws://{base}/event/realtime")));
            desk_vars.push(("LIVE_FALLBACK_POLL_SECS".into(), secs.to_string()));
        }
        let desk_vars: Vec<(&str, &str)> = desk_vars.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let desk_config = desk_config(&config.ledger_table, &config.payments_base_url, &desk_vars);
        let desk = serve_desk(StaffDesk::new(&aws, desk_config)).await;
        // Guests (contract 27) as make run has them: the pool in moto, the
        // stand-in for its passwordless sign-in, the door for its tokens.
        let outbox = std::env::temp_dir().join(format!("refund-chat-outbox-{}.jsonl", fresh_request_id()));
        let guest_pool = GuestPool::create(&moto().endpoint, outbox).await.unwrap();
        let sign_in = refund_chat_local::guest_pool::spawn(0, Arc::clone(&guest_pool))
            .await
            .unwrap();
        let ids = guest_pool.ids().clone();
        let guest_gate = || PoolGate::new(&moto().endpoint, &ids.pool_id, &ids.issuer, &ids.client_id);
        config.identity.guest_issuer = Some(ids.issuer.clone());
        config.identity.guest_audience = Some(ids.client_id.clone());
        config.guest_sign_in = Some(refund_chat::config::GuestSignIn {
            url: format!("http://{sign_in}/"),
            client_id: ids.client_id.clone(),
        });
        change(&mut config);
        if let Some(base) = &live_base {
            config.live.events_url = Some(format!("http://{base}/event"));
            config.live.realtime_url = Some(format!("ws://{base}/event/realtime"));
        }
        let live_config = refund_chat::config::ListenConfig::from_lookup({
            let (ledger, conversations) = (config.ledger_table.clone(), config.conversation_table.clone());
            let (guest_issuer, guest_client) = (ids.issuer.clone(), ids.client_id.clone());
            let (staff_issuer, staff_client) = (
                staff_pool["issuer"].as_str().unwrap().to_owned(),
                staff_pool["client_id"].as_str().unwrap().to_owned(),
            );
            move |name| match name {
                "LEDGER_TABLE" => Some(ledger.clone()),
                "CONVERSATION_TABLE" => Some(conversations.clone()),
                "GUEST_POOL_ISSUER" => Some(guest_issuer.clone()),
                "GUEST_POOL_CLIENT_ID" => Some(guest_client.clone()),
                "STAFF_POOL_ISSUER" => Some(staff_issuer.clone()),
                "STAFF_POOL_CLIENT_ID" => Some(staff_client.clone()),
                "VISITORS" => Some("on".into()),
                _ => None,
            }
        })
        .unwrap();
        let live_poll = live.as_ref().map(|(_, secs)| *secs);
        if let Some((listener, _)) = live {
            let http = refund_chat::http_client::money_path_client().unwrap();
            let listening = refund_chat::startup::listening(&live_config, &aws, http, Some(&moto().endpoint));
            let api = refund_chat_local::event_api::EventApi::new(refund_chat_local::event_api::deciding(
                Arc::new(listening),
                true,
            ));
            tokio::spawn(refund_chat_local::serve(
                listener,
                refund_chat_local::event_api::router(api),
            ));
        }
        if let Some(secs) = live_poll {
            config.live.fallback_poll_secs = secs;
        }
        let app = Arc::new(refund_chat::startup::wire(config, &aws, FixedKey::new(API_KEY)).unwrap());
        let function = serve_function(app, Arc::new(guest_gate())).await;
        let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
        let door = refund_chat_local::widget::DeskDoor {
            gate: refund_chat_local::pool_gate::PoolGate::new(
                &moto().endpoint,
                staff_pool["pool_id"].as_str().unwrap(),
                staff_pool["issuer"].as_str().unwrap(),
                staff_pool["client_id"].as_str().unwrap(),
            ),
            function: format!("http://{desk}"),
        };
        let guests = refund_chat_local::widget::GuestDoor {
            gate: guest_gate(),
            sign_in_url: format!("http://{sign_in}/"),
            client_id: ids.client_id.clone(),
        };
        // The page asks for a person's words every 0.2 s here, not every 10
        // s; with live pokes, never within a test (the fallback is off).
        let widget =
            Widget::serving(
                web,
                format!("http://{function}{}", refund_chat::http::ROUTE),
                Some(live_poll.map_or(0.2, f64::from)),
                Some(door),
                Some(guests),
            )
            .with_live(live_base.as_ref().zip(live_poll).map(|(base, secs)| {
                refund_chat_local::widget::LiveDoor {
                    url: format!("ws://{base}/event/realtime"),
                    host: base.clone(),
                    poll_seconds: secs,
                }
            }));
        let page = refund_chat_local::widget::spawn(0, Arc::clone(&widget)).await.unwrap();
        let (chromedriver, browser, profile) = browser().await;
        Stack {
            page: format!("http://{page}/"),
            function: format!("http://{function}"),
            guest_pool,
            staff_pool,
            widget,
            sandbox,
            admin_env,
            conversations,
            aws,
            _chromedriver: chromedriver,
            browser,
            profile,
        }
    }

    /// The status Cognito (moto) answers a renewal with `refresh`.
    async fn renew_staff_token(&self, refresh: &str) -> u16 {
        let body = serde_json::json!({
            "AuthFlow": "REFRESH_TOKEN_AUTH",
            "ClientId": self.staff_pool["client_id"],
            "AuthParameters": {"REFRESH_TOKEN": refresh},
        });
        reqwest::Client::new()
            .post(self.staff_pool["sign_in_url"].as_str().unwrap())
            .header("content-type", "application/x-amz-json-1.1")
            .header("x-amz-target", "AWSCognitoIdentityProviderService.InitiateAuth")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// The password `tools/local-staff-pool.py` gave `username`.
    fn password_of(&self, username: &str) -> String {
        self.staff_pool["people"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["username"] == username)
            .unwrap_or_else(|| panic!("no {username} in the staff pool"))["password"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The stack, with the browser on the chat page.
    async fn on_the_page() -> Stack {
        let stack = Stack::start().await;
        stack.browser.goto(&stack.page).await.unwrap();
        stack
    }

    /// Ends the browser session and removes its profile.
    async fn close(&self) {
        self.browser.clone().close().await.unwrap();
        let _ = std::fs::remove_dir_all(&self.profile);
    }

    async fn type_message(&self, text: &str) {
        let input = self.browser.find(Locator::Id("message")).await.unwrap();
        input.send_keys(text).await.unwrap();
        input.send_keys(ENTER).await.unwrap();
    }

    /// The text of the `n`th (1-based) element matching `css`, once it exists.
    async fn nth(&self, css: &str, n: usize) -> String {
        let xpath = format!("(//*[{}])[{n}]", css_class_xpath(css));
        self.text_at(&xpath, &format!("{css} #{n}")).await
    }

    /// The text of the element at `xpath`, once there is one; else what
    /// the page said, in the failure.
    async fn text_at(&self, xpath: &str, what: &str) -> String {
        match self
            .browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(xpath))
            .await
        {
            Ok(element) => element.text().await.unwrap(),
            Err(error) => {
                let page = page_text(&self.browser).await;
                panic!("no {what}: {error}; the page said:\n{page}")
            }
        }
    }

    /// Waits until the page's polling shows `state` (`data-polling`: the
    /// next wait in seconds, or `off`).
    async fn polling_is(&self, state: &str) {
        let css = format!("body[data-polling='{state}']");
        self.element(&css).await;
    }

    /// Whether the page's own socket client, as the picked customer, is let
    /// hear `channel` (within 3 s): `heard` or `refused`.
    async fn hears(&self, channel: &str) -> Value {
        self.browser
            .execute_async(
                "const [channel, done] = arguments;
                 const handle = RefundChatLive.open({ channel, token: () => 'body-user:u-1001',
                   onRead() {}, onState(up) { if (up) { handle.close(); done('heard'); } } });
                 setTimeout(() => { handle.close(); done('refused'); }, 3000);",
                vec![serde_json::json!(channel)],
            )
            .await
            .unwrap()
    }

    /// The tab hidden or shown, as the browser tells the page.
    async fn set_hidden(&self, hidden: bool) {
        let script = format!(
            "Object.defineProperty(document, 'hidden', {{value: {hidden}, configurable: true}}); \
             document.dispatchEvent(new Event('visibilitychange'));"
        );
        self.browser.execute(&script, vec![]).await.unwrap();
    }

    async fn click(&self, id: &str) {
        let button = self.browser.find(Locator::Id(id)).await.unwrap();
        button.click().await.unwrap();
    }

    /// The first element matching `css`, once there is one.
    async fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
    }

    /// The problem the page shows, once it shows one.
    async fn problem(&self) -> String {
        self.browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("#problem:not([hidden])"))
            .await
            .unwrap_or_else(|e| panic!("no problem shown: {e}"));
        self.browser
            .find(Locator::Id("problem-text"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn refunds(&self) -> usize {
        self.sandbox.refunds_made().len()
    }

    /// Runs `refund-chat-admin` on this stack, as a person of the support team would.
    async fn admin(&self, args: &[&str]) -> String {
        let output = tokio::process::Command::new(admin_binary())
            .args(args)
            .env_clear()
            .envs(self.admin_env.iter().map(|(name, value)| (*name, value.as_str())))
            .output()
            .await
            .expect("run refund-chat-admin");
        let (out, err) = (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        assert!(output.status.success(), "refund-chat-admin {args:?}: {out}{err}");
        out
    }

    /// An agent's reply in `conversation`, as a turn would have left it
    /// (what a model wrote: it may carry any URL).
    async fn agent_says(&self, conversation: &str, said: &str, reply: &str) {
        use refund_chat::ledger::{Begun, ConversationLease, ConversationStore, NewExchange};
        let lease = ConversationLease {
            id: refund_chat::conversation::ConversationId::parse(conversation).unwrap(),
            customer: "u-1001".to_owned(),
            writer: refund_chat::refund::WriterMark::fixed("req-injected/w"),
            lease_until_ms: refund_chat::clock::now_ms() + 60_000,
            scope: "req-injected".into(),
        };
        let now = refund_chat::clock::now_ms();
        let Ok(Begun::Held(held)) = self.conversations.begin(&lease, false, now).await else {
            panic!("the conversation is there");
        };
        let new = NewExchange {
            verifying: false,
            from_visitor: false,
            label: None,
            handoff_due_at_ms: None,
            told: None,
            router: None,
            writes: Default::default(),
            orders: Vec::new(),
            exchange: refund_chat::conversation::Exchange::of_turn(
                &[refund_chat::chat::Message::User(said.to_owned())],
                Some(reply),
            ),
            status: 200,
            scope: refund_chat::refund::RefundScope::for_request("u-1001", "req-injected"),
            marked: true,
            refund_recorded: false,
            awaiting_approval: false,
            handoff: None,
            tokens: None,
            key: None,
        };
        self.conversations.append(&lease, &held, &new, now).await.unwrap();
    }

    /// The conversation the page keeps for this tab.
    async fn conversation(&self) -> String {
        let kept = self
            .browser
            .execute("return sessionStorage.getItem('refund-chat-conversation');", vec![])
            .await
            .unwrap();
        let kept: Value = serde_json::from_str(kept.as_str().unwrap()).unwrap();
        kept["id"].as_str().unwrap().to_owned()
    }
}

/// The staff function behind an HTTP port, as `cargo lambda watch` serves
/// it: each request becomes an event of the real handler, the person in
/// the headers the page server's door set.
async fn serve_desk(desk: StaffDesk) -> SocketAddr {
    let app = Arc::clone(&desk.app);
    let handler = move |request: axum::extract::Request| {
        let app = Arc::clone(&app);
        async move {
            let (parts, body, headers) = taken_apart(request).await;
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let body = serde_json::from_slice::<Value>(&body).ok();
            let mut event = staff_event(parts.method.as_str(), parts.uri.path(), body, &headers, None);
            // The query, as API Gateway passes it (the desk's search).
            let decoded = |part: &str| {
                percent_encoding::percent_decode_str(&part.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            let query: Vec<(String, String)> = parts
                .uri
                .query()
                .unwrap_or("")
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (decoded(k), decoded(v)))
                .collect();
            if !query.is_empty() {
                event["queryStringParameters"] = Value::Object(
                    query
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect(),
                );
                event["multiValueQueryStringParameters"] =
                    Value::Object(query.iter().map(|(k, v)| (k.clone(), serde_json::json!([v]))).collect());
            }
            let answer = send_staff(&app, event).await;
            let mut response = axum::response::Response::builder().status(answer.status);
            for (name, value) in &answer.headers {
                response = response.header(name, value);
            }
            response.body(axum::body::Body::from(answer.raw)).unwrap_or_default()
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/support/staff/", axum::routing::any(handler.clone()))
        .route("/support/staff/{*rest}", axum::routing::any(handler));
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// A person of the support team at the desk, in a browser of their own.
struct AtTheDesk {
    _chromedriver: tokio::process::Child,
    browser: Client,
    profile: PathBuf,
}

impl Drop for AtTheDesk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .arg("-f")
            .arg(self.profile.as_os_str())
            .status();
    }
}

impl AtTheDesk {
    /// Signed in as `username` (ann: an approver; sam: the staff group alone).
    async fn sign_in(stack: &Stack, username: &str) -> AtTheDesk {
        let desk = AtTheDesk::at_the_door(stack).await;
        desk.type_in(&[("username", username), ("password", &stack.password_of(username))])
            .await;
        desk.wait_text("#whoami", "Signed in as").await;
        desk
    }

    /// A browser of its own on the desk's sign-in form.
    async fn at_the_door(stack: &Stack) -> AtTheDesk {
        let (chromedriver, browser, profile) = browser().await;
        let desk = AtTheDesk {
            _chromedriver: chromedriver,
            browser,
            profile,
        };
        desk.browser.goto(&format!("{}staff/", stack.page)).await.unwrap();
        desk
    }

    /// Types each value into its field, anew, and presses Enter in the last.
    async fn type_in(&self, fields: &[(&str, &str)]) {
        for (id, value) in fields {
            let field = self.browser.find(Locator::Id(id)).await.unwrap();
            field.clear().await.unwrap();
            field.send_keys(value).await.unwrap();
        }
        if let Some((id, _)) = fields.last() {
            self.browser
                .find(Locator::Id(id))
                .await
                .unwrap()
                .send_keys(ENTER)
                .await
                .unwrap();
        }
    }

    async fn element(&self, css: &str) -> fantoccini::elements::Element {
        self.browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
    }

    /// The text of `css` once it contains `part`.
    async fn wait_text(&self, css: &str, part: &str) -> String {
        let started = std::time::Instant::now();
        loop {
            if let Ok(element) = self.browser.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
                && text.contains(part)
            {
                return text;
            }
            if started.elapsed() >= WAIT {
                let page = page_text(&self.browser).await;
                panic!("{css} never said {part:?}; the page said:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens the first item of the queue's list `list` (approvals, handoffs);
    /// the queue may be drawn anew under the click (a live poke reads it
    /// again), so a button gone stale is found again.
    async fn open_first(&self, list: &str) {
        let css = format!("#{list} li button");
        let started = std::time::Instant::now();
        while let Err(error) = self.element(&css).await.click().await {
            assert!(started.elapsed() < WAIT, "{css} could not be clicked: {error}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.wait_text("#item-body", "").await;
    }

    /// Sends `text` as a reply from the open conversation, as a person
    /// types and clicks; an item drawn anew meanwhile (a live poke) is
    /// found again before anything is sent.
    async fn reply(&self, text: &str) {
        let started = std::time::Instant::now();
        loop {
            let field = self.element("#reply-text").await;
            let typed = match field.clear().await {
                Ok(()) => field.send_keys(text).await,
                Err(error) => Err(error),
            };
            if typed.is_ok()
                && let Some(button) = self.button("Send reply").await
                && button.click().await.is_ok()
            {
                return;
            }
            assert!(started.elapsed() < WAIT, "the reply {text:?} could not be sent");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `value` into the field `id`, anew, pressing nothing.
    async fn type_in_field(&self, id: &str, value: &str) {
        let field = self.browser.find(Locator::Id(id)).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(value).await.unwrap();
    }

    async fn click(&self, id: &str) {
        self.browser.find(Locator::Id(id)).await.unwrap().click().await.unwrap();
    }

    /// **Find by id** with `id` (contract 30).
    async fn find_by_id(&self, id: &str) {
        self.type_in_field("search-q", id).await;
        self.browser
            .find(Locator::Css("#search button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// The queue's timer, fired now: the page reads the queue (and the
    /// open conversation) as it does every 10 s and when the tab is shown.
    async fn timer_fires(&self) {
        self.browser
            .execute("document.dispatchEvent(new Event('visibilitychange'));", vec![])
            .await
            .unwrap();
    }

    async fn button(&self, label: &str) -> Option<fantoccini::elements::Element> {
        let xpath = format!("//div[@id='actions']//button[normalize-space(.)='{label}']");
        self.browser.find(Locator::XPath(&xpath)).await.ok()
    }

    async fn close(&self) {
        self.browser.clone().close().await.unwrap();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// What a person sees on the page, for a failure's message.
async fn page_text(browser: &Client) -> String {
    match browser.find(Locator::Css("body")).await {
        Ok(body) => body.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

fn css_class_xpath(class: &str) -> String {
    format!("contains(concat(' ', normalize-space(@class), ' '), ' {class} ')")
}

/// chromedriver on a free port, a headless Chromium session on it, and its profile folder.
async fn browser() -> (tokio::process::Child, Client, PathBuf) {
    let port = free_port();
    let chromedriver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver (make test installs chromium-driver)");
    let profile = std::env::temp_dir().join(format!("refund-chat-chromium-{}-{port}", std::process::id()));
    let capabilities: serde_json::Map<String, Value> = serde_json::from_value(serde_json::json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=390,844",
                format!("--user-data-dir={}", profile.display()),
            ]
        }
    }))
    .unwrap();
    // chromedriver listens within a moment; until then connections are refused.
    let mut tries = 0;
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        tries += 1;
        assert!(tries < 200, "chromedriver did not start on port {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut builder = ClientBuilder::rustls().expect("rustls");
    builder.capabilities(capabilities);
    let client = builder
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap_or_else(|error| panic!("no browser session: {error}"));
    (chromedriver, client, profile)
}

/// The labels of the page's controls (buttons, summaries and the labels of
/// fields; not the desk's queue entries, which are lines of text) that are
/// cut, or broken across lines inside a word (contract 36), as the page
/// draws them now.
const BROKEN_LABELS: &str = "
    const broken = [];
    for (const control of document.querySelectorAll('button, summary, label')) {
      if (!control.offsetParent || control.closest('.items')) continue;
      if (control.scrollWidth > control.clientWidth + 1) { broken.push(control.textContent.trim()); continue; }
      const walker = document.createTreeWalker(control, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const word of node.textContent.matchAll(/\\S+/g)) {
          const range = document.createRange();
          range.setStart(node, word.index);
          range.setEnd(node, word.index + word[0].length);
          const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
          if (lines.size > 1) broken.push(word[0]);
        }
      }
    }
    return broken;";

/// The serious and critical violations axe-core (the npm package, pinned in
/// `tools/axe`, which make test installs) finds on the page as it is drawn
/// now: each rule's id, impact and the elements it names (contract 36).
async fn axe_violations(browser: &Client) -> Value {
    let axe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/axe/node_modules/axe-core/axe.min.js");
    let source = std::fs::read_to_string(&axe)
        .unwrap_or_else(|e| panic!("{}: {e} (make test installs axe-core with npm)", axe.display()));
    browser.execute(&source, vec![]).await.unwrap();
    browser
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] }).then((results) => done(
               results.violations
                 .filter((v) => v.impact === 'serious' || v.impact === 'critical')
                 .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) }))
             ));",
            vec![],
        )
        .await
        .unwrap()
}

fn artifact(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_gets_refunds_through_the_page_and_a_dropped_answer_never_pays_twice() {
    let stack = Stack::on_the_page().await;
    let browser = &stack.browser;
    assert_eq!(browser.title().await.unwrap(), "Refund assistant");

    // Typed and sent with Enter: the keyboard alone.
    stack
        .type_message("My mug from order A-1001 arrived broken, please refund 12.50")
        .await;
    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("I refunded 12.50"), "{reply}");
    assert_eq!(stack.refunds().await, 1);

    // The network drops the answer: the function refunded, the page saw nothing.
    stack.widget.drop_next_answer();
    stack
        .type_message("Order A-1003: the lamp shade is cracked, please refund 5.00")
        .await;
    let problem = stack.problem().await;
    assert!(problem.contains("connection dropped"), "{problem}");
    let retry = browser.find(Locator::Id("retry")).await.unwrap();
    assert_eq!(stack.widget.answers_dropped(), 1);
    assert_eq!(stack.refunds().await, 2, "the function made the refund");
    retry.click().await.unwrap();
    let reply = stack.nth("assistant", 2).await;
    assert!(reply.contains("I refunded 5.00"), "{reply}");
    let recovered = stack.nth("status", 1).await;
    assert!(recovered.contains("nothing was done twice"), "{recovered}");
    assert_eq!(
        stack.refunds().await,
        2,
        "the retry reused the key: replayed, not refunded again"
    );

    // Above the automatic limit: the page shows it waits for a person.
    stack
        .type_message("The sofa from order D-4001 arrived torn. Please refund 120.00.")
        .await;
    let pending = stack.nth("pending-approval", 1).await;
    assert!(
        pending.contains("Waiting for our team") && pending.contains("review"),
        "{pending}"
    );
    assert_eq!(stack.refunds().await, 2);

    let png = browser.screenshot().await.unwrap();
    std::fs::write(artifact("widget-conversation.png"), &png).unwrap();

    // Too long: the field error, in words, and the text kept for editing.
    browser
        .execute(
            "document.getElementById('message').value = 'x'.repeat(4001); \
             document.getElementById('composer').requestSubmit();",
            vec![],
        )
        .await
        .unwrap();
    let problem = stack.problem().await;
    assert!(problem.contains("at most 4000 characters"), "{problem}");
    let retry_shown = browser
        .find(Locator::Id("retry"))
        .await
        .unwrap()
        .is_displayed()
        .await
        .unwrap();
    assert!(!retry_shown, "a 422 is not retried");

    stack.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_takes_two_messages_and_an_ended_conversation_keeps_the_message() {
    let stack = Stack::on_the_page().await;
    let browser = &stack.browser;

    // The agent asks for the order; the customer answers in a second message.
    stack.type_message("My vase arrived broken, please refund 12.50").await;
    let question = stack.nth("assistant", 1).await;
    assert!(question.contains("which order"), "{question}");
    assert_eq!(stack.refunds().await, 0);
    stack.type_message("It is order A-1002.").await;
    let reply = stack.nth("assistant", 2).await;
    assert!(reply.contains("I refunded 12.50"), "{reply}");
    let made = stack.sandbox.refunds_made();
    assert_eq!((made.len(), made[0].order_id.as_str()), (1, "A-1002"));

    // The conversation expired (here: an id the function never issued).
    browser
        .execute(
            "sessionStorage.setItem('refund-chat-conversation', \
             JSON.stringify({customer: 'u-1001', id: 'c_ffffffffffffffffffffffffffffffff'}));",
            vec![],
        )
        .await
        .unwrap();
    stack.type_message("Also order A-1003, refund 5.00").await;
    let ended = stack.nth("status", 1).await;
    assert!(ended.contains("conversation has ended"), "{ended}");
    let kept = browser
        .find(Locator::Id("message"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(kept.as_deref(), Some("Also order A-1003, refund 5.00"));
    assert_eq!(stack.refunds().await, 1, "nothing ran for the ended conversation");
    // Sent again, it starts a new conversation.
    stack.type_message("").await;
    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("I refunded 5.00"), "{reply}");

    // "New conversation" forgets the id: the next message starts afresh.
    let before: Option<String> = browser
        .execute("return sessionStorage.getItem('refund-chat-conversation');", vec![])
        .await
        .unwrap()
        .as_str()
        .map(str::to_owned);
    assert!(before.is_some());
    stack.click("new-conversation").await;
    let after = browser
        .execute("return sessionStorage.getItem('refund-chat-conversation');", vec![])
        .await
        .unwrap();
    assert!(after.is_null(), "{after}");

    stack.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_for_a_person_shows_that_a_person_has_the_conversation_and_keeps_the_input_open() {
    let stack = Stack::on_the_page().await;

    stack.type_message("I want to talk to a person").await;

    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("person from our support team"), "{reply}");
    let banner = stack.element("#with-a-person:not([hidden])").await;
    assert!(banner.text().await.unwrap().contains("Keep writing here"));
    // When a person will answer, in the function's words (always open here).
    let expected = stack.element("#person-expected:not([hidden])").await;
    assert_eq!(
        expected.text().await.unwrap(),
        "A person usually answers within 30 minutes."
    );
    // Later messages still go out, to the person: the sentence once, then
    // no words, the message marked sent (contract 12).
    stack.type_message("My order is A-1001").await;
    let later = stack.nth("assistant", 2).await;
    assert!(later.contains("will read your message"), "{later}");
    stack.type_message("Are you there?").await;
    let sent = stack.nth("sent", 1).await;
    assert_eq!(sent, "sent to our team");
    assert!(stack.nth("customer", 3).await.starts_with("Are you there?"));
    assert_eq!(
        stack
            .browser
            .find_all(Locator::Css("#log li.assistant"))
            .await
            .unwrap()
            .len(),
        2,
        "no third answer"
    );
    assert_eq!(stack.refunds().await, 0);
    // A new conversation is the agent's again.
    stack.click("new-conversation").await;
    assert!(!banner.is_displayed().await.unwrap());

    stack.close().await;
}

/// Contract 36: at 1280x800, 1024x768 and 360x640 a long chat scrolls
/// inside the page, the message box and its button stay in view, and no
/// button's label is cut or broken inside a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chat_scrolls_inside_the_page_and_the_message_box_stays_in_view() {
    let stack = Stack::on_the_page().await;
    stack.type_message("I want to talk to a person").await;
    stack.element("#person-expected:not([hidden])").await;
    // Forty more messages, as the page shows them.
    stack
        .browser
        .execute(
            "const log = document.getElementById('log');
             for (let i = 0; i < 40; i++) {
               const item = document.createElement('li');
               item.className = i % 2 ? 'assistant' : 'customer';
               item.textContent = 'A message of a long conversation, number ' + i + '.';
               log.append(item);
             }",
            vec![],
        )
        .await
        .unwrap();
    // No serious or critical accessibility violation on the page (axe-core).
    assert_eq!(axe_violations(&stack.browser).await, serde_json::json!([]));
    for (width, height) in [(1280, 800), (1024, 768), (360, 640)] {
        stack.browser.set_window_size(width, height).await.unwrap();
        let seen = stack
            .browser
            .execute(
                &format!(
                    "const inView = (id) => {{
                       const r = document.getElementById(id).getBoundingClientRect();
                       return r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= window.innerWidth;
                     }};
                     const log = document.getElementById('log');
                     const cut = (() => {{ {BROKEN_LABELS} }})();
                     return {{
                       message_box: inView('message'), send: inView('send'),
                       banner: inView('with-a-person'),
                       page_scrolls: document.documentElement.scrollHeight > window.innerHeight + 1,
                       page_scrolls_sideways: document.documentElement.scrollWidth > window.innerWidth + 1,
                       chat_scrolls: log.scrollHeight > log.clientHeight,
                       cut,
                     }};"
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            seen,
            serde_json::json!({
                "message_box": true, "send": true, "banner": true,
                "page_scrolls": false, "page_scrolls_sideways": false, "chat_scrolls": true, "cut": []
            }),
            "at {width}x{height}"
        );
        let png = stack.browser.screenshot().await.unwrap();
        std::fs::write(artifact(&format!("widget-long-chat-{width}x{height}.png")), &png).unwrap();
    }

    stack.close().await;
}

/// The README's tours in pictures (contract 36; `make screenshots` copies
/// them into `docs/`): the customer's page at 1280x800 after a refund in
/// two messages, one waiting for a person and a handoff with when a person
/// will answer; and the desk at 1280x800, the conversation open between
/// the queue and the customer. What each shows is checked first: no raw
/// code, id or ISO time in the customer's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tours_in_pictures_show_no_code_no_id_and_no_iso_time_to_the_customer() {
    let stack = Stack::on_the_page().await;
    stack.browser.set_window_size(1280, 800).await.unwrap();
    stack.type_message("my vase arrived broken, please refund 12.50").await;
    stack.nth("assistant", 1).await;
    stack.type_message("it is order A-1002").await;
    assert!(stack.nth("assistant", 2).await.contains("I refunded 12.50"));
    stack
        .type_message("the sofa from order D-4001 arrived torn; according to your policy, please refund 120.00")
        .await;
    stack.nth("pending-approval", 1).await;
    stack.type_message("I want to talk to a person").await;
    stack.element("#person-expected:not([hidden])").await;
    let customer_reads = stack
        .browser
        .execute(
            "return [...document.querySelectorAll('#log li.assistant, #log li.person, #with-a-person')]
               .map((item) => item.textContent).join(' | ');",
            vec![],
        )
        .await
        .unwrap();
    let customer_reads = customer_reads.as_str().unwrap();
    // The refund's own reference (`rf_...`, the payments service's) is the one id a
    // customer may quote; no other.
    for raw in [
        "cents)",
        "ending in",
        "rr-",
        "ret_",
        "c_",
        "h_",
        "T0",
        ":00Z",
        "tell the customer",
        "customer_asked",
        "awaiting_approval",
    ] {
        assert!(
            !customer_reads.contains(raw),
            "{raw:?} in what the customer reads:\n{customer_reads}"
        );
    }
    let png = stack.browser.screenshot().await.unwrap();
    std::fs::write(artifact("tour-chat.png"), &png).unwrap();

    let ann = AtTheDesk::sign_in(&stack, "ann").await;
    ann.browser.set_window_size(1280, 800).await.unwrap();
    ann.open_first("handoffs").await;
    // Who, in words where the order system says: the e-mail the order was placed with.
    ann.wait_text("#context", "ada@shop.example").await;
    // The customer's refunds with amounts and states in words, on the right.
    ann.wait_text("#context", "120.00 EUR on order D-4001: waits for approval")
        .await;
    ann.wait_text("#item-body", "asked for a person").await;
    let desk_reads = page_text(&ann.browser).await;
    for raw in [
        "customer_asked",
        "awaiting_approval",
        "amount_above_limit",
        ";low;",
        ".000Z",
    ] {
        assert!(!desk_reads.contains(raw), "{raw:?} on the desk:\n{desk_reads}");
    }
    let png = ann.browser.screenshot().await.unwrap();
    std::fs::write(artifact("tour-desk.png"), &png).unwrap();

    ann.close().await;
    stack.close().await;
}

/// Outside hours (contract 32): the page says when the team is back; the
/// desk puts what is due first first and marks what is overdue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_hours_the_page_says_when_the_team_is_back_and_the_desk_marks_what_is_overdue() {
    // Open every day from two to three hours from now (UTC): closed now.
    let minute = refund_chat::clock::now_ms() / 60_000;
    let at = |offset: u64| {
        let of_day = (minute + offset) % (24 * 60);
        format!("{:02}:{:02}", of_day / 60, of_day % 60)
    };
    let interval = format!("{}-{}", at(120), at(180));
    let hours = serde_json::json!({"tz": "UTC", "week": {
        "mon": [interval], "tue": [interval], "wed": [interval], "thu": [interval],
        "fri": [interval], "sat": [interval], "sun": [interval]}});
    let schedule = refund_chat::office_hours::Schedule::parse(&hours.to_string()).unwrap();
    let stack = Stack::start_configured(move |config| config.office.schedule = Some(schedule)).await;
    stack.browser.goto(&stack.page).await.unwrap();

    stack.type_message("I want to talk to a person").await;

    let expected = stack.element("#person-expected:not([hidden])").await;
    let said = expected.text().await.unwrap();
    assert!(
        said.starts_with("Our team is back ") && said.contains(" (UTC); you can leave this page"),
        "{said}"
    );
    assert!(stack.nth("assistant", 1).await.ends_with(&said));
    let first = stack.conversation().await;
    // A second conversation, handed off after the first: set overdue (due a
    // minute ago, as a shorter due time would have made it).
    stack.click("new-conversation").await;
    stack.type_message("I want to talk to a person").await;
    stack.element("#person-expected:not([hidden])").await;
    let second = stack.conversation().await;
    assert_ne!(first, second);
    aws_sdk_dynamodb::Client::new(&stack.aws)
        .update_item()
        .table_name(stack.conversations.table())
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(second.clone()))
        .key("sk", aws_sdk_dynamodb::types::AttributeValue::S("head".into()))
        .update_expression("SET handoff_due_at = :due")
        .expression_attribute_values(
            ":due",
            aws_sdk_dynamodb::types::AttributeValue::S(refund_chat::clock::rfc3339(
                refund_chat::clock::now_ms() - 60_000,
            )),
        )
        .send()
        .await
        .unwrap();

    let desk = AtTheDesk::sign_in(&stack, "sam").await;

    let due_first = desk.wait_text("#handoffs li:first-child button", "overdue by").await;
    assert!(due_first.contains("overdue by"), "{due_first}");
    let marked = desk.element("#handoffs li:first-child button.overdue").await;
    assert!(marked.is_displayed().await.unwrap());
    let then = desk.wait_text("#handoffs li:nth-child(2) button", "due in").await;
    assert!(!then.contains("overdue"), "{then}");
    desk.open_first("handoffs").await;
    desk.wait_text("#item-title", &second).await;
    // J moves to the next in the queue, K back (contract 36).
    let body = desk.element("body").await;
    body.send_keys("j").await.unwrap();
    desk.wait_text("#item-title", &first).await;
    body.send_keys("k").await.unwrap();
    desk.wait_text("#item-title", &second).await;

    desk.close().await;
    stack.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_answer_links_the_article_and_the_models_markup_stays_text() {
    let stack = Stack::on_the_page().await;
    let browser = &stack.browser;

    stack.type_message("How long do I have to return a damaged item?").await;

    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("30 days"), "the shipped article's number: {reply}");
    let link = browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("li.assistant a"))
        .await
        .unwrap();
    let href = link.attr("href").await.unwrap().unwrap_or_default();
    assert!(
        [
            "https://shop.example/help/refunds",
            "https://shop.example/help/damaged-items"
        ]
        .contains(&href.as_str()),
        "{href}"
    );
    assert_eq!(link.text().await.unwrap(), href);
    // A reply that carries a URL of another origin (an injection the model
    // repeated): only the help centre's becomes a link, after a reload too.
    let conversation = stack.conversation().await;
    stack
        .agent_says(
            &conversation,
            "where do I log in?",
            "See https://shop.example/help/delivery or log in at https://evil.example/login now.",
        )
        .await;
    browser.refresh().await.unwrap();
    stack.nth("assistant", 2).await;
    let hrefs = async {
        let mut hrefs = Vec::new();
        for link in browser.find_all(Locator::Css("li.assistant a")).await.unwrap() {
            hrefs.push(link.attr("href").await.unwrap().unwrap_or_default());
        }
        hrefs
    };
    let hrefs = hrefs.await;
    assert_eq!(
        hrefs.len(),
        2,
        "the article's link, read back, and the delivery one: {hrefs:?}"
    );
    assert!(
        hrefs.iter().all(|h| h.starts_with("https://shop.example/")),
        "{hrefs:?}"
    );
    let injected = stack.nth("assistant", 2).await;
    assert!(
        injected.contains("https://evil.example/login"),
        "kept as text: {injected}"
    );
    // The customer's own words are never made into links or markup.
    stack.type_message("<b>bold</b> https://evil.example").await;
    stack.nth("assistant", 3).await;
    let customer_links = browser
        .find_all(Locator::Css("li.customer a, li.customer b"))
        .await
        .unwrap();
    assert!(customer_links.is_empty(), "the customer's text stays text");

    stack.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_customer_reads_in_the_page_what_a_person_decided_and_wrote() {
    let stack = Stack::on_the_page().await;
    let browser = &stack.browser;

    // Above the automatic limit: it waits, and the page waits with it.
    stack
        .type_message("The sofa from order D-4001 arrived torn. Please refund 120.00.")
        .await;
    stack.nth("pending-approval", 1).await;
    let waiting = stack.element("#waiting:not([hidden])").await;
    assert!(waiting.text().await.unwrap().contains("Waiting for our team"));
    // A reload reads the conversation back and waits on, from the flag the
    // function keeps (never from the reply's words).
    browser.refresh().await.unwrap();
    let restored = stack.nth("customer", 1).await;
    assert!(restored.contains("sofa from order D-4001"), "{restored}");
    stack.nth("assistant", 1).await;
    stack.element("#waiting:not([hidden])").await;
    let pending = stack.admin(&["pending"]).await;
    let approval = pending
        .lines()
        .find(|line| line.contains("D-4001"))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pending refund in {pending}"))
        .to_owned();
    stack.admin(&["approve", &approval, "--by", "sam"]).await;

    let note = stack.nth("person", 1).await;
    assert!(note.contains("From our support team"), "{note}");
    assert!(
        note.contains("A person approved your refund of 120.00 EUR for order D-4001."),
        "{note}"
    );
    assert!(!note.contains("sam"), "no staff names: {note}");
    assert_eq!(stack.refunds().await, 1, "the approval paid once");
    let live = browser
        .find(Locator::XPath(
            "//li[contains(concat(' ', @class, ' '), ' person ')]/ancestor::*[@aria-live='polite']",
        ))
        .await;
    assert!(live.is_ok(), "a person's message is announced to screen readers");
    stack.element("#waiting[hidden]").await;

    // A person has the conversation: their reply reaches the same chat.
    stack.click("new-conversation").await;
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 1).await;
    let conversation = stack.conversation().await;
    stack
        .admin(&[
            "reply",
            &conversation,
            "--by",
            "sam",
            "--text",
            "Hello, I am Sam. A new sofa ships Monday.",
        ])
        .await;
    let reply = stack.nth("person", 1).await;
    assert!(reply.contains("A new sofa ships Monday."), "{reply}");
    // Nothing new: the wait doubles up to 8 intervals (0.2 s here, 10 s as shipped).
    stack.polling_is("1.6").await;
    // A hidden tab asks nothing; shown again, it polls again (at once, then backing off).
    stack.set_hidden(true).await;
    stack.polling_is("off").await;
    stack.set_hidden(false).await;
    stack.polling_is("1.6").await;
    let png = browser.screenshot().await.unwrap();
    std::fs::write(artifact("widget-a-person-writes.png"), &png).unwrap();
    // Shown once, however often the page asks again.
    stack
        .admin(&["reply", &conversation, "--by", "sam", "--text", "Anything else?"])
        .await;
    stack.nth("person", 2).await;
    let people = browser.find_all(Locator::Css("li.person")).await.unwrap();
    assert_eq!(people.len(), 2);

    stack.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_is_seen_as_it_is_written_with_its_step_and_announced_once() {
    let stack = Stack::on_the_page().await;
    let browser = &stack.browser;
    // What the page showed, in order, as a person would have seen it: the
    // draft's text each time it changed, each step the step line was given,
    // and each message the log (the live region) gained.
    browser
        .execute(
            r#"window.seen = [];
            const note = (what) => window.seen.push(what);
            new MutationObserver(() => { const d = document.getElementById("draft");
                if (!d.hidden && d.textContent) note("draft:" + d.textContent); })
              .observe(document.getElementById("draft"), { childList: true, characterData: true, subtree: true, attributes: true });
            // Every text the step line was given: two steps read in one
            // chunk are set in one task, and only the last is the line's
            // text by the time an observer runs.
            new MutationObserver((changes) => { for (const c of changes) for (const n of c.addedNodes)
                note("step:" + n.textContent); })
              .observe(document.getElementById("step"), { childList: true });
            new MutationObserver((changes) => { for (const c of changes) for (const n of c.addedNodes)
                note("log:" + n.className + ":" + n.textContent); })
              .observe(document.getElementById("log"), { childList: true });"#,
            vec![],
        )
        .await
        .unwrap();

    stack
        .type_message("think aloud: my mug from order A-1001 arrived broken, please refund 12.50")
        .await;
    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("I refunded 12.50"), "{reply}");

    let seen: Vec<String> =
        serde_json::from_value(browser.execute("return window.seen;", vec![]).await.unwrap()).unwrap();
    let at = |what: &dyn Fn(&str) -> bool| seen.iter().position(|s| what(s));
    let thinking = at(&|s| s.starts_with("draft:Let me")).expect("the preface was shown as a draft");
    let checking = at(&|s| s == "step:Checking the refund…").expect("the step line showed");
    let growing = at(&|s| {
        s.strip_prefix("draft:")
            .is_some_and(|part| part.len() < reply.len() && reply.starts_with(part))
    })
    .unwrap_or_else(|| panic!("the reply, part-written, before it was whole: {seen:#?}"));
    let final_message = at(&|s| s.starts_with("log:assistant:")).expect("the final message");
    assert!(
        thinking < checking && checking < growing && growing < final_message,
        "{seen:#?}"
    );
    let announced: Vec<_> = seen.iter().filter(|s| s.starts_with("log:assistant")).collect();
    assert_eq!(announced.len(), 1, "the live region gained the reply once: {seen:#?}");
    assert!(
        !announced[0].contains("Let me"),
        "the discarded draft is not in the log: {seen:#?}"
    );
    let draft_left = browser
        .find(Locator::Id("draft"))
        .await
        .unwrap()
        .is_displayed()
        .await
        .unwrap();
    assert!(!draft_left, "the draft is gone once the message is in the log");
    assert_eq!(stack.refunds().await, 1);

    stack.close().await;
}

/// Contract 24 in a browser: an approver signs in, sees the refund with its
/// order's facts and labels, approves it, and the customer's page shows the
/// note; a member of the staff group alone sees no approve button, and a
/// forged POST from their page is refused; two browsers approving at once
/// make one payment, and the other page says who decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_approves_from_the_desk_and_a_member_of_the_staff_group_cannot() {
    let stack = Stack::on_the_page().await;
    stack
        .type_message("The sofa from order D-4001 arrived torn. According to your policy, please refund 120.00.")
        .await;
    stack.nth("pending-approval", 1).await;

    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    let item = sam.wait_text("#approvals", "120.00").await;
    assert!(
        item.contains("order D-4001") && item.contains("router: refund"),
        "{item}"
    );
    sam.open_first("approvals").await;
    sam.wait_text("#item-body", "the order now").await;
    // The passage the agent looked up before it asked for the refund.
    sam.wait_text(
        "#item-body",
        "Help centre: Refunds: how long you have, and how fast (refunds@1)",
    )
    .await;
    assert!(
        sam.button("Approve").await.is_none(),
        "no approve button for the staff group alone"
    );
    sam.wait_text("#actions", "Only an approver decides refunds").await;
    // A forged POST with Sam's own token: refused, nothing paid.
    let forged = sam
        .browser
        .execute_async(
            "const [done] = [arguments[arguments.length - 1]];
             const id = document.querySelector('#approvals li button').dataset.id;
             fetch('refunds/' + id + '/approve', {method: 'POST', headers: {
                 'Authorization': sessionStorage.getItem('desk-id-token'),
                 'Idempotency-Key': 'forged-1', 'Content-Type': 'application/json'}, body: '{}'})
               .then(r => done(r.status));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(forged, serde_json::json!(403));
    assert_eq!(stack.refunds().await, 0);

    // Two browsers of approvers, approving at once.
    let (ann, ann_again) = tokio::join!(AtTheDesk::sign_in(&stack, "ann"), AtTheDesk::sign_in(&stack, "ann"));
    for desk in [&ann, &ann_again] {
        desk.wait_text("#approvals", "120.00").await;
        desk.open_first("approvals").await;
        let facts = desk.wait_text("#item-body", "paid").await;
        // The state, the reasons and the router's labels in words (contract 36).
        assert!(
            facts.contains("refund, policy question (low risk")
                && facts.contains("waits for approval")
                && facts.contains("above the automatic limit of 50.00 EUR"),
            "in words: {facts}"
        );
    }
    let (one, two) = (
        ann.button("Approve").await.unwrap(),
        ann_again.button("Approve").await.unwrap(),
    );
    let (a, b) = tokio::join!(one.click(), two.click());
    a.unwrap();
    b.unwrap();
    let (first, second) = tokio::join!(ann.wait_text("#outcome", "d "), ann_again.wait_text("#outcome", "d "));
    let outcomes = [first, second];
    assert!(
        outcomes
            .iter()
            .any(|o| o.contains("approved") && o.contains("refunded 120.00")),
        "{outcomes:?}"
    );
    assert!(
        outcomes.iter().any(|o| o.contains("Already decided by Ann Approver")),
        "{outcomes:?}"
    );
    assert_eq!(stack.refunds().await, 1, "one payments call");
    let png = ann.browser.screenshot().await.unwrap();
    std::fs::write(artifact("desk-approved.png"), &png).unwrap();

    let note = stack.nth("person", 1).await;
    assert!(
        note.contains("A person approved your refund of 120.00 EUR for order D-4001."),
        "{note}"
    );
    for desk in [&sam, &ann, &ann_again] {
        desk.close().await;
    }
    stack.close().await;
}

/// Someone an administrator added has a temporary password: at the first
/// sign-in the desk asks them to choose their own (Cognito's
/// NEW_PASSWORD_REQUIRED), so nobody else knows the password a decision is
/// recorded under; the temporary one then no longer works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_person_chooses_their_own_password_at_the_first_sign_in() {
    let stack = Stack::start().await;
    let temporary = stack.password_of("nia");
    let nia = AtTheDesk::at_the_door(&stack).await;
    nia.type_in(&[("username", "nia"), ("password", &temporary)]).await;
    nia.wait_text("#new-password-title", "Choose your own password").await;
    assert!(
        !nia.browser
            .find(Locator::Id("desk"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap(),
        "no desk before the password is chosen"
    );

    nia.type_in(&[
        ("new-password", "Nia-own-Pass-2026"),
        ("new-password-again", "Nia-own-Pass-2027"),
    ])
    .await;
    nia.wait_text("#new-password-error", "The two passwords differ").await;
    // Cognito judges the pool's rules, and the page says it refused.
    nia.type_in(&[("new-password", "short"), ("new-password-again", "short")])
        .await;
    nia.wait_text("#new-password-error", "The password was refused").await;
    nia.type_in(&[
        ("new-password", "Nia-own-Pass-2026"),
        ("new-password-again", "Nia-own-Pass-2026"),
    ])
    .await;
    // Contract 30: the first sign-in sets up a second factor, its key shown
    // as a QR code and as text; no desk before it is confirmed.
    nia.wait_text("#mfa-setup-title", "Set up your second factor").await;
    let key = nia.wait_text("#mfa-secret", "").await;
    assert!(
        !key.trim().is_empty(),
        "the key as text (moto gives every pool the same one)"
    );
    let modules = nia.browser.find_all(Locator::Css("#mfa-qr svg rect")).await.unwrap();
    assert!(modules.len() > 100, "a QR code: {} rects", modules.len());
    assert!(
        !nia.browser
            .find(Locator::Id("desk"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap()
    );
    nia.type_in(&[("mfa-setup-code", "12345")]).await;
    nia.wait_text("#mfa-setup-error", "six digits").await;
    // moto's pool takes any six digits (it checks them only when told to); Cognito checks them.
    nia.type_in(&[("mfa-setup-code", "123456")]).await;
    nia.wait_text("#whoami", "Signed in as Nia Newcomer").await;
    let refresh = nia
        .browser
        .execute("return sessionStorage.getItem('desk-refresh-token');", vec![])
        .await
        .unwrap();
    let refresh = refresh.as_str().expect("the refresh token kept for the tab").to_owned();
    nia.browser
        .find(Locator::Id("sign-out"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    nia.wait_text("#sign-in-title", "Sign in").await;
    // Signed out is revoked: the tab's refresh token renews nothing now.
    let renewed = stack.renew_staff_token(&refresh).await;
    assert_ne!(renewed, 200, "a revoked refresh token");

    nia.type_in(&[("username", "nia"), ("password", &temporary)]).await;
    nia.wait_text("#sign-in-error", "Sign-in refused").await;
    nia.type_in(&[("username", "nia"), ("password", "Nia-own-Pass-2026")])
        .await;
    // The second sign-in asks for the code.
    nia.wait_text("#mfa-title", "Your authenticator code").await;
    nia.type_in(&[("mfa-code", "654321")]).await;
    nia.wait_text("#whoami", "Signed in as Nia Newcomer").await;
    nia.close().await;
    stack.close().await;
}

/// Contract 30: a sign-in outlives its first ID token. The page keeps the
/// refresh token for the tab; an ID token the door refuses (expired) is
/// renewed with it and the request sent again, without a new sign-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_outlives_its_first_id_token() {
    let stack = Stack::on_the_page().await;
    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    let first = sam
        .browser
        .execute("return sessionStorage.getItem('desk-id-token');", vec![])
        .await
        .unwrap();
    // The tab comes back with an ID token that no longer passes the door.
    sam.browser
        .execute("sessionStorage.setItem('desk-id-token', 'e30.e30.expired');", vec![])
        .await
        .unwrap();
    sam.browser.refresh().await.unwrap();
    sam.wait_text("#whoami", "Signed in as Sam Staff").await;
    sam.wait_text("#queue-status", "Updated").await;
    let renewed = sam
        .browser
        .execute("return sessionStorage.getItem('desk-id-token');", vec![])
        .await
        .unwrap();
    assert!(
        renewed
            .as_str()
            .is_some_and(|t| t.len() > 40 && Some(t) != first.as_str()),
        "{renewed}"
    );
    sam.close().await;
    stack.close().await;
}

/// A reply typed at the desk reaches the customer's page once, however
/// often the button is clicked; the page is usable at 360 px with the
/// keyboard, and customers' words stay text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_from_the_desk_reaches_the_customer_once_after_a_double_click() {
    let stack = Stack::on_the_page().await;
    stack
        .type_message("I want to talk to a person <img src=x onerror=alert(1)>")
        .await;
    stack.nth("assistant", 1).await;

    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    sam.browser.set_window_size(360, 740).await.unwrap();
    sam.wait_text("#handoffs", "asked for a person").await;
    sam.open_first("handoffs").await;
    let transcript = sam.wait_text("#item-body", "Customer:").await;
    assert!(
        transcript.contains("<img src=x onerror=alert(1)>"),
        "shown as text: {transcript}"
    );
    let images = sam.browser.find_all(Locator::Css("#item-body img")).await.unwrap();
    assert!(images.is_empty(), "never as markup");
    let reply = sam.browser.find(Locator::Id("reply-text")).await.unwrap();
    reply
        .send_keys("Hello, this is Sam from the support team.")
        .await
        .unwrap();
    // A double click: two clicks before the first answer.
    sam.browser
        .execute(
            "const b = [...document.querySelectorAll('#actions button')].find(b => b.textContent === 'Send reply');
             b.click(); b.click();",
            vec![],
        )
        .await
        .unwrap();
    sam.wait_text("#outcome", "replied in").await;
    let said = stack.nth("person", 1).await;
    assert!(said.contains("Hello, this is Sam"), "{said}");
    // Polled again and again: still one.
    stack.polling_is("1.6").await;
    let people = stack.browser.find_all(Locator::Css("li.person")).await.unwrap();
    assert_eq!(people.len(), 1, "the reply reached the customer once");
    let width: Value = sam
        .browser
        .execute("return document.documentElement.scrollWidth;", vec![])
        .await
        .unwrap();
    assert!(width.as_u64().unwrap() <= 360, "usable at 360 px: {width}");
    let png = sam.browser.screenshot().await.unwrap();
    std::fs::write(artifact("desk-reply-360px.png"), &png).unwrap();
    sam.close().await;
    stack.close().await;
}

/// Contract 30 with two people signed in at once: Ann claims the chat, Sam
/// sees it taken and cannot reply without taking over; Ann's internal note
/// never reaches the customer's page; the customer's new message appears in
/// Ann's open chat when the queue's timer fires, without a click; the
/// title counts what waits unclaimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_work_one_queue_one_claims_and_the_other_sees_it_taken() {
    let stack = Stack::on_the_page().await;
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 1).await;

    let (ann, sam) = tokio::join!(AtTheDesk::sign_in(&stack, "ann"), AtTheDesk::sign_in(&stack, "sam"));
    let entry = ann.wait_text("#handoffs", "nobody has it").await;
    // The start of the customer's last message, and unread (contract 36).
    assert!(
        entry.contains("“I want to talk to a person”") && entry.starts_with("New "),
        "{entry}"
    );
    assert_eq!(ann.browser.title().await.unwrap(), "(1) Support desk");
    ann.open_first("handoffs").await;
    assert!(
        ann.browser.find(Locator::Css("#handoffs .unread-mark")).await.is_err(),
        "read once opened"
    );
    ann.wait_text("#item-body", "Nobody has this conversation").await;
    ann.button("Claim")
        .await
        .expect("a claim button")
        .click()
        .await
        .unwrap();
    ann.wait_text("#outcome", "you have").await;
    ann.wait_text("#item-body", "With Ann Approver since").await;
    assert!(ann.button("Release").await.is_some());
    assert_eq!(
        ann.browser.title().await.unwrap(),
        "Support desk",
        "nothing waits unclaimed"
    );

    // Sam's queue, read when its timer fires: taken, with no way to answer but taking over.
    sam.timer_fires().await;
    sam.wait_text("#handoffs", "with Ann Approver").await;
    sam.open_first("handoffs").await;
    sam.wait_text("#item-body", "With Ann Approver since").await;
    assert!(sam.button("Claim").await.is_none());
    assert!(sam.button("Take over from Ann Approver").await.is_some());
    // Offered only what is allowed (contract 36): no reply, no close.
    sam.wait_text(
        "#actions",
        "Ann Approver has this conversation: take it over to answer.",
    )
    .await;
    assert!(sam.button("Send reply").await.is_none());
    assert!(sam.button("Close handoff").await.is_none());
    // The box takes a note only.
    sam.wait_text("#actions", "A note for the team (never the customer's)")
        .await;

    // Ann's internal note, the box's second mode (Ctrl+Enter): hers and
    // Sam's to read, never the customer's.
    let note = ann.browser.find(Locator::Id("reply-text")).await.unwrap();
    note.send_keys(&format!(
        "Courier says Tuesday; do not promise Monday.{CONTROL}{ENTER}{CONTROL}"
    ))
    .await
    .unwrap();
    ann.wait_text("#item-body", "Internal note (Ann Approver").await;
    assert!(
        !page_text(&stack.browser).await.contains("Courier says"),
        "a note is never sent as a reply"
    );

    // The customer writes again: it shows in Ann's open chat on the queue's timer.
    stack.type_message("Hello? Any news about my sofa?").await;
    stack.nth("assistant", 2).await;
    ann.timer_fires().await;
    ann.wait_text("#item-body", "Any news about my sofa?").await;
    let customer = page_text(&stack.browser).await;
    assert!(!customer.contains("Courier says"), "{customer}");
    assert!(!customer.contains("Sam here too"), "{customer}");
    // No serious or critical accessibility violation on the desk (axe-core),
    // the queue and an open chat drawn.
    assert_eq!(axe_violations(&ann.browser).await, serde_json::json!([]));
    // Contract 36: at the desk's sizes no control's label is cut or broken
    // inside a word, the open chat and its controls drawn.
    for (width, height) in [(1280, 800), (1024, 768)] {
        ann.browser.set_window_size(width, height).await.unwrap();
        let cut = ann.browser.execute(BROKEN_LABELS, vec![]).await.unwrap();
        // An inbox: the queue, the chat with its box in view, the customer on the right.
        let laid_out = ann
            .browser
            .execute(
                "const box = (q) => document.querySelector(q).getBoundingClientRect();
                 const reply = box('#reply-text');
                 return box('.queue').right <= box('#item').left && box('#item').right <= box('#context').left
                   && reply.top >= 0 && reply.bottom <= window.innerHeight;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(laid_out, serde_json::json!(true), "at {width}x{height}");
        assert_eq!(cut, serde_json::json!([]), "at {width}x{height}");
    }
    ann.close().await;
    sam.close().await;
    stack.close().await;
}

/// Contract 30's saved replies as an approver uses them: saved on the desk,
/// put into the reply box, changed there, and sent once; never by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_reply_is_put_in_the_box_edited_and_sent_once() {
    let stack = Stack::on_the_page().await;
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 1).await;

    let ann = AtTheDesk::sign_in(&stack, "ann").await;
    ann.element("#saved-replies-manage summary")
        .await
        .click()
        .await
        .unwrap();
    ann.type_in_field("saved-title-text", "Refund on its way").await;
    ann.type_in_field("saved-text", "Your refund is on its way.").await;
    ann.click("saved-save").await;
    ann.wait_text("#saved-outcome", "is saved").await;

    ann.open_first("handoffs").await;
    ann.wait_text("#actions", "Saved reply").await;
    ann.browser
        .execute(
            "const pick = document.getElementById('saved-insert-pick');
             pick.value = [...pick.options].find(o => o.text === 'Refund on its way').value;",
            vec![],
        )
        .await
        .unwrap();
    ann.button("Insert").await.unwrap().click().await.unwrap();
    let reply = ann.browser.find(Locator::Id("reply-text")).await.unwrap();
    assert_eq!(
        reply.prop("value").await.unwrap().as_deref(),
        Some("Your refund is on its way.")
    );
    assert!(
        stack
            .browser
            .find_all(Locator::Css("li.person"))
            .await
            .unwrap()
            .is_empty(),
        "inserted, not sent"
    );
    reply.send_keys(" Kind regards, Ann").await.unwrap();
    ann.button("Send reply").await.unwrap().click().await.unwrap();
    ann.wait_text("#outcome", "replied in").await;
    let said = stack.nth("person", 1).await;
    assert!(said.contains("Your refund is on its way. Kind regards, Ann"), "{said}");
    stack.polling_is("1.6").await;
    assert_eq!(
        stack.browser.find_all(Locator::Css("li.person")).await.unwrap().len(),
        1
    );
    ann.close().await;
    stack.close().await;
}

/// Contract 30's search: a closed chat found again by the order it was
/// about, opened as from the queue, with the customer panel beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_by_order_id_finds_a_closed_chat() {
    let stack = Stack::on_the_page().await;
    stack.type_message("Where is my order A-1001?").await;
    stack.nth("assistant", 1).await;
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 2).await;

    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    sam.open_first("handoffs").await;
    sam.wait_text("#actions", "Close handoff").await;
    sam.button("Close handoff")
        .await
        .expect("a close button")
        .click()
        .await
        .unwrap();
    sam.wait_text("#outcome", "closed").await;
    sam.timer_fires().await;
    sam.wait_text("#handoffs", "Nothing waits").await;

    sam.find_by_id("A-1001").await;
    sam.wait_text("#search-results", "handoff closed").await;
    sam.element("#search-results li button").await.click().await.unwrap();
    sam.wait_text("#item-body", "Where is my order A-1001?").await;
    // The customer and their other conversations on the right (contract 36).
    sam.wait_text("#context", "customer u-1001").await;
    sam.close().await;
    stack.close().await;
}

/// Contract 30's "Did this solve it?": asked on the customer's page once a
/// person closed the chat, answered once, and read on the desk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_customer_is_asked_once_whether_it_was_solved_and_the_desk_reads_the_answer() {
    let stack = Stack::on_the_page().await;
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 1).await;

    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    sam.open_first("handoffs").await;
    sam.wait_text("#actions", "Close handoff").await;
    sam.button("Close handoff").await.unwrap().click().await.unwrap();
    sam.wait_text("#outcome", "closed").await;

    // The customer's page polls while a person has the chat: it asks.
    stack.element("#rating:not([hidden])").await;
    let comment = stack.browser.find(Locator::Id("rating-comment")).await.unwrap();
    comment.send_keys("Still waiting for the courier.").await.unwrap();
    stack.click("rating-no").await;
    let thanked = stack.nth("status", 1).await;
    assert!(thanked.contains("Thank you for telling us."), "{thanked}");
    assert!(
        stack.browser.find(Locator::Css("#rating[hidden]")).await.is_ok(),
        "asked once"
    );

    sam.browser.refresh().await.unwrap();
    sam.wait_text("#whoami", "Signed in as").await;
    sam.find_by_id("u-1001").await;
    sam.wait_text("#search-results", "handoff closed").await;
    sam.element("#search-results li button").await.click().await.unwrap();
    sam.wait_text("#item-body", "Did this solve it? No").await;
    sam.wait_text("#item-body", "Still waiting for the courier.").await;
    sam.close().await;
    stack.close().await;
}

/// Contract 26 in the chat page, as the README's tour has it: the agent
/// proposes, the customer says yes in the next message, and the order
/// system's order now has the new address (and nothing was written before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_address_is_made_after_the_customers_yes_in_the_next_message() {
    let stack = Stack::on_the_page().await;
    stack
        .type_message("Please change the delivery address of A-1004 to Ada Lovelace, 12 Rue Byron, 75002 Paris, FR")
        .await;
    let asked = stack.nth("assistant", 1).await;
    // The model alone gets "ending in" (contract 36): the customer reads
    // the address as they wrote it, in code's own line.
    assert!(!asked.contains("ending in") && asked.contains("yes"), "{asked}");
    assert!(
        asked.contains("becomes Ada Lovelace, 12 Rue Byron, 75002 Paris, FR"),
        "code's own line: {asked}"
    );
    assert!(
        stack.sandbox.addresses_written().is_empty(),
        "nothing written before the yes"
    );
    stack.type_message("yes").await;
    let done = stack.nth("assistant", 2).await;
    assert!(done.contains("Done: the delivery address is changed"), "{done}");
    let written = stack.sandbox.addresses_written();
    assert_eq!(written.len(), 1);
    assert_eq!(
        (written[0].0.as_str(), written[0].1["line1"].as_str()),
        ("A-1004", Some("12 Rue Byron"))
    );
    stack.close().await;
}

/// Contract 28, as the tour shows it: a return of the Blue mug proposed in
/// code's words, nothing started before the next message's yes, then
/// started once, the reply linking the sandbox's label on its own origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_starts_after_the_customers_yes_and_the_page_links_its_label() {
    let stack = Stack::on_the_page().await;
    stack
        .type_message("I'd like to return the Blue mug from A-1002, I changed my mind")
        .await;
    let asked = stack.nth("assistant", 1).await;
    assert!(
        asked.contains("To confirm: return from order A-1002: 1 × Blue mug, reason: changed my mind"),
        "code's own line: {asked}"
    );
    assert!(
        stack.sandbox.returns_started().is_empty(),
        "nothing started before the yes"
    );
    stack.type_message("yes").await;
    let done = stack.nth("assistant", 2).await;
    assert!(done.contains("Your return label is below"), "{done}");
    assert!(!done.contains("/labels/"), "the label is apart from the text: {done}");
    // When to use it by, in code's words: to the minute, the zone named, no ISO time (contract 36).
    let line = stack.nth("return-label", 1).await;
    assert!(line.contains("(use it by ") && line.contains("(UTC))"), "{line}");
    assert!(!line.contains(":00Z"), "{line}");
    assert_eq!(stack.sandbox.returns_started().len(), 1);
    let label_links = || async {
        let mut hrefs = Vec::new();
        let found = stack
            .browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("li.return-label a[href*='/labels/ret_']"))
            .await;
        assert!(found.is_ok(), "the label is a link");
        for link in stack
            .browser
            .find_all(Locator::Css("li a[href*='/labels/']"))
            .await
            .unwrap()
        {
            hrefs.push(link.attr("href").await.unwrap().unwrap_or_default());
        }
        hrefs
    };
    let hrefs = label_links().await;
    let orders = stack
        .admin_env
        .iter()
        .find(|(name, _)| *name == "ORDERS_BASE_URL")
        .map(|(_, url)| url.trim_end_matches('/').to_owned())
        .unwrap_or_default();
    assert_eq!(hrefs.len(), 1, "{hrefs:?}");
    assert!(
        hrefs[0].starts_with(&format!("{orders}/labels/ret_")),
        "the sandbox's own origin: {hrefs:?}"
    );
    // A URL of the label origin in a reply's text (the model's, or an
    // injection it repeated) stays text; the label, read back, is a link.
    let conversation = stack.conversation().await;
    stack
        .agent_says(
            &conversation,
            "and the other label?",
            &format!("Print this one too: {orders}/labels/ret_999999"),
        )
        .await;
    stack.browser.refresh().await.unwrap();
    stack.nth("assistant", 3).await;
    let hrefs = label_links().await;
    assert_eq!(hrefs.len(), 1, "only code's label, read back: {hrefs:?}");
    assert!(!hrefs[0].ends_with("ret_999999"), "{hrefs:?}");
    stack.close().await;
}

/// Contract 27, as a new user meets it: a visitor asks and is answered from
/// the help centre; asks about an order and is asked to verify, by code;
/// and a second browser, another visitor, reads nothing of the first's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_is_answered_from_the_help_centre_asked_to_verify_for_an_order_and_kept_apart() {
    let stack = Stack::on_the_page().await;
    stack.visitor_asks_about_an_order().await;
    let said = page_text(&stack.browser).await;
    assert!(said.contains("confirm your e-mail below"), "{said}");
    assert!(!said.contains("A-1001 was"), "no order was read: {said}");
    let conversation = stack.conversation().await;
    let token = stack
        .browser
        .execute("return sessionStorage.getItem('refund-chat-visitor-token');", vec![])
        .await
        .unwrap();
    let token = token.as_str().expect("the page keeps the visitor's token").to_owned();
    assert_eq!(token.len(), 64);
    // The same tab reloaded reads its conversation back with its token.
    stack.browser.refresh().await.unwrap();
    let again = stack.nth("assistant", 2).await;
    assert!(again.contains("confirm your e-mail"), "{again}");

    // Another browser: another visitor, another token.
    let (_chromedriver, other, profile) = browser().await;
    other.goto(&stack.page).await.unwrap();
    let read = |token: Option<String>| {
        let headers = token
            .map(|t| format!("{{'x-visitor-token': '{t}'}}"))
            .unwrap_or("{}".into());
        format!(
            "return fetch('/support/refund-chat/visitor/conversations/{conversation}', {{headers: {headers}}}).then(r => r.status);"
        )
    };
    let theirs = other
        .execute(
            "return fetch('/support/refund-chat/visitor', {method: 'POST', headers: {'content-type': 'application/json'}, \
             body: JSON.stringify({message: 'hello'})}).then(r => r.json()).then(b => b.visitor);",
            vec![],
        )
        .await
        .unwrap();
    let theirs = theirs.as_str().expect("a token of their own").to_owned();
    assert_ne!(theirs, token);
    for (who, status) in [(Some(theirs), 404), (None, 404), (Some(token.clone()), 200)] {
        let got = other.execute(&read(who.clone()), vec![]).await.unwrap();
        assert_eq!(got.as_u64(), Some(status), "{who:?}");
    }
    other.close().await.unwrap();
    let _ = std::process::Command::new("pkill")
        .arg("-f")
        .arg(profile.as_os_str())
        .status();
    let _ = std::fs::remove_dir_all(&profile);
    assert_eq!(stack.refunds().await, 0);

    stack.close().await;
}

/// The page as deployed (contract 27), embedded by the shop's page on
/// another origin: a visitor talks at once; a token posted by the page's own
/// window is ignored; the shop's page hands over a signed-in customer's ID
/// token by postMessage, and the page sends it as `Authorization`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_page_talks_as_a_visitor_until_the_shops_page_hands_over_a_token() {
    let shop_port = free_port();
    let shop = format!("http://127.0.0.1:{shop_port}");
    let origin = shop.clone();
    let stack = Stack::start_configured(move |config| config.cors_allow_origin = Some(origin)).await;
    // The shop's page: the chat in a frame, and a token for it.
    let frame = format!("{}/support/", stack.function);
    let html = format!(
        "<!doctype html><meta charset=utf-8><title>shop</title>\
         <iframe id=chat src='{frame}' width=390 height=700></iframe>"
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", shop_port)).await.unwrap();
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(move || async move { axum::response::Html(html) }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    let browser = &stack.browser;
    browser.goto(&format!("{shop}/")).await.unwrap();
    let chat = browser.find(Locator::Id("chat")).await.unwrap();
    chat.enter_frame().await.unwrap();

    let signed_in = stack.element("#signed-in").await;
    assert!(signed_in.text().await.unwrap().contains("Not signed in"));
    assert!(
        !stack.element("#picker").await.is_displayed().await.unwrap(),
        "no picker deployed"
    );
    stack.type_message("How long does delivery take?").await;
    let reply = stack.nth("assistant", 1).await;
    assert!(reply.contains("working days"), "{reply}");
    stack.type_message("where is my order A-1001?").await;
    let verify = stack.nth("assistant", 2).await;
    assert!(verify.contains("confirm your e-mail"), "{verify}");
    let begun = stack.conversation().await;

    // A token as a JWT carries it (the authorizer verifies it; the page only reads `sub`).
    let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1LTEwMDEifQ.c2lnbmF0dXJl";
    let post = format!("window.postMessage({{type: 'refund-chat-id-token', token: '{token}'}}, '*');");
    browser.execute(&post, vec![]).await.unwrap();
    stack.type_message("hello again").await;
    stack.nth("assistant", 3).await;
    assert!(
        signed_in.text().await.unwrap().contains("Not signed in"),
        "its own window is not the shop"
    );
    assert!(!AUTHORIZATIONS.lock().unwrap().iter().any(|t| t == token));

    browser.enter_parent_frame().await.unwrap();
    let handed = format!(
        "document.getElementById('chat').contentWindow.postMessage({{type: 'refund-chat-id-token', token: '{token}'}}, '*');"
    );
    browser.execute(&handed, vec![]).await.unwrap();
    browser
        .find(Locator::Id("chat"))
        .await
        .unwrap()
        .enter_frame()
        .await
        .unwrap();
    stack
        .browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(
            "//p[@id='signed-in' and contains(., 'Signed in at the shop')]",
        ))
        .await
        .unwrap();
    // The page claims the conversation and sends the question again itself.
    let reply = stack.nth("assistant", 4).await;
    assert!(reply.contains("A-1001"), "the order, read as the customer: {reply}");
    assert!(!reply.contains("confirm your e-mail"), "{reply}");
    assert_eq!(stack.conversation().await, begun, "one conversation throughout");
    assert!(
        AUTHORIZATIONS.lock().unwrap().iter().any(|t| t == token),
        "the token went as Authorization"
    );

    stack.close().await;
}

impl Stack {
    /// On `make run`'s page, "a visitor" picked: a question the help centre
    /// answers, then "where is my order A-1001?", which code answers by
    /// asking to confirm the e-mail (contract 27).
    async fn visitor_asks_about_an_order(&self) {
        self.element("#customer option[value='visitor']")
            .await
            .click()
            .await
            .unwrap();
        self.type_message("How long does delivery take?").await;
        let reply = self.nth("assistant", 1).await;
        assert!(reply.contains("working days"), "the delivery article's words: {reply}");
        self.type_message("where is my order A-1001?").await;
        let verify = self.nth("assistant", 2).await;
        assert!(verify.contains("confirm your e-mail"), "{verify}");
    }

    /// The code the guest pool "sent" to `email`, last: waits for it only
    /// as long as the page takes to show the code's field, which comes
    /// after Cognito (here the stand-in) answered.
    async fn code_sent_to(&self, email: &str) -> String {
        self.element("#verify-code-step:not([hidden])").await;
        self.guest_pool
            .outbox()
            .into_iter()
            .rev()
            .find(|(to, _)| to.eq_ignore_ascii_case(email))
            .map(|(_, code)| code)
            .unwrap_or_else(|| panic!("no code was sent to {email}"))
    }

    /// Types `email` into "confirm my e-mail" and asks for a code.
    async fn ask_for_a_code(&self, email: &str) {
        let field = self.element("#verify:not([hidden]) #verify-email").await;
        field.send_keys(email).await.unwrap();
        self.click("verify-send").await;
    }

    async fn type_code(&self, code: &str) {
        let field = self.browser.find(Locator::Id("verify-code")).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(code).await.unwrap();
        self.click("verify-confirm").await;
    }

    async fn verify_status(&self, words: &str) -> String {
        let xpath = format!("//p[@id='verify-status' and contains(., \"{words}\")]");
        self.text_at(&xpath, &format!("status {words:?}")).await
    }
}

/// Contract 27, the README's tour under `make run`: a visitor asks the
/// rules and is answered from the help centre; asks about an order and is
/// asked to confirm their e-mail; the code comes from the guest pool's
/// outbox; and the same conversation goes on, the question sent again by
/// the page, the order read as the guest. The code reaches no chat message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_confirms_their_email_and_the_same_conversation_reads_the_order() {
    let stack = Stack::on_the_page().await;
    stack.visitor_asks_about_an_order().await;
    let begun = stack.conversation().await;
    assert!(stack.sandbox.order_reads().is_empty(), "a visitor reads no order");

    stack.ask_for_a_code("Ada@Shop.example").await;
    let code = stack.code_sent_to("ada@shop.example").await;
    assert_eq!(code.len(), 6);
    stack.type_code(&code).await;

    // The page claims the conversation and sends the question again itself.
    let answer = stack.nth("assistant", 3).await;
    assert!(answer.contains("A-1001"), "the order, read as the guest: {answer}");
    assert!(!answer.contains("confirm your e-mail"), "{answer}");
    assert_eq!(stack.conversation().await, begun, "one conversation throughout");
    assert_eq!(stack.sandbox.order_reads(), vec!["A-1001".to_owned()]);
    let signed_in = stack.element("#signed-in").await.text().await.unwrap();
    assert!(signed_in.contains("e-mail"), "{signed_in}");
    let shown = page_text(&stack.browser).await;
    assert!(!shown.contains(&code), "the code is no chat message: {shown}");
    stack.close().await;
}

/// A guest's ID token lasts an hour: once it is refused, the page renews it
/// with the refresh token (Cognito's REFRESH_TOKEN_AUTH) and sends the
/// message again, once; the guest signs in to nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guests_expired_token_is_renewed_and_the_message_goes_through() {
    let stack = Stack::on_the_page().await;
    stack.visitor_asks_about_an_order().await;
    stack.ask_for_a_code("ada@shop.example").await;
    let code = stack.code_sent_to("ada@shop.example").await;
    stack.type_code(&code).await;
    let answer = stack.nth("assistant", 3).await;
    assert!(answer.contains("A-1001"), "{answer}");

    // Every token of this stack's guest pool used so far is now past its
    // hour (the tests share the door's lists, not their pools).
    let issuer = stack.guest_pool.ids().issuer.clone();
    let of_this_pool = |token: &String| {
        use base64::Engine;
        token
            .split('.')
            .nth(1)
            .and_then(|claims| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).ok())
            .and_then(|claims| serde_json::from_slice::<Value>(&claims).ok())
            .is_some_and(|claims| claims["iss"] == issuer.as_str())
    };
    let used: Vec<String> = GUEST_TOKENS_SEEN
        .lock()
        .unwrap()
        .iter()
        .filter(|t| of_this_pool(t))
        .cloned()
        .collect();
    assert!(!used.is_empty(), "the page used a token of the pool");
    EXPIRED.lock().unwrap().extend(used);
    stack.type_message("and where is my order A-1002?").await;
    let again = stack.nth("assistant", 4).await;
    assert!(again.contains("A-1002"), "answered with a renewed token: {again}");
    assert_eq!(stack.guest_pool.refreshes(), 1, "renewed once");
    let problem = stack.browser.find(Locator::Css("#problem:not([hidden])")).await;
    assert!(problem.is_err(), "no 'sign in again'");
    stack.close().await;
}

/// Contract 27: three wrong codes and the code is dead, the right one too;
/// nobody is signed in and no order is read. On the deployed page, whose
/// policy lets it reach the guest pool's sign-in and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_wrong_codes_are_refused_and_then_the_right_one_too() {
    let stack = Stack::start().await;
    stack
        .browser
        .goto(&format!("{}/support/", stack.function))
        .await
        .unwrap();
    stack.type_message("where is my order A-1001?").await;
    let verify = stack.nth("assistant", 1).await;
    assert!(verify.contains("confirm your e-mail"), "{verify}");

    stack.ask_for_a_code("ada@shop.example").await;
    let code = stack.code_sent_to("ada@shop.example").await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..3 {
        stack.type_code(wrong).await;
        stack.verify_status("not right").await;
        // The next try starts from a fresh status.
        stack
            .browser
            .execute("document.getElementById('verify-status').textContent = '';", vec![])
            .await
            .unwrap();
    }
    stack.type_code(&code).await;
    stack.verify_status("can no longer be used").await;

    let signed_in = stack.element("#signed-in").await.text().await.unwrap();
    assert!(signed_in.contains("Not signed in"), "{signed_in}");
    assert!(stack.sandbox.order_reads().is_empty(), "no order read");
    stack.close().await;
}

/// Contract 31 in three browsers with every fallback poll an hour apart, so
/// that only a poke can bring anything: Ann's reply reaches the customer's
/// page; the customer's message reaches Ann's open chat; Sam's desk shows
/// that Ann has the chat; a socket the Event API drops heals by reading
/// again, the reply sent meanwhile shown; and a page can hear no channel
/// but its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_reply_and_the_customers_message_arrive_by_poke_and_a_dropped_socket_heals() {
    let (stack, live) = Stack::start_live(3600).await;
    stack.browser.goto(&stack.page).await.unwrap();
    stack.type_message("I want to talk to a person").await;
    stack.nth("assistant", 1).await;
    stack.element("body[data-live='up']").await;

    let sam = AtTheDesk::sign_in(&stack, "sam").await;
    sam.element("body[data-live='up']").await;
    sam.wait_text("#handoffs", "nobody has it").await;
    let ann = AtTheDesk::sign_in(&stack, "ann").await;
    ann.element("body[data-live='up']").await;
    ann.open_first("handoffs").await;
    ann.reply("Hello, this is Ann.").await;
    ann.wait_text("#outcome", "replied in").await;
    let said = stack.nth("person", 1).await;
    assert!(said.contains("Hello, this is Ann."), "{said}");
    // Sam's desk hears that Ann has it (her reply claimed it).
    sam.wait_text("#handoffs", "with Ann").await;

    stack.type_message("Thank you, it is order A-1001").await;
    ann.wait_text("#item-body", "Thank you, it is order A-1001").await;

    // Every socket dropped: the pages reconnect and read again, and what
    // was said while they were away is there.
    reqwest::Client::new()
        .post(format!("{live}/_faults"))
        .json(&serde_json::json!({"drop_sockets": true}))
        .send()
        .await
        .unwrap();
    ann.reply("Your refund is on its way.").await;
    let again = stack.nth("person", 2).await;
    assert!(again.contains("Your refund is on its way."), "{again}");
    stack.element("body[data-live='up']").await;

    // A page hears its own channel only: not another conversation's, not the desk's.
    for channel in ["/desk/queue", "/conversations/c-00000000000000000000000000000000"] {
        assert_eq!(stack.hears(channel).await, "refused", "{channel}");
    }
    sam.close().await;
    ann.close().await;
    stack.close().await;
}
