//! Time, behind a seam: the system clock, or a fixed instant for reproducible runs
//! (`ARCHMAX_FIXED_CLOCK=2026-01-05T09:30:00Z`, used by golden tests).

use std::time::{SystemTime, UNIX_EPOCH};

use archmax_program::values::{rfc3339_utc, utc};

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
            let (seconds, nanos) = archmax_program::values::parse_date_time(text.trim())
                .ok_or_else(|| format!("ARCHMAX_FIXED_CLOCK must be an RFC 3339 instant, not `{text}`"))?;
            let millis = seconds.max(0) as u64 * 1000 + u64::from(nanos / 1_000_000);
            Ok(Box::new(FixedClock(millis)))
        }
        _ => Ok(Box::new(SystemClock)),
    }
}

/// RFC 3339, UTC, to the second: `2026-01-05T09:30:00Z`. An instant past the
/// calendar's range prints as its last second.
pub fn rfc3339(ms: u64) -> String {
    rfc3339_utc(utc(ms))
}

/// The clock line of the volatile block, rounded down to ten minutes.
pub(crate) fn clock_line(ms: u64) -> String {
    let at = utc(ms - ms % 600_000);
    format!(
        "Current date and time: {:04}-{:02}-{:02} {:02}:{:02} UTC ({}), rounded down to ten minutes, so it may be up to that much behind.",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.strftime("%A")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert!(clock_line(0).contains("(Thursday)"));
        // 2026-11-29 is a Sunday.
        let (seconds, _) = archmax_program::values::parse_date_time("2026-11-29T19:27:45Z").expect("instant");
        let ms = seconds as u64 * 1000;
        assert_eq!(rfc3339(ms), "2026-11-29T19:27:45Z");
        assert!(clock_line(ms).starts_with("Current date and time: 2026-11-29 19:20 UTC (Sunday)"));
    }

    #[test]
    fn leap_days_and_year_ends_print_as_written() {
        for text in ["2024-02-29T23:59:59Z", "2000-02-29T00:00:00Z", "1999-12-31T23:59:59Z", "2001-01-01T00:00:00Z"] {
            let (seconds, _) = archmax_program::values::parse_date_time(text).expect("instant");
            assert_eq!(rfc3339(seconds as u64 * 1000 + 999), text);
        }
    }

    #[test]
    fn an_instant_past_the_calendar_prints_its_last_second() {
        assert!(rfc3339(u64::MAX).starts_with("9999-12-"));
        assert!(clock_line(u64::MAX).starts_with("Current date and time: 9999-12-"));
    }
}
