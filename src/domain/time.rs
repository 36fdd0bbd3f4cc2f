//! Time as recon records it: an instant in UTC, written RFC 3339 with
//! milliseconds and the `Z` suffix (`2026-12-03T08:15:02.123Z`), and a span
//! typed as `90s`, `15m`, `2h` or `3d`.
//!
//! The calendar arithmetic is the civil-from-days algorithm (Howard
//! Hinnant's), so no date crate is needed and the formatting is a pure
//! function a test can hold to known answers. The text has one fixed width
//! for every year recon can meet (0000 to 9999), so stored times sort as
//! text exactly as they sort as instants: an index on a time column is an
//! index in time order, and "older than" is a text comparison.
//!
//! Where the current time comes from is not decided here: the facade holds
//! a clock (`crate::clock`) and passes each act its time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

const MILLIS_PER_DAY: i64 = 86_400_000;

/// An instant, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// The greatest instant the fixed-width text can hold: 9999-12-31T23:59:59.999Z.
const MAX_MILLIS: i64 = 253_402_300_799_999;

impl Timestamp {
    /// The instant `millis` after the epoch, held to 0000-01-01 .. 9999-12-31.
    pub fn from_millis(millis: i64) -> Self {
        Timestamp(millis.clamp(MIN_MILLIS, MAX_MILLIS))
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    /// The instant `span` before this one.
    pub fn minus(self, span: Duration) -> Self {
        let span = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_millis(self.0.saturating_sub(span))
    }

    /// How long after `earlier` this is (zero when it is not after it).
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0 - earlier.0).unwrap_or(0))
    }

    /// Reads exactly the text [`fmt::Display`] writes; anything else is
    /// `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() != 24
            || [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')]
                .iter()
                .chain(&[(19, b'.'), (23, b'Z')])
                .any(|&(i, c)| b[i] != c)
        {
            return None;
        }
        let number = |from: usize, to: usize| -> Option<i64> {
            let digits = &text[from..to];
            digits
                .bytes()
                .all(|d| d.is_ascii_digit())
                .then(|| digits.parse().ok())
                .flatten()
        };
        let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
        let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
        let millis = number(20, 23)?;
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let days = days_from_civil(year, month, day);
        Some(Timestamp(
            days * MILLIS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + millis,
        ))
    }
}

/// The least instant the fixed-width text can hold: 0000-01-01T00:00:00.000Z.
const MIN_MILLIS: i64 = -62_167_219_200_000;

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(MILLIS_PER_DAY);
        let in_day = self.0.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let (seconds, millis) = (in_day / 1000, in_day % 1000);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a time like 2026-12-03T08:15:02.123Z"
            ))
        })
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day counted from 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The longest span `parse_span` accepts: 100 years, far past any
/// operation's age, and far from any overflow.
const MAX_SPAN_SECONDS: u64 = 100 * 366 * 86_400;

/// Reads a span typed as a whole number and one unit: `90s`, `15m`, `2h`,
/// `3d`.
pub fn parse_span(text: &str) -> Result<Duration, String> {
    let unit = text.chars().last().unwrap_or(' ');
    let seconds_per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(span_error(text)),
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(span_error(text));
    }
    let seconds = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(seconds_per))
        .filter(|s| *s <= MAX_SPAN_SECONDS)
        .ok_or_else(|| format!("{text} is longer than 100 years"))?;
    Ok(Duration::from_secs(seconds))
}

fn span_error(text: &str) -> String {
    format!(
        "{} is not a duration: a whole number and s, m, h or d (90s, 15m, 2h, 3d)",
        super::sanitize::escape(text)
    )
}

/// An age in one short word, rounded down to its largest unit: `42s`,
/// `15m`, `2h`, `3d`.
pub fn age_text(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(millis: i64, text: &str) {
        let at = Timestamp::from_millis(millis);
        assert_eq!(at.to_string(), text);
        assert_eq!(Timestamp::parse(text), Some(at));
    }

    #[test]
    fn times_are_written_in_utc_with_milliseconds_and_z() {
        check(0, "1970-01-01T00:00:00.000Z");
        check(1, "1970-01-01T00:00:00.001Z");
        check(-1, "1969-12-31T23:59:59.999Z");
        check(951_782_400_000, "2000-02-29T00:00:00.000Z");
        check(1_796_285_702_123, "2026-12-03T08:15:02.123Z");
        check(4_107_542_399_999, "2100-02-28T23:59:59.999Z");
        check(MAX_MILLIS, "9999-12-31T23:59:59.999Z");
        check(MIN_MILLIS, "0000-01-01T00:00:00.000Z");
        assert_eq!(Timestamp::from_millis(i64::MAX).millis(), MAX_MILLIS);
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        for days in -146_097..146_097 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert!((1..=days_in_month(y, m)).contains(&d));
        }
    }

    #[test]
    fn only_the_written_form_parses() {
        for bad in [
            "",
            "2026-12-03T08:15:02Z",
            "2026-12-03T08:15:02.123",
            "2026-12-03 08:15:02.123Z",
            "2026-12-03T08:15:02.123+00:00",
            "2026-13-03T08:15:02.123Z",
            "2026-02-29T08:15:02.123Z",
            "2026-12-03T24:00:00.000Z",
            "2026-12-03T08:60:02.123Z",
            "+026-12-03T08:15:02.123Z",
            "2026-12-03T08:15:02.12aZ",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad:?}");
        }
        let text = "\"2026-12-03T08:15:02.123Z\"";
        let at: Timestamp = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&at).unwrap(), text);
    }

    #[test]
    fn spans_are_a_number_and_a_unit() {
        assert_eq!(parse_span("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_span("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_span("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_span("3d"), Ok(Duration::from_secs(259_200)));
        assert_eq!(parse_span("0s"), Ok(Duration::ZERO));
        for bad in [
            "",
            "s",
            "15",
            "1.5h",
            "-2h",
            "+2h",
            "2 h",
            "2H",
            "2w",
            "99999999999999999999d",
        ] {
            assert!(parse_span(bad).is_err(), "{bad:?}");
        }
        assert!(parse_span("36600d").is_ok() && parse_span("36601d").is_err());
    }

    #[test]
    fn ages_read_in_their_largest_unit() {
        let text = |s| age_text(Duration::from_secs(s));
        assert_eq!(
            [
                text(0),
                text(59),
                text(60),
                text(3599),
                text(3600),
                text(86_399),
                text(86_400)
            ],
            ["0s", "59s", "1m", "59m", "1h", "23h", "1d"]
        );
    }
}
