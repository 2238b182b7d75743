//! Admitting a turn and answering its request: once the turn was accepted (its first
//! event) or ended, or with `?wait=`, once it ended or the wait passed.
//!
//! The one thing to know: a turn that fails after it committed something did apply the
//! request. The commits an admitted turn makes to its own session are counted
//! ([`TURN_COMMITS`], by the store wrapper every writer goes through; another runner's or
//! another turn's commits never count): a turn a runner of the fleet took over after it
//! committed (`session.taken-over`) runs on there, so the request is answered 202 with
//! the session `running`, not refused; any other failure carries whether the request was
//! applied ([`Refused::applied`]), so a webhook's replay record is given back only for a
//! firing that changed nothing.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use archmax_vm::session::summary::summary;
use archmax_vm::{Outcome, Runtime};

use super::Server;
use crate::error::ApiError;
use crate::metrics::timed_store::{TURN_COMMITS, TurnCommits};
use crate::turns::{TurnFuture, TurnResult};

/// What a turn request is answered with.
#[derive(Debug)]
pub enum Answer {
    /// 202: the turn runs on.
    Accepted { session: String, status: &'static str },
    /// 200: the turn ended within the wait; the session as it stands, with the turn.
    Finished(Value),
}

/// A turn request refused: why, and whether the admitted turn had already committed to
/// its own session when it failed (the request was applied, at least in part). Commits
/// other writers made to the session meanwhile do not count.
#[derive(Debug)]
pub(crate) struct Refused {
    pub error: ApiError,
    pub applied: bool,
}

impl From<ApiError> for Refused {
    /// A refusal before any turn ran.
    fn from(error: ApiError) -> Refused {
        Refused { error, applied: false }
    }
}

impl From<archmax_vm::RunError> for Refused {
    /// A refusal before any turn ran.
    fn from(error: archmax_vm::RunError) -> Refused {
        Refused::from(ApiError::from(error))
    }
}

/// Closes what the runtime keeps for a session once it finished or parked.
async fn turn_then_close(runtime: Arc<Runtime>, session: String, turn: impl Future<Output = TurnResult>) -> TurnResult {
    let turn = turn.await;
    if let Ok(outcome) = &turn
        && (outcome.status.is_finished() || outcome.status.is_parked())
    {
        runtime.close_session(&session);
    }
    turn
}

impl Server {
    /// Admits a turn and answers once it was accepted or ended; with a wait, once it
    /// ended or the wait passed.
    pub(crate) async fn admit(
        &self,
        runtime: Arc<Runtime>,
        session: &str,
        workflow: &str,
        disposition: &'static str,
        turn: TurnFuture,
        wait: Duration,
    ) -> Result<Answer, ApiError> {
        let admitted = self.admit_tracked(runtime, session, workflow, disposition, turn, wait).await;
        admitted.map_err(|refused| refused.error)
    }

    /// [`Server::admit`], saying of a refusal whether the request was applied.
    pub(crate) async fn admit_tracked(
        &self,
        runtime: Arc<Runtime>,
        session: &str,
        workflow: &str,
        disposition: &'static str,
        turn: TurnFuture,
        wait: Duration,
    ) -> Result<Answer, Refused> {
        let mut events = self.hub.watch(session);
        events.borrow_and_update();
        let committed = Arc::new(AtomicU64::new(0));
        let counted = TurnCommits { session: session.to_string(), count: Arc::clone(&committed) };
        let closing = Box::pin(TURN_COMMITS.scope(counted, turn_then_close(runtime, session.to_string(), turn)));
        let mut ended = self.gate.admit(session, workflow, disposition, closing)?;
        let result = tokio::select! {
            result = &mut ended => Some(result),
            _ = events.changed() => None,
        };
        let result = match result {
            Some(result) => Some(result),
            None if !wait.is_zero() => tokio::time::timeout(wait, &mut ended).await.ok(),
            None => None,
        };
        let Some(result) = result else {
            return Ok(Answer::Accepted { session: session.to_string(), status: "running" });
        };
        match self.finished(result).await {
            Ok(answer) => Ok(answer),
            Err(error) => refused_after_admission(error, session, committed.load(Ordering::Relaxed) > 0),
        }
    }

    async fn finished(&self, result: Result<TurnResult, oneshot::error::RecvError>) -> Result<Answer, ApiError> {
        let outcome: Outcome = match result {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) => return Err(error.into()),
            Err(_) => return Err(ApiError::internal("the turn's task ended without an answer")),
        };
        if let Some(why) = &outcome.unanswered {
            tracing::warn!(session = %outcome.session_id, disposition = outcome.disposition.as_str(), "{why}");
        }
        let mut shown = summary(&outcome.session);
        shown["turn"] = json!({
            "disposition": outcome.disposition.as_str(),
            "reply": outcome.reply,
            "unanswered": outcome.unanswered,
            "reason": outcome.reason,
            "usage": {
                "inputTokens": outcome.turn_usage.input_tokens,
                "outputTokens": outcome.turn_usage.output_tokens,
                "costUsd": outcome.turn_usage.cost_usd,
            },
            "spend": archmax_vm::session::summary::spend_lines(&outcome.turn_spend),
        });
        Ok(Answer::Finished(shown))
    }
}

/// The answer to a turn that failed once admitted, given whether it had committed to its
/// session (see the module doc).
fn refused_after_admission(error: ApiError, session: &str, applied: bool) -> Result<Answer, Refused> {
    if applied && error.code == "session.taken-over" {
        tracing::info!(session, "another runner took the turn over after it committed; it runs on there");
        return Ok(Answer::Accepted { session: session.to_string(), status: "running" });
    }
    Err(Refused { error, applied })
}
