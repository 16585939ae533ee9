//! A return's settings (contracts 28 and 29).

use super::ConfigError;
use super::vars::Vars;

/// `RETURN_WINDOW_DAYS`, `RETURN_LABEL_ORIGINS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnSettings {
    /// Days after delivery in which a return may be started; the help
    /// centre's `{{RETURN_WINDOW_DAYS}}` is this number.
    pub window_days: u32,
    /// Origins (`https://carrier.example`) whose label links the customer
    /// may follow; none: a label is named, not linked.
    pub label_origins: Vec<String>,
}

pub const DEFAULT_RETURN_WINDOW_DAYS: u32 = crate::orders::returns::DEFAULT_WINDOW_DAYS;

impl Default for ReturnSettings {
    fn default() -> Self {
        ReturnSettings {
            window_days: DEFAULT_RETURN_WINDOW_DAYS,
            label_origins: Vec::new(),
        }
    }
}

impl ReturnSettings {
    pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<ReturnSettings, ConfigError> {
        let window_days = match vars.count("RETURN_WINDOW_DAYS", DEFAULT_RETURN_WINDOW_DAYS as usize)? {
            days @ 1..=365 => days as u32,
            other => {
                return Err(ConfigError::Malformed {
                    name: "RETURN_WINDOW_DAYS",
                    expected: "a whole number of days from 1 to 365",
                    value: other.to_string(),
                });
            }
        };
        let mut label_origins = Vec::new();
        for origin in vars.list("RETURN_LABEL_ORIGINS").unwrap_or_default() {
            label_origins.push(origin_of(&origin).ok_or(ConfigError::Malformed {
                name: "RETURN_LABEL_ORIGINS",
                expected: "comma-separated origins, each http(s)://host[:port] with no path",
                value: origin,
            })?);
        }
        Ok(ReturnSettings {
            window_days,
            label_origins,
        })
    }
}

/// An origin as a URL parser serializes it, or `None` where the text is
/// more than an origin (a path, a query, a user).
fn origin_of(text: &str) -> Option<String> {
    let url = reqwest::Url::parse(text).ok()?;
    let bare = matches!(url.path(), "" | "/") && url.query().is_none() && url.fragment().is_none();
    let plain = url.username().is_empty() && url.password().is_none();
    (matches!(url.scheme(), "https" | "http") && bare && plain).then(|| url.origin().ascii_serialization())
}
