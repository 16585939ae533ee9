//! The team's office hours (contract 32): when a person will be there, as
//! code works it out, never the model.
//!
//! One setting, `OFFICE_HOURS`: the shop's time zone first, then entries
//! separated by `;`: days and an interval (`Mon-Fri 09:00-18:00`,
//! `Sat,Sun 10:00-14:00`; an end at or before the start runs past midnight
//! into the next day, `Fri 22:00-02:00`), and the closed dates
//! (`closed 2026-12-25, 2027-01-01`). An interval belongs to the day it
//! starts on: a closed date cancels the intervals that start on it, and an
//! interval of the evening before still runs into its early hours.
//!
//! The arithmetic is `jiff`'s, on the time-zone database bundled into the
//! binary: a local time that a change to summer time skips is read as the
//! time after the gap, and one it repeats as the earlier, as Temporal does.
//! Everything here is pure: the caller gives the instant (the clock the
//! project injects).

use jiff::Timestamp;
use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;

/// How far ahead an open hour is looked for: a schedule with none in two
/// weeks (closed for a holiday season, or no interval at all) says nothing
/// about a time.
const LOOK_AHEAD_DAYS: i32 = 14;

/// The team's hours in the shop's zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    zone: TimeZone,
    intervals: Vec<Interval>,
    closed: Vec<Date>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    days: Vec<Weekday>,
    start: Time,
    end: Time,
}

/// Why a setting is not a schedule (the container stops naming it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(String);

impl Schedule {
    /// `Europe/Paris; Mon-Fri 09:00-18:00; Sat 10:00-14:00; closed 2026-12-25`.
    pub fn parse(text: &str) -> Result<Schedule, Malformed> {
        let mut parts = text.split(';').map(str::trim).filter(|part| !part.is_empty());
        let zone_name = parts.next().ok_or_else(|| Malformed("no time zone".into()))?;
        let zone = TimeZone::get(zone_name).map_err(|_| Malformed(format!("{zone_name:?} is no time zone")))?;
        let mut schedule = Schedule {
            zone,
            intervals: Vec::new(),
            closed: Vec::new(),
        };
        for part in parts {
            if let Some(dates) = part.strip_prefix("closed") {
                for date in dates.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                    let parsed: Date = date
                        .parse()
                        .map_err(|_| Malformed(format!("{date:?} is no date (YYYY-MM-DD)")))?;
                    schedule.closed.push(parsed);
                }
                continue;
            }
            let (days, hours) = part
                .split_once(' ')
                .ok_or_else(|| Malformed(format!("{part:?} is not days and hours (Mon-Fri 09:00-18:00)")))?;
            let (start, end) = hours
                .trim()
                .split_once('-')
                .ok_or_else(|| Malformed(format!("{hours:?} is not an interval (09:00-18:00)")))?;
            schedule.intervals.push(Interval {
                days: weekdays(days)?,
                start: time(start)?,
                end: time(end)?,
            });
        }
        Ok(schedule)
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
            .filter(|interval| interval.days.contains(&date.weekday()))
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

    /// The local time of `at` in the shop's zone, to the minute, as a
    /// person reads it: `Mon 09:00`.
    pub fn local(&self, at: Timestamp) -> String {
        at.to_zoned(self.zone.clone()).strftime("%a %H:%M").to_string()
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
    ("Mon", Weekday::Monday),
    ("Tue", Weekday::Tuesday),
    ("Wed", Weekday::Wednesday),
    ("Thu", Weekday::Thursday),
    ("Fri", Weekday::Friday),
    ("Sat", Weekday::Saturday),
    ("Sun", Weekday::Sunday),
];

/// `Mon`, `Mon-Fri`, `Sat,Sun`, `Fri-Mon` (a range may wrap the week).
fn weekdays(text: &str) -> Result<Vec<Weekday>, Malformed> {
    let index = |name: &str| {
        DAYS.iter()
            .position(|(day, _)| day.eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| Malformed(format!("{name:?} is no day (Mon to Sun)")))
    };
    let mut days = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (index(from)?, index(to)?);
                let mut at = from;
                loop {
                    days.push(DAYS[at].1);
                    if at == to {
                        break;
                    }
                    at = (at + 1) % 7;
                }
            }
            None => days.push(DAYS[index(part)?].1),
        }
    }
    Ok(days)
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
        Schedule::parse("Europe/Paris; Mon-Fri 09:00-18:00; Sat 22:00-02:00; closed 2026-12-25").unwrap()
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
        let night = Schedule::parse("Europe/Paris; Sat 23:00-04:00").unwrap();
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
        let closed = Schedule::parse("Europe/Paris").unwrap();
        assert_eq!(closed.next_open(paris("2026-12-07T10:00")), None);
        assert_eq!(closed.after_office_minutes(paris("2026-12-07T10:00"), 1), None);
        assert!(!closed.is_open(paris("2026-12-07T10:00")));
    }

    #[test]
    fn a_malformed_setting_says_what_is_wrong() {
        for (text, said) in [
            ("", "no time zone"),
            ("Mars/Olympus; Mon 09:00-18:00", "no time zone"),
            ("Europe/Paris; Mon 9-18", "no time"),
            ("Europe/Paris; Moon 09:00-18:00", "no day"),
            ("Europe/Paris; Mon 25:00-26:00", "no time"),
            ("Europe/Paris; closed 2026-13-40", "no date"),
            ("Europe/Paris; Mon", "not days and hours"),
        ] {
            let error = Schedule::parse(text).unwrap_err().to_string();
            assert!(error.contains(said), "{text}: {error}");
        }
        let wrapped = Schedule::parse("Europe/Paris; Fri-Mon 10:00-24:00").unwrap();
        assert_eq!(wrapped.intervals[0].days.len(), 4);
        assert!(wrapped.is_open(paris("2026-12-13T23:59")));
        assert_eq!(wrapped.local(paris("2026-12-14T10:05")), "Mon 10:05");
    }
}
