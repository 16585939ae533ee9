//! How every reader takes a variable: empty values count as unset, and a
//! malformed one is an error that names it.

use std::time::Duration;

use super::{ConfigError, ResponseMode};
use crate::refund::money::AmountCents;
use crate::refund::policy::Limits;

pub(super) fn own(list: &[&str]) -> Vec<String> {
    list.iter().map(|item| (*item).to_owned()).collect()
}

/// Environment variables, read one rule at a time. Empty values count as unset.
pub(super) struct Vars<F>(pub(super) F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    pub(super) fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    /// `RESPONSE_MODE` (contract 20): streaming unless it says buffered.
    pub(super) fn response_mode(&self) -> Result<ResponseMode, ConfigError> {
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

    pub(super) fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.get(name).ok_or(ConfigError::Missing(name))
    }

    /// An http(s) URL; required when there is no default.
    pub(super) fn url(&self, name: &'static str, default: Option<&str>) -> Result<String, ConfigError> {
        match (self.get(name), default) {
            (Some(value), _) => parse_url(name, value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(ConfigError::Missing(name)),
        }
    }

    pub(super) fn secs(
        &self,
        name: &'static str,
        default: Duration,
        allow_zero: bool,
    ) -> Result<Duration, ConfigError> {
        self.get(name)
            .map_or(Ok(default), |value| parse_secs(name, value, allow_zero))
    }

    pub(super) fn hours(&self, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            parse_multiple(name, value, 3600, "a number of hours above 0")
        })
    }

    pub(super) fn days(&self, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            parse_multiple(name, value, 86_400, "a number of days above 0")
        })
    }

    /// A comma-separated list; unset: none given.
    pub(super) fn list(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|value| {
            value
                .split(',')
                .map(|item| item.trim().to_owned())
                .filter(|item| !item.is_empty())
                .collect()
        })
    }

    /// A whole number, 0 or more.
    pub(super) fn count(&self, name: &'static str, default: usize) -> Result<usize, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            value.parse().map_err(|_| ConfigError::Malformed {
                name,
                expected: "a whole number, 0 or more",
                value,
            })
        })
    }

    pub(super) fn cents(&self, name: &'static str, default: AmountCents) -> Result<AmountCents, ConfigError> {
        self.get(name).map_or(Ok(default), |value| {
            value.parse().map(AmountCents::new).map_err(|_| ConfigError::Malformed {
                name,
                expected: "a whole number of cents, 0 or more",
                value,
            })
        })
    }

    /// The refund rules' settings: the function and the support team read them alike.
    pub(super) fn limits(&self, default: Limits) -> Result<Limits, ConfigError> {
        Ok(Limits {
            auto_refund_limit: self.cents("AUTO_REFUND_LIMIT_CENTS", default.auto_refund_limit)?,
            order_window: self.hours("ORDER_REFUND_WINDOW_HOURS", default.order_window)?,
            user_daily_auto_limit: self.cents("USER_DAILY_AUTO_LIMIT_CENTS", default.user_daily_auto_limit)?,
            refund_window: self.days("REFUND_WINDOW_DAYS", default.refund_window)?,
        })
    }
}

pub(super) fn parse_url(name: &'static str, value: String) -> Result<String, ConfigError> {
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
