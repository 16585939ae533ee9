//! Configuration, read from the environment once per container at start-up.
//!
//! A missing or malformed value stops the container with a message that names
//! the variable: a misconfigured function should fail its first cold start
//! loudly, not answer customers with 500s.

use std::time::Duration;

use crate::budget::BudgetLimits;
use crate::conversation::{Lifetime, Window};
use crate::handoff::screen::{
    DEFAULT_CONFIRM_PHRASES, DEFAULT_HANDOFF_PHRASES, DEFAULT_RISK_TERMS, Screen, YesPhrases,
};
use crate::help::{self, Article, HelpError, Placeholders};
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

/// How the function answers the Lambda runtime (contract 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// The runtime's streaming response mode, the prelude written once the
    /// turn has ended: what a REST API's STREAM integration takes.
    Streaming,
    /// One buffered response: an HTTP API, or a function URL in buffered mode.
    Buffered,
}
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
/// (the scope's exchange was already there, or the append failed): **4**.
pub const CONVERSATION_OPERATIONS_PER_REQUEST: u32 = 4;

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
    pub identity: IdentitySource,
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
    /// to (`SHIPPING_COUNTRIES`; none: the order's own country), how long a
    /// proposal waits for the yes, and what a yes is.
    pub address: AddressSettings,
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
    /// The routing call (contract 21): `ROUTER_MODEL`, `ROUTER_TIMEOUT_SECS`,
    /// `ROUTER_MIN_CONFIDENCE`, `AGENT_INTENTS`.
    pub router: RouterSettings,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is required but not set")]
    Missing(&'static str),
    #[error("{name} must be {expected}, got {value:?}")]
    Malformed {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
    /// An article of the help centre (contract 17) is not as it must be.
    #[error("HELP_ARTICLES_DIR: {0}")]
    Help(#[from] HelpError),
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
            identity: match vars.get("USER_IDENTITY").as_deref() {
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
            limits: Limits {
                auto_refund_limit: vars.cents("AUTO_REFUND_LIMIT_CENTS", DEFAULT_LIMITS.auto_refund_limit)?,
                order_window: vars.hours("ORDER_REFUND_WINDOW_HOURS", DEFAULT_LIMITS.order_window)?,
                user_daily_auto_limit: vars
                    .cents("USER_DAILY_AUTO_LIMIT_CENTS", DEFAULT_LIMITS.user_daily_auto_limit)?,
                refund_window: vars.days("REFUND_WINDOW_DAYS", DEFAULT_LIMITS.refund_window)?,
            },
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
            address: AddressSettings {
                shipping_countries: match vars.list("SHIPPING_COUNTRIES") {
                    None => None,
                    Some(codes) => {
                        let codes: Vec<String> = codes.iter().map(|code| code.to_ascii_uppercase()).collect();
                        if let Some(bad) = codes
                            .iter()
                            .find(|code| code.len() != 2 || !code.chars().all(|c| c.is_ascii_uppercase()))
                        {
                            return Err(ConfigError::Malformed {
                                name: "SHIPPING_COUNTRIES",
                                expected: "comma-separated two-letter country codes",
                                value: bad.clone(),
                            });
                        }
                        Some(codes)
                    }
                },
                confirm_within: match vars.count("ADDRESS_CONFIRM_MINUTES", 30)? {
                    0 => {
                        return Err(ConfigError::Malformed {
                            name: "ADDRESS_CONFIRM_MINUTES",
                            expected: "a whole number of minutes above 0",
                            value: "0".into(),
                        });
                    }
                    minutes => Duration::from_secs(minutes as u64 * 60),
                },
                yes: YesPhrases::new(
                    &vars
                        .list("CONFIRM_PHRASES")
                        .unwrap_or_else(|| own(DEFAULT_CONFIRM_PHRASES)),
                ),
            },
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
        // One number, two readers: the articles say what the rules read.
        let placeholders = Placeholders::of_limits(&config.limits);
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
    }
}

/// What `refund-chat-sweep` needs (contract 14): the ledger, and how long a
/// refund record may stay `executing` before its invocation is surely dead.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    pub ledger_table: String,
    pub ledger_timeout: Duration,
    /// `SWEEP_EXECUTING_AFTER_SECS`: the function's timeout by default.
    pub executing_after: Duration,
    /// Where the open handoffs are, for the queue's oldest wait (contract
    /// 24); none: the wait counts refunds alone.
    pub conversation_table: Option<String>,
}

impl SweepConfig {
    pub fn from_env() -> Result<SweepConfig, ConfigError> {
        SweepConfig::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<SweepConfig, ConfigError> {
        let vars = Vars(lookup);
        let config = SweepConfig {
            ledger_table: vars.required("LEDGER_TABLE")?,
            ledger_timeout: vars.secs("LEDGER_TIMEOUT_SECS", DEFAULT_LEDGER_TIMEOUT, false)?,
            executing_after: vars.secs("SWEEP_EXECUTING_AFTER_SECS", FUNCTION_TIMEOUT, false)?,
            conversation_table: vars.get("CONVERSATION_TABLE"),
        };
        // Sooner, and a refund still being paid would be called unknown.
        if config.executing_after < FUNCTION_TIMEOUT {
            return Err(ConfigError::Malformed {
                name: "SWEEP_EXECUTING_AFTER_SECS",
                expected: "at least the function's timeout (190 s)",
                value: vars.get("SWEEP_EXECUTING_AFTER_SECS").unwrap_or_default(),
            });
        }
        Ok(config)
    }
}

/// What `refund-chat-admin` needs (contracts 9 and 11): the ledger, the
/// conversations, payments, and rule 2's window (an approval counts for its
/// order from when it pays).
#[derive(Debug, Clone, PartialEq)]
pub struct StaffConfig {
    pub ledger_table: String,
    pub conversation_table: String,
    /// How long a person's note or reply keeps the conversation alive.
    pub conversation_ttl: Duration,
    pub ledger_timeout: Duration,
    pub payments_base_url: String,
    pub payments_timeout: Duration,
    /// An approval reads the order afresh before it pays (contract 16).
    pub orders_base_url: String,
    pub orders_timeout: Duration,
    pub limits: Limits,
}

impl StaffConfig {
    pub fn from_env() -> Result<StaffConfig, ConfigError> {
        StaffConfig::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<StaffConfig, ConfigError> {
        let vars = Vars(lookup);
        Ok(StaffConfig {
            ledger_table: vars.required("LEDGER_TABLE")?,
            conversation_table: vars.required("CONVERSATION_TABLE")?,
            conversation_ttl: vars.hours("CONVERSATION_TTL_HOURS", DEFAULT_CONVERSATION_TTL)?,
            ledger_timeout: vars.secs("LEDGER_TIMEOUT_SECS", DEFAULT_LEDGER_TIMEOUT, false)?,
            payments_base_url: vars.url("PAYMENTS_BASE_URL", None)?,
            payments_timeout: vars.secs("PAYMENTS_TIMEOUT_SECS", DEFAULT_PAYMENTS_TIMEOUT, false)?,
            orders_base_url: vars.url("ORDERS_BASE_URL", None)?,
            orders_timeout: vars.secs("ORDERS_TIMEOUT_SECS", DEFAULT_ORDERS_TIMEOUT, false)?,
            // The rules' settings, as the function reads them: rule 2's window
            // for approvals, the others for what a replayed task may pay.
            limits: Limits {
                auto_refund_limit: vars.cents("AUTO_REFUND_LIMIT_CENTS", DEFAULT_LIMITS.auto_refund_limit)?,
                order_window: vars.hours("ORDER_REFUND_WINDOW_HOURS", DEFAULT_LIMITS.order_window)?,
                user_daily_auto_limit: vars
                    .cents("USER_DAILY_AUTO_LIMIT_CENTS", DEFAULT_LIMITS.user_daily_auto_limit)?,
                refund_window: vars.days("REFUND_WINDOW_DAYS", DEFAULT_LIMITS.refund_window)?,
            },
        })
    }
}

/// Contract 26's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressSettings {
    /// Country codes an address may be changed to; `None`: the order's own.
    pub shipping_countries: Option<Vec<String>>,
    pub confirm_within: Duration,
    pub yes: YesPhrases,
}

impl Default for AddressSettings {
    fn default() -> Self {
        AddressSettings {
            shipping_countries: None,
            confirm_within: DEFAULT_ADDRESS_CONFIRM,
            yes: YesPhrases::default(),
        }
    }
}

pub const DEFAULT_ADDRESS_CONFIRM: Duration = Duration::from_secs(30 * 60);

/// Who the desk's person is (contract 24).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaffIdentity {
    /// The staff pool's Cognito authorizer: its verified claims. With an
    /// issuer, a token of any other pool is refused too (the authorizer
    /// already does; this is the function's own check). `audience` is the
    /// desk's app client (`STAFF_POOL_CLIENT_ID`, required): API Gateway's
    /// authorizer checks no audience, so a token of another client of the
    /// pool is refused here.
    Authorizer { issuer: Option<String>, audience: String },
    /// Local development and tests only: the person from request headers.
    /// A request that carries an authorizer's context is refused (500): the
    /// setting was deployed, and fails closed.
    Header,
}

/// The desk's settings (contracts 24 and 25), beside the decisions' own.
#[derive(Debug, Clone)]
pub struct DeskConfig {
    pub staff: StaffConfig,
    pub staff_group: String,
    pub approver_group: String,
    pub identity: StaffIdentity,
    pub trace_url_template: Option<String>,
    pub order_url_template: Option<String>,
    /// How long a click's answer is kept for its `Idempotency-Key`.
    pub idempotency_ttl: Duration,
    /// Where the page signs in: the Cognito identity provider's endpoint
    /// (`https://cognito-idp.REGION.amazonaws.com/`), and the app client.
    pub sign_in_url: Option<String>,
    pub client_id: Option<String>,
    pub response_mode: ResponseMode,
}

impl DeskConfig {
    pub fn from_env() -> Result<DeskConfig, ConfigError> {
        DeskConfig::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String> + Clone) -> Result<DeskConfig, ConfigError> {
        let staff = StaffConfig::from_lookup(lookup.clone())?;
        let vars = Vars(lookup);
        let template = |name: &'static str, placeholder: &'static str| -> Result<Option<String>, ConfigError> {
            match vars.get(name) {
                None => Ok(None),
                Some(value) if value.contains(placeholder) => parse_url(name, value).map(Some),
                Some(value) => Err(ConfigError::Malformed {
                    name,
                    expected: if placeholder == "{request_id}" {
                        "an http(s) URL with {request_id}"
                    } else {
                        "an http(s) URL with {order_id}"
                    },
                    value,
                }),
            }
        };
        Ok(DeskConfig {
            staff,
            staff_group: vars.get("STAFF_GROUP").unwrap_or_else(|| "support-staff".into()),
            approver_group: vars.get("APPROVER_GROUP").unwrap_or_else(|| "refund-approvers".into()),
            identity: match vars.get("STAFF_IDENTITY").as_deref() {
                None | Some("authorizer") => StaffIdentity::Authorizer {
                    issuer: vars.get("STAFF_POOL_ISSUER"),
                    audience: vars
                        .get("STAFF_POOL_CLIENT_ID")
                        .ok_or(ConfigError::Missing("STAFF_POOL_CLIENT_ID"))?,
                },
                Some("header") => StaffIdentity::Header,
                Some(other) => {
                    return Err(ConfigError::Malformed {
                        name: "STAFF_IDENTITY",
                        expected: "authorizer or header",
                        value: other.to_owned(),
                    });
                }
            },
            trace_url_template: template("TRACE_URL_TEMPLATE", "{request_id}")?,
            order_url_template: template("ORDER_URL_TEMPLATE", "{order_id}")?,
            idempotency_ttl: vars.hours("IDEMPOTENCY_TTL_HOURS", DEFAULT_IDEMPOTENCY_TTL)?,
            sign_in_url: vars
                .get("STAFF_SIGN_IN_URL")
                .map(|url| parse_url("STAFF_SIGN_IN_URL", url))
                .transpose()?,
            client_id: vars.get("STAFF_POOL_CLIENT_ID"),
            response_mode: vars.response_mode()?,
        })
    }
}

/// The function's timeout in `template.yaml` (`tests/template.rs` checks
/// that they agree): an `executing` record older than this has no
/// invocation left that could still record its outcome.
pub const FUNCTION_TIMEOUT: Duration = Duration::from_secs(190);

fn own(list: &[&str]) -> Vec<String> {
    list.iter().map(|item| (*item).to_owned()).collect()
}

/// Environment variables, read one rule at a time. Empty values count as unset.
struct Vars<F>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    /// `RESPONSE_MODE` (contract 20): streaming unless it says buffered.
    fn response_mode(&self) -> Result<ResponseMode, ConfigError> {
        match self.get("RESPONSE_MODE").as_deref() {
            None | Some("streaming") => Ok(ResponseMode::Streaming),
            Some("buffered") => Ok(ResponseMode::Buffered),
            Some(other) => Err(ConfigError::Malformed {
                name: "RESPONSE_MODE",
                expected: "streaming or buffered",
                value: other.to_owned(),
            }),
        }
    }

    fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.get(name).ok_or(ConfigError::Missing(name))
    }

    /// An http(s) URL; required when there is no default.
    fn url(&self, name: &'static str, default: Option<&str>) -> Result<String, ConfigError> {
        match (self.get(name), default) {
            (Some(value), _) => parse_url(name, value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(ConfigError::Missing(name)),
        }
    }

    fn secs(&self, name: &'static str, default: Duration, allow_zero: bool) -> Result<Duration, ConfigError> {
        self.get(name)
            .map_or(Ok(default), |value| parse_secs(name, value, allow_zero))
    }

    fn hours(&self, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            parse_multiple(name, value, 3600, "a number of hours above 0")
        })
    }

    fn days(&self, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            parse_multiple(name, value, 86_400, "a number of days above 0")
        })
    }

    /// A comma-separated list; unset: none given.
    fn list(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|value| {
            value
                .split(',')
                .map(|item| item.trim().to_owned())
                .filter(|item| !item.is_empty())
                .collect()
        })
    }

    /// A whole number, 0 or more.
    fn count(&self, name: &'static str, default: usize) -> Result<usize, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            value.parse().map_err(|_| ConfigError::Malformed {
                name,
                expected: "a whole number, 0 or more",
                value,
            })
        })
    }

    fn cents(&self, name: &'static str, default: AmountCents) -> Result<AmountCents, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            value.parse().map(AmountCents::new).map_err(|_| ConfigError::Malformed {
                name,
                expected: "a whole number of cents, 0 or more",
                value,
            })
        })
    }
}

fn parse_url(name: &'static str, value: String) -> Result<String, ConfigError> {
    match reqwest::Url::parse(&value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {
            Ok(value.trim_end_matches('/').to_owned())
        }
        _ => Err(ConfigError::Malformed {
            name,
            expected: "an http(s) URL",
            value,
        }),
    }
}

/// A number of hours or days (`unit_secs` each), decimals allowed.
fn parse_multiple(
    name: &'static str,
    value: String,
    unit_secs: u32,
    expected: &'static str,
) -> Result<Duration, ConfigError> {
    parse_secs(name, value.clone(), false)
        .ok()
        .and_then(|units| units.checked_mul(unit_secs))
        .ok_or(ConfigError::Malformed { name, expected, value })
}

fn parse_secs(name: &'static str, value: String, allow_zero: bool) -> Result<Duration, ConfigError> {
    let expected = if allow_zero {
        "a number of seconds, 0 or more"
    } else {
        "a number of seconds above 0"
    };
    match value
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
    {
        Some(duration) if allow_zero || !duration.is_zero() => Ok(duration),
        _ => Err(ConfigError::Malformed { name, expected, value }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

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
                + Duration::from_secs(2 * (7 + 4 + 2))
                + Duration::from_secs(5),
            "with the routing call's 5 s"
        );
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
        assert_eq!(config.identity, IdentitySource::Body);
    }

    #[test]
    fn the_help_articles_are_the_built_in_ones_or_the_directorys_and_a_bad_one_stops_the_container() {
        let defaults = config(&REQUIRED).unwrap();
        let ids: Vec<&str> = defaults.help_articles.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["damaged-items", "delivery", "refunds", "talking-to-a-person"]);
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
        ] {
            let mut vars = REQUIRED.to_vec();
            vars.push((name, value));
            let error = config(&vars).unwrap_err();
            assert!(error.to_string().starts_with(name), "{error}");
        }
    }
}
