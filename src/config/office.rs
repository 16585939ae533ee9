//! The team's hours and the reply times (contracts 32 and 35), read alike
//! by the customers' function, the desk's and the sweep: `OFFICE_HOURS`,
//! `REPLY_TIME_MINUTES`, `REPLY_DUE_MINUTES`.

use super::ConfigError;
use super::vars::Vars;
use crate::office_hours::Schedule;
use crate::office_hours::expected::Office;

/// The longest a reply time or a due time may be set to: a week.
const MAX_MINUTES: usize = 7 * 24 * 60;

pub(super) fn read(vars: &Vars<impl Fn(&str) -> Option<String>>) -> Result<Office, ConfigError> {
    let defaults = Office::default();
    let minutes = |name: &'static str, default: u32| match vars.count(name, default as usize)? {
        minutes @ 1..=MAX_MINUTES => Ok(minutes as u32),
        other => Err(ConfigError::Malformed {
            name,
            expected: "a whole number of minutes from 1 to 10080",
            value: other.to_string(),
        }),
    };
    Ok(Office {
        schedule: vars
            .get("OFFICE_HOURS")
            .map(|text| Schedule::parse(&text))
            .transpose()
            .map_err(ConfigError::OfficeHours)?,
        reply_time_minutes: minutes("REPLY_TIME_MINUTES", defaults.reply_time_minutes)?,
        reply_due_minutes: minutes("REPLY_DUE_MINUTES", defaults.reply_due_minutes)?,
        reply_time_cache: defaults.reply_time_cache,
    })
}
