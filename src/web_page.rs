//! A page compiled into a function: the chat's (`GET /support/`, contract
//! 27) and the desk's (`GET /support/staff/`, contract 24). What serving one
//! takes is the same for both: its files' answers (no caching, no sniffing,
//! no referrer), the text of an HTML attribute, an origin, and the redirect
//! from the folder's name without its slash (relative, so a stage's prefix
//! stays).

use lambda_http::http::{StatusCode, header};
use lambda_http::{Body, Response};

/// A URL's origin (`https://host[:port]`), if it has one.
pub fn origin_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()
        .map(|url| url.origin().ascii_serialization())
        .filter(|origin| origin != "null")
}

/// The host (and port) of a URL, as a WebSocket's authorization names the
/// Event API's HTTP endpoint (contract 31); empty for none.
pub fn host_of(url: Option<&str>) -> String {
    url.and_then(|url| reqwest::Url::parse(url).ok())
        .and_then(|url| {
            url.host_str()
                .map(|host| url.port().map_or(host.to_owned(), |port| format!("{host}:{port}")))
        })
        .unwrap_or_default()
}

/// Text for an HTML attribute's value.
pub fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One of the page's files; the HTML with its content-security-policy.
pub fn file(content_type: &str, body: String, policy: Option<&str>) -> Response<Body> {
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer");
    if let Some(policy) = policy {
        response = response.header("content-security-policy", policy);
    }
    response
        .body(Body::Text(body))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

/// `…/folder` would load the page with its files resolved one folder up:
/// the browser is sent to `folder/` (`location`, relative).
pub fn to_folder(location: &'static str) -> Response<Body> {
    Response::builder()
        .status(StatusCode::MOVED_PERMANENTLY)
        .header(header::LOCATION, location)
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::Empty)
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_attributes() {
        assert_eq!(
            origin_of("https://shop.example/help/x").as_deref(),
            Some("https://shop.example")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080/").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin_of("not a url"), None);
        assert_eq!(attribute(r#""><script>"#), "&quot;&gt;&lt;script&gt;");
    }
}
