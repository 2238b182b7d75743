//! Automated states: code states (a script in the sandbox) and grader states (an isolated
//! model run). Both run in place of the agent's next model call, over their own state's
//! surface, and decide by `archmax_advance` or `archmax_raise`.
//!
//! While one runs, [`AutomatedRun`] is held on the turn: an advance is checked at the call
//! (edge, `requires`, evidence) but only recorded, and the first accepted advance or raise
//! is the decision; every later one is refused. `archmax_get_history` answers the session
//! as it stood when the state was entered. When the run ends, [`Turn::settle`] applies
//! exactly one outcome: advanced (trail kind `code`/`grader`, a runtime note carrying the
//! reason, a human target parked in the same step), raised (the session fails), completed
//! (a terminal state finished undecided), or failed (threw, timed out, or a non-terminal
//! state finished undecided) routed through `on_error`. A raise wins over an error; an
//! error discards a recorded advance.
//!
//! A grader's messages live in its own transcript, never the session's; only its usage,
//! the trail step and the note reach the session.

use std::time::Duration;

use serde_json::{Value, json};

use archmax_program::program::{StateId, StateKind};
use archmax_program::tools::{DEFAULT_TOOLS, Tool};

mod run;

pub(super) use run::{AutomatedRun, Decision};

use crate::events::Event;
use crate::model::{ModelError, ModelRequest, SystemPrompt};
use crate::runtime::RunError;
use crate::sandbox::{Bridge, HostCall, Limits, Sandbox};
use crate::session::TrailKind;
use crate::session::{Exit, Message, NoteKind, Status};

use super::Turn;
use super::calls::{Answer, Caller};
use crate::kernel::{Call, Origin, decide};
use crate::session::ToolCall;

/// The grader's fixed preamble, ahead of the state's criteria.
const GRADER_PREAMBLE: &str = "You are a grader inside an automated workflow. You do not talk to anyone: you judge \
the work recorded in this session against the criteria below, then decide where the session goes. Read the \
session with `archmax_get_history` (its messages and its trail, oldest first) and the work itself with your \
tools. Decide exactly once: call `archmax_advance` with the transition the criteria point to and a reason the \
next state can act on, or `archmax_raise` when the work cannot be completed at all. A reason that sends work \
back must name each fix. Finishing without deciding counts as a failure, never as approval.";

impl Turn<'_> {
    /// Starts holding an automated run for the current state.
    pub(super) fn begin_automated(&mut self, kind: StateKind) {
        self.automated = Some(AutomatedRun::begin(kind, &self.session));
    }

    /// `archmax_advance` from an automated state: checked now, taken when the run ends.
    pub(super) fn automated_advance(&mut self, args: &Value) -> Answer {
        if let Some(decided) = self.automated.as_ref().and_then(AutomatedRun::decision) {
            return Answer::refused(format!("archmax_advance rejected: {}", already(decided)));
        }
        match self.check_advance(args) {
            Ok(advance) => {
                let to = advance.to.clone();
                if let Some(run) = self.automated.as_mut() {
                    run.decide(Decision::Advance {
                        target: advance.target,
                        to: advance.to,
                        reason: advance.reason,
                        attached: advance.attached,
                    });
                }
                Answer::ok(format!("The session moves to '{to}' when this state finishes. Finish now."))
            }
            Err(problem) => Answer::refused(format!("archmax_advance rejected: {problem}")),
        }
    }

    /// `archmax_raise` from an automated state: recorded, applied when the run ends.
    pub(super) fn automated_raise(&mut self, args: &Value) -> Answer {
        if let Some(decided) = self.automated.as_ref().and_then(AutomatedRun::decision) {
            return Answer::refused(format!("archmax_raise rejected: {}", already(decided)));
        }
        match super::controls::raise_arguments(args) {
            Ok((code, reason)) => {
                if let Some(run) = self.automated.as_mut() {
                    run.decide(Decision::Raise { code: code.clone(), reason });
                }
                Answer::ok(format!("The session ends with the failure `{code}` when this state finishes."))
            }
            Err(problem) => Answer::refused(format!("archmax_raise rejected: {problem}")),
        }
    }

    /// Applies how an automated state settled. `error` is why the run failed, if it did.
    pub(super) fn settle(&mut self, id: StateId, error: Option<String>, started: u64) {
        let run = self.automated.take();
        let kind = run.as_ref().map(AutomatedRun::kind).unwrap_or(StateKind::Code);
        let decision = run.and_then(AutomatedRun::into_decision);
        let here = self.slug(id).to_string();
        let type_name = kind.as_str();
        let duration_ms = self.now().saturating_sub(started);
        let result = |status: &str, reason: Option<String>| -> Event {
            if kind == StateKind::Grader {
                Event::GraderResult { state: here.clone(), status: status.to_string(), duration_ms, reason }
            } else {
                Event::CodeResult { state: here.clone(), status: status.to_string(), duration_ms, reason }
            }
        };
        match (decision, error) {
            (Some(Decision::Raise { code, reason }), _) => {
                self.emit(result("raised", Some(reason.clone())));
                self.emit(Event::Raised {
                    state: here.clone(),
                    code: code.clone(),
                    reason: reason.clone(),
                    call_id: None,
                });
                self.session.head.exit = Some(Exit { code, reason, state: here.clone(), raised: true });
                self.session.head.status = Status::Failed;
                self.session.head.rejected = None;
                self.emit(Event::StateLeave { state: here, next: None });
            }
            (_, Some(error)) => {
                let reason = if kind == StateKind::Grader {
                    format!("the grader failed: {error}")
                } else {
                    format!("the script failed: {error}")
                };
                self.emit(result("failed", Some(reason.clone())));
                self.session.head.rejected = Some(reason);
                self.route_failure();
            }
            (Some(Decision::Advance { target, to, reason, attached }), None) => {
                self.emit(result("advanced", Some(reason.clone())));
                self.emit(Event::Advance {
                    from: here.clone(),
                    to: to.clone(),
                    reason: Some(reason.clone()),
                    call_id: None,
                });
                let said = reason.trim_end().trim_end_matches('.');
                let note = if kind == StateKind::Grader {
                    format!(
                        "[grader] The '{here}' grader moved the run to '{to}': {said}. Act on that reason in '{to}'."
                    )
                } else {
                    format!("[code] '{here}' moved the run to '{to}': {said}. Act on that reason in '{to}'.")
                };
                self.note(if kind == StateKind::Grader { NoteKind::Grader } else { NoteKind::Code }, note);
                self.move_to(target);
                self.push_trail(
                    &to,
                    if kind == StateKind::Grader { TrailKind::Grader } else { TrailKind::Code },
                    Some(reason),
                );
                self.session.head.rejected = None;
                if self.state(target).kind == StateKind::Human {
                    self.enter_human(target, attached);
                }
            }
            (None, None) if self.state(id).is_terminal() => {
                self.emit(result("completed", None));
                self.complete();
            }
            (None, None) => {
                let reason =
                    format!("{type_name} state '{here}' finished without calling archmax_advance or archmax_raise");
                self.emit(result("failed", Some(reason.clone())));
                self.session.head.rejected = Some(reason);
                self.route_failure();
            }
        }
    }

    /// A grader state: an isolated model run over the state's own surface.
    pub(super) async fn grader_step(&mut self, id: StateId) -> Result<(), RunError> {
        if let Some(stop) = self.budget_stop(id, None).await {
            self.stop_at_budget(stop);
            return self.commit().await;
        }
        let started = self.now();
        let here = self.slug(id).to_string();
        self.emit(Event::GraderStart { state: here.clone() });
        self.begin_automated(StateKind::Grader);
        let budget = self.state(id).budget.timeout_ms.map(Duration::from_millis);
        let outcome = match budget {
            Some(limit) => match tokio::time::timeout(limit, self.grader_loop(id)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("the grader ran longer than its time budget (timeoutMs: {})", limit.as_millis())),
            },
            None => self.grader_loop(id).await,
        };
        match outcome {
            Ok(()) => self.settle(id, None, started),
            Err(error) if error == BUDGET => {
                // The grader's next call would pass a limit: it starts afresh once raised.
                self.automated = None;
                if let Some(stop) = self.ledger.take_budget_stop() {
                    self.stop_at_budget(stop);
                }
            }
            Err(error) if error == RECURSION => {
                self.automated = None;
                let reason = format!(
                    "the turn took more than {} steps without finishing; a cycle of states may never end",
                    self.runtime.recursion_limit()
                );
                self.fail("recursion-limit", &reason);
            }
            Err(error) => self.settle(id, Some(error), started),
        }
        self.commit().await
    }

    /// The grader's model calls, until it decides or stops calling tools.
    async fn grader_loop(&mut self, id: StateId) -> Result<(), String> {
        let here = self.slug(id).to_string();
        let program = self.program();
        let state = self.state(id);
        let block = self.volatile_block(id, false);
        let transitions: Vec<String> = state
            .transitions
            .iter()
            .map(|transition| {
                let to = self.slug(transition.target);
                match transition.description {
                    Some(description) => format!("- `{to}`: {}", program.str(description)),
                    None => format!("- `{to}`"),
                }
            })
            .collect();
        let task = format!(
            "Grade the session at state '{here}'. Read it with archmax_get_history, check the work against your criteria, then decide with archmax_advance along one of these transitions, or archmax_raise:\n{}",
            transitions.join("\n")
        );
        let mut transcript = vec![Message::User { text: task, opening: None }];
        loop {
            if self.ledger.count_step() > self.runtime.recursion_limit() {
                return Err(RECURSION.to_string());
            }
            if let Some(stop) = self.budget_stop(id, None).await {
                self.ledger.hold_budget_stop(stop);
                return Err(BUDGET.to_string());
            }
            let definitions = self.definitions(id).await;
            let variables = self.session.variable_values();
            let system = SystemPrompt { fixed: GRADER_PREAMBLE, volatile: &block };
            let request =
                ModelRequest::for_grader(self.call_subject(id, &here, &variables), system, &transcript, &definitions);
            let response = match self.runtime.model().call(request).await {
                Ok(response) => response,
                Err(ModelError::Timeout(limit)) => {
                    return Err(format!("the grader's model call timed out after {} ms", limit.as_millis()));
                }
                Err(error) => return Err(format!("the grader's model call failed: {error}")),
            };
            self.record_fallbacks(id, &response);
            self.record_usage(id, &response, crate::model::Role::Grader);
            if let Some(reading) = &response.tape {
                self.session.head.tape = Some(reading.clone());
            }
            transcript
                .push(Message::Assistant { text: response.text.clone(), tool_calls: response.tool_calls.clone() });
            if response.tool_calls.is_empty() {
                return Ok(());
            }
            let mut answers = Vec::with_capacity(response.tool_calls.len());
            for call in &response.tool_calls {
                let answer = if self.automated.as_ref().is_some_and(AutomatedRun::has_decided)
                    && !matches!(Tool::from_name(&call.name), Some(Tool::Advance | Tool::Raise))
                {
                    Answer::error("The grader has decided; this call was not run.")
                } else {
                    self.handle_call(id, call, Caller::Grader, response.tool_calls.len() == 1, &mut None).await
                };
                answers.push(answer);
            }
            // Sub-workflow calls of this message run together, then answer in place.
            for (call_id, answer) in self.run_deferred(Caller::Grader).await {
                if let Some(index) = response.tool_calls.iter().position(|call| call.id == call_id) {
                    answers[index] = answer;
                }
            }
            for (call, answer) in response.tool_calls.iter().zip(answers) {
                transcript.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: answer.content,
                    status: answer.status,
                });
            }
            if self.automated.as_ref().is_some_and(AutomatedRun::has_decided) {
                return Ok(());
            }
        }
    }
}

/// Marks a grader loop stopped by the recursion limit.
const RECURSION: &str = "\u{0}recursion-limit";

/// Marks a grader loop stopped before a call that would pass a budget (the stop is held
/// in the ledger).
const BUDGET: &str = "\u{0}budget";

fn already(decision: &Decision) -> String {
    match decision {
        Decision::Advance { to, .. } => {
            format!("this state already decided to move to '{to}'; the first decision stands")
        }
        Decision::Raise { code, .. } => format!("this state already raised `{code}`; the first decision stands"),
    }
}

/// How a host call from a script is answered: text, or the refusal that rejects it.
fn reply_of(answer: Answer) -> Result<String, String> {
    if answer.refused {
        // The rejection is an Error already: its message needs no `Error:` of its own.
        Err(answer.content.strip_prefix("Error: ").map(str::to_string).unwrap_or(answer.content))
    } else {
        Ok(answer.content)
    }
}

impl Turn<'_> {
    /// The tools a script may name: everything the state is handed, and every other
    /// name the runtime knows (the kernel refuses those at the call).
    pub(super) fn bridge(&self, id: StateId) -> Bridge {
        let program = self.program();
        let state = self.state(id);
        // The host's essential tools are on in every state, for scripts as for the model.
        let mut visible: Vec<String> =
            self.workflow.surface(state.surface).tools.iter().map(|tool| program.str(tool.name).to_string()).collect();
        for essential in self.runtime.essential_tools() {
            if !visible.contains(essential) && !self.denied_by_name(id, essential) {
                visible.push(essential.clone());
            }
        }
        let mut callable = visible.clone();
        let known = DEFAULT_TOOLS
            .iter()
            .map(|name| name.to_string())
            .chain(state.guards.grants.iter().map(|grant| program.str(grant.tool).to_string()))
            .chain(self.workflow.callees.iter().map(|callee| program.str(callee.tool).to_string()));
        for name in known {
            if !callable.contains(&name) {
                callable.push(name);
            }
        }
        Bridge { visible, callable }
    }

    /// Answers a script's host calls while `work` runs: each is decided by the kernel
    /// against the state active at that moment and executed like a model's call. A
    /// sub-workflow call runs its child alongside the script, so a `Promise.all` fans out
    /// (at most four children at once); its answer goes back when the child settles.
    pub(super) async fn serve<T>(
        &mut self,
        caller: Caller,
        work: impl std::future::Future<Output = T>,
        mut calls: tokio::sync::mpsc::UnboundedReceiver<HostCall>,
    ) -> T {
        use futures_util::StreamExt;
        tokio::pin!(work);
        let runtime = self.runtime;
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(super::delegate::MAX_IN_FLIGHT));
        let mut children = futures_util::stream::FuturesUnordered::new();
        let mut served = 0u64;
        loop {
            tokio::select! {
                biased;
                result = &mut work => {
                    // The script is over; children it started still settle, so their
                    // sessions, events and trail steps stay whole.
                    while let Some(((meta, outcome), _reply)) = children.next().await {
                        let answer = self.finish_delegation(&meta, outcome, caller).await;
                        self.emit_delegation_result(&meta, &answer, caller);
                    }
                    return result;
                }
                Some(((meta, outcome), reply)) = children.next(), if !children.is_empty() => {
                    let answer = self.finish_delegation(&meta, outcome, caller).await;
                    self.emit_delegation_result(&meta, &answer, caller);
                    let reply: tokio::sync::oneshot::Sender<Result<String, String>> = reply;
                    let _ = reply.send(reply_of(answer));
                }
                Some(call) = calls.recv() => {
                    served += 1;
                    let id = self.position_id();
                    let tool_call = crate::session::ToolCall {
                        id: format!("{}-{}-{served}", caller.origin(), self.session.seq + 1),
                        name: call.tool,
                        args: call.args,
                    };
                    let answer = Box::pin(self.handle_call(id, &tool_call, caller, false, &mut None)).await;
                    let prepared = if answer.deferred { self.delegations.take_last() } else { None };
                    match prepared {
                        Some(prepared) => {
                            let child = super::delegate::run_child(runtime, prepared, std::sync::Arc::clone(&slots));
                            let reply = call.reply;
                            children.push(async move { (child.await, reply) });
                        }
                        None => {
                            let _ = call.reply.send(reply_of(answer));
                        }
                    }
                }
            }
        }
    }

    /// A code state: its script runs from the artifact's bytecode in a fresh context.
    pub(super) async fn code_step(&mut self, id: StateId) -> Result<(), RunError> {
        let started = self.now();
        let here = self.slug(id).to_string();
        let workflow = self.workflow;
        let program = self.program();
        let Some(script) = self.state(id).script.map(|script| workflow.script(script)) else {
            self.session.head.rejected = Some(format!("code state '{here}' has no script in this artifact"));
            self.route_failure();
            return self.commit().await;
        };
        let path = program.str(script.path);
        self.emit(Event::CodeStart { state: here.clone(), script: path.to_string() });
        self.begin_automated(StateKind::Code);
        let limits = Limits::from_settings(&workflow.settings);
        let bridge = self.bridge(id);
        let input = json!({
            "state": here,
            "trigger": self.session.head.trigger,
            "variables": self.session.variable_values(),
        });
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let run = crate::sandbox::off_the_workers(Sandbox::run_module_logged(
            &limits,
            path,
            &script.bytecode,
            input,
            &bridge,
            sender,
        ));
        let (result, console) = self.serve(Caller::Code, run, receiver).await;
        for line in console {
            self.emit(Event::CodeOutput { state: here.clone(), line });
        }
        let error = result.err().map(|error| error.to_string());
        self.settle(id, error, started);
        self.commit().await
    }

    /// The session's REPL for `archmax_eval` and `archmax_run`, created on first use.
    async fn repl(&self) -> Result<std::sync::Arc<Sandbox>, String> {
        if let Some(repl) = self.runtime.repl(&self.session.id) {
            return Ok(repl);
        }
        let sandbox = Sandbox::new(Limits::from_settings(&self.workflow.settings))
            .await
            .map_err(|error| format!("Error: the sandbox could not start: {error}"))?;
        Ok(self.runtime.keep_repl(&self.session.id, sandbox))
    }

    /// `archmax_eval { code }` and `archmax_run { file_path, … }`: JavaScript in the
    /// session's REPL, its `tools.*` calls on the agent's authority.
    ///
    /// The script reads the session's variables as `args.variables`, a copy it cannot write
    /// back through, and only where the state may call `archmax_get_variables`
    /// ([`Turn::script_variables`]).
    pub(super) async fn script_tool(&mut self, id: StateId, call: &ToolCall, tool: Tool, args: &Value) -> Answer {
        let (label, source, mut script_args) = if tool == Tool::Eval {
            match args.get("code").and_then(Value::as_str) {
                Some(code) if !code.trim().is_empty() => ("eval".to_string(), code.to_string(), json!({})),
                _ => return Answer::error("Error: `code` must be a non-empty string of JavaScript."),
            }
        } else {
            let Some(path) = args.get("file_path").and_then(Value::as_str) else {
                return Answer::error("Error: `file_path` must name a script inside an enabled skill bundle.");
            };
            let canonical = match archmax_program::zones::canonicalize(path) {
                Ok(canonical) => canonical,
                Err(_) => return Answer::error(format!("Error: '{path}' climbs above the workspace root.")),
            };
            let source = match self.workspace.read_limited(&canonical, self.runtime.limits().file_bytes) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(_) => return Answer::error(format!("Error: '{canonical}' is not a text file.")),
                },
                Err(error) => return Answer::error(format!("Error: {error}")),
            };
            (canonical, source, args.clone())
        };
        // `args.variables` is the session's own, never what the caller passed under the name.
        let withheld = match self.script_variables(id, call) {
            Ok(variables) => {
                if let Value::Object(map) = &mut script_args {
                    map.insert("variables".to_string(), variables);
                }
                None
            }
            Err(refused) => {
                if let Value::Object(map) = &mut script_args {
                    map.remove("variables");
                }
                Some(refused)
            }
        };
        let repl = match self.repl().await {
            Ok(repl) => repl,
            Err(problem) => return Answer::error(problem),
        };
        let bridge = self.bridge(id);
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let evaluation =
            crate::sandbox::off_the_workers(repl.eval_named(&label, &source, &bridge, script_args, sender));
        let result = self.serve(Caller::Script, evaluation, receiver).await;
        match result {
            Ok(output) => {
                let mut text = String::new();
                if let Some(withheld) = &withheld {
                    text.push_str(withheld);
                    text.push_str("\n\n");
                }
                if !output.console.is_empty() {
                    text.push_str(&output.console.join("\n"));
                    text.push_str("\n\n");
                }
                text.push_str(&output.value);
                Answer::ok(text)
            }
            Err(error) => Answer::error(format!("Error: {error}")),
        }
    }

    /// The session's variables for a script's `args.variables`: what `archmax_get_variables`
    /// would show, so the kernel decides that call here. A state that may not make it
    /// gets no variables: the refusal is recorded as a blocked `archmax_get_variables` of
    /// the script tool's call, and its text (the `Err`) heads the script's answer.
    fn script_variables(&mut self, id: StateId, call: &ToolCall) -> Result<Value, String> {
        let variables = self.variables_json();
        let read = ToolCall { id: call.id.clone(), name: Tool::GetVariables.name().to_string(), args: json!({}) };
        let verdict = decide(
            &self.policy(),
            &Call {
                state: self.state(id),
                tool: &read.name,
                args: &read.args,
                origin: Origin::Model,
                reply_only: false,
                variables: &variables,
                declared_paths: None,
            },
        );
        if verdict.allowed {
            return Ok(variables);
        }
        let here = self.slug(id).to_string();
        let answer = self.refuse(&here, &read, Caller::Script.origin(), &read.args, verdict);
        Err(format!("This script was given no `args.variables`: {}", answer.content))
    }
}
