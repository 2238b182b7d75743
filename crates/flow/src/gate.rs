//! The gate every call of a step meets, in the contract's order: **published or
//! withheld, the approver, the operator's `before-call` hooks, the tool, the
//! `after-call` hooks**. A model step's file tools and `run`, and a command step's one
//! `run` call, all pass through it; `answer` (the runner's own report channel, which
//! acts on nothing) does not. Each call meets it only once the governance kernel has
//! allowed it (`archmax_vm::kernel::decide_scoped_call`: the step's tools, the
//! workspace's bounds, the write scopes), so nobody is asked about a call the kernel
//! refuses.
//!
//! - *Published*: the file tools always are; `run` is, for a program `--allow-program`
//!   names ([`Gate::admit`]), and is withheld otherwise, the refusal naming the flag. A
//!   name that is none of the step's tools never gets here: the kernel refuses it
//!   (`tool.unknown`).
//! - *The approver* is asked about the calls that act: every `run`, and every file tool
//!   call that writes ([`needs_approval`]). It is a program (`--approve PROGRAM`, asked
//!   with a JSON document on stdin by the hooks' exit-code rules), or a y/N prompt on
//!   stderr when stdin is a terminal. With neither ([`Approver::Unattended`]) the run's
//!   own flags are the approval: nothing is asked, `run` still reaches only the programs
//!   `--allow-program` published and writes only where the scopes allow.
//! - *Hooks* ([`crate::hooks`]): `before-call` may refuse a call before it runs;
//!   `after-call` sees its outcome and may withhold its result (the tool has run; the
//!   model, or the next step, reads the refusal instead of the result).
//!
//! A refusal is a [`Refused`]: the rule it was refused under (`gate.withheld`,
//! `gate.malformed`, `gate.approver`, `gate.before-call`, `gate.after-call`) and its sentence, which the caller files as the call's failed
//! result, with a warning naming it between `tool-requested` and `tool-completed`. Every answer is an event: `approval`
//! for the approver, `hook-ran` for each hook. The one thing to know: **every check
//! fails closed** — an approver or hook that cannot answer has not said yes.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use archmax_program::tools::path_arguments;
use archmax_vm::kernel::Rule;

use crate::events::FlowEvent;
use crate::hooks::{Hook, HookAnswer, ask_program};
use crate::refusal::Refused;
use crate::step::{RUN_TOOL, StepEnvironment};

/// How long an approver program may take: it may be asking a person.
pub const APPROVER_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of one argument the terminal question shows; the rest is counted.
const SHOWN_CHARS: usize = 400;

/// Who approves the calls that act.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Approver {
    /// No approver and no terminal: the run's flags are the approval, nothing is asked.
    #[default]
    Unattended,
    /// `--approve PROGRAM`: asked with a JSON document on stdin.
    Program { argv: Vec<String>, timeout: Duration },
    /// A y/N prompt on stderr, answered on stdin (a terminal).
    Terminal,
}

/// Whether a run publishes a program to `run`.
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

/// The argv of a `run` call: `command`, a non-empty list of strings.
pub fn run_argv(args: &Value) -> Result<Vec<String>, String> {
    let argv: Option<Vec<String>> = args
        .get("command")
        .and_then(Value::as_array)
        .and_then(|items| items.iter().map(|item| item.as_str().map(str::to_string)).collect());
    argv.filter(|argv| argv.first().is_some_and(|program| !program.is_empty()))
        .ok_or_else(|| "`run` takes `command`: a non-empty list of strings (an argv; no shell reads it)".to_string())
}

/// Whether a call acts and so needs the approver: every `run`, and a file tool call
/// that names a path it writes, moves or removes.
pub fn needs_approval(tool: &str, args: &Value) -> bool {
    tool == RUN_TOOL
        || path_arguments(tool)
            .iter()
            .any(|(argument, access)| access.writes() && args.get(*argument).is_some_and(|value| !value.is_null()))
}

/// One call as the gate sees it.
#[derive(Clone, Debug)]
pub struct GateCall {
    /// The step's path.
    pub path: String,
    /// The attempt of the step's section.
    pub attempt: u32,
    pub tool: String,
    pub args: Value,
}

/// The gate with everything it needs owned, so a command step's thread can hold it.
#[derive(Clone, Debug)]
pub struct CallGate {
    pub flow: String,
    pub run: String,
    pub allow_program: Vec<String>,
    pub approver: Approver,
    pub before_call: Vec<Hook>,
    pub after_call: Vec<Hook>,
    pub workspace_root: PathBuf,
    /// Variables removed from every program the gate asks (the credential).
    pub credential_variables: Vec<String>,
}

/// The terminal prompt is one at a time, whatever runs beside it.
static PROMPT: Mutex<()> = Mutex::new(());

impl CallGate {
    pub fn new(environment: &StepEnvironment<'_>) -> CallGate {
        CallGate {
            flow: environment.flow.to_string(),
            run: environment.run.to_string(),
            allow_program: environment.allow_program.to_vec(),
            approver: environment.approver.clone(),
            before_call: environment.hooks.before_call.clone(),
            after_call: environment.hooks.after_call.clone(),
            workspace_root: environment.workspace_root.to_path_buf(),
            credential_variables: environment.credential_variables.to_vec(),
        }
    }

    /// Whether asking about `call` may block (a program or a person is asked).
    pub fn blocks(&self, call: &GateCall) -> bool {
        !self.before_call.is_empty()
            || !self.after_call.is_empty()
            || (self.approver != Approver::Unattended && needs_approval(&call.tool, &call.args))
    }

    /// Published, then the approver, then the `before-call` hooks; the first refusal
    /// wins and is `Err`. Each answer is pushed onto `events`.
    pub fn before(&self, call: &GateCall, events: &mut Vec<FlowEvent>) -> Result<(), Refused> {
        self.published(call)?;
        if needs_approval(&call.tool, &call.args) {
            self.approve(call, events)?;
        }
        if self.before_call.is_empty() {
            return Ok(());
        }
        let document = self.document(("hook", "before-call"), call);
        for hook in &self.before_call {
            let answer = hook.ask(&document, &self.workspace_root, &self.credential_variables);
            events.push(hook_ran("before-call", call, &answer));
            if !answer.proceed {
                let reason = answer.reason.unwrap_or_default();
                return Err(Refused::new(
                    Rule::GateBeforeCall,
                    format!("a before-call hook refused `{}`: {reason}", call.tool),
                ));
            }
        }
        Ok(())
    }

    /// The `after-call` hooks, shown the call's `status` (`ok` or `error`) and its whole
    /// `result`, exactly what the step would read (a hook shown only the start could
    /// not withhold what comes after it); `Err` withholds the result.
    pub fn after(
        &self,
        call: &GateCall,
        status: &str,
        result: &str,
        events: &mut Vec<FlowEvent>,
    ) -> Result<(), Refused> {
        if self.after_call.is_empty() {
            return Ok(());
        }
        let mut document = self.document(("hook", "after-call"), call);
        document["status"] = Value::from(status);
        document["result"] = Value::from(result);
        for hook in &self.after_call {
            let answer = hook.ask(&document, &self.workspace_root, &self.credential_variables);
            events.push(hook_ran("after-call", call, &answer));
            if !answer.proceed {
                let reason = answer.reason.unwrap_or_default();
                return Err(Refused::new(
                    Rule::GateAfterCall,
                    format!("an after-call hook withheld the result of `{}`: {reason}", call.tool),
                ));
            }
        }
        Ok(())
    }

    /// `run` of a program the run publishes; the step's other tools, which the kernel
    /// has admitted by name, always are.
    fn published(&self, call: &GateCall) -> Result<(), Refused> {
        if call.tool != RUN_TOOL {
            return Ok(());
        }
        let argv = run_argv(&call.args).map_err(|problem| Refused::new(Rule::GateMalformed, problem))?;
        Gate { allow_program: &self.allow_program }
            .admit(&argv[0])
            .map_err(|problem| Refused::new(Rule::GateWithheld, problem))
    }

    fn approve(&self, call: &GateCall, events: &mut Vec<FlowEvent>) -> Result<(), Refused> {
        let (by, answer) = match &self.approver {
            Approver::Unattended => return Ok(()),
            Approver::Program { argv, timeout } => {
                let document = self.document(("ask", "approval"), call);
                let answer = ask_program(
                    argv,
                    *timeout,
                    &document,
                    &self.workspace_root,
                    &self.credential_variables,
                    "the approver",
                );
                ("program", answer)
            }
            Approver::Terminal => {
                let _one_at_a_time = PROMPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let question = question(call);
                let yes = prompt(&question, &mut std::io::stdin().lock(), &mut std::io::stderr());
                let reason = (!yes).then(|| "the operator said no at the prompt".to_string());
                ("terminal", HookAnswer { proceed: yes, reason, status: None })
            }
        };
        events.push(FlowEvent::Approval {
            step: call.path.clone(),
            name: call.tool.clone(),
            by: by.to_string(),
            verdict: if answer.proceed { "yes" } else { "no" }.to_string(),
            status: answer.status,
            reason: answer.reason.clone().filter(|_| !answer.proceed),
        });
        if answer.proceed {
            return Ok(());
        }
        Err(Refused::new(
            Rule::GateApprover,
            format!("the approver said no to `{}`: {}", call.tool, answer.reason.unwrap_or_default()),
        ))
    }

    /// The document a call hook (`("hook", point)`) or the approver (`("ask",
    /// "approval")`) reads on stdin.
    fn document(&self, (key, word): (&str, &str), call: &GateCall) -> Value {
        json!({
            key: word,
            "flow": self.flow,
            "run": self.run,
            "path": call.path,
            "attempt": call.attempt,
            "tool": call.tool,
            "arguments": call.args,
            "workspace": self.workspace_root.display().to_string(),
        })
    }
}

/// The `hook-ran` event of a call hook's answer.
fn hook_ran(point: &str, call: &GateCall, answer: &HookAnswer) -> FlowEvent {
    FlowEvent::HookRan {
        point: point.to_string(),
        path: call.path.clone(),
        moment: None,
        tool: Some(call.tool.clone()),
        attempt: Some(call.attempt),
        verdict: if answer.proceed { "proceed" } else { "refuse" }.to_string(),
        status: answer.status,
        reason: answer.reason.clone().filter(|_| !answer.proceed),
        replayed: false,
    }
}

/// The terminal question about `call`: the step and the tool, then what the call acts
/// on in full (each path it names, each word of a `run` argv), then its other arguments;
/// every value as JSON (which escapes every control character, so a model cannot drive
/// the terminal), a long one cut with the count of what is not shown. So a long
/// `content`, or a long word of an argv, never pushes the path written or the argv's
/// last words out of sight.
fn question(call: &GateCall) -> String {
    let mut lines = vec![format!("archmax flow: step {} asks to call `{}`", call.path, call.tool)];
    let acted_on: Vec<&str> = if call.tool == RUN_TOOL {
        vec!["command"]
    } else {
        path_arguments(&call.tool).iter().map(|(argument, _)| *argument).collect()
    };
    let object = call.args.as_object();
    for name in &acted_on {
        match object.and_then(|object| object.get(*name)) {
            Some(Value::Array(words)) => {
                let words: Vec<String> = words.iter().map(|word| shown(&word.to_string())).collect();
                lines.push(format!("  {name}: [{}]", words.join(", ")));
            }
            // The path as the file tools resolve it (`a/../` padding gone), in full.
            Some(Value::String(path)) => match archmax_program::zones::canonicalize(path) {
                Ok(resolved) => lines.push(format!("  {name}: {}", Value::from(resolved))),
                Err(_) => lines.push(format!(
                    "  {name}: {} (out of the workspace)",
                    shown(&Value::from(path.as_str()).to_string())
                )),
            },
            Some(value) => lines.push(format!("  {name}: {}", shown(&value.to_string()))),
            None => {}
        }
    }
    match object {
        Some(object) => {
            for (name, value) in object.iter().filter(|(name, _)| !acted_on.contains(&name.as_str())) {
                lines.push(format!("  {name}: {}", shown(&value.to_string())));
            }
        }
        None => lines.push(format!("  arguments: {}", shown(&call.args.to_string()))),
    }
    lines.push("Allow it?".to_string());
    lines.join("\n")
}

/// At most [`SHOWN_CHARS`] of `text`, saying how many more characters there are.
fn shown(text: &str) -> String {
    let head = archmax_program::text::first_chars(text, SHOWN_CHARS);
    let more = text.chars().count() - head.chars().count();
    if more == 0 { text.to_string() } else { format!("{head}… ({more} more characters not shown)") }
}

/// Asks `question` on `output` and reads one line of `input`: `y` or `yes` (any case)
/// is yes; anything else, an empty line or the end of input is no.
pub fn prompt(question: &str, input: &mut dyn BufRead, output: &mut dyn Write) -> bool {
    let _ = write!(output, "{question} [y/N] ");
    let _ = output.flush();
    let mut line = String::new();
    match input.read_line(&mut line) {
        Ok(0) | Err(_) => false,
        Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
    }
}

/// Runs blocking `work` (an approver, a hook, a program) on a thread of its own and
/// awaits it, so the other steps of a layer make progress meanwhile. `Err` says the
/// thread could not be had; the caller fails closed.
pub async fn aside<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("flow-gate".to_string())
        .spawn(move || {
            let _ = sender.send(work());
        })
        .map_err(|error| format!("the call could not be given a thread: {error}"))?;
    receiver.await.map_err(|_| "the call's thread ended without an answer".to_string())
}

#[cfg(test)]
mod tests;
