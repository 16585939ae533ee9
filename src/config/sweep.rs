//! `refund-chat-sweep`'s settings.

use std::time::Duration;

use super::vars::Vars;
use super::{ConfigError, DEFAULT_LEDGER_TIMEOUT, FUNCTION_TIMEOUT};

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
