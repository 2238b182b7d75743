//! Tracing: the names of the spans and attributes the runtime makes, and the bridge a
//! host installs to give them OpenTelemetry identities.
//!
//! The one thing to know: the VM makes plain `tracing` spans and never links an
//! OpenTelemetry SDK. What needs OpenTelemetry itself (reading a span's trace and span
//! ids, linking a span to a stored one, adopting a W3C `traceparent` as a parent,
//! writing one for an outgoing request) goes through a [`TraceBridge`] of function
//! pointers that the host installs once per process ([`install_bridge`]). Without a
//! bridge (tracing off) every helper here does nothing, and no session records a trace.
//!
//! The span tree of one turn: `archmax.turn` (a session's turn) → `archmax.state` (one
//! step in a state) → `chat` (a model call, with the GenAI semantic-convention
//! attributes) and `execute_tool` (a tool call, host tools and sub-workflows included; a
//! sub-workflow's child session runs its turns under it) → `archmax.store.commit`. A
//! refusal by the kernel is an event on the tool call's span with its rule id. Span names
//! never carry session content; the session id is an attribute.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The span of one turn of one session.
pub const TURN_SPAN: &str = "archmax.turn";
/// The span of one step in one state.
pub const STATE_SPAN: &str = "archmax.state";
/// The span of one model call (`otel.name` is `chat <model>`).
pub const MODEL_SPAN: &str = "chat";
/// The span of one tool call (`otel.name` is `execute_tool <tool>`).
pub const TOOL_SPAN: &str = "execute_tool";
/// The span of one committed step.
pub const COMMIT_SPAN: &str = "archmax.store.commit";
/// The message of the event a refusal leaves on the tool call's span.
pub const REFUSAL_EVENT: &str = "archmax.kernel.refusal";

/// The trace and span ids of a span, as lowercase hex (32 and 16 digits): what a
/// session record keeps of the turn that last wrote it, so a later turn can link to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanIds {
    pub trace_id: String,
    pub span_id: String,
}

impl SpanIds {
    /// Both ids are hex of the right length and not all zero (the W3C rule).
    pub fn is_valid(&self) -> bool {
        let hex = |text: &str, len: usize| {
            text.len() == len
                && text.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
                && text.bytes().any(|byte| byte != b'0')
        };
        hex(&self.trace_id, 32) && hex(&self.span_id, 16)
    }
}

/// What the host's OpenTelemetry layer does for the runtime's spans.
#[derive(Clone, Copy, Debug)]
pub struct TraceBridge {
    /// The ids of a span, if it is recorded.
    pub span_ids: fn(&tracing::Span) -> Option<SpanIds>,
    /// Adds a link from a span to another (a stored one).
    pub link: fn(&tracing::Span, &SpanIds),
    /// Makes the span a child of the context in W3C `traceparent` (and `tracestate`).
    pub adopt_parent: fn(&tracing::Span, &str, Option<&str>),
    /// The W3C headers (`traceparent`, and `tracestate` if any) naming a span.
    pub headers: fn(&tracing::Span) -> Vec<(&'static str, String)>,
    /// Prompt and completion content goes on the model call's span
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: bool,
}

static BRIDGE: OnceLock<TraceBridge> = OnceLock::new();

/// Installs the process's bridge; the first one stays (false when one was installed).
pub fn install_bridge(bridge: TraceBridge) -> bool {
    BRIDGE.set(bridge).is_ok()
}

/// The installed bridge: `None` while tracing is off.
pub fn bridge() -> Option<&'static TraceBridge> {
    BRIDGE.get()
}

/// The ids of the current span, when tracing is on and the span is recorded.
pub fn current_ids() -> Option<SpanIds> {
    bridge().and_then(|bridge| (bridge.span_ids)(&tracing::Span::current()))
}

/// The W3C headers for an outgoing request made in the current span; none when off.
pub fn outgoing_headers() -> Vec<(&'static str, String)> {
    match bridge() {
        Some(bridge) => (bridge.headers)(&tracing::Span::current()),
        None => Vec::new(),
    }
}

/// Makes `span` a child of an incoming request's W3C context, when tracing is on.
pub fn adopt_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if let Some(bridge) = bridge() {
        (bridge.adopt_parent)(span, traceparent, tracestate);
    }
}

/// Links `span` to a stored span context, when tracing is on and the ids are valid.
pub fn link(span: &tracing::Span, to: &SpanIds) {
    if let Some(bridge) = bridge()
        && to.is_valid()
    {
        (bridge.link)(span, to);
    }
}

/// Whether prompt and completion content goes on model call spans.
pub fn capture_content() -> bool {
    bridge().is_some_and(|bridge| bridge.capture_content)
}

#[cfg(test)]
mod tests {
    use super::SpanIds;

    #[test]
    fn span_ids_must_be_lowercase_hex_of_the_w3c_lengths_and_not_zero() {
        let good = SpanIds { trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(), span_id: "00f067aa0ba902b7".into() };
        assert!(good.is_valid());
        let zero = SpanIds { trace_id: "0".repeat(32), span_id: "00f067aa0ba902b7".into() };
        assert!(!zero.is_valid());
        let upper = SpanIds { trace_id: "4BF92F3577B34DA6A3CE929D0E0E4736".into(), ..good.clone() };
        assert!(!upper.is_valid());
        let short = SpanIds { span_id: "00f067".into(), ..good };
        assert!(!short.is_valid());
    }
}
