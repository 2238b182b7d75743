//! The scheduler: waking sessions whose `resumeAt` has come.
//!
//! A session that called `archmax_wait` with a time waits for input with a `resumeAt`.
//! When that time has come, the scheduler delivers the trigger `archmax.toml` names for
//! its workflow (`[schedule.<workflow>] wake_trigger = "…"`), as `POST
//! /v1/sessions/{id}/deliver` would, through the same turn gate. A due session of a
//! workflow without a schedule is left waiting: `GET /v1/sessions?due=true` lists it for
//! whoever delivers its event.
//!
//! The one thing to know: a pass reads only the sessions that are due. On a store a
//! fleet shares (PostgreSQL), the store hands them out ([`Chore::Due`]): each due session
//! to one runner, in batches of at most [`WAKE_BATCH`], none that a runner holds. On a
//! store one process uses, the server keeps a [`DueIndex`] of resume times, fed by the
//! parks it sees happen (its `parked` events) and by a rescan of the store
//! ([`RESCAN_EVERY`], and on the first pass), which finds the sessions an earlier process
//! parked. Either way, before delivering, the session is read again: only a session still
//! waiting for input, with a resume time that has come, is woken; one parked again
//! meanwhile goes back in the index at its new time. A delivery takes the session's lease
//! and checks the park afresh, so a session is woken once even should two runners reach
//! it. A fleet is assumed to serve the same workflows: a due session of a workflow the
//! claiming runner does not schedule is left for a term, then handed out again.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Map;

use archmax_vm::DeliverRequest;
use archmax_vm::events::{Envelope, Event, Listener};
use archmax_vm::session::Status;
use archmax_vm::session::store::{Chore, ListQuery, instant_ms, resume_time_ms};

use crate::server::Server;

/// How often a pass also rescans the store for waiting sessions it was not told of.
pub const RESCAN_EVERY: Duration = Duration::from_secs(300);

/// The most due sessions one runner takes from a shared store at a time.
pub const WAKE_BATCH: usize = 32;

/// How long a wake that could not run now (busy, saturated, shutting down, a store
/// error) waits before it is tried again.
const RETRY_AFTER_MS: i64 = 1_000;

/// Resume times of waiting sessions, earliest first.
#[derive(Default)]
pub struct DueIndex {
    entries: Mutex<BTreeSet<(i64, String)>>,
    /// When the store was last rescanned (server clock, ms); `None` before the first.
    rescanned: Mutex<Option<u64>>,
}

impl DueIndex {
    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeSet<(i64, String)>> {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes that session `id` resumes at `at` (ms). Sub-workflow sessions are woken
    /// through their caller, never on their own.
    pub fn insert(&self, at: i64, id: &str) {
        if !id.contains('~') {
            self.entries().insert((at, id.to_string()));
        }
    }

    /// Takes every entry due at `now`.
    fn take_due(&self, now: i64) -> Vec<String> {
        let mut entries = self.entries();
        let later = entries.split_off(&(now.saturating_add(1), String::new()));
        let due = std::mem::replace(&mut *entries, later);
        let mut ids: Vec<String> = due.into_iter().map(|(_, id)| id).collect();
        ids.dedup();
        ids
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The listener that feeds the index from `parked` events with a resume time.
    pub fn listener(self: &Arc<Self>) -> Box<dyn Listener> {
        Box::new(DueListener(Arc::clone(self)))
    }
}

struct DueListener(Arc<DueIndex>);

impl Listener for DueListener {
    fn on_event(&mut self, envelope: &Envelope) {
        let (Some(session), Event::Parked { resume_at: Some(resume_at), .. }) = (&envelope.session_id, &envelope.event)
        else {
            return;
        };
        if let Some(at) = instant_ms(resume_at) {
            self.0.insert(at, session);
        }
    }
}

/// What became of one wake.
enum Woke {
    Delivered,
    /// Not now: tried again shortly.
    Later,
    /// Not this park: the session is no longer due, or the delivery is refused (the
    /// trigger's signature, a program no longer served). It returns to the index when
    /// it parks again.
    Dropped,
}

/// What one pass of the scheduler did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wakes {
    /// Sessions a wake trigger was delivered to.
    pub woken: Vec<String>,
    /// Due sessions of workflows with no schedule.
    pub unscheduled: Vec<String>,
}

impl Server {
    /// Delivers the wake trigger to every due session of a scheduled workflow.
    pub async fn wake_due(&self) -> Wakes {
        let now_ms = self.now_ms();
        let mut wakes = Wakes::default();
        let runnable = self.runnable_specs();
        loop {
            match self.store.claim_chores(Chore::Due { by_ms: now_ms }, &runnable, WAKE_BATCH).await {
                Ok(Some(batch)) => {
                    // The store hands out due sessions; what the parks here noted is not
                    // needed (dropped so it does not grow).
                    drop(self.due.take_due(i64::MAX));
                    let last = batch.len() < WAKE_BATCH;
                    self.wake_each(batch, now_ms, &mut wakes, false).await;
                    if last || self.gate.is_closing() {
                        return wakes;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!("the scheduler could not take the due sessions: {error}");
                    return wakes;
                }
            }
        }
        self.rescan_if_due(now_ms).await;
        let due = self.due.take_due(i64::try_from(now_ms).unwrap_or(i64::MAX));
        self.wake_each(due, now_ms, &mut wakes, true).await;
        wakes
    }

    /// Wakes each of `ids` that is still due at `now_ms`; with `indexed`, one not due yet
    /// or to be tried again goes back in the [`DueIndex`] (a shared store hands it out
    /// again by itself).
    async fn wake_each(&self, ids: Vec<String>, now_ms: u64, wakes: &mut Wakes, indexed: bool) {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        for id in ids {
            let Ok(state) = self.session(&id).await else { continue };
            // Read again: only a session still waiting, whose time has come, is woken.
            let Some(at) = resume_time_ms(&state.head).filter(|_| state.head.status == Status::AwaitingInput) else {
                continue;
            };
            if at > now {
                if indexed {
                    self.due.insert(at, &id);
                }
                continue;
            }
            let Some(schedule) = self.settings.schedules.get(&state.head.workflow) else {
                wakes.unscheduled.push(id);
                continue;
            };
            match self.wake(&state, &schedule.wake_trigger).await {
                Woke::Delivered => wakes.woken.push(id),
                Woke::Later if indexed => self.due.insert(now.saturating_add(RETRY_AFTER_MS), &id),
                Woke::Later | Woke::Dropped => {}
            }
        }
    }

    /// Reads every waiting session's resume time into the index, when the last rescan
    /// is older than [`RESCAN_EVERY`] (and on the first pass).
    async fn rescan_if_due(&self, now: u64) {
        {
            let mut rescanned = self.due.rescanned.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if rescanned.is_some_and(|last| now.saturating_sub(last) < RESCAN_EVERY.as_millis() as u64) {
                return;
            }
            *rescanned = Some(now);
        }
        let mut query = ListQuery { due_by: Some(u64::MAX), limit: ListQuery::MAX_LIMIT, ..ListQuery::default() };
        loop {
            let page = match self.store.list_page(&query).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!("the scheduler could not list the waiting sessions: {error}");
                    return;
                }
            };
            for state in &page.sessions {
                if let Some(at) = resume_time_ms(&state.head) {
                    self.due.insert(at, &state.id);
                }
            }
            match page.next {
                Some(next) => query.cursor = Some(next),
                None => return,
            }
        }
    }

    /// Delivers `trigger` to the session.
    async fn wake(&self, state: &archmax_vm::session::SessionState, trigger: &str) -> Woke {
        let id = state.id.as_str();
        let runtime = match self.runtime_for_session(state) {
            Ok(runtime) => runtime,
            Err(error) => {
                tracing::warn!(session = id, trigger, reason = error.message.as_str(), "could not wake a due session");
                return Woke::Dropped;
            }
        };
        let request = DeliverRequest {
            session: id.to_string(),
            workflow: None,
            trigger: trigger.to_string(),
            variables: Map::new(),
            message: None,
            upgrade: false,
            // The operator's own configuration names the trigger: an event that only
            // reaches a live session is declared nowhere.
            declared_only: false,
            ..DeliverRequest::default()
        };
        let running = Arc::clone(&runtime);
        let turn = Box::pin(async move { running.deliver(request).await });
        match self.admit(runtime, id, &state.head.workflow, "deliver", turn, Duration::ZERO).await {
            Ok(_) => {
                self.metrics.wakes.fetch_add(1, Ordering::Relaxed);
                tracing::info!(session = id, trigger, "woke a session whose resumeAt has come");
                Woke::Delivered
            }
            // Not now: a turn holds it (here or on another runner), the server is full or
            // stopping, or the store failed. The session is still due; try again shortly.
            Err(error)
                if matches!(
                    error.code,
                    "session.busy" | "session.conflict" | "server.saturated" | "server.shutting-down" | "store.failed"
                ) =>
            {
                Woke::Later
            }
            Err(error) => {
                tracing::warn!(
                    session = id,
                    trigger,
                    code = error.code,
                    reason = error.message.as_str(),
                    "could not wake a due session; it is woken again once it parks again"
                );
                Woke::Dropped
            }
        }
    }

    /// Runs [`Server::wake_due`] every `every` until the server stops accepting turns.
    pub async fn run_scheduler(self: Arc<Self>, every: Duration) {
        if self.settings.schedules.is_empty() {
            return;
        }
        let mut ticks = self.ticks(every);
        while ticks.next().await {
            let wakes = self.wake_due().await;
            if !wakes.unscheduled.is_empty() {
                tracing::debug!(sessions = ?wakes.unscheduled, "due sessions with no wake trigger configured");
            }
        }
    }
}
