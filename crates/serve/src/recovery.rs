//! Recovery: the turns a runner was cut off in, continued.
//!
//! A session at rest is parked, finished, or completed its turn with a reply; one whose
//! status is still `running` was mid-turn when its process stopped (a SIGTERM whose grace
//! ran out, a crash). Its committed steps are durable, so continuing it is a turn with no
//! new message on the same session, exactly as `archmax run --session ID` continues one:
//! it re-enters the state it stood in and goes on from the last committed step.
//!
//! Where the cut turns come from depends on the store. A store one process uses (the
//! filesystem store) is listed once at start-up: every running root session there is
//! this process's to continue. A store a fleet shares (PostgreSQL) hands them out
//! ([`Chore::Stranded`]): only running sessions no runner holds, each to one runner, in
//! batches of at most `at_once`; and since a runner can die at any time, every runner
//! asks again every [`RECOVER_EVERY`] ([`run_recovery`]), so a dead runner's turns are
//! continued about one lease term after its last renewal, without a restart.
//!
//! The one thing to know: a session another process holds (the store refuses a second
//! writer with `Busy`) is that process's to finish and is skipped; so is a sub-workflow
//! session (`caller~n`), which its caller's turn continues. Before continuing, the session
//! is read again, and one no longer running is left alone. Recovered turns go through the
//! server's [`TurnGate`](crate::turns::TurnGate) like any other, so a client's request on
//! the same session meanwhile is answered 409, shutdown drains them, and at most
//! [`RECOVERY_AT_ONCE`] run at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use archmax_vm::session::Status;
use archmax_vm::session::store::{Chore, ListQuery};
use archmax_vm::{RunError, TurnRequest};

use crate::server::Server;

/// How many cut turns are continued at once.
pub const RECOVERY_AT_ONCE: usize = 8;

/// How often a runner on a shared store asks for turns cut by a runner that died.
pub const RECOVER_EVERY: Duration = Duration::from_secs(1);

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Sessions whose cut turn was continued (whatever its outcome).
    pub resumed: Vec<String>,
    /// Sessions another process holds.
    pub held_elsewhere: Vec<String>,
    /// Sessions that could not be continued, with why.
    pub failed: Vec<(String, String)>,
    /// Whether the store hands cut turns out to a fleet (then [`run_recovery`] keeps
    /// asking); `false` for a store one process uses, listed once.
    pub shared_store: bool,
}

/// Continues every cut turn this runner is given, at most `at_once` at a time; logs what
/// it did and returns it once every continued turn ended.
pub async fn resume_cut_turns(server: Arc<Server>, at_once: usize) -> Recovered {
    let at_once = at_once.max(1);
    let mut recovered = Recovered::default();
    let runnable = server.runnable_specs();
    let mut batch = match server.store.claim_chores(Chore::Stranded, &runnable, at_once).await {
        Ok(Some(batch)) => {
            recovered.shared_store = true;
            batch
        }
        Ok(None) => match cut_in_listing(&server, &mut recovered).await {
            Some(cut) => cut,
            None => return report(recovered),
        },
        Err(error) => {
            tracing::error!("recovery: the session store could not hand out cut turns: {error}");
            recovered.shared_store = true;
            return recovered;
        }
    };
    // What this call tried: a session whose turn failed is not tried again by it (its
    // claim runs out, and a later call tries once more).
    let mut tried = std::collections::BTreeSet::new();
    while !batch.is_empty() {
        batch.retain(|id| tried.insert(id.clone()));
        if batch.is_empty() {
            break;
        }
        tracing::info!("recovery: {} session(s) were cut mid-turn; continuing them", batch.len());
        continue_all(&server, batch, at_once, &mut recovered).await;
        if !recovered.shared_store || server.gate.is_closing() {
            break;
        }
        batch = match server.store.claim_chores(Chore::Stranded, &runnable, at_once).await {
            Ok(batch) => batch.unwrap_or_default(),
            Err(error) => {
                tracing::error!("recovery: the session store could not hand out cut turns: {error}");
                break;
            }
        };
    }
    report(recovered)
}

/// Every running root session of a store one process uses; `None` when the store could
/// not be listed.
async fn cut_in_listing(server: &Server, recovered: &mut Recovered) -> Option<Vec<String>> {
    // One listing of the running sessions (a store that filters answers it from an index).
    let mut query = ListQuery { status: Some(Status::Running), limit: ListQuery::MAX_LIMIT, ..Default::default() };
    let mut cut = Vec::new();
    loop {
        let page = match server.store.list_page(&query).await {
            Ok(page) => page,
            Err(error) => {
                tracing::error!("recovery: the session store could not be listed: {error}");
                return None;
            }
        };
        cut.extend(page.sessions.into_iter().map(|state| state.id.to_string()).filter(|id| !id.contains('~')));
        for id in page.unreadable {
            recovered.failed.push((id, "the session is unreadable".to_string()));
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => return Some(cut),
        }
    }
}

/// Continues each of `cut`, at most `at_once` at a time, until all ended.
async fn continue_all(server: &Arc<Server>, cut: Vec<String>, at_once: usize, recovered: &mut Recovered) {
    let slots = Arc::new(Semaphore::new(at_once));
    let mut running = tokio::task::JoinSet::new();
    for id in cut {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
        // A shutdown meanwhile: the rest are left for the next process.
        if server.gate.is_closing() {
            break;
        }
        let server = Arc::clone(server);
        running.spawn(async move {
            let _slot = slot;
            let result = continue_turn(&server, &id).await;
            (id, result)
        });
    }
    while let Some(joined) = running.join_next().await {
        match joined {
            Ok((id, Continued::Ended)) => recovered.resumed.push(id),
            Ok((id, Continued::HeldElsewhere)) => recovered.held_elsewhere.push(id),
            Ok((_, Continued::Settled)) => {}
            Ok((id, Continued::Failed(why))) => recovered.failed.push((id, why)),
            Err(error) => tracing::error!("recovery: a continued turn's task ended early: {error}"),
        }
    }
}

/// Recovery for the life of a server: the cut turns at start-up, then, on a store a fleet
/// shares, those of runners that die later, asked for every [`RECOVER_EVERY`].
pub async fn recover(server: Arc<Server>) {
    if resume_cut_turns(Arc::clone(&server), RECOVERY_AT_ONCE).await.shared_store {
        run_recovery(server, RECOVER_EVERY).await;
    }
}

/// Asks a store a fleet shares for cut turns every `every` and continues them, until the
/// server stops accepting turns. Only for such a store: on one only this process uses,
/// every running session after start-up is one of this process's own turns.
pub async fn run_recovery(server: Arc<Server>, every: Duration) {
    let mut ticks = server.ticks(every);
    while ticks.next().await {
        resume_cut_turns(Arc::clone(&server), RECOVERY_AT_ONCE).await;
    }
}

/// How continuing one session went.
enum Continued {
    /// The turn ran to its end (parked, finished, or failed as a turn does).
    Ended,
    /// Another process holds the session.
    HeldElsewhere,
    /// By the time its slot came, the session was no longer cut (its own process
    /// finished the turn): nothing to do.
    Settled,
    Failed(String),
}

/// Continues one session's turn through the gate and waits for it to end.
async fn continue_turn(server: &Server, id: &str) -> Continued {
    // Read again now: the listing may be stale by the time a slot is free, and a session
    // no longer running must not be given a turn nobody asked for.
    let state = match server.store.read(id).await {
        Ok(Some(state)) if state.head.status == Status::Running => state,
        Ok(_) => return Continued::Settled,
        Err(error) => return Continued::Failed(error.to_string()),
    };
    // The program the session started on, not merely the newest.
    let runtime = match server.runtime_for_session(&state) {
        Ok(runtime) => runtime,
        Err(refused) => return Continued::Failed(refused.message),
    };
    let request = TurnRequest {
        workflow: state.head.workflow.clone(),
        session: Some(id.to_string()),
        trigger: state.head.trigger.clone(),
        ..TurnRequest::default()
    };
    // A turn cut after a delivery names the delivered trigger, which the workflow need not
    // declare (a delivery may send one it does not): continued under it, such a turn would
    // be refused at every attempt, so it goes on under the trigger the session started by.
    let started_by = state
        .trail
        .iter()
        .find(|step| step.kind == archmax_vm::session::TrailKind::Trigger)
        .and_then(|step| step.reason.clone());
    let session = id.to_string();
    let turn = Box::pin(async move {
        let mut outcome = runtime.run_turn(request.clone()).await;
        if matches!(outcome, Err(RunError::UnknownTrigger { .. })) && started_by.is_some() {
            outcome = runtime.run_turn(TurnRequest { trigger: started_by, ..request }).await;
        }
        if let Ok(outcome) = &outcome
            && (outcome.status.is_finished() || outcome.status.is_parked())
        {
            runtime.close_session(&session);
        }
        outcome
    });
    let ended = match server.gate.admit(id, &state.head.workflow, "resume", turn) {
        Ok(ended) => ended,
        Err(refused) => return Continued::Failed(format!("the server did not admit the turn: {}", refused.message)),
    };
    match ended.await {
        Ok(Ok(_)) => Continued::Ended,
        Ok(Err(RunError::Busy(_))) => Continued::HeldElsewhere,
        Ok(Err(error)) => Continued::Failed(error.to_string()),
        Err(_) => Continued::Failed("the turn's task ended without an answer".to_string()),
    }
}

fn report(recovered: Recovered) -> Recovered {
    for id in &recovered.resumed {
        tracing::info!(session = id.as_str(), "recovery: continued {id}");
    }
    for id in &recovered.held_elsewhere {
        tracing::info!(session = id.as_str(), "recovery: {id} is held by another process; left to it");
    }
    for (id, why) in &recovered.failed {
        tracing::warn!(session = id.as_str(), "recovery: {id} could not be continued: {why}");
    }
    recovered
}
