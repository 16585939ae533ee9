//! A proxy that misbehaves on purpose, in front of the payments sandbox or
//! moto's DynamoDB. For each request it draws a [`Fault`]: pass it on, fail
//! before passing it on, or pass it on (so the payment or the write
//! happens) and then fail the answer: late, cut off, a 500, or garbage.
//! That last family is what a money path must survive: the effect happened
//! and the caller cannot know.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Not passed on: answer this status and body.
    RefuseBefore(u16, &'static str),
    /// Not passed on: the connection is closed.
    DropBefore,
    /// Passed on late (after the caller's timeout), then answered.
    DelayBefore(Duration),
    /// Passed on, then answered after this delay (past the caller's timeout).
    DelayAfter(Duration),
    /// Passed on, then the connection is closed without the answer.
    DropAfter,
    /// Passed on, then this status and body instead of the answer.
    ReplaceAfter(u16, &'static str),
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::RefuseBefore(..) => "refused before",
            Fault::DropBefore => "dropped before",
            Fault::DelayBefore(_) => "delayed before",
            Fault::DelayAfter(_) => "slow after",
            Fault::DropAfter => "dropped after",
            Fault::ReplaceAfter(..) => "replaced after",
        }
    }
}

/// The body of a request the proxy passed on, for the checks at the end.
#[derive(Debug, Clone)]
pub struct Passed {
    pub body: Bytes,
}

pub struct FaultProxy {
    target: String,
    http: reqwest::Client,
    seed: u64,
    count: AtomicU64,
    plan: fn(&mut Rng) -> Fault,
    /// One request at a time to the target (moto is not atomic under
    /// concurrent writes; DynamoDB serialises writes of one item).
    one_at_a_time: Option<tokio::sync::Mutex<()>>,
    passed: Mutex<Vec<Passed>>,
    faults: Mutex<Vec<Fault>>,
}

#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dropped on purpose")
    }
}

impl std::error::Error for Dropped {}

impl FaultProxy {
    pub fn new(target: impl Into<String>, seed: u64, plan: fn(&mut Rng) -> Fault, one_at_a_time: bool) -> Arc<Self> {
        Arc::new(FaultProxy {
            target: target.into(),
            http: reqwest::Client::new(),
            seed,
            count: AtomicU64::new(0),
            plan,
            one_at_a_time: one_at_a_time.then(tokio::sync::Mutex::default),
            passed: Mutex::default(),
            faults: Mutex::default(),
        })
    }

    pub fn passed(&self) -> Vec<Passed> {
        self.passed.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub fn faults(&self) -> Vec<Fault> {
        self.faults.lock().map(|f| f.clone()).unwrap_or_default()
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Dropped> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        let fault = (self.plan)(&mut Rng::derived(self.seed, &[0xFA17, n]));
        if let Ok(mut faults) = self.faults.lock() {
            faults.push(fault);
        }
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        match fault {
            Fault::RefuseBefore(status, text) => return Ok(answer(status, Bytes::from_static(text.as_bytes()))),
            Fault::DropBefore => return Err(Dropped),
            Fault::DelayBefore(delay) => tokio::time::sleep(delay).await,
            _ => {}
        }
        let forwarded = {
            let _turn = match &self.one_at_a_time {
                Some(lock) => Some(lock.lock().await),
                None => None,
            };
            let mut outgoing = self
                .http
                .request(parts.method.clone(), format!("{}{}", self.target, parts.uri))
                .body(body.clone());
            for (name, value) in parts.headers.iter().filter(|(name, _)| *name != "host") {
                outgoing = outgoing.header(name, value);
            }
            match outgoing.send().await {
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    let bytes = response.bytes().await.unwrap_or_default();
                    Some((status, headers, bytes))
                }
                Err(_) => None,
            }
        };
        if let Ok(mut passed) = self.passed.lock() {
            passed.push(Passed { body });
        }
        let Some((status, headers, bytes)) = forwarded else {
            return Ok(answer(502, Bytes::from_static(b"{\"detail\":\"the target is down\"}")));
        };
        match fault {
            Fault::DelayAfter(delay) => tokio::time::sleep(delay).await,
            Fault::DropAfter => return Err(Dropped),
            Fault::ReplaceAfter(status, text) => return Ok(answer(status, Bytes::from_static(text.as_bytes()))),
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

/// Serves the proxy on a free port of 127.0.0.1.
pub async fn spawn(proxy: Arc<FaultProxy>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let proxy = Arc::clone(&proxy);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| Arc::clone(&proxy).handle(request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(address)
}
