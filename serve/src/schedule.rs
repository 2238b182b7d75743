//! The scheduler: waking sessions whose `resumeAt` has come.
//!
//! A session that called `archmax_wait` with a time waits for input with a `resumeAt`.
//! When that time has come, the scheduler delivers the trigger `archmax.toml` names for
//! its workflow (`[schedule.<workflow>] wake_trigger = "…"`), as `POST
//! /v1/sessions/{id}/deliver` would, through the same turn gate. A due session of a
//! workflow without a schedule is left waiting: `GET /v1/sessions?due=true` lists it for
//! whoever delivers its event.
//!
//! The one thing to know: several runners may share a store and all run the scheduler;
//! each delivery takes the session's lock and checks the park afresh, so exactly one
//! runner wakes a session, and the others find it busy or no longer waiting and skip it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Map;

use archmax_vm::{DeliverRequest, ErrorKind};

use crate::server::{MAX_PAGE, Server, SessionQuery};

/// What became of one wake.
enum Woke {
    Delivered,
    /// Not now (busy); the next pass tries again.
    Later,
    /// Refused (the trigger's signature, a program no longer served): not retried
    /// for this park.
    Refused,
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
    /// Delivers the wake trigger to every due session of a scheduled workflow (a
    /// delivery another runner or turn holds is skipped and retried next pass).
    pub async fn wake_due(&self) -> Wakes {
        let mut wakes = Wakes::default();
        let mut query = SessionQuery { due: true, limit: MAX_PAGE, ..SessionQuery::default() };
        loop {
            let page = match self.list(&query).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(reason = error.message.as_str(), "the scheduler could not list due sessions");
                    return wakes;
                }
            };
            for shown in page["sessions"].as_array().into_iter().flatten() {
                let (Some(id), Some(workflow)) = (shown["sessionId"].as_str(), shown["workflow"].as_str()) else {
                    continue;
                };
                let park = format!("{id}@{}", shown["park"]["since"]);
                match self.settings.schedules.get(workflow) {
                    Some(_) if self.refused(&park) => {}
                    Some(schedule) => match self.wake(id, &schedule.wake_trigger).await {
                        Woke::Delivered => wakes.woken.push(id.to_string()),
                        Woke::Later => {}
                        Woke::Refused => self.remember_refusal(park),
                    },
                    None => wakes.unscheduled.push(id.to_string()),
                }
            }
            match page["nextCursor"].as_str() {
                Some(cursor) => query.cursor = Some(cursor.to_string()),
                None => return wakes,
            }
        }
    }

    fn refused(&self, park: &str) -> bool {
        self.wake_refusals.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(park)
    }

    fn remember_refusal(&self, park: String) {
        self.wake_refusals.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(park);
    }

    /// Delivers `trigger` to session `id`.
    async fn wake(&self, id: &str, trigger: &str) -> Woke {
        let Ok(state) = self.session(id).await else { return Woke::Later };
        let runtime = match self.runtime_for_session(&state) {
            Ok(runtime) => runtime,
            Err(error) => {
                tracing::warn!(session = id, trigger, reason = error.message.as_str(), "could not wake a due session");
                return Woke::Refused;
            }
        };
        let request = DeliverRequest {
            session: state.id.to_string(),
            workflow: None,
            trigger: trigger.to_string(),
            variables: Map::new(),
            message: None,
            upgrade: false,
            // The operator's own configuration names the trigger: an event that only
            // reaches a live session is declared nowhere.
            declared_only: false,
        };
        let running = Arc::clone(&runtime);
        let turn = async move { running.deliver(request).await };
        match self.admit(runtime, id, "deliver", turn, Duration::ZERO).await {
            Ok(_) => {
                self.metrics.wakes.fetch_add(1, Ordering::Relaxed);
                tracing::info!(session = id, trigger, "woke a session whose resumeAt has come");
                Woke::Delivered
            }
            // Busy: a turn (here or on another runner) holds it; the next pass sees.
            Err(error) if error.status.as_u16() == ErrorKind::Busy.http_status() => Woke::Later,
            Err(error) => {
                tracing::warn!(
                    session = id,
                    trigger,
                    reason = error.message.as_str(),
                    "could not wake a due session; it is not retried until it parks again"
                );
                Woke::Refused
            }
        }
    }

    /// Runs [`Server::wake_due`] every `every` until the server stops accepting turns.
    pub async fn run_scheduler(self: Arc<Self>, every: Duration) {
        let mut stopping = self.stopping();
        if self.settings.schedules.is_empty() {
            return;
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stopping.changed() => return,
            }
            if *stopping.borrow() {
                return;
            }
            let wakes = self.wake_due().await;
            if !wakes.unscheduled.is_empty() {
                tracing::debug!(sessions = ?wakes.unscheduled, "due sessions with no wake trigger configured");
            }
        }
    }
}
