//! Configuration, read from the environment once per container at start-up.
//!
//! A missing or malformed value stops the container with a message that names
//! the variable: a misconfigured function should fail its first cold start
//! loudly, not answer customers with 500s.
//!
//! One file a reader: [`function`] (the customers' function, with what each
//! of its concerns reads in a file of its own: [`address`], [`visitors`], [`guests`]), [`sweep`] and
//! [`staff`] (the terminal's and the desk's); [`vars`] is how every one of
//! them reads a variable, so a rule (an empty value is unset, a URL is
//! http(s)) holds for all.

mod address;
mod confirm;
mod function;
mod guests;
mod live;
mod office;
mod returns;
mod staff;
mod sweep;
mod vars;
mod visitors;

#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::help::HelpError;

pub use address::AddressSettings;
pub use confirm::{ConfirmSettings, DEFAULT_CONFIRM};
pub use function::*;
pub use guests::GuestSignIn;
pub use live::{DEFAULT_LIVE_FALLBACK_POLL_SECS, DEFAULT_LIVE_PUBLISH_TIMEOUT, ListenConfig, LiveSettings, jwks_url};
pub use returns::{DEFAULT_RETURN_WINDOW_DAYS, ReturnSettings};
pub use staff::{DeskConfig, StaffConfig, StaffIdentity};
pub use sweep::SweepConfig;
pub use visitors::{DEFAULT_VISITOR_TOKENS_PER_DAY, DEFAULT_VISITOR_TURNS_PER_HOUR_PER_ADDRESS, VisitorSettings};

/// How the function answers the Lambda runtime (contract 20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// The runtime's streaming response mode, the prelude written once the
    /// turn has ended: what a REST API's STREAM integration takes.
    Streaming,
    /// One buffered response: an HTTP API, or a function URL in buffered mode.
    Buffered,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is required but not set")]
    Missing(&'static str),
    #[error("{name} must be {expected}, got {value:?}")]
    Malformed {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
    /// An article of the help centre (contract 17) is not as it must be.
    #[error("HELP_ARTICLES_DIR: {0}")]
    Help(#[from] HelpError),
    /// `OFFICE_HOURS` is not a schedule (contract 32).
    #[error("OFFICE_HOURS: {0}")]
    OfficeHours(crate::office_hours::Malformed),
}

/// The function's timeout in `template.yaml` (`tests/template.rs` checks
/// that they agree): an `executing` record older than this has no
/// invocation left that could still record its outcome.
pub const FUNCTION_TIMEOUT: Duration = Duration::from_secs(190);
