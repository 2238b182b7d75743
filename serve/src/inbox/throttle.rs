//! Sign-in throttling: how many sign-in attempts a client address, and how many sign-ins
//! an identity, get within a window.
//!
//! A [`Throttle`] counts events per key in fixed windows ([`SIGN_IN_WINDOW`]): failed
//! sign-ins per client address ([`FAILURES_PER_CLIENT`]) and successful sign-ins per
//! identity ([`SIGN_INS_PER_IDENTITY`], which also bounds the inbox sessions one token
//! can keep in the store). Once a key has used its allowance, the next attempt is
//! answered 429 with `Retry-After` (the seconds until its window ends) before the token
//! is even looked at.
//!
//! The one thing to know: the counters are in this process's memory, not in the store.
//! Each runner throttles on its own, so behind a load balancer an attacker gets the
//! allowance once per runner; and at most [`MAX_TRACKED`] keys are tracked at once
//! (past it, windows that ended are dropped first, then the oldest), so the counters
//! cannot grow without bound.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window sign-in attempts are counted in.
pub const SIGN_IN_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failed sign-ins one client address may make per window; the next is refused.
pub const FAILURES_PER_CLIENT: u32 = 10;
/// Sign-ins one identity may make per window; the next is refused.
pub const SIGN_INS_PER_IDENTITY: u32 = 30;
/// The most keys one throttle tracks.
pub const MAX_TRACKED: usize = 10_000;

/// Counts per key in fixed windows.
pub struct Throttle {
    allowance: u32,
    window: Duration,
    counts: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Throttle {
    pub fn new(allowance: u32, window: Duration) -> Throttle {
        Throttle { allowance, window, counts: Mutex::new(HashMap::new()) }
    }

    /// `Err(retry_after)` when `key` has used its allowance in the current window.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match counts.get(key) {
            Some((started, count)) if *count >= self.allowance && now.duration_since(*started) < self.window => {
                Err(self.window.saturating_sub(now.duration_since(*started)))
            }
            _ => Ok(()),
        }
    }

    /// Counts one event of `key`.
    pub fn count(&self, key: &str, now: Instant) {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !counts.contains_key(key) && counts.len() >= MAX_TRACKED {
            counts.retain(|_, (started, _)| now.duration_since(*started) < self.window);
            if counts.len() >= MAX_TRACKED
                && let Some(oldest) = counts.iter().min_by_key(|(_, (started, _))| *started).map(|(key, _)| key.clone())
            {
                counts.remove(&oldest);
            }
        }
        let entry = counts.entry(key.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_past_its_allowance_waits_for_its_window_and_others_do_not() {
        let throttle = Throttle::new(3, Duration::from_secs(60));
        let start = Instant::now();
        for _ in 0..3 {
            assert!(throttle.check("10.0.0.1", start).is_ok());
            throttle.count("10.0.0.1", start);
        }
        let wait = throttle.check("10.0.0.1", start + Duration::from_secs(20)).expect_err("the fourth is refused");
        assert_eq!(wait, Duration::from_secs(40));
        assert!(throttle.check("10.0.0.2", start).is_ok(), "another client");
        assert!(throttle.check("10.0.0.1", start + Duration::from_secs(60)).is_ok(), "a new window");
    }

    #[test]
    fn the_tracked_keys_are_bounded() {
        let throttle = Throttle::new(1, Duration::from_secs(60));
        let now = Instant::now();
        for index in 0..MAX_TRACKED + 5 {
            throttle.count(&index.to_string(), now);
        }
        assert!(throttle.counts.lock().expect("counts").len() <= MAX_TRACKED);
    }
}
