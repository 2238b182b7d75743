//! The QuickJS sandbox: `archmax_eval` / `archmax_run` (a REPL that lives for the
//! session) and code states (a precompiled module whose default export runs once).
//!
//! The sandbox knows nothing about sessions, states or the kernel. A `tools.*` call from a
//! script becomes a [`HostCall`] on a channel; the caller decides it, runs it, and answers
//! on the call's `reply` (text, or a reason that rejects the script's promise). The caller
//! awaits the sandbox future while it serves that channel, on the same task or another:
//!
//! ```text
//! caller ──eval(code, bridge, args, host)──▶ Sandbox ──HostCall{tool, args, reply}──▶ caller
//!    ▲                                          │  ◀──────── reply: Ok(text) | Err(reason)
//!    └────────── EvalOutput / SandboxError ◀────┘
//! ```
//!
//! What a script can reach: the ECMAScript built-ins, `tools` (a proxy over the
//! [`Bridge`], camelCased), `console` (captured), `args`. There is no `require`,
//! `process`, `fetch`, `std`, `os`, timer, file or socket, and every `import` (static or
//! dynamic) is refused, except the typed `@archmax-ai/harness/*` imports, which are
//! blanked before evaluation.
//!
//! Limits ([`Limits`]), each enforced by the sandbox itself:
//! - **time**: one deadline per evaluation, checked by QuickJS's interrupt handler while
//!   JavaScript runs (CPU loops, microtask loops) and by a tokio timer while it waits
//!   (a host call that never answers); the Rust-side walks over script values check it
//!   too. A second, slightly later tokio timeout around the whole evaluation is the
//!   backstop; if it ever fires the engine is discarded and rebuilt.
//! - **memory**: QuickJS's allocator limit; overflow surfaces as [`SandboxError::OutOfMemory`].
//!   When the heap is still mostly full afterwards (the script pinned it in its own
//!   globals), the REPL is rebuilt before the next evaluation.
//! - **stack**: QuickJS's stack limit; overflow surfaces as [`SandboxError::StackOverflow`].
//! - **tool calls**: counted per evaluation; the call past `max_calls` rejects and sends
//!   nothing.
//! - **output**: the result and the captured console are each cut at `max_result_chars`
//!   characters with a marker.
//!
//! Hardening: the bridge (the `tools` proxy, its traps and its tool functions), the
//! console and every conversion are native Rust; no JavaScript built-in is ever called on
//! a script's behalf, and promises are awaited by reading their state, not through
//! `then`. So rewriting `JSON.stringify`, `Object.prototype`, `Function.prototype.call`,
//! `Promise.prototype.then` and the like only changes the script's own world. There is
//! no private host function to reach: each tool function is bound to its one tool, and
//! which tools may be called is decided in Rust at every call against the current
//! [`Bridge`].
//!
//! Host calls still waiting when an evaluation ends (never awaited, or the evaluation
//! failed) are rejected with "had not answered when the evaluation ended"; anything a
//! script chained onto them runs at the next evaluation, inside that one's budget.

mod bridge;
mod convert;
mod engine;
mod run;

use std::time::Duration;

pub use run::{CodeStateRunner, Sandbox};

/// `work`, an evaluation, polled so that it holds none of a multi-threaded executor's
/// workers. QuickJS runs a script inside the future's poll, so a script's CPU loop holds
/// the thread polling it until the deadline's interrupt stops it (`timeoutMs`, 15 s by
/// default): on a worker that stalls every task queued there (a server's requests, its
/// lease renewals), and two such scripts stall a 2-core runner whole. Each poll runs under
/// [`tokio::task::block_in_place`], which first hands the worker's other tasks to another
/// thread. The evaluation stays on its caller's task, so the order of its host calls and
/// what they start is what it was. On a current-thread executor (the CLI's one-shot
/// commands, where nothing else waits) it is polled as it is.
pub fn off_the_workers<F: std::future::Future>(work: F) -> OffTheWorkers<F> {
    let flavor = tokio::runtime::Handle::try_current().map(|executor| executor.runtime_flavor());
    OffTheWorkers { work: Box::pin(work), in_place: matches!(flavor, Ok(tokio::runtime::RuntimeFlavor::MultiThread)) }
}

/// The future [`off_the_workers`] returns.
pub struct OffTheWorkers<F> {
    work: std::pin::Pin<Box<F>>,
    in_place: bool,
}

impl<F: std::future::Future> std::future::Future for OffTheWorkers<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, context: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let this = &mut *self;
        if this.in_place {
            tokio::task::block_in_place(|| this.work.as_mut().poll(context))
        } else {
            this.work.as_mut().poll(context)
        }
    }
}

/// One `tools.*` call, handed to the caller to decide and run.
#[derive(Debug)]
pub struct HostCall {
    /// The real tool name (`read_file`, `archmax_workflow_enrich-order`), not the camelCase one.
    pub tool: String,
    /// The call's single argument, marshalled in Rust (`{}` when the script passed none).
    pub args: serde_json::Value,
    /// `Ok(text)` resolves the script's promise with `text`; `Err(reason)` rejects it with
    /// an `Error` whose message is `reason` (and whose `tool` is the tool name). Dropping
    /// the sender rejects it too.
    pub reply: tokio::sync::oneshot::Sender<Result<String, String>>,
}

/// The budgets of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one evaluation (`settings.timeoutMs`).
    pub timeout: Duration,
    /// QuickJS heap limit (`settings.memoryLimitBytes`); 0 means unlimited.
    pub memory_limit_bytes: usize,
    /// Tool calls per evaluation (`settings.maxPtcCalls`); `None` is unbounded.
    pub max_calls: Option<u32>,
    /// The result, and separately the captured console, are cut past this many characters.
    pub max_result_chars: usize,
    /// QuickJS stack limit. Keep it well under the stack of the thread that polls the
    /// sandbox (tokio workers get 2 MiB by default).
    pub max_stack_bytes: usize,
}

/// The default stack limit: deep enough for thousands of ordinary frames, and far
/// below a 2 MiB thread stack.
pub(crate) const DEFAULT_MAX_STACK_BYTES: usize = 512 * 1024;

impl Default for Limits {
    fn default() -> Self {
        use archmax_program::program::{
            DEFAULT_MAX_PTC_CALLS, DEFAULT_MAX_RESULT_CHARS, DEFAULT_MEMORY_LIMIT_BYTES, DEFAULT_TIMEOUT_MS,
        };
        Limits {
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            memory_limit_bytes: DEFAULT_MEMORY_LIMIT_BYTES as usize,
            max_calls: Some(DEFAULT_MAX_PTC_CALLS as u32),
            max_result_chars: DEFAULT_MAX_RESULT_CHARS as usize,
            max_stack_bytes: DEFAULT_MAX_STACK_BYTES,
        }
    }
}

impl Limits {
    /// The limits a workflow's `settings` declare.
    pub(crate) fn from_settings(settings: &archmax_program::program::SettingsProgram) -> Self {
        Limits {
            timeout: Duration::from_millis(settings.timeout_ms),
            memory_limit_bytes: usize::try_from(settings.memory_limit_bytes).unwrap_or(usize::MAX),
            max_calls: settings.max_ptc_calls.map(|calls| u32::try_from(calls).unwrap_or(u32::MAX)),
            max_result_chars: usize::try_from(settings.max_result_chars).unwrap_or(usize::MAX),
            max_stack_bytes: DEFAULT_MAX_STACK_BYTES,
        }
    }
}

/// Who runs the script, which decides which control tools may be on the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `archmax_eval` / `archmax_run`: the model's scripts; no control tool is reachable.
    Ptc,
    /// A code state: moves the machine itself, so `archmax_advance`, `archmax_raise` and
    /// the history/variable tools are reachable (when the caller lists them).
    CodeState,
}

/// Never on the bridge, in any mode.
pub(crate) const NEVER_BRIDGED: [&str; 5] = ["archmax_reset", "archmax_wait", "archmax_eval", "archmax_run", "eval"];

/// On the bridge for code states only.
pub(crate) const CODE_STATE_ONLY: [&str; 5] =
    ["archmax_advance", "archmax_raise", "archmax_get_history", "archmax_get_variables", "archmax_set_variables"];

/// Whether `tool` may be on the bridge in `mode`, whatever the caller's lists say.
pub(crate) fn on_bridge(tool: &str, mode: Mode) -> bool {
    if NEVER_BRIDGED.contains(&tool) {
        return false;
    }
    mode == Mode::CodeState || !CODE_STATE_ONLY.contains(&tool)
}

/// The tools a script may reach, by real name. Names the mode excludes
/// ([`on_bridge`]) are dropped whatever the lists say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bridge {
    /// What `Object.keys(tools)`, `in` and `for…in` show.
    pub visible: Vec<String>,
    /// Every name that resolves (`visible` is always included): a hidden one still sends
    /// a [`HostCall`], which the kernel refuses.
    pub callable: Vec<String>,
}

impl Bridge {
    /// A bridge whose every tool is visible.
    pub fn visible<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let visible: Vec<String> = names.into_iter().map(Into::into).collect();
        Bridge { callable: visible.clone(), visible }
    }
}

/// `read_file` → `readFile`, `archmax_workflow_enrich-order` → `archmaxWorkflowEnrichOrder`:
/// each `_` or `-` is dropped and the character after it upper-cased (leading ones are
/// dropped alone).
pub fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut boundary = false;
    for character in name.chars() {
        if character == '_' || character == '-' {
            boundary = !out.is_empty();
            continue;
        }
        if boundary {
            out.extend(character.to_uppercase());
            boundary = false;
        } else {
            out.push(character);
        }
    }
    out
}

/// What an `archmax_eval` / `archmax_run` evaluation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalOutput {
    /// The last expression's value: strings as they are, `undefined` as `undefined`,
    /// errors as `Name: message`, JSON where there is one, else the value's string form;
    /// cut at `max_result_chars` with a marker.
    pub value: String,
    /// `console.*` lines, in order, capped in total at `max_result_chars` with a marker line.
    pub console: Vec<String>,
    /// Whether the value or the console was cut.
    pub truncated: bool,
}

/// What a code state's default export produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleOutput {
    /// The default export's resolved return value as JSON (`Null` for `undefined`).
    pub value: serde_json::Value,
    /// `console.*` lines, capped like [`EvalOutput::console`].
    pub console: Vec<String>,
}

/// Why an evaluation produced no value. Each reads as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    #[error("the script ran past its {} ms budget (settings.timeoutMs)", .0.as_millis())]
    Timeout(Duration),
    #[error("the script ran out of memory (settings.memoryLimitBytes)")]
    OutOfMemory,
    #[error("the script overflowed its stack (recursion too deep)")]
    StackOverflow,
    #[error("uncaught {message}")]
    Thrown { message: String, stack: Option<String> },
    #[error("the sandbox refuses the import of `{0}`: scripts reach the outside only through tools.*")]
    ForbiddenImport(String),
    #[error("the script has no default-export function")]
    NoDefaultExport,
    #[error("the script made more than {0} tool calls (settings.maxPtcCalls)")]
    TooManyCalls(u32),
    #[error("sandbox failure: {0}")]
    Internal(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_joins_at_underscores_and_hyphens() {
        assert_eq!(camel_case("read_file"), "readFile");
        assert_eq!(camel_case("archmax_workflow_enrich-order"), "archmaxWorkflowEnrichOrder");
        assert_eq!(camel_case("ls"), "ls");
        assert_eq!(camel_case("_x__y-"), "xY");
    }

    #[test]
    fn control_tools_are_bridged_for_code_states_only() {
        assert!(!on_bridge("archmax_advance", Mode::Ptc));
        assert!(on_bridge("archmax_advance", Mode::CodeState));
        assert!(!on_bridge("archmax_eval", Mode::CodeState));
        assert!(!on_bridge("eval", Mode::Ptc));
        assert!(on_bridge("archmax_workflow_enrich-order", Mode::Ptc));
    }
}
