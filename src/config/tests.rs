//! The customers' function's settings, read from a map as the environment would give them.

use std::collections::HashMap;

use super::*;
use crate::conversation::Window;
use crate::handoff::screen::Screen;
use crate::refund::money::AmountCents;
use crate::secrets::SECRET_READ_TIMEOUT;
use crate::turn;

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::from_lookup(|name| vars.get(name).cloned())
}

const REQUIRED: [(&str, &str); 5] = [
    ("OPENAI_API_KEY_SECRET_ID", "openai-key"),
    ("PAYMENTS_BASE_URL", "http://127.0.0.1:8081/"),
    ("ORDERS_BASE_URL", "http://127.0.0.1:8081/"),
    ("LEDGER_TABLE", "refund-ledger"),
    ("CONVERSATION_TABLE", "refund-chat-conversations"),
];

#[test]
fn defaults_are_the_contracts() {
    let config = config(&REQUIRED).unwrap();
    assert_eq!(config.openai_base_url, "https://api.openai.com/v1");
    assert_eq!(config.payments_base_url, "http://127.0.0.1:8081");
    assert_eq!(
        (config.openai_timeout, config.retry_backoff, config.payments_timeout),
        (Duration::from_secs(20), Duration::from_secs(2), Duration::from_secs(10))
    );
    assert_eq!(
        (
            config.ledger_table.as_str(),
            config.ledger_timeout,
            config.idempotency_ttl
        ),
        ("refund-ledger", Duration::from_secs(2), Duration::from_secs(24 * 3600))
    );
    assert_eq!(
        config.worst_case(),
        Duration::from_secs(112 + 6 * 2 * 3)
            + SECRET_READ_TIMEOUT
            + Duration::from_secs(2 * (7 + 5 + 2))
            + Duration::from_secs(5)
            + Duration::from_millis(500),
        "with the routing call's 5 s and the live pokes' 0.5 s"
    );
    assert_eq!(config.live.publish_timeout, Duration::from_millis(500));
    assert_eq!(config.live.fallback_poll_secs, 60);
    assert_eq!(config.live.events_url, None);
    assert_eq!(config.router.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(config.router.min_confidence, 0.7);
    assert_eq!(config.router.served, crate::router::Served::default());
    assert_eq!(config.conversation_ttl, Duration::from_secs(24 * 3600));
    assert_eq!(config.conversation_max_age, Duration::from_secs(168 * 3600));
    assert_eq!(config.orders_base_url, "http://127.0.0.1:8081");
    assert_eq!(
        (config.orders_timeout, config.limits.refund_window),
        (Duration::from_secs(3), Duration::from_secs(30 * 86_400))
    );
    assert_eq!(config.handoff_screen, Screen::default());
    assert_eq!(
        (config.budget.turns_per_hour, config.budget.tokens_per_day),
        (DEFAULT_BUDGET.turns_per_hour, DEFAULT_BUDGET.tokens_per_day)
    );
    assert_eq!(config.max_output_tokens, 1024);
    assert_eq!(
        config.budget.turn_reservation,
        turn::worst_case_tokens(1024, 24_000) + crate::router::call::worst_case_tokens(),
        "the turn's calls and its routing call"
    );
    assert_eq!(
        config.conversation_window,
        Window {
            max_exchanges: 10,
            max_chars: 24_000
        }
    );
}

#[test]
fn handoff_lists_are_comma_separated_and_replace_the_defaults() {
    let mut vars = REQUIRED.to_vec();
    vars.extend([
        ("HANDOFF_PHRASES", "ruf mich an, call me back ,"),
        ("RISK_TERMS", "bank"),
    ]);
    let screen = config(&vars).unwrap().handoff_screen;
    assert_eq!(screen, Screen::new(&["ruf mich an", "call me back"], &["bank"]));
}

#[test]
fn decimals_are_allowed() {
    let mut vars = REQUIRED.to_vec();
    vars.extend([
        ("OPENAI_TIMEOUT_SECS", "0.25"),
        ("RETRY_BACKOFF_SECS", "0"),
        ("PAYMENTS_TIMEOUT_SECS", "1.5"),
        ("LEDGER_TIMEOUT_SECS", "0.5"),
        ("IDEMPOTENCY_TTL_HOURS", "0.5"),
        ("ORDER_REFUND_WINDOW_HOURS", "1.5"),
        ("AUTO_REFUND_LIMIT_CENTS", "0"),
        ("USER_IDENTITY", "body"),
        ("ORDERS_TIMEOUT_SECS", "0.5"),
        ("REFUND_WINDOW_DAYS", "14.5"),
    ]);
    let config = config(&vars).unwrap();
    assert_eq!(config.openai_timeout, Duration::from_millis(250));
    assert_eq!(config.retry_backoff, Duration::ZERO);
    assert_eq!(config.payments_timeout, Duration::from_millis(1500));
    assert_eq!(config.ledger_timeout, Duration::from_millis(500));
    assert_eq!(config.idempotency_ttl, Duration::from_secs(1800));
    assert_eq!(config.limits.order_window, Duration::from_secs(5400));
    assert_eq!(config.limits.auto_refund_limit, AmountCents::ZERO);
    assert_eq!(config.orders_timeout, Duration::from_millis(500));
    assert_eq!(config.limits.refund_window, Duration::from_secs(14 * 86_400 + 43_200));
    assert_eq!(config.identity, IdentitySource::Body.into());
}

#[test]
fn the_help_articles_are_the_built_in_ones_or_the_directorys_and_a_bad_one_stops_the_container() {
    let defaults = config(&REQUIRED).unwrap();
    let ids: Vec<&str> = defaults.help_articles.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["damaged-items", "delivery", "refunds", "returns", "talking-to-a-person"]
    );
    let mut vars = REQUIRED.to_vec();
    vars.push(("REFUND_WINDOW_DAYS", "14"));
    let refunds = config(&vars)
        .unwrap()
        .help_articles
        .into_iter()
        .find(|a| a.id == "refunds")
        .unwrap();
    assert!(
        refunds.passages[0].contains("within 14 days"),
        "{}",
        refunds.passages[0]
    );

    let dir = std::env::temp_dir().join(format!("help-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("returns.md"),
        "---\nid: returns\ntitle: Returns\nversion: 2\nurl: https://x\n---\nWithin {{REFUND_WINDOW_DAYS}} days.\n",
    )
    .unwrap();
    let mut vars = REQUIRED.to_vec();
    let dir_text = dir.display().to_string();
    vars.push(("HELP_ARTICLES_DIR", dir_text.as_str()));
    let articles = config(&vars).unwrap().help_articles;
    assert_eq!((articles.len(), articles[0].version.as_str()), (1, "2"));
    std::fs::write(
        dir.join("typo.md"),
        "---\nid: typo\ntitle: T\nversion: 1\nurl: https://x\n---\n{{REFUND_DAYS}}\n",
    )
    .unwrap();
    let error = config(&vars).unwrap_err();
    assert!(matches!(error, ConfigError::Help(_)), "{error}");
    assert!(
        error.to_string().contains("typo.md") && error.to_string().contains("{{REFUND_DAYS}}"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_idempotency_ttl_shorter_than_one_request_stops_the_container() {
    let mut vars = REQUIRED.to_vec();
    // 36 s: a live request's record could expire under it and be replaced.
    vars.push(("IDEMPOTENCY_TTL_HOURS", "0.01"));
    let error = config(&vars).unwrap_err();
    assert!(
        matches!(
            error,
            ConfigError::Malformed {
                name: "IDEMPOTENCY_TTL_HOURS",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("at least"), "{error}");
}

#[test]
fn errors_name_the_variable() {
    for (i, name) in REQUIRED.iter().map(|(name, _)| *name).enumerate() {
        let mut vars = REQUIRED.to_vec();
        vars.remove(i);
        assert_eq!(config(&vars), Err(ConfigError::Missing(name)));
    }
    for (name, value) in [
        ("OPENAI_TIMEOUT_SECS", "soon"),
        ("OPENAI_TIMEOUT_SECS", "0"),
        ("PAYMENTS_TIMEOUT_SECS", "-1"),
        ("RETRY_BACKOFF_SECS", "NaN"),
        ("OPENAI_BASE_URL", "api.openai.com"),
        ("LEDGER_TIMEOUT_SECS", "0"),
        ("IDEMPOTENCY_TTL_HOURS", "-24"),
        ("USER_IDENTITY", "cookie"),
        ("AUTO_REFUND_LIMIT_CENTS", "50.00"),
        ("USER_DAILY_AUTO_LIMIT_CENTS", "-1"),
        ("ORDER_REFUND_WINDOW_HOURS", "0"),
        ("CONVERSATION_TTL_HOURS", "0"),
        ("CONVERSATION_MAX_EXCHANGES", "-1"),
        ("CONVERSATION_MAX_CHARS", "many"),
        ("CUSTOMER_TURNS_PER_HOUR", "lots"),
        ("CUSTOMER_TOKENS_PER_DAY", "-5"),
        ("OPENAI_MAX_OUTPUT_TOKENS", "0"),
        ("ORDERS_BASE_URL", "orders.internal"),
        ("ORDERS_TIMEOUT_SECS", "0"),
        ("ROUTER_TIMEOUT_SECS", "0"),
        ("ROUTER_MIN_CONFIDENCE", "1.5"),
        ("ROUTER_MIN_CONFIDENCE", "sure"),
        ("AGENT_INTENTS", "refund,refunds"),
        ("AGENT_INTENTS", ","),
        ("STREAM_KEEPALIVE_SECS", "20"),
        ("REFUND_WINDOW_DAYS", "0"),
        ("REFUND_WINDOW_DAYS", "thirty"),
        ("GUEST_POOL_ISSUER", "cognito-idp.eu-west-1.amazonaws.com/pool"),
        ("GUEST_INTENTS", "refund,refunds"),
        ("OFFICE_HOURS", "Mon-Fri 09:00-18:00"),
        ("OFFICE_HOURS", r#"{"tz": "Europe/Atlantis"}"#),
        (
            "OFFICE_HOURS",
            r#"{"tz": "UTC", "week": {"mon": ["09:00-18:00", "17:00-19:00"]}}"#,
        ),
        ("REPLY_TIME_MINUTES", "0"),
        ("REPLY_DUE_MINUTES", "soon"),
        ("REPLY_DUE_MINUTES", "10081"),
    ] {
        let mut vars = REQUIRED.to_vec();
        vars.push((name, value));
        let error = config(&vars).unwrap_err();
        assert!(error.to_string().starts_with(name), "{error}");
    }
}

/// Contract 35: always open, 30 minutes said, 60 office minutes due; a
/// schedule read with its zone.
#[test]
fn office_hours_and_reply_times() {
    let office = config(&REQUIRED).unwrap().office;
    assert_eq!(office, crate::office_hours::expected::Office::default());
    assert_eq!(
        (office.schedule, office.reply_time_minutes, office.reply_due_minutes),
        (None, 30, 60)
    );
    let mut vars = REQUIRED.to_vec();
    vars.extend([
        (
            "OFFICE_HOURS",
            r#"{"tz": "Europe/Paris", "week": {"fri": ["22:00-02:00"]}}"#,
        ),
        ("REPLY_TIME_MINUTES", "12"),
        ("REPLY_DUE_MINUTES", "240"),
    ]);
    let office = config(&vars).unwrap().office;
    assert_eq!(
        office
            .schedule
            .as_ref()
            .and_then(|s| s.zone().iana_name().map(str::to_owned)),
        Some("Europe/Paris".to_owned())
    );
    assert_eq!((office.reply_time_minutes, office.reply_due_minutes), (12, 240));
}

/// Contract 29: a guest is served `GUEST_INTENTS` within `AGENT_INTENTS`,
/// by default the four of the contract's table.
#[test]
fn guest_intents_are_read_within_the_agents() {
    use crate::router::Intent;
    let served = config(&REQUIRED).unwrap().guest_intents;
    for intent in [
        Intent::OrderStatus,
        Intent::Refund,
        Intent::PolicyQuestion,
        Intent::Other,
    ] {
        assert!(served.contains(intent), "{intent:?}");
    }
    assert!(!served.contains(Intent::AddressChange));
    let mut vars = REQUIRED.to_vec();
    vars.extend([
        ("AGENT_INTENTS", "refund,other"),
        ("GUEST_INTENTS", "refund,order_status,address_change"),
    ]);
    let within = config(&vars).unwrap().guest_intents;
    assert!(within.contains(Intent::Refund));
    assert!(!within.contains(Intent::OrderStatus) && !within.contains(Intent::AddressChange));
}

/// Where the page signs a guest in: the URL offers it and needs the
/// client; the client alone is the tokens' audience and offers nothing.
#[test]
fn the_guest_sign_in_is_offered_by_its_url_with_the_client() {
    let mut vars = REQUIRED.to_vec();
    vars.push(("GUEST_SIGN_IN_URL", "https://cognito-idp.eu-west-1.amazonaws.com/"));
    let error = config(&vars).unwrap_err();
    assert!(error.to_string().starts_with("GUEST_POOL_CLIENT_ID"), "{error}");
    let mut vars = REQUIRED.to_vec();
    vars.push(("GUEST_POOL_CLIENT_ID", "client"));
    let audience_only = config(&vars).unwrap();
    assert_eq!(audience_only.guest_sign_in, None, "no sign-in offered");
    assert_eq!(audience_only.identity.guest_audience.as_deref(), Some("client"));
    assert_eq!(config(&REQUIRED).unwrap().guest_sign_in, None);
}

/// Section 8's rule 3: a guest's day is their e-mail's keyed hash, so
/// guests without the stack's key would be counted by a renewable `sub`:
/// the container stops instead.
#[test]
fn guests_need_the_key_their_day_is_counted_under() {
    let issuer = ("GUEST_POOL_ISSUER", "https://cognito-idp.eu-west-1.amazonaws.com/pool");
    let mut vars = REQUIRED.to_vec();
    vars.push(issuer);
    assert_eq!(config(&vars), Err(ConfigError::Missing("VISITOR_ADDRESS_KEY")));
    vars.push(("VISITOR_ADDRESS_KEY", "a-key-of-at-least-32-characters-long"));
    vars.push(("VISITORS", "off"));
    let config = config(&vars).unwrap();
    assert!(config.identity.guest_key.is_some());
    assert_eq!(config.visitors, None, "the key serves guests while visitors are off");
}

#[test]
fn a_returns_settings_and_every_writes_wait_are_read_with_the_old_name_kept() {
    let defaults = with(&[]).unwrap();
    assert_eq!(defaults.returns.window_days, 30);
    assert!(defaults.returns.label_origins.is_empty());
    assert_eq!(defaults.confirm.within, Duration::from_secs(30 * 60));
    // CONFIRM_MINUTES first, ADDRESS_CONFIRM_MINUTES as its old name.
    let old = with(&[("ADDRESS_CONFIRM_MINUTES", "10")]).unwrap();
    assert_eq!(old.confirm.within, Duration::from_secs(600));
    let both = with(&[("ADDRESS_CONFIRM_MINUTES", "10"), ("CONFIRM_MINUTES", "5")]).unwrap();
    assert_eq!(both.confirm.within, Duration::from_secs(300));
    assert!(with(&[("CONFIRM_MINUTES", "0")]).is_err());
    // The article and the check read one number.
    let fourteen = with(&[("RETURN_WINDOW_DAYS", "14")]).unwrap();
    assert_eq!(fourteen.returns.window_days, 14);
    let article = fourteen.help_articles.iter().find(|a| a.id == "returns").unwrap();
    assert!(article.passages[0].contains("within 14 days"), "{:?}", article.passages);
    for bad in ["0", "366", "two"] {
        assert!(with(&[("RETURN_WINDOW_DAYS", bad)]).is_err(), "{bad}");
    }
    let origins = with(&[(
        "RETURN_LABEL_ORIGINS",
        "https://labels.carrier.example/, http://127.0.0.1:8082",
    )])
    .unwrap();
    assert_eq!(
        origins.returns.label_origins,
        ["https://labels.carrier.example", "http://127.0.0.1:8082"]
    );
    for bad in [
        "https://labels.example/path",
        "labels.example",
        "ftp://labels.example",
        "https://u@labels.example",
    ] {
        let error = with(&[("RETURN_LABEL_ORIGINS", bad)]).unwrap_err().to_string();
        assert!(error.contains("RETURN_LABEL_ORIGINS"), "{bad}: {error}");
    }
}

/// The required settings, and `more`.
fn with(more: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
    let all: Vec<(&str, &str)> = REQUIRED.iter().chain(more).copied().collect();
    config(&all)
}

/// Contracts 27 and 29: the guests' shared day, and the customers' pool's
/// clients whose ID tokens are a customer's.
#[test]
fn the_guests_day_and_the_customers_clients() {
    let defaults = config(&REQUIRED).unwrap();
    assert_eq!(defaults.guest_tokens_per_day, 2_000_000);
    assert_eq!(defaults.identity.customer_audiences, None, "any client of the pool");
    let set = with(&[
        ("GUEST_TOKENS_PER_DAY", "750"),
        ("CUSTOMER_POOL_CLIENT_IDS", "shop-web, shop-app"),
    ])
    .unwrap();
    assert_eq!(set.guest_tokens_per_day, 750);
    assert_eq!(
        set.identity.customer_audiences,
        Some(vec!["shop-web".to_owned(), "shop-app".to_owned()])
    );
    let none_listed = with(&[("CUSTOMER_POOL_CLIENT_IDS", " , ")]).unwrap_err();
    assert!(
        none_listed.to_string().starts_with("CUSTOMER_POOL_CLIENT_IDS"),
        "{none_listed}"
    );
}
