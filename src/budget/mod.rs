//! Budgets (contract 13): no denial of wallet. Every turn costs the shop up
//! to five completion calls, so a signed-in customer, or a script with one
//! customer's token, may spend at most `CUSTOMER_TURNS_PER_HOUR` turns per
//! UTC hour and `CUSTOMER_TOKENS_PER_DAY` tokens per UTC day.
//!
//! The turn is taken atomically before the turn (a conditional counter, so
//! six requests at once for the last turn get exactly one), and it reserves
//! the turn's worst case of tokens in the same step, on the condition that
//! the day's tokens are below the limit; when the turn ends the reservation
//! is settled to the provider's `usage`. Turns at once therefore see each
//! other's reservations, and the day overshoots by at most one turn in all,
//! however many tabs a customer has open. A turn whose invocation dies
//! keeps its reservation: it errs toward the shop's bill, not the
//! customer's day. The windows are pure functions of the time, here; the
//! counters are [`crate::ledger::BudgetStore`]'s.

/// Whose counters a turn counts in, and their limits: a customer's own
/// hour and day; a guest's too, and a day all guests share; a visitor's
/// hour per source address, and one day for all visitors together
/// (contract 27), so that visitors never spend what customers are owed and
/// no number of guest addresses buys more than the guests' day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The hour's turns counter's name.
    pub turns: String,
    /// The day's tokens counter's name.
    pub tokens: String,
    pub limits: BudgetLimits,
    /// A second day the turn reserves from and settles to, with its own
    /// limit: the guests' (`GUEST_TOKENS_PER_DAY`).
    pub shared_day: Option<SharedDay>,
}

/// A day of tokens shared by every account of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedDay {
    pub counter: &'static str,
    pub tokens_per_day: u64,
}

impl Account {
    /// A customer's or a guest's own windows. `u<length>:` keeps every
    /// user id apart from the visitors' names below.
    pub fn of_customer(user_id: &str, limits: BudgetLimits) -> Account {
        let name = format!("u{}:{user_id}", user_id.len());
        Account {
            turns: name.clone(),
            tokens: name,
            limits,
            shared_day: None,
        }
    }

    /// A guest's: their e-mail's own windows (`day_owner`,
    /// [`crate::guest::GuestEmail::day_owner`]), and the day all guests
    /// share, so that a domain catching every address buys no budget.
    pub fn of_guest(day_owner: &str, limits: BudgetLimits, guests_tokens_per_day: u64) -> Account {
        Account {
            shared_day: Some(SharedDay {
                counter: GUESTS_DAY,
                tokens_per_day: guests_tokens_per_day,
            }),
            ..Account::of_customer(day_owner, limits)
        }
    }

    /// Every day counter the turn's tokens count in: its own, then the
    /// shared one.
    pub fn token_counters(&self) -> Vec<String> {
        std::iter::once(self.tokens.clone())
            .chain(self.shared_day.as_ref().map(|day| day.counter.to_owned()))
            .collect()
    }

    /// A visitor's: turns per source address (its keyed hash, never the
    /// address), tokens shared by every visitor.
    pub fn of_visitor(address_hash: &str, limits: BudgetLimits) -> Account {
        Account {
            turns: format!("a:{address_hash}"),
            tokens: VISITORS_DAY.to_owned(),
            limits,
            shared_day: None,
        }
    }
}

impl Account {
    /// A visitor's conversation that a person has (section 13): the
    /// messages it takes an hour; no model answers them, so no tokens.
    pub fn of_visitor_conversation(conversation: &str, messages_per_hour: u64) -> Account {
        let name = format!("h:{conversation}");
        Account {
            turns: name.clone(),
            tokens: name,
            limits: BudgetLimits {
                turns_per_hour: messages_per_hour,
                tokens_per_day: u64::MAX,
                turn_reservation: 0,
            },
            shared_day: None,
        }
    }
}

/// The one tokens counter all visitors share.
pub const VISITORS_DAY: &str = "visitors";

/// The one all guests share, beside their own.
pub const GUESTS_DAY: &str = "guests";

/// The limits, per customer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    pub turns_per_hour: u64,
    pub tokens_per_day: u64,
    /// What a turn reserves of the day's tokens when it is taken: its worst
    /// case ([`crate::turn::worst_case_tokens`]).
    pub turn_reservation: u64,
}

/// A turn taken from a customer's budget: when (which hour and day it
/// counts in) and what it reserved of the day's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub taken_at_ms: u64,
    pub tokens: u64,
}

impl Reservation {
    /// What settling it to `used` tokens adds to the day (negative: gives back).
    pub fn settlement(self, used: u64) -> i64 {
        i64::try_from(used).unwrap_or(i64::MAX) - i64::try_from(self.tokens).unwrap_or(i64::MAX)
    }
}

/// Why a turn was refused, and for how long (seconds until its window ends,
/// at least 1): the 429's `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Turns { retry_after_secs: u64 },
    Tokens { retry_after_secs: u64 },
}

impl Spent {
    pub fn retry_after_secs(self) -> u64 {
        match self {
            Spent::Turns { retry_after_secs } | Spent::Tokens { retry_after_secs } => retry_after_secs,
        }
    }

    /// As the summary line and the metrics name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Spent::Turns { .. } => "turns",
            Spent::Tokens { .. } => "tokens",
        }
    }
}

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// The windows a moment falls in: its UTC hour and its UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Windows {
    /// `2026-12-01T10`
    pub hour: String,
    /// `2026-12-01`
    pub day: String,
    /// Epoch ms at which each ends.
    pub hour_ends_ms: u64,
    pub day_ends_ms: u64,
}

impl Windows {
    pub fn at(now_ms: u64) -> Windows {
        let stamp = crate::clock::rfc3339(now_ms);
        Windows {
            hour: stamp[..13].to_owned(),
            day: stamp[..10].to_owned(),
            hour_ends_ms: (now_ms / HOUR_MS + 1) * HOUR_MS,
            day_ends_ms: (now_ms / DAY_MS + 1) * DAY_MS,
        }
    }

    /// Whole seconds until the hour ends, at least 1.
    pub fn turns_retry_after_secs(&self, now_ms: u64) -> u64 {
        self.hour_ends_ms.saturating_sub(now_ms).div_ceil(1000).max(1)
    }

    /// Whole seconds until the day ends, at least 1.
    pub fn tokens_retry_after_secs(&self, now_ms: u64) -> u64 {
        self.day_ends_ms.saturating_sub(now_ms).div_ceil(1000).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_falls_in_its_utc_hour_and_day() {
        let at = crate::clock::parse_utc("2026-12-01T10:59:59.999Z").unwrap();
        let windows = Windows::at(at);
        assert_eq!(
            (windows.hour.as_str(), windows.day.as_str()),
            ("2026-12-01T10", "2026-12-01")
        );
        assert_eq!(windows.turns_retry_after_secs(at), 1);
        assert_eq!(windows.tokens_retry_after_secs(at), 13 * 3600 + 1);
        let next = Windows::at(at + 1);
        assert_eq!(next.hour, "2026-12-01T11");
        assert_eq!(next.turns_retry_after_secs(at + 1), 3600);
        let midnight = Windows::at(crate::clock::parse_utc("2026-12-02").unwrap());
        assert_eq!(
            (midnight.hour.as_str(), midnight.day.as_str()),
            ("2026-12-02T00", "2026-12-02")
        );
    }
}
