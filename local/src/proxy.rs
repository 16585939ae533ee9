//! The one forwarding proxy of the project, on 127.0.0.1: in front of moto,
//! the payments sandbox, a model or the function. A hook sees each request
//! and decides its [`Action`]: pass it on; answer or drop it before passing
//! it on; or pass it on, so that the write or the payment happens, and then
//! answer late, cut the connection, or answer something else. That last
//! family is what a money path must survive: the effect happened and the
//! caller cannot know. Optionally one request at a time reaches the target
//! (moto is not atomic under concurrent writes; DynamoDB serialises the
//! writes of one item), and every request passed on is kept with its answer.
//!
//! Used by the test kit (serialising moto, injecting a conflict, losing an
//! answer, counting operations), the chaos run's faults, the evaluation's
//! recording of model traffic, and the chat page's dropped answer.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// What the proxy does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Pass it on and answer with the target's answer.
    Forward,
    /// Not passed on: answer this status and body (JSON).
    Refuse(u16, Bytes),
    /// Not passed on: answer this status with an HTML page, as a proxy, a
    /// load balancer or a wrong endpoint would (a 200 that is not the
    /// service's answer).
    Page(u16, Bytes),
    /// Not passed on: the connection is closed.
    DropBefore,
    /// Passed on late (after the caller's timeout), then answered.
    DelayBefore(Duration),
    /// Passed on, then answered after this delay (the answer is lost to a caller that gave up).
    DelayAfter(Duration),
    /// Passed on, then the connection is closed without the answer.
    DropAfter,
    /// Passed on, then this status and body instead of the answer.
    ReplaceAfter(u16, Bytes),
}

/// One request, as a hook sees it.
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    /// The DynamoDB operation, from `x-amz-target` (`TransactWriteItems`, ...).
    pub fn dynamodb_operation(&self) -> &str {
        self.headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or_default()
    }
}

/// Decides each request's fate; may do work of its own first (a competing write).
pub type Hook = Arc<dyn Fn(&Seen) -> Pin<Box<dyn Future<Output = Action> + Send>> + Send + Sync>;

/// A hook that passes everything on.
pub fn forward_all() -> Hook {
    Arc::new(|_| Box::pin(async { Action::Forward }))
}

/// A request passed on, and the target's answer (`None`: it gave none).
#[derive(Debug, Clone)]
pub struct Passed {
    pub request: Bytes,
    pub answer: Option<Bytes>,
}

pub struct Proxy {
    target: String,
    http: reqwest::Client,
    hook: Hook,
    one_at_a_time: Option<tokio::sync::Mutex<()>>,
    passed: Mutex<Vec<Passed>>,
    /// Requests it is handling now, and a signal when that reaches zero.
    in_flight: std::sync::atomic::AtomicUsize,
    drained: tokio::sync::Notify,
}

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a Proxy);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

/// The error that makes hyper close a connection without an answer.
#[derive(Debug)]
pub struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dropped on purpose")
    }
}

impl std::error::Error for Dropped {}

impl Proxy {
    /// A proxy to `target` (scheme, host and port; the request's path is kept).
    pub fn new(target: impl Into<String>, one_at_a_time: bool, hook: Hook) -> Arc<Proxy> {
        Arc::new(Proxy {
            target: target.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            hook,
            one_at_a_time: one_at_a_time.then(tokio::sync::Mutex::default),
            passed: Mutex::default(),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            drained: tokio::sync::Notify::new(),
        })
    }

    /// Completes once no request is in flight: every request passed on has
    /// had its target's answer (a caller that gave up does not end its
    /// request). The books are read after it, and nothing reaches the
    /// target beside a reader that goes around the proxy.
    pub async fn drained(&self) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so no last request can slip in between.
            drained.as_mut().enable();
            if self.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            drained.await;
        }
    }

    /// Every request passed on so far, with its answer, in order.
    pub fn passed(&self) -> Vec<Passed> {
        self.passed.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Serves the proxy on a free port of 127.0.0.1.
    pub async fn spawn(self: &Arc<Self>) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let proxy = Arc::clone(self);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let proxy = Arc::clone(&proxy);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let proxy = Arc::clone(&proxy);
                        // Run to the end even when the caller gives up (hyper
                        // drops a closed connection's future): a request
                        // passed on holds the one-at-a-time turn until the
                        // target has answered, and is recorded as passed.
                        async move {
                            tokio::spawn(async move { proxy.handle(request).await })
                                .await
                                .unwrap_or(Err(Dropped))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(address)
    }

    /// One request through the hook and, unless it says otherwise, to the target.
    pub async fn handle(&self, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        self.in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _in_flight = InFlight(self);
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let seen = Seen {
            method: parts.method.clone(),
            path: parts.uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
            headers: parts.headers.clone(),
            body,
        };
        let action = (self.hook)(&seen).await;
        match &action {
            Action::Refuse(status, body) => return Ok(answer(*status, body.clone())),
            Action::Page(status, body) => {
                let mut page = answer(*status, body.clone());
                page.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
                );
                return Ok(page);
            }
            Action::DropBefore => return Err(Dropped),
            Action::DelayBefore(delay) => tokio::time::sleep(*delay).await,
            _ => {}
        }
        let forwarded = self.forward(&seen).await;
        if let Ok(mut passed) = self.passed.lock() {
            passed.push(Passed {
                request: seen.body.clone(),
                answer: forwarded.as_ref().map(|(_, _, bytes)| bytes.clone()),
            });
        }
        let Some((status, headers, bytes)) = forwarded else {
            return Ok(answer(502, Bytes::from_static(b"{\"detail\":\"the target is down\"}")));
        };
        match action {
            Action::DelayAfter(delay) => tokio::time::sleep(delay).await,
            Action::DropAfter => return Err(Dropped),
            Action::ReplaceAfter(status, body) => return Ok(answer(status, body)),
            _ => {}
        }
        let mut response = Response::builder().status(status);
        for (name, value) in &headers {
            response = response.header(name, value);
        }
        Ok(response
            .body(Full::new(bytes))
            .unwrap_or_else(|_| answer(502, Bytes::new())))
    }

    async fn forward(&self, seen: &Seen) -> Option<(StatusCode, HeaderMap, Bytes)> {
        let _turn = match &self.one_at_a_time {
            Some(lock) => Some(lock.lock().await),
            None => None,
        };
        let mut outgoing = self
            .http
            .request(seen.method.clone(), format!("{}{}", self.target, seen.path))
            .body(seen.body.clone());
        for (name, value) in seen.headers.iter().filter(|(name, _)| *name != "host") {
            outgoing = outgoing.header(name, value);
        }
        let response = outgoing.send().await.ok()?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.ok()?;
        Some((status, headers, bytes))
    }
}

fn answer(status: u16, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A slow target that notes how many requests it held at once.
    async fn slow_target(in_flight: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> SocketAddr {
        let router = axum::Router::new().fallback(move || {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                "{}"
            }
        });
        crate::spawn(0, router).await.unwrap()
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_keeps_its_turn_until_the_target_answered() {
        // moto's rollback of a cancelled transaction restores the tables it
        // copied: a second request let through beside it loses its write.
        let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let target = slow_target(in_flight, most.clone()).await;
        let proxy = Proxy::new(format!("http://{target}"), true, forward_all());
        let address = proxy.spawn().await.unwrap();
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(50))
            .build()
            .unwrap();

        let gave_up = impatient.post(format!("http://{address}/")).send().await;
        let next = reqwest::Client::new().post(format!("http://{address}/")).send().await;

        assert!(gave_up.is_err(), "the first caller timed out");
        assert!(next.is_ok_and(|r| r.status().is_success()));
        assert_eq!(most.load(Ordering::SeqCst), 1, "the target saw one request at a time");
        assert_eq!(proxy.passed().len(), 2, "both were passed on and recorded");
    }
}
