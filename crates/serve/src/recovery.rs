//! Start-up recovery: the turns the last process was cut off in, continued.
//!
//! A session at rest is parked, finished, or completed its turn with a reply; one whose
//! status is still `running` was mid-turn when its process stopped (a SIGTERM whose grace
//! ran out, a crash). Its committed steps are durable, so continuing it is a turn with no
//! new message on the same session, exactly as `archmax run --session ID` continues one:
//! it re-enters the state it stood in and goes on from the last committed step.
//!
//! The one thing to know: a session another process holds (the store refuses a second
//! writer with `Busy`) is that process's to finish and is skipped; so is a sub-workflow
//! session (`caller~n`), which its caller's turn continues. Recovered turns go through the
//! server's [`TurnGate`](crate::turns::TurnGate) like any other, so a client's request on
//! the same session meanwhile is answered 409, shutdown drains them, and at most
//! [`RECOVERY_AT_ONCE`] run at a time.

use std::sync::Arc;

use tokio::sync::Semaphore;

use archmax_vm::session::Status;
use archmax_vm::{RunError, TurnRequest};

use crate::server::Server;

/// How many cut turns are continued at once.
pub const RECOVERY_AT_ONCE: usize = 8;

/// What start-up recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Sessions whose cut turn was continued (whatever its outcome).
    pub resumed: Vec<String>,
    /// Sessions another process holds.
    pub held_elsewhere: Vec<String>,
    /// Sessions that could not be continued, with why.
    pub failed: Vec<(String, String)>,
}

/// Finds every root session whose status is `running` and continues each, at most
/// `at_once` at a time; logs what it did and returns it once every continued turn ended.
pub async fn resume_cut_turns(server: Arc<Server>, at_once: usize) -> Recovered {
    let mut recovered = Recovered::default();
    // One listing of the running sessions (a store that filters, such as PostgreSQL,
    // answers it from an index).
    let mut query = archmax_vm::session::store::ListQuery {
        status: Some(Status::Running),
        limit: archmax_vm::session::store::ListQuery::MAX_LIMIT,
        ..Default::default()
    };
    let mut cut = Vec::new();
    loop {
        let page = match server.store.list_page(&query).await {
            Ok(page) => page,
            Err(error) => {
                tracing::error!("recovery: the session store could not be listed: {error}");
                return recovered;
            }
        };
        cut.extend(page.sessions.into_iter().filter(|state| !state.id.contains('~')));
        for id in page.unreadable {
            recovered.failed.push((id, "the session is unreadable".to_string()));
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    if cut.is_empty() {
        return report(recovered);
    }
    tracing::info!("recovery: {} session(s) were cut mid-turn; continuing them", cut.len());
    let slots = Arc::new(Semaphore::new(at_once.max(1)));
    let mut running = tokio::task::JoinSet::new();
    for state in cut {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else { break };
        // A shutdown meanwhile: the rest are left for the next process.
        if server.gate.is_closing() {
            break;
        }
        let server = Arc::clone(&server);
        running.spawn(async move {
            let _slot = slot;
            let id = state.id.to_string();
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
    report(recovered)
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
    let session = id.to_string();
    let turn = async move {
        let outcome = runtime.run_turn(request).await;
        if let Ok(outcome) = &outcome
            && (outcome.status.is_finished() || outcome.status.is_parked())
        {
            runtime.close_session(&session);
        }
        outcome
    };
    let ended = match server.gate.admit(id, "resume", turn) {
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
