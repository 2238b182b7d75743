//! Events: the one record of a run.
//!
//! Every observable step of the interpreter is an [`Event`], stamped with an envelope
//! (sequence number, time, level, session) and handed to an [`EventSink`]. The CLI
//! writes them as JSON lines (`--events FILE`) and renders the human state flow on
//! stderr from the very same events, so the two can never disagree.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

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
    AgentText {
        state: String,
        text: String,
    },
    ToolCalled {
        state: String,
        tool: String,
        call_id: String,
        args: Value,
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
