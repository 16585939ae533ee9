//! Local stand-ins for everything refund-chat talks to, for `make run`, the
//! event tests and benchmarks. None of this is in the function's binary.
//!
//! - [`payments_sandbox`]: the contract's payments API over seeded orders, with
//!   a refund ledger persisted to a file;
//! - [`local_model`]: a deterministic OpenAI-compatible Chat Completions server
//!   that behaves like a reasonable refund agent, plus phrases that make it
//!   misbehave on purpose;
//! - [`completions`]: OpenAI completion bodies, for every stand-in that answers like OpenAI;
//! - [`widget`]: the chat page, on the function's origin, with a fault that drops an answer;
//! - [`runtime_api`]: a Lambda Runtime API emulator, to run the function as Lambda does;
//! - [`moto`]: moto's server, for tools that run a whole stack in one process;
//! - [`pool_gate`]: the door that checks a Cognito pool's ID token as API Gateway's authorizer does;
//! - [`guest_pool`]: the guest pool's passwordless sign-in, which moto's Cognito lacks;
//! - [`event_api`]: AppSync Events' publish and WebSocket (contract 31), which moto cannot deliver.

pub mod completions;
pub mod event_api;
pub mod guest_pool;
pub mod local_model;
pub mod moto;
pub mod order_text;
pub mod payments_sandbox;
pub mod pool_gate;
pub mod proxy;
pub mod runtime_api;
pub mod staff_pool;
pub mod widget;

use std::net::SocketAddr;

/// Serves `router` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}

/// Binds `127.0.0.1:port` (0 for any free port) and serves `router` in the background.
pub async fn spawn(port: u16, router: axum::Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    tokio::spawn(serve(listener, router));
    Ok(address)
}
