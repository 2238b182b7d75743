//! One step: a model turn that answers through `answer`, or one gated command.
//!
//! A model step continues its section's conversation with one user message, offers the
//! built-in file tools and `answer` (whose schema is derived from what the enclosing
//! group gives), and loops until the model answers, a bound stops it, or it answers
//! without `answer` (unstructured: failed). Every write a file tool would make is asked
//! of the step's [`ScopeStack`] first; a refusal is a failed tool result, and nothing
//! reaches disk. A command step is one `run` call through the [`Gate`]: published by
//! `--allow-program`, then run as an argv with bounds, filed into the conversation as a
//! call and its result.
//!
//! The one thing to know: **a step never touches the walker's state**. It gets what it
//! may read and hands back a [`StepReport`] (outcome, gives, the messages it adds, its
//! events, what it spent), which the walker applies in document order; that is what
//! lets `--parallel` run a layer's steps at once and still equal the sequential walk.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use archmax_program::tools::{PathAccess, path_arguments};
use archmax_stdlib::limits::Limits;
use archmax_stdlib::tools::{self as file_tools, BUILT_IN_TOOLS, ToolContext};
use archmax_stdlib::vfs::Workspace;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelError, ModelRequest, Role, Sampling, TapeReading, ToolDefinition};
use archmax_vm::session::{Message, ToolCall, ToolStatus};

use crate::events::FlowEvent;
use crate::process::{self, Bounds, ProcessError};
use crate::scope::{ScopeStack, WriteKind};

/// The tool a step finishes with.
pub const ANSWER_TOOL: &str = "answer";
/// The name a command step's call is filed under.
pub const RUN_TOOL: &str = "run";
/// A command step's timeout when its document sets none.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);
/// The most a command may print on each of stdout and stderr.
pub const COMMAND_OUTPUT_BYTES: usize = 1024 * 1024;

/// How a step came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
        }
    }
}

/// What one step spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Spend {
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_microunits: u64,
}

impl Spend {
    pub fn add(&mut self, other: Spend) {
        self.turns += other.turns;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_microunits += other.cost_microunits;
    }
}

/// The bounds each step runs under.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepBudget {
    pub max_turns: Option<u32>,
    pub max_output_tokens: Option<u64>,
    pub max_output_tokens_per_turn: Option<u64>,
}

/// The ceilings of the whole flow, and what is left of them when a step starts.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowBudget {
    pub max_cost_microunits: Option<u64>,
    pub max_duration_ms: Option<u64>,
}

/// The flow's spend and start, as a step is handed them.
#[derive(Clone, Copy, Debug)]
pub struct Remaining {
    pub spent_microunits: u64,
    pub started_ms: u64,
}

/// What a step hands back.
#[derive(Clone, Debug)]
pub struct StepReport {
    pub outcome: Outcome,
    pub note: Option<String>,
    /// Why it failed, when the walk decided (a bound, a refusal, an unstructured answer).
    pub reason: Option<String>,
    pub gives: Map<String, Value>,
    /// The messages the step adds to its section's conversation.
    pub messages: Vec<Message>,
    pub events: Vec<FlowEvent>,
    pub spend: Spend,
    /// The tape's reading after the step's last model call.
    pub tape: Option<TapeReading>,
}

impl StepReport {
    fn failed(reason: String, messages: Vec<Message>, events: Vec<FlowEvent>) -> StepReport {
        StepReport {
            outcome: Outcome::Failed,
            note: None,
            reason: Some(reason),
            gives: Map::new(),
            messages,
            events,
            spend: Spend::default(),
            tape: None,
        }
    }
}

/// What every step of a walk shares.
pub struct StepEnvironment<'a> {
    pub flow: &'a str,
    /// The flow-run id: the tape's reading position is kept under it.
    pub run: &'a str,
    pub model: &'a dyn ModelAdapter,
    pub model_name: Option<&'a str>,
    pub pricing: &'a PricingTable,
    pub clock: &'a dyn archmax_vm::clock::Clock,
    pub workspace: &'a Workspace,
    pub workspace_root: &'a Path,
    /// A workspace-relative directory no step may write (the flow's own records).
    pub reserved: Option<&'a str>,
    pub run_scope: Option<&'a crate::scope::WriteScope>,
    pub budget: StepBudget,
    pub flow_budget: FlowBudget,
    pub allow_program: &'a [String],
    /// Variables removed from every command's environment (the credential).
    pub credential_variables: &'a [String],
    pub system: &'a str,
}

/// What one model step is given.
pub struct ModelStep<'a> {
    pub path: &'a str,
    pub node_scope: Option<&'a crate::scope::WriteScope>,
    /// The user message (composed by the walker) and the conversation before it.
    pub input: String,
    pub conversation: &'a [Message],
    pub gives: &'a [String],
    pub remaining: Remaining,
    pub tape: Option<&'a TapeReading>,
}

/// The schema `answer` takes, derived from the names the enclosing group gives.
pub fn answer_tool(gives: &[String]) -> ToolDefinition {
    let properties: Map<String, Value> = gives.iter().map(|name| (name.clone(), json!({}))).collect();
    ToolDefinition {
        name: ANSWER_TOOL.to_string(),
        description: "Finish this step: say whether it passed or failed, why, and what it hands on.".to_string(),
        parameters: json!({
            "type": "object",
            "required": ["outcome"],
            "properties": {
                "outcome": { "enum": ["passed", "failed"] },
                "note": { "type": "string" },
                "gives": { "type": "object", "properties": properties },
            },
        }),
    }
}

fn tool_definitions(gives: &[String]) -> Vec<ToolDefinition> {
    let mut tools: Vec<ToolDefinition> = BUILT_IN_TOOLS
        .iter()
        .filter_map(|name| file_tools::schema(name))
        .map(|schema| ToolDefinition {
            name: schema.name,
            description: schema.description,
            parameters: schema.parameters,
        })
        .collect();
    tools.push(answer_tool(gives));
    tools
}

/// The flow ceiling a step would start past, if any: `(code message)`.
pub fn exhausted_ceiling(environment: &StepEnvironment<'_>, remaining: Remaining) -> Option<String> {
    if let Some(ceiling) = environment.flow_budget.max_cost_microunits
        && remaining.spent_microunits >= ceiling
    {
        return Some(format!(
            "the flow's cost ceiling of {ceiling} microunits is spent ({} spent)",
            remaining.spent_microunits
        ));
    }
    if let Some(ceiling) = environment.flow_budget.max_duration_ms {
        let elapsed = environment.clock.now_ms().saturating_sub(remaining.started_ms);
        if elapsed >= ceiling {
            return Some(format!("the flow's duration ceiling of {ceiling} ms is spent ({elapsed} ms elapsed)"));
        }
    }
    None
}

/// What a step answered through `answer`.
struct Answer {
    outcome: Outcome,
    note: Option<String>,
    gives: Map<String, Value>,
}

/// An answer's arguments: `Ok` when they follow the derived schema.
fn read_answer(args: &Value, gives: &[String]) -> Result<Answer, String> {
    let outcome = match args.get("outcome").and_then(Value::as_str) {
        Some("passed") => Outcome::Passed,
        Some("failed") => Outcome::Failed,
        _ => return Err("answer needs `outcome`: `passed` or `failed`".to_string()),
    };
    let note = match args.get("note") {
        None | Some(Value::Null) => None,
        Some(Value::String(note)) => Some(note.clone()),
        Some(_) => return Err("`note` is a string".to_string()),
    };
    let mut handed = Map::new();
    match args.get("gives") {
        None | Some(Value::Null) => {}
        Some(Value::Object(object)) => {
            for (name, value) in object {
                if gives.contains(name) {
                    handed.insert(name.clone(), value.clone());
                }
            }
        }
        Some(_) => return Err("`gives` is an object of the names this section gives".to_string()),
    }
    Ok(Answer { outcome, note, gives: handed })
}

/// Whether a call writes, and how, for each path argument: the path as the file tools
/// will resolve it (`.` and empty segments dropped, `..` taken back), so a scope judges
/// the very file written. `Err` names a path that climbs out of the workspace.
fn writes(tool: &str, args: &Value) -> Result<Vec<(String, WriteKind)>, String> {
    let mut found = Vec::new();
    for (argument, access) in path_arguments(tool).iter().filter(|(_, access)| access.writes()) {
        let Some(path) = args.get(*argument).and_then(Value::as_str) else { continue };
        let kind = match (tool, access) {
            ("edit_file", _) => WriteKind::Partial,
            (_, PathAccess::Remove) => WriteKind::Remove,
            _ => WriteKind::Whole,
        };
        let resolved = archmax_program::zones::canonicalize(path)
            .map_err(|_| format!("`{path}` leads out of the workspace; no step writes there."))?;
        found.push((resolved, kind));
    }
    Ok(found)
}

/// Runs one file tool under the step's scopes; the answer the model reads.
fn file_tool(environment: &StepEnvironment<'_>, scopes: ScopeStack<'_>, call: &ToolCall) -> (ToolStatus, String) {
    if !BUILT_IN_TOOLS.contains(&call.name.as_str()) {
        return (ToolStatus::Error, format!("`{}` is not a tool of this step", call.name));
    }
    let written = match writes(&call.name, &call.args) {
        Ok(written) => written,
        Err(refusal) => return (ToolStatus::Error, refusal),
    };
    for (path, kind) in written {
        let lower = path.to_ascii_lowercase();
        if let Some(reserved) = environment.reserved.map(str::to_ascii_lowercase)
            && (lower == reserved || lower.starts_with(&format!("{reserved}/")))
        {
            return (ToolStatus::Error, format!("`{path}` holds the flow's own records; no step writes there."));
        }
        if let Err(refusal) = scopes.check(&path, kind) {
            return (ToolStatus::Error, refusal);
        }
    }
    let visible = |_: &str| true;
    let context =
        ToolContext { workspace: environment.workspace, visible: &visible, raw_text: false, limits: Limits::default() };
    match file_tools::run(&call.name, &call.args, &context) {
        Ok(text) => (ToolStatus::Ok, text),
        Err(error) => (ToolStatus::Error, format!("Error: {error}")),
    }
}

fn cost_microunits(pricing: &PricingTable, usage: &archmax_vm::model::TokenUsage, model: &str) -> u64 {
    pricing.cost(usage, model).map_or(0, |usd| (usd * 1e6).round().max(0.0) as u64)
}

/// Runs one model step to its answer or its bound. `Err` is a loop error: the walk aborts.
pub async fn model_step(environment: &StepEnvironment<'_>, step: ModelStep<'_>) -> Result<StepReport, ModelError> {
    let scopes = ScopeStack { run: environment.run_scope, node: step.node_scope };
    let tools = tool_definitions(step.gives);
    let mut conversation: Vec<Message> = step.conversation.to_vec();
    let first_new = conversation.len();
    conversation.push(Message::User { text: step.input.clone(), opening: None });
    let mut events = Vec::new();
    let mut spend = Spend::default();
    let mut tape = step.tape.cloned();
    let finish = |conversation: &[Message], outcome, note, reason, gives, events, spend, tape| StepReport {
        outcome,
        note,
        reason,
        gives,
        messages: conversation[first_new..].to_vec(),
        events,
        spend,
        tape,
    };
    loop {
        if let Some(max) = environment.budget.max_turns
            && spend.turns >= max
        {
            let reason = format!("a budget stop: the step used its {max} turn(s) without answering");
            return Ok(finish(&conversation, Outcome::Failed, None, Some(reason), Map::new(), events, spend, tape));
        }
        let remaining =
            Remaining { spent_microunits: step.remaining.spent_microunits + spend.cost_microunits, ..step.remaining };
        if spend.turns > 0
            && let Some(ceiling) = exhausted_ceiling(environment, remaining)
        {
            let reason = format!("a budget stop: {ceiling}");
            return Ok(finish(&conversation, Outcome::Failed, None, Some(reason), Map::new(), events, spend, tape));
        }
        let variables = Value::Object(Map::new());
        let request = ModelRequest {
            model: environment.model_name,
            role: Role::Agent,
            session: environment.run,
            workflow: environment.flow,
            state: step.path,
            variables: &variables,
            system_static: environment.system,
            system_volatile: "",
            messages: &conversation,
            history: conversation.len(),
            tools: &tools,
            prompt_cache: Default::default(),
            timeout: None,
            sampling: Sampling { temperature: None, max_tokens: environment.budget.max_output_tokens_per_turn },
            tape: tape.as_ref(),
            // A flow's steps answer through `answer`; their text is not streamed anywhere.
            on_text: None,
        };
        let response = environment.model.call(request).await?;
        spend.turns += 1;
        spend.input_tokens += response.usage.input;
        spend.output_tokens += response.usage.output;
        let model = response.model.as_deref().or(environment.model_name).unwrap_or_default();
        spend.cost_microunits += cost_microunits(environment.pricing, &response.usage, model);
        if response.tape.is_some() {
            tape = response.tape.clone();
        }
        conversation.push(Message::Assistant { text: response.text.clone(), tool_calls: response.tool_calls.clone() });
        if let Some(max) = environment.budget.max_output_tokens_per_turn
            && response.usage.output > max
        {
            let reason =
                format!("a budget stop: the turn wrote {} output tokens, over {max} per turn", response.usage.output);
            return Ok(finish(&conversation, Outcome::Failed, None, Some(reason), Map::new(), events, spend, tape));
        }
        if let Some(max) = environment.budget.max_output_tokens
            && spend.output_tokens > max
        {
            let reason = format!("a budget stop: the step wrote {} output tokens, over its {max}", spend.output_tokens);
            return Ok(finish(&conversation, Outcome::Failed, None, Some(reason), Map::new(), events, spend, tape));
        }
        if response.tool_calls.is_empty() {
            let reason = "the model answered without calling `answer` (unstructured)".to_string();
            return Ok(finish(&conversation, Outcome::Failed, None, Some(reason), Map::new(), events, spend, tape));
        }
        let mut answered = None;
        for call in &response.tool_calls {
            events.push(FlowEvent::ToolRequested {
                step: step.path.to_string(),
                name: call.name.clone(),
                args: call.args.clone(),
            });
            let (status, content) = if call.name == ANSWER_TOOL {
                match read_answer(&call.args, step.gives) {
                    Ok(answer) if answered.is_none() => {
                        answered = Some(answer);
                        (ToolStatus::Ok, "Recorded.".to_string())
                    }
                    Ok(_) => (ToolStatus::Error, "This step has already answered.".to_string()),
                    Err(problem) => (ToolStatus::Error, format!("Error: {problem}")),
                }
            } else {
                file_tool(environment, scopes, call)
            };
            events.push(FlowEvent::ToolCompleted {
                step: step.path.to_string(),
                name: call.name.clone(),
                status: if status == ToolStatus::Ok { "ok" } else { "error" }.to_string(),
                content: archmax_program::text::first_chars(&content, 400).to_string(),
            });
            conversation.push(Message::Tool { call_id: call.id.clone(), name: call.name.clone(), content, status });
        }
        if let Some(Answer { outcome, note, gives }) = answered {
            return Ok(finish(&conversation, outcome, note, None, gives, events, spend, tape));
        }
    }
}

/// What one command step is given.
pub struct CommandStep<'a> {
    pub path: &'a str,
    pub argv: &'a [String],
    pub timeout_ms: Option<u64>,
}

/// The gate a command's `run` call meets: whether this run publishes the program.
pub struct Gate<'a> {
    pub allow_program: &'a [String],
}

impl Gate<'_> {
    /// `Err` is the refusal: the program is not published to this run.
    /// A bare name is admitted by that name; a program given by a path (it holds a `/`)
    /// only by that very path, so publishing `cargo` never publishes `./tools/cargo`.
    pub fn admit(&self, program: &str) -> Result<(), String> {
        if self.allow_program.iter().any(|allowed| allowed == program) {
            return Ok(());
        }
        if program.contains('/') {
            let name = Path::new(program).file_name().and_then(|name| name.to_str()).unwrap_or(program);
            return Err(format!(
                "`{program}` is not published to this run; `--allow-program {name}` admits only `{name}` found on PATH, so pass `--allow-program {program}` to admit this file"
            ));
        }
        Err(format!("`{program}` is not published to this run; pass `--allow-program {program}` to admit it"))
    }
}

/// A command step with everything it needs owned, so it can run on a thread of its own:
/// the commands of a layer run side by side, and their reports are applied in
/// document order by the walker all the same.
pub struct CommandJob {
    path: String,
    argv: Vec<String>,
    timeout_ms: Option<u64>,
    allow_program: Vec<String>,
    workspace_root: PathBuf,
    credential_variables: Vec<String>,
    call_id: String,
}

impl CommandJob {
    pub fn new(environment: &StepEnvironment<'_>, step: CommandStep<'_>, call_id: String) -> CommandJob {
        CommandJob {
            path: step.path.to_string(),
            argv: step.argv.to_vec(),
            timeout_ms: step.timeout_ms,
            allow_program: environment.allow_program.to_vec(),
            workspace_root: environment.workspace_root.to_path_buf(),
            credential_variables: environment.credential_variables.to_vec(),
            call_id,
        }
    }

    /// Runs the step on a thread of its own and waits for it without holding the walk,
    /// so the other steps of the layer make progress meanwhile.
    pub async fn run_aside(self) -> StepReport {
        let path = self.path.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new().name("flow-command".to_string()).spawn(move || {
            let _ = sender.send(self.run());
        });
        let problem = match spawned {
            Ok(_) => match receiver.await {
                Ok(report) => return report,
                Err(_) => "the command's thread ended without a report".to_string(),
            },
            Err(error) => format!("the command could not be given a thread: {error}"),
        };
        refused_step(&path, "step-command", problem)
    }

    /// Runs the step here, blocking until the command ends.
    pub fn run(&self) -> StepReport {
        let call_id = self.call_id.clone();
        let args = json!({ "command": self.argv });
        let call = ToolCall { id: call_id.clone(), name: RUN_TOOL.to_string(), args: args.clone() };
        let mut events = vec![FlowEvent::ToolRequested { step: self.path.clone(), name: RUN_TOOL.to_string(), args }];
        let mut messages = vec![Message::Assistant { text: String::new(), tool_calls: vec![call] }];
        let program = self.argv.first().map(String::as_str).unwrap_or_default();
        let gate = Gate { allow_program: &self.allow_program };
        let verdict = gate.admit(program).and_then(|()| {
            let bounds = Bounds {
                timeout: self.timeout_ms.map_or(COMMAND_TIMEOUT, Duration::from_millis),
                output_bytes: COMMAND_OUTPUT_BYTES,
            };
            process::run(&self.argv, &self.workspace_root, b"", &self.credential_variables, bounds).map_err(|error| {
                match error {
                    ProcessError::Start { .. } => error.to_string(),
                    other => format!("`{program}`: {other}"),
                }
            })
        });
        let (outcome, content, reason) = match verdict {
            Ok(finished) => {
                let status = finished.status.map_or("a signal".to_string(), |code| code.to_string());
                let content = format!(
                    "exit status {status}\n--- stdout\n{}--- stderr\n{}",
                    String::from_utf8_lossy(&finished.stdout),
                    String::from_utf8_lossy(&finished.stderr)
                );
                if finished.status == Some(0) {
                    (Outcome::Passed, content, None)
                } else {
                    (Outcome::Failed, content, Some(format!("`{program}` exited with {status}")))
                }
            }
            Err(refusal) => (Outcome::Failed, format!("Error: {refusal}"), Some(refusal)),
        };
        let status = if outcome == Outcome::Passed { ToolStatus::Ok } else { ToolStatus::Error };
        events.push(FlowEvent::ToolCompleted {
            step: self.path.clone(),
            name: RUN_TOOL.to_string(),
            status: if status == ToolStatus::Ok { "ok" } else { "error" }.to_string(),
            content: archmax_program::text::first_chars(&content, 400).to_string(),
        });
        if let Some(reason) = &reason {
            events.push(FlowEvent::Warning {
                step: self.path.clone(),
                code: "step-command".to_string(),
                message: reason.clone(),
            });
        }
        messages.push(Message::Tool { call_id, name: RUN_TOOL.to_string(), content, status });
        match reason {
            None => StepReport {
                outcome,
                note: None,
                reason: None,
                gives: Map::new(),
                messages,
                events,
                spend: Spend::default(),
                tape: None,
            },
            Some(reason) => StepReport::failed(reason, messages, events),
        }
    }
}

/// A step that fails before it runs (a refused context, a spent flow budget): a warning
/// naming why, no model call.
pub fn refused_step(path: &str, code: &str, message: String) -> StepReport {
    let events = vec![FlowEvent::Warning { step: path.to_string(), code: code.to_string(), message: message.clone() }];
    StepReport::failed(message, Vec::new(), events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_path_is_judged_as_the_file_tools_resolve_it() {
        let written = |path: &str| writes("write_file", &json!({ "file_path": path, "content": "x" }));
        assert_eq!(written("docs/../src/main.rs"), Ok(vec![("src/main.rs".to_string(), WriteKind::Whole)]));
        assert_eq!(written("./src//main.rs"), Ok(vec![("src/main.rs".to_string(), WriteKind::Whole)]));
        assert_eq!(
            written("/x/../.archmax-flows/run.flow.jsonl").map(|found| found[0].0.clone()).as_deref(),
            Ok(".archmax-flows/run.flow.jsonl")
        );
        assert!(written("../outside.txt").is_err_and(|refusal| refusal.contains("leads out of the workspace")));
        let moved = writes("move_file", &json!({ "source": "a/../b.md", "destination": "c/./d.md" })).unwrap();
        assert_eq!(moved, [("b.md".to_string(), WriteKind::Remove), ("c/d.md".to_string(), WriteKind::Whole)]);
        assert_eq!(writes("read_file", &json!({ "file_path": "../x" })), Ok(Vec::new()));
    }

    #[test]
    fn the_gate_admits_a_name_from_path_and_a_path_only_as_written() {
        let allowed = ["cargo".to_string(), "./scripts/check.sh".to_string()];
        let gate = Gate { allow_program: &allowed };
        assert!(gate.admit("cargo").is_ok());
        assert!(gate.admit("./scripts/check.sh").is_ok());
        for smuggled in ["./tools/cargo", "/tmp/x/cargo", "../../cargo", "scripts/check.sh"] {
            let refusal = gate.admit(smuggled).expect_err(smuggled);
            assert!(refusal.contains(&format!("`{smuggled}` is not published")), "{refusal}");
        }
        assert!(gate.admit("make").is_err_and(|refusal| refusal.contains("--allow-program make")));
    }
}
