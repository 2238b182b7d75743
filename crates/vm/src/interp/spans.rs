//! The turn's `tracing` spans: one per turn, per state step, per model call, per tool call
//! and per commit, with the attributes `crate::trace` names.
//!
//! The one thing to know: the fields a span will carry are declared when it is made
//! (`tracing` records only declared fields), so the model call's usage fields start
//! `Empty` and are filled once the answer is in. Content (prompts, completions) is
//! recorded only when the host's bridge opted in.

use archmax_program::program::StateKind;
use tracing::field::Empty;

use super::Turn;
use crate::model::ModelResponse;
use crate::trace;

impl Turn<'_> {
    /// The span of this turn; it links to the span of the turn that last wrote the
    /// session (a parked session resumed later), and the session keeps its own ids.
    pub(super) fn open_turn_span(&mut self) -> tracing::Span {
        let span = tracing::info_span!(
            "archmax.turn",
            archmax.session.id = self.session.id.as_str(),
            archmax.workflow = self.session.head.workflow.as_str(),
            archmax.child = self.child,
        );
        if let Some(previous) = &self.session.head.trace {
            trace::link(&span, previous);
        }
        if let Some(ids) = trace::bridge().and_then(|bridge| (bridge.span_ids)(&span)) {
            self.session.head.trace = Some(ids);
        }
        span
    }
}

/// The span of one step in a state.
pub(super) fn state_span(slug: &str, kind: StateKind) -> tracing::Span {
    let kind = match kind {
        StateKind::Agent => "agent",
        StateKind::Human => "human",
        StateKind::Code => "code",
        StateKind::Grader => "grader",
    };
    tracing::info_span!("archmax.state", archmax.state = slug, archmax.state.kind = kind)
}

/// The span of one model call, named `chat <model>` by the GenAI conventions.
pub(super) fn model_span(provider: &str, model: Option<&str>, state: &str) -> tracing::Span {
    let name = match model {
        Some(model) => format!("chat {model}"),
        None => "chat".to_string(),
    };
    tracing::info_span!(
        "chat",
        otel.name = name,
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
        archmax.state = state,
    )
}

/// Records a model call's answer on its span: usage always, content when opted in.
pub(super) fn record_response(span: &tracing::Span, response: &ModelResponse) {
    let usage = response.usage;
    span.record("gen_ai.usage.input_tokens", signed(usage.input));
    span.record("gen_ai.usage.output_tokens", signed(usage.output));
    span.record("gen_ai.usage.cache_read.input_tokens", signed(usage.cache_read));
    span.record("gen_ai.usage.cache_creation.input_tokens", signed(usage.cache_write));
    if let Some(model) = &response.model {
        span.record("gen_ai.response.model", model.as_str());
    }
    if let Some(id) = &response.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if trace::capture_content() {
        let output = serde_json::json!([{
            "role": "assistant",
            "parts": output_parts(response),
        }]);
        span.record("gen_ai.output.messages", output.to_string());
    }
}

/// A count as the `i64` OpenTelemetry integer attributes hold: the `tracing` bridge writes
/// an unsigned field as text.
pub(crate) fn signed(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The answer as GenAI message parts: its text, then its tool calls.
fn output_parts(response: &ModelResponse) -> Vec<serde_json::Value> {
    let mut parts = Vec::new();
    if !response.text.is_empty() {
        parts.push(serde_json::json!({ "type": "text", "content": response.text }));
    }
    for call in &response.tool_calls {
        parts.push(serde_json::json!({
            "type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args,
        }));
    }
    parts
}

/// Records what a model call was sent, when content capture is on: the volatile block
/// and the conversation as the model sees it.
pub(super) fn record_request<M: serde::Serialize>(span: &tracing::Span, volatile: &str, conversation: &[M]) {
    if !trace::capture_content() {
        return;
    }
    let input = serde_json::json!({ "system": volatile, "messages": conversation });
    span.record("gen_ai.input.messages", input.to_string());
}

/// Records why a model call failed.
pub(super) fn record_failure(span: &tracing::Span, error: &crate::model::ModelError) {
    use crate::model::ModelError;
    let kind = match error {
        ModelError::Configuration(_) => "configuration",
        ModelError::Transport(_) => "transport",
        ModelError::Status { .. } => "status",
        ModelError::Response(_) => "response",
        ModelError::Timeout(_) => "timeout",
        ModelError::ContentFilter(_) => "content_filter",
        ModelError::Refused(_) => "refused",
        ModelError::Overloaded(_) => "overloaded",
        ModelError::Exhausted(_) => "fallbacks_exhausted",
        ModelError::Tape(_) => "tape",
    };
    span.record("error.type", kind);
}

/// The span of one tool call, named `execute_tool <tool>` by the GenAI conventions. The
/// name is the model's, not yet checked: one no tool could have (over 64 characters, or
/// outside `A-Z a-z 0-9 _ -`) is recorded as `(invalid)`, so a model cannot write into
/// span names, or grow them, by inventing tools.
pub(super) fn tool_span(tool: &str, call_id: &str, origin: &str) -> tracing::Span {
    let possible = !tool.is_empty()
        && tool.len() <= 64
        && tool.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    let tool = if possible { tool } else { "(invalid)" };
    let call_id = if call_id.len() <= 128 { call_id } else { "(too long)" };
    tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        archmax.origin = origin,
    )
}

/// A refusal by the kernel: an event on the current span (the tool call's).
pub(super) fn refusal_event(rule: &str, tool: &str, terminal: bool) {
    tracing::info!(archmax.rule = rule, gen_ai.tool.name = tool, archmax.terminal = terminal, "archmax.kernel.refusal");
}

/// The span of one committed step.
pub(super) fn commit_span(seq: u64) -> tracing::Span {
    tracing::info_span!("archmax.store.commit", archmax.seq = signed(seq))
}
