//! The chat page, deployed (contract 27): `GET /support/` serves the same
//! page `make run` serves (`web/`, compiled in), with what differs written
//! into its `<meta>` elements once, when the function starts: the endpoint
//! relative to the page (so a stage's prefix stays), who talks ("token": a
//! visitor, until the shop's page hands over a signed-in customer's ID token
//! by `postMessage`), the one origin that may hand it over and embed the page
//! (`CORS_ALLOW_ORIGIN`, also the policy's `frame-ancestors`), and the origins
//! a reply may link to (the help centre's), and where a visitor confirms
//! their e-mail (the guest pool's sign-in endpoint and client, contract 27:
//! the policy's `connect-src` names that endpoint, and nothing else beyond
//! the page's own origin). The page holds no data.

use lambda_http::{Body, Response};

use crate::config::Config;
use crate::web_page::{attribute, file, origin_of, to_folder};

const HTML: &str = include_str!("../../web/index.html");
const SCRIPT: &str = include_str!("../../web/chat.js");
const STYLE: &str = include_str!("../../web/chat.css");
const LIVE: &str = include_str!("../../web/live.js");

/// The shipped page's settings, as `make run`'s page server serves them
/// (a test checks that each is in the file).
pub const SHIPPED_ENDPOINT: &str = r#"<meta name="refund-chat-endpoint" content="/support/refund-chat">"#;
pub const SHIPPED_IDENTITY: &str = r#"<meta name="refund-chat-identity" content="pick">"#;
pub const SHIPPED_WIDGET_ORIGIN: &str = r#"<meta name="refund-chat-widget-origin" content="">"#;
pub const SHIPPED_LINK_ORIGINS: &str = r#"<meta name="refund-chat-link-origins" content="https://shop.example">"#;
pub const SHIPPED_GUEST_SIGN_IN: &str = r#"<meta name="refund-chat-guest-sign-in" content="">"#;
pub const SHIPPED_GUEST_CLIENT: &str = r#"<meta name="refund-chat-guest-client-id" content="">"#;
pub const SHIPPED_LIVE_URL: &str = r#"<meta name="refund-chat-live-url" content="">"#;
pub const SHIPPED_LIVE_HOST: &str = r#"<meta name="refund-chat-live-host" content="">"#;
pub const SHIPPED_LIVE_POLL: &str = r#"<meta name="refund-chat-live-poll-seconds" content="60">"#;

/// The page's live metas (contract 31): the realtime endpoint, the HTTP
/// host its authorization names, and the poll while the socket is up (the
/// page server under `make run` writes the same).
pub fn live_metas(html: &str, url: &str, host: &str, poll_secs: u32) -> String {
    html.replace(
        SHIPPED_LIVE_URL,
        &format!(r#"<meta name="refund-chat-live-url" content="{}">"#, attribute(url)),
    )
    .replace(
        SHIPPED_LIVE_HOST,
        &format!(r#"<meta name="refund-chat-live-host" content="{}">"#, attribute(host)),
    )
    .replace(
        SHIPPED_LIVE_POLL,
        &format!(r#"<meta name="refund-chat-live-poll-seconds" content="{poll_secs}">"#),
    )
}

/// The page's guest sign-in metas for `url` and `client_id` (the page
/// server under `make run` writes the same).
pub fn guest_sign_in_metas(html: &str, url: &str, client_id: &str) -> String {
    html.replace(
        SHIPPED_GUEST_SIGN_IN,
        &format!(
            r#"<meta name="refund-chat-guest-sign-in" content="{}">"#,
            attribute(url)
        ),
    )
    .replace(
        SHIPPED_GUEST_CLIENT,
        &format!(
            r#"<meta name="refund-chat-guest-client-id" content="{}">"#,
            attribute(client_id)
        ),
    )
}

/// The page as this container serves it.
pub struct ChatPage {
    html: String,
    policy: String,
}

impl ChatPage {
    pub fn new(config: &Config) -> ChatPage {
        let widget = config.cors_allow_origin.as_deref().and_then(origin_of);
        // A reply's text links the help centre only: a return's label comes
        // apart from it (contract 28), so no URL in a text is ever a label's.
        let links = crate::help::origins(&config.help_articles).join(" ");
        let html = HTML
            .replace(
                SHIPPED_ENDPOINT,
                r#"<meta name="refund-chat-endpoint" content="refund-chat">"#,
            )
            .replace(
                SHIPPED_IDENTITY,
                r#"<meta name="refund-chat-identity" content="token">"#,
            )
            .replace(
                SHIPPED_WIDGET_ORIGIN,
                &format!(
                    r#"<meta name="refund-chat-widget-origin" content="{}">"#,
                    attribute(widget.as_deref().unwrap_or_default())
                ),
            )
            .replace(
                SHIPPED_LINK_ORIGINS,
                &format!(
                    r#"<meta name="refund-chat-link-origins" content="{}">"#,
                    attribute(&links)
                ),
            );
        let live = config.live.realtime_url.as_deref().and_then(origin_of);
        let html = match &config.live.realtime_url {
            Some(url) => live_metas(
                &html,
                url,
                &crate::web_page::host_of(config.live.events_url.as_deref()),
                config.live.fallback_poll_secs,
            ),
            None => html,
        };
        let (html, sign_in) = match &config.guest_sign_in {
            Some(guests) => (
                guest_sign_in_metas(&html, &guests.url, &guests.client_id),
                origin_of(&guests.url),
            ),
            None => (html, None),
        };
        // The page's own files, the API, the guest pool's sign-in and the
        // Event API's realtime endpoint, nothing inline; embedded only by the shop's page.
        let policy = format!(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'{}{}; \
             base-uri 'none'; form-action 'none'; frame-ancestors {}",
            sign_in.map(|origin| format!(" {origin}")).unwrap_or_default(),
            live.map(|origin| format!(" {origin}")).unwrap_or_default(),
            widget.as_deref().unwrap_or("'none'")
        );
        ChatPage { html, policy }
    }

    /// The answer to a GET of `path` (the raw path), if it is the page's.
    pub fn serve(&self, path: &str) -> Option<Response<Body>> {
        match path {
            "/support" => Some(to_folder("support/")),
            "/support/" | "/support/index.html" => {
                Some(file("text/html; charset=utf-8", self.html.clone(), Some(&self.policy)))
            }
            "/support/chat.js" => Some(file("text/javascript; charset=utf-8", SCRIPT.to_owned(), None)),
            "/support/chat.css" => Some(file("text/css; charset=utf-8", STYLE.to_owned(), None)),
            "/support/live.js" => Some(file("text/javascript; charset=utf-8", LIVE.to_owned(), None)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(origin: Option<&str>) -> ChatPage {
        page_with(origin, &[])
    }

    /// The page of a function configured with `more` variables too.
    fn page_with(origin: Option<&str>, more: &[(&str, &str)]) -> ChatPage {
        let mut config = crate::config::Config::from_lookup(|name| match name {
            "OPENAI_API_KEY_SECRET_ID" => Some("k".into()),
            "PAYMENTS_BASE_URL" | "ORDERS_BASE_URL" => Some("http://127.0.0.1:1".into()),
            "LEDGER_TABLE" | "CONVERSATION_TABLE" => Some("t".into()),
            _ => more.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()),
        })
        .unwrap();
        config.cors_allow_origin = origin.map(str::to_owned);
        ChatPage::new(&config)
    }

    fn html(page: &ChatPage) -> String {
        match page.serve("/support/").map(|r| r.into_body()) {
            Some(Body::Text(html)) => html,
            _ => panic!("no page"),
        }
    }

    #[test]
    fn every_shipped_setting_is_in_the_file_and_each_is_rewritten() {
        for shipped in [
            SHIPPED_ENDPOINT,
            SHIPPED_IDENTITY,
            SHIPPED_WIDGET_ORIGIN,
            SHIPPED_LINK_ORIGINS,
            SHIPPED_GUEST_SIGN_IN,
            SHIPPED_GUEST_CLIENT,
        ] {
            assert!(HTML.contains(shipped), "{shipped}");
        }
        let html = html(&page(Some("https://shop.example")));
        assert!(html.contains(r#"content="refund-chat">"#), "relative to the page");
        assert!(html.contains(r#"<meta name="refund-chat-identity" content="token">"#));
        assert!(html.contains(r#"<meta name="refund-chat-widget-origin" content="https://shop.example">"#));
        assert_eq!(
            html.matches("<script").count(),
            html.matches("<script src=").count(),
            "nothing inline"
        );
    }

    #[test]
    fn the_policy_allows_only_the_pages_files_the_api_and_the_shop_as_the_frame() {
        let page = page(Some("https://shop.example"));
        let served = page.serve("/support/").unwrap();
        let policy = served.headers()["content-security-policy"].to_str().unwrap();
        assert!(
            policy.contains("script-src 'self';") && !policy.contains("unsafe"),
            "{policy}"
        );
        assert!(policy.ends_with("frame-ancestors https://shop.example"), "{policy}");
        let alone = self::page(None).serve("/support/").unwrap();
        assert!(
            alone.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .ends_with("frame-ancestors 'none'")
        );
        assert_eq!(page.serve("/support").unwrap().status(), 301);
        assert!(page.serve("/support/chat.js").is_some() && page.serve("/support/../secret").is_none());
    }

    /// Contract 31: the page subscribes at the Event API's realtime
    /// endpoint, so its policy names that origin and its metas the endpoint,
    /// the HTTP host the socket's authorization names, and the poll while
    /// the socket is up; without the Event API, none of them.
    #[test]
    fn the_live_endpoint_is_named_in_the_page_and_its_policy() {
        for shipped in [SHIPPED_LIVE_URL, SHIPPED_LIVE_HOST, SHIPPED_LIVE_POLL] {
            assert!(HTML.contains(shipped), "{shipped}");
        }
        let live = page_with(
            None,
            &[
                (
                    "LIVE_EVENTS_URL",
                    "https://abc.appsync-api.eu-west-1.amazonaws.com/event",
                ),
                (
                    "LIVE_REALTIME_URL",
                    "wss://abc.appsync-realtime-api.eu-west-1.amazonaws.com/event/realtime",
                ),
                ("LIVE_FALLBACK_POLL_SECS", "90"),
            ],
        );
        let served = live.serve("/support/").unwrap();
        let policy = served.headers()["content-security-policy"].to_str().unwrap();
        assert!(
            policy.contains("connect-src 'self' wss://abc.appsync-realtime-api.eu-west-1.amazonaws.com;"),
            "{policy}"
        );
        let html = html(&live);
        assert!(html.contains(
            r#"<meta name="refund-chat-live-url" content="wss://abc.appsync-realtime-api.eu-west-1.amazonaws.com/event/realtime">"#
        ));
        assert!(
            html.contains(r#"<meta name="refund-chat-live-host" content="abc.appsync-api.eu-west-1.amazonaws.com">"#)
        );
        assert!(html.contains(r#"<meta name="refund-chat-live-poll-seconds" content="90">"#));
        assert!(live.serve("/support/live.js").is_some());
        let without = page(None);
        assert!(html_of_policy(&without).contains("connect-src 'self';"));
        assert!(self::html(&without).contains(SHIPPED_LIVE_URL));
    }

    fn html_of_policy(page: &ChatPage) -> String {
        let served = page.serve("/support/").unwrap();
        served.headers()["content-security-policy"].to_str().unwrap().to_owned()
    }

    /// Contract 27: "confirm my e-mail" talks to the guest pool from the
    /// page, so the policy lets the page reach that one origin, and the
    /// page knows the endpoint and the client; without them, neither.
    #[test]
    fn the_guest_sign_in_is_named_in_the_page_and_its_policy() {
        let with = page_with(
            Some("https://shop.example"),
            &[
                ("GUEST_SIGN_IN_URL", "https://cognito-idp.eu-west-1.amazonaws.com/"),
                ("GUEST_POOL_CLIENT_ID", "guestclient123"),
            ],
        );
        let served = with.serve("/support/").unwrap();
        let policy = served.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(
            policy.contains("connect-src 'self' https://cognito-idp.eu-west-1.amazonaws.com;"),
            "{policy}"
        );
        let html = html(&with);
        assert!(html.contains(
            r#"<meta name="refund-chat-guest-sign-in" content="https://cognito-idp.eu-west-1.amazonaws.com/">"#
        ));
        assert!(html.contains(r#"<meta name="refund-chat-guest-client-id" content="guestclient123">"#));
        let without = self::page(None).serve("/support/").unwrap();
        assert!(
            without.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("connect-src 'self';")
        );
    }
}
