//! Admitting a turn and answering its request: once the turn was accepted (its first
//! event) or ended, or with `?wait=`, once it ended or the wait passed.
//!
//! The one thing to know: a turn that fails after it committed something did apply the
//! request. Each caller says where the session stood before (its committed step, or none
//! for a session the turn creates), and a failure is checked against the store: a turn
//! a runner of the fleet took over after it committed (`session.taken-over`) runs on
//! there, so the request is answered 202 with the session `running`, not refused; any
//! other failure carries whether the request was applied ([`Refused::applied`]), so a
//! webhook's replay record is given back only for a firing that changed nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use archmax_vm::session::summary::summary;
use archmax_vm::{Outcome, Runtime};

use super::Server;
use crate::error::ApiError;
use crate::turns::{TurnFuture, TurnResult};

/// What a turn request is answered with.
#[derive(Debug)]
pub enum Answer {
    /// 202: the turn runs on.
    Accepted { session: String, status: &'static str },
    /// 200: the turn ended within the wait; the session as it stands, with the turn.
    Finished(Value),
}

/// A turn request refused: why, and whether the session moved past where it stood before
/// the turn was admitted (the request was applied, at least in part).
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
    ///
    /// `before` is the session's last committed step when the request was read, `None`
    /// for a session the turn creates (see the module doc).
    pub(crate) async fn admit(
        &self,
        runtime: Arc<Runtime>,
        (session, before): (&str, Option<u64>),
        workflow: &str,
        disposition: &'static str,
        turn: TurnFuture,
        wait: Duration,
    ) -> Result<Answer, ApiError> {
        let admitted = self.admit_tracked(runtime, (session, before), workflow, disposition, turn, wait).await;
        admitted.map_err(|refused| refused.error)
    }

    /// [`Server::admit`], saying of a refusal whether the request was applied.
    pub(crate) async fn admit_tracked(
        &self,
        runtime: Arc<Runtime>,
        (session, before): (&str, Option<u64>),
        workflow: &str,
        disposition: &'static str,
        turn: TurnFuture,
        wait: Duration,
    ) -> Result<Answer, Refused> {
        let mut events = self.hub.watch(session);
        events.borrow_and_update();
        let closing = Box::pin(turn_then_close(runtime, session.to_string(), turn));
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
            Err(error) => self.refused_after_admission(error, session, before).await,
        }
    }

    /// The answer to a turn that failed once admitted: whether it was applied is read
    /// from the store (see the module doc).
    async fn refused_after_admission(
        &self,
        error: ApiError,
        session: &str,
        before: Option<u64>,
    ) -> Result<Answer, Refused> {
        let moved = match self.store.read(session).await {
            Ok(Some(state)) => Some(before.is_none_or(|before| state.seq > before)),
            Ok(None) => Some(false),
            Err(_) => None,
        };
        if moved == Some(true) && error.code == "session.taken-over" {
            tracing::info!(session, "another runner took the turn over after it committed; it runs on there");
            return Ok(Answer::Accepted { session: session.to_string(), status: "running" });
        }
        // Unknown is taken as applied, so a webhook's record is kept and a replay of it
        // is refused rather than run twice.
        Err(Refused { error, applied: moved.unwrap_or(true) })
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
