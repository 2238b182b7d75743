//! Value shapes shared by the compiler and the runtime: calendar dates, RFC 3339
//! instants, byte sizes. Pure functions, no allocation on the happy path.

/// Days since 1970-01-01 for a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 0,
    }
}

fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A real calendar day written `YYYY-MM-DD`: its day number.
pub fn parse_date(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let year = i64::from(digits(&text[0..4])?);
    let month = digits(&text[5..7])?;
    let day = digits(&text[8..10])?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// An RFC 3339 date-time with a mandatory `Z` or `±hh:mm` offset: seconds since the
/// epoch (UTC) and the fractional nanoseconds.
pub fn parse_date_time(text: &str) -> Option<(i64, u32)> {
    if text.len() < 20 {
        return None;
    }
    let (date, rest) = text.split_at(10);
    let days = parse_date(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let bytes = rest.as_bytes();
    if bytes.len() < 9 || bytes[2] != b':' || bytes[5] != b':' {
        return None;
    }
    let hour = digits(&rest[0..2])?;
    let minute = digits(&rest[3..5])?;
    let second = digits(&rest[6..8])?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut tail = &rest[8..];
    let mut nanos = 0u32;
    if let Some(fraction) = tail.strip_prefix('.') {
        let length = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if length == 0 {
            return None;
        }
        let mut value: u64 = 0;
        for (index, byte) in fraction.bytes().take(length).enumerate() {
            if index < 9 {
                value = value * 10 + u64::from(byte - b'0');
            }
        }
        for _ in length..9 {
            value *= 10;
        }
        nanos = u32::try_from(value).ok()?;
        tail = &fraction[length..];
    }
    let offset_seconds: i64 = match tail {
        "Z" | "z" => 0,
        _ => {
            let sign = match tail.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let offset = &tail[1..];
            if offset.len() != 5 || offset.as_bytes()[2] != b':' {
                return None;
            }
            let hours = digits(&offset[0..2])?;
            let minutes = digits(&offset[3..5])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * i64::from(hours * 3600 + minutes * 60)
        }
    };
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_seconds;
    Some((seconds, nanos))
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
    fn byte_sizes() {
        assert_eq!(parse_byte_size("2048"), Some(2048));
        assert_eq!(parse_byte_size("5MB"), Some(5 * 1024 * 1024));
        assert_eq!(parse_byte_size("10GB"), None);
    }
}
