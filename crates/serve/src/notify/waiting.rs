//! `waiting` notifications: a decision pending longer than a notifier's `waiting_after`.
//!
//! A periodic scan lists the sessions awaiting a decision (one page at a time, in the
//! store's own filtered listing) and, for each notifier that wants `waiting` for the
//! session's workflow, compares the decision's `createdAt` with the threshold. The scan
//! runs every quarter of the shortest threshold, between [`MIN_SCAN`] and [`MAX_SCAN`].
//!
//! The one thing to know: **one notification per park, whatever the number of runners**.
//! Before a `waiting` notification is queued, the runner claims a shared record in the
//! session store ([`RecordKind::NotifyWait`], keyed by a digest of the notifier, the
//! session and the decision's number, kept [`CLAIM_KEPT_MS`]); of several runners on one
//! store exactly one wins the claim, and a runner that restarts finds it already taken.
//! A new park is a new decision number, so it is notified again. A claim is never given
//! back: a delivery that then fails is counted and logged, not sent by another runner.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use archmax_config::settings::notify::NotifyEvent;
use archmax_vm::session::records::{Record, RecordKind};
use archmax_vm::session::store::{ListQuery, instant_ms};
use archmax_vm::session::{SessionState, Status};

use super::Notification;
use crate::server::Server;

/// The scan's shortest and longest period.
pub const MIN_SCAN: Duration = Duration::from_millis(250);
pub const MAX_SCAN: Duration = Duration::from_secs(60);
/// How long a claim is kept: a decision still pending after that is notified again.
pub const CLAIM_KEPT_MS: u64 = 30 * 24 * 3600 * 1000;
/// Sessions read per page of the scan.
const PAGE: usize = 200;
/// Claims this runner remembers having settled, so it does not ask the store again.
const SETTLED_KEPT: usize = 100_000;

/// The claim key of one notifier's `waiting` notification for one park.
fn claim_key(notifier: &str, session: &str, decision: u64) -> String {
    let mut digest = Sha256::new();
    for part in [notifier.as_bytes(), b"\0", session.as_bytes(), b"\0", decision.to_string().as_bytes()] {
        digest.update(part);
    }
    archmax_program::hex::hex(&digest.finalize())
}

/// How often to scan for the shortest threshold among `thresholds_ms`; `None` when no
/// notifier wants `waiting`.
pub fn scan_period(thresholds_ms: impl Iterator<Item = u64>) -> Option<Duration> {
    thresholds_ms.min().map(|shortest| Duration::from_millis(shortest / 4).clamp(MIN_SCAN, MAX_SCAN))
}

impl Server {
    /// Scans for decisions waiting past their notifiers' thresholds every
    /// [`scan_period`], until the server stops accepting turns.
    pub async fn run_waiting_scan(self: Arc<Self>) {
        let Some(every) = scan_period(self.notify.waiting().map(|notifier| notifier.waiting_after_ms)) else { return };
        let mut ticks = self.ticks(every);
        let mut settled = HashSet::new();
        while ticks.next().await {
            if settled.len() > SETTLED_KEPT {
                settled.clear();
            }
            self.notify_waiting(&mut settled).await;
        }
    }

    /// One pass: queues a `waiting` notification for each decision past a threshold whose
    /// claim this runner wins; returns how many were queued. `settled` holds the claim
    /// keys this runner already won or lost.
    pub async fn notify_waiting(&self, settled: &mut HashSet<String>) -> usize {
        let mut queued = 0;
        let mut cursor = None;
        loop {
            let query = ListQuery {
                cursor,
                limit: PAGE,
                workflow: None,
                status: Some(Status::AwaitingDecision),
                parked: None,
                due_by: None,
            };
            let page = match self.store.list_page(&query).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!("the waiting-decision scan could not list the parked sessions: {error}");
                    return queued;
                }
            };
            for session in &page.sessions {
                queued += self.notify_one_waiting(session, settled).await;
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return queued,
            }
        }
    }

    async fn notify_one_waiting(&self, session: &SessionState, settled: &mut HashSet<String>) -> usize {
        let id = session.id.as_str();
        let Some(pending) = &session.head.pending_decision else { return 0 };
        // A child's decision is presented, and notified, on its root.
        if id.contains('~') {
            return 0;
        }
        let Some(created_ms) = instant_ms(&pending.created_at).and_then(|ms| u64::try_from(ms).ok()) else { return 0 };
        let now_ms = self.now_ms();
        let mut queued = 0;
        for notifier in self.notify.waiting() {
            let due = created_ms.saturating_add(notifier.waiting_after_ms) <= now_ms;
            if !due || !notifier.wants(NotifyEvent::Waiting, &session.head.workflow) {
                continue;
            }
            let key = claim_key(&notifier.name, id, pending.seq);
            if !settled.insert(key.clone()) {
                continue;
            }
            let record = Record {
                kind: RecordKind::NotifyWait,
                key,
                value: Vec::new(),
                expires_ms: now_ms.saturating_add(CLAIM_KEPT_MS),
            };
            match self.store.claim_record(&record, now_ms).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    // Not settled: the next pass tries again.
                    settled.remove(&record.key);
                    tracing::warn!(
                        notifier = notifier.name.as_str(),
                        session = id,
                        "the waiting notification could not be claimed in the store: {error}"
                    );
                    continue;
                }
            }
            self.notify.notify_one(
                &notifier.name,
                &Notification {
                    event: NotifyEvent::Waiting,
                    session: id.to_string(),
                    workflow: session.head.workflow.clone(),
                    status: session.head.status.as_str().to_string(),
                    state: Some(pending.state.clone()),
                    awaiting: Some("decision".to_string()),
                    reason: pending.title.clone(),
                    code: None,
                    waiting_since: Some(pending.created_at.clone()),
                    at_ms: now_ms,
                },
            );
            queued += 1;
        }
        queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_runs_every_quarter_of_the_shortest_threshold_within_its_bounds() {
        assert_eq!(scan_period([1_800_000, 60_000].into_iter()), Some(Duration::from_secs(15)));
        assert_eq!(scan_period([1000].into_iter()), Some(MIN_SCAN));
        assert_eq!(scan_period([7 * 86_400_000].into_iter()), Some(MAX_SCAN));
        assert_eq!(scan_period(std::iter::empty()), None);
    }

    #[test]
    fn a_claim_key_is_a_plain_record_key_apart_for_each_notifier_session_and_park() {
        let key = claim_key("ops", "s/1~2", 3);
        assert!(archmax_vm::session::records::check_record_key(RecordKind::NotifyWait, &key).is_ok());
        assert_ne!(key, claim_key("ops", "s/1~2", 4));
        assert_ne!(key, claim_key("team", "s/1~2", 3));
    }
}
