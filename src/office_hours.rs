//! The team's office hours (contract 32): when a person will be there, as
//! code works it out, never the model.
//!
//! One setting, `OFFICE_HOURS`, JSON: the shop's IANA time zone, intervals
//! per weekday (`"09:00-18:00"`; an end at or before its start runs past
//! midnight into the next day), and the closed dates, e.g.
//! `{"tz": "Europe/Paris", "week": {"mon": ["09:00-12:30", "13:30-18:00"],
//! "fri": ["22:00-02:00"]}, "closed": ["2026-12-25"]}`. An interval belongs
//! to the day it starts on: a closed date cancels the intervals that start
//! on it, and an interval of the evening before still runs into its early
//! hours. Intervals of the week that overlap (those past midnight included)
//! are refused: a shop that wrote them meant something else.
//!
//! The arithmetic is `jiff`'s, on the time-zone database bundled into the
//! binary: a local time that a change to summer time skips is read as the
//! time after the gap, and one it repeats as the earlier, as Temporal does.
//! Everything here is pure: the caller gives the instant (the clock the
//! project injects).

pub mod expected;

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;

/// An instant as a customer reads it in code's words (contract 36): in the
/// shop's zone, to the minute, with the zone named:
/// `Mon 21 Dec 2026, 05:27 (Europe/Paris)`.
pub fn in_words(zone: &TimeZone, at: Timestamp) -> String {
    let local = at.to_zoned(zone.clone()).strftime("%a %-d %b %Y, %H:%M").to_string();
    match zone.iana_name() {
        Some(name) => format!("{local} ({name})"),
        None => local,
    }
}

/// How far ahead an open hour is looked for: a schedule with none in two
/// weeks (closed for a holiday season, or no interval at all) says nothing
/// about a time.
const LOOK_AHEAD_DAYS: i32 = 14;

const MINUTES_A_DAY: i32 = 24 * 60;
const MINUTES_A_WEEK: i32 = 7 * MINUTES_A_DAY;

/// The team's hours in the shop's zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    zone: TimeZone,
    intervals: Vec<Interval>,
    closed: Vec<Date>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    day: Weekday,
    start: Time,
    end: Time,
}

impl Interval {
    /// Its minutes in the week from Monday 00:00, the end past the start.
    fn week_minutes(&self) -> (i32, i32) {
        let minutes = |time: Time| i32::from(time.hour()) * 60 + i32::from(time.minute());
        let start = i32::from(self.day.to_monday_zero_offset()) * MINUTES_A_DAY + minutes(self.start);
        let length = (minutes(self.end) - minutes(self.start)).rem_euclid(MINUTES_A_DAY);
        // An end at its start is the whole day round.
        (start, start + if length == 0 { MINUTES_A_DAY } else { length })
    }
}

/// Why a setting is not a schedule (the container stops naming it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(String);

/// The setting as a shop writes it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    tz: String,
    #[serde(default)]
    week: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    closed: Vec<String>,
}

impl Schedule {
    /// `{"tz": "Europe/Paris", "week": {"mon": ["09:00-18:00"]}, "closed": ["2026-12-25"]}`.
    pub fn parse(text: &str) -> Result<Schedule, Malformed> {
        let written: Written = serde_json::from_str(text).map_err(|error| {
            Malformed(format!(
                "not {{\"tz\": ZONE, \"week\": {{\"mon\": [\"09:00-18:00\"]}}, \"closed\": [DATE]}}: {error}"
            ))
        })?;
        let zone = TimeZone::get(&written.tz).map_err(|_| Malformed(format!("{:?} is no time zone", written.tz)))?;
        let mut schedule = Schedule {
            zone,
            intervals: Vec::new(),
            closed: Vec::new(),
        };
        for (name, hours) in &written.week {
            let day = weekday(name)?;
            for interval in hours {
                let (start, end) = interval
                    .split_once('-')
                    .ok_or_else(|| Malformed(format!("{interval:?} is not an interval (09:00-18:00)")))?;
                schedule.intervals.push(Interval {
                    day,
                    start: time(start)?,
                    end: time(end)?,
                });
            }
        }
        schedule.refuse_overlaps()?;
        for date in &written.closed {
            let parsed: Date = date
                .parse()
                .map_err(|_| Malformed(format!("{date:?} is no date (YYYY-MM-DD)")))?;
            schedule.closed.push(parsed);
        }
        Ok(schedule)
    }

    /// Two intervals of the week that share a minute, on the week's circle.
    fn refuse_overlaps(&self) -> Result<(), Malformed> {
        for (index, first) in self.intervals.iter().enumerate() {
            for second in &self.intervals[index + 1..] {
                let (a_start, a_end) = first.week_minutes();
                let (b_start, b_end) = second.week_minutes();
                let overlaps = [-MINUTES_A_WEEK, 0, MINUTES_A_WEEK]
                    .iter()
                    .any(|shift| a_start < b_end + shift && b_start + shift < a_end);
                if overlaps {
                    return Err(Malformed(format!(
                        "{} and {} overlap",
                        first.written(),
                        second.written()
                    )));
                }
            }
        }
        Ok(())
    }

    /// The shop's time zone.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The intervals that start on `date`, as instants.
    fn spans_of(&self, date: Date) -> Vec<(Timestamp, Timestamp)> {
        if self.closed.contains(&date) {
            return Vec::new();
        }
        let at = |date: Date, time: Time| {
            date.to_datetime(time)
                .to_zoned(self.zone.clone())
                .map(|zoned| zoned.timestamp())
                .ok()
        };
        self.intervals
            .iter()
            .filter(|interval| interval.day == date.weekday())
            .filter_map(|interval| {
                let end_date = if interval.end <= interval.start {
                    date.tomorrow().ok()?
                } else {
                    date
                };
                Some((at(date, interval.start)?, at(end_date, interval.end)?))
            })
            .collect()
    }

    /// The open spans from the day before `from`'s (one may run past
    /// midnight into it) for [`LOOK_AHEAD_DAYS`], in order.
    fn spans_from(&self, from: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let mut date = from.to_zoned(self.zone.clone()).date();
        let mut spans = Vec::new();
        if let Ok(before) = date.yesterday() {
            spans.extend(self.spans_of(before));
        }
        for _ in 0..=LOOK_AHEAD_DAYS {
            spans.extend(self.spans_of(date));
            match date.tomorrow() {
                Ok(next) => date = next,
                Err(_) => break,
            }
        }
        spans.sort();
        spans
    }

    /// Whether a person is there at `at`.
    pub fn is_open(&self, at: Timestamp) -> bool {
        self.spans_from(at).iter().any(|(start, end)| *start <= at && at < *end)
    }

    /// When the team is next there: `at` itself when open; none when no
    /// open hour comes within two weeks.
    pub fn next_open(&self, at: Timestamp) -> Option<Timestamp> {
        self.spans_from(at)
            .into_iter()
            .filter(|(_, end)| *end > at)
            .map(|(start, _)| start.max(at))
            .min()
    }

    /// The instant `minutes` office minutes after `from` (a handoff's due
    /// time); none when the hours do not hold them within two weeks.
    pub fn after_office_minutes(&self, from: Timestamp, minutes: i64) -> Option<Timestamp> {
        let mut left = minutes.max(0) * 60_000;
        for (start, end) in self.spans_from(from).into_iter().filter(|(_, end)| *end > from) {
            let start = start.max(from);
            let span = end.as_millisecond() - start.as_millisecond();
            if left <= span {
                return Timestamp::from_millisecond(start.as_millisecond() + left).ok();
            }
            left -= span;
        }
        None
    }

    /// When the team is back at `at`, seen from `now`, as a customer reads
    /// it: `Monday at 09:00 (Europe/Paris)`, with the date when it is a week
    /// or more away.
    pub fn back_at(&self, now: Timestamp, at: Timestamp) -> String {
        let zoned = at.to_zoned(self.zone.clone());
        let within_a_week = at.as_second() - now.as_second() < 6 * 24 * 3600;
        let day = if within_a_week {
            zoned.strftime("%A at %H:%M").to_string()
        } else {
            zoned.strftime("%A %-d %B at %H:%M").to_string()
        };
        match self.zone.iana_name() {
            Some(name) => format!("{day} ({name})"),
            None => day,
        }
    }
}

fn time(text: &str) -> Result<Time, Malformed> {
    let (hour, minute) = text
        .trim()
        .split_once(':')
        .ok_or_else(|| Malformed(format!("{text:?} is no time (HH:MM)")))?;
    let number = |part: &str, max: i8| part.parse::<i8>().ok().filter(|n| (0..=max).contains(n));
    match (number(hour, 24), number(minute, 59)) {
        // 24:00 is the end of the day.
        (Some(24), Some(0)) => Ok(Time::midnight()),
        (Some(hour), Some(minute)) if hour < 24 => {
            Time::new(hour, minute, 0, 0).map_err(|_| Malformed(format!("{text:?} is no time (HH:MM)")))
        }
        _ => Err(Malformed(format!("{text:?} is no time (HH:MM)"))),
    }
}

const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

fn weekday(name: &str) -> Result<Weekday, Malformed> {
    DAYS.iter()
        .find(|(day, _)| *day == name)
        .map(|(_, day)| *day)
        .ok_or_else(|| Malformed(format!("{name:?} is no weekday (mon to sun)")))
}

impl Interval {
    fn written(&self) -> String {
        let day = DAYS
            .iter()
            .find(|(_, day)| *day == self.day)
            .map_or("?", |(name, _)| name);
        format!("{day} {}-{}", self.start.strftime("%H:%M"), self.end.strftime("%H:%M"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instant given as the shop's local time in Paris.
    fn paris(text: &str) -> Timestamp {
        let datetime: jiff::civil::DateTime = text.parse().unwrap();
        datetime
            .to_zoned(TimeZone::get("Europe/Paris").unwrap())
            .unwrap()
            .timestamp()
    }

    fn shop() -> Schedule {
        let weekday = r#"["09:00-18:00"]"#;
        Schedule::parse(&format!(
            r#"{{"tz": "Europe/Paris", "week": {{"mon": {weekday}, "tue": {weekday}, "wed": {weekday},
                "thu": {weekday}, "fri": {weekday}, "sat": ["22:00-02:00"]}}, "closed": ["2026-12-25"]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn open_within_the_hours_and_closed_outside_them() {
        let shop = shop();
        // Monday 7 December 2026.
        assert!(shop.is_open(paris("2026-12-07T09:00")));
        assert!(shop.is_open(paris("2026-12-07T17:59")));
        // The minute of closing is closed.
        assert!(!shop.is_open(paris("2026-12-07T18:00")));
        assert_eq!(
            shop.next_open(paris("2026-12-07T18:00")),
            Some(paris("2026-12-08T09:00"))
        );
        assert_eq!(
            shop.next_open(paris("2026-12-07T10:00")),
            Some(paris("2026-12-07T10:00"))
        );
    }

    #[test]
    fn an_interval_past_midnight_belongs_to_its_first_day() {
        let shop = shop();
        // Saturday 12 December, 23:30 and Sunday 01:30 are open; Sunday 02:00 is not.
        assert!(shop.is_open(paris("2026-12-12T23:30")));
        assert!(shop.is_open(paris("2026-12-13T01:30")));
        assert!(!shop.is_open(paris("2026-12-13T02:00")));
        assert_eq!(
            shop.next_open(paris("2026-12-13T02:00")),
            Some(paris("2026-12-14T09:00"))
        );
    }

    #[test]
    fn a_closed_date_cancels_its_day_and_a_handoff_on_it_waits_for_the_next() {
        let shop = shop();
        // Friday 25 December 2026 is closed: the next open hour is Saturday night's.
        assert!(!shop.is_open(paris("2026-12-25T10:00")));
        assert_eq!(
            shop.next_open(paris("2026-12-25T10:00")),
            Some(paris("2026-12-26T22:00"))
        );
        // 60 office minutes from Christmas morning: Saturday 22:00 to 23:00.
        assert_eq!(
            shop.after_office_minutes(paris("2026-12-25T10:00"), 60),
            Some(paris("2026-12-26T23:00"))
        );
    }

    #[test]
    fn office_minutes_carry_over_the_closing_and_the_change_to_summer_time() {
        let shop = shop();
        // 30 minutes before closing, 60 office minutes end 30 minutes after the next opening.
        assert_eq!(
            shop.after_office_minutes(paris("2026-12-07T17:30"), 60),
            Some(paris("2026-12-08T09:30"))
        );
        // Summer time begins on Sunday 29 March 2026 at 02:00 in Paris (the
        // clock jumps to 03:00).
        let night = Schedule::parse(r#"{"tz": "Europe/Paris", "week": {"sat": ["23:00-04:00"]}}"#).unwrap();
        // 23:00 to 04:00 local across the jump is four hours, not five.
        assert_eq!(
            night.after_office_minutes(paris("2026-03-28T23:00"), 240),
            Some(paris("2026-03-29T04:00"))
        );
        // One minute more is the next Saturday's first.
        assert_eq!(
            night.after_office_minutes(paris("2026-03-28T23:00"), 241),
            Some(paris("2026-04-04T23:01"))
        );
        // And back to winter time on 25 October 2026 (03:00 is 02:00 again): six hours.
        assert_eq!(
            night.after_office_minutes(paris("2026-10-24T23:00"), 360),
            Some(paris("2026-10-25T04:00"))
        );
    }

    #[test]
    fn a_week_with_no_open_hour_says_nothing_about_a_time() {
        let closed = Schedule::parse(r#"{"tz": "Europe/Paris", "week": {"mon": []}}"#).unwrap();
        assert_eq!(closed.next_open(paris("2026-12-07T10:00")), None);
        assert_eq!(closed.after_office_minutes(paris("2026-12-07T10:00"), 1), None);
        assert!(!closed.is_open(paris("2026-12-07T10:00")));
    }

    #[test]
    fn a_malformed_setting_says_what_is_wrong() {
        for (text, said) in [
            ("", "not {"),
            ("Europe/Paris; Mon 09:00-18:00", "not {"),
            (r#"{"tz": "Mars/Olympus"}"#, "no time zone"),
            (r#"{"tz": "Europe/Paris", "week": {"mon": ["9-18"]}}"#, "no time"),
            (
                r#"{"tz": "Europe/Paris", "week": {"moon": ["09:00-18:00"]}}"#,
                "no weekday",
            ),
            (r#"{"tz": "Europe/Paris", "week": {"mon": ["25:00-26:00"]}}"#, "no time"),
            (
                r#"{"tz": "Europe/Paris", "week": {"mon": ["09:00"]}}"#,
                "not an interval",
            ),
            (r#"{"tz": "Europe/Paris", "closed": ["2026-13-40"]}"#, "no date"),
            (r#"{"tz": "Europe/Paris", "hours": {}}"#, "not {"),
            (
                r#"{"tz": "Europe/Paris", "week": {"mon": ["09:00-12:30", "12:00-18:00"]}}"#,
                "mon 09:00-12:30 and mon 12:00-18:00 overlap",
            ),
            // Past midnight into the next day's first interval.
            (
                r#"{"tz": "Europe/Paris", "week": {"mon": ["22:00-02:00"], "tue": ["01:00-03:00"]}}"#,
                "overlap",
            ),
            // Sunday night into Monday morning: the week is a circle.
            (
                r#"{"tz": "Europe/Paris", "week": {"sun": ["23:00-01:00"], "mon": ["00:30-09:00"]}}"#,
                "overlap",
            ),
        ] {
            let error = Schedule::parse(text).unwrap_err().to_string();
            assert!(error.contains(said), "{text}: {error}");
        }
        // Back to back is no overlap.
        assert!(Schedule::parse(r#"{"tz": "Europe/Paris", "week": {"mon": ["09:00-12:30", "12:30-18:00"]}}"#).is_ok());
        let wrapped = Schedule::parse(r#"{"tz": "Europe/Paris", "week": {"sun": ["10:00-24:00"]}}"#).unwrap();
        assert_eq!(wrapped.intervals.len(), 1);
        assert!(wrapped.is_open(paris("2026-12-13T23:59")));
        assert_eq!(
            in_words(wrapped.zone(), paris("2026-12-14T10:05")),
            "Mon 14 Dec 2026, 10:05 (Europe/Paris)"
        );
    }
}
