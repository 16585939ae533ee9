//! How every write waits for the customer's yes (contracts 26, 28 and 29):
//! one setting for all of them, as there is one mechanism
//! ([`crate::confirm`]).

use std::time::Duration;

use super::ConfigError;
use super::vars::{Vars, own};
use crate::handoff::screen::{DEFAULT_CONFIRM_PHRASES, YesPhrases};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmSettings {
    /// How long a proposed write waits for the yes.
    pub within: Duration,
    /// What an explicit yes is (`CONFIRM_PHRASES`).
    pub yes: YesPhrases,
}

impl Default for ConfirmSettings {
    fn default() -> Self {
        ConfirmSettings {
            within: DEFAULT_CONFIRM,
            yes: YesPhrases::default(),
        }
    }
}

pub const DEFAULT_CONFIRM: Duration = Duration::from_secs(30 * 60);

impl ConfirmSettings {
    /// `CONFIRM_MINUTES`, else its old name `ADDRESS_CONFIRM_MINUTES`, else 30.
    pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<ConfirmSettings, ConfigError> {
        let name = if vars.get("CONFIRM_MINUTES").is_some() {
            "CONFIRM_MINUTES"
        } else {
            "ADDRESS_CONFIRM_MINUTES"
        };
        let within = match vars.count(name, 30)? {
            0 => {
                return Err(ConfigError::Malformed {
                    name,
                    expected: "a whole number of minutes above 0",
                    value: "0".into(),
                });
            }
            minutes => Duration::from_secs(minutes as u64 * 60),
        };
        Ok(ConfirmSettings {
            within,
            yes: YesPhrases::new(
                &vars
                    .list("CONFIRM_PHRASES")
                    .unwrap_or_else(|| own(DEFAULT_CONFIRM_PHRASES)),
            ),
        })
    }
}
