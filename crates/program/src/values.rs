//! Value shapes shared by the compiler and the runtime: calendar dates, RFC 3339
//! instants, byte sizes.
//!
//! The one thing to know: the grammar of a date or an instant is checked here, by hand
//! and strictly (`YYYY-MM-DD`; a date-time with seconds and a mandatory `Z` or `±hh:mm`
//! offset), and every calendar question (is it a real day, which instant is it, what
//! day is an instant on) is answered by `jiff`. An instant outside `jiff`'s range
//! (roughly years -9999 to 9999) is not an instant at all: parsing refuses it, and
//! formatting clamps to the range's ends.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::Offset;
use jiff::{Timestamp, ToSpan, Unit};

/// Day 0 of the day numbers dates are stored as.
pub const EPOCH: Date = Date::constant(1970, 1, 1);

/// Days since 1970-01-01 of a calendar day.
pub fn day_number(date: Date) -> i64 {
    date.since((Unit::Day, EPOCH)).map(|span| i64::from(span.get_days())).unwrap_or(0)
}

/// The calendar day of a day number; `None` outside the supported range.
pub fn date_of_day(day: i64) -> Option<Date> {
    let span = i32::try_from(day).ok()?.days();
    EPOCH.checked_add(span).ok()
}

/// The instant `ms` milliseconds after the epoch, clamped to the supported range.
pub fn instant(ms: u64) -> Timestamp {
    i64::try_from(ms).ok().and_then(|ms| Timestamp::from_millisecond(ms).ok()).unwrap_or(Timestamp::MAX)
}

/// The UTC civil date and time of an instant given in milliseconds since the epoch.
pub fn utc(ms: u64) -> DateTime {
    Offset::UTC.to_datetime(instant(ms))
}

/// The UTC civil date and time of an instant given in seconds since the epoch (negative
/// before it), clamped to the supported range.
pub fn utc_second(seconds: i64) -> DateTime {
    let at = Timestamp::from_second(seconds).unwrap_or(if seconds < 0 { Timestamp::MIN } else { Timestamp::MAX });
    Offset::UTC.to_datetime(at)
}

/// RFC 3339 in UTC to the second: `2026-01-05T09:30:00Z`.
pub fn rfc3339_utc(at: DateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// A calendar day as `YYYY-MM-DD`.
pub fn format_date(date: Date) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A real calendar day written `YYYY-MM-DD`.
pub fn parse_calendar_date(text: &str) -> Option<Date> {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let year = i16::try_from(digits(&text[0..4])?).ok()?;
    let month = i8::try_from(digits(&text[5..7])?).ok()?;
    let day = i8::try_from(digits(&text[8..10])?).ok()?;
    Date::new(year, month, day).ok()
}

/// A real calendar day written `YYYY-MM-DD`: its day number.
pub fn parse_date(text: &str) -> Option<i64> {
    parse_calendar_date(text).map(day_number)
}

/// The fractional seconds after a `.`: nanoseconds (digits past the ninth are dropped)
/// and the rest of the text.
fn fraction(text: &str) -> Option<(u32, &str)> {
    let Some(fraction) = text.strip_prefix('.') else {
        return Some((0, text));
    };
    let length = fraction.bytes().take_while(u8::is_ascii_digit).count();
    if length == 0 {
        return None;
    }
    let kept = &fraction[..length.min(9)];
    let nanos = digits(kept)? * 10u32.pow(9 - kept.len() as u32);
    Some((nanos, &fraction[length..]))
}

/// `Z`, `z` or `±hh:mm` (hours to 23, minutes to 59).
fn offset(text: &str) -> Option<Offset> {
    if matches!(text, "Z" | "z") {
        return Some(Offset::UTC);
    }
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let offset = &text[1..];
    if offset.len() != 5 || offset.as_bytes()[2] != b':' {
        return None;
    }
    let hours = digits(&offset[0..2])?;
    let minutes = digits(&offset[3..5])?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    Offset::from_seconds(sign * i32::try_from(hours * 3600 + minutes * 60).ok()?).ok()
}

/// An RFC 3339 date-time with a mandatory `Z` or `±hh:mm` offset: seconds since the
/// epoch (UTC) and the fractional nanoseconds. A leap second (`:60`) reads as the first
/// second of the next minute.
pub fn parse_date_time(text: &str) -> Option<(i64, u32)> {
    if text.len() < 20 || !text.is_char_boundary(10) {
        return None;
    }
    let (date, rest) = text.split_at(10);
    let date = parse_calendar_date(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let bytes = rest.as_bytes();
    if bytes.len() < 9 || bytes[2] != b':' || bytes[5] != b':' || !rest.is_char_boundary(8) {
        return None;
    }
    let hour = digits(&rest[0..2])?;
    let minute = digits(&rest[3..5])?;
    let second = digits(&rest[6..8])?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let (nanos, tail) = fraction(&rest[8..])?;
    let offset = offset(tail)?;
    let leap = i64::from(second == 60);
    let time = Time::new(hour as i8, minute as i8, second.min(59) as i8, 0).ok()?;
    let at = offset.to_timestamp(date.to_datetime(time)).ok()?;
    Some((at.as_second() + leap, nanos))
}

/// `maxSize`: bytes, or `<n>KB` / `<n>MB` (powers of 1024).
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let (number, unit) = if let Some(number) = text.strip_suffix("KB") {
        (number, 1024)
    } else if let Some(number) = text.strip_suffix("MB") {
        (number, 1024 * 1024)
    } else {
        (text, 1)
    };
    let value: u64 = number.trim().parse().ok()?;
    value.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_real_days() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert!(parse_date("2024-02-29").is_some());
        assert!(parse_date("2026-02-29").is_none());
        assert!(parse_date("2026-13-01").is_none());
        assert!(parse_date("2026-1-01").is_none());
    }

    #[test]
    fn date_times_need_an_offset() {
        assert_eq!(parse_date_time("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(parse_date_time("1970-01-01T01:00:00+01:00"), Some((0, 0)));
        assert_eq!(parse_date_time("1970-01-01T00:00:00.5Z"), Some((0, 500_000_000)));
        assert!(parse_date_time("2026-01-01T10:00:00").is_none());
        assert!(parse_date_time("2026-01-01").is_none());
    }

    #[test]
    fn leap_days_follow_the_gregorian_rules() {
        assert!(parse_date("2000-02-29").is_some());
        assert!(parse_date("1900-02-29").is_none());
        assert!(parse_date("2100-02-29").is_none());
        assert_eq!(parse_date("2024-03-01").zip(parse_date("2024-02-28")).map(|(a, b)| a - b), Some(2));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("0000-01-01"), Some(-719_528));
        assert_eq!(date_of_day(-719_528).map(|date| date.year()), Some(0));
    }

    #[test]
    fn offsets_move_the_instant_and_malformed_ones_are_refused() {
        assert_eq!(parse_date_time("2026-01-05T09:30:00+05:30"), Some((1_767_585_600, 0)));
        assert_eq!(parse_date_time("2026-01-05T04:00:00Z"), Some((1_767_585_600, 0)));
        assert_eq!(parse_date_time("2026-01-04T23:59:59-04:00"), parse_date_time("2026-01-05T03:59:59Z"));
        assert_eq!(parse_date_time("2026-01-05t04:00:00z"), Some((1_767_585_600, 0)));
        assert_eq!(parse_date_time("2026-01-05 04:00:00.123456789123Z"), Some((1_767_585_600, 123_456_789)));
        assert!(parse_date_time("2026-01-05T04:00:00+24:00").is_none());
        assert!(parse_date_time("2026-01-05T04:00:00+0530").is_none());
        assert!(parse_date_time("2026-01-05T04:00:00.Z").is_none());
        assert!(parse_date_time("2026-01-05T24:00:00Z").is_none());
    }

    #[test]
    fn a_leap_second_is_the_next_minute() {
        assert_eq!(
            parse_date_time("2016-12-31T23:59:60Z").map(|(seconds, _)| seconds),
            parse_date_time("2017-01-01T00:00:00Z").map(|(seconds, _)| seconds)
        );
    }

    #[test]
    fn instants_beyond_the_supported_range_are_refused_not_wrapped() {
        assert!(parse_date_time("9999-12-31T23:59:59Z").is_none());
        assert!(parse_date_time("9999-01-01T00:00:00Z").is_some());
        assert!(parse_date_time("0000-01-01T00:00:00Z").is_some());
        assert!(parse_date_time("2026-01-05T04:00:00Ω").is_none());
        assert!(parse_date_time("2026-01-05T04:0ΩΩΩΩΩΩ").is_none());
        assert_eq!(utc(u64::MAX).year(), 9999);
        assert_eq!(utc(0).year(), 1970);
        assert_eq!(rfc3339_utc(utc_second(-1)), "1969-12-31T23:59:59Z");
        assert_eq!(utc_second(i64::MIN).year(), -9999);
        assert_eq!(date_of_day(-1).map(format_date).as_deref(), Some("1969-12-31"));
        assert_eq!(date_of_day(i64::MAX), None);
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_byte_size("2048"), Some(2048));
        assert_eq!(parse_byte_size("5MB"), Some(5 * 1024 * 1024));
        assert_eq!(parse_byte_size("10GB"), None);
    }
}
