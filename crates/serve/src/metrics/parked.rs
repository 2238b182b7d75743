//! The parked-session gauges, counted from the store when `/metrics` is scraped.
//!
//! A runner's own counters only know the turns it ran; which sessions wait now is the
//! store's to say, and on a store a fleet shares (PostgreSQL) every runner must give the
//! same answer. So the gauges come from [`SessionStore::parked_summary`]: one grouped
//! query on PostgreSQL, a paged listing of the parked sessions on the other stores.
//!
//! The one thing to know: the cost is bounded twice. A summary is kept for
//! [`PARKED_FRESH`], or for [`SLOW_COUNT_FACTOR`] times as long as taking it took when that
//! is longer, and shared by every scrape in that time (one read at a time, the others wait
//! for it): a store that must read every session to find the parked ones (the filesystem
//! store) spends at most a twentieth of its time counting, however often it is scraped.
//! A listing reads at most [`PARKED_PAGES`] pages of
//! [`ListQuery::MAX_LIMIT`](archmax_vm::session::store::ListQuery::MAX_LIMIT) sessions. A
//! summary cut at that bound, or failed by the store, says so in
//! `archmax_parked_listing_complete` (0) instead of passing a part for the whole.

use std::sync::Arc;
use std::time::{Duration, Instant};

use archmax_vm::session::store::ParkedSummary;
use archmax_vm::session::{SessionStore, Status};

/// How long one summary of the parked sessions answers scrapes.
pub const PARKED_FRESH: Duration = Duration::from_secs(5);
/// A summary that took this many times less than its freshness is kept no longer.
pub const SLOW_COUNT_FACTOR: u32 = 20;
/// The most listing pages one summary reads (on a store that lists to count).
pub const PARKED_PAGES: usize = 40;

/// A parked status's channel, as the API names it.
pub fn channel(status: Status) -> &'static str {
    match status {
        Status::AwaitingDecision => "decision",
        Status::AwaitingInput => "input",
        other => other.as_str(),
    }
}

/// The last summary and when it was taken.
#[derive(Default)]
pub struct ParkedGauges {
    /// When the summary was taken, how long it stays fresh, and the summary.
    last: tokio::sync::Mutex<Option<(Instant, Duration, Arc<ParkedSummary>)>>,
}

impl ParkedGauges {
    /// A summary still fresh (see the module docs); an empty, incomplete one when the
    /// store fails.
    pub async fn current(&self, store: &dyn SessionStore) -> Arc<ParkedSummary> {
        let mut last = self.last.lock().await;
        if let Some((taken, fresh, summary)) = last.as_ref()
            && taken.elapsed() < *fresh
        {
            return Arc::clone(summary);
        }
        let started = Instant::now();
        let summary = match store.parked_summary(PARKED_PAGES).await {
            Ok(summary) => summary,
            Err(error) => {
                tracing::warn!("metrics: the store did not count the parked sessions: {error}");
                ParkedSummary::default()
            }
        };
        let summary = Arc::new(summary);
        *last = Some((Instant::now(), freshness(started.elapsed()), Arc::clone(&summary)));
        summary
    }
}

/// How long a summary that took `took` to count answers scrapes.
fn freshness(took: Duration) -> Duration {
    PARKED_FRESH.max(took.saturating_mul(SLOW_COUNT_FACTOR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_count_is_kept_twenty_times_as_long_as_it_took() {
        assert_eq!(freshness(Duration::from_millis(10)), PARKED_FRESH);
        assert_eq!(freshness(Duration::from_secs(2)), Duration::from_secs(40));
    }
}
