//! The one HTTP client the function's outbound calls share (OpenAI,
//! payments, DynamoDB, and the AWS SDK's calls through [`sdk`]), built for
//! a money path: no retries of its own (reqwest retries
//! HTTP/2 protocol NACKs by default), no redirects (a followed redirect would
//! re-send a POST), and connections kept for reuse across warm invocations.

use std::time::Duration;

pub mod sdk;

pub fn money_path_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(Duration::from_secs(50))
        .build()
}
