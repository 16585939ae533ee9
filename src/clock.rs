//! Wall-clock time for records: epoch milliseconds, and the RFC 3339 text
//! people read in the ledger. (Durations inside a request use tokio's clock,
//! so paused-clock tests see the same time as the code.)

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// `2026-11-30T18:47:15.123Z` for epoch milliseconds (UTC; the civil-date
/// arithmetic is Howard Hinnant's `civil_from_days`).
pub fn rfc3339(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The UTC calendar day of epoch milliseconds, `2026-11-30`.
pub fn utc_day(ms: u64) -> String {
    rfc3339(ms)[..10].to_owned()
}

/// Epoch milliseconds of `2026-11-30` (midnight UTC) or of an RFC 3339 UTC
/// time (`2026-11-30T18:47:15Z`, fractions allowed), read by the AWS SDK's
/// own parser (a day that does not exist, such as 2026-02-31, is refused);
/// `None` before 1970 or malformed.
pub fn parse_utc(text: &str) -> Option<u64> {
    use aws_smithy_types::DateTime;
    use aws_smithy_types::date_time::Format;
    let time = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    let moment = DateTime::from_str(&time, Format::DateTime).ok()?;
    u64::try_from(moment.to_millis().ok()?).ok()
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_860_000_123), "2026-11-28T10:00:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_day(1_795_860_000_123), "2026-11-28");
    }

    #[test]
    fn parses_what_it_formats() {
        for ms in [0, 951_782_400_000, 1_795_860_000_123] {
            assert_eq!(parse_utc(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_utc("2026-11-28"), Some(1_795_824_000_000));
        assert_eq!(
            parse_utc("2028-02-29"),
            Some(1_835_395_200_000),
            "a leap day that exists"
        );
        for bad in [
            "",
            "2026-13-01",
            "2026/11/28",
            "2026-11-28T25:00:00Z",
            "yesterday",
            "2026-02-31",
            "2026-02-29",
            "2026-04-31T10:00:00Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
