//! Live pushes' settings (contracts 31 and 35), read alike by the
//! customers' function and the desk's: `LIVE_EVENTS_URL`,
//! `LIVE_PUBLISH_TIMEOUT_MS`, `LIVE_FALLBACK_POLL_SECS`.

use std::time::Duration;

use super::ConfigError;
use super::vars::{Vars, parse_url};

pub const DEFAULT_LIVE_PUBLISH_TIMEOUT: Duration = Duration::from_millis(500);
pub const DEFAULT_LIVE_FALLBACK_POLL_SECS: u32 = 60;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSettings {
    /// The Event API's HTTP publish endpoint (`https://.../event`); none:
    /// nothing is published and the pages poll as before.
    pub events_url: Option<String>,
    /// One publish's timeout.
    pub publish_timeout: Duration,
    /// The pages' poll while their socket is up, in seconds.
    pub fallback_poll_secs: u32,
    /// The Event API's realtime endpoint (`wss://.../event/realtime`) the
    /// pages subscribe at, and its HTTP domain they name in the socket's
    /// authorization (`LIVE_REALTIME_URL`); none: the pages only poll.
    pub realtime_url: Option<String>,
}

impl Default for LiveSettings {
    fn default() -> Self {
        LiveSettings {
            events_url: None,
            publish_timeout: DEFAULT_LIVE_PUBLISH_TIMEOUT,
            fallback_poll_secs: DEFAULT_LIVE_FALLBACK_POLL_SECS,
            realtime_url: None,
        }
    }
}

impl LiveSettings {
    pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<LiveSettings, ConfigError> {
        let publish_timeout = match vars.count("LIVE_PUBLISH_TIMEOUT_MS", 500)? {
            // At most 3 s: a turn's worst case and the publish after it stay under the function's Timeout.
            ms @ 1..=3_000 => Duration::from_millis(ms as u64),
            other => {
                return Err(ConfigError::Malformed {
                    name: "LIVE_PUBLISH_TIMEOUT_MS",
                    expected: "a whole number of milliseconds from 1 to 3000",
                    value: other.to_string(),
                });
            }
        };
        let fallback_poll_secs =
            match vars.count("LIVE_FALLBACK_POLL_SECS", DEFAULT_LIVE_FALLBACK_POLL_SECS as usize)? {
                secs @ 1..=86_400 => secs as u32,
                other => {
                    return Err(ConfigError::Malformed {
                        name: "LIVE_FALLBACK_POLL_SECS",
                        expected: "a whole number of seconds from 1 to 86400",
                        value: other.to_string(),
                    });
                }
            };
        let realtime_url = match vars.get("LIVE_REALTIME_URL") {
            None => None,
            Some(url) if url.starts_with("wss://") || url.starts_with("ws://") => Some(url),
            Some(url) => {
                return Err(ConfigError::Malformed {
                    name: "LIVE_REALTIME_URL",
                    expected: "a ws(s):// URL",
                    value: url,
                });
            }
        };
        Ok(LiveSettings {
            events_url: vars
                .get("LIVE_EVENTS_URL")
                .map(|url| parse_url("LIVE_EVENTS_URL", url))
                .transpose()?,
            publish_timeout,
            fallback_poll_secs,
            realtime_url,
        })
    }
}

/// What AppSync Events' Lambda authorizer (`refund-chat-live`, contract 31)
/// reads: the conversations (whose channel a caller may hear) and the pools
/// whose tokens it takes, each with the rule the routes apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenConfig {
    pub conversation_table: String,
    pub ledger_table: String,
    pub ledger_timeout: Duration,
    /// `USER_ID_CLAIM`: the claim a customer's user id is.
    pub user_id_claim: String,
    /// `CUSTOMER_POOL_ISSUER` and `CUSTOMER_POOL_CLIENT_IDS`; none: no customer listens.
    pub customer_issuer: Option<String>,
    pub customer_audiences: Option<Vec<String>>,
    /// `GUEST_POOL_ISSUER` and `GUEST_POOL_CLIENT_ID`.
    pub guest_issuer: Option<String>,
    pub guest_audience: Option<String>,
    /// `STAFF_POOL_ISSUER`, `STAFF_POOL_CLIENT_ID`, `STAFF_GROUP`.
    pub staff_issuer: Option<String>,
    pub staff_audience: Option<String>,
    pub staff_group: String,
    /// Visitors' tokens are taken (`VISITORS=on`, or unset with `VISITOR_ADDRESS_KEY`, as the function serves them).
    pub visitors: bool,
}

impl ListenConfig {
    pub fn from_env() -> Result<ListenConfig, ConfigError> {
        ListenConfig::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<ListenConfig, ConfigError> {
        let vars = Vars(lookup);
        let staff_audience = vars.get("STAFF_POOL_CLIENT_ID");
        let staff_issuer = vars.get("STAFF_POOL_ISSUER");
        if staff_issuer.is_some() && staff_audience.is_none() {
            return Err(ConfigError::Missing("STAFF_POOL_CLIENT_ID"));
        }
        Ok(ListenConfig {
            conversation_table: vars.required("CONVERSATION_TABLE")?,
            ledger_table: vars.required("LEDGER_TABLE")?,
            ledger_timeout: vars.secs("LEDGER_TIMEOUT_SECS", super::DEFAULT_LEDGER_TIMEOUT, false)?,
            user_id_claim: vars
                .get("USER_ID_CLAIM")
                .unwrap_or_else(|| super::DEFAULT_USER_ID_CLAIM.to_owned()),
            customer_issuer: vars.get("CUSTOMER_POOL_ISSUER"),
            customer_audiences: vars.list("CUSTOMER_POOL_CLIENT_IDS").filter(|list| !list.is_empty()),
            guest_issuer: vars.get("GUEST_POOL_ISSUER"),
            guest_audience: vars.get("GUEST_POOL_CLIENT_ID"),
            staff_issuer,
            staff_audience,
            staff_group: vars.get("STAFF_GROUP").unwrap_or_else(|| "support-staff".into()),
            // The function's own rule: on when said, or unsaid with a visitors' key.
            visitors: match vars.get("VISITORS").as_deref() {
                Some(said) => said == "on",
                None => vars.get("VISITOR_ADDRESS_KEY").is_some(),
            },
        })
    }
}

/// Where the keys of the pool `issuer` names are: beside it (Cognito), or,
/// given `endpoint` (moto, under `make run`), at
/// `{endpoint}/{pool id}/.well-known/jwks.json`.
pub fn jwks_url(issuer: &str, endpoint: Option<&str>) -> String {
    let issuer = issuer.trim_end_matches('/');
    match endpoint {
        Some(endpoint) => {
            let pool = issuer.rsplit('/').next().unwrap_or_default();
            format!("{}/{pool}/.well-known/jwks.json", endpoint.trim_end_matches('/'))
        }
        None => format!("{issuer}/.well-known/jwks.json"),
    }
}
