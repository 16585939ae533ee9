//! The desk's page (contract 24): one HTML file, its script and its style,
//! compiled into the function. The page holds no data; what it needs to
//! sign in (the identity provider's endpoint and the app client) and the
//! origins it may link to travel in a `<meta>` element, never in an inline
//! script, and the content-security-policy allows only the page's own
//! files, the API (same origin) and the identity provider.

use lambda_http::{Body, Response};

use crate::web_page::{attribute, file, origin_of};

const HTML: &str = include_str!("../../../web/staff/index.html");
/// The live socket's client it shares with the chat page (contract 31), the page's script, then the QR encoder it draws an authenticator key with
/// (contract 30; `web/staff/qrcode.js`, MIT, kept as published): one file,
/// one route, one content-security-policy.
const SCRIPT: &str = concat!(
    include_str!("../../../web/live.js"),
    "\n",
    include_str!("../../../web/staff/desk.js"),
    "\n",
    include_str!("../../../web/staff/qrcode.js")
);
const STYLE: &str = include_str!("../../../web/staff/desk.css");

/// What the page is told.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageConfig {
    /// Cognito's `InitiateAuth` endpoint; none: the page cannot sign in.
    pub sign_in_url: Option<String>,
    pub client_id: Option<String>,
    /// Origins a link may go to: the help centre's and the two URL templates'.
    pub link_origins: Vec<String>,
    pub approver_group: String,
    /// Live pokes (contract 31): the Event API's realtime endpoint, the HTTP
    /// host a socket's authorization names, the poll while the socket is up.
    pub live_url: Option<String>,
    pub live_host: Option<String>,
    pub live_poll_seconds: u32,
}

/// The origins of the URL templates, beside the help centre's.
pub fn link_origins(help: Vec<String>, templates: [Option<&str>; 2]) -> Vec<String> {
    let mut origins: Vec<String> = help
        .into_iter()
        .chain(
            templates
                .into_iter()
                .flatten()
                .filter_map(|t| origin_of(&t.replace(['{', '}'], ""))),
        )
        .collect();
    origins.sort();
    origins.dedup();
    origins
}

/// The policy: the page's own script and style, the API, the identity provider.
pub fn content_security_policy(config: &PageConfig) -> String {
    let sign_in = config
        .sign_in_url
        .as_deref()
        .and_then(origin_of)
        .map(|origin| format!(" {origin}"))
        .unwrap_or_default();
    let live = config
        .live_url
        .as_deref()
        .and_then(origin_of)
        .map(|origin| format!(" {origin}"))
        .unwrap_or_default();
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'{sign_in}{live}; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The page, its script or its style, by the path's last part; none for
/// any other name.
pub fn serve(name: &str, config: &PageConfig) -> Option<Response<Body>> {
    match name {
        "" | "index.html" => {
            let meta = serde_json::to_string(config).unwrap_or_default();
            let html = HTML.replace("{{DESK_CONFIG}}", &attribute(&meta));
            Some(file(
                "text/html; charset=utf-8",
                html,
                Some(&content_security_policy(config)),
            ))
        }
        "desk.js" => Some(file("text/javascript; charset=utf-8", SCRIPT.to_owned(), None)),
        "desk.css" => Some(file("text/css; charset=utf-8", STYLE.to_owned(), None)),
        _ => None,
    }
}

/// A redirect from the page's path without its slash to the folder.
pub fn to_folder() -> Response<Body> {
    crate::web_page::to_folder("staff/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored QR encoder is `qrcode-generator` 1.4.4 as npm publishes
    /// its `qrcode.js`, byte for byte: a change to it is a deliberate one,
    /// made with this hash (the supply chain of a page that signs people
    /// in to approve refunds).
    #[test]
    fn the_vendored_qr_encoder_is_the_published_one() {
        use sha2::{Digest, Sha256};
        let vendored = include_bytes!("../../../web/staff/qrcode.js");
        let hex: String = Sha256::digest(vendored).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "18ae399f81182bc9de916e9c77b195df20cc58d6f2d55a62b085a299f1bf1780");
    }

    #[test]
    fn the_policy_allows_no_inline_script_and_only_the_sign_in_origin_besides() {
        let config = PageConfig {
            sign_in_url: Some("https://cognito-idp.eu-west-1.amazonaws.com/".into()),
            ..PageConfig::default()
        };
        let policy = content_security_policy(&config);
        assert!(policy.contains("script-src 'self';"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert!(policy.contains("connect-src 'self' https://cognito-idp.eu-west-1.amazonaws.com;"));
    }

    /// Contract 31: the desk's socket goes to the Event API's realtime
    /// endpoint, which its policy names; its script carries the socket client.
    #[test]
    fn the_policy_names_the_live_endpoint_and_the_script_carries_its_client() {
        let config = PageConfig {
            live_url: Some("wss://abc.appsync-realtime-api.eu-west-1.amazonaws.com/event/realtime".into()),
            ..PageConfig::default()
        };
        let policy = content_security_policy(&config);
        assert!(
            policy.contains("connect-src 'self' wss://abc.appsync-realtime-api.eu-west-1.amazonaws.com;"),
            "{policy}"
        );
        assert!(content_security_policy(&PageConfig::default()).contains("connect-src 'self';"));
        assert!(SCRIPT.contains("window.RefundChatLive") && SCRIPT.contains("RefundChatLive.open"));
    }

    #[test]
    fn the_page_carries_its_settings_escaped_and_no_inline_script() {
        let config = PageConfig {
            client_id: Some("c\"><script>alert(1)</script>".into()),
            ..PageConfig::default()
        };
        let Some(page) = serve("", &config) else {
            panic!("no page")
        };
        let Body::Text(html) = page.body() else {
            panic!("not text")
        };
        assert!(!html.contains("<script>alert"), "{html}");
        assert_eq!(html.matches("<script").count(), html.matches("<script src=").count());
        assert!(serve("../secret", &config).is_none());
    }

    #[test]
    fn links_go_to_the_help_centre_and_the_templates_origins() {
        let origins = link_origins(
            vec!["https://help.shop.example".into()],
            [Some("https://logs.example/q/{request_id}"), None],
        );
        assert_eq!(origins, ["https://help.shop.example", "https://logs.example"]);
    }
}
