//! The chat page for `make run` and the browser tests: serves `web/` and
//! passes `POST /support/refund-chat` on to the function, so the page and
//! the endpoint share one origin (no CORS locally; in production API Gateway
//! answers the preflight).
//!
//! It can also cut the network on purpose: after `POST /__faults/drop-next-answer`,
//! the next chat request is passed on and answered by the function, but the
//! connection to the browser is closed without the answer, the way a mobile
//! network drops one. (It is built on hyper directly because a service error
//! is what closes a connection without a response.)

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

pub const CHAT_PATH: &str = "/support/refund-chat";
pub const DROP_NEXT_ANSWER_PATH: &str = "/__faults/drop-next-answer";

pub struct Widget {
    web_dir: PathBuf,
    function_url: String,
    http: reqwest::Client,
    drop_next_answer: AtomicBool,
    answers_dropped: AtomicUsize,
}

/// The answer to a browser: a response, or a dropped connection.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("answer dropped on purpose")
    }
}

impl std::error::Error for Dropped {}

impl Widget {
    /// `function_url` is the function's endpoint (`http://127.0.0.1:9000/support/refund-chat`).
    pub fn new(web_dir: PathBuf, function_url: impl Into<String>) -> Arc<Widget> {
        Arc::new(Widget {
            web_dir,
            function_url: function_url.into(),
            http: reqwest::Client::new(),
            drop_next_answer: AtomicBool::new(false),
            answers_dropped: AtomicUsize::new(0),
        })
    }

    /// How many answers were dropped so far.
    pub fn answers_dropped(&self) -> usize {
        self.answers_dropped.load(Ordering::SeqCst)
    }

    /// Arms the fault: the next chat answer is dropped.
    pub fn drop_next_answer(&self) {
        self.drop_next_answer.store(true, Ordering::SeqCst);
    }

    async fn serve(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        let (method, path) = (request.method().clone(), request.uri().path().to_owned());
        match (method, path.as_str()) {
            (Method::POST, CHAT_PATH) => {
                let answer = self.pass_on(request).await;
                if self.drop_next_answer.swap(false, Ordering::SeqCst) {
                    self.answers_dropped.fetch_add(1, Ordering::SeqCst);
                    return Err(Dropped);
                }
                Ok(answer)
            }
            (Method::POST, DROP_NEXT_ANSWER_PATH) => {
                self.drop_next_answer();
                Ok(plain(StatusCode::NO_CONTENT, "", "text/plain"))
            }
            (Method::GET, "/" | "/index.html") => Ok(self.file("index.html", "text/html; charset=utf-8").await),
            (Method::GET, "/chat.js") => Ok(self.file("chat.js", "text/javascript; charset=utf-8").await),
            (Method::GET, "/chat.css") => Ok(self.file("chat.css", "text/css; charset=utf-8").await),
            _ => Ok(plain(StatusCode::NOT_FOUND, "not found", "text/plain")),
        }
    }

    async fn file(&self, name: &str, content_type: &'static str) -> Response<Full<Bytes>> {
        match tokio::fs::read(self.web_dir.join(name)).await {
            Ok(bytes) => plain(StatusCode::OK, bytes, content_type),
            Err(_) => plain(StatusCode::NOT_FOUND, "not found", "text/plain"),
        }
    }

    /// Passes the request on to the function, headers and body as they came.
    async fn pass_on(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let mut outgoing = self.http.post(&self.function_url).body(body);
        for (name, value) in parts.headers.iter().filter(|(name, _)| *name != "host") {
            outgoing = outgoing.header(name, value);
        }
        match outgoing.send().await {
            Ok(answer) => {
                let mut response = Response::builder().status(answer.status());
                for (name, value) in answer.headers() {
                    response = response.header(name, value);
                }
                let bytes = answer.bytes().await.unwrap_or_default();
                response
                    .body(Full::new(bytes))
                    .unwrap_or_else(|_| plain(StatusCode::BAD_GATEWAY, "", "text/plain"))
            }
            Err(_) => plain(
                StatusCode::BAD_GATEWAY,
                r#"{"detail":"the local function is not running"}"#,
                "application/json",
            ),
        }
    }
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
