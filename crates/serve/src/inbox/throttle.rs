//! Sign-in throttling: how many sign-in attempts a client, and how many sign-ins an
//! identity, get within a window.
//!
//! A [`Throttle`] counts events per key in fixed windows ([`SIGN_IN_WINDOW`]): sign-in
//! attempts whose token was refused, per client ([`FAILURES_PER_CLIENT`]; the client is
//! the peer's IPv4 address or IPv6 /64, as the connection cap groups peers), and
//! successful sign-ins per identity ([`SIGN_INS_PER_IDENTITY`]). Once a key has used its
//! allowance, the next attempt is answered 429 with `Retry-After` (the seconds until its
//! window ends) before the token is even looked at.
//!
//! Checking and counting are one step: [`Throttle::attempt`] counts the attempt before
//! the token is tried and hands back an [`Attempt`] that gives the count back when
//! dropped unless [kept](Attempt::keep). So attempts sent in parallel are each counted
//! before any of them is tried, and no more than the allowance get through; a sign-in
//! that turns out not to be a failure (a good token, a refused form) is refunded.
//!
//! The one thing to know: the counters are in this process's memory, not in the store.
//! Each runner throttles on its own, so behind a load balancer an attacker gets the
//! allowance once per runner; and at most [`MAX_TRACKED`] keys are tracked at once. Past
//! it, windows that ended are dropped first, then the oldest key that is not throttled,
//! and only when every tracked key is throttled the oldest of them: filling the table
//! with fresh keys does not free a throttled one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window sign-in attempts are counted in.
pub const SIGN_IN_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failed sign-ins one client may make per window; the next is refused.
pub const FAILURES_PER_CLIENT: u32 = 10;
/// Sign-ins one identity may make per window; the next is refused.
pub const SIGN_INS_PER_IDENTITY: u32 = 30;
/// The most keys one throttle tracks.
pub const MAX_TRACKED: usize = 10_000;

/// Counts per key in fixed windows.
pub struct Throttle {
    allowance: u32,
    window: Duration,
    /// Per key: when its window started, and the events counted in it.
    counts: Mutex<HashMap<String, (Instant, u32)>>,
}

/// One counted attempt: given back when dropped, unless [`Attempt::keep`] was called.
#[must_use = "an attempt is refunded when dropped"]
pub struct Attempt<'a> {
    throttle: &'a Throttle,
    key: String,
    window_started: Instant,
    kept: bool,
}

impl Attempt<'_> {
    /// Keeps the attempt counted (it was what the throttle counts).
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.throttle.refund(&self.key, self.window_started);
        }
    }
}

impl Throttle {
    pub fn new(allowance: u32, window: Duration) -> Throttle {
        Throttle { allowance, window, counts: Mutex::new(HashMap::new()) }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u32)>> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts an attempt of `key`; `Err(retry_after)` (and nothing counted) when `key`
    /// has used its allowance in the current window.
    pub fn attempt(&self, key: &str, now: Instant) -> Result<Attempt<'_>, Duration> {
        let mut counts = self.counts();
        if !counts.contains_key(key) && counts.len() >= MAX_TRACKED {
            self.make_room(&mut counts, now);
        }
        let entry = counts.entry(key.to_string()).or_insert((now, 0));
        let elapsed = now.saturating_duration_since(entry.0);
        if elapsed >= self.window {
            *entry = (now, 0);
        } else if entry.1 >= self.allowance {
            return Err(self.window.saturating_sub(elapsed));
        }
        entry.1 = entry.1.saturating_add(1);
        Ok(Attempt { throttle: self, key: key.to_string(), window_started: entry.0, kept: false })
    }

    /// Gives back one attempt of `key` counted in the window that started at `started`.
    fn refund(&self, key: &str, started: Instant) {
        let mut counts = self.counts();
        if let Some(entry) = counts.get_mut(key)
            && entry.0 == started
        {
            entry.1 = entry.1.saturating_sub(1);
        }
    }

    /// Frees one slot of a full table: windows that ended go first, then the oldest key
    /// that is not throttled; the oldest throttled key only when every key is throttled.
    fn make_room(&self, counts: &mut HashMap<String, (Instant, u32)>, now: Instant) {
        counts.retain(|_, (started, _)| now.saturating_duration_since(*started) < self.window);
        if counts.len() < MAX_TRACKED {
            return;
        }
        let oldest = |throttled: bool| {
            counts
                .iter()
                .filter(|(_, (_, count))| (*count >= self.allowance) == throttled)
                .min_by_key(|(_, (started, _))| *started)
                .map(|(key, _)| key.clone())
        };
        if let Some(key) = oldest(false).or_else(|| oldest(true)) {
            counts.remove(&key);
        }
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
            throttle.attempt("10.0.0.1", start).expect("within the allowance").keep();
        }
        let wait = throttle.attempt("10.0.0.1", start + Duration::from_secs(20)).err().expect("the fourth is refused");
        assert_eq!(wait, Duration::from_secs(40));
        assert!(throttle.attempt("10.0.0.2", start).is_ok(), "another client");
        assert!(throttle.attempt("10.0.0.1", start + Duration::from_secs(60)).is_ok(), "a new window");
    }

    #[test]
    fn attempts_in_flight_are_counted_before_they_end_and_a_dropped_one_is_refunded() {
        let throttle = Throttle::new(3, Duration::from_secs(60));
        let now = Instant::now();
        let in_flight: Vec<Attempt<'_>> =
            (0..3).map(|_| throttle.attempt("10.0.0.1", now).expect("within the allowance")).collect();
        assert!(throttle.attempt("10.0.0.1", now).is_err(), "a fourth attempt while three are in flight");
        drop(in_flight);
        for _ in 0..3 {
            throttle.attempt("10.0.0.1", now).expect("the three were refunded").keep();
        }
        assert!(throttle.attempt("10.0.0.1", now).is_err(), "three kept");
    }

    #[test]
    fn the_tracked_keys_are_bounded() {
        let throttle = Throttle::new(1, Duration::from_secs(60));
        let now = Instant::now();
        for index in 0..MAX_TRACKED + 5 {
            throttle.attempt(&index.to_string(), now).expect("a fresh key").keep();
        }
        assert!(throttle.counts().len() <= MAX_TRACKED);
    }

    #[test]
    fn filling_the_tracked_keys_does_not_free_a_throttled_key() {
        let throttle = Throttle::new(2, Duration::from_secs(60));
        let now = Instant::now();
        for _ in 0..2 {
            throttle.attempt("attacker", now).expect("within the allowance").keep();
        }
        assert!(throttle.attempt("attacker", now).is_err());
        for index in 0..MAX_TRACKED {
            // Fresh keys, each one failure short of its allowance, as many as the table holds.
            throttle.attempt(&index.to_string(), now + Duration::from_millis(1)).expect("a fresh key").keep();
        }
        assert!(throttle.attempt("attacker", now + Duration::from_millis(2)).is_err(), "still throttled");
    }
}
