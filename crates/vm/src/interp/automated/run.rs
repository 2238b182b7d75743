//! The automated-state run: what a turn holds while a code or grader state runs.
//!
//! An [`AutomatedRun`] begins when the turn enters an automated state and is taken when
//! the state settles. It owns the state's kind, the one decision the run may make, and
//! the session as it stood at entry (what `archmax_get_history` answers). The one thing to
//! know: the first accepted decision is final; [`AutomatedRun::decide`] is only called
//! while [`AutomatedRun::decision`] is `None`, and every later advance or raise is refused
//! by the caller.

use serde_json::{Value, json};

use archmax_program::program::{StateId, StateKind};

use crate::session::{Message, SessionState};

/// The decision an automated state made.
#[derive(Clone, Debug)]
pub(in crate::interp) enum Decision {
    Advance { target: StateId, to: String, reason: String, attached: Vec<String> },
    Raise { code: String, reason: String },
}

/// What is held while an automated state runs.
///
/// Invariants: `history` is fixed at entry; `decision` goes from `None` to `Some` at most
/// once.
pub(in crate::interp) struct AutomatedRun {
    kind: StateKind,
    decision: Option<Decision>,
    /// `archmax_get_history`'s answer: the session at entry, as JSON text.
    history: String,
}

impl AutomatedRun {
    /// A run of a state of `kind` entered with the session as `session` stands.
    pub(crate) fn begin(kind: StateKind, session: &SessionState) -> AutomatedRun {
        AutomatedRun { kind, decision: None, history: history_json(session) }
    }

    pub fn kind(&self) -> StateKind {
        self.kind
    }

    /// The decision taken so far, if any.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    pub(crate) fn has_decided(&self) -> bool {
        self.decision.is_some()
    }

    /// Records the run's decision (the caller has checked none was taken).
    pub fn decide(&mut self, decision: Decision) {
        self.decision = Some(decision);
    }

    /// The session at entry, as `archmax_get_history` answers it.
    pub fn history(&self) -> &str {
        &self.history
    }

    /// The decision the run ends with, if it made one.
    pub(crate) fn into_decision(self) -> Option<Decision> {
        self.decision
    }
}

/// `{ messages, trail }` of a session, whole and oldest first.
fn history_json(session: &SessionState) -> String {
    let mut messages = Vec::with_capacity(session.messages.len());
    for message in &session.messages {
        match message {
            Message::User { text, .. } => messages.push(json!({ "role": "user", "text": text })),
            Message::Assistant { text, tool_calls } => {
                let mut entry = json!({ "role": "assistant", "text": text });
                if !tool_calls.is_empty() {
                    entry["toolCalls"] = Value::Array(
                        tool_calls
                            .iter()
                            .map(|call| json!({ "id": call.id, "name": call.name, "args": call.args }))
                            .collect(),
                    );
                }
                messages.push(entry);
            }
            Message::Tool { call_id, name, content, .. } => {
                messages.push(json!({ "role": "tool", "id": call_id, "tool": name, "text": content }))
            }
            Message::Note { kind, text, .. } => {
                messages.push(json!({ "role": "runtime", "note": kind.as_str(), "text": text }))
            }
        }
    }
    let trail: Vec<Value> = session
        .trail
        .iter()
        .map(|step| {
            let mut entry = json!({ "to": step.to, "kind": step.kind.as_str(), "ts": step.ts });
            if let Some(reason) = &step.reason {
                entry["reason"] = json!(reason);
            }
            entry
        })
        .collect();
    json!({ "messages": messages, "trail": trail }).to_string()
}
