//! A change of address's settings (contract 26); how long it waits for the
//! customer's yes is every write's ([`super::confirm`]).

use super::ConfigError;
use super::vars::Vars;

/// Contract 26's own setting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AddressSettings {
    /// Country codes an address may be changed to; `None`: the order's own.
    pub shipping_countries: Option<Vec<String>>,
}

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
        })
    }
}
