//! The chat page for `make run` and the browser tests: serves `web/` and
//! passes `POST /support/refund-chat` and the conversation reads
//! (`GET /support/refund-chat/conversations/{id}`) on to the function, so the page and
//! the endpoint share one origin (no CORS locally; in production API Gateway
//! answers the preflight).
//!
//! It can also cut the network on purpose: after `POST /__faults/drop-next-answer`,
//! the next chat request is passed on and answered by the function, but the
//! connection to the browser is closed without the answer, the way a mobile
//! network drops one. The passing on and the fault are the project's one
//! proxy ([`crate::proxy`]).
//!
//! With a desk ([`DeskDoor`], contract 24) it also serves the support
//! team's desk at `/staff/`: the page and its files as the staff function
//! serves them, and every other `/staff/...` request passed on to
//! `/support/staff/...` once the staff pool's token has passed the door
//! ([`crate::pool_gate`]), as API Gateway's authorizer would let it.
//!
//! With guests ([`GuestDoor`], contract 27) its page names the guest pool's
//! sign-in (the stand-in, [`crate::guest_pool`]), and the chat's requests
//! pass a door: a token of the guest pool that verifies goes on as the
//! authorizer's claims (`x-local-authorizer-claims`, read by the function
//! in body mode); any such header a browser sent is dropped first.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::proxy::{Action, Dropped, Hook, Proxy};

pub const CHAT_PATH: &str = "/support/refund-chat";
pub const DROP_NEXT_ANSWER_PATH: &str = "/__faults/drop-next-answer";
/// Where the page reads a conversation back (contract 18): this, then its id.
pub const READ_PREFIX: &str = "/support/refund-chat/conversations/";
/// A visitor's messages and reads (contract 27), passed on as the chat's are.
pub const VISITOR_PATH: &str = "/support/refund-chat/visitor";
pub const VISITOR_READ_PREFIX: &str = "/support/refund-chat/visitor/conversations/";
/// A claim of a visitor's conversation (contract 27): `READ_PREFIX`, its id, this.
pub const CLAIM_SUFFIX: &str = "/claim";
pub const RATING_SUFFIX: &str = "/rating";
/// The page's polling interval as shipped (`web/index.html`'s meta).
const SHIPPED_POLL: &str = r#"<meta name="refund-chat-poll-seconds" content="10">"#;
/// The origins the shipped page links to, replaced by those of the
/// articles the function loads, as the deployed page's are.
use refund_chat::http::page::SHIPPED_LINK_ORIGINS;

pub struct Widget {
    web_dir: PathBuf,
    /// Where the page may link: the origins of the help centre's articles
    /// (`HELP_ARTICLES_DIR`, as the function reads it, or the built-in set).
    link_origins: String,
    /// A polling interval other than the page's own, for the browser tests.
    poll_seconds: Option<f64>,
    /// To the function; drops the answer when the fault is armed.
    function: Arc<Proxy>,
    /// The function's chat endpoint, for event streams (passed on as they come).
    function_url: String,
    http: reqwest::Client,
    faults: Arc<Faults>,
    desk: Option<DeskDoor>,
    guests: Option<GuestDoor>,
    /// The Event API stand-in (contract 31): its realtime URL and HTTP host,
    /// and the poll while the socket is up; none: the page only polls.
    live: Option<LiveDoor>,
}

/// Where the page's socket goes (contract 31), as the function's page says it.
#[derive(Clone)]
pub struct LiveDoor {
    pub url: String,
    pub host: String,
    pub poll_seconds: u32,
}

/// The guest pool behind the page server (contract 27): where the page
/// signs a guest in, and the door that checks the pool's tokens.
pub struct GuestDoor {
    pub gate: crate::pool_gate::PoolGate,
    /// The stand-in's address, as the page's `refund-chat-guest-sign-in`.
    pub sign_in_url: String,
    pub client_id: String,
}

/// The desk behind the page server: the staff function (under `cargo
/// lambda watch`, `STAFF_IDENTITY=header`) and the door that checks tokens.
pub struct DeskDoor {
    pub gate: crate::pool_gate::PoolGate,
    /// `http://127.0.0.1:9001`: requests go on to `{function}/support/staff/...`.
    pub function: String,
}

/// Where the page server serves the desk.
pub const DESK_PREFIX: &str = "/staff";
/// The headers the door sets, and drops from what a browser sent.
const PERSON_HEADERS: [&str; 3] = ["x-staff-sub", "x-staff-name", "x-staff-groups"];

#[derive(Default)]
struct Faults {
    drop_next_answer: AtomicBool,
    answers_dropped: AtomicUsize,
}

impl Widget {
    /// The page server, passing chat requests on to `function_url`, the
    /// function's endpoint (`http://127.0.0.1:9000/support/refund-chat`, or
    /// under `cargo lambda watch` `.../lambda-url/refund-chat/support/refund-chat`),
    /// with whatever of the desk and the guests is given (a return's label
    /// comes apart from the text, contract 28: no label origin is a text's
    /// link); `poll_seconds`: a
    /// polling interval other than the page's own (the browser tests: a
    /// person's note shows within a second, not ten).
    pub fn serving(
        web_dir: PathBuf,
        function_url: impl Into<String>,
        poll_seconds: Option<f64>,
        desk: Option<DeskDoor>,
        guests: Option<GuestDoor>,
    ) -> Arc<Widget> {
        let mut widget = Widget::build(web_dir, function_url.into(), poll_seconds);
        widget.desk = desk;
        widget.guests = guests;
        Arc::new(widget)
    }

    /// The same, its page told where the Event API's socket is (contract 31).
    pub fn with_live(self: Arc<Self>, live: Option<LiveDoor>) -> Arc<Self> {
        match Arc::try_unwrap(self) {
            Ok(mut widget) => {
                widget.live = live;
                Arc::new(widget)
            }
            Err(shared) => shared,
        }
    }

    fn build(web_dir: PathBuf, function_url: String, poll_seconds: Option<f64>) -> Widget {
        let faults: Arc<Faults> = Arc::default();
        let armed = Arc::clone(&faults);
        let hook: Hook = Arc::new(move |seen| {
            // Only a message's answer is dropped: a poll is not a message.
            let action = if seen.method == Method::POST && armed.drop_next_answer.swap(false, Ordering::SeqCst) {
                armed.answers_dropped.fetch_add(1, Ordering::SeqCst);
                Action::DropAfter
            } else {
                Action::Forward
            };
            Box::pin(async move { action })
        });
        // The proxy keeps the request's path, which is the chat path.
        let target = function_url.strip_suffix(CHAT_PATH).unwrap_or(&function_url);
        Widget {
            web_dir,
            link_origins: link_origins(),
            poll_seconds,
            function: Proxy::new(target, false, hook),
            function_url,
            http: reqwest::Client::new(),
            faults,
            desk: None,
            guests: None,
            live: None,
        }
    }

    /// How many answers were dropped so far.
    pub fn answers_dropped(&self) -> usize {
        self.faults.answers_dropped.load(Ordering::SeqCst)
    }

    /// Arms the fault: the next chat answer is dropped.
    pub fn drop_next_answer(&self) {
        self.faults.drop_next_answer.store(true, Ordering::SeqCst);
    }

    async fn serve(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Answer>, Dropped> {
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        let streamed = asks_for_events(&request) && !self.faults.drop_next_answer.load(Ordering::SeqCst);
        match (method, path.as_str()) {
            (Method::POST, CHAT_PATH | VISITOR_PATH) if streamed => Ok(self.stream(request).await),
            _ => self.serve_whole(request).await.map(|response| response.map(whole)),
        }
    }

    /// An event stream passed on as it arrives, chunk by chunk: nothing is
    /// held back here, so the page sees each word when the function sends it.
    async fn stream(&self, request: Request<Incoming>) -> Response<Answer> {
        let (mut parts, body) = request.into_parts();
        self.door(&mut parts.headers).await;
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        // The chat's route or the visitors', on the function's address.
        let base = self.function_url.strip_suffix(CHAT_PATH).unwrap_or(&self.function_url);
        let url = format!("{base}{}", parts.uri.path());
        let mut outgoing = self.http.post(&url).body(body);
        for (name, value) in parts.headers.iter().filter(|(name, _)| *name != "host") {
            outgoing = outgoing.header(name, value);
        }
        let Ok(answer) = outgoing.send().await else {
            return plain(
                StatusCode::BAD_GATEWAY,
                r#"{"detail":"the function is down"}"#,
                "application/json",
            )
            .map(whole);
        };
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            response = response.header(name, value);
        }
        let frames = answer
            .bytes_stream()
            .map(|chunk| chunk.map(hyper::body::Frame::data).map_err(std::io::Error::other));
        response
            .body(BodyExt::boxed(http_body_util::StreamBody::new(frames)))
            .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "", "text/plain").map(whole))
    }

    async fn serve_whole(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        if let (Some(desk), Some(rest)) = (&self.desk, path.strip_prefix(DESK_PREFIX)) {
            return Ok(self.desk(desk, rest, request).await);
        }
        let mut request = request;
        match (method, path.as_str()) {
            (Method::POST, CHAT_PATH | VISITOR_PATH) => {
                self.door(request.headers_mut()).await;
                self.function.handle(request).await
            }
            (Method::GET, read) if read.starts_with(READ_PREFIX) || read.starts_with(VISITOR_READ_PREFIX) => {
                self.door(request.headers_mut()).await;
                self.function.handle(request).await
            }
            (Method::POST, claim) if claim.starts_with(READ_PREFIX) && claim.ends_with(CLAIM_SUFFIX) => {
                self.door(request.headers_mut()).await;
                self.function.handle(request).await
            }
            // "Did this solve it?" (contract 30), a customer's or a visitor's.
            (Method::POST, rating)
                if (rating.starts_with(READ_PREFIX) || rating.starts_with(VISITOR_READ_PREFIX))
                    && rating.ends_with(RATING_SUFFIX) =>
            {
                self.door(request.headers_mut()).await;
                self.function.handle(request).await
            }
            (Method::POST, DROP_NEXT_ANSWER_PATH) => {
                self.drop_next_answer();
                Ok(plain(StatusCode::NO_CONTENT, "", "text/plain"))
            }
            (Method::GET, "/" | "/index.html") => Ok(self.page().await),
            (Method::GET, "/chat.js") => Ok(self.file("chat.js", "text/javascript; charset=utf-8").await),
            (Method::GET, "/chat.css") => Ok(self.file("chat.css", "text/css; charset=utf-8").await),
            (Method::GET, "/live.js") => Ok(self.file("live.js", "text/javascript; charset=utf-8").await),
            _ => Ok(plain(StatusCode::NOT_FOUND, "not found", "text/plain")),
        }
    }

    /// The chat's door (contract 27): the claims of a guest pool token that
    /// verifies, as the authorizer hands them over; never a browser's. A
    /// token of no pool here passes as it came (body mode: the page's
    /// picker names the customer, and a `guest:` id without the door's
    /// claims is refused by the function).
    async fn door(&self, headers: &mut hyper::HeaderMap) {
        headers.remove(refund_chat::http::identity::DOOR_CLAIMS_HEADER);
        let Some(guests) = &self.guests else { return };
        let authorization = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if authorization.is_none() {
            return;
        }
        match guests.gate.claims(authorization.as_deref()).await {
            Ok(claims) => {
                if let Ok(value) = HeaderValue::from_str(&claims.to_string()) {
                    headers.insert(refund_chat::http::identity::DOOR_CLAIMS_HEADER, value);
                }
            }
            Err(refused) => eprintln!("chat: a token that is not the guest pool's: {refused}"),
        }
    }

    /// `index.html`, with the articles' origins and, if one was given, the
    /// polling interval.
    async fn page(&self) -> Response<Full<Bytes>> {
        match tokio::fs::read_to_string(self.web_dir.join("index.html")).await {
            Ok(html) if html.contains(SHIPPED_POLL) && html.contains(SHIPPED_LINK_ORIGINS) => {
                let origins = format!(
                    r#"<meta name="refund-chat-link-origins" content="{}">"#,
                    self.link_origins
                );
                let mut html = html.replace(SHIPPED_LINK_ORIGINS, &origins);
                if let Some(guests) = &self.guests {
                    html = refund_chat::http::page::guest_sign_in_metas(&html, &guests.sign_in_url, &guests.client_id);
                }
                if let Some(live) = &self.live {
                    html = refund_chat::http::page::live_metas(&html, &live.url, &live.host, live.poll_seconds);
                }
                if let Some(seconds) = self.poll_seconds {
                    let polled = format!(r#"<meta name="refund-chat-poll-seconds" content="{seconds}">"#);
                    html = html.replace(SHIPPED_POLL, &polled);
                }
                plain(StatusCode::OK, html, "text/html; charset=utf-8")
            }
            _ => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "index.html has no polling interval or link origins",
                "text/plain",
            ),
        }
    }

    /// A desk request: the page's files as they are, anything else only
    /// with a token of the staff pool, the person in the door's headers.
    async fn desk(&self, desk: &DeskDoor, rest: &str, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if rest.is_empty() {
            let mut moved = plain(StatusCode::PERMANENT_REDIRECT, "", "text/plain");
            moved
                .headers_mut()
                .insert(hyper::header::LOCATION, HeaderValue::from_static("/staff/"));
            return moved;
        }
        let page = matches!(rest, "/" | "/index.html" | "/desk.js" | "/desk.css");
        let (parts, body) = request.into_parts();
        let query = parts.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        let url = format!("{}/support/staff{rest}{query}", desk.function.trim_end_matches('/'));
        let mut outgoing = self.http.request(parts.method.clone(), &url);
        for (name, value) in parts.headers.iter() {
            let dropped = name == "host" || PERSON_HEADERS.contains(&name.as_str());
            if !dropped {
                outgoing = outgoing.header(name, value);
            }
        }
        if !page {
            let authorization = parts
                .headers
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            match desk.gate.person(authorization).await {
                Ok(person) => {
                    outgoing = outgoing
                        .header(PERSON_HEADERS[0], person.sub)
                        .header(PERSON_HEADERS[1], person.name)
                        .header(PERSON_HEADERS[2], person.groups.join(","));
                }
                Err(refused) => {
                    eprintln!("desk: a request refused at the door: {refused}");
                    return plain(
                        StatusCode::UNAUTHORIZED,
                        r#"{"detail":"Unauthorized"}"#,
                        "application/json",
                    );
                }
            }
        }
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let Ok(answer) = outgoing.body(body).send().await else {
            return plain(
                StatusCode::BAD_GATEWAY,
                r#"{"detail":"the desk's function is down"}"#,
                "application/json",
            );
        };
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            if name != hyper::header::TRANSFER_ENCODING && name != hyper::header::CONTENT_LENGTH {
                response = response.header(name, value);
            }
        }
        let bytes = answer.bytes().await.unwrap_or_default();
        response
            .body(Full::new(bytes))
            .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "", "text/plain"))
    }

    async fn file(&self, name: &str, content_type: &'static str) -> Response<Full<Bytes>> {
        match tokio::fs::read(self.web_dir.join(name)).await {
            Ok(bytes) => plain(StatusCode::OK, bytes, content_type),
            Err(_) => plain(StatusCode::NOT_FOUND, "not found", "text/plain"),
        }
    }
}

/// The origins of the articles the function loads, as it would load them;
/// none (no links) if they do not load, which the function would refuse too.
fn link_origins() -> String {
    let dir = std::env::var_os("HELP_ARTICLES_DIR").map(PathBuf::from);
    let placeholders = refund_chat::help::Placeholders::of_limits(&refund_chat::config::DEFAULT_LIMITS);
    match refund_chat::help::link_origins(dir.as_deref(), &placeholders) {
        Ok(origins) => origins.join(" "),
        Err(error) => {
            eprintln!("the help centre's articles do not load, so the page links nothing: {error}");
            String::new()
        }
    }
}

/// What the page server answers: a whole body, or a stream passed on.
pub type Answer = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn whole(body: Full<Bytes>) -> Answer {
    BodyExt::boxed(body.map_err(|never| match never {}))
}

/// A message sent in event-stream mode (contract 20).
fn asks_for_events(request: &Request<Incoming>) -> bool {
    request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.to_ascii_lowercase().contains("text/event-stream"))
}

fn plain(status: StatusCode, body: impl Into<Bytes>, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Serves `widget` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, widget: Arc<Widget>) {
    while let Ok((stream, _)) = listener.accept().await {
        let widget = Arc::clone(&widget);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| Arc::clone(&widget).serve(request));
            // An error here is a dropped answer (on purpose) or a client gone: nothing to do.
            // No keep-alive: Chromium silently re-sends a request whose reused
            // connection closed without an answer, which would hide the drop.
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds `127.0.0.1:port` (0 for any) and serves `widget` in the background.
pub async fn spawn(port: u16, widget: Arc<Widget>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(serve(listener, widget));
    Ok(address)
}
