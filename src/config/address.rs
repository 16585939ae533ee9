//! A change of address's settings (contract 26).

use std::time::Duration;

use super::ConfigError;
use super::vars::{Vars, own};
use crate::handoff::screen::{DEFAULT_CONFIRM_PHRASES, YesPhrases};

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

impl AddressSettings {
    pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<AddressSettings, ConfigError> {
        Ok(AddressSettings {
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
        })
    }
}
