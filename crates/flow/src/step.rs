//! One step: a model turn that answers through `answer`, or one gated command.
//!
//! A model step continues its section's conversation with one user message, offers the
//! run's tools (the built-in file tools, `run` when `--allow-program` publishes any
//! program, and `answer`, whose schema is derived from what the enclosing group gives),
//! and loops until the model answers, a bound stops it, or it answers without `answer`
//! (unstructured: failed). Every call is decided first by the governance kernel
//! ([`kernel::decide_scoped_call`]: a name that is none of the step's tools, a path out
//! of the workspace or into the flow's records, a write the run's or the node's write
//! scope refuses), then every call but `answer` passes the [`CallGate`] (published,
//! approver, `before-call` hooks, the tool, `after-call` hooks). A refusal is a failed
//! tool result the model reads, with a warning between `tool-requested` and
//! `tool-completed`, and nothing reaches disk. A command step is one `run` call decided
//! the same way, run as an argv with bounds, filed into the conversation as a call and
//! its result.
//!
//! The one thing to know: **a step never touches the walker's state**. It gets what it
//! may read and hands back a [`StepReport`] (outcome, gives, the messages it adds, its
//! events, what it spent), which the walker applies in document order; that is what
//! lets `--parallel` run a layer's steps at once and still equal the sequential walk.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use archmax_stdlib::limits::Limits;
use archmax_stdlib::tools::{self as file_tools, BUILT_IN_TOOLS, ToolContext};
use archmax_stdlib::vfs::Workspace;
use archmax_vm::kernel::{self, Rule, ScopeStack, ScopedCall, ScopedPolicy, WriteScope};
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelError, ModelRequest, Role, Sampling, TapeReading, ToolDefinition};
use archmax_vm::session::{Message, ToolCall, ToolStatus};

use crate::events::FlowEvent;
use crate::gate::{Approver, CallGate, GateCall, aside, run_argv};
use crate::hooks::Hooks;
use crate::process::{self, Bounds, ProcessError};
use crate::refusal::Refused;

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
    /// A workspace-relative directory no step may write, read or list (the flow's own
    /// records): the kernel's runtime area for the flow.
    pub reserved: Option<&'a str>,
    pub run_scope: Option<&'a WriteScope>,
    pub budget: StepBudget,
    pub flow_budget: FlowBudget,
    /// The programs `run` is published for (to model steps and command steps alike).
    pub allow_program: &'a [String],
    /// Who approves the calls that act (`run`, writes).
    pub approver: &'a Approver,
    /// The run's hooks; steps ask the `before-call` and `after-call` ones.
    pub hooks: &'a Hooks,
    /// Variables removed from every command's environment (the credential).
    pub credential_variables: &'a [String],
    pub system: &'a str,
}

/// What one model step is given.
pub struct ModelStep<'a> {
    pub path: &'a str,
    /// The attempt of the step's section (shown to the gate's programs).
    pub attempt: u32,
    pub node_scope: Option<&'a WriteScope>,
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

/// The `run` tool, as offered to a model step: the programs it may name are listed.
pub fn run_tool(allow_program: &[String]) -> ToolDefinition {
    let programs: Vec<String> = allow_program.iter().map(|program| format!("`{program}`")).collect();
    ToolDefinition {
        name: RUN_TOOL.to_string(),
        description: format!(
            "Run a program in the workspace and read its exit status and output. `command` is an argv (no shell); \
             its first word is one of: {}.",
            programs.join(", ")
        ),
        parameters: json!({
            "type": "object",
            "required": ["command"],
            "properties": {
                "command": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
            },
        }),
    }
}

fn tool_definitions(gives: &[String], allow_program: &[String]) -> Vec<ToolDefinition> {
    let mut tools: Vec<ToolDefinition> = BUILT_IN_TOOLS
        .iter()
        .filter_map(|name| file_tools::schema(name))
        .map(|schema| ToolDefinition {
            name: schema.name,
            description: schema.description,
            parameters: schema.parameters,
        })
        .collect();
    if !allow_program.is_empty() {
        tools.push(run_tool(allow_program));
    }
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

/// The step's tools that name no path: the kernel admits them by name, and the gate asks
/// about `run`.
const PATHLESS_TOOLS: [&str; 2] = [RUN_TOOL, ANSWER_TOOL];

/// What the kernel decides a step's calls against: the run's tools, the folder of the
/// flow's own records, the run's write scope and the node's.
fn kernel_policy<'a>(environment: &StepEnvironment<'a>, node_scope: Option<&'a WriteScope>) -> ScopedPolicy<'a> {
    ScopedPolicy {
        file_tools: BUILT_IN_TOOLS,
        other_tools: &PATHLESS_TOOLS,
        records: environment.reserved,
        scopes: ScopeStack { run: environment.run_scope, node: node_scope },
    }
}

/// The kernel's refusal of a step's call, when it refuses it; its rule and sentence.
fn kernel_refusal(policy: &ScopedPolicy<'_>, tool: &str, args: &Value) -> Option<Refused> {
    Refused::from_verdict(kernel::decide_scoped_call(policy, &ScopedCall { tool, args }))
}

/// A refused call of a model step: the `tool-refused` warning naming its rule, and the
/// failed result the model reads.
fn refused_call(step: &str, refusal: Refused, events: &mut Vec<FlowEvent>) -> (ToolStatus, String) {
    events.push(FlowEvent::Warning {
        step: step.to_string(),
        code: "tool-refused".to_string(),
        message: refusal.reason.clone(),
        rule: Some(refusal.rule.to_string()),
    });
    (ToolStatus::Error, refusal.result())
}

/// Runs one file tool the kernel allowed: the answer the model reads. A listing shows,
/// and `grep` searches, only what the kernel lets a step see.
fn file_tool(environment: &StepEnvironment<'_>, policy: &ScopedPolicy<'_>, call: &ToolCall) -> (ToolStatus, String) {
    let visible = |path: &str| policy.shows(path);
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
    let policy = kernel_policy(environment, step.node_scope);
    let tools = tool_definitions(step.gives, environment.allow_program);
    let gate = CallGate::new(environment);
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
            let (status, content) = if let Some(refusal) = kernel_refusal(&policy, &call.name, &call.args) {
                refused_call(step.path, refusal, &mut events)
            } else if call.name == ANSWER_TOOL {
                match read_answer(&call.args, step.gives) {
                    Ok(answer) if answered.is_none() => {
                        answered = Some(answer);
                        (ToolStatus::Ok, "Recorded.".to_string())
                    }
                    Ok(_) => (ToolStatus::Error, "This step has already answered.".to_string()),
                    Err(problem) => (ToolStatus::Error, format!("Error: {problem}")),
                }
            } else {
                let gated = GateCall {
                    path: step.path.to_string(),
                    attempt: step.attempt,
                    tool: call.name.clone(),
                    args: call.args.clone(),
                };
                gated_call(environment, &policy, &gate, gated, call, &mut events).await
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

/// One model call the kernel allowed, through the gate: refused (a failed result and a
/// `tool-refused` warning naming the rule), or run, then shown to the `after-call`
/// hooks, which may withhold it. A call the gate refused never ran, so no `after-call`
/// hook is asked about it. The gate's programs and `run` go on a thread of their own
/// ([`aside`]), so the other model steps of a layer make progress meanwhile.
async fn gated_call(
    environment: &StepEnvironment<'_>,
    policy: &ScopedPolicy<'_>,
    gate: &CallGate,
    gated: GateCall,
    call: &ToolCall,
    events: &mut Vec<FlowEvent>,
) -> (ToolStatus, String) {
    let refuse = |events: &mut Vec<FlowEvent>, refusal: Refused| refused_call(&gated.path, refusal, events);
    let before = if gate.blocks(&gated) {
        let (gate, asked) = (gate.clone(), gated.clone());
        aside(move || {
            let mut found = Vec::new();
            (gate.before(&asked, &mut found), found)
        })
        .await
        .unwrap_or_else(|problem| (Err(Refused::new(Rule::GateBeforeCall, problem)), Vec::new()))
    } else {
        let mut found = Vec::new();
        (gate.before(&gated, &mut found), found)
    };
    events.extend(before.1);
    if let Err(refusal) = before.0 {
        return refuse(events, refusal);
    }
    let (status, content) = if call.name == RUN_TOOL {
        let argv = run_argv(&call.args).unwrap_or_default();
        let (root, remove) = (environment.workspace_root.to_path_buf(), environment.credential_variables.to_vec());
        match aside(move || run_program(&argv, &root, &remove, COMMAND_TIMEOUT)).await {
            Ok(ran) => (ran.status, ran.content),
            Err(problem) => (ToolStatus::Error, format!("Error: {problem}")),
        }
    } else {
        file_tool(environment, policy, call)
    };
    if gate.after_call.is_empty() {
        return (status, content);
    }
    let word = if status == ToolStatus::Ok { "ok" } else { "error" };
    let (asked_gate, asked, shown) = (gate.clone(), gated.clone(), content.clone());
    let after = aside(move || {
        let mut found = Vec::new();
        (asked_gate.after(&asked, word, &shown, &mut found), found)
    })
    .await
    .unwrap_or_else(|problem| (Err(Refused::new(Rule::GateAfterCall, problem)), Vec::new()));
    events.extend(after.1);
    match after.0 {
        Ok(()) => (status, content),
        Err(refusal) => refuse(events, refusal),
    }
}

/// How a `run` call's program ended, as the caller files it.
pub struct Ran {
    pub status: ToolStatus,
    /// The result: the exit status and both outputs, or `Error: …`.
    pub content: String,
    /// Why it failed: a non-zero exit, a signal, a timeout, a start failure.
    pub failure: Option<String>,
}

/// Runs a `run` call's argv in `root`, without the `remove`d variables, with bounds.
pub fn run_program(argv: &[String], root: &Path, remove: &[String], timeout: Duration) -> Ran {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let bounds = Bounds { timeout, output_bytes: COMMAND_OUTPUT_BYTES };
    match process::run(argv, root, b"", remove, bounds) {
        Ok(finished) => {
            let status = finished.status.map_or("a signal".to_string(), |code| code.to_string());
            let content = format!(
                "exit status {status}\n--- stdout\n{}--- stderr\n{}",
                String::from_utf8_lossy(&finished.stdout),
                String::from_utf8_lossy(&finished.stderr)
            );
            if finished.status == Some(0) {
                Ran { status: ToolStatus::Ok, content, failure: None }
            } else {
                Ran { status: ToolStatus::Error, content, failure: Some(format!("`{program}` exited with {status}")) }
            }
        }
        Err(error) => {
            let failure = match error {
                ProcessError::Start { .. } => error.to_string(),
                other => format!("`{program}`: {other}"),
            };
            Ran { status: ToolStatus::Error, content: format!("Error: {failure}"), failure: Some(failure) }
        }
    }
}

/// What one command step is given.
pub struct CommandStep<'a> {
    pub path: &'a str,
    /// The attempt of the step's section (shown to the gate's programs).
    pub attempt: u32,
    pub argv: &'a [String],
    pub timeout_ms: Option<u64>,
    /// The node's write scope, which the kernel decides the call under with the run's.
    pub node_scope: Option<&'a WriteScope>,
}

/// A command step with everything it needs owned, so it can run on a thread of its own:
/// the commands of a layer run side by side, and their reports are applied in
/// document order by the walker all the same.
pub struct CommandJob {
    path: String,
    attempt: u32,
    argv: Vec<String>,
    timeout_ms: Option<u64>,
    /// The kernel's refusal of the step's `run` call, decided when the job is made (on the
    /// walk's thread, before the gate).
    refused: Option<Refused>,
    gate: CallGate,
    call_id: String,
}

impl CommandJob {
    pub fn new(environment: &StepEnvironment<'_>, step: CommandStep<'_>, call_id: String) -> CommandJob {
        let policy = kernel_policy(environment, step.node_scope);
        CommandJob {
            path: step.path.to_string(),
            attempt: step.attempt,
            argv: step.argv.to_vec(),
            timeout_ms: step.timeout_ms,
            refused: kernel_refusal(&policy, RUN_TOOL, &json!({ "command": step.argv })),
            gate: CallGate::new(environment),
            call_id,
        }
    }

    /// Runs the step on a thread of its own and waits for it without holding the walk,
    /// so the other steps of the layer make progress meanwhile.
    pub async fn run_aside(self) -> StepReport {
        let path = self.path.clone();
        match aside(move || self.run()).await {
            Ok(report) => report,
            Err(problem) => refused_step(&path, "step-command", problem),
        }
    }

    /// Runs the step here, blocking until the command ends: the kernel's verdict, the
    /// gate, the program, the `after-call` hooks. A refusal's warning comes between `tool-requested` and
    /// `tool-completed`; a program that ran and failed is warned about after them.
    pub fn run(&self) -> StepReport {
        let call_id = self.call_id.clone();
        let args = json!({ "command": self.argv });
        let call = ToolCall { id: call_id.clone(), name: RUN_TOOL.to_string(), args: args.clone() };
        let gated =
            GateCall { path: self.path.clone(), attempt: self.attempt, tool: RUN_TOOL.to_string(), args: args.clone() };
        let mut events = vec![FlowEvent::ToolRequested { step: self.path.clone(), name: RUN_TOOL.to_string(), args }];
        let mut messages = vec![Message::Assistant { text: String::new(), tool_calls: vec![call] }];
        let warn = |events: &mut Vec<FlowEvent>, message: &str, rule: Option<Rule>| {
            events.push(FlowEvent::Warning {
                step: self.path.clone(),
                code: "step-command".to_string(),
                message: message.to_string(),
                rule: rule.map(|rule| rule.to_string()),
            })
        };
        let mut refused = None;
        let mut refuse = |events: &mut Vec<FlowEvent>, refusal: Refused| {
            warn(events, &refusal.reason, Some(refusal.rule));
            refused = Some(refusal.rule);
            Ran { status: ToolStatus::Error, content: refusal.result(), failure: Some(refusal.to_string()) }
        };
        let admitted = match &self.refused {
            Some(refusal) => Err(refusal.clone()),
            None => self.gate.before(&gated, &mut events),
        };
        let ran = match admitted {
            Err(refusal) => refuse(&mut events, refusal),
            Ok(()) => {
                let timeout = self.timeout_ms.map_or(COMMAND_TIMEOUT, Duration::from_millis);
                let ran = run_program(&self.argv, &self.gate.workspace_root, &self.gate.credential_variables, timeout);
                let word = if ran.status == ToolStatus::Ok { "ok" } else { "error" };
                match self.gate.after(&gated, word, &ran.content, &mut events) {
                    Ok(()) => ran,
                    Err(refusal) => refuse(&mut events, refusal),
                }
            }
        };
        events.push(FlowEvent::ToolCompleted {
            step: self.path.clone(),
            name: RUN_TOOL.to_string(),
            status: if ran.status == ToolStatus::Ok { "ok" } else { "error" }.to_string(),
            content: archmax_program::text::first_chars(&ran.content, 400).to_string(),
        });
        if let Some(failure) = ran.failure.as_deref().filter(|_| refused.is_none()) {
            warn(&mut events, failure, None);
        }
        messages.push(Message::Tool { call_id, name: RUN_TOOL.to_string(), content: ran.content, status: ran.status });
        match ran.failure {
            None => StepReport {
                outcome: Outcome::Passed,
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
    let events = vec![FlowEvent::Warning {
        step: path.to_string(),
        code: code.to_string(),
        message: message.clone(),
        rule: None,
    }];
    StepReport::failed(message, Vec::new(), events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_is_offered_only_when_a_program_is_published_and_names_them() {
        let names = |allowed: &[String]| -> Vec<String> {
            tool_definitions(&[], allowed).into_iter().map(|tool| tool.name).collect()
        };
        assert!(!names(&[]).contains(&RUN_TOOL.to_string()));
        let published = ["cargo".to_string(), "./check.sh".to_string()];
        assert!(names(&published).contains(&RUN_TOOL.to_string()));
        let run = run_tool(&published);
        assert!(run.description.contains("`cargo`, `./check.sh`"), "{}", run.description);
        assert_eq!(run.parameters["required"], json!(["command"]));
    }

    fn job(script: &str, after_call: &str) -> CommandJob {
        let hook = |script: &str| crate::hooks::Hook {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout: crate::hooks::HOOK_TIMEOUT,
        };
        CommandJob {
            path: "root.verify".into(),
            attempt: 1,
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms: None,
            refused: None,
            gate: CallGate {
                flow: "f".into(),
                run: "r".into(),
                allow_program: vec!["sh".into()],
                approver: Approver::Unattended,
                before_call: Vec::new(),
                after_call: vec![hook(after_call)],
                workspace_root: std::path::PathBuf::from("."),
                credential_variables: Vec::new(),
            },
            call_id: "call-1".into(),
        }
    }

    #[test]
    fn a_command_whose_result_an_after_call_hook_withholds_fails_and_files_the_refusal() {
        let withhold = r#"grep -q password && { echo '{"reason":"it printed a secret"}'; exit 2; }; exit 0"#;
        let report = job("echo password=hunter2", withhold).run();
        assert_eq!(report.outcome, Outcome::Failed);
        let reason = report.reason.clone().unwrap_or_default();
        assert_eq!(reason, "an after-call hook withheld the result of `run`: it printed a secret [gate.after-call]");
        let kinds: Vec<String> = report.events.iter().map(|event| event.json()[..30].to_string()).collect();
        assert!(kinds[0].contains("tool-requested") && kinds[1].contains("hook-ran"), "{kinds:?}");
        assert!(kinds[2].contains("warning") && kinds[3].contains("tool-completed"), "{kinds:?}");
        assert_eq!(kinds.len(), 4, "one warning, before tool-completed: {kinds:?}");
        let Some(Message::Tool { content, .. }) = report.messages.last() else { panic!("{:?}", report.messages) };
        assert!(!content.contains("hunter2") && content.starts_with("Refused: an after-call hook"), "{content}");
        // The same hook lets a clean result through, and the step passes.
        let passed = job("echo 4 passed", withhold).run();
        assert_eq!(passed.outcome, Outcome::Passed);
    }

    #[test]
    fn an_after_call_hook_is_shown_the_whole_result_it_may_withhold() {
        // The secret comes after 5000 harmless characters: a hook shown only the start of
        // the result would let it through to the conversation.
        let withhold = r#"grep -q password && { echo '{"reason":"it printed a secret"}'; exit 2; }; exit 0"#;
        let report = job("head -c 5000 /dev/zero | tr '\\0' x; echo; echo pass''word=hunter2", withhold).run();
        assert_eq!(report.outcome, Outcome::Failed, "{:?}", report.reason);
        let Some(Message::Tool { content, .. }) = report.messages.last() else { panic!("{:?}", report.messages) };
        assert!(!content.contains("hunter2") && content.starts_with("Refused: an after-call hook"), "{content}");
    }

    #[test]
    fn a_command_that_ran_and_failed_is_warned_about_after_its_result() {
        let report = job("exit 3", "exit 0").run();
        let kinds: Vec<String> = report.events.iter().map(|event| event.json()[..30].to_string()).collect();
        assert!(kinds[2].contains("tool-completed") && kinds[3].contains("warning"), "{kinds:?}");
    }
}
