//! Sessions pinned to their program: a session resumes only under the workflow spec it
//! started under, unless the caller asks to upgrade it.
//!
//! The pin is the *workflow's* spec hash, not the artifact's: an artifact holds many
//! workflows, and an edit to one must not strand the sessions of the others. Every entry
//! point that resumes a stored session (a new turn on it, decide, reply, deliver, and a
//! caller resuming its parked child) asks [`Runtime::check_pin`] before it changes
//! anything. The one thing to know: a refusal changes nothing, and an upgrade is only
//! possible while the session's current state still exists; it is then one `upgrade`
//! trail step and one `upgraded` event, committed with the resumed step.

use serde_json::Value;
use sha2::{Digest, Sha256};

use archmax_program::hex::hex;
use archmax_program::inspect::{Filter, view};
use archmax_program::program::{Program, WorkflowProgram};

use crate::events::Event;
use crate::runtime::{RunError, Runtime};
use crate::session::SessionState;
use crate::session::TrailKind;
use crate::session::spec::{PinnedSpec, PinnedState, SpecChanges};

use super::Turn;

/// A session moving to the current program at its current state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upgrade {
    state: String,
    from: String,
    to: String,
}

/// The stored summary of `workflow`: its states in order, each with a digest of the
/// lowered state (names resolved; its tool surface and script source in place of their
/// indices, so an edit elsewhere does not shift it).
pub(crate) fn pinned_spec(program: &Program, workflow: &WorkflowProgram) -> PinnedSpec {
    let slug = program.str(workflow.slug);
    let rendered = view(program, &Filter { workflow: Some(slug), state: None });
    let rendered = &rendered["workflows"][0];
    let states = workflow
        .states
        .iter()
        .enumerate()
        .map(|(index, state)| {
            let mut body = rendered["states"][index].clone();
            if let Value::Object(fields) = &mut body {
                fields.remove("ops");
                fields.remove("surface");
                fields.insert("tools".to_string(), rendered["surfaces"][state.surface.0 as usize].clone());
                let script = state.script.map(|script| program.str(workflow.script(script).source));
                fields.insert("script".to_string(), script.map_or(Value::Null, Value::from));
            }
            PinnedState {
                slug: program.str(state.slug).to_string(),
                kind: state.kind.as_str().to_string(),
                digest: hex(&Sha256::digest(body.to_string().as_bytes())),
            }
        })
        .collect();
    PinnedSpec { workflow: slug.to_string(), spec_hash: workflow.spec_hash.clone(), states }
}

impl Runtime {
    /// Keeps the spec of `workflow` in the store so a later change can be explained. A
    /// failure is a warning on `session`, never a turn failure.
    pub(crate) async fn keep_spec(&self, session: &str, workflow: &WorkflowProgram) {
        let kept = match self.store().spec(&workflow.spec_hash).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => self.store().keep_spec(&pinned_spec(self.program(), workflow)).await,
            Err(error) => Err(error),
        };
        if let Err(error) = kept {
            self.emit(session, Event::Warning { scope: "session-store".to_string(), message: error.to_string() });
        }
    }

    /// Whether `session` may resume under this runtime's program: `Ok(None)` when it is
    /// pinned to it, `Ok(Some(upgrade))` when it is not and `upgrade` was asked for and
    /// its state still exists, and a refusal otherwise. Changes nothing.
    pub(crate) async fn check_pin(&self, session: &SessionState, upgrade: bool) -> Result<Option<Upgrade>, RunError> {
        let Some((_, workflow)) = self.program().workflow(&session.head.workflow) else {
            return Ok(None);
        };
        let pinned = &session.head.spec_hash;
        if *pinned == workflow.spec_hash {
            return Ok(None);
        }
        let current = pinned_spec(self.program(), workflow);
        let stored = match crate::session::spec::is_spec_hash(pinned) {
            true => self.store().spec(pinned).await.ok().flatten(),
            false => None,
        };
        let changes = SpecChanges::between(stored.as_ref(), &current, session.head.position.as_deref());
        if !upgrade {
            return Err(RunError::ProgramChanged {
                session: session.id.to_string(),
                workflow: session.head.workflow.clone(),
                pinned: pinned.clone(),
                current: workflow.spec_hash.clone(),
                changes: Box::new(changes),
            });
        }
        if let Some(state) = changes.missing_position() {
            return Err(RunError::UpgradeImpossible {
                session: session.id.to_string(),
                state: state.to_string(),
                pinned: pinned.clone(),
                current: workflow.spec_hash.clone(),
            });
        }
        let state = session.head.position.clone().unwrap_or_default();
        Ok(Some(Upgrade { state, from: pinned.clone(), to: workflow.spec_hash.clone() }))
    }
}

impl Turn<'_> {
    /// Moves the open session to the current program: pinned to the new hash from this
    /// step on, with an `upgrade` trail step and an `upgraded` event.
    pub(super) async fn upgrade(&mut self, upgrade: Option<Upgrade>) {
        let Some(Upgrade { state, from, to }) = upgrade else {
            return;
        };
        self.runtime.keep_spec(&self.session.id, self.workflow).await;
        self.session.head.spec_hash = to.clone();
        self.push_trail(&state, TrailKind::Upgrade, Some(format!("from {from} to {to}")));
        self.emit(Event::Upgraded { state, from, to });
    }
}
