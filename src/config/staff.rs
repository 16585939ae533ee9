//! The support team's settings: `refund-chat-admin`'s ([`StaffConfig`]) and
//! the desk's ([`DeskConfig`], which holds them).

use std::time::Duration;

use super::vars::{Vars, parse_url};
use super::{
    ConfigError, DEFAULT_CONVERSATION_TTL, DEFAULT_IDEMPOTENCY_TTL, DEFAULT_LEDGER_TIMEOUT, DEFAULT_LIMITS,
    DEFAULT_ORDERS_TIMEOUT, DEFAULT_PAYMENTS_TIMEOUT, ResponseMode,
};
use crate::refund::policy::Limits;

/// Contract 35's default page of the desk's queue.
pub const DEFAULT_QUEUE_PAGE: usize = 100;

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
    /// The guest pool (`GUEST_POOL_ID`, contract 27): a guest's order is
    /// read by the e-mail it holds; none: a guest's order is unavailable.
    pub guest_pool_id: Option<String>,
    /// `QUEUE_PAGE` (default 100): the desk queue's page of each kind of
    /// handoff (contract 30).
    pub queue_page: usize,
    /// Live pokes (contract 31): a person's every action is published.
    pub live: super::LiveSettings,
    /// The team's hours and the due time (contract 32): the queue's order
    /// and what is overdue.
    pub office: crate::office_hours::expected::Office,
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
            limits: vars.limits(DEFAULT_LIMITS)?,
            guest_pool_id: vars.get("GUEST_POOL_ID"),
            queue_page: vars.count("QUEUE_PAGE", DEFAULT_QUEUE_PAGE)?.max(1),
            live: super::LiveSettings::read(&vars)?,
            office: super::office::read(&vars)?,
        })
    }
}

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
