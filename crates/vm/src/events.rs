//! Events: the one record of a run.
//!
//! Every observable step of the interpreter is an [`Event`], stamped with an envelope
//! (sequence number, time, level, session) and handed to an [`EventSink`]. The CLI
//! writes them as JSON lines (`--events FILE`) and renders the human state flow on
//! stderr from the very same events, so the two can never disagree.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use archmax_program::text::{cut_at_bytes, split_at_chars};

/// The JSON Schema (2020-12) every event line validates against, as committed in
/// `schemas/events.schema.json`; `archmax schema events` prints it.
pub const SCHEMA: &str = include_str!("../../../schemas/events.schema.json");

/// How loud an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Level {
    Info,
    Warn,
}

/// One thing that happened. Every `state` is a slug.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum Event {
    // ----- assembly: what the turn's program offers, before its first step ---------
    /// The model may run code in some state of the workflow (`archmax_eval` or
    /// `archmax_run` is on a state's surface).
    InterpreterEnabled {},
    /// The skill bundles the workflow's states enable, sorted.
    SkillsLoaded {
        names: Vec<String>,
    },
    /// The workflow's states and edges, in the shape `archmax graph --format json` gives
    /// one workflow.
    GraphTopology {
        topology: Value,
    },
    /// How the prompt is shaped for the provider: caching per model the workflow can run,
    /// and the built-in tools no state is handed (their guidance is not in the prompt).
    PromptShaping {
        cache: CacheShaping,
        withheld: Vec<String>,
    },
    /// A turn opened at a start state.
    WorkflowReset {
        entry: String,
    },
    StateEnter {
        state: String,
    },
    StateLeave {
        state: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        next: Option<String>,
    },
    StateErrorRouted {
        state: String,
        to: String,
        reason: String,
    },
    /// A move: `from` is `__start__` for a turn's opening.
    Advance {
        from: String,
        to: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    Parked {
        state: String,
        awaiting: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        resume_at: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A person decided a parked session: who, as the host named them, and what they
    /// wrote, as the target state reads it in its `[decision]` note.
    Decided {
        state: String,
        to: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        decided_by: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        comment: Option<String>,
    },
    /// A session pinned to another program of its workflow moved to this one (`--upgrade`).
    Upgraded {
        state: String,
        from: String,
        to: String,
    },
    ParkMessage {
        state: String,
        direction: String,
        text: String,
    },
    Delivered {
        state: String,
        trigger: String,
        to: String,
    },
    Raised {
        state: String,
        code: String,
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A piece of the agent's answer as it arrives (the whole text at once from an adapter
    /// that does not stream); `agent-text` follows with the whole message.
    AgentTextDelta {
        state: String,
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    AgentText {
        state: String,
        text: String,
        /// The provider's id for the answer, when it gave one.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// `true` when the text is not the whole message: the answer was cut off at the
        /// output limit, or its stream broke and the call failed (the session keeps none of
        /// it then).
        #[serde(skip_serializing_if = "Option::is_none")]
        partial: Option<bool>,
    },
    ToolCalled {
        state: String,
        tool: String,
        call_id: String,
        /// The arguments, cut to [`MAX_EVENT_ARGS_BYTES`] (see [`bounded_args`]).
        args: Value,
        /// Present only when `args` was cut: the size in bytes of the whole arguments,
        /// which the session record keeps (the model's call in its transcript).
        #[serde(skip_serializing_if = "Option::is_none")]
        args_cut: Option<u64>,
        /// What the call is about, in one short line (its path, or its first plain
        /// argument as `name=value`); absent when nothing says it briefly.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        origin: String,
        /// The host server that serves the tool (an MCP server's name); absent for the
        /// runtime's own tools and declared results.
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    ToolResult {
        state: String,
        tool: String,
        call_id: String,
        status: String,
        duration_ms: u64,
        output: String,
        truncated: bool,
        origin: String,
        /// The host server that answered (see `ToolCalled`).
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<String>,
    },
    /// A result too long for the conversation was saved whole under
    /// `large_tool_results/`; the model read a preview and the path.
    ToolResultOffloaded {
        state: String,
        tool: String,
        call_id: String,
        /// Where it is, in the session's files.
        path: String,
        /// The saved file's size.
        bytes: u64,
        /// The result's tokens, as counted for the state's model.
        tokens: u64,
    },
    /// The older part of the conversation was summarized before a model call whose prompt
    /// would have passed `[context] compact_at` of the window: the summary and the runtime
    /// notes stand for it from now on, and its full text is in `path`.
    ContextCompacted {
        state: String,
        /// Which compaction of the session this is (1 for the first).
        count: u64,
        /// How many messages the summary stands for.
        messages: u64,
        /// The summarized messages as JSON lines in the session's files (a readable `.md`
        /// with the same stem beside it).
        path: String,
        /// The prompt's tokens before and after, as counted for the state's model.
        tokens_before: u64,
        tokens_after: u64,
        /// No summary could be had: the messages were cut from the view without one (a
        /// `[trimmed]` note stands in its place).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        trimmed: bool,
    },
    /// A refused call, for every rule that [`crate::kernel::Rule::is_recorded_as_blocked`].
    ToolBlocked {
        state: String,
        tool: String,
        /// The deciding rule's id ([`crate::kernel::Rule::as_str`]), such as `tool.not-allowed`.
        rule: String,
        reason: String,
        call_id: String,
        /// The arguments, cut to [`MAX_EVENT_ARGS_BYTES`] (see [`bounded_args`]).
        args: Value,
        /// Present only when `args` was cut: the size in bytes of the whole arguments.
        #[serde(skip_serializing_if = "Option::is_none")]
        args_cut: Option<u64>,
        origin: String,
    },
    VariablesSet {
        #[serde(skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        names: Vec<String>,
        locked: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    TitleSet {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    ModelUsage {
        state: String,
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
        cache_creation_tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// Present when a route's fallback answered: the model id the call was meant for.
        #[serde(skip_serializing_if = "Option::is_none")]
        fallback_for: Option<String>,
        /// Whom the call was for: `agent`, `grader` or `summarizer` (a case judge's calls
        /// are not session events). Always set by the runtime.
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    },
    /// A model call would have passed one of the host's limits (`[limits]` of
    /// `archmax.toml`): it was not made, and the session waits for a person to raise its
    /// budget (it parks `awaiting_input` next).
    BudgetStopped {
        state: String,
        /// `max_tokens_per_turn`, `max_model_calls_per_turn` or `max_cost_per_session`.
        limit: String,
        /// The limit's value: tokens, calls, or US dollars with the session's raises.
        ceiling: f64,
        /// What was spent against it: this turn's tokens or calls, or the session's cost.
        spent: f64,
        /// What the call would have added by the runtime's estimate, when estimated.
        #[serde(skip_serializing_if = "Option::is_none")]
        next: Option<f64>,
        reason: String,
    },
    /// A person raised a session's budget, lifting the stop it waited at, if any.
    BudgetRaised {
        state: String,
        /// Who raised it, as the host named them.
        #[serde(skip_serializing_if = "Option::is_none")]
        raised_by: Option<String>,
        /// The session's raises so far, this one included.
        raises: u32,
        /// The session's cost limit now, when one applies (US dollars).
        #[serde(skip_serializing_if = "Option::is_none")]
        max_cost: Option<f64>,
        /// Whether it lifted a stop (the session then goes on).
        lifted: bool,
    },
    /// A model call failed for a passing reason (rate limited, overloaded, a server error,
    /// unreachable) after its retries, and the route's next model is called instead.
    ModelFallback {
        state: String,
        /// The model id that failed, and the provider serving it.
        model: String,
        provider: String,
        reason: String,
        /// The model id tried next.
        fallback: String,
    },
    CodeStart {
        state: String,
        script: String,
    },
    CodeOutput {
        state: String,
        line: String,
    },
    CodeResult {
        state: String,
        status: String,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    GraderStart {
        state: String,
    },
    GraderResult {
        state: String,
        status: String,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    SubWorkflowStart {
        state: String,
        workflow: String,
        dispatch_id: String,
        depth: u32,
        /// The workflows from the root to the called one, both included.
        chain: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    SubWorkflowResult {
        state: String,
        workflow: String,
        dispatch_id: String,
        status: String,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        returns: Vec<String>,
    },
    /// A turn ended: how, and where. `terminal` says whether the state it ended in has no
    /// way out (a finished workflow) or the session can continue there.
    TurnEnd {
        status: String,
        state: String,
        terminal: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Warning {
        scope: String,
        message: String,
    },
}

/// Prompt caching as a turn's program is shaped for its adapter.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheShaping {
    /// Caching is asked for (the workflow's `settings.prompt_cache`, else the host's
    /// `ARCHMAX_PROMPT_CACHE`, else on).
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// One entry per model the workflow can run: the workflow's (or the adapter's
    /// default), then each state's own, in state order, each once.
    pub models: Vec<ModelCache>,
}

/// How one model's calls are marked for caching.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCache {
    /// The model id the workflow declares; absent where it leaves the model to the host
    /// (the adapter's default decides the strategy then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `anthropic` (the native adapter's breakpoints on the last tool and the static
    /// block), `anthropic-compat` (a `cache_control` marker on the static block over an
    /// OpenAI-compatible endpoint), `unsupported` (no marker; whatever the provider
    /// caches by itself) or `off`.
    pub strategy: String,
}

impl Event {
    pub fn level(&self) -> Level {
        match self {
            Event::Warning { .. } | Event::ToolBlocked { .. } | Event::Raised { .. } | Event::BudgetStopped { .. } => {
                Level::Warn
            }
            Event::ToolResult { status, .. } | Event::SubWorkflowResult { status, .. } if status == "error" => {
                Level::Warn
            }
            _ => Level::Info,
        }
    }
}

/// The most bytes of a call's arguments (as compact JSON) one event carries. Larger
/// arguments are cut ([`bounded_args`]); the session record keeps them whole.
pub(crate) const MAX_EVENT_ARGS_BYTES: usize = 4096;

/// How far each pass of [`bounded_args`] cuts: the bytes kept of each string, and the
/// items kept of each array or object. Each pass cuts harder than the last.
const CUT_PASSES: [(usize, usize); 4] = [(1024, 64), (256, 16), (64, 4), (16, 1)];

/// Below this depth a value is shown only as a mark.
const CUT_DEPTH: usize = 8;

/// What an event shows of a call's arguments: the arguments themselves when their JSON
/// is at most [`MAX_EVENT_ARGS_BYTES`] bytes, and `None` beside them; otherwise the same
/// shape cut down (long strings end in `…`, long arrays and objects keep their first
/// items and say how many more there were) and the whole size in bytes. Whatever the
/// arguments, the value returned is within the bound.
pub(crate) fn bounded_args(args: &Value) -> (Value, Option<u64>) {
    let size = json_size(args);
    if size <= MAX_EVENT_ARGS_BYTES {
        return (args.clone(), None);
    }
    let whole = u64::try_from(size).unwrap_or(u64::MAX);
    for (text, items) in CUT_PASSES {
        let cut = cut_value(args, text, items, 0);
        if json_size(&cut) <= MAX_EVENT_ARGS_BYTES {
            return (cut, Some(whole));
        }
    }
    (Value::String(format!("… ({whole} bytes of arguments)")), Some(whole))
}

fn json_size(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len())
}

/// `value` with each string cut to `text` bytes and each array or object to `items`.
fn cut_value(value: &Value, text: usize, items: usize, depth: usize) -> Value {
    if depth >= CUT_DEPTH && matches!(value, Value::Array(_) | Value::Object(_)) {
        return Value::String("…".to_string());
    }
    match value {
        Value::String(string) => Value::String(cut_text(string, text)),
        Value::Array(values) => {
            let mut kept: Vec<Value> =
                values.iter().take(items).map(|inner| cut_value(inner, text, items, depth + 1)).collect();
            if values.len() > items {
                kept.push(Value::String(format!("… ({} more)", values.len() - items)));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            let mut kept: serde_json::Map<String, Value> = map
                .iter()
                .take(items)
                .map(|(key, inner)| (cut_text(key, text), cut_value(inner, text, items, depth + 1)))
                .collect();
            if map.len() > items {
                kept.insert("…".to_string(), Value::String(format!("{} more", map.len() - items)));
            }
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

/// `text` itself when it has at most `keep` bytes, else its first `keep` bytes (on a
/// character boundary), `…` and its whole size.
fn cut_text(text: &str, keep: usize) -> String {
    match cut_at_bytes(text, keep) {
        Some(kept) => format!("{kept}… ({} bytes)", text.len()),
        None => text.to_string(),
    }
}

/// The most characters [`call_detail`] keeps of a value.
const DETAIL_CHARS: usize = 60;

/// What a tool call is about, in one short line: the first of `paths` (the tool's path
/// arguments, in declared order) that the call gives as text, else its first plain
/// argument as `name=value`; the value's first non-blank line, cut to 60 characters,
/// with control characters (a terminal's escape sequences) shown as `�`.
pub fn call_detail<'a>(args: &Value, paths: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let line = |text: &str| {
        let line = text.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim();
        let (kept, rest) = split_at_chars(line, DETAIL_CHARS);
        let shown: String = kept.chars().map(|c| if c.is_control() { '�' } else { c }).collect();
        if rest.is_empty() { shown } else { format!("{shown}…") }
    };
    let map = args.as_object()?;
    if let Some(path) = paths.into_iter().find_map(|name| map.get(name).and_then(Value::as_str)) {
        return Some(line(path));
    }
    map.iter().find_map(|(key, value)| {
        let text = match value {
            Value::String(text) => line(text),
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            _ => return None,
        };
        Some(format!("{key}={text}"))
    })
}

/// An event with its envelope, as written to `--events`. Field names are camelCase, as
/// the spec names them (`sessionId`, `callId`, `durationMs`, `inputTokens`, …).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// The event's number in this process's sink, from 1, over every session: not a
    /// session's own count (the server numbers those for its streams).
    pub seq: u64,
    pub ts: u64,
    pub level: Level,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_workflow_dispatch_id: Option<String>,
    #[serde(flatten)]
    pub event: Event,
}

/// Receives every event, in order.
pub trait Listener: Send {
    fn on_event(&mut self, envelope: &Envelope);
}

/// Fans events out to listeners, numbering them.
#[derive(Clone, Default)]
pub struct EventSink {
    inner: Arc<Mutex<SinkState>>,
}

#[derive(Default)]
struct SinkState {
    seq: u64,
    listeners: Vec<Box<dyn Listener>>,
    recorded: Option<Vec<Envelope>>,
}

impl EventSink {
    pub fn new() -> EventSink {
        EventSink::default()
    }

    pub fn listen(&self, listener: Box<dyn Listener>) {
        if let Ok(mut state) = self.inner.lock() {
            state.listeners.push(listener);
        }
    }

    /// Keeps every envelope in memory too (tests, case runs).
    pub fn record(&self) {
        if let Ok(mut state) = self.inner.lock() {
            state.recorded = Some(Vec::new());
        }
    }

    pub fn recorded(&self) -> Vec<Envelope> {
        self.inner.lock().ok().and_then(|state| state.recorded.clone()).unwrap_or_default()
    }

    pub fn emit(&self, ts: u64, session_id: Option<&str>, dispatch: Option<&str>, event: Event) {
        let Ok(mut state) = self.inner.lock() else {
            return;
        };
        state.seq += 1;
        let envelope = Envelope {
            seq: state.seq,
            ts,
            level: event.level(),
            session_id: session_id.map(str::to_string),
            sub_workflow_dispatch_id: dispatch.map(str::to_string),
            event,
        };
        for listener in state.listeners.iter_mut() {
            listener.on_event(&envelope);
        }
        if let Some(recorded) = state.recorded.as_mut() {
            recorded.push(envelope);
        }
    }
}

/// Writes JSON lines to any writer.
pub struct JsonLines<W: std::io::Write + Send> {
    pub writer: W,
}

impl<W: std::io::Write + Send> Listener for JsonLines<W> {
    fn on_event(&mut self, envelope: &Envelope) {
        if let Ok(line) = serde_json::to_string(envelope) {
            let _ = writeln!(self.writer, "{line}");
            let _ = self.writer.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_EVENT_ARGS_BYTES, bounded_args, call_detail, json_size};
    use serde_json::{Value, json};

    #[test]
    fn arguments_within_the_bound_are_shown_as_they_are() {
        let args = json!({"file_path": "scratchpad/a.md", "content": "x".repeat(3000)});
        assert_eq!(bounded_args(&args), (args.clone(), None));
    }

    #[test]
    fn large_arguments_are_cut_within_the_bound_keeping_their_shape() {
        let content = "é".repeat(40_000);
        let args = json!({"file_path": "scratchpad/a.md", "content": content});
        let (shown, cut) = bounded_args(&args);
        assert_eq!(cut, Some(json_size(&args) as u64));
        assert!(json_size(&shown) <= MAX_EVENT_ARGS_BYTES);
        assert_eq!(shown["file_path"], "scratchpad/a.md");
        let text = shown["content"].as_str().unwrap_or_default();
        assert!(text.ends_with("… (80000 bytes)"), "{text}");
        // Many items, deep nesting, long keys: every shape ends within the bound.
        let wide: Value = (0..5000).map(|index| json!({"k": index})).collect();
        let long_keys: serde_json::Map<String, Value> =
            (0..500).map(|index| (format!("{index}-{}", "k".repeat(600)), json!(index))).collect();
        let mut deep = json!("bottom");
        for _ in 0..100 {
            deep = json!([deep, "x".repeat(100)]);
        }
        for hostile in [wide, Value::Object(long_keys), deep] {
            let (shown, cut) = bounded_args(&hostile);
            assert!(cut.is_some());
            assert!(json_size(&shown) <= MAX_EVENT_ARGS_BYTES, "{}", json_size(&shown));
        }
    }

    #[test]
    fn a_call_is_told_by_its_path_else_its_first_plain_argument() {
        let paths = ["source", "destination"];
        assert_eq!(call_detail(&json!({"destination": "b.md", "source": "a.md"}), paths), Some("a.md".to_string()));
        assert_eq!(call_detail(&json!({"pattern": "**/*.md"}), ["path"]), Some("pattern=**/*.md".to_string()));
        assert_eq!(call_detail(&json!({"order": {"id": 1}, "limit": 5}), []), Some("limit=5".to_string()));
        assert_eq!(call_detail(&json!({"order": {"id": 1}}), []), None);
        assert_eq!(call_detail(&json!("not an object"), []), None);
        // One line, cut on a character boundary, whatever the model sent.
        let long = format!("\n\n  {}é{}\nsecond line", "x".repeat(59), "y".repeat(10));
        assert_eq!(call_detail(&json!({"note": long}), []), Some(format!("note={}é…", "x".repeat(59))));
        assert_eq!(call_detail(&json!({"path": "a\u{1b}]52;c;x\u{7}b"}), ["path"]), Some("a�]52;c;x�b".to_string()));
    }
}
