//! Visitors' settings (contracts 27 and 29).

use super::ConfigError;
use super::vars::Vars;
use crate::budget::{Account, BudgetLimits};
use crate::keyed_hash::AddressKey;

pub const DEFAULT_VISITOR_TURNS_PER_HOUR_PER_ADDRESS: u64 = 20;
pub const DEFAULT_VISITOR_TOKENS_PER_DAY: u64 = 2_000_000;
pub const DEFAULT_VISITOR_MESSAGES_PER_HOUR: u64 = 20;

/// `VISITOR_ADDRESS_KEY`, the stack's key of its keyed hashes: of a
/// visitor's source address, and of a guest's verified e-mail (whose day
/// it counts, [`crate::guest::GuestEmail::day_owner`]). None when unset.
pub(super) fn address_key(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Option<AddressKey>, ConfigError> {
    vars.get("VISITOR_ADDRESS_KEY")
        .map(|key| {
            AddressKey::new(&key).ok_or(ConfigError::Malformed {
                name: "VISITOR_ADDRESS_KEY",
                expected: "at least 32 characters",
                // A secret: its length only.
                value: format!("{} characters", key.chars().count()),
            })
        })
        .transpose()
}

/// What visitors may spend, and the key their source addresses are hashed
/// with. Visitors are served only with a key: without one their turns
/// could not be counted per address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisitorSettings {
    pub address_key: AddressKey,
    pub turns_per_hour_per_address: u64,
    pub tokens_per_day: u64,
    /// `VISITOR_MESSAGES_PER_HOUR`: what a visitor's conversation that a
    /// person has takes an hour, the message that handed it off included.
    pub messages_per_hour: u64,
}

impl VisitorSettings {
    /// `VISITORS` (`on` or `off`) and `VISITOR_ADDRESS_KEY`: unset, visitors
    /// are served when the key is given (the template gives it); `on`
    /// without a key stops the container.
    pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Option<VisitorSettings>, ConfigError> {
        let wanted = match vars.get("VISITORS").as_deref() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(other) => {
                return Err(ConfigError::Malformed {
                    name: "VISITORS",
                    expected: "on or off",
                    value: other.to_owned(),
                });
            }
        };
        let address_key = match (wanted, address_key(vars)?) {
            (Some(false), _) | (None, None) => return Ok(None),
            (Some(true), None) => return Err(ConfigError::Missing("VISITOR_ADDRESS_KEY")),
            (_, Some(key)) => key,
        };
        Ok(Some(VisitorSettings {
            address_key,
            turns_per_hour_per_address: vars.count(
                "VISITOR_TURNS_PER_HOUR_PER_ADDRESS",
                DEFAULT_VISITOR_TURNS_PER_HOUR_PER_ADDRESS as usize,
            )? as u64,
            tokens_per_day: vars.count("VISITOR_TOKENS_PER_DAY", DEFAULT_VISITOR_TOKENS_PER_DAY as usize)? as u64,
            messages_per_hour: vars.count("VISITOR_MESSAGES_PER_HOUR", DEFAULT_VISITOR_MESSAGES_PER_HOUR as usize)?
                as u64,
        }))
    }

    /// The account a visitor's conversation with a person counts its
    /// messages in (section 13). The message that handed it off was the
    /// conversation's too: after it, one fewer an hour, so the hour of the
    /// handoff takes at most `messages_per_hour` in all.
    pub fn handed_off(&self, conversation: &str) -> Account {
        Account::of_visitor_conversation(conversation, self.messages_per_hour.saturating_sub(1))
    }

    /// The limits of a visitor's account: a turn reserves what a
    /// customer's does.
    pub fn limits(&self, customers: &BudgetLimits) -> BudgetLimits {
        BudgetLimits {
            turns_per_hour: self.turns_per_hour_per_address,
            tokens_per_day: self.tokens_per_day,
            turn_reservation: customers.turn_reservation,
        }
    }
}
