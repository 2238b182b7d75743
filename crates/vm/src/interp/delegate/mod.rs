//! Sub-workflows: `archmax_workflow_<slug>` runs another workflow as a child session.
//!
//! A call goes through three phases so that many children can run at once:
//!
//! 1. [`Turn::prepare_delegation`] ([`prepare`]; on the caller, in call order): the dispatch checks,
//!    in order depth, cycle, argument resolution (`${{…}}` against the caller's
//!    variables; a whole-argument reference keeps its type), a disabled target, the
//!    target's `manual` entry, missing then mistyped parameters. A refusal ran nothing:
//!    it is a blocked call the caller may correct. Otherwise the child's session is
//!    created: `<parent>~<n>`, seeded only with `trigger` and the arguments (locked),
//!    `file` arguments copied into its `scratchpad/attachments/` (the kernel has let
//!    through only files the calling state may read), one opening message.
//! 2. [`run_child`] (borrowing only the runtime): the child's turn, at most
//!    [`MAX_IN_FLIGHT`] at once per batch; the rest wait for a slot.
//! 3. [`Turn::finish_delegation`] (on the caller): the answer `{ message, returns }` (or
//!    the closing message alone), `file` returns copied into the caller's
//!    `scratchpad/attachments/` when the child's state may read them, unset returns
//!    `null` with a `note`. A child that raised, was rejected, failed or returned a
//!    mistyped value fails the call: a failure of the calling state, routed through
//!    `on_error` when its agent finishes, unless a later successful call of the same
//!    workflow from the same state recovers it. A child that parks parks its caller (an
//!    agent's call) or fails the call `parked` (a script's or a grader's call, which
//!    cannot wait).
//!
//! Every ancestor's workflow-wide denials bind the child (its head records the chain).

mod prepare;

pub(super) use prepare::resolve_argument;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

use archmax_program::program::{TriggerProgram, ValueType, WorkflowId, WorkflowProgram};
use archmax_program::zones::canonicalize;

use crate::events::Event;
use crate::runtime::{Outcome, RunError, Runtime};
use crate::session::TrailKind;
use crate::session::id::SessionId;
use crate::session::{
    FailedDelegation, Message, NoteKind, ParkPhase, PendingDelegation, SessionState, SessionWriter, Status, TrailStep,
};

use super::Turn;
use super::calls::{Answer, Caller};

/// How deep a chain of calls may go (1 = a child of a top-level session).
pub const MAX_DEPTH: usize = 3;
/// Children one batch of calls runs at once; the rest queue.
pub(crate) const MAX_IN_FLIGHT: usize = 4;
/// A child's run: its dispatch and how its turn ended.
pub(super) type ChildRun<'r> = Pin<Box<dyn Future<Output = (Meta, Result<Outcome, RunError>)> + Send + 'r>>;

/// Why a mock's `returns` do not stand in for the run: the declared returns it omits.
fn omitted_returns(
    program: &archmax_program::program::Program,
    manual: &TriggerProgram,
    values: &Map<String, Value>,
) -> Option<String> {
    let omitted: Vec<String> = manual
        .returns
        .iter()
        .map(|entry| program.str(entry.name))
        .filter(|name| !values.contains_key(*name))
        .map(|name| format!("'{name}'"))
        .collect();
    (!omitted.is_empty()).then(|| {
        format!(
            "the mock omits the declared return{} {}: a mock replaces the run, not its contract, so it \
             gives every return of the target's `manual` entry (`null` for one left unset)",
            if omitted.len() == 1 { "" } else { "s" },
            omitted.join(", ")
        )
    })
}

/// A completed child's declared returns: the values (files copied up), the names set,
/// the names left unset.
struct Returns {
    values: Map<String, Value>,
    set: Vec<String>,
    unset: Vec<String>,
}

/// A call that passed its checks, with the child's session ready to run.
pub(super) struct Prepared {
    pub meta: Meta,
    pub session: SessionState,
    pub writer: Box<dyn SessionWriter>,
}

/// What the caller keeps about a dispatch while its child runs.
#[derive(Clone, Debug)]
pub(super) struct Meta {
    pub dispatch_id: String,
    pub call_id: String,
    pub slug: String,
    pub target: WorkflowId,
    pub child: SessionId,
    pub state: String,
    pub args: Value,
    pub started: u64,
    /// The span of the tool call that dispatched the child: the child's turn runs under it.
    pub span: tracing::Span,
}

/// What a child's settled session means for its caller.
enum Settled {
    Answered { text: String, returns: Vec<String> },
    Failed { kind: &'static str, reason: String },
    Parked { state: String, waiting: String },
}

/// `name.ext` → `name-1.ext` for the first free name in `directory`.
fn free_name(workspace: &archmax_stdlib::vfs::Workspace, directory: &str, file: &str) -> String {
    let taken = |name: &str| workspace.stat(&format!("{directory}/{name}")).ok().flatten().is_some();
    if !taken(file) {
        return format!("{directory}/{file}");
    }
    let (stem, extension) = match file.rfind('.') {
        Some(dot) if dot > 0 => (&file[..dot], &file[dot..]),
        _ => (file, ""),
    };
    let mut n = 1;
    loop {
        let candidate = format!("{stem}-{n}{extension}");
        if !taken(&candidate) {
            return format!("{directory}/{candidate}");
        }
        n += 1;
    }
}

/// Copies `from` (in `source`) into `target`'s `scratchpad/attachments/`; the new path.
/// A file over `limit` bytes (the per-file bound) is refused unread.
fn copy_attachment(
    source: &archmax_stdlib::vfs::Workspace,
    from: &str,
    target: &archmax_stdlib::vfs::Workspace,
    limit: u64,
) -> Result<String, String> {
    let canonical = canonicalize(from).map_err(|_| format!("'{from}' climbs above the workspace root"))?;
    let entry = source.stat(&canonical).map_err(|error| error.to_string())?;
    match entry {
        Some(entry) if !entry.is_dir => {}
        Some(_) => return Err(format!("'{from}' is a folder, not a file")),
        None => return Err(format!("'{from}' names no file")),
    }
    let bytes = source.read_limited(&canonical, limit).map_err(|error| error.to_string())?;
    let file = canonical.rsplit('/').next().unwrap_or(&canonical).to_string();
    let path = free_name(target, "scratchpad/attachments", &file);
    target.write(&path, &bytes).map_err(|error| error.to_string())?;
    Ok(path)
}

/// Why a file may not cross a boundary: who may not read it, the deciding rule, the
/// kernel's words.
fn unreadable(path: &str, reader: &str, refusal: &crate::kernel::Verdict) -> String {
    format!(
        "{reader} may not read '{path}' ({}): {}",
        refusal.rule,
        crate::kernel::bare_reason(refusal).trim_end_matches('.')
    )
}

fn manual(workflow: &WorkflowProgram, program: &archmax_program::program::Program) -> Option<usize> {
    workflow.triggers.iter().position(|trigger| program.str(trigger.id) == "manual")
}

/// Runs a prepared child's turn to its end (a completion, a park, a failure), waiting
/// for one of `slots` first.
pub(super) fn run_child<'r>(runtime: &'r Runtime, prepared: Prepared, slots: Arc<Semaphore>) -> ChildRun<'r> {
    Box::pin(async move {
        let _slot = slots.acquire_owned().await;
        let Prepared { meta, session, writer } = prepared;
        let mut turn = match Turn::new(runtime, meta.target, session, writer) {
            Ok(turn) => turn,
            Err(error) => return (meta, Err(error)),
        };
        turn.under_caller = true;
        let entry = turn.session.head.position.clone().unwrap_or_default();
        let names: Vec<String> = turn.session.variables.keys().cloned().collect();
        turn.emit(Event::VariablesSet { state: None, names, locked: true, call_id: None });
        turn.emit(Event::Advance { from: "__start__".to_string(), to: entry.clone(), reason: None, call_id: None });
        turn.emit(Event::StateEnter { state: entry.clone() });
        turn.emit(Event::WorkflowReset { entry });
        let outcome = tracing::Instrument::instrument(turn.run(), meta.span.clone()).await;
        (meta, outcome)
    })
}

impl Turn<'_> {
    fn sub_result(&self, meta: &Meta, status: &str, reason: Option<String>, returns: Vec<String>) {
        self.emit(Event::SubWorkflowResult {
            state: meta.state.clone(),
            workflow: meta.slug.clone(),
            dispatch_id: meta.dispatch_id.clone(),
            status: status.to_string(),
            duration_ms: self.now().saturating_sub(meta.started),
            reason,
            returns,
        });
    }

    /// A child the store could not set up: its result event, and the caller's answer.
    fn not_started(&self, meta: &Meta, reason: String) -> Answer {
        self.sub_result(meta, "error", Some(reason.clone()), Vec::new());
        Answer::error(format!("Error: sub-workflow '{}' did not start: {reason}", meta.slug))
    }

    /// What a settled child means: its answer, a failure, or a park.
    async fn settle_child(&mut self, meta: &Meta, outcome: Result<Outcome, RunError>) -> Settled {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => return Settled::Failed { kind: "error", reason: error.to_string() },
        };
        match outcome.status {
            Status::Completed | Status::Running => {}
            Status::Failed => {
                let (code, reason) = outcome
                    .exit
                    .as_ref()
                    .map(|exit| (exit.code.clone(), exit.reason.clone()))
                    .unwrap_or_else(|| ("failed".to_string(), "the sub-workflow failed".to_string()));
                return Settled::Failed {
                    kind: "raised",
                    reason: format!("sub-workflow '{}' raised `{code}`: {reason}", meta.slug),
                };
            }
            Status::Rejected => {
                return Settled::Failed {
                    kind: "rejected",
                    reason: format!(
                        "Sub-workflow '{}' was rejected in state '{}': {}",
                        meta.slug,
                        outcome.state,
                        outcome.reason.clone().unwrap_or_default()
                    ),
                };
            }
            Status::AwaitingDecision => {
                return Settled::Parked { state: outcome.state.clone(), waiting: "a person's decision".to_string() };
            }
            Status::AwaitingInput => {
                let reason = outcome.pending_input.as_ref().map(|input| input.reason.clone()).unwrap_or_default();
                return Settled::Parked {
                    state: outcome.state.clone(),
                    waiting: format!("input from outside ({reason})"),
                };
            }
        }
        let program = self.program();
        let target = &program.workflows[meta.target.0 as usize];
        let Some(manual) = manual(target, program).map(|index| &target.triggers[index]) else {
            return Settled::Failed { kind: "error", reason: "the target has no manual entry".to_string() };
        };
        let child = match self.runtime.store().read(&meta.child).await {
            Ok(Some(child)) => child,
            Ok(None) => return Settled::Failed { kind: "error", reason: "the child session vanished".to_string() },
            Err(error) => return Settled::Failed { kind: "error", reason: error.to_string() },
        };
        let message = child
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "(the sub-workflow completed without a closing message)".to_string());
        let values: Map<String, Value> =
            child.variables.iter().map(|(name, variable)| (name.clone(), variable.value.clone())).collect();
        let files = match self.runtime.workspace(&meta.child) {
            Ok(files) => files,
            Err(error) => return Settled::Failed { kind: "error", reason: error.to_string() },
        };
        // A returned file must be one the child itself may read: its own grants and every
        // ancestor's workflow-wide denials (this workflow's included).
        let inherited: Vec<crate::kernel::Inherited<'_>> = child
            .head
            .ancestors
            .iter()
            .filter_map(|slug| program.workflow(slug))
            .map(|(_, source)| crate::kernel::Inherited { workflow: program.str(source.slug), program, source })
            .collect();
        let child_policy = crate::kernel::Policy {
            program,
            workflow: target,
            mounts: self.runtime.mounts(),
            ancestors: &inherited,
            essential: self.runtime.essential_tools(),
        };
        let child_state = target
            .states
            .iter()
            .find(|state| Some(program.str(state.slug)) == child.head.position.as_deref())
            .unwrap_or_else(|| target.state(target.entry));
        let child_variables = child.variable_values();
        let passable = |canonical: &str| {
            crate::kernel::may_read(&child_policy, child_state, canonical, &child_variables)
                .map_err(|refusal| unreadable(canonical, "the child", &refusal))
        };
        self.answer_with(meta, manual, message, &values, &files, &passable)
    }

    /// `{ message, returns }` from the child's values (or the message alone when the
    /// target declares no returns).
    fn answer_with(
        &self,
        meta: &Meta,
        manual: &TriggerProgram,
        message: String,
        values: &Map<String, Value>,
        files: &archmax_stdlib::vfs::Workspace,
        passable: &dyn Fn(&str) -> Result<(), String>,
    ) -> Settled {
        if manual.returns.is_empty() {
            return Settled::Answered { text: message, returns: Vec::new() };
        }
        match self.collect_returns(meta, manual, values, files, passable) {
            Ok(Returns { values: returns, set, unset }) => {
                let mut answer = json!({ "message": message, "returns": returns });
                if !unset.is_empty() {
                    let names: Vec<String> = unset.iter().map(|name| format!("'{name}'")).collect();
                    answer["returns"]["note"] = json!(format!(
                        "Not all return variables were set by the sub-workflow: {} {} not set.",
                        names.join(", "),
                        if unset.len() == 1 { "was" } else { "were" }
                    ));
                }
                Settled::Answered { text: answer.to_string(), returns: set }
            }
            Err(reason) => Settled::Failed { kind: "invalid-return", reason },
        }
    }

    /// A declared result stands in for the child's run (a case's mock), held to the
    /// target's contract: `{ error }` fails the call, and so does a result that omits a
    /// declared return (a mock replaces the run, never its contract) or mistypes one; a
    /// return given as `null` stands for one the child left unset (it answers `null`
    /// with a note); `file` returns name files of this session.
    fn serve_mock(&mut self, meta: &Meta, manual: &TriggerProgram, result: &Value, caller: Caller) -> Answer {
        if let Some(error) = result.get("error").filter(|error| !error.is_null()) {
            let reason = match error {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            return self.fail_delegation(meta, "error", reason, caller);
        }
        let message = match result {
            Value::String(text) => text.clone(),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(the sub-workflow completed without a closing message)")
                .to_string(),
        };
        let values = result.get("returns").and_then(Value::as_object).cloned().unwrap_or_default();
        if let Some(reason) = omitted_returns(self.program(), manual, &values) {
            return self.fail_delegation(meta, "invalid-return", reason, caller);
        }
        let files = self.workspace.clone();
        let id = self.position_id();
        let state = self.state(id);
        let variables = self.session.variable_values();
        let policy = self.policy();
        let passable = |canonical: &str| {
            crate::kernel::may_read(&policy, state, canonical, &variables)
                .map_err(|refusal| unreadable(canonical, "this state", &refusal))
        };
        let settled = self.answer_with(meta, manual, message, &values, &files, &passable);
        match settled {
            Settled::Answered { text, returns } => self.answered(meta, text, returns, caller),
            Settled::Failed { kind, reason } => self.fail_delegation(meta, kind, reason, caller),
            Settled::Parked { .. } => Answer::error("a mock cannot park"),
        }
    }

    /// The declared returns of a completed child: values (files copied up), the names
    /// set, the names left unset.
    fn collect_returns(
        &self,
        meta: &Meta,
        manual: &TriggerProgram,
        values: &Map<String, Value>,
        files: &archmax_stdlib::vfs::Workspace,
        passable: &dyn Fn(&str) -> Result<(), String>,
    ) -> Result<Returns, String> {
        let program = self.program();
        let today = crate::values::Today::at(self.now());
        let mut returns = Map::new();
        let mut set = Vec::new();
        let mut unset = Vec::new();
        for entry in &manual.returns {
            let name = program.str(entry.name).to_string();
            let Some(found) = values.get(&name).filter(|value| !value.is_null()) else {
                returns.insert(name.clone(), Value::Null);
                unset.push(name);
                continue;
            };
            let mut value = found.clone();
            crate::values::check(program, entry, &value, &today)
                .map_err(|problem| format!("sub-workflow '{}' returned a mistyped value: {problem}", meta.slug))?;
            if entry.ty == Some(ValueType::File)
                && let Value::String(path) = &value
            {
                let copy = canonicalize(path)
                    .map_err(|_| format!("'{path}' climbs above the workspace root"))
                    .and_then(|canonical| passable(&canonical))
                    .and_then(|()| copy_attachment(files, path, &self.workspace, self.runtime.limits().file_bytes))
                    .map_err(|problem| {
                        format!("sub-workflow '{}' returned the file '{name}', but {problem}", meta.slug)
                    })?;
                value = Value::String(copy);
            }
            returns.insert(name.clone(), value);
            set.push(name);
        }
        Ok(Returns { values: returns, set, unset })
    }

    /// Counts what a settled child spent into this turn and, for the budgets, into this
    /// session: its tokens and calls into the turn's, its cost into the session's.
    fn add_child_spend(&mut self, outcome: &Result<Outcome, RunError>) {
        let Ok(outcome) = outcome else { return };
        self.delegations.add_child_usage(&outcome.turn_usage);
        self.ledger.count_child_calls(outcome.turn_model_calls);
        if let Some(cost) = outcome.turn_usage.cost_usd {
            self.session.head.budget.children_cost_usd += cost;
        }
    }

    /// Phase 3: the caller's answer for a settled child.
    pub(super) async fn finish_delegation(
        &mut self,
        meta: &Meta,
        outcome: Result<Outcome, RunError>,
        caller: Caller,
    ) -> Answer {
        self.add_child_spend(&outcome);
        match self.settle_child(meta, outcome).await {
            Settled::Answered { text, returns } => self.answered(meta, text, returns, caller),
            Settled::Failed { kind, reason } => self.fail_delegation(meta, kind, reason, caller),
            Settled::Parked { state, waiting } => {
                if caller != Caller::Model {
                    let reason = format!(
                        "sub-workflow '{}' stopped at '{state}' waiting for {waiting}, and this call cannot wait",
                        meta.slug
                    );
                    return self.fail_delegation(meta, "parked", reason, caller);
                }
                self.sub_result(meta, "parked", Some(format!("waiting at '{state}' for {waiting}")), Vec::new());
                self.push_sub_trail(meta, "parked");
                self.session.head.pending_delegations.push(PendingDelegation {
                    state: meta.state.clone(),
                    workflow: meta.slug.clone(),
                    child: meta.child.clone(),
                    call_id: meta.call_id.clone(),
                    dispatch_id: meta.dispatch_id.clone(),
                });
                Answer::ok(format!(
                    "The sub-workflow '{}' stopped at '{state}' and waits for {waiting}. This session waits with it; when it is resumed, its result arrives here as a runtime note.",
                    meta.slug
                ))
            }
        }
    }

    /// A call that answered: its result event, its trail step, and one earlier failure
    /// of the same workflow from this state recovered.
    fn answered(&mut self, meta: &Meta, text: String, returns: Vec<String>, caller: Caller) -> Answer {
        self.sub_result(meta, "ok", None, returns);
        self.push_sub_trail(meta, "ok");
        if matches!(caller, Caller::Model | Caller::Script) {
            self.recover_failure(meta);
        }
        Answer::ok(text)
    }

    fn fail_delegation(&mut self, meta: &Meta, kind: &str, reason: String, caller: Caller) -> Answer {
        self.sub_result(meta, "error", Some(format!("{kind}: {reason}")), Vec::new());
        self.push_sub_trail(meta, "error");
        // A failure belongs to the state that made the call; once the session has left
        // it (an advance later in the same message), the move has cleared it.
        let still_there = self.session.head.position.as_deref() == Some(meta.state.as_str());
        if matches!(caller, Caller::Model | Caller::Script) && still_there {
            self.session.head.failed_delegations.push(FailedDelegation {
                state: meta.state.clone(),
                workflow: meta.slug.clone(),
                args: meta.args.clone(),
                reason: format!("{kind}: {reason}"),
            });
        }
        Answer::error(format!("Error: the call to sub-workflow '{}' failed ({kind}): {reason}", meta.slug))
    }

    /// One success recovers one failed call of the same workflow from the same state: the
    /// one with the same arguments, else the oldest.
    fn recover_failure(&mut self, meta: &Meta) {
        let failures = &mut self.session.head.failed_delegations;
        let same = |failure: &FailedDelegation| failure.state == meta.state && failure.workflow == meta.slug;
        let index = failures
            .iter()
            .position(|failure| same(failure) && failure.args == meta.args)
            .or_else(|| failures.iter().position(same));
        if let Some(index) = index {
            failures.remove(index);
        }
    }

    fn push_sub_trail(&mut self, meta: &Meta, status: &str) {
        let step = TrailStep {
            workflow: Some(meta.slug.clone()),
            status: Some(status.to_string()),
            ..TrailStep::new(&meta.state, TrailKind::SubWorkflow, Some(meta.child.to_string()), self.now())
        };
        self.push_trail_step(step);
    }

    /// Runs every child the last batch prepared, at most [`MAX_IN_FLIGHT`] at once, and
    /// returns each call id with its answer.
    pub(super) async fn run_deferred(&mut self, caller: Caller) -> Vec<(String, Answer)> {
        let deferred = self.delegations.take_waiting();
        if deferred.is_empty() {
            return Vec::new();
        }
        let runtime = self.runtime;
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let runs: Vec<_> =
            deferred.into_iter().map(|prepared| run_child(runtime, prepared, Arc::clone(&slots))).collect();
        let settled = futures_util::future::join_all(runs).await;
        let mut answers = Vec::with_capacity(settled.len());
        for (meta, outcome) in settled {
            let answer = self.finish_delegation(&meta, outcome, caller).await;
            self.emit_delegation_result(&meta, &answer, caller);
            answers.push((meta.call_id.clone(), answer));
        }
        answers
    }

    /// The `tool-result` of a delegation call, once its child settled.
    pub(super) fn emit_delegation_result(&self, meta: &Meta, answer: &Answer, caller: Caller) {
        let (output, truncated) = super::calls::preview(&answer.content);
        self.emit(Event::ToolResult {
            state: meta.state.clone(),
            tool: format!("{}{}", archmax_program::tools::DELEGATION_PREFIX, meta.slug),
            call_id: meta.call_id.clone(),
            status: if answer.refused { "error" } else { "ok" }.to_string(),
            duration_ms: self.now().saturating_sub(meta.started),
            output,
            truncated,
            origin: caller.origin().to_string(),
            server: None,
        });
    }

    /// Parks this session on the first parked child: its record, presented as ours.
    pub(super) async fn present_delegation(&mut self) {
        if self.session.head.status != Status::Running {
            return;
        }
        let Some(pending) = self.session.head.pending_delegations.first().cloned() else {
            return;
        };
        let child = match self.runtime.store().read(&pending.child).await {
            Ok(Some(child)) => child,
            _ => {
                self.session.head.pending_delegations.remove(0);
                self.session.head.rejected =
                    Some(format!("the parked sub-workflow session '{}' could not be read", pending.child));
                return;
            }
        };
        if let Some(mut decision) = child.head.pending_decision.clone() {
            self.session.head.decision_count += 1;
            decision.seq = self.session.head.decision_count;
            decision.created_at = crate::clock::rfc3339(self.now());
            decision.child = Some(pending.child.clone());
            let state = decision.state.clone();
            self.session.head.pending_decision = Some(decision);
            self.session.head.status = Status::AwaitingDecision;
            self.emit(Event::Parked {
                state,
                awaiting: "decision".to_string(),
                reason: Some(format!("sub-workflow '{}' waits for a decision", pending.workflow)),
                resume_at: None,
                call_id: Some(pending.call_id.clone()),
            });
        } else if let Some(mut input) = child.head.pending_input.clone() {
            input.child = Some(pending.child.clone());
            let state = input.state.clone();
            let reason = input.reason.clone();
            let resume_at = input.resume_at.clone();
            self.session.head.pending_input = Some(input);
            self.session.head.status = Status::AwaitingInput;
            self.emit(Event::Parked {
                state,
                awaiting: "input".to_string(),
                reason: Some(reason),
                resume_at,
                call_id: Some(pending.call_id.clone()),
            });
        } else {
            self.session.head.pending_delegations.remove(0);
            return;
        }
        self.session.head.park_phase = Some(ParkPhase::Closing);
    }

    /// A parked child, resumed through this session, settled: its answer (or failure)
    /// reaches the calling state as a note, and the next parked child is presented.
    pub(super) async fn resumed_child(&mut self, pending: &PendingDelegation, outcome: Result<Outcome, RunError>) {
        let program = self.program();
        let Some((target, _)) = program.workflow(&pending.workflow) else {
            return;
        };
        let meta = Meta {
            dispatch_id: pending.dispatch_id.clone(),
            call_id: pending.call_id.clone(),
            slug: pending.workflow.clone(),
            target,
            child: pending.child.clone(),
            state: pending.state.clone(),
            args: Value::Null,
            started: self.now(),
            span: tracing::Span::current(),
        };
        self.add_child_spend(&outcome);
        let head = &mut self.session.head;
        head.pending_decision = None;
        head.pending_input = None;
        head.park_phase = None;
        match self.settle_child(&meta, outcome).await {
            Settled::Parked { .. } => {
                // Still parked (a decision into another human state): present it again.
                self.session.head.status = Status::Running;
                self.present_delegation().await;
                return;
            }
            Settled::Answered { text, returns } => {
                self.session.head.pending_delegations.retain(|waiting| waiting.child != pending.child);
                self.sub_result(&meta, "ok", None, returns);
                self.push_sub_trail(&meta, "ok");
                self.note(NoteKind::SubWorkflow, format!("[sub-workflow: {}] {text}", pending.workflow));
            }
            Settled::Failed { kind, reason } => {
                self.session.head.pending_delegations.retain(|waiting| waiting.child != pending.child);
                self.sub_result(&meta, "error", Some(format!("{kind}: {reason}")), Vec::new());
                self.push_sub_trail(&meta, "error");
                self.session.head.failed_delegations.push(FailedDelegation {
                    state: pending.state.clone(),
                    workflow: pending.workflow.clone(),
                    args: Value::Null,
                    reason: format!("{kind}: {reason}"),
                });
                self.note(
                    NoteKind::Error,
                    format!("[error] sub-workflow '{}' failed after the decision: {reason}", pending.workflow),
                );
            }
        }
        self.session.head.status = Status::Running;
        self.present_delegation().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use archmax_stdlib::vfs::{MemoryVfs, Vfs, Workspace};

    use super::copy_attachment;

    fn workspace(files: &[(&str, &str)]) -> (Workspace, Arc<MemoryVfs>) {
        let session = Arc::new(MemoryVfs::with_files(files.iter().copied()));
        (Workspace { session: session.clone(), mounts: vec![] }, session)
    }

    #[test]
    fn an_attachment_over_the_per_file_bound_is_not_copied() {
        let (parent, _) = workspace(&[("scratchpad/small.md", "ok"), ("scratchpad/big.md", "0123456789!")]);
        let (child, child_files) = workspace(&[]);
        assert_eq!(
            copy_attachment(&parent, "scratchpad/small.md", &child, 10),
            Ok("scratchpad/attachments/small.md".to_string())
        );
        let refused = copy_attachment(&parent, "scratchpad/big.md", &child, 10).unwrap_err();
        assert_eq!(refused, "'scratchpad/big.md' has 11 bytes, over the limit of 10 bytes");
        assert!(child_files.stat("scratchpad/attachments/big.md").unwrap().is_none());
    }
}
