//! Time, behind a seam: the system clock, or a fixed instant for reproducible runs
//! (`ARCHMAX_FIXED_CLOCK=2026-01-05T09:30:00Z`, used by golden tests).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as u64).unwrap_or(0)
    }
}

/// A clock that never moves.
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0
    }
}

/// The clock the environment asks for: `ARCHMAX_FIXED_CLOCK` (RFC 3339) or the system's.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Box<dyn Clock>, String> {
    match get("ARCHMAX_FIXED_CLOCK") {
        Some(text) if !text.trim().is_empty() => {
            let (seconds, nanos) = archmax_compiler::values::parse_date_time(text.trim())
                .ok_or_else(|| format!("ARCHMAX_FIXED_CLOCK must be an RFC 3339 instant, not `{text}`"))?;
            let millis = seconds.max(0) as u64 * 1000 + u64::from(nanos / 1_000_000);
            Ok(Box::new(FixedClock(millis)))
        }
        _ => Ok(Box::new(SystemClock)),
    }
}

const WEEKDAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];

/// Civil date and time (UTC) of an instant: (year, month, day, hour, minute, second, weekday).
pub fn civil(ms: u64) -> (i64, u32, u32, u32, u32, u32, &'static str) {
    let seconds = (ms / 1000) as i64;
    let days = seconds.div_euclid(86_400);
    let in_day = seconds.rem_euclid(86_400);
    let weekday = WEEKDAYS[days.rem_euclid(7) as usize];
    // Civil-from-days (Howard Hinnant's algorithm).
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day, (in_day / 3600) as u32, ((in_day % 3600) / 60) as u32, (in_day % 60) as u32, weekday)
}

/// RFC 3339, UTC, to the second: `2026-01-05T09:30:00Z`.
pub fn rfc3339(ms: u64) -> String {
    let (year, month, day, hour, minute, second, _) = civil(ms);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// The clock line of the volatile block, rounded down to ten minutes.
pub fn clock_line(ms: u64) -> String {
    let rounded = ms - ms % 600_000;
    let (year, month, day, hour, minute, _, weekday) = civil(rounded);
    format!(
        "Current date and time: {year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC ({weekday}), rounded down to ten minutes, so it may be up to that much behind."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(civil(0).6, "Thursday");
        // 2026-11-29 is a Sunday.
        let (seconds, _) = archmax_compiler::values::parse_date_time("2026-11-29T19:27:45Z").expect("instant");
        let ms = seconds as u64 * 1000;
        assert_eq!(rfc3339(ms), "2026-11-29T19:27:45Z");
        assert!(clock_line(ms).starts_with("Current date and time: 2026-11-29 19:20 UTC (Sunday)"));
    }
}
