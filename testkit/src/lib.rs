//! The test kit of refund-chat, one crate for every test binary (the API
//! tests, the browser test, the EMF test): the real handler, wired as `main`
//! wires it ([`refund_chat::startup::wire`]), against local servers on
//! 127.0.0.1: wiremock for OpenAI and payments, moto's server for DynamoDB
//! and Secrets Manager, the project's own proxy to serialise, record or
//! break what passes. Timeouts come from configuration and are short.
//! [`TestApp::builder`] lets a test replace any part.

pub mod address;
pub mod admin;
pub mod answers;
pub mod app;
pub mod aws;
pub mod desk;
pub mod keys;
pub mod openapi;
pub mod proxy;

pub use address::*;
pub use admin::*;
pub use answers::*;
pub use app::*;
pub use aws::*;
pub use desk::*;
pub use keys::*;
pub use openapi::*;
pub use proxy::*;

use std::time::Duration;

pub const API_KEY: &str = "sk-test-4f9a1c0e";
pub const REQUEST_ID: &str = "req-0123456789";
pub const USER: &str = "u-1001";
/// The tests' key of visitors' source addresses (contract 27).
pub const VISITOR_ADDRESS_KEY: &str = "tests-visitor-address-key-0123456789";
/// The tests' guest pool (contract 27): its tokens' issuer.
pub const GUEST_ISSUER: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_GuestsTest";
/// The guest pool's app client: a guest token's `aud`.
pub const GUEST_CLIENT: &str = "guests-test-client";
/// Code's sentence of when a person will answer, as a shop open at all hours
/// with no measured first replies says it (contract 32).
pub const PERSON_USUALLY: &str = "A person usually answers within 30 minutes.";

/// A fixed reply of a handoff, ended by when a person will answer.
pub fn told(fixed: &str) -> String {
    format!("{fixed} {PERSON_USUALLY}")
}

pub const REFUND_MESSAGE: &str = "Order A-1001 arrived broken, please refund 12.50";
pub const OPENAI_TIMEOUT: Duration = Duration::from_millis(500);
pub const BACKOFF: Duration = Duration::from_millis(200);
pub const PAYMENTS_TIMEOUT: Duration = Duration::from_millis(500);
pub const ORDERS_TIMEOUT: Duration = Duration::from_millis(500);
/// moto, one server for the whole suite on 2 cores, answers some writes in over 2 s under load.
pub const LEDGER_TIMEOUT: Duration = Duration::from_secs(4);
/// Long enough that a stand-in "hangs" past every timeout above.
pub const HANG: Duration = Duration::from_secs(3);

/// The project's root (events/, docs/, .venv/).
pub fn root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}
