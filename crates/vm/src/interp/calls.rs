//! Tool calls, in the spec's order: resolve the name, substitute `${{…}}` in the model's
//! own string arguments, ask the kernel, then execute (controls here, built-ins through
//! the standard library). A refusal or a tool that throws is answered to the model as an
//! error-status tool message; it never fails the turn. Substitution is bounded: its
//! result's size is computed before it is built (`argument.too-large`).

use serde_json::Value;

use archmax_program::program::{StateId, ToolKind};
use archmax_program::reference::{TemplatePart, VarPath, parse_template};
use archmax_program::tools::{DEFAULT_TOOLS, RUNTIME_TOOLS, Tool, delegation_target, path_arguments};

use crate::events::Event;
use crate::kernel::{Call, Origin, Refusal, Rule, Verdict, decide, resolve_reference};
use crate::session::{Message, Status, ToolCall, ToolStatus};

use super::Turn;
use super::host::HostPathProblem;

/// The runtime's own control tools (never mocked): every `archmax_` tool but the two
/// that run scripts.
fn is_control(tool: &str) -> bool {
    Tool::from_name(tool).is_some_and(|tool| RUNTIME_TOOLS.contains(&tool.name()) && !tool.is_script())
}

/// Longest tool output kept in a `tool-result` event.
const EVENT_OUTPUT_PREVIEW: usize = 2_000;

/// Who makes a call: the event `origin`, whether `${{…}}` is substituted, and how the
/// control tools act (an automated state's advance is recorded, not taken).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Caller {
    /// The session's agent.
    Model,
    /// A grader state's isolated model.
    Grader,
    /// A code state's script.
    Code,
    /// An `archmax_eval` or `archmax_run` script, on the agent's authority.
    Script,
}

impl Caller {
    pub fn origin(self) -> &'static str {
        match self {
            Caller::Model => "model",
            Caller::Grader => "grader",
            Caller::Code => "code",
            Caller::Script => "script",
        }
    }

    fn kernel(self) -> Origin {
        match self {
            Caller::Model | Caller::Grader => Origin::Model,
            Caller::Code | Caller::Script => Origin::Script,
        }
    }

    /// Only a model writes `${{…}}` into its arguments; a script holds the values.
    fn substitutes(self) -> bool {
        matches!(self, Caller::Model | Caller::Grader)
    }
}

/// What executing one call produced.
pub(super) struct Answer {
    pub content: String,
    pub status: ToolStatus,
    /// The call did not do what it asked, though the model reads a plain answer (an
    /// advance the runtime refused).
    pub refused: bool,
    /// A sub-workflow call whose child runs after the batch; the answer comes then.
    pub deferred: bool,
}

impl Answer {
    pub fn ok(content: impl Into<String>) -> Answer {
        Answer { content: content.into(), status: ToolStatus::Ok, refused: false, deferred: false }
    }

    pub fn error(content: impl Into<String>) -> Answer {
        Answer { content: content.into(), status: ToolStatus::Error, refused: true, deferred: false }
    }

    /// A placeholder for a sub-workflow call still to run.
    pub(crate) fn deferred() -> Answer {
        Answer { content: String::new(), status: ToolStatus::Ok, refused: false, deferred: true }
    }

    /// A refusal answered as a plain message.
    pub fn refused(content: impl Into<String>) -> Answer {
        Answer { content: content.into(), status: ToolStatus::Ok, refused: true, deferred: false }
    }
}

/// Why `${{…}}` substitution refused a call; the call is not made.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum SubstitutionError {
    /// A reference is malformed or names no value; the message says which.
    Unresolved(String),
    /// The arguments would grow past the bound once expanded.
    TooLarge { size: u64, limit: u64 },
}

impl SubstitutionError {
    /// The rule the call is refused under.
    pub fn rule(&self) -> Rule {
        match self {
            SubstitutionError::Unresolved(_) => Rule::ArgumentUnresolvedReference,
            SubstitutionError::TooLarge { .. } => Rule::ArgumentTooLarge,
        }
    }
}

impl std::fmt::Display for SubstitutionError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubstitutionError::Unresolved(problem) => formatter.write_str(problem),
            SubstitutionError::TooLarge { size, limit } => write!(
                formatter,
                "its arguments would be {size} bytes once `${{{{…}}}}` references are substituted, over the \
                 limit of {}; quote a large value fewer times, or write it to a file once and pass the path",
                archmax_stdlib::limits::bound_in_words(*limit)
            ),
        }
    }
}

/// The values a call's references resolve to, each resolved once however often it is
/// quoted.
type Resolved = std::collections::HashMap<VarPath, String>;

/// Substitutes every `${{…}}` in the string values of `args`. The expanded size is
/// computed first (each value resolved once, sizes added without overflow), so a call
/// whose string arguments would total more than `limit` bytes is refused before anything
/// is built; a call without references is returned as it is.
pub(crate) fn substitute(args: &Value, variables: &Value, limit: u64) -> Result<Value, SubstitutionError> {
    let mut resolved = Resolved::new();
    within_bound(args, variables, Reading::Text, &mut resolved, limit)?;
    Ok(expand(args, &resolved))
}

/// Refuses a sub-workflow call whose arguments would pass `limit` bytes once its
/// references are resolved (a whole-argument reference counted as its value's JSON),
/// before the dispatcher builds them. What does not resolve counts nothing here; the
/// dispatcher refuses it.
pub(crate) fn check_delegation_size(args: &Value, variables: &Value, limit: u64) -> Result<(), SubstitutionError> {
    within_bound(args, variables, Reading::Argument, &mut Resolved::new(), limit)
}

/// How a reference's value becomes text while sizes are summed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// A model's tool argument: strings, numbers and booleans; anything else refuses.
    Text,
    /// A sub-workflow argument: any value, as its JSON when not a string.
    Argument,
}

fn within_bound(
    args: &Value,
    variables: &Value,
    reading: Reading,
    resolved: &mut Resolved,
    limit: u64,
) -> Result<(), SubstitutionError> {
    let mut references = 0usize;
    let size = expanded_size(args, &Resolver { variables, reading }, resolved, &mut references)?;
    if references > 0 && size > limit {
        return Err(SubstitutionError::TooLarge { size, limit });
    }
    Ok(())
}

struct Resolver<'v> {
    variables: &'v Value,
    reading: Reading,
}

/// The bytes of every string in `args` once substituted; resolves each reference into
/// `resolved` and counts them.
fn expanded_size(
    args: &Value,
    resolver: &Resolver,
    resolved: &mut Resolved,
    references: &mut usize,
) -> Result<u64, SubstitutionError> {
    match args {
        Value::String(text) if text.contains("${{") => {
            let mut size = 0u64;
            for part in &template(text)?.parts {
                let length = match part {
                    TemplatePart::Literal(literal) => literal.len(),
                    TemplatePart::Reference { path, .. } => {
                        *references += 1;
                        resolved_value(path, resolver, resolved)?.len()
                    }
                };
                size = size.saturating_add(length as u64);
            }
            Ok(size)
        }
        Value::String(text) => Ok(text.len() as u64),
        Value::Array(items) => items.iter().try_fold(0u64, |total, item| {
            Ok(total.saturating_add(expanded_size(item, resolver, resolved, references)?))
        }),
        Value::Object(map) => map.values().try_fold(0u64, |total, value| {
            Ok(total.saturating_add(expanded_size(value, resolver, resolved, references)?))
        }),
        _ => Ok(0),
    }
}

fn template(text: &str) -> Result<archmax_program::reference::Template, SubstitutionError> {
    parse_template(text).map_err(|error| {
        SubstitutionError::Unresolved(format!(
            "the reference in `{text}` is malformed: {}. Write `$${{{{…}}}}` for the literal characters.",
            error.message
        ))
    })
}

fn resolved_value<'r>(
    path: &VarPath,
    resolver: &Resolver,
    resolved: &'r mut Resolved,
) -> Result<&'r str, SubstitutionError> {
    if !resolved.contains_key(path) {
        let found = match resolver.reading {
            Reading::Text => resolve_reference(path, resolver.variables),
            Reading::Argument => Some(argument_text(path, resolver.variables)),
        };
        let value = found.ok_or_else(|| {
            SubstitutionError::Unresolved(format!(
                "`${{{{{path}}}}}` does not resolve to a value: check the name with `archmax_get_variables`, or write `$${{{{{path}}}}}` for the literal text"
            ))
        })?;
        resolved.insert(path.clone(), value);
    }
    Ok(resolved.get(path).map_or("", String::as_str))
}

/// A sub-workflow argument's value as text; empty when it does not resolve.
fn argument_text(path: &VarPath, variables: &Value) -> String {
    match variables.get(&path.root).and_then(|root| crate::kernel::value_at(root, &path.segments)) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// `args` with every reference replaced by its value from `resolved` (which
/// [`expanded_size`] filled, so every reference is there).
fn expand(args: &Value, resolved: &Resolved) -> Value {
    match args {
        Value::String(text) if text.contains("${{") => {
            let Ok(template) = parse_template(text) else { return args.clone() };
            let mut out = String::with_capacity(text.len());
            for part in &template.parts {
                match part {
                    TemplatePart::Literal(literal) => out.push_str(literal),
                    TemplatePart::Reference { path, .. } => {
                        out.push_str(resolved.get(path).map_or("", String::as_str));
                    }
                }
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| expand(item, resolved)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, value)| (key.clone(), expand(value, resolved))).collect())
        }
        other => other.clone(),
    }
}

pub(super) fn preview(text: &str) -> (String, bool) {
    match archmax_program::text::cut_at_bytes(text, EVENT_OUTPUT_PREVIEW) {
        Some(kept) => (kept.to_string(), true),
        None => (text.to_string(), false),
    }
}

/// The tool's path arguments tell what the call is about: as its host declares them, as
/// the surface has them, else as the built-in takes them.
fn described_paths<'a>(
    program: &'a archmax_program::program::Program,
    hosted: Option<&'a crate::tool_host::HostTool>,
    on_surface: Option<&'a archmax_program::program::SurfaceTool>,
    tool: &str,
) -> Vec<&'a str> {
    match (hosted, on_surface) {
        (Some(tool), _) => tool.paths.iter().map(|(name, _)| name.as_str()).collect(),
        (None, Some(tool)) => tool.paths.iter().map(|(name, _)| program.str(*name)).collect(),
        (None, None) => path_arguments(tool).iter().map(|(name, _)| *name).collect(),
    }
}

impl Turn<'_> {
    /// Handles every call of one assistant message, in order.
    pub(super) async fn handle_calls(&mut self, calls: &[ToolCall]) -> Result<(), crate::runtime::RunError> {
        let mut advanced: Option<String> = None;
        let alone = calls.len() == 1;
        // Every call of one message is decided in the state the model was shown.
        let shown = self.position_id();
        let mut answers: Vec<Answer> = Vec::with_capacity(calls.len());
        for call in calls {
            // Sub-workflow calls made before a move settle before it, so their failures
            // are the failures of the state that made them.
            if Tool::from_name(&call.name).is_some_and(Tool::moves_session) && self.delegations.has_waiting() {
                for (call_id, answer) in self.run_deferred(Caller::Model).await {
                    if let Some(index) = calls.iter().position(|call| call.id == call_id) {
                        answers[index] = answer;
                    }
                }
            }
            let answer = match self.session.head.status {
                Status::Failed => Answer::error("The session has already ended; this call was not run."),
                Status::AwaitingInput | Status::AwaitingDecision => {
                    Answer::error("The session is parked now; this call was not run.")
                }
                _ => self.handle_call(shown, call, Caller::Model, alone, &mut advanced).await,
            };
            answers.push(answer);
        }
        // Sub-workflow calls of this message run together, then answer in place.
        for (call_id, answer) in self.run_deferred(Caller::Model).await {
            if let Some(index) = calls.iter().position(|call| call.id == call_id) {
                answers[index] = answer;
            }
        }
        for (call, answer) in calls.iter().zip(answers) {
            self.push_message(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: answer.content,
                status: answer.status,
            });
        }
        Ok(())
    }

    /// One call in its `execute_tool` span: a sub-workflow it dispatches runs under it.
    pub(super) async fn handle_call(
        &mut self,
        id: StateId,
        call: &ToolCall,
        caller: Caller,
        alone: bool,
        advanced: &mut Option<String>,
    ) -> Answer {
        let span = super::spans::tool_span(&call.name, &call.id, caller.origin());
        tracing::Instrument::instrument(self.decide_and_run(id, call, caller, alone, advanced), span).await
    }

    async fn decide_and_run(
        &mut self,
        id: StateId,
        call: &ToolCall,
        caller: Caller,
        alone: bool,
        advanced: &mut Option<String>,
    ) -> Answer {
        let origin = caller.origin().to_string();
        let state = self.state(id);
        let here = self.slug(id).to_string();
        let program = self.program();
        let surface = self.workflow.surface(state.surface);
        let resolved = match self.resolve_name(id, &call.name) {
            Ok(Some(full)) => ToolCall { id: call.id.clone(), name: full, args: call.args.clone() },
            Ok(None) => call.clone(),
            Err(candidates) => {
                let candidates = candidates.iter().map(String::as_str).collect();
                let refusal = Refusal::Ambiguous { tool: &call.name, state: &here, candidates }.verdict();
                return self.refuse(&here, call, &origin, &call.args, refusal);
            }
        };
        let call = &resolved;
        let on_surface = surface.tools.iter().find(|tool| program.str(tool.name) == call.name);
        let known = self.is_known(id, &call.name);
        if !known && !self.is_provided(&call.name).await {
            let offered = surface.tools.iter().map(|tool| program.str(tool.name)).collect();
            let refusal = Refusal::Unknown { tool: &call.name, state: &here, offered }.verdict();
            return self.refuse(&here, call, &origin, &call.args, refusal);
        }
        let delegation = on_surface.is_some_and(|tool| matches!(tool.kind, ToolKind::Delegation(_)));
        let variables = self.variables_json();
        let args = if delegation || !caller.substitutes() {
            call.args.clone()
        } else {
            match substitute(&call.args, &variables, self.runtime.limits().substituted_bytes) {
                Ok(args) => args,
                Err(problem) => return self.refuse_substitution(&here, call, &origin, problem),
            }
        };
        // A sub-workflow's arguments reach the child resolved, so its guards are decided
        // on the resolved values too (an unresolvable one is refused by the dispatcher).
        let decided = if delegation {
            if let Err(problem) = check_delegation_size(&args, &variables, self.runtime.limits().substituted_bytes) {
                return self.refuse_substitution(&here, call, &origin, problem);
            }
            super::delegate::resolve_argument(&args, &variables).unwrap_or_else(|_| args.clone())
        } else {
            args.clone()
        };
        // A host tool's path arguments are the ones its host declares. A name this state
        // does not know is not granted here, so the kernel refuses it without asking the
        // host (which would start its servers).
        let hosted = if known && on_surface.is_none_or(|tool| tool.kind == ToolKind::Host) {
            self.host_tool(&call.name).await
        } else {
            None
        };
        let verdict = decide(
            &self.policy(),
            &Call {
                state,
                tool: &call.name,
                args: &decided,
                origin: caller.kernel(),
                reply_only: false,
                variables: &variables,
                declared_paths: hosted.as_ref().map(|tool| tool.paths.as_slice()),
            },
        );
        if !verdict.allowed {
            return self.refuse(&here, call, &origin, &args, verdict);
        }
        // A declared result (a case's mock) answers an allowed call instead of the tool;
        // control tools are the runtime's own and are never mocked. Sub-workflow mocks are
        // served by the dispatcher, after its checks.
        let mocked = if !is_control(&call.name) && delegation_target(&call.name).is_none() {
            self.mocked(&here, call, &args).await
        } else {
            None
        };
        let paths = described_paths(program, hosted.as_ref(), on_surface, &call.name);
        // A host tool's path arguments become the absolute real paths its server opens,
        // each resolved beneath its root now: a link on the way refuses the call before
        // anything is recorded as called.
        let sent = match (&hosted, &mocked) {
            (Some(hosted), None) => match self.real_paths(&args, &hosted.paths) {
                Err(HostPathProblem::Link { argument, path, refused }) => {
                    let detail = refused.to_string();
                    let refusal =
                        Refusal::LinkOnPath { tool: &call.name, argument: &argument, path: &path, detail: &detail };
                    return self.refuse(&here, call, &origin, &args, refusal.verdict());
                }
                Err(HostPathProblem::Other(problem)) => Some(Err(problem)),
                Ok(sent) => Some(Ok(sent)),
            },
            _ => None,
        };
        let detail = crate::events::call_detail(&args, paths);
        // An event carries the arguments cut to a bound; the transcript keeps them whole.
        let (shown_args, args_cut) = crate::events::bounded_args(&args);
        self.emit(Event::ToolCalled {
            state: here.clone(),
            tool: call.name.clone(),
            call_id: call.id.clone(),
            args: shown_args,
            args_cut,
            detail,
            origin: origin.clone(),
            server: hosted.as_ref().filter(|_| mocked.is_none()).map(|tool| tool.server.clone()),
        });
        let started = self.now();
        let mut server = None;
        let answer = if let Some(text) = mocked {
            Answer::ok(text)
        } else if let (Some(hosted), Some(sent)) = (&hosted, sent) {
            // Only a tool the kernel decided with its host's declared path arguments goes to
            // the host, and the server receives those paths as the real paths decided.
            let (answer, answered_by) = self.call_host(id, &here, (call, &args), &hosted.server, sent, caller).await;
            server = answered_by;
            answer
        } else {
            self.execute(id, call, &args, caller, alone, advanced).await
        };
        if answer.deferred {
            return answer;
        }
        // What a model reads in its conversation is held to the context budget; a
        // script's calls answer the script, which bounds its own results.
        let answer = if matches!(caller, Caller::Model | Caller::Grader) && !is_control(&call.name) {
            self.offload(id, &here, call, &args, answer, server.is_some())
        } else {
            answer
        };
        let (output, truncated) = preview(&answer.content);
        self.emit(Event::ToolResult {
            state: here,
            tool: call.name.clone(),
            call_id: call.id.clone(),
            status: if answer.refused { "error" } else { "ok" }.to_string(),
            duration_ms: self.now().saturating_sub(started),
            output,
            truncated,
            origin,
            server,
        });
        answer
    }

    /// Sends an allowed call to `server_name`'s server with the real paths decided
    /// (`sent`, or why they could not be); returns the answer and the server that
    /// answered, if one did.
    async fn call_host(
        &mut self,
        id: StateId,
        here: &str,
        (call, decided): (&ToolCall, &Value),
        server_name: &str,
        sent: Result<(Value, Vec<archmax_stdlib::vfs::HandedPath>), String>,
        caller: Caller,
    ) -> (Answer, Option<String>) {
        // The pins keep the handed paths naming what was checked until the server has
        // answered: they live to the end of this function.
        let (sent, _pins) = match sent {
            Err(problem) => return (Answer::error(format!("Error: {problem}")), Some(server_name.to_string())),
            Ok(sent) => sent,
        };
        let connection = self.connection_of(id, &call.name);
        let place = self.host_calls_in_step;
        self.host_calls_in_step += 1;
        let key = crate::tool_host::idempotency_key(&self.session.id, self.session.seq + 1, place, &call.name, decided);
        let host_call = crate::tool_host::HostCall {
            session: &self.session.id,
            idempotency_key: &key,
            state: here,
            call_id: &call.id,
            tool: &call.name,
            connection: connection.as_deref(),
            args: &sent,
        };
        match self.runtime.tool_host().call(host_call).await {
            Ok(answered) => {
                let server = Some(answered.server.clone());
                let offloaded = matches!(caller, Caller::Model | Caller::Grader);
                (self.host_answer(&call.id, answered, offloaded).await, server)
            }
            Err(crate::tool_host::HostError::NotProvided(_)) => (
                Answer::error(format!(
                    "Error: no server provides `{}` any more; its server may have changed its tools",
                    call.name
                )),
                None,
            ),
            Err(crate::tool_host::HostError::Failed { server: failed, message }) => {
                (Answer::error(format!("Error: {message}")), Some(failed))
            }
        }
    }

    /// Refuses a call whose `${{…}}` references do not resolve or expand too far; the
    /// call is recorded as blocked with its arguments as the model wrote them.
    fn refuse_substitution(&mut self, here: &str, call: &ToolCall, origin: &str, problem: SubstitutionError) -> Answer {
        let refusal = Refusal::NotMade { rule: problem.rule(), problem: &problem.to_string() }.verdict();
        self.refuse(here, call, origin, &call.args, refusal)
    }

    /// The one way a refused call is answered: the model reads the verdict's text as an
    /// error, the refusal is recorded as `tool-blocked` (with `args` as decided) when its
    /// rule is, and a terminal refusal marks the session rejected.
    pub(super) fn refuse(
        &mut self,
        here: &str,
        call: &ToolCall,
        origin: &str,
        args: &Value,
        verdict: Verdict,
    ) -> Answer {
        super::spans::refusal_event(&verdict.rule.to_string(), &call.name, verdict.terminal);
        if verdict.rule.is_recorded_as_blocked() {
            let (shown_args, args_cut) = crate::events::bounded_args(args);
            self.emit(Event::ToolBlocked {
                state: here.to_string(),
                tool: call.name.clone(),
                rule: verdict.rule.to_string(),
                reason: verdict.reason.clone(),
                call_id: call.id.clone(),
                args: shown_args,
                args_cut,
                origin: origin.to_string(),
            });
        }
        if verdict.terminal && self.session.head.rejected.is_none() {
            self.session.head.rejected = Some(verdict.reason.clone());
        }
        Answer::error(verdict.reason)
    }

    async fn execute(
        &mut self,
        id: StateId,
        call: &ToolCall,
        args: &Value,
        caller: Caller,
        alone: bool,
        advanced: &mut Option<String>,
    ) -> Answer {
        let automated = self.automated.is_some();
        let raw = matches!(caller, Caller::Code | Caller::Script);
        let name = call.name.as_str();
        match Tool::from_name(name) {
            Some(Tool::Advance) if automated => self.automated_advance(args),
            Some(Tool::Raise) if automated => self.automated_raise(args),
            Some(Tool::GetHistory) if automated => {
                Answer::ok(self.automated.as_ref().map(|run| run.history().to_string()).unwrap_or_default())
            }
            Some(Tool::Reset | Tool::Wait) if automated => Answer::error(format!(
                "'{}' is not available to grader and code states; they cannot park or reset.",
                call.name
            )),
            Some(Tool::Advance) => self.advance(call, args, advanced),
            Some(Tool::Reset) => self.reset(call, args),
            Some(Tool::Wait) => self.wait(call, args),
            Some(Tool::Raise) => self.raise(call, args, alone),
            Some(Tool::GetVariables) => self.get_variables(args),
            Some(Tool::SetVariables) => self.set_variables(id, call, args),
            Some(Tool::GetHistory) => Answer::error("archmax_get_history is offered only to grader and code states."),
            Some(script @ (Tool::Eval | Tool::Run)) => self.script_tool(id, call, script, args).await,
            _ if delegation_target(name).is_some() => {
                match self.prepare_delegation(id, &call.id, name, args, caller).await {
                    Ok(prepared) => {
                        self.delegations.defer(prepared);
                        Answer::deferred()
                    }
                    Err(refusal) => refusal,
                }
            }
            Some(tool) if DEFAULT_TOOLS.contains(&tool.name()) => {
                let policy = self.policy();
                let state = self.state(id);
                let variables = self.session.variable_values();
                let filter = |path: &str| crate::kernel::listed(&policy, state, name, path, &variables);
                let context = archmax_stdlib::tools::ToolContext {
                    workspace: &self.workspace,
                    visible: &filter,
                    raw_text: raw,
                    limits: self.runtime.limits(),
                };
                // File tools read and write the session's store and the mounts: blocking
                // work, kept off the executor's time.
                let result = crate::blocking::run_blocking(|| archmax_stdlib::tools::run(name, args, &context));
                if tool == Tool::WriteTodos
                    && result.is_ok()
                    && let Some(Value::Array(todos)) = args.get("todos")
                {
                    self.session.head.todos = todos.clone();
                }
                match result {
                    Ok(text) => Answer::ok(text),
                    Err(error) => Answer::error(format!("Error: {}", error.0)),
                }
            }
            _ => Answer::error(format!("Error: the host provides no `{name}` tool in this run.")),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Rule, SubstitutionError, check_delegation_size, substitute};
    use archmax_stdlib::limits::MAX_SUBSTITUTED_BYTES;

    fn big_variable() -> serde_json::Value {
        json!({ "big": "x".repeat(1 << 20), "name": "Ada" })
    }

    #[test]
    fn a_large_value_quoted_a_thousand_times_is_refused_with_the_bound() {
        let args = json!({ "file_path": "scratchpad/a.md", "content": "${{big}}".repeat(1000) });
        // The whole call counts: 1000 MiB of content and the path's 15 bytes.
        let refused = substitute(&args, &big_variable(), MAX_SUBSTITUTED_BYTES).unwrap_err();
        assert_eq!(refused, SubstitutionError::TooLarge { size: (1000 << 20) + 15, limit: MAX_SUBSTITUTED_BYTES });
        assert_eq!(refused.rule(), Rule::ArgumentTooLarge);
        assert_eq!(
            refused.to_string(),
            "its arguments would be 1048576015 bytes once `${{…}}` references are substituted, over the limit of \
             10 MiB (10485760 bytes); quote a large value fewer times, or write it to a file once and pass the path"
        );
    }

    #[test]
    fn the_size_is_computed_before_anything_is_built() {
        // 100 GiB once expanded: building it would exhaust memory, so only a check made
        // beforehand lets this test finish.
        let args = json!({ "content": ["${{big}}".repeat(100_000), "${{big}}"] });
        let refused = substitute(&args, &big_variable(), MAX_SUBSTITUTED_BYTES).unwrap_err();
        assert_eq!(refused, SubstitutionError::TooLarge { size: 100_001 << 20, limit: MAX_SUBSTITUTED_BYTES });
    }

    #[test]
    fn substitution_under_the_bound_is_unchanged() {
        let args = json!({ "content": "Dear ${{name}}, ${{name}}!", "n": 3, "escaped": "$${{name}}" });
        let substituted = substitute(&args, &big_variable(), 64).unwrap();
        assert_eq!(substituted, json!({ "content": "Dear Ada, Ada!", "n": 3, "escaped": "${{name}}" }));
        // The bound counts the whole call, literal text too.
        let refused = substitute(&args, &big_variable(), 20).unwrap_err();
        assert_eq!(refused, SubstitutionError::TooLarge { size: 23, limit: 20 });
        // A call without references is not substitution's to bound.
        let plain = json!({ "content": "x".repeat(100) });
        assert_eq!(substitute(&plain, &big_variable(), 10).unwrap(), plain);
    }

    #[test]
    fn a_sub_workflow_argument_is_bounded_the_same_way() {
        let variables = json!({ "big": "x".repeat(1 << 20), "rows": [1, 2, 3] });
        let args = json!({ "items": vec!["${{big}}"; 1000], "note": "rows: ${{rows}}" });
        let refused = check_delegation_size(&args, &variables, MAX_SUBSTITUTED_BYTES).unwrap_err();
        assert_eq!(refused, SubstitutionError::TooLarge { size: (1000 << 20) + 13, limit: MAX_SUBSTITUTED_BYTES });
        let small = json!({ "rows": "${{rows}}", "unset": "${{nothing}}" });
        assert_eq!(check_delegation_size(&small, &variables, 16), Ok(()));
    }

    #[test]
    fn an_unresolved_reference_names_itself() {
        let refused = substitute(&json!({ "a": "${{missing}}" }), &big_variable(), 64).unwrap_err();
        assert_eq!(refused.rule(), Rule::ArgumentUnresolvedReference);
        assert!(refused.to_string().starts_with("`${{missing}}` does not resolve to a value"), "{refused}");
    }
}
