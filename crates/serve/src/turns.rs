//! The turn gate: one turn per session at a time, a bound on turns in flight with a
//! bounded queue behind it, and a drain for graceful shutdown.
//!
//! The one thing to know: a turn runs in its own task, so it finishes (every step
//! committed) even when the client that asked for it hangs up; the request only waits
//! for it as long as its `?wait=` allows. At shutdown, a turn still running when the
//! grace has passed is cut ([`TurnGate::cut_remaining`]): its task is dropped while the
//! process still runs, so its session writer gives the session back (a PostgreSQL lease
//! is released, and another runner continues the turn at once rather than when the lease
//! would have run out). The next runner resumes it from its last committed step.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinSet;

use archmax_vm::{Outcome, RunError};

use crate::error::ApiError;
use crate::hub::root_session;
use crate::metrics::Metrics;

/// How many turns run at once, and how many may wait for a slot.
#[derive(Clone, Copy, Debug)]
pub struct TurnLimits {
    pub in_flight: usize,
    pub queued: usize,
}

impl Default for TurnLimits {
    fn default() -> TurnLimits {
        TurnLimits { in_flight: 64, queued: 1024 }
    }
}

/// Admits turns.
pub struct TurnGate {
    limits: TurnLimits,
    slots: Arc<Semaphore>,
    /// Root sessions with a turn admitted and not yet ended.
    busy: Mutex<HashSet<String>>,
    metrics: Arc<Metrics>,
    closing: AtomicBool,
    ended: Notify,
    /// The turns' tasks, for [`TurnGate::cut_remaining`]; those that ended are reaped as
    /// new ones are admitted.
    tasks: Mutex<JoinSet<()>>,
}

/// A turn's result, when its task ends.
pub type TurnResult = Result<Outcome, RunError>;

/// A turn to admit. A turn's future is large (the interpreter's whole state machine), so
/// it is boxed once where it is made, and admitting and spawning it move a pointer.
pub type TurnFuture = std::pin::Pin<Box<dyn Future<Output = TurnResult> + Send + 'static>>;

/// Releases a session's claim when the turn's task ends (or is dropped at exit).
struct Claim {
    gate: Arc<TurnGate>,
    session: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.gate.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.session);
        self.gate.metrics.turn_released(&self.session);
        self.gate.ended.notify_waiters();
    }
}

impl TurnGate {
    pub fn new(limits: TurnLimits, metrics: Arc<Metrics>) -> Arc<TurnGate> {
        Arc::new(TurnGate {
            limits,
            slots: Arc::new(Semaphore::new(limits.in_flight.max(1))),
            busy: Mutex::new(HashSet::new()),
            metrics,
            closing: AtomicBool::new(false),
            ended: Notify::new(),
            tasks: Mutex::new(JoinSet::new()),
        })
    }

    /// Admits a turn of `workflow` on `session` and runs it in its own task; the receiver
    /// gets its result. Refused: 503 while shutting down, 409 while the session has a
    /// turn, 429 when the queue is full.
    pub fn admit(
        self: &Arc<TurnGate>,
        session: &str,
        workflow: &str,
        disposition: &'static str,
        turn: TurnFuture,
    ) -> Result<oneshot::Receiver<TurnResult>, ApiError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server.shutting-down",
                "the server is shutting down; try the next one",
            )
            .retry_after(1));
        }
        let root = root_session(session).to_string();
        {
            let mut busy = self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if busy.contains(&root) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "session.busy",
                    format!("session `{root}` is running a turn; try again when it ends"),
                )
                .retry_after(1));
            }
            let queued = self.metrics.queued.load(Ordering::SeqCst) as usize;
            if queued >= self.limits.queued {
                self.metrics.rejected_saturated.fetch_add(1, Ordering::Relaxed);
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "server.saturated",
                    format!("{queued} turns are waiting for a slot; try again shortly"),
                )
                .retry_after(1));
            }
            busy.insert(root.clone());
            self.metrics.turn_admitted(&root, workflow);
        }
        let claim = Claim { gate: Arc::clone(self), session: root };
        let (sender, receiver) = oneshot::channel();
        let gate = Arc::clone(self);
        self.metrics.queued.fetch_add(1, Ordering::SeqCst);
        // The turn runs in the span of whoever admitted it (a request's), its parent.
        let spawned = tracing::Instrument::in_current_span(async move {
            let claim = claim;
            let slot = Arc::clone(&gate.slots).acquire_owned().await;
            gate.metrics.queued.fetch_sub(1, Ordering::SeqCst);
            let Ok(slot) = slot else {
                return;
            };
            gate.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
            let began = Instant::now();
            let result = turn.await;
            if let Ok(outcome) = &result {
                gate.metrics.observe_turn(&outcome.workflow, disposition, outcome.status.as_str(), began.elapsed());
            }
            gate.metrics.in_flight.fetch_sub(1, Ordering::SeqCst);
            // The session and the slot are free before anyone hears the turn ended: a
            // caller's next request on the session is never refused as busy.
            drop(slot);
            drop(claim);
            let _ = sender.send(result);
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while tasks.try_join_next().is_some() {}
        tasks.spawn(spawned);
        Ok(receiver)
    }

    /// Cuts the turns still running (after the grace of a shutdown): drops their tasks
    /// and waits, at most `bound`, for the drops to end, so each session's writer has
    /// given its session back before the process exits. True when every task ended.
    pub async fn cut_remaining(&self, bound: Duration) -> bool {
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        if tasks.is_empty() {
            return true;
        }
        tasks.abort_all();
        tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await.is_ok()
    }

    /// Refuses new turns from now on.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// How many sessions have a turn admitted (queued or running).
    pub fn admitted(&self) -> usize {
        self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Waits until every admitted turn ended, or `grace` passed; true when all ended.
    pub async fn drain(&self, grace: Duration) -> bool {
        let all_ended = async {
            loop {
                let ended = self.ended.notified();
                if self.admitted() == 0 {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(grace, all_ended).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_is_free_again_by_the_time_its_turn_is_answered() {
        let gate = TurnGate::new(TurnLimits::default(), Arc::new(Metrics::default()));
        for round in 0..200 {
            let ended = gate
                .admit(
                    "s1",
                    "w",
                    "turn",
                    Box::pin(async { Err(archmax_vm::RunError::UnknownSession("s1".to_string())) }),
                )
                .unwrap_or_else(|error| panic!("round {round}: {}", error.message));
            assert!(ended.await.expect("an answer").is_err());
            // The very next request on the session is admitted, never refused as busy.
            assert_eq!(gate.admitted(), 0, "round {round}");
        }
    }
}
