//! The parked-session gauges, counted from the store when `/metrics` is scraped.
//!
//! A runner's own counters only know the turns it ran; which sessions wait now is the
//! store's to say, and on a store a fleet shares (PostgreSQL) every runner must give the
//! same answer. So the gauges are read from the store's paged listing of parked sessions
//! ([`ListQuery::parked`]), which the PostgreSQL store answers with one keyset query per
//! page.
//!
//! The one thing to know: the cost is bounded twice. A tally is kept for
//! [`PARKED_FRESH`] and shared by every scrape in that time (one listing at a time, the
//! others wait for it), and one tally reads at most [`PARKED_PAGES`] pages of
//! [`ListQuery::MAX_LIMIT`] sessions. A tally cut at that bound, or failed by the store,
//! says so in `archmax_parked_listing_complete` (0) instead of passing a part for the whole.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use archmax_vm::session::store::{ListQuery, instant_ms};
use archmax_vm::session::{SessionStore, Status};

/// How long one tally of the parked sessions answers scrapes.
pub const PARKED_FRESH: Duration = Duration::from_secs(5);
/// The most listing pages one tally reads.
pub const PARKED_PAGES: usize = 40;

/// What waits, as one listing saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParkedTally {
    /// `(workflow, channel)` → root sessions parked there; the channel is `decision` or `input`.
    pub sessions: BTreeMap<(String, &'static str), u64>,
    /// Workflow → when its oldest pending decision was asked for (ms since the epoch).
    pub oldest_decision_ms: BTreeMap<String, i64>,
    /// Whether every parked session was read.
    pub complete: bool,
}

/// A parked status's channel.
fn channel(status: Status) -> Option<&'static str> {
    match status {
        Status::AwaitingDecision => Some("decision"),
        Status::AwaitingInput => Some("input"),
        _ => None,
    }
}

/// Counts the parked root sessions of `store`. A sub-workflow parked under its caller is
/// counted once, as its caller (which presents the child's park).
pub async fn tally(store: &dyn SessionStore) -> ParkedTally {
    let mut tally = ParkedTally::default();
    let mut query = ListQuery { parked: Some(true), limit: ListQuery::MAX_LIMIT, ..ListQuery::default() };
    for _ in 0..PARKED_PAGES {
        let page = match store.list_page(&query).await {
            Ok(page) => page,
            Err(error) => {
                tracing::warn!("metrics: the store did not list the parked sessions: {error}");
                return tally;
            }
        };
        for state in page.sessions.iter().filter(|state| state.head.parent.is_none()) {
            let Some(channel) = channel(state.head.status) else { continue };
            *tally.sessions.entry((state.head.workflow.clone(), channel)).or_default() += 1;
            if let Some(asked) =
                state.head.pending_decision.as_ref().and_then(|pending| instant_ms(&pending.created_at))
            {
                let oldest = tally.oldest_decision_ms.entry(state.head.workflow.clone()).or_insert(asked);
                *oldest = (*oldest).min(asked);
            }
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => {
                tally.complete = true;
                return tally;
            }
        }
    }
    tally
}

/// The last tally and when it was taken.
#[derive(Default)]
pub struct ParkedGauges {
    last: tokio::sync::Mutex<Option<(Instant, Arc<ParkedTally>)>>,
}

impl ParkedGauges {
    /// A tally at most [`PARKED_FRESH`] old.
    pub async fn current(&self, store: &dyn SessionStore) -> Arc<ParkedTally> {
        let mut last = self.last.lock().await;
        if let Some((taken, tally)) = last.as_ref()
            && taken.elapsed() < PARKED_FRESH
        {
            return Arc::clone(tally);
        }
        let tally = Arc::new(tally(store).await);
        *last = Some((Instant::now(), Arc::clone(&tally)));
        tally
    }
}
