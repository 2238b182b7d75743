//! A layer's steps: running them (one by one or at once: model turns as futures polled
//! together, commands each on a thread of its own), replaying what the record holds,
//! and applying their reports in document order: records, events and tallies.
//! The one thing to know: **only [`Walker::apply`] and [`Walker::replay`] change the
//! walker**, after every step of a chunk has run, so the order steps finish in never
//! shows.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use archmax_vm::kernel::ScopeOwner;
use archmax_vm::model::{ModelError, TapeReading};
use archmax_vm::session::Message;

use super::{Handoffs, Stop, WalkError, Walker, record_key};
use crate::document::{Group, Node, Step, StepKind, join_path};
use crate::events::FlowEvent;
use crate::record::RecordedStep;
use crate::step::{
    self, CommandJob, CommandStep, ModelStep, Outcome, Remaining, Spend, StepEnvironment, StepReport, exhausted_ceiling,
};

/// Where a layer's steps run: the section and its attempt, and the conversation and
/// handoffs the layer started from.
#[derive(Clone, Copy)]
pub(super) struct LayerStart<'p> {
    pub path: &'p str,
    pub session: &'p str,
    pub attempt: u32,
    pub group: &'p Group,
    pub snapshot: &'p [Message],
    pub handoffs: &'p Handoffs,
}

impl Walker<'_, '_> {
    /// Runs (or replays) the model and command steps of one layer, at most `parallel`
    /// at once, and applies their records and events in document order. Operator steps
    /// are left to the caller, which meets them in order.
    pub(super) async fn layer_steps(
        &mut self,
        ready: &[&Node],
        layer: &LayerStart<'_>,
    ) -> Result<BTreeMap<String, StepReport>, Stop> {
        let LayerStart { path, session, attempt, group, snapshot, handoffs } = *layer;
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
            // A step that runs alone is announced before it runs, so what it asks on the
            // terminal (an approval) follows its own start line; steps that run together
            // are announced with their reports, in document order.
            let alone = chunk.len() == 1 && prepared.len() == 1;
            if alone {
                for (step, step_path, _, _) in &prepared {
                    self.announce(step, step_path, attempt, false);
                }
            }
            let environment = self.environment;
            let tape = self.tape.clone();
            let futures = prepared.iter().map(|(step, step_path, ready, call_id)| {
                run_prepared(
                    environment,
                    step,
                    step_path,
                    attempt,
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
                    self.apply(step, &step_path, attempt, &key, report, alone).await?
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
    pub(super) async fn run_one(&mut self, step: &Step, layer: &LayerStart<'_>) -> Result<StepReport, Stop> {
        let LayerStart { path, session, attempt, group, snapshot, handoffs } = *layer;
        let step_path = join_path(path, &step.id);
        let key = record_key(self.environment.run, session, &format!(".{}", step.id));
        if let Some(recorded) = self.options.recorded.steps.get(&key).cloned() {
            return Ok(self.replay(step, &step_path, attempt, &recorded));
        }
        self.calls += 1;
        let prepared = self.prepare(step, &step_path, attempt, path, handoffs);
        self.announce(step, &step_path, attempt, false);
        let remaining = Remaining { spent_microunits: self.spent_microunits, started_ms: self.started_ms };
        let call_id = format!("call-{}", self.calls);
        let report = run_prepared(
            self.environment,
            step,
            &step_path,
            attempt,
            &prepared,
            snapshot,
            &group.gives,
            remaining,
            self.tape.as_ref(),
            call_id,
        )
        .await
        .map_err(|error| Stop::Failed(WalkError::Model { step: step_path.clone(), error }))?;
        self.apply(step, &step_path, attempt, &key, report, true).await
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
            input.push_str(&format!("\n\n{}", scope.describe(ScopeOwner::Node)));
        }
        input.push_str(&context);
        PreparedStep::Run(input)
    }

    /// Reports a step the record already holds, without running it.
    fn replay(&mut self, step: &Step, step_path: &str, attempt: u32, recorded: &RecordedStep) -> StepReport {
        self.announce(step, step_path, attempt, true);
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

    /// Says that `step` starts (`replayed`: from the record, without running).
    fn announce(&mut self, step: &Step, step_path: &str, attempt: u32, replayed: bool) {
        self.emit(FlowEvent::StepStarted {
            path: step_path.to_string(),
            step_kind: step.kind.as_str().to_string(),
            state: step.state.clone(),
            attempt,
            replayed,
        });
    }

    /// Records, tallies and reports a step that just ran (`announced`: its start was
    /// already said, before it ran).
    async fn apply(
        &mut self,
        step: &Step,
        step_path: &str,
        attempt: u32,
        key: &str,
        report: StepReport,
        announced: bool,
    ) -> Result<StepReport, Stop> {
        if !announced {
            self.announce(step, step_path, attempt, false);
        }
        for event in &report.events {
            self.emit(event.clone());
        }
        let now = self.environment.clock.now_ms();
        if let Some(record) = self.record.as_mut() {
            record.step(key, &RecordedStep::from_report(&report), now).await?;
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
    pub(super) async fn operator_step(
        &mut self,
        step: &Step,
        step_path: &str,
        session: &str,
        attempt: u32,
    ) -> Result<StepReport, Stop> {
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
            return self.apply(step, step_path, attempt, &key, report, false).await;
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
            resume: self.options.resume_command.map(str::to_string),
        });
        let now = self.environment.clock.now_ms();
        if let Some(record) = self.record.as_mut() {
            record.paused(&key, now).await?;
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
    attempt: u32,
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
            let command = CommandStep {
                path: step_path,
                attempt,
                argv,
                timeout_ms: *timeout_ms,
                node_scope: step.scope.as_ref(),
            };
            Ok(CommandJob::new(environment, command, call_id).run_aside().await)
        }
        (PreparedStep::Run(input), _) => {
            let model_step = ModelStep {
                path: step_path,
                attempt,
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
