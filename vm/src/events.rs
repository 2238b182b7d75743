//! Events: the one record of a run.
//!
//! Every observable step of the interpreter is an [`Event`], stamped with an envelope
//! (sequence number, time, level, session) and handed to an [`EventSink`]. The CLI
//! writes them as JSON lines (`--events FILE`) and renders the human state flow on
//! stderr from the very same events, so the two can never disagree.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

/// The JSON Schema (2020-12) every event line validates against, as committed in
/// `schemas/events.schema.json`; `archmax schema events` prints it.
pub const SCHEMA: &str = include_str!("../../schemas/events.schema.json");

/// How loud an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
}

/// One thing that happened. Every `state` is a slug.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case", rename_all_fields = "camelCase")]
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
    Decided {
        state: String,
        to: String,
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
        args: Value,
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
    },
    /// A refused call, for every rule that [`crate::kernel::Rule::is_recorded_as_blocked`].
    ToolBlocked {
        state: String,
        tool: String,
        /// The deciding rule's id ([`crate::kernel::Rule::as_str`]), such as `tool.not-allowed`.
        rule: String,
        reason: String,
        call_id: String,
        args: Value,
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
    /// `anthropic-compat` (a `cache_control` marker on the static block),
    /// `unsupported` (no marker; whatever the provider caches by itself) or `off`.
    pub strategy: String,
}

impl Event {
    pub fn level(&self) -> Level {
        match self {
            Event::Warning { .. } | Event::ToolBlocked { .. } | Event::Raised { .. } => Level::Warn,
            Event::ToolResult { status, .. } | Event::SubWorkflowResult { status, .. } if status == "error" => {
                Level::Warn
            }
            _ => Level::Info,
        }
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
        let shown: String = line.chars().take(DETAIL_CHARS).map(|c| if c.is_control() { '�' } else { c }).collect();
        if line.chars().nth(DETAIL_CHARS).is_some() { format!("{shown}…") } else { shown }
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
    use super::call_detail;
    use serde_json::json;

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
