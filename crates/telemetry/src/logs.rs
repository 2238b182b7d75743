//! JSON log lines that carry the trace and span ids of the span they were written in.
//!
//! The one thing to know: [`WithTraceIds`] wraps another JSON formatter, lets it write the
//! line, and adds `trace_id` and `span_id` as top-level keys when the event's span has an
//! OpenTelemetry identity. With tracing off no span has one, so lines stay as they were.

use std::fmt;

use opentelemetry::trace::TraceContextExt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// A JSON event formatter with the span's `trace_id` and `span_id` added.
pub struct WithTraceIds<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    N: for<'writer> FormatFields<'writer> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let span = event.parent().cloned().or_else(|| context.lookup_current().map(|span| span.id()));
        let ids = span.and_then(|id| {
            let otel =
                tracing::dispatcher::get_default(|dispatch| tracing_opentelemetry::get_otel_context(&id, dispatch))?;
            let span_context = otel.span().span_context().clone();
            span_context.is_valid().then(|| (span_context.trace_id(), span_context.span_id()))
        });
        let Some((trace_id, span_id)) = ids else {
            return self.0.format_event(context, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(context, Writer::new(&mut line), event)?;
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line.trim_end()) {
            Ok(mut object) => {
                object.insert("trace_id".to_string(), trace_id.to_string().into());
                object.insert("span_id".to_string(), span_id.to_string().into());
                writeln!(writer, "{}", serde_json::Value::Object(object))
            }
            // Not a JSON object after all: written as the inner formatter made it.
            Err(_) => writer.write_str(&line),
        }
    }
}
