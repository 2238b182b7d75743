//! The VM's `archmax_vm::trace::TraceBridge`, made of tracing-opentelemetry's span
//! extensions and the W3C trace-context propagator.
//!
//! The one thing to know: a span's OpenTelemetry identity is fixed once its context is
//! built, so a parent is adopted and links are added before anything reads its ids (the
//! runtime's turn span links first, then asks for its ids to store them).

use std::collections::HashMap;

use archmax_vm::trace::{SpanIds, TraceBridge};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header naming the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header carrying vendors' trace state.
pub const TRACESTATE: &str = "tracestate";

/// Installs the bridge for this process (the first install stays).
pub fn install(capture_content: bool) {
    archmax_vm::trace::install_bridge(TraceBridge { span_ids, link, adopt_parent, headers, capture_content });
}

/// The ids of a span, when it has a valid OpenTelemetry context.
pub fn span_ids(span: &tracing::Span) -> Option<SpanIds> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| SpanIds { trace_id: span_context.trace_id().to_string(), span_id: span_context.span_id().to_string() })
}

/// Links `span` to a stored span (of another trace, usually: the turn that parked it).
fn link(span: &tracing::Span, to: &SpanIds) {
    let (Ok(trace_id), Ok(span_id)) = (TraceId::from_hex(&to.trace_id), SpanId::from_hex(&to.span_id)) else {
        return;
    };
    let stored = SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, true, TraceState::default());
    span.add_link(stored);
}

/// Makes `span` a child of the W3C context in the headers' values; an invalid
/// `traceparent` leaves the span a root, as the W3C recommendation says.
fn adopt_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let mut carrier = HashMap::new();
    carrier.insert(TRACEPARENT.to_string(), traceparent.to_string());
    if let Some(state) = tracestate {
        carrier.insert(TRACESTATE.to_string(), state.to_string());
    }
    let parent = TraceContextPropagator::new().extract(&carrier);
    if parent.span().span_context().is_valid() {
        let _adopted = span.set_parent(parent);
    }
}

/// The W3C headers for a request made in `span`.
fn headers(span: &tracing::Span) -> Vec<(&'static str, String)> {
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    let mut out = Vec::new();
    if let Some(parent) = carrier.remove(TRACEPARENT) {
        out.push((TRACEPARENT, parent));
        if let Some(state) = carrier.remove(TRACESTATE).filter(|state| !state.is_empty()) {
            out.push((TRACESTATE, state));
        }
    }
    out
}
