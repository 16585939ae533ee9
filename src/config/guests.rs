//! Guests' settings (contracts 27 and 29).

use super::ConfigError;
use super::vars::{Vars, parse_url};
use crate::keyed_hash::AddressKey;
use crate::router::Served;

/// `GUEST_TOKENS_PER_DAY`'s default: the visitors' day's size.
pub const DEFAULT_GUEST_TOKENS_PER_DAY: u64 = 2_000_000;

/// `GUEST_POOL_ISSUER`: the guest pool's issuer, an https URL as Cognito
/// writes it in `iss` (`https://cognito-idp.{region}.amazonaws.com/{pool id}`,
/// kept exactly, no trailing slash); none: no guests.
pub(super) fn issuer(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Option<String>, ConfigError> {
    vars.get("GUEST_POOL_ISSUER")
        .map(|value| parse_url("GUEST_POOL_ISSUER", value))
        .transpose()
}

/// The key a guest's day is counted under (section 8's rule 3, contract
/// 27): the stack's `VISITOR_ADDRESS_KEY`. With guests and without it, a
/// guest's day would be their `sub`'s, which they can renew: the container
/// stops instead.
pub(super) fn day_key(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Option<AddressKey>, ConfigError> {
    match (issuer(vars)?, super::visitors::address_key(vars)?) {
        (None, _) => Ok(None),
        (Some(_), None) => Err(ConfigError::Missing("VISITOR_ADDRESS_KEY")),
        (Some(_), Some(key)) => Ok(Some(key)),
    }
}

/// `GUEST_INTENTS` (default `order_status,refund,policy_question,other`),
/// out of what the agent is served at all (`AGENT_INTENTS`): an intent in
/// the one and not the other is not served to a guest. None left: every
/// guest's turn goes to a person.
pub(super) fn intents(vars: &Vars<impl Fn(&str) -> Option<String>>, agent: &Served) -> Result<Served, ConfigError> {
    let wanted = match vars.get("GUEST_INTENTS") {
        None => Served::default(),
        Some(names) => Served::parse(&names).map_err(|_| ConfigError::Malformed {
            name: "GUEST_INTENTS",
            expected: "comma-separated intents (order_status, refund, return, address_change, account_access, policy_question, other), at least one",
            value: names,
        })?,
    };
    Ok(wanted.within(agent))
}

/// Where the chat page signs a guest in (contract 27): the guest pool's
/// Cognito endpoint (`GUEST_SIGN_IN_URL`, `https://cognito-idp.{region}.amazonaws.com/`;
/// locally the stand-in's) and its app client (`GUEST_POOL_CLIENT_ID`).
/// The page talks to it from the browser: the code never passes through
/// the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestSignIn {
    pub url: String,
    pub client_id: String,
}

/// Offered when `GUEST_SIGN_IN_URL` is set, with the client it needs; the
/// client id alone is the guests' tokens' audience and offers nothing (the
/// template leaves the URL out without the shop's SES identity and From:
/// no "confirm my e-mail" on the page).
pub(super) fn sign_in(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Option<GuestSignIn>, ConfigError> {
    match (vars.get("GUEST_SIGN_IN_URL"), vars.get("GUEST_POOL_CLIENT_ID")) {
        (None, _) => Ok(None),
        (Some(url), Some(client_id)) => Ok(Some(GuestSignIn {
            url: parse_url("GUEST_SIGN_IN_URL", url)? + "/",
            client_id,
        })),
        (Some(_), None) => Err(ConfigError::Missing("GUEST_POOL_CLIENT_ID")),
    }
}
