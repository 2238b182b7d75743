//! The walker: a document's sections, attempt by attempt, layer by layer.
//!
//! A group attempt asks the transition hooks at `enter`, runs its layers (a node whose
//! needs did not all pass is skipped), collects what its steps and clean child groups
//! give, checks its promise (`handoff-incomplete` fails once, never retried), asks the
//! hooks at `leave`, files its session and either leaves or goes round again. Only a
//! clean section hands anything on.
//!
//! The one thing to know: **every node of a layer starts from the layer's start**: the
//! conversation and the handoffs as they stood when the layer became ready. A layer's
//! reports are applied in document order (messages appended, gives written, last write
//! wins), so running its steps one by one or `--parallel N` at once gives the same
//! conversation, the same gives and the same events in the same order. Nodes of one
//! layer are independent by construction (none needs another), which is why none
//! should see another's transcript.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};

use archmax_vm::model::{ModelError, TapeReading};
use archmax_vm::session::Message;

use crate::document::{FlowDocument, Group, Node, Step, StepKind, join_path};
use crate::events::FlowEvent;
use crate::hooks::{HookAnswer, Hooks};
use crate::record::{Record, RecordError, Recorded, RecordedStep};
use crate::step::{
    self, CommandStep, ModelStep, Outcome, Remaining, Spend, StepEnvironment, StepReport, exhausted_ceiling,
};

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    Finished { clean: bool },
    Paused,
    Cancelled,
}

impl WalkEnd {
    /// The exit status of the spec's table: 0 clean or awaiting a person, 2 otherwise.
    pub fn exit_status(self) -> u8 {
        match self {
            WalkEnd::Finished { clean: true } | WalkEnd::Paused => 0,
            WalkEnd::Finished { clean: false } | WalkEnd::Cancelled => 2,
        }
    }
}

/// Why a walk stopped without an end of its own: status 1.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("the walk aborted in step `{step}`: {error}")]
    Model { step: String, error: ModelError },
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("a session of the walk cannot be filed at `{path}`: {error}")]
    Session { path: String, error: std::io::Error },
}

/// What stops a section early.
enum Stop {
    Paused,
    Cancelled,
    Failed(WalkError),
}

impl From<WalkError> for Stop {
    fn from(error: WalkError) -> Stop {
        Stop::Failed(error)
    }
}

impl From<RecordError> for Stop {
    fn from(error: RecordError) -> Stop {
        Stop::Failed(WalkError::Record(error))
    }
}

/// An operator's verdict given to `--resume`.
#[derive(Clone, Debug)]
pub struct OperatorVerdict {
    pub outcome: Outcome,
    pub note: Option<String>,
}

/// What a walk is told besides the steps' environment.
pub struct WalkOptions<'a> {
    pub input: &'a str,
    pub max_attempts: Option<u32>,
    pub hooks: &'a Hooks,
    /// At most this many steps of a layer run at once (1 is the sequential walk).
    pub parallel: usize,
    /// Where sessions are filed; `None` under `--no-session`.
    pub session_dir: Option<&'a Path>,
    /// What an earlier process of this walk recorded, and the operator's verdict.
    pub recorded: Recorded,
    pub operator: Option<OperatorVerdict>,
    pub cancel: &'a AtomicBool,
}

type Handoffs = BTreeMap<String, Value>;

/// What a section attempt produced.
struct Section {
    clean: bool,
    gives: Map<String, Value>,
}

#[derive(Default)]
struct Tallies {
    ran: usize,
    failed: usize,
    skipped: usize,
    retreats: usize,
}

/// A walk in progress.
pub struct Walker<'a, 'e> {
    environment: &'a StepEnvironment<'e>,
    document: &'a FlowDocument,
    options: WalkOptions<'a>,
    sink: &'a mut dyn FnMut(&FlowEvent),
    record: Option<Record>,
    tallies: Tallies,
    spent_microunits: u64,
    started_ms: u64,
    tape: Option<TapeReading>,
    calls: u64,
}

/// Walks `document`. `record` is where finished steps are kept (absent under
/// `--no-session`); the events go to `sink` as they happen.
pub async fn walk(
    environment: &StepEnvironment<'_>,
    document: &FlowDocument,
    options: WalkOptions<'_>,
    record: Option<Record>,
    sink: &mut dyn FnMut(&FlowEvent),
) -> Result<WalkEnd, WalkError> {
    let tape = options.recorded.steps.values().filter_map(|step| step.tape.clone()).max_by_key(|tape| tape.used.len());
    let resumed = options.recorded.header.is_some();
    let mut walker = Walker {
        environment,
        document,
        options,
        sink,
        record,
        tallies: Tallies::default(),
        spent_microunits: 0,
        started_ms: environment.clock.now_ms(),
        tape,
        calls: 0,
    };
    walker.emit(FlowEvent::FlowStarted {
        flow: document.id.clone(),
        run: environment.run.to_string(),
        steps: document.root.step_count(),
        resumed,
    });
    let end = match walker.group(&document.root, "", environment.run.to_string(), Handoffs::new()).await {
        Ok(section) => {
            let clean = section.clean;
            walker.emit(FlowEvent::FlowFinished {
                flow: document.id.clone(),
                run: environment.run.to_string(),
                ran: walker.tallies.ran,
                failed: walker.tallies.failed,
                skipped: walker.tallies.skipped,
                retreats: walker.tallies.retreats,
                clean,
            });
            if let Some(record) = walker.record.as_mut() {
                record.finished(clean)?;
            }
            WalkEnd::Finished { clean }
        }
        Err(Stop::Paused) => WalkEnd::Paused,
        Err(Stop::Cancelled) => WalkEnd::Cancelled,
        Err(Stop::Failed(error)) => return Err(error),
    };
    Ok(end)
}

/// The key of a node inside the section whose session id is `session` (the record's
/// keys leave out the flow-run id).
fn record_key(run: &str, session: &str, suffix: &str) -> String {
    let chain = session.strip_prefix(run).unwrap_or(session).trim_start_matches('.');
    if chain.is_empty() { suffix.to_string() } else { format!("{chain}{suffix}") }
}

/// The `hook-ran` event of one transition hook's answer.
fn hook_ran(path: &str, moment: &str, attempt: u32, answer: &HookAnswer, replayed: bool) -> FlowEvent {
    FlowEvent::HookRan {
        point: "transition".to_string(),
        path: path.to_string(),
        moment: moment.to_string(),
        attempt,
        verdict: if answer.proceed { "proceed" } else { "refuse" }.to_string(),
        status: answer.status,
        replayed,
    }
}

/// Every step path inside `node`.
fn step_paths(node: &Node, parent: &str, into: &mut Vec<String>) {
    let path = join_path(parent, node.id());
    match node {
        Node::Step(_) => into.push(path),
        Node::Group(group) => {
            for child in &group.nodes {
                step_paths(child, &path, into);
            }
        }
    }
}

impl<'a, 'e> Walker<'a, 'e> {
    fn emit(&mut self, event: FlowEvent) {
        (self.sink)(&event);
    }

    fn cancelled(&self) -> bool {
        self.options.cancel.load(Ordering::SeqCst)
    }

    /// Asks every transition hook (or the record) at `moment`; the first refusal wins.
    fn transition(
        &mut self,
        path: &str,
        key: &str,
        moment: &str,
        attempt: u32,
        of: u32,
        leave: Option<(bool, &Map<String, Value>)>,
    ) -> Result<HookAnswer, Stop> {
        let mut answer = HookAnswer { proceed: true, reason: None, status: None };
        if self.options.hooks.transition.is_empty() {
            return Ok(answer);
        }
        let key = format!("{key}@{moment}");
        if let Some(recorded) = self.options.recorded.hooks.get(&key).cloned() {
            self.emit(hook_ran(path, moment, attempt, &recorded, true));
            return Ok(recorded);
        }
        let mut document = json!({
            "hook": "transition",
            "flow": self.document.id,
            "path": path,
            "moment": moment,
            "attempt": attempt,
            "of": of,
            "workspace": self.environment.workspace_root.display().to_string(),
        });
        if let Some((failed, handoff)) = leave {
            document["failed"] = Value::Bool(failed);
            document["handoff"] = Value::Object(handoff.clone());
        }
        for hook in &self.options.hooks.transition {
            answer = hook.ask(&document, self.environment.workspace_root, self.environment.credential_variables);
            self.emit(hook_ran(path, moment, attempt, &answer, false));
            if !answer.proceed {
                break;
            }
        }
        if let Some(record) = self.record.as_mut() {
            record.hook(&key, &answer)?;
        }
        Ok(answer)
    }

    /// Files the session of one section attempt.
    fn file_session(
        &mut self,
        session: &str,
        path: &str,
        attempt: u32,
        failed: bool,
        conversation: &[Message],
        spend: Spend,
    ) -> Result<(), Stop> {
        let file = match self.options.session_dir {
            None => return Ok(()),
            Some(directory) => directory.join(format!("{session}.json")),
        };
        let document = json!({
            "id": session,
            "flow": self.document.id,
            "run": self.environment.run,
            "scope": path,
            "attempt": attempt,
            "failed": failed,
            "spend": spend,
            "messages": conversation,
        });
        let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
        text.push('\n');
        std::fs::write(&file, text).map_err(|error| WalkError::Session { path: file.display().to_string(), error })?;
        self.emit(FlowEvent::Session {
            id: session.to_string(),
            scope: path.to_string(),
            attempt,
            file: Some(file.display().to_string()),
            turns: spend.turns,
            input_tokens: spend.input_tokens,
            output_tokens: spend.output_tokens,
            cost_microunits: spend.cost_microunits,
        });
        Ok(())
    }

    fn skip(&mut self, node: &Node, parent: &str, because: &str) {
        let mut paths = Vec::new();
        step_paths(node, parent, &mut paths);
        for path in paths {
            self.tallies.skipped += 1;
            self.emit(FlowEvent::NodeSkipped { path, because: because.to_string() });
        }
    }

    /// Every attempt of one section.
    fn group<'s>(
        &'s mut self,
        group: &'s Group,
        parent: &'s str,
        parent_session: String,
        handoffs: Handoffs,
    ) -> Pin<Box<dyn Future<Output = Result<Section, Stop>> + 's>> {
        Box::pin(async move {
            let path = join_path(parent, &group.id);
            let bound = group.bound(self.options.max_attempts);
            let mut attempt = 1;
            loop {
                let session = format!("{parent_session}.{}.{attempt}", group.id);
                let key = record_key(self.environment.run, &session, "");
                let enter = self.transition(&path, &key, "enter", attempt, bound, None)?;
                if !enter.proceed {
                    let reason = enter.reason.unwrap_or_default();
                    self.emit(FlowEvent::TransitionRefused {
                        path: path.clone(),
                        moment: "enter".to_string(),
                        attempt,
                        reason,
                    });
                    for node in &group.nodes {
                        self.skip(node, &path, "enter-refused");
                    }
                    self.emit(FlowEvent::GroupLeft {
                        path: path.clone(),
                        failed: true,
                        gave: Map::new(),
                        attempts: attempt,
                        exhausted: false,
                    });
                    return Ok(Section { clean: false, gives: Map::new() });
                }
                let layers = group.layers();
                self.emit(FlowEvent::GroupEntered {
                    path: path.clone(),
                    layers: layers
                        .iter()
                        .map(|layer| layer.iter().map(|node| node.id().to_string()).collect())
                        .collect(),
                    attempt,
                    of: bound,
                });
                let mut conversation: Vec<Message> = Vec::new();
                let mut spend = Spend::default();
                let mut gives = Map::new();
                let run = self
                    .attempt(
                        group,
                        &path,
                        &session,
                        attempt,
                        &layers,
                        &handoffs,
                        &mut conversation,
                        &mut gives,
                        &mut spend,
                    )
                    .await;
                let steps_clean = match run {
                    Ok(clean) => clean,
                    Err(Stop::Cancelled) => {
                        self.file_session(&session, &path, attempt, true, &conversation, spend)?;
                        return Err(Stop::Cancelled);
                    }
                    Err(other) => return Err(other),
                };
                let mut failed = !steps_clean;
                let mut final_failure = false;
                let missing: Vec<String> =
                    group.gives.iter().filter(|name| !gives.contains_key(*name)).cloned().collect();
                if !failed && !missing.is_empty() {
                    self.emit(FlowEvent::HandoffIncomplete { path: path.clone(), missing });
                    failed = true;
                    final_failure = true;
                }
                let last = attempt >= bound || final_failure;
                let shown = if failed && !last { Map::new() } else { gives.clone() };
                let leave = self.transition(&path, &key, "leave", attempt, bound, Some((failed, &shown)))?;
                let mut reason = if final_failure {
                    "the section did not hand over what it gives".to_string()
                } else {
                    "a step did not pass".to_string()
                };
                if !leave.proceed {
                    let refusal = leave.reason.unwrap_or_default();
                    self.emit(FlowEvent::TransitionRefused {
                        path: path.clone(),
                        moment: "leave".to_string(),
                        attempt,
                        reason: refusal.clone(),
                    });
                    if !failed {
                        failed = true;
                        reason = format!("the leave was refused: {refusal}");
                    }
                }
                self.file_session(&session, &path, attempt, failed, &conversation, spend)?;
                if !failed {
                    self.emit(FlowEvent::GroupLeft {
                        path: path.clone(),
                        failed: false,
                        gave: gives.clone(),
                        attempts: attempt,
                        exhausted: false,
                    });
                    return Ok(Section { clean: true, gives });
                }
                if last {
                    self.emit(FlowEvent::GroupLeft {
                        path: path.clone(),
                        failed: true,
                        gave: gives,
                        attempts: attempt,
                        exhausted: !final_failure,
                    });
                    return Ok(Section { clean: false, gives: Map::new() });
                }
                attempt += 1;
                self.tallies.retreats += 1;
                self.emit(FlowEvent::GroupRepeating { path: path.clone(), attempt, of: bound, reason });
            }
        })
    }

    /// One attempt's layers; `Ok(true)` when every node passed.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &mut self,
        group: &Group,
        path: &str,
        session: &str,
        attempt: u32,
        layers: &[Vec<&Node>],
        handoffs: &Handoffs,
        conversation: &mut Vec<Message>,
        gives: &mut Map<String, Value>,
        spend: &mut Spend,
    ) -> Result<bool, Stop> {
        let mut passed: BTreeMap<String, bool> = BTreeMap::new();
        let mut available = handoffs.clone();
        for (index, layer) in layers.iter().enumerate() {
            if self.cancelled() {
                return Err(Stop::Cancelled);
            }
            let mut ready = Vec::new();
            for node in layer {
                if node.needs().iter().all(|need| passed.get(need).copied().unwrap_or(false)) {
                    ready.push(*node);
                } else {
                    self.skip(node, path, "needs-failed");
                    passed.insert(node.id().to_string(), false);
                }
            }
            if ready.is_empty() {
                continue;
            }
            self.emit(FlowEvent::LayerReady {
                path: path.to_string(),
                layer: index + 1,
                nodes: ready.iter().map(|node| node.id().to_string()).collect(),
            });
            let snapshot = conversation.clone();
            let visible = available.clone();
            let mut reports = self.layer_steps(&ready, path, session, attempt, group, &snapshot, &visible).await?;
            for node in &ready {
                match node {
                    Node::Step(step) => {
                        let step_path = join_path(path, &step.id);
                        let report = match reports.remove(&step.id) {
                            Some(report) => report,
                            None if step.kind == StepKind::Operator => {
                                self.operator_step(step, &step_path, session, attempt)?
                            }
                            None => self.run_one(step, path, session, attempt, group, &snapshot, &visible).await?,
                        };
                        conversation.extend(report.messages.iter().cloned());
                        for (name, value) in &report.gives {
                            gives.insert(name.clone(), value.clone());
                        }
                        spend.add(report.spend);
                        passed.insert(step.id.clone(), report.outcome == Outcome::Passed);
                    }
                    Node::Group(child) => {
                        let section = self.group(child, path, session.to_string(), visible.clone()).await?;
                        if section.clean {
                            for (name, value) in &section.gives {
                                available.insert(name.clone(), value.clone());
                                if group.gives.contains(name) {
                                    gives.insert(name.clone(), value.clone());
                                }
                            }
                        }
                        passed.insert(child.id.clone(), section.clean);
                    }
                }
            }
        }
        Ok(passed.values().all(|ok| *ok))
    }

    /// Runs (or replays) the model and command steps of one layer, at most `parallel`
    /// at once, and applies their records and events in document order. Operator steps
    /// are left to the caller, which meets them in order.
    #[allow(clippy::too_many_arguments)]
    async fn layer_steps(
        &mut self,
        ready: &[&Node],
        path: &str,
        session: &str,
        attempt: u32,
        group: &Group,
        snapshot: &[Message],
        handoffs: &Handoffs,
    ) -> Result<BTreeMap<String, StepReport>, Stop> {
        let steps: Vec<&Step> = ready
            .iter()
            .filter_map(|node| match node {
                Node::Step(step) if step.kind != StepKind::Operator => Some(step),
                _ => None,
            })
            .collect();
        // A layer holding an operator step runs one step at a time, so nothing after the
        // pause has run when the walk stops there.
        let has_operator = ready.iter().any(|node| matches!(node, Node::Step(step) if step.kind == StepKind::Operator));
        let width = if has_operator { 1 } else { self.options.parallel.max(1) };
        let mut reports = BTreeMap::new();
        if has_operator {
            // The caller meets them in document order, one at a time.
            return Ok(reports);
        }
        for chunk in steps.chunks(width) {
            let mut pending = Vec::new();
            let mut replayed = Vec::new();
            for step in chunk {
                let key = record_key(self.environment.run, session, &format!(".{}", step.id));
                match self.options.recorded.steps.get(&key) {
                    Some(recorded) => replayed.push((step.id.clone(), recorded.clone())),
                    None => pending.push(*step),
                }
            }
            let remaining = Remaining { spent_microunits: self.spent_microunits, started_ms: self.started_ms };
            let mut prepared: Vec<(&Step, String, PreparedStep, String)> = Vec::new();
            for step in &pending {
                let step_path = join_path(path, &step.id);
                self.calls += 1;
                let ready = self.prepare(step, &step_path, attempt, path, handoffs);
                prepared.push((*step, step_path, ready, format!("call-{}", self.calls)));
            }
            let environment = self.environment;
            let tape = self.tape.clone();
            let futures = prepared.iter().map(|(step, step_path, ready, call_id)| {
                run_prepared(
                    environment,
                    step,
                    step_path,
                    ready,
                    snapshot,
                    &group.gives,
                    remaining,
                    tape.as_ref(),
                    call_id.clone(),
                )
            });
            let results = futures_util::future::join_all(futures).await;
            let mut fresh = BTreeMap::new();
            for ((step, step_path, _, _), result) in prepared.iter().zip(results) {
                let report =
                    result.map_err(|error| Stop::Failed(WalkError::Model { step: step_path.clone(), error }))?;
                fresh.insert(step.id.clone(), report);
            }
            // Apply in document order: replayed and fresh alike.
            for step in chunk {
                let step_path = join_path(path, &step.id);
                let key = record_key(self.environment.run, session, &format!(".{}", step.id));
                let report = if let Some((_, recorded)) = replayed.iter().find(|(id, _)| *id == step.id) {
                    self.replay(step, &step_path, attempt, recorded)
                } else if let Some(report) = fresh.remove(&step.id) {
                    self.apply(step, &step_path, attempt, &key, report)?
                } else {
                    continue;
                };
                reports.insert(step.id.clone(), report);
            }
            if self.cancelled() {
                return Err(Stop::Cancelled);
            }
        }
        Ok(reports)
    }

    /// One model or command step, sequentially (a layer with an operator step).
    #[allow(clippy::too_many_arguments)]
    async fn run_one(
        &mut self,
        step: &Step,
        path: &str,
        session: &str,
        attempt: u32,
        group: &Group,
        snapshot: &[Message],
        handoffs: &Handoffs,
    ) -> Result<StepReport, Stop> {
        let step_path = join_path(path, &step.id);
        let key = record_key(self.environment.run, session, &format!(".{}", step.id));
        if let Some(recorded) = self.options.recorded.steps.get(&key).cloned() {
            return Ok(self.replay(step, &step_path, attempt, &recorded));
        }
        self.calls += 1;
        let prepared = self.prepare(step, &step_path, attempt, path, handoffs);
        let remaining = Remaining { spent_microunits: self.spent_microunits, started_ms: self.started_ms };
        let call_id = format!("call-{}", self.calls);
        let report = run_prepared(
            self.environment,
            step,
            &step_path,
            &prepared,
            snapshot,
            &group.gives,
            remaining,
            self.tape.as_ref(),
            call_id,
        )
        .await
        .map_err(|error| Stop::Failed(WalkError::Model { step: step_path.clone(), error }))?;
        self.apply(step, &step_path, attempt, &key, report)
    }

    /// The user message of a model step, or why a step cannot start (a spent flow
    /// ceiling for any step, a refused context file for a model step).
    fn prepare(&self, step: &Step, step_path: &str, attempt: u32, scope: &str, handoffs: &Handoffs) -> PreparedStep {
        let remaining = Remaining { spent_microunits: self.spent_microunits, started_ms: self.started_ms };
        if let Some(ceiling) = exhausted_ceiling(self.environment, remaining) {
            return PreparedStep::Refused {
                code: "flow-budget",
                message: format!("the step does not start: {ceiling}"),
            };
        }
        if let StepKind::Command { .. } = step.kind {
            return PreparedStep::Run(String::new());
        }
        let mut context = String::new();
        for name in &step.context {
            match read_context(self.environment, name) {
                Ok(text) => context.push_str(&format!("\n\nContext file `{name}`:\n{text}")),
                Err(problem) => {
                    return PreparedStep::Refused {
                        code: "context-refused",
                        message: format!(
                            "the context file `{name}` is refused: {problem} (the workspace is `{}`)",
                            self.environment.workspace_root.display()
                        ),
                    };
                }
            }
        }
        let mut input =
            format!("{}\n\nYou are in step {step_path}, attempt {attempt} of section {scope}.", self.options.input);
        if !handoffs.is_empty() {
            input.push_str("\n\nEarlier sections established:");
            for (name, value) in handoffs {
                let shown = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                input.push_str(&format!("\n{name}: {shown}"));
            }
        }
        if let Some(prompt) = &step.prompt {
            input.push_str(&format!("\n\n{prompt}"));
        }
        if let Some(scope) = &step.scope {
            input.push_str(&format!("\n\n{}", scope.describe("This step's")));
        }
        input.push_str(&context);
        PreparedStep::Run(input)
    }

    /// Reports a step the record already holds, without running it.
    fn replay(&mut self, step: &Step, step_path: &str, attempt: u32, recorded: &RecordedStep) -> StepReport {
        self.emit(FlowEvent::StepStarted {
            path: step_path.to_string(),
            step_kind: step.kind.as_str().to_string(),
            state: step.state.clone(),
            attempt,
            replayed: true,
        });
        let report = StepReport {
            outcome: recorded.outcome,
            note: recorded.note.clone(),
            reason: recorded.reason.clone(),
            gives: recorded.gives.clone(),
            messages: recorded.messages.clone(),
            events: Vec::new(),
            spend: recorded.spend,
            tape: recorded.tape.clone(),
        };
        self.finish(step_path, &report, true);
        report
    }

    /// Records, tallies and reports a step that just ran.
    fn apply(
        &mut self,
        step: &Step,
        step_path: &str,
        attempt: u32,
        key: &str,
        report: StepReport,
    ) -> Result<StepReport, Stop> {
        self.emit(FlowEvent::StepStarted {
            path: step_path.to_string(),
            step_kind: step.kind.as_str().to_string(),
            state: step.state.clone(),
            attempt,
            replayed: false,
        });
        for event in &report.events {
            self.emit(event.clone());
        }
        if let Some(record) = self.record.as_mut() {
            record.step(key, &RecordedStep::from_report(&report))?;
        }
        self.finish(step_path, &report, false);
        Ok(report)
    }

    fn finish(&mut self, step_path: &str, report: &StepReport, replayed: bool) {
        self.tallies.ran += 1;
        if report.outcome == Outcome::Failed {
            self.tallies.failed += 1;
        }
        self.spent_microunits += report.spend.cost_microunits;
        if let Some(tape) = &report.tape
            && self.tape.as_ref().is_none_or(|current| current.used.len() <= tape.used.len())
        {
            self.tape = Some(tape.clone());
        }
        self.emit(FlowEvent::StepFinished {
            path: step_path.to_string(),
            outcome: report.outcome.as_str().to_string(),
            note: report.note.clone(),
            reason: report.reason.clone(),
            gives: report.gives.clone(),
            replayed,
        });
    }

    /// An operator step: the person's recorded verdict, or a pause.
    fn operator_step(&mut self, step: &Step, step_path: &str, session: &str, attempt: u32) -> Result<StepReport, Stop> {
        let key = record_key(self.environment.run, session, &format!(".{}", step.id));
        if let Some(recorded) = self.options.recorded.steps.get(&key).cloned() {
            return Ok(self.replay(step, step_path, attempt, &recorded));
        }
        if self.options.recorded.paused.as_deref() == Some(key.as_str())
            && let Some(verdict) = self.options.operator.take()
        {
            let report = StepReport {
                outcome: verdict.outcome,
                note: verdict.note,
                reason: None,
                gives: Map::new(),
                messages: Vec::new(),
                events: Vec::new(),
                spend: Spend::default(),
                tape: None,
            };
            return self.apply(step, step_path, attempt, &key, report);
        }
        self.emit(FlowEvent::FlowPaused {
            flow: self.document.id.clone(),
            run: self.environment.run.to_string(),
            path: step_path.to_string(),
            reason: step.prompt.clone().unwrap_or_default(),
            reached: self.tallies.ran + 1,
            failed: self.tallies.failed,
            skipped: self.tallies.skipped,
            retreats: self.tallies.retreats,
        });
        if let Some(record) = self.record.as_mut() {
            record.paused(&key)?;
        }
        Err(Stop::Paused)
    }
}

/// A model step ready to run, or refused before it calls anything.
enum PreparedStep {
    Run(String),
    Refused { code: &'static str, message: String },
}

#[allow(clippy::too_many_arguments)]
async fn run_prepared(
    environment: &StepEnvironment<'_>,
    step: &Step,
    step_path: &str,
    prepared: &PreparedStep,
    snapshot: &[Message],
    gives: &[String],
    remaining: Remaining,
    tape: Option<&TapeReading>,
    call_id: String,
) -> Result<StepReport, ModelError> {
    match (prepared, &step.kind) {
        (PreparedStep::Refused { code, message }, _) => Ok(step::refused_step(step_path, code, message.clone())),
        (PreparedStep::Run(_), StepKind::Command { argv, timeout_ms }) => {
            Ok(step::command_step(environment, CommandStep { path: step_path, argv, timeout_ms: *timeout_ms }, call_id))
        }
        (PreparedStep::Run(input), _) => {
            let model_step = ModelStep {
                path: step_path,
                node_scope: step.scope.as_ref(),
                input: input.clone(),
                conversation: snapshot,
                gives,
                remaining,
                tape,
            };
            step::model_step(environment, model_step).await
        }
    }
}

/// A context file's text: a relative path inside the workspace that is there.
fn read_context(environment: &StepEnvironment<'_>, name: &str) -> Result<String, String> {
    if Path::new(name).is_absolute() {
        return Err("it is an absolute path".to_string());
    }
    let bytes = environment
        .workspace
        .session
        .read_limited(name, archmax_stdlib::limits::Limits::default().file_bytes)
        .map_err(|error| match error {
            archmax_stdlib::vfs::VfsError::NotFound(_) => "it is not there".to_string(),
            other => format!("it is not a file inside the workspace ({other})"),
        })?;
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
}

/// A fresh flow-run id: 16 and 8 hex digits from the operating system's random source.
pub fn new_run_id() -> Result<String, String> {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).map_err(|error| format!("cannot mint a flow-run id: {error}"))?;
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!("{}-{}", &hex[..16], &hex[16..]))
}

/// Where sessions go when `--session-dir` names nothing: beside the workspace's files.
pub fn default_session_dir(workspace: &Path) -> PathBuf {
    workspace.join(".archmax-flows")
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use archmax_stdlib::vfs::{MemoryVfs, Workspace};
    use archmax_vm::clock::FixedClock;
    use archmax_vm::model::pricing::PricingTable;
    use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse};
    use archmax_vm::session::ToolCall;

    use super::*;
    use crate::read::{Format, read_text};

    /// Answers every step `passed`, giving `verdicts` its own name, after yielding a number
    /// of times that differs per step, so concurrent steps finish out of document order.
    /// It counts how many calls were in flight at once.
    #[derive(Default)]
    struct Staggered {
        in_flight: AtomicUsize,
        most: AtomicUsize,
        order: Mutex<Vec<String>>,
    }

    impl ModelAdapter for Staggered {
        fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
            Box::pin(async move {
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                let step = request.state.rsplit('.').next().unwrap_or_default().to_string();
                for _ in 0..2 + (10 - step.len().min(10)) * 2 {
                    tokio::task::yield_now().await;
                }
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                if let Ok(mut order) = self.order.lock() {
                    order.push(step.clone());
                }
                let args = json!({ "outcome": "passed", "gives": { "verdicts": step } });
                Ok(ModelResponse {
                    tool_calls: vec![ToolCall { id: format!("{}-call", request.state), name: "answer".into(), args }],
                    ..ModelResponse::default()
                })
            })
        }
    }

    const DOCUMENT: &str = "id: four\nroot:\n  id: root\n  nodes:\n    - id: reviews\n      gives: [verdicts]\n      nodes:\n        - id: security\n        - id: docs\n        - id: tests\n        - id: style\n        - {id: collect, needs: [security, docs, tests, style]}\n";

    async fn walk_with(parallel: usize, model: &Staggered) -> (Vec<String>, Option<WalkEnd>) {
        let loaded = read_text("four.yaml", Path::new("four.yaml"), DOCUMENT, Format::Yaml);
        let Some(document) = loaded.document else { return (Vec::new(), None) };
        let workspace = Workspace { session: std::sync::Arc::new(MemoryVfs::new()), mounts: Vec::new() };
        let pricing = PricingTable::default();
        let clock = FixedClock(0);
        let environment = StepEnvironment {
            flow: "four",
            run: "0000000000000000-00000000",
            model,
            model_name: None,
            pricing: &pricing,
            clock: &clock,
            workspace: &workspace,
            workspace_root: Path::new("."),
            reserved: None,
            run_scope: None,
            budget: step::StepBudget::default(),
            flow_budget: step::FlowBudget::default(),
            allow_program: &[],
            credential_variables: &[],
            system: "system",
        };
        let hooks = Hooks::default();
        let cancel = AtomicBool::new(false);
        let options = WalkOptions {
            input: "review",
            max_attempts: None,
            hooks: &hooks,
            parallel,
            session_dir: None,
            recorded: Recorded::default(),
            operator: None,
            cancel: &cancel,
        };
        let mut events = Vec::new();
        let mut sink = |event: &FlowEvent| events.push(event.json());
        let end = walk(&environment, &document, options, None, &mut sink).await.ok();
        (events, end)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_parallel_layer_runs_at_once_and_reports_in_document_order() {
        let sequential_model = Staggered::default();
        let (sequential, end) = walk_with(1, &sequential_model).await;
        assert_eq!(end, Some(WalkEnd::Finished { clean: true }));
        assert_eq!(sequential_model.most.load(Ordering::SeqCst), 1);
        let parallel_model = Staggered::default();
        let (parallel, end) = walk_with(4, &parallel_model).await;
        assert_eq!(end, Some(WalkEnd::Finished { clean: true }));
        assert_eq!(parallel_model.most.load(Ordering::SeqCst), 4, "the four reviews were in flight together");
        let finished = parallel_model.order.lock().map(|order| order.clone()).unwrap_or_default();
        assert_ne!(finished[..4], ["security", "docs", "tests", "style"], "they finished out of document order");
        assert_eq!(parallel, sequential, "the events are the sequential walk's, in its order");
        let collect = sequential.iter().find(|event| event.contains("group-left")).cloned().unwrap_or_default();
        assert!(collect.contains(r#""gave":{"verdicts":"collect"}"#), "the last write wins: {collect}");
    }
}
