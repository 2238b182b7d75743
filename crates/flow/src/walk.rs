//! The walker: a document's sections, attempt by attempt, layer by layer.
//!
//! A group attempt asks the transition hooks at `enter`, runs its layers (a node whose
//! needs did not all pass is skipped), collects what its steps and clean child groups
//! give, checks its promise (`handoff-incomplete` fails once, never retried), asks the
//! hooks at `leave`, files its session and either leaves or goes round again. Only a
//! clean section hands anything on. A finished walk tells its `stop` hooks how it ended
//! just before `flow-finished`; they cannot change it.
//!
//! The one thing to know: **every node of a layer starts from the layer's start**: the
//! conversation and the handoffs as they stood when the layer became ready. A layer's
//! reports are applied in document order (messages appended, gives written, last write
//! wins), so running its steps one by one or `--parallel N` at once gives the same
//! conversation, the same gives and the same events in the same order. Nodes of one
//! layer are independent by construction (none needs another), which is why none
//! should see another's transcript. A step that runs alone is announced (`step-started`)
//! before it runs, so what it asks on the terminal follows its own start line; the events
//! come out in the same order either way, and a step cut short (killed, a model error)
//! leaves its start line behind.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};

use archmax_vm::model::{ModelError, TapeReading};
use archmax_vm::session::id::{SessionId, check_session_id};
use archmax_vm::session::{FlowPart, Head, Message, SessionState, SessionStore, Status, StoreError, Usage};

use crate::document::{FlowDocument, Group, Node, StepKind, join_path};
use crate::events::FlowEvent;
use crate::hooks::{HookAnswer, Hooks};
use crate::record::{Record, RecordError, Recorded};
use crate::step::{Outcome, Spend, StepEnvironment};
use steps::LayerStart;

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
    #[error("the session `{id}` of the walk cannot be filed: {problem}")]
    Session { id: String, problem: String },
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
    /// The store sessions are filed in; `None` under `--no-session`.
    pub store: Option<&'a dyn SessionStore>,
    /// What an earlier process of this walk recorded, and the operator's verdict.
    pub recorded: Recorded,
    pub operator: Option<OperatorVerdict>,
    pub cancel: &'a AtomicBool,
    /// The command line that continues this walk from a pause, carried by `flow-paused`
    /// (the caller knows its own arguments); `None` when nothing can resume it.
    pub resume_command: Option<&'a str>,
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
            walker.stop_hooks(clean);
            walker.emit(FlowEvent::FlowFinished {
                flow: document.id.clone(),
                run: environment.run.to_string(),
                ran: walker.tallies.ran,
                failed: walker.tallies.failed,
                skipped: walker.tallies.skipped,
                retreats: walker.tallies.retreats,
                clean,
            });
            let now = walker.environment.clock.now_ms();
            if let Some(record) = walker.record.as_mut() {
                record.finished(clean, now).await?;
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
        moment: Some(moment.to_string()),
        tool: None,
        attempt: Some(attempt),
        verdict: if answer.proceed { "proceed" } else { "refuse" }.to_string(),
        status: answer.status,
        reason: None,
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
    async fn transition(
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
        let now = self.environment.clock.now_ms();
        if let Some(record) = self.record.as_mut() {
            record.hook(&key, &answer, now).await?;
        }
        Ok(answer)
    }

    /// Tells every `stop` hook how the walk finished, just before `flow-finished`. Each
    /// is asked (a refusal does not spare the next) and recorded; none changes the
    /// walk's status, which is already decided.
    fn stop_hooks(&mut self, clean: bool) {
        let hooks = self.options.hooks;
        if hooks.stop.is_empty() {
            return;
        }
        let path = self.document.root.id.clone();
        let document = json!({
            "hook": "stop",
            "flow": self.document.id,
            "run": self.environment.run,
            "path": path,
            "status": if clean { "clean" } else { "failed" },
            "ran": self.tallies.ran,
            "failed": self.tallies.failed,
            "skipped": self.tallies.skipped,
            "retreats": self.tallies.retreats,
            "workspace": self.environment.workspace_root.display().to_string(),
        });
        for hook in &hooks.stop {
            let answer = hook.ask(&document, self.environment.workspace_root, self.environment.credential_variables);
            self.emit(FlowEvent::HookRan {
                point: "stop".to_string(),
                path: path.clone(),
                moment: None,
                tool: None,
                attempt: None,
                verdict: if answer.proceed { "proceed" } else { "refuse" }.to_string(),
                status: answer.status,
                reason: answer.reason.filter(|_| !answer.proceed),
                replayed: false,
            });
        }
    }

    /// Files the session of one section attempt in the store: its conversation, usage and
    /// outcome, marked with the walk, the section and the attempt. An attempt filed before
    /// (a resumed walk re-walks what it had finished) is filed again, as it now stands.
    async fn file_session(
        &mut self,
        session: &str,
        path: &str,
        attempt: u32,
        failed: bool,
        conversation: &[Message],
        spend: Spend,
    ) -> Result<(), Stop> {
        let Some(store) = self.options.store else { return Ok(()) };
        let refused = |problem: String| WalkError::Session { id: session.to_string(), problem };
        check_session_id(session, &[]).map_err(refused)?;
        let now = self.environment.clock.now_ms();
        let state = attempt_session(
            self.document.id.as_str(),
            self.environment.run,
            session,
            path,
            attempt,
            failed,
            conversation,
            spend,
            now,
        );
        file(store, &state).await.map_err(|error| refused(error.to_string()))?;
        self.emit(FlowEvent::Session {
            id: session.to_string(),
            scope: path.to_string(),
            attempt,
            file: store.local_dir(session).map(|directory| directory.display().to_string()),
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
                let enter = self.transition(&path, &key, "enter", attempt, bound, None).await?;
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
                let first_failure = match run {
                    Ok(first_failure) => first_failure,
                    Err(Stop::Cancelled) => {
                        self.file_session(&session, &path, attempt, true, &conversation, spend).await?;
                        return Err(Stop::Cancelled);
                    }
                    Err(other) => return Err(other),
                };
                let mut failed = first_failure.is_some();
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
                let leave = self.transition(&path, &key, "leave", attempt, bound, Some((failed, &shown))).await?;
                let mut reason = first_failure.unwrap_or_else(|| "it did not hand over what it gives".to_string());
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
                self.file_session(&session, &path, attempt, failed, &conversation, spend).await?;
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
                    // Exhausted: a section that had attempts to repeat with, and used them all.
                    let exhausted = !final_failure && bound > 1;
                    self.emit(FlowEvent::GroupLeft {
                        path: path.clone(),
                        failed: true,
                        gave: gives,
                        attempts: attempt,
                        exhausted,
                    });
                    return Ok(Section { clean: false, gives: Map::new() });
                }
                attempt += 1;
                self.tallies.retreats += 1;
                self.emit(FlowEvent::GroupRepeating { path: path.clone(), attempt, of: bound, reason });
            }
        })
    }

    /// One attempt's layers; `Ok(None)` when every node passed, else what failed first.
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
    ) -> Result<Option<String>, Stop> {
        let mut passed: BTreeMap<String, bool> = BTreeMap::new();
        let mut first_failure: Option<String> = None;
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
            let start = LayerStart { path, session, attempt, group, snapshot: &snapshot, handoffs: &visible };
            let mut reports = self.layer_steps(&ready, &start).await?;
            for node in &ready {
                match node {
                    Node::Step(step) => {
                        let step_path = join_path(path, &step.id);
                        let report = match reports.remove(&step.id) {
                            Some(report) => report,
                            None if step.kind == StepKind::Operator => {
                                self.operator_step(step, &step_path, session, attempt).await?
                            }
                            None => self.run_one(step, &start).await?,
                        };
                        conversation.extend(report.messages.iter().cloned());
                        for (name, value) in &report.gives {
                            gives.insert(name.clone(), value.clone());
                        }
                        spend.add(report.spend);
                        if report.outcome == Outcome::Failed && first_failure.is_none() {
                            let why = report.reason.as_ref().or(report.note.as_ref());
                            let why = why.map_or("it answered failed".to_string(), String::clone);
                            first_failure = Some(format!("`{step_path}` failed: {why}"));
                        }
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
                        if !section.clean && first_failure.is_none() {
                            first_failure =
                                Some(format!("the section `{}` did not come out clean", join_path(path, &child.id)));
                        }
                        passed.insert(child.id.clone(), section.clean);
                    }
                }
            }
        }
        // A node skipped because what it needs failed is covered by that failure.
        Ok(first_failure)
    }
}

/// The session of one section attempt, as it is filed (and as an old layout's attempt
/// is imported, [`crate::legacy`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attempt_session(
    flow: &str,
    run: &str,
    session: &str,
    path: &str,
    attempt: u32,
    failed: bool,
    conversation: &[Message],
    spend: Spend,
    now_ms: u64,
) -> SessionState {
    // Microunits of the run's prices are millionths of its currency.
    let cost = (spend.cost_microunits > 0).then(|| spend.cost_microunits as f64 / 1_000_000.0);
    SessionState {
        id: SessionId::from_store(session),
        head: Head {
            workflow: flow.to_string(),
            status: if failed { Status::Failed } else { Status::Completed },
            usage: Usage {
                input_tokens: spend.input_tokens,
                output_tokens: spend.output_tokens,
                cost_usd: cost,
                ..Usage::default()
            },
            flow: Some(FlowPart {
                run: run.to_string(),
                path: Some(path.to_string()),
                attempt: Some(attempt),
                turns: spend.turns,
                cost_microunits: spend.cost_microunits,
                paused: None,
            }),
            created_at: now_ms,
            updated_at: now_ms,
            ..Head::default()
        },
        messages: conversation.to_vec(),
        ..SessionState::default()
    }
}

/// Files `state` as a new session, or in place of the one filed under its id before,
/// which keeps its start: a resumed walk files again what it had finished, and the
/// attempt did not start again.
async fn file(store: &dyn SessionStore, state: &SessionState) -> Result<(), StoreError> {
    match store.create(state).await {
        Ok(_) => Ok(()),
        Err(StoreError::Exists(_)) => {
            // A filing that cannot be read (damaged) only loses its start: it is replaced.
            let started = store.read(&state.id).await.ok().flatten().map(|before| before.head.created_at);
            let mut again = state.clone();
            if let Some(started) = started {
                again.head.created_at = started;
            }
            store.remove(&state.id).await?;
            store.create(&again).await.map(drop)
        }
        Err(error) => Err(error),
    }
}

/// A fresh flow-run id: 16 and 8 hex digits from the operating system's random source.
pub fn new_run_id() -> Result<String, String> {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).map_err(|error| format!("cannot mint a flow-run id: {error}"))?;
    let hex = archmax_program::hex::hex(&bytes);
    Ok(format!("{}-{}", &hex[..16], &hex[16..]))
}

mod steps;
#[cfg(test)]
mod tests;
