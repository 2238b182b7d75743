//! Cases: running a workflow's `tests/**/*.test.yaml` against the runtime.
//!
//! A case is one conversation on one session. The harness seeds the case's files into
//! the session, then walks its steps in order: an action (`send`, `decide`, `deliver`)
//! drives the runtime exactly as a host would, and every assertion after it is checked
//! against the view that action left (the transcript, the trail, the variables, the
//! park, what the session said). A structural assertion that fails halts the case: the
//! steps after it are recorded `not-executed`. A content assertion that fails does not.
//! `grade` asks the judge model for a score against `atLeast`.
//!
//! Each case gets a runtime of its own (a memory session store, the case's mocks, the
//! model the caller hands in: a tape under `--replay`), so cases never share state and
//! write nothing to the workspace. A case that dies (a refused start, an action the
//! runtime refuses, `caseTimeoutMs`) records the error first, keeps the records it made,
//! and leaves the rest `not-executed`.

mod assertions;
mod judge;
pub mod suite;

use assertions::{
    called_summary, calls, describe_text, describe_tool, is_governance_block, list, parked, raised, reply, said,
    succeeded, text_matches, tool_matches, trail_summary, variables,
};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use archmax_compiler::schema::case::{
    Case, Matcher, ParkChannel, SeedContent, Step, StepKind, SubWorkflowStatus, TextMatcher, ToolMatch,
};
use archmax_program::program::Program;

use crate::clock::Clock;
use crate::events::EventSink;
use crate::model::ModelAdapter;
use crate::model::pricing::PricingTable;
use crate::runtime::{DecideRequest, DeliverRequest, Mock, Outcome, Runtime, RuntimeParts, TurnRequest};
use crate::session::TrailKind;
use crate::session::memory::MemoryStore;
use crate::session::{Message, SessionState, Status, Usage};

/// How one assertion came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordStatus {
    Passed,
    Failed,
    NotExecuted,
}

/// One assertion's result. Serialized with `pass` beside `status`: `status` is the
/// authoritative outcome, `pass` its boolean alias (`status` is `passed`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(into = "RecordDocument")]
pub struct Record {
    pub kind: String,
    pub status: RecordStatus,
    /// `atLeast` of a grade.
    pub threshold: Option<f64>,
    pub score: Option<f64>,
    pub detail: Option<String>,
    /// 0-based index of the step in `steps`.
    pub step: usize,
}

/// A record as the results document shows it.
#[derive(Serialize)]
struct RecordDocument {
    kind: String,
    status: RecordStatus,
    pass: bool,
    threshold: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    step: usize,
}

impl From<Record> for RecordDocument {
    fn from(record: Record) -> RecordDocument {
        RecordDocument {
            kind: record.kind,
            pass: record.status == RecordStatus::Passed,
            status: record.status,
            threshold: record.threshold,
            score: record.score,
            detail: record.detail,
            step: record.step,
        }
    }
}

impl Record {
    fn new(kind: &str, step: usize, failure: Option<String>) -> Record {
        Record {
            kind: kind.to_string(),
            status: if failure.is_some() { RecordStatus::Failed } else { RecordStatus::Passed },
            threshold: None,
            score: None,
            detail: failure,
            step,
        }
    }

    fn not_executed(kind: &str, step: usize) -> Record {
        Record {
            kind: kind.to_string(),
            status: RecordStatus::NotExecuted,
            threshold: None,
            score: None,
            detail: None,
            step,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Passed,
    Failed,
    Skipped,
}

/// One case's result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub id: String,
    pub title: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub verdict: Verdict,
    pub records: Vec<Record>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the case's sessions spent (children and the judge included).
    #[serde(skip)]
    pub usage: Usage,
}

impl CaseResult {
    /// Each failure as `kind: detail`, a dead case's error first.
    pub fn failures(&self) -> Vec<String> {
        let mut out: Vec<String> = self.error.iter().cloned().collect();
        for record in self.records.iter().filter(|record| record.status == RecordStatus::Failed) {
            let mut line = format!("{}: {}", record.kind, record.detail.as_deref().unwrap_or("failed"));
            if let (Some(score), Some(threshold)) = (record.score, record.threshold) {
                line.push_str(&format!(" (score {score:.2} < atLeast {threshold:.2})"));
            }
            out.push(line);
        }
        out
    }

    pub fn not_executed(&self) -> usize {
        self.records.iter().filter(|record| record.status == RecordStatus::NotExecuted).count()
    }

    /// A case that could not be run at all: its file is invalid, its tape is missing.
    /// A case marked `skip:`, which never runs.
    pub fn skipped(case: &Case) -> CaseResult {
        CaseResult {
            verdict: Verdict::Skipped,
            skip_reason: case.skip.clone(),
            error: None,
            ..CaseResult::dead(&case.id, &case.title, &case.description, String::new())
        }
    }

    pub fn dead(id: &str, title: &str, description: &str, error: String) -> CaseResult {
        CaseResult {
            id: id.to_string(),
            title: title.to_string(),
            description: description.to_string(),
            session_id: None,
            verdict: Verdict::Failed,
            records: Vec::new(),
            skip_reason: None,
            error: Some(error),
            usage: Usage::default(),
        }
    }
}

/// What a case runs on, besides its own runtime.
pub struct Harness {
    pub program: Arc<Program>,
    pub workflow: String,
    /// The workspace root (mount sources).
    pub root: PathBuf,
    /// `workflows/<slug>/tests/`, where `from:` fixtures live.
    pub tests_dir: PathBuf,
    pub clock: Arc<dyn Clock>,
    pub pricing: PricingTable,
    /// The host tools every case's runtime asks (after the case's own mocks).
    pub tools: crate::tool_host::HostTools,
    /// The host's context budgets (`[context]` of `archmax.toml`).
    pub context: crate::context::ContextSettings,
}

/// What one case gets from its caller: its model (a tape under replay) and where its
/// events go.
pub struct CaseEnv {
    pub model: Arc<dyn ModelAdapter>,
    pub events: EventSink,
}

/// The session id of a case.
pub(crate) fn session_id_for(case_id: &str) -> String {
    let cleaned: String = case_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect();
    format!("test-{cleaned}")
}

/// The view an action left, which its assertions read.
struct View {
    outcome: Outcome,
    session: SessionState,
    /// Index of the first message this action added.
    opened_at: usize,
}

/// Why a case stopped before its last step.
enum Stop {
    /// A structural assertion failed.
    Halted,
    /// The case died with this error.
    Died(String),
}

impl Harness {
    fn runtime(&self, env: &CaseEnv, mocks: Vec<Mock>) -> Runtime {
        Runtime::builder(RuntimeParts {
            program: Arc::clone(&self.program),
            store: Arc::new(MemoryStore::new()),
            model: Arc::clone(&env.model),
            events: env.events.clone(),
            clock: Arc::clone(&self.clock),
            root: self.root.clone(),
            pricing: self.pricing.clone(),
        })
        .tools(&self.tools)
        .context(self.context)
        .mocks(mocks)
        .build()
    }

    fn timeout(&self) -> Duration {
        let millis = self
            .program
            .workflow(&self.workflow)
            .map(|(_, workflow)| workflow.tests.case_timeout_ms)
            .filter(|millis| *millis > 0)
            .unwrap_or(120_000);
        Duration::from_millis(millis)
    }

    /// Runs one case to its verdict.
    pub async fn run_case(&self, case: &Case, env: CaseEnv) -> CaseResult {
        let mut result = CaseResult {
            id: case.id.clone(),
            title: case.title.clone(),
            description: case.description.clone(),
            session_id: None,
            verdict: Verdict::Passed,
            records: Vec::new(),
            skip_reason: None,
            error: None,
            usage: Usage::default(),
        };
        if case.skip.is_some() {
            return CaseResult::skipped(case);
        }
        let mocks = case.mocks.iter().map(Mock::from).collect();
        let runtime = self.runtime(&env, mocks);
        let session = session_id_for(&case.id);
        result.session_id = Some(session.clone());
        let limit = self.timeout();
        let deadline = tokio::time::Instant::now() + limit;
        let mut driver = Driver {
            harness: self,
            runtime: &runtime,
            case,
            session,
            records: Vec::new(),
            usage: Usage::default(),
            deadline,
            limit,
        };
        // The deadline fires around awaits (a model call, a host call) and is checked
        // again after every action, for work that never awaited.
        let stop = match tokio::time::timeout_at(deadline, driver.drive()).await {
            Ok(stop) => stop,
            Err(_) => Some(Stop::Died(timed_out(limit))),
        };
        let mut records = std::mem::take(&mut driver.records);
        result.usage = driver.usage;
        // Every assertion step without a record was not executed.
        for step in case.steps.iter().filter(|step| !step.is_action()) {
            if !records.iter().any(|record| record.step == step.index) {
                records.push(Record::not_executed(kind_name(&step.kind), step.index));
            }
        }
        records.sort_by_key(|record| record.step);
        if let Some(Stop::Died(error)) = stop {
            result.error = Some(error);
        }
        let failed = result.error.is_some() || records.iter().any(|record| record.status == RecordStatus::Failed);
        result.verdict = if failed { Verdict::Failed } else { Verdict::Passed };
        result.records = records;
        result
    }
}

/// Walks one case's steps.
struct Driver<'h> {
    harness: &'h Harness,
    runtime: &'h Runtime,
    case: &'h Case,
    session: String,
    records: Vec<Record>,
    usage: Usage,
    deadline: tokio::time::Instant,
    limit: Duration,
}

fn timed_out(limit: Duration) -> String {
    format!("the case ran longer than tests.caseTimeoutMs ({} ms) and was stopped", limit.as_millis())
}

impl Driver<'_> {
    async fn drive(&mut self) -> Option<Stop> {
        if let Err(error) = self.seed() {
            return Some(Stop::Died(error));
        }
        let mut view: Option<View> = None;
        for step in &self.case.steps {
            if step.is_action() {
                let acted = self.act(step).await;
                if tokio::time::Instant::now() >= self.deadline {
                    return Some(Stop::Died(timed_out(self.limit)));
                }
                match acted {
                    Ok(next) => view = Some(next),
                    Err(error) => {
                        return Some(Stop::Died(format!("step {} ({}): {error}", step.index, kind_name(&step.kind))));
                    }
                }
                continue;
            }
            let Some(current) = view.as_ref() else {
                return Some(Stop::Died("an assertion came before any action".to_string()));
            };
            let records = self.check(step, current).await;
            let halted =
                step.kind.is_structural() && records.iter().any(|record| record.status == RecordStatus::Failed);
            self.records.extend(records);
            if halted {
                return Some(Stop::Halted);
            }
        }
        None
    }

    /// Writes the case's `workspace` files into its session.
    fn seed(&self) -> Result<(), String> {
        if self.case.workspace.is_empty() {
            return Ok(());
        }
        let workspace = self
            .runtime
            .workspace(&self.session)
            .map_err(|error| format!("the session's files are unavailable: {error}"))?;
        for seed in &self.case.workspace {
            let bytes = match &seed.content {
                SeedContent::Text(text) => text.clone().into_bytes(),
                SeedContent::Json(value) => serde_json::to_string_pretty(value).unwrap_or_default().into_bytes(),
                SeedContent::From(from) => {
                    let path = self.harness.tests_dir.join(&from.value);
                    std::fs::read(&path).map_err(|error| {
                        format!(
                            "the fixture `{}` named by workspace `{}` cannot be read: {error}",
                            from.value, seed.path.value
                        )
                    })?
                }
            };
            workspace
                .write(&seed.path.value, &bytes)
                .map_err(|error| format!("the workspace file `{}` could not be seeded: {error}", seed.path.value))?;
        }
        Ok(())
    }

    fn variables(&self) -> Map<String, Value> {
        self.case.variables.iter().map(|(name, value)| (name.value.clone(), value.clone())).collect()
    }

    async fn act(&mut self, step: &Step) -> Result<View, String> {
        let before = self
            .runtime
            .store()
            .read(&self.session)
            .await
            .ok()
            .flatten()
            .map(|state| state.messages.len())
            .unwrap_or(0);
        let outcome = match &step.kind {
            StepKind::Send(message) => {
                self.runtime
                    .run_turn(TurnRequest {
                        handed: Default::default(),
                        workflow: self.harness.workflow.clone(),
                        session: Some(self.session.clone()),
                        trigger: self.case.trigger.as_ref().map(|trigger| trigger.value.clone()),
                        message: Some(message.clone()),
                        variables: self.variables(),
                        upgrade: false,
                    })
                    .await
            }
            StepKind::Decide { to, comment } => {
                self.runtime
                    .decide(DecideRequest {
                        session: self.session.clone(),
                        workflow: None,
                        to: to.value.clone(),
                        comment: comment.clone(),
                        ..DecideRequest::default()
                    })
                    .await
            }
            StepKind::Deliver { trigger, variables } => {
                self.runtime
                    .deliver(DeliverRequest {
                        session: self.session.clone(),
                        workflow: None,
                        trigger: trigger.clone(),
                        variables: variables.iter().map(|(name, value)| (name.value.clone(), value.clone())).collect(),
                        message: None,
                        upgrade: false,
                        // A case may deliver any event, as a host's library call may.
                        declared_only: false,
                        ..DeliverRequest::default()
                    })
                    .await
            }
            _ => return Err("not an action".to_string()),
        }
        .map_err(|error| error.to_string())?;
        self.usage.add(&outcome.turn_usage);
        let session = self
            .runtime
            .store()
            .read(&self.session)
            .await
            .map_err(|error| error.to_string())?
            .ok_or_else(|| "the session vanished".to_string())?;
        Ok(View { outcome, session, opened_at: before })
    }

    async fn check(&mut self, step: &Step, view: &View) -> Vec<Record> {
        let index = step.index;
        let kind = kind_name(&step.kind);
        let one = |failure: Option<String>| vec![Record::new(kind, index, failure)];
        match &step.kind {
            StepKind::Succeeded => one(succeeded(view)),
            StepKind::Parked { channel, state } => {
                one(parked(view, *channel, state.as_ref().map(|state| state.value.as_str())))
            }
            StepKind::Raised { code, reason } => one(raised(view, code.as_deref(), reason.as_ref())),
            StepKind::ReachedState(state) => {
                let reached =
                    view.session.trail.iter().any(|trail| trail.kind != TrailKind::Trigger && trail.to == state.value);
                one((!reached).then(|| {
                    format!("the session never reached '{}' (trail: {})", state.value, trail_summary(&view.session))
                }))
            }
            StepKind::NoTraversal => {
                let moved: Vec<String> = view
                    .session
                    .trail
                    .iter()
                    .filter(|trail| trail.kind != TrailKind::Trigger)
                    .map(|trail| format!("{} → {}", trail.kind, trail.to))
                    .collect();
                one((!moved.is_empty()).then(|| format!("the session moved: {}", moved.join(", "))))
            }
            StepKind::TriggerArrival(id) => {
                let arrived = view
                    .session
                    .trail
                    .iter()
                    .any(|trail| trail.kind == TrailKind::Trigger && trail.reason.as_deref() == Some(id.as_str()));
                let seen: Vec<&str> = view
                    .session
                    .trail
                    .iter()
                    .filter(|trail| trail.kind == TrailKind::Trigger)
                    .filter_map(|trail| trail.reason.as_deref())
                    .collect();
                one((!arrived).then(|| format!("no arrival on trigger '{id}' (arrivals: {})", list(&seen))))
            }
            StepKind::Trail { to, kind: trail_kind, reason, count } => {
                let matching = view
                    .session
                    .trail
                    .iter()
                    .filter(|trail| to.as_ref().is_none_or(|to| trail.to == to.value))
                    .filter(|trail| trail_kind.is_none_or(|wanted| trail.kind.is(wanted)))
                    .filter(|trail| {
                        reason.as_ref().is_none_or(|reason| text_matches(reason, trail.reason.as_deref().unwrap_or("")))
                    })
                    .count() as u64;
                let mut wanted = Vec::new();
                if let Some(to) = to {
                    wanted.push(format!("to '{}'", to.value));
                }
                if let Some(trail_kind) = trail_kind {
                    wanted.push(format!("kind {}", trail_kind.as_str()));
                }
                if let Some(reason) = reason {
                    wanted.push(format!("reason {}", describe_text(reason)));
                }
                one((matching != *count).then(|| {
                    format!(
                        "expected {count} trail step(s) with {}, found {matching} (trail: {})",
                        wanted.join(", "),
                        trail_summary(&view.session)
                    )
                }))
            }
            StepKind::Variables { expect, path, locked } => variables(view, kind, index, expect, path, locked),
            StepKind::Reply { includes, excludes } => reply(view, index, includes, excludes),
            StepKind::CalledTool(wanted) => {
                let found = calls(&view.session).iter().any(|(call, _)| tool_matches(wanted, &call.name, &call.args));
                one((!found).then(|| format!("no call of {} was made{}", describe_tool(wanted), called_summary(view))))
            }
            StepKind::NotCalledTool(wanted) => {
                let found = calls(&view.session)
                    .iter()
                    .find(|(call, _)| tool_matches(wanted, &call.name, &call.args))
                    .map(|(call, _)| call.args.to_string());
                one(found.map(|args| format!("{} was called (with {args})", describe_tool(wanted))))
            }
            StepKind::BlockedTool(wanted) => {
                let all = calls(&view.session);
                let matching: Vec<_> =
                    all.iter().filter(|(call, _)| tool_matches(wanted, &call.name, &call.args)).collect();
                let blocked = matching.iter().any(|(_, answer)| answer.as_deref().is_some_and(is_governance_block));
                one((!blocked).then(|| {
                    if matching.is_empty() {
                        format!("{} was never called", describe_tool(wanted))
                    } else {
                        format!("{} was called, but governance did not refuse it", describe_tool(wanted))
                    }
                }))
            }
            StepKind::UsedNoTools => {
                // The whole conversation so far, like the other tool assertions.
                let used: Vec<String> = view
                    .session
                    .messages
                    .iter()
                    .filter_map(|message| match message {
                        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                            Some(tool_calls.iter().map(|call| call.name.clone()).collect::<Vec<_>>().join(", "))
                        }
                        _ => None,
                    })
                    .collect();
                one((!used.is_empty()).then(|| format!("tools were called: {}", used.join(", "))))
            }
            StepKind::RanWorkflow { workflow, status, count } => {
                let wanted = match status {
                    SubWorkflowStatus::Ok => "ok",
                    SubWorkflowStatus::Error => "error",
                    SubWorkflowStatus::Parked => "parked",
                };
                let runs = view
                    .session
                    .trail
                    .iter()
                    .filter(|trail| {
                        trail.kind == TrailKind::SubWorkflow
                            && trail.workflow.as_deref() == Some(workflow.value.as_str())
                            && trail.status.as_deref() == Some(wanted)
                    })
                    .count() as u64;
                let failure = match count {
                    Some(count) if runs != *count => Some(format!(
                        "expected {count} run(s) of '{}' with status {wanted}, found {runs}",
                        workflow.value
                    )),
                    None if runs == 0 => Some(format!("'{}' never ran with status {wanted}", workflow.value)),
                    _ => None,
                };
                one(failure)
            }
            StepKind::Grade { criterion, at_least } => {
                let mut record =
                    judge::grade(self.harness, self.runtime, view, criterion, *at_least, &mut self.usage).await;
                record.step = index;
                vec![record]
            }
            StepKind::Send(_) | StepKind::Decide { .. } | StepKind::Deliver { .. } => Vec::new(),
        }
    }
}

/// The record kind of a step.
pub(crate) fn kind_name(kind: &StepKind) -> &'static str {
    match kind {
        StepKind::Send(_) => "send",
        StepKind::Decide { .. } => "decide",
        StepKind::Deliver { .. } => "deliver",
        StepKind::Succeeded => "succeeded",
        StepKind::Parked { .. } => "parked",
        StepKind::Raised { .. } => "raised",
        StepKind::ReachedState(_) => "reachedState",
        StepKind::NoTraversal => "noTraversal",
        StepKind::TriggerArrival(_) => "triggerArrival",
        StepKind::Trail { .. } => "trail",
        StepKind::Variables { .. } => "variables",
        StepKind::Reply { .. } => "reply",
        StepKind::CalledTool(_) => "calledTool",
        StepKind::NotCalledTool(_) => "notCalledTool",
        StepKind::BlockedTool(_) => "blockedTool",
        StepKind::UsedNoTools => "usedNoTools",
        StepKind::RanWorkflow { .. } => "ranWorkflow",
        StepKind::Grade { .. } => "grade.closedQA",
    }
}
