//! The customers' function's settings (`refund-chat`).

use std::time::Duration;

use super::address::AddressSettings;
use super::confirm::ConfirmSettings;
use super::returns::ReturnSettings;
use super::vars::{Vars, own, parse_url};
use super::visitors::VisitorSettings;
use super::{ConfigError, FUNCTION_TIMEOUT, ResponseMode};
use crate::budget::BudgetLimits;
use crate::conversation::{Lifetime, Window};
use crate::handoff::screen::{DEFAULT_HANDOFF_PHRASES, DEFAULT_RISK_TERMS, Screen};
use crate::help::{self, Article, Placeholders};
use crate::refund::money::AmountCents;
use crate::refund::policy::Limits;
use crate::router::Served;
use crate::router::call::RouterSettings;
use crate::secrets::SECRET_READ_TIMEOUT;
use crate::turn;

pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_OPENAI_TIMEOUT: Duration = Duration::from_secs(20);
/// A rotated key reaches every container within five minutes.
pub const DEFAULT_OPENAI_KEY_CACHE: Duration = Duration::from_secs(300);
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(2);
pub const DEFAULT_PAYMENTS_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_LEDGER_TIMEOUT: Duration = Duration::from_secs(2);
pub const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_USER_ID_CLAIM: &str = "sub";
pub const DEFAULT_BUDGET: BudgetLimits = BudgetLimits {
    turns_per_hour: 30,
    tokens_per_day: 200_000,
    // Set from the model's output limit and the window (`turn::worst_case_tokens`).
    turn_reservation: 0,
};
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 1024;
pub const DEFAULT_CONVERSATION_TTL: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_CONVERSATION_MAX_AGE: Duration = Duration::from_secs(168 * 3600);
pub const DEFAULT_CONVERSATION_WINDOW: Window = Window {
    max_exchanges: 10,
    max_chars: 24_000,
};
pub const DEFAULT_LIMITS: Limits = Limits {
    auto_refund_limit: AmountCents::new(5000),
    order_window: Duration::from_secs(24 * 3600),
    user_daily_auto_limit: AmountCents::new(10000),
    refund_window: Duration::from_secs(30 * 86_400),
};
pub const DEFAULT_ORDERS_TIMEOUT: Duration = Duration::from_secs(3);

/// Ledger operations one request can make at most, each bounded by
/// `LEDGER_TIMEOUT_SECS`, counted per path from the code (and by
/// `tests/api/ledger.rs` on the longest one):
///
/// | path | operations |
/// | --- | --- |
/// | above the limit, the approval write fails, the turn then fails, the append fails | claim, take over, 2 history reads, the approval write, an existence read, the release on its own: **7** |
/// | automatic, rejected by payments after TTL removed both guards | claim, take over, the record, the outcome tried 3 times (each try drops a release whose guard is gone), store: 7 |
/// | automatic, refused by rules 2 or 3 | claim, take over, the record, the approval write, store: 5 |
/// | automatic, paid | claim, take over, the record, the outcome, store: 5 |
///
/// Without a key the first two and the last do not happen. On the hot
/// path the claim carries the budget's turn and the append carries the
/// store or release (and the tokens), so a paid keyed turn makes 4 or 5
/// operations in all; these bounds count the paths where nothing merges.
pub const LEDGER_OPERATIONS_PER_REQUEST: u32 = 7;

/// Conversation operations one request can make at most, on the same bound
/// (a transaction sent again after a `TransactionConflict` stays inside its
/// operation's bound): the lease, the window's read, the append (one
/// transaction), then the lease given back when the append wrote nothing
/// (the scope's exchange was already there, or the append failed), and the
/// recent first replies' read of a turn that hands off (contract 32): **5**.
pub const CONVERSATION_OPERATIONS_PER_REQUEST: u32 = 5;

/// Budget operations one request can make at most, on the same bound: the
/// turn taken (after a takeover), then its reservation settled on its own
/// (the append wrote nothing), or the turn given back (the conversation
/// refused it; then no settlement); or a claim with its turn that failed,
/// then abandoned (the request ends there): **2**.
pub const BUDGET_OPERATIONS_PER_REQUEST: u32 = 2;

/// Where the customer's identity comes from (contract 7): configuration,
/// read by the HTTP edge ([`crate::http::identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentitySource {
    Authorizer {
        claim: String,
    },
    /// Local development only: the body's `user_id` is trusted.
    Body,
}

/// Who a request is from (contracts 7 and 27): where the identity comes
/// from, and the guest pool's issuer, whose tokens are guests'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub source: IdentitySource,
    /// `GUEST_POOL_ISSUER`; none: no guests.
    pub guest_issuer: Option<String>,
    /// `GUEST_POOL_CLIENT_ID`: a guest's token must be this client's (its
    /// `aud`), which API Gateway's authorizer does not check; none: any.
    pub guest_audience: Option<String>,
    /// `VISITOR_ADDRESS_KEY`, which a guest's day is counted under (section
    /// 8's rule 3): required with `GUEST_POOL_ISSUER`.
    pub guest_key: Option<crate::keyed_hash::AddressKey>,
    /// `CUSTOMER_POOL_CLIENT_IDS`: a customer's token must be an ID token of
    /// one of these app clients (its `aud`), which API Gateway's authorizer
    /// does not check; none: any client of the customers' pool.
    pub customer_audiences: Option<Vec<String>>,
}

impl From<IdentitySource> for Identity {
    fn from(source: IdentitySource) -> Identity {
        Identity {
            source,
            guest_issuer: None,
            guest_audience: None,
            guest_key: None,
            customer_audiences: None,
        }
    }
}

/// Contract 22's defaults for the routing call.
pub const DEFAULT_ROUTER_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_ROUTER_MIN_CONFIDENCE: f64 = 0.7;

/// Contract 20: a comment at least every 15 s while an event stream has nothing else to send.
pub const MAX_STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub openai_key_secret_id: String,
    pub openai_base_url: String,
    pub payments_base_url: String,
    /// The shop's order system (contract 16).
    pub orders_base_url: String,
    /// Per try of an order read.
    pub orders_timeout: Duration,
    pub openai_timeout: Duration,
    /// How long the OpenAI key is used before it is read again (a rotation
    /// reaches every container within it); 0: read for every turn.
    pub openai_key_cache: Duration,
    /// How the function answers Lambda: `streaming` (contract 20) or
    /// `buffered` (an HTTP API or a function URL in buffered mode).
    pub response_mode: ResponseMode,
    /// Not in the contract's table: the longest an event stream stays silent
    /// before a `: keep-alive` comment (`STREAM_KEEPALIVE_SECS`, at most the
    /// contract's 15 s; shorter in tests).
    pub stream_keep_alive: Duration,
    pub retry_backoff: Duration,
    pub payments_timeout: Duration,
    pub ledger_table: String,
    pub ledger_timeout: Duration,
    pub idempotency_ttl: Duration,
    pub identity: Identity,
    pub limits: Limits,
    /// Where conversations live (a table of their own).
    pub conversation_table: String,
    pub conversation_ttl: Duration,
    /// How long a conversation lives at most, from its first exchange.
    pub conversation_max_age: Duration,
    pub conversation_window: Window,
    /// What hands a message to a person before the model (`HANDOFF_PHRASES`, `RISK_TERMS`).
    pub handoff_screen: Screen,
    /// A change of address (contract 26): where an address may be changed
    /// to (`SHIPPING_COUNTRIES`; none: the order's own country).
    pub address: AddressSettings,
    /// A return (contract 28): its window and where its label may link.
    pub returns: ReturnSettings,
    /// Every write's wait for the yes (`CONFIRM_MINUTES`), and what a yes is.
    pub confirm: ConfirmSettings,
    /// `CUSTOMER_TURNS_PER_HOUR`, `CUSTOMER_TOKENS_PER_DAY`.
    pub budget: BudgetLimits,
    /// `max_completion_tokens` of every completion call.
    pub max_output_tokens: u32,
    /// The help centre's articles (`HELP_ARTICLES_DIR`, else the built-in
    /// ones), checked and their placeholders filled from `limits`.
    pub help_articles: Vec<Article>,
    /// Not in the contract's table: the chat widget's origin, sent as
    /// `access-control-allow-origin` (a proxy integration's responses get no
    /// CORS headers from API Gateway). Unset: no CORS header.
    pub cors_allow_origin: Option<String>,
    /// Visitors (contract 27): `VISITORS`, `VISITOR_ADDRESS_KEY` and their
    /// budget; none: the visitors' routes are 404.
    pub visitors: Option<VisitorSettings>,
    /// The routing call (contract 21): `ROUTER_MODEL`, `ROUTER_TIMEOUT_SECS`,
    /// `ROUTER_MIN_CONFIDENCE`, `AGENT_INTENTS`.
    pub router: RouterSettings,
    /// What a guest is served (contract 27): `GUEST_INTENTS` within `AGENT_INTENTS`.
    pub guest_intents: Served,
    /// `GUEST_TOKENS_PER_DAY`: all guests' tokens together per UTC day.
    pub guest_tokens_per_day: u64,
    /// Where the page signs guests in; none: the page offers no sign-in.
    pub guest_sign_in: Option<super::GuestSignIn>,
    /// Live pokes (contract 31): where they are published, and the pages' poll beside them.
    pub live: super::LiveSettings,
    /// The team's hours and reply times (contract 32).
    pub office: crate::office_hours::expected::Office,
}

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup`, so tests need not touch the
    /// process environment. Empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let vars = Vars(lookup);
        let mut config = Config {
            openai_key_secret_id: vars.required("OPENAI_API_KEY_SECRET_ID")?,
            openai_base_url: vars.url("OPENAI_BASE_URL", Some(DEFAULT_OPENAI_BASE_URL))?,
            payments_base_url: vars.url("PAYMENTS_BASE_URL", None)?,
            orders_base_url: vars.url("ORDERS_BASE_URL", None)?,
            orders_timeout: vars.secs("ORDERS_TIMEOUT_SECS", DEFAULT_ORDERS_TIMEOUT, false)?,
            openai_timeout: vars.secs("OPENAI_TIMEOUT_SECS", DEFAULT_OPENAI_TIMEOUT, false)?,
            openai_key_cache: vars.secs("OPENAI_KEY_CACHE_SECS", DEFAULT_OPENAI_KEY_CACHE, true)?,
            response_mode: vars.response_mode()?,
            stream_keep_alive: match vars.secs("STREAM_KEEPALIVE_SECS", MAX_STREAM_KEEP_ALIVE, false)? {
                longer if longer > MAX_STREAM_KEEP_ALIVE => {
                    return Err(ConfigError::Malformed {
                        name: "STREAM_KEEPALIVE_SECS",
                        expected: "at most 15 seconds",
                        value: format!("{}", longer.as_secs_f64()),
                    });
                }
                every => every,
            },
            retry_backoff: vars.secs("RETRY_BACKOFF_SECS", DEFAULT_RETRY_BACKOFF, true)?,
            payments_timeout: vars.secs("PAYMENTS_TIMEOUT_SECS", DEFAULT_PAYMENTS_TIMEOUT, false)?,
            ledger_table: vars.required("LEDGER_TABLE")?,
            ledger_timeout: vars.secs("LEDGER_TIMEOUT_SECS", DEFAULT_LEDGER_TIMEOUT, false)?,
            idempotency_ttl: vars.hours("IDEMPOTENCY_TTL_HOURS", DEFAULT_IDEMPOTENCY_TTL)?,
            identity: Identity {
                source: match vars.get("USER_IDENTITY").as_deref() {
                    None | Some("authorizer") => IdentitySource::Authorizer {
                        claim: vars
                            .get("USER_ID_CLAIM")
                            .unwrap_or_else(|| DEFAULT_USER_ID_CLAIM.to_owned()),
                    },
                    Some("body") => IdentitySource::Body,
                    Some(other) => {
                        return Err(ConfigError::Malformed {
                            name: "USER_IDENTITY",
                            expected: "authorizer or body",
                            value: other.to_owned(),
                        });
                    }
                },
                guest_issuer: super::guests::issuer(&vars)?,
                guest_audience: vars.get("GUEST_POOL_CLIENT_ID"),
                guest_key: super::guests::day_key(&vars)?,
                customer_audiences: match vars.list("CUSTOMER_POOL_CLIENT_IDS") {
                    Some(clients) if clients.is_empty() => {
                        return Err(ConfigError::Malformed {
                            name: "CUSTOMER_POOL_CLIENT_IDS",
                            expected: "comma-separated app client ids, at least one",
                            value: vars.get("CUSTOMER_POOL_CLIENT_IDS").unwrap_or_default(),
                        });
                    }
                    clients => clients,
                },
            },
            limits: vars.limits(DEFAULT_LIMITS)?,
            conversation_table: vars.required("CONVERSATION_TABLE")?,
            conversation_ttl: vars.hours("CONVERSATION_TTL_HOURS", DEFAULT_CONVERSATION_TTL)?,
            conversation_max_age: vars.hours("CONVERSATION_MAX_AGE_HOURS", DEFAULT_CONVERSATION_MAX_AGE)?,
            conversation_window: Window {
                max_exchanges: vars.count("CONVERSATION_MAX_EXCHANGES", DEFAULT_CONVERSATION_WINDOW.max_exchanges)?,
                max_chars: vars.count("CONVERSATION_MAX_CHARS", DEFAULT_CONVERSATION_WINDOW.max_chars)?,
            },
            handoff_screen: Screen::new(
                &vars
                    .list("HANDOFF_PHRASES")
                    .unwrap_or_else(|| own(DEFAULT_HANDOFF_PHRASES)),
                &vars.list("RISK_TERMS").unwrap_or_else(|| own(DEFAULT_RISK_TERMS)),
            ),
            address: AddressSettings::read(&vars)?,
            returns: ReturnSettings::read(&vars)?,
            confirm: ConfirmSettings::read(&vars)?,
            budget: BudgetLimits {
                turns_per_hour: vars.count("CUSTOMER_TURNS_PER_HOUR", DEFAULT_BUDGET.turns_per_hour as usize)? as u64,
                tokens_per_day: vars.count("CUSTOMER_TOKENS_PER_DAY", DEFAULT_BUDGET.tokens_per_day as usize)? as u64,
                turn_reservation: 0,
            },
            max_output_tokens: match vars.count("OPENAI_MAX_OUTPUT_TOKENS", DEFAULT_MAX_OUTPUT_TOKENS as usize)? {
                0 => {
                    return Err(ConfigError::Malformed {
                        name: "OPENAI_MAX_OUTPUT_TOKENS",
                        expected: "a whole number above 0",
                        value: "0".into(),
                    });
                }
                tokens => u32::try_from(tokens).map_err(|_| ConfigError::Malformed {
                    name: "OPENAI_MAX_OUTPUT_TOKENS",
                    expected: "a whole number of tokens",
                    value: tokens.to_string(),
                })?,
            },
            cors_allow_origin: vars
                .get("CORS_ALLOW_ORIGIN")
                .map(|origin| parse_url("CORS_ALLOW_ORIGIN", origin))
                .transpose()?,
            help_articles: Vec::new(),
            guest_intents: Served::default(),
            guest_tokens_per_day: vars.count("GUEST_TOKENS_PER_DAY", super::guests::DEFAULT_GUEST_TOKENS_PER_DAY as usize)?
                as u64,
            guest_sign_in: super::guests::sign_in(&vars)?,
            visitors: VisitorSettings::read(&vars)?,
            live: super::LiveSettings::read(&vars)?,
            office: super::office::read(&vars)?,
            router: RouterSettings {
                model: vars.get("ROUTER_MODEL").unwrap_or_else(|| crate::chat::openai::MODEL.to_owned()),
                timeout: vars.secs("ROUTER_TIMEOUT_SECS", DEFAULT_ROUTER_TIMEOUT, false)?,
                min_confidence: match vars.get("ROUTER_MIN_CONFIDENCE") {
                    None => DEFAULT_ROUTER_MIN_CONFIDENCE,
                    Some(text) => text
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|c| (0.0..=1.0).contains(c))
                        .ok_or(ConfigError::Malformed {
                            name: "ROUTER_MIN_CONFIDENCE",
                            expected: "a number from 0 to 1",
                            value: text,
                        })?,
                },
                served: match vars.get("AGENT_INTENTS") {
                    None => Served::default(),
                    Some(names) => Served::parse(&names).map_err(|_| ConfigError::Malformed {
                        name: "AGENT_INTENTS",
                        expected: "comma-separated intents (order_status, refund, return, address_change, account_access, policy_question, other), at least one",
                        value: names,
                    })?,
                },
            },
        };
        config.guest_intents = super::guests::intents(&vars, &config.router.served)?;
        // One number, two readers: the articles say what the rules read.
        let placeholders = Placeholders::of_limits(&config.limits).with_return_window(config.returns.window_days);
        config.help_articles = match vars.get("HELP_ARTICLES_DIR") {
            Some(dir) => help::load(std::path::Path::new(&dir), &placeholders)?,
            None => help::built_in(&placeholders)?,
        };
        if config.conversation_max_age < config.conversation_ttl {
            return Err(ConfigError::Malformed {
                name: "CONVERSATION_MAX_AGE_HOURS",
                expected: "at least CONVERSATION_TTL_HOURS",
                value: vars.get("CONVERSATION_MAX_AGE_HOURS").unwrap_or_default(),
            });
        }
        // The turn's calls and its routing call (contract 21).
        config.budget.turn_reservation =
            turn::worst_case_tokens(config.max_output_tokens, config.conversation_window.max_chars)
                + crate::router::call::worst_case_tokens();
        // A request record must outlive its lease: one that expired under a
        // live request could be replaced by a retry, which would run the turn
        // beside it (contract 6.3).
        let longest_request = config.worst_case().max(FUNCTION_TIMEOUT);
        if config.idempotency_ttl < longest_request {
            return Err(ConfigError::Malformed {
                name: "IDEMPOTENCY_TTL_HOURS",
                expected: "at least the longest a request can take (the function's timeout)",
                value: vars.get("IDEMPOTENCY_TTL_HOURS").unwrap_or_default(),
            });
        }
        Ok(config)
    }

    /// How long a conversation lives.
    pub fn conversation_lifetime(&self) -> Lifetime {
        Lifetime {
            ttl: self.conversation_ttl,
            max_age: self.conversation_max_age,
        }
    }

    /// The longest one request can take with these settings, the first
    /// request's secret read and every ledger operation included.
    pub fn worst_case(&self) -> Duration {
        turn::worst_case_duration(
            self.openai_timeout,
            self.retry_backoff,
            self.payments_timeout,
            self.orders_timeout,
        ) + SECRET_READ_TIMEOUT
            // The routing call, before the agent (contract 21).
            + self.router.timeout
            + self.ledger_timeout
                * (LEDGER_OPERATIONS_PER_REQUEST + CONVERSATION_OPERATIONS_PER_REQUEST + BUDGET_OPERATIONS_PER_REQUEST)
            // The live pokes after the writes (contract 31), under one timeout.
            + self.live.publish_timeout
    }
}
