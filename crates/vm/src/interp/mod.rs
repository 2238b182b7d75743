//! The interpreter: one turn of one session, step by step.
//!
//! A [`Turn`] owns an open session (its state and its store writer) and runs the loop:
//! at the current state it either calls the agent's model over the state's surface, parks
//! for a person, or runs an automated state; each model answer and its tool calls are one
//! committed step. Failures are committed as the state's `rejected` reason and routed
//! through `on_error` once the model has finished in the failing state; a turn is bounded
//! by the recursion limit. Every mutation goes through the helpers here, which record it
//! both in the session and in the pending [`Delta`], so a commit writes only what changed.
//!
//! The turn's state beyond the session is split into parts it owns, each with its own
//! module and invariants: the `ledger` (what the turn counts about itself), the
//! `context` window (what the model is shown, and its measure), the delegation
//! `batch` (sub-workflow calls waiting to run) and the `automated` run. The other
//! modules hold behaviour over the whole turn, one concern each (tool calls, controls,
//! compaction, offloading, budgets, sub-workflows, resuming, the turn boundary).

mod assembly;
mod automated;
mod batch;
mod budget;
mod calls;
mod carried;
mod compact;
mod context;
mod controls;
mod delegate;
mod host;
mod ledger;
mod offload;
mod orphans;
mod pin;
mod resume;
mod spans;
mod start;
#[cfg(test)]
mod test_support;

use std::time::Duration;

use serde_json::Value;

use archmax_program::program::{StateId, StateKind, StateProgram, TriggerProgram, WorkflowId, WorkflowProgram};

use crate::events::Event;
use crate::kernel::{Inherited, Policy};
use crate::model::{CallSubject, ModelError, ModelRequest, SystemPrompt};
use crate::prompt::{VolatileInputs, volatile};
use crate::runtime::{Outcome, RunError, Runtime};
use crate::session::{
    DecisionChoice, Delta, Exit, Message, NoteKind, ParkPhase, PendingDecision, SessionState, SessionWriter, Status,
    TrailKind, TrailStep, Variable,
};

pub use resume::{Channel, NotParked, check_named_workflow, decision_refusal, park_refusal};

/// One turn on an open session.
///
/// The turn holds what it runs on (the runtime, the workflow, the trigger that opened
/// the session, the calling workflows' denials, the session's files), the open session
/// with its writer and the pending delta, and four parts that own the rest of its state,
/// each in its own module: the `ledger` (steps, reply, notes, where the turn opened,
/// its spend), the `context` window (the model's view and its measure), the
/// `batch` of sub-workflow calls waiting to run, and the `automated` state running
/// now, if any.
pub struct Turn<'r> {
    runtime: &'r Runtime,
    workflow_id: WorkflowId,
    workflow: &'r WorkflowProgram,
    trigger: Option<&'r TriggerProgram>,
    /// The session is a sub-workflow's child.
    child: bool,
    /// The turn runs for the child's caller (dispatched, or resumed through it): a limit
    /// it would pass fails it instead of parking it, so the caller learns of it.
    under_caller: bool,
    /// The calling workflows' denials, for a child (fixed when the turn opens).
    inherited: Vec<Inherited<'r>>,
    workspace: archmax_stdlib::vfs::Workspace,
    session: SessionState,
    writer: Box<dyn SessionWriter>,
    /// What changed since the last commit: every mutation helper records it here too.
    pending: Delta,
    ledger: ledger::TurnLedger,
    context: context::ContextWindow,
    delegations: batch::DelegationBatch,
    /// The automated state running now, if any.
    automated: Option<automated::AutomatedRun>,
    /// Host calls made since the last commit: the next one's place in its step, part of
    /// its idempotency key ([`crate::tool_host::idempotency_key`]).
    host_calls_in_step: u64,
}

/// Why a parked session is handed a reply-only call: the opening of its volatile block.
#[derive(Clone, Debug, PartialEq)]
enum ParkOpening {
    /// A person wrote to a session that waits for a decision.
    Answering,
    /// The session waits for something from outside (the wait's reason).
    Waiting(String),
    /// A runtime note (a decision, an error route) moved the session into a human state.
    Routed,
    /// The agent just handed the session to a person.
    Handed,
}

impl<'r> Turn<'r> {
    pub(crate) fn new(
        runtime: &'r Runtime,
        workflow_id: WorkflowId,
        session: SessionState,
        writer: Box<dyn SessionWriter>,
    ) -> Result<Turn<'r>, RunError> {
        let workflow = &runtime.program().workflows[workflow_id.0 as usize];
        let trigger = session.head.trigger.as_deref().and_then(|id| runtime.program().trigger(workflow, id));
        let workspace = runtime.workspace(&session.id)?;
        let program = &runtime.program();
        let inherited = session
            .head
            .ancestors
            .iter()
            .filter_map(|slug| program.workflow(slug))
            .map(|(_, source)| Inherited { workflow: program.str(source.slug), program, source })
            .collect();
        let child = session.head.parent.is_some();
        let turn = Turn {
            runtime,
            workflow_id,
            workflow,
            trigger,
            child,
            under_caller: false,
            inherited,
            workspace,
            pending: Delta::default(),
            writer,
            ledger: ledger::TurnLedger::opened(session.messages.len(), session.head.usage, &session.head.spend),
            context: context::ContextWindow::opened(&session.messages, session.head.compaction.as_ref()),
            delegations: batch::DelegationBatch::default(),
            automated: None,
            host_calls_in_step: 0,
            session,
        };
        turn.announce();
        Ok(turn)
    }

    /// The turn is taken to open after the messages its caller has added so far: what
    /// the agent says from here on counts as "already spoke".
    fn mark_opened(&mut self) {
        self.ledger.open_at(self.session.messages.len());
    }

    fn program(&self) -> &'r archmax_program::program::Program {
        self.runtime.program()
    }

    fn now(&self) -> u64 {
        self.runtime.now()
    }

    fn emit(&self, event: Event) {
        self.runtime.events().emit(self.now(), Some(&self.session.id), self.session.head.dispatch_id.as_deref(), event);
    }

    // ----- session mutations: recorded in the session and in the pending delta ------

    fn push_message(&mut self, message: Message) {
        self.context.append(&message);
        self.session.messages.push(message.clone());
        self.pending.messages.push(message);
    }

    fn push_trail(&mut self, to: &str, kind: TrailKind, reason: Option<String>) {
        self.push_trail_step(TrailStep::new(to, kind, reason, self.now()));
    }

    fn push_trail_step(&mut self, step: TrailStep) {
        self.session.trail.push(step.clone());
        self.pending.trail.push(step);
    }

    fn set_variable(&mut self, name: &str, variable: Variable) {
        self.session.variables.insert(name.to_string(), variable.clone());
        self.pending.variables.retain(|(existing, _)| existing != name);
        self.pending.variables.push((name.to_string(), Some(variable)));
    }

    fn note(&mut self, kind: NoteKind, text: String) {
        let number = self.ledger.next_note();
        let call_id = format!("note-{}-{number}", self.session.seq + 1);
        self.push_message(Message::Note { kind, call_id, text });
    }

    /// Makes the pending changes durable as one step.
    async fn commit(&mut self) -> Result<(), RunError> {
        self.session.seq += 1;
        self.session.head.updated_at = self.now();
        let mut delta = std::mem::take(&mut self.pending);
        delta.seq = self.session.seq;
        delta.head = self.session.head.clone();
        let span = spans::commit_span(delta.seq);
        tracing::Instrument::instrument(self.writer.commit(&delta), span).await?;
        self.host_calls_in_step = 0;
        Ok(())
    }

    // ----- positions ------------------------------------------------------------

    fn position_id(&self) -> StateId {
        let slug = self.session.head.position.as_deref().unwrap_or("");
        self.workflow
            .states
            .iter()
            .position(|state| self.program().str(state.slug) == slug)
            .map(|index| StateId(index as u32))
            .unwrap_or(self.workflow.entry)
    }

    fn state(&self, id: StateId) -> &'r StateProgram {
        self.workflow.state(id)
    }

    fn slug(&self, id: StateId) -> &'r str {
        self.program().str(self.workflow.state(id).slug)
    }

    fn state_id_of(&self, slug: &str) -> Option<StateId> {
        self.workflow
            .states
            .iter()
            .position(|state| self.program().str(state.slug) == slug)
            .map(|index| StateId(index as u32))
    }

    /// Moves the session to `to`, emitting the leave and enter events.
    fn move_to(&mut self, to: StateId) {
        let from = self.session.head.position.clone().unwrap_or_default();
        let target = self.slug(to).to_string();
        self.emit(Event::StateLeave { state: from, next: Some(target.clone()) });
        self.session.head.position = Some(target.clone());
        self.emit(Event::StateEnter { state: target });
    }

    fn policy(&self) -> Policy<'_> {
        Policy {
            program: self.program(),
            workflow: self.workflow,
            mounts: self.runtime.mounts(),
            ancestors: &self.inherited,
            essential: self.runtime.essential_tools(),
        }
    }

    // ----- the loop ---------------------------------------------------------------

    /// Runs the session until it parks, finishes, or fails, in the turn's span.
    pub async fn run(mut self) -> Result<Outcome, RunError> {
        let span = self.open_turn_span();
        tracing::Instrument::instrument(self.run_steps(), span).await
    }

    async fn run_steps(mut self) -> Result<Outcome, RunError> {
        loop {
            // Every step gives the executor a turn, so a caller's deadline around a run
            // (a case's `caseTimeoutMs`) can fire even when nothing else awaits.
            tokio::task::yield_now().await;
            if self.session.head.park_phase == Some(ParkPhase::Closing) {
                let id = self.position_id();
                let span = spans::state_span(self.slug(id), self.state(id).kind);
                tracing::Instrument::instrument(self.handoff(), span).await?;
                break;
            }
            if self.session.head.status != Status::Running {
                break;
            }
            // A child still parked (its caller parked on something else first) is
            // presented as soon as the session runs again.
            if !self.session.head.pending_delegations.is_empty() {
                self.present_delegation().await;
                if self.session.head.status != Status::Running {
                    self.commit().await?;
                    continue;
                }
            }
            if self.ledger.count_step() > self.runtime.recursion_limit() {
                let reason = format!(
                    "the turn took more than {} steps without finishing; a cycle of states may never end",
                    self.runtime.recursion_limit()
                );
                self.fail("recursion-limit", &reason);
                self.commit().await?;
                break;
            }
            let id = self.position_id();
            let state = self.state(id);
            let span = spans::state_span(self.slug(id), state.kind);
            let step = async {
                match state.kind {
                    StateKind::Human => {
                        self.enter_human(id, Vec::new());
                        self.commit().await
                    }
                    StateKind::Grader => self.grader_step(id).await,
                    StateKind::Code => self.code_step(id).await,
                    StateKind::Agent => self.agent_step(id).await,
                }
            };
            tracing::Instrument::instrument(step, span).await?;
        }
        Ok(self.finish())
    }

    /// Ends the turn: the `turn-end` event and the outcome, which takes the session.
    fn finish(mut self) -> Outcome {
        let id = self.position_id();
        let head = &self.session.head;
        let reason = match head.status {
            Status::Rejected => head.rejected.clone(),
            Status::Failed => head.exit.as_ref().map(|exit| exit.reason.clone()),
            _ => None,
        };
        self.emit(Event::TurnEnd {
            status: head.status.as_str().to_string(),
            state: self.slug(id).to_string(),
            terminal: self.state(id).is_terminal(),
            code: head.exit.as_ref().map(|exit| exit.code.clone()),
            reason: reason.clone(),
        });
        let head = &self.session.head;
        Outcome {
            session_id: self.session.id.clone(),
            disposition: self.ledger.disposition(),
            workflow: head.workflow.clone(),
            status: head.status,
            state: head.position.clone().unwrap_or_default(),
            reply: self.ledger.reply(),
            unanswered: self.ledger.unanswered().map(str::to_string),
            reason,
            exit: head.exit.clone(),
            usage: head.usage,
            turn_usage: self.ledger.spent(&head.usage, self.delegations.children_usage()),
            turn_spend: self.ledger.spent_per_model(&head.spend),
            turn_model_calls: self.ledger.model_calls(),
            pending_decision: head.pending_decision.clone(),
            pending_input: head.pending_input.clone(),
            budget_stop: head.budget.stop.clone(),
            session: std::sync::Arc::new(std::mem::take(&mut self.session)),
        }
    }

    /// Ends the session `failed` with an exit code (the recursion limit, a model error).
    fn fail(&mut self, code: &str, reason: &str) {
        let state = self.session.head.position.clone().unwrap_or_default();
        self.session.head.exit =
            Some(Exit { code: code.to_string(), reason: reason.to_string(), state: state.clone(), raised: false });
        self.session.head.status = Status::Failed;
        self.session.head.park_phase = None;
        self.session.head.failed_delegations.clear();
    }

    /// Routes the committed rejection through `on_error`, or ends the session rejected.
    fn route_failure(&mut self) {
        // The committed rejection, else every outstanding failed sub-workflow call.
        let reason = self.session.head.rejected.clone().or_else(|| {
            let failures = &self.session.head.failed_delegations;
            (!failures.is_empty()).then(|| {
                failures
                    .iter()
                    .map(|failure| format!("{} (called with {})", failure.reason, failure.args))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        });
        let Some(reason) = reason else {
            return;
        };
        self.session.head.failed_delegations.clear();
        let id = self.position_id();
        let state = self.state(id);
        let here = self.slug(id).to_string();
        match state.on_error {
            Some(target) => {
                let to = self.slug(target).to_string();
                self.note(
                    NoteKind::Error,
                    format!(
                        "[error] '{here}' failed: {reason}. The session moved to '{to}'; handle the failure there."
                    ),
                );
                self.emit(Event::StateErrorRouted { state: here, to: to.clone(), reason: reason.clone() });
                self.move_to(target);
                self.push_trail(&to, TrailKind::OnError, Some(reason));
                self.session.head.rejected = None;
                self.session.head.pending_decision = None;
                self.session.head.pending_input = None;
                self.session.head.park_phase = None;
                self.session.head.status = Status::Running;
                self.park_if_human(target);
            }
            None => {
                self.session.head.rejected = Some(reason);
                self.session.head.status = Status::Rejected;
            }
        }
    }

    /// A session routed into a human state parks in the same step as the move, so no
    /// crash can leave it standing there unparked.
    fn park_if_human(&mut self, id: StateId) {
        if self.state(id).kind == StateKind::Human {
            self.enter_human(id, Vec::new());
        }
    }

    /// Builds the decision record of a human state and parks on it.
    fn enter_human(&mut self, id: StateId, attached: Vec<String>) {
        let program = self.program();
        let state = self.state(id);
        let slug = self.slug(id).to_string();
        let Some(decision) = &state.decision else {
            return;
        };
        let mut evidence: Vec<String> = decision.evidence.iter().map(|path| program.str(*path).to_string()).collect();
        for path in attached {
            if !evidence.contains(&path) {
                evidence.push(path);
            }
        }
        let transitions = state
            .transitions
            .iter()
            .map(|transition| DecisionChoice {
                to: self.slug(transition.target).to_string(),
                description: transition.description.map(|text| program.str(text).to_string()),
                kind: transition.kind.as_str().to_string(),
            })
            .collect();
        self.session.head.decision_count += 1;
        self.session.head.pending_decision = Some(PendingDecision {
            state: slug.clone(),
            title: state.title.map(|title| program.str(title).to_string()),
            seq: self.session.head.decision_count,
            instructions: program.str(decision.instructions).to_string(),
            approvers: decision.approvers.iter().map(|approver| program.str(*approver).to_string()).collect(),
            transitions,
            evidence,
            created_at: crate::clock::rfc3339(self.now()),
            child: None,
        });
        self.session.head.status = Status::AwaitingDecision;
        self.session.head.park_phase = Some(ParkPhase::Closing);
        self.emit(Event::Parked {
            state: slug,
            awaiting: "decision".to_string(),
            reason: None,
            resume_at: None,
            call_id: None,
        });
    }

    /// The one reply-only model call a park owes, then suspension.
    async fn handoff(&mut self) -> Result<(), RunError> {
        self.session.head.park_phase = Some(ParkPhase::Suspend);
        let id = self.position_id();
        let opening = match (&self.session.head.pending_decision, &self.session.head.pending_input) {
            (None, Some(input)) => ParkOpening::Waiting(input.reason.clone()),
            _ => match self.session.trail.last().map(|step| step.kind) {
                Some(TrailKind::Human | TrailKind::OnError) => ParkOpening::Routed,
                _ => ParkOpening::Handed,
            },
        };
        self.reply_only_call(id, opening).await?;
        self.commit().await
    }

    /// A model call whose only product is text: every tool call it makes is refused, and
    /// there is no second call. Returns what the model said.
    async fn reply_only_call(&mut self, id: StateId, opening: ParkOpening) -> Result<String, RunError> {
        let state = self.state(id);
        let program = self.program();
        let label = match state.title {
            Some(title) => format!("'{}' ({})", self.slug(id), program.str(title)),
            None => format!("'{}'", self.slug(id)),
        };
        // Only the answer to a person's message is owed to them; a park's own note that
        // fails is a warning, not an unanswered message.
        let answering = opening == ParkOpening::Answering;
        let opening = match opening {
            ParkOpening::Answering => format!(
                "The session is parked in {label}, where a person decides how it continues. Someone has written to it meanwhile: answer them. You cannot make or speed up the decision, and nothing you write moves the session."
            ),
            ParkOpening::Waiting(reason) => format!(
                "The session is parked in {label}, waiting for something from outside: {reason}. Say in one short message what it waits for."
            ),
            ParkOpening::Routed => format!(
                "A runtime note has just moved the session into {label}, where a person decides how it continues. Tell whoever you are working with, in one short message, that it now waits for that decision."
            ),
            ParkOpening::Handed => format!(
                "The session has just been handed to a person in {label}, who decides how it continues. Tell whoever you are working with, in one short message, what was done and that it now waits for that decision."
            ),
        };
        let volatile = format!(
            "{}\n\n## This session is parked\n\n{opening}\n\nWrite one short message and call no tools: every call is refused, and the session stays parked whatever you write.",
            crate::clock::clock_line(self.now())
        );
        if let Some(stop) = self.budget_stop(id, Some(&volatile)).await {
            // The parked session stays parked; its message would pass the budget.
            let message = format!("the parked session's message was not sent: {}", stop.reason);
            return Ok(self.unsaid(answering, "budget", message));
        }
        if let Some(problem) = self.fit_context(id, &volatile).await? {
            // The parked session stays parked; its message is not sent over the window.
            return Ok(self.unsaid(answering, "context", problem));
        }
        let response = self.call_agent_model(id, volatile).await;
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                let message = format!("the parked session's message failed: {error}");
                return Ok(self.unsaid(answering, "model", message));
            }
        };
        self.record_answer(id, &response);
        let here = self.slug(id).to_string();
        for call in &response.tool_calls {
            let verdict = crate::kernel::Refusal::ReplyOnly.verdict();
            let answer = self.refuse(&here, call, "model", &call.args, verdict);
            self.push_message(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: answer.content,
                status: answer.status,
            });
        }
        Ok(response.text)
    }

    /// A reply-only call that wrote nothing: the `warning` event saying why, and, when it
    /// was `answering` a person's message, the turn's record that the message went
    /// unanswered. Returns the (empty) text the call said.
    fn unsaid(&mut self, answering: bool, scope: &str, message: String) -> String {
        if answering {
            self.ledger.note_unanswered(message.clone());
        }
        self.emit(Event::Warning { scope: scope.to_string(), message });
        String::new()
    }

    /// Calls the agent's model in state `id` with a volatile block ([`Self::call_model`]),
    /// and teaches the runtime's [`crate::context::Calibration`] how far the estimate of the
    /// prompt was from the provider's count of it. A tape's usage is scripted and a
    /// fallback's is another model's count: neither teaches anything, so the prompt is
    /// estimated only after an answer that can (the call leaves the conversation as it was).
    async fn call_agent_model(
        &mut self,
        id: StateId,
        volatile_block: String,
    ) -> Result<crate::model::ModelResponse, ModelError> {
        let result = self.call_model(id, &volatile_block).await;
        let model = self.state(id).model.map(|model| self.program().str(model));
        if let Ok(response) = &result
            && response.tape.is_none()
            && response.served_by.is_none()
            && !model.is_some_and(crate::context::is_openai_family)
        {
            let estimated = self.prompt_tokens(id, &volatile_block).await;
            self.runtime.calibration().learn(&self.session.id, model, estimated, response.usage.input);
        }
        result
    }

    /// Calls the agent's model in state `id` with a volatile block.
    async fn call_model(&self, id: StateId, volatile_block: &str) -> Result<crate::model::ModelResponse, ModelError> {
        let state = self.state(id);
        let program = self.program();
        let variables = self.session.variable_values();
        let definitions = self.definitions(id).await;
        let prefix = self.prefix();
        let timeout = state.budget.timeout_ms.map(Duration::from_millis);
        // The answer's text is an event piece by piece as it arrives (`agent-text-delta`),
        // and kept here to tell what was shown should the call fail half-way.
        let here = program.str(state.slug);
        let runtime = self.runtime;
        let session = self.session.id.as_str();
        let dispatch = self.session.head.dispatch_id.as_deref();
        let shown = std::sync::Mutex::new(String::new());
        let delta = |text: &str, message: Option<&str>| {
            if let Ok(mut shown) = shown.lock() {
                shown.push_str(text);
            }
            let event = Event::AgentTextDelta {
                state: here.to_string(),
                text: text.to_string(),
                message_id: message.map(str::to_string),
            };
            runtime.events().emit(runtime.now(), Some(session), dispatch, event);
        };
        let system = SystemPrompt { fixed: prefix, volatile: volatile_block };
        let conversation = (self.view(), self.session.messages.len());
        let request = ModelRequest::for_agent(
            self.call_subject(id, here, &variables),
            system,
            conversation,
            &definitions,
            timeout,
            crate::model::TextSink(&delta),
        );
        let model = request.model;
        let span = spans::model_span(self.runtime.model().provider(model), model, here);
        spans::record_request(&span, volatile_block, self.view());
        let call = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, self.runtime.model().call(request))
                    .await
                    .unwrap_or(Err(ModelError::Timeout(limit))),
                None => self.runtime.model().call(request).await,
            }
        };
        let result = tracing::Instrument::instrument(call, span.clone()).await;
        match &result {
            Ok(response) => spans::record_response(&span, response),
            Err(error) => spans::record_failure(&span, error),
        }
        let shown = shown.lock().map(|shown| shown.clone()).unwrap_or_default();
        match &result {
            // An adapter that does not stream (or `ARCHMAX_STREAMING=0`): one delta for
            // the whole message, so every answer reaches a watcher the same way.
            Ok(response) if shown.is_empty() && !response.text.trim().is_empty() => {
                delta(&response.text, response.id.as_deref())
            }
            // The text shown so far is all there will be of it: the session keeps none.
            Err(_) if !shown.is_empty() => self.emit(Event::AgentText {
                state: here.to_string(),
                text: shown,
                message_id: None,
                partial: Some(true),
            }),
            _ => {}
        }
        result
    }

    /// What a model call made in state `id` is about: the state's model, this session and
    /// its tape reading, the workflow's prompt caching. `here` names the state to the model.
    fn call_subject<'a>(&'a self, id: StateId, here: &'a str, variables: &'a Value) -> CallSubject<'a> {
        let program = self.program();
        CallSubject {
            model: self.state(id).model.map(|model| program.str(model)),
            session: &self.session.id,
            workflow: program.str(self.workflow.slug),
            state: here,
            variables,
            prompt_cache: crate::model::PromptCache::declared(program, self.workflow),
            tape: self.session.head.tape.as_ref(),
        }
    }

    /// Records what a model answered: the assistant message, its text, its usage.
    fn record_answer(&mut self, id: StateId, response: &crate::model::ModelResponse) {
        self.record_fallbacks(id, response);
        let state = self.slug(id).to_string();
        if let Some(reading) = &response.tape {
            self.session.head.tape = Some(reading.clone());
        }
        self.push_message(Message::Assistant { text: response.text.clone(), tool_calls: response.tool_calls.clone() });
        if !response.text.trim().is_empty() {
            self.ledger.keep_reply(response.text.clone());
            self.emit(Event::AgentText {
                state: state.clone(),
                text: response.text.clone(),
                message_id: response.id.clone(),
                partial: response.truncated.then_some(true),
            });
        }
        self.record_usage(id, response, crate::model::Role::Agent);
    }

    /// The per-call volatile prompt block of state `id`, from its precomputed template.
    fn volatile_block(&self, id: StateId, reentry: bool) -> String {
        let variables = self.session.variable_values();
        volatile(
            self.program(),
            self.state(id),
            &VolatileInputs {
                now_ms: self.now(),
                variables: &variables,
                trigger: self.trigger,
                child: self.child,
                reentry,
            },
        )
    }

    /// Records the models a call's route tried before the one that answered, if any: one
    /// `model-fallback` event each, before anything of the answer is recorded.
    fn record_fallbacks(&mut self, id: StateId, response: &crate::model::ModelResponse) {
        if response.fallbacks.is_empty() {
            return;
        }
        let state = self.slug(id).to_string();
        let tried = response.fallbacks.iter().map(|call| call.model.clone());
        let next = tried.skip(1).chain(response.served_by.clone());
        for (failed, fallback) in response.fallbacks.iter().zip(next) {
            self.emit(Event::ModelFallback {
                state: state.clone(),
                model: failed.model.clone(),
                provider: failed.provider.clone(),
                reason: failed.error.clone(),
                fallback,
            });
        }
    }

    /// Adds a model call's usage (and its cost, when priced) to the session.
    fn record_usage(&mut self, id: StateId, response: &crate::model::ModelResponse, role: crate::model::Role) {
        let state = self.slug(id).to_string();
        let usage = response.usage;
        let declared = self.state(id).model.map(|model| self.program().str(model).to_string());
        // Priced by the id that answered as archmax.toml names it (the workflow's, or the
        // fallback's), then by the one the provider answered with; shown as the provider's.
        let priced = response.served_by.clone().or(declared);
        let ids: Vec<&str> = priced.iter().chain(response.model.iter()).map(String::as_str).collect();
        let cost = self.runtime.pricing().cost_any(&usage, &ids);
        let model = response.model.clone().or_else(|| priced.clone());
        let fallback_for = response.served_by.as_ref().and(response.fallbacks.first()).map(|call| call.model.clone());
        self.ledger.count_model_call();
        let call = crate::session::Usage {
            input_tokens: usage.input,
            output_tokens: usage.output,
            cache_read_tokens: usage.cache_read,
            cache_creation_tokens: usage.cache_write,
            cost_usd: cost,
        };
        let line = model.as_deref().unwrap_or_default();
        crate::session::Spend::record(&mut self.session.head.spend, line, role.as_str(), &call);
        let total = &mut self.session.head.usage;
        total.input_tokens += usage.input;
        total.output_tokens += usage.output;
        total.cache_read_tokens += usage.cache_read;
        total.cache_creation_tokens += usage.cache_write;
        if let Some(cost) = cost {
            total.cost_usd = Some(total.cost_usd.unwrap_or(0.0) + cost);
        }
        self.emit(Event::ModelUsage {
            state,
            input_tokens: usage.input,
            output_tokens: usage.output,
            cache_read_tokens: usage.cache_read,
            cache_creation_tokens: usage.cache_write,
            model,
            cost_usd: cost,
            fallback_for,
            role: Some(role.as_str().to_string()),
        });
    }

    /// One agent step: a model call in state `id` and the tool calls it makes.
    async fn agent_step(&mut self, id: StateId) -> Result<(), RunError> {
        let state = self.state(id);
        let entry =
            self.state_id_of(self.session.head.entry_state.as_deref().unwrap_or("")).unwrap_or(self.workflow.entry);
        let reentry = state.is_terminal()
            && id != entry
            && self.session.trail.last().is_some_and(|step| step.kind == TrailKind::Trigger);
        let block = self.volatile_block(id, reentry);
        // What is spent already is checked before compaction could call a summarizer,
        // the prompt's estimate once it is the one that would be sent.
        if let Some(stop) = self.budget_stop(id, None).await {
            self.stop_at_budget(stop);
            return self.commit().await;
        }
        if let Some(problem) = self.fit_context(id, &block).await? {
            self.fail("context-window", &problem);
            return self.commit().await;
        }
        if let Some(stop) = self.budget_stop(id, Some(&block)).await {
            self.stop_at_budget(stop);
            return self.commit().await;
        }
        let response = match self.call_agent_model(id, block).await {
            Ok(response) => response,
            Err(ModelError::Timeout(limit)) => {
                let budget = state.budget.timeout_ms.unwrap_or(limit.as_millis() as u64);
                self.session.head.rejected =
                    Some(format!("state '{}' exceeded its time budget (timeoutMs: {budget})", self.slug(id)));
                self.route_failure();
                return self.commit().await;
            }
            Err(error) => {
                self.fail("turn-error", &error.to_string());
                return self.commit().await;
            }
        };
        self.record_answer(id, &response);
        if response.tool_calls.is_empty() {
            if self.session.head.rejected.is_some() || !self.session.head.failed_delegations.is_empty() {
                self.route_failure();
            } else if self.state(self.position_id()).is_terminal() {
                self.complete();
            } else {
                self.session.head.status = Status::Completed;
                self.session.head.resumable = true;
            }
            return self.commit().await;
        }
        // A tool batch is a step of its own.
        self.ledger.count_step();
        self.handle_calls(&response.tool_calls).await?;
        self.present_delegation().await;
        self.commit().await
    }

    /// A terminal state finished: check the trigger's returns, then complete.
    fn complete(&mut self) {
        let here = self.session.head.position.clone().unwrap_or_default();
        if let Some(trigger) = self.trigger
            && !self.child
        {
            let program = self.program();
            for entry in &trigger.returns {
                let name = program.str(entry.name);
                match self.session.variables.get(name) {
                    None => {
                        let reason = format!(
                            "Completed in state '{here}' without setting '{name}', which trigger '{}' declares in its 'returns'.",
                            program.str(trigger.id)
                        );
                        self.session.head.rejected = Some(reason);
                        self.session.head.status = Status::Rejected;
                        return;
                    }
                    Some(variable) => {
                        let today = crate::values::Today::at(self.now());
                        if let Err(problem) = crate::values::check(program, entry, &variable.value, &today) {
                            let reason = format!("Completed in state '{here}' with a mistyped return: {problem}.");
                            self.session.head.rejected = Some(reason);
                            self.session.head.status = Status::Rejected;
                            return;
                        }
                    }
                }
            }
        }
        self.session.head.status = Status::Completed;
        self.session.head.resumable = false;
        self.emit(Event::StateLeave { state: here, next: None });
    }

    fn variables_json(&self) -> Value {
        self.session.variable_values()
    }
}
