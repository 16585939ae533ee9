//! When a person will answer, in code's words (contract 32): what the
//! customer is told under a handoff, and when the team owes a reply.
//!
//! The model never says a time: the sentence is written here from the
//! schedule and the measured reply time, and the same facts go out as
//! `person_expected` for the page.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Schedule;

/// The reply time said while fewer handoffs than this give a median.
pub const MEDIAN_AT_LEAST: usize = 5;
/// What the reply time is measured over.
pub const MEASURED_DAYS: u64 = 7;
/// What the said reply time is rounded up to.
const ROUNDED_TO_MINUTES: u32 = 5;

/// The team's hours and the times owed (`OFFICE_HOURS`,
/// `REPLY_TIME_MINUTES`, `REPLY_DUE_MINUTES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Office {
    /// None: always open.
    pub schedule: Option<Schedule>,
    /// Said while fewer than [`MEDIAN_AT_LEAST`] handoffs give a median.
    pub reply_time_minutes: u32,
    /// Office minutes from a handoff to when it is due.
    pub reply_due_minutes: u32,
    /// How long a container says the reply time it measured before it reads
    /// the recent first replies again: a minute (not a setting; tests make
    /// it zero).
    pub reply_time_cache: std::time::Duration,
}

impl Default for Office {
    fn default() -> Self {
        Office {
            schedule: None,
            reply_time_minutes: 30,
            reply_due_minutes: 60,
            reply_time_cache: std::time::Duration::from_secs(60),
        }
    }
}

/// A handoff's first reply, as the desk keeps it: when the handoff began,
/// when a person first answered, and whether the team was there when it
/// began (the hours of that moment: a later change of `OFFICE_HOURS` does
/// not rewrite what was measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstReply {
    pub begun_ms: u64,
    pub replied_ms: u64,
    pub within_hours: bool,
}

impl FirstReply {
    /// Whole minutes to the first reply, rounded up.
    pub fn minutes(&self) -> u64 {
        self.replied_ms.saturating_sub(self.begun_ms).div_ceil(60_000)
    }
}

/// When a person is expected, as the answer's `person_expected` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonExpected {
    pub open: bool,
    /// Outside hours: when the team is back (none: no open hour within two weeks).
    pub at: Option<Timestamp>,
    /// Within hours: the usual reply time, rounded up to 5 minutes.
    pub within_minutes: Option<u32>,
    /// The shop's zone and the words for `at`, kept for the sentence.
    back: Option<String>,
}

impl Office {
    fn is_open(&self, at: Timestamp) -> bool {
        self.schedule.as_ref().is_none_or(|schedule| schedule.is_open(at))
    }

    /// The shop's time zone: the hours', else UTC (contract 36).
    pub fn zone(&self) -> jiff::tz::TimeZone {
        self.schedule
            .as_ref()
            .map_or(jiff::tz::TimeZone::UTC, |schedule| schedule.zone().clone())
    }

    /// Whether the team is there at `at_ms` (always, without a schedule).
    pub fn is_open_at(&self, at_ms: u64) -> bool {
        self.is_open(timestamp(at_ms))
    }

    /// What a customer handed off at `now_ms` is told; `measured` is the
    /// median first reply of recent handoffs, when there are enough.
    pub fn expected(&self, now_ms: u64, measured: Option<u32>) -> PersonExpected {
        let now = timestamp(now_ms);
        match &self.schedule {
            Some(schedule) if !schedule.is_open(now) => {
                let at = schedule.next_open(now);
                PersonExpected {
                    open: false,
                    at,
                    within_minutes: None,
                    back: at.map(|at| schedule.back_at(now, at)),
                }
            }
            _ => {
                let minutes = measured.unwrap_or(self.reply_time_minutes).max(1);
                PersonExpected {
                    open: true,
                    at: None,
                    within_minutes: Some(minutes.div_ceil(ROUNDED_TO_MINUTES) * ROUNDED_TO_MINUTES),
                    back: None,
                }
            }
        }
    }

    /// When a handoff made at `from_ms` is due: `REPLY_DUE_MINUTES` office
    /// minutes later; none when the hours hold no such time within two weeks.
    pub fn due_at_ms(&self, from_ms: u64) -> Option<u64> {
        let minutes = i64::from(self.reply_due_minutes);
        match &self.schedule {
            None => Some(from_ms + u64::from(self.reply_due_minutes) * 60_000),
            Some(schedule) => schedule
                .after_office_minutes(timestamp(from_ms), minutes)
                .and_then(|at| u64::try_from(at.as_millisecond()).ok()),
        }
    }

    /// What the desk keeps of a first reply (`begun_ms` the handoff's time).
    pub fn first_reply(&self, begun_ms: u64, replied_ms: u64) -> FirstReply {
        FirstReply {
            begun_ms,
            replied_ms,
            within_hours: self.is_open_at(begun_ms),
        }
    }
}

/// The median minutes to a first reply of the handoffs that began within
/// hours in the last [`MEASURED_DAYS`] before `now_ms`, and how many there
/// were; no median with fewer than [`MEDIAN_AT_LEAST`].
pub fn median_reply_minutes(replies: &[FirstReply], now_ms: u64) -> (Option<u32>, usize) {
    let since = now_ms.saturating_sub(MEASURED_DAYS * 24 * 3600 * 1000);
    let mut minutes: Vec<u64> = replies
        .iter()
        .filter(|reply| reply.within_hours && reply.begun_ms >= since && reply.replied_ms >= reply.begun_ms)
        .map(FirstReply::minutes)
        .collect();
    if minutes.len() < MEDIAN_AT_LEAST {
        return (None, minutes.len());
    }
    minutes.sort_unstable();
    (u32::try_from(minutes[minutes.len() / 2]).ok(), minutes.len())
}

impl PersonExpected {
    /// The sentence the customer reads.
    pub fn sentence(&self) -> String {
        match (self.within_minutes, &self.back) {
            (Some(minutes), _) => format!("A person usually answers within {minutes} minutes."),
            (None, Some(back)) => {
                format!("Our team is back {back}; you can leave this page, the answer will be here.")
            }
            (None, None) => "Our team is away for now; you can leave this page, the answer will be here.".to_owned(),
        }
    }

    /// The answer's `person_expected`, with the sentence the page shows
    /// (code's words: the page writes none of its own about time).
    pub fn json(&self) -> Value {
        json!({
            "open": self.open,
            "at": self.at.map(|at| at.to_string()),
            "within_minutes": self.within_minutes,
            "sentence": self.sentence(),
        })
    }
}

fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from_millisecond(i64::try_from(ms).unwrap_or(i64::MAX)).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paris_ms(text: &str) -> u64 {
        let datetime: jiff::civil::DateTime = text.parse().unwrap();
        let at = datetime
            .to_zoned(jiff::tz::TimeZone::get("Europe/Paris").unwrap())
            .unwrap()
            .timestamp();
        u64::try_from(at.as_millisecond()).unwrap()
    }

    fn office() -> Office {
        Office {
            schedule: Some(
                Schedule::parse(
                    r#"{"tz": "Europe/Paris", "week": {"mon": ["09:00-18:00"], "tue": ["09:00-18:00"]},
                        "closed": ["2026-12-08"]}"#,
                )
                .unwrap(),
            ),
            ..Office::default()
        }
    }

    #[test]
    fn within_hours_the_reply_time_rounded_up_to_five_minutes() {
        let office = office();
        let monday = paris_ms("2026-12-07T10:00");
        let told = office.expected(monday, None);
        assert_eq!(told.sentence(), "A person usually answers within 30 minutes.");
        assert_eq!(
            told.json(),
            json!({"open": true, "at": null, "within_minutes": 30,
                   "sentence": "A person usually answers within 30 minutes."})
        );
        assert_eq!(office.expected(monday, Some(11)).within_minutes, Some(15));
        // Always open without a schedule.
        let always = Office::default();
        assert_eq!(always.expected(0, Some(4)).within_minutes, Some(5));
    }

    #[test]
    fn outside_hours_when_the_team_is_back_in_the_shops_zone() {
        let office = office();
        // Monday evening; Tuesday is a closed date, the next Monday is the next open hour.
        let told = office.expected(paris_ms("2026-12-07T19:00"), Some(10));
        assert!(!told.open);
        assert_eq!(told.within_minutes, None);
        assert_eq!(
            told.sentence(),
            "Our team is back Monday 14 December at 09:00 (Europe/Paris); you can leave this page, the answer \
             will be here."
        );
        assert_eq!(told.json()["at"], "2026-12-14T08:00:00Z");
        // Within a week: the weekday alone.
        let sunday = office.expected(paris_ms("2026-12-13T19:00"), None);
        assert_eq!(
            sunday.sentence(),
            "Our team is back Monday at 09:00 (Europe/Paris); you can leave this page, the answer will be here."
        );
    }

    #[test]
    fn no_open_hour_says_nothing_about_a_time() {
        let office = Office {
            schedule: Some(Schedule::parse(r#"{"tz": "Europe/Paris"}"#).unwrap()),
            ..Office::default()
        };
        let told = office.expected(paris_ms("2026-12-07T10:00"), None);
        let json = told.json();
        assert_eq!(
            (&json["open"], &json["at"], &json["within_minutes"]),
            (&json!(false), &json!(null), &json!(null))
        );
        assert!(
            !told.sentence().chars().any(|c| c.is_ascii_digit()),
            "{}",
            told.sentence()
        );
        assert_eq!(office.due_at_ms(paris_ms("2026-12-07T10:00")), None);
    }

    #[test]
    fn due_in_office_minutes() {
        let office = office();
        // 17:50 with 60 minutes due and 18:00 closing: Tuesday is closed, so next Monday 09:50.
        assert_eq!(
            office.due_at_ms(paris_ms("2026-12-07T17:50")),
            Some(paris_ms("2026-12-14T09:50"))
        );
        assert_eq!(Office::default().due_at_ms(1_000), Some(1_000 + 3_600_000));
    }

    #[test]
    fn the_median_counts_handoffs_begun_within_hours_in_the_last_week() {
        let office = office();
        let now = paris_ms("2026-12-14T12:00");
        let monday = paris_ms("2026-12-14T09:00");
        let minutes = |m: u64| m * 60_000;
        let mut replies: Vec<FirstReply> = [3, 7, 12, 20]
            .iter()
            .map(|m| office.first_reply(monday, monday + minutes(*m)))
            .collect();
        // Four are not enough.
        assert_eq!(median_reply_minutes(&replies, now), (None, 4));
        // Begun outside hours, or more than a week ago: not counted.
        let night = paris_ms("2026-12-13T23:00");
        replies.push(office.first_reply(night, night + minutes(600)));
        assert!(!replies[4].within_hours);
        let long_ago = monday - 8 * 24 * 3_600_000;
        replies.push(office.first_reply(long_ago, long_ago + minutes(1)));
        assert_eq!(median_reply_minutes(&replies, now), (None, 4));
        replies.push(office.first_reply(monday, monday + minutes(45)));
        assert_eq!(median_reply_minutes(&replies, now), (Some(12), 5));
    }
}
