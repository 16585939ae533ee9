//! The one HTTP client the function's outbound calls share (OpenAI,
//! payments, DynamoDB, and the AWS SDK's calls through [`sdk`]), built for
//! a money path: no retries of its own (reqwest retries
//! HTTP/2 protocol NACKs by default), no redirects (a followed redirect would
//! re-send a POST), and connections kept for reuse across warm invocations.

use std::time::Duration;

pub mod sdk;

/// Everything but RFC 3986's unreserved characters (letters, digits,
/// `-._~`) percent-encoded: an order id in the order system's path, a
/// header, or a link of the desk reads as it is written (`ORD-1001`).
pub fn percent_encoded(value: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    utf8_percent_encode(value, NOT_UNRESERVED).to_string()
}

pub fn money_path_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(Duration::from_secs(50))
        .build()
}
