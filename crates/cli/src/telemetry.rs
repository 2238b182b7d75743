//! OpenTelemetry for the binary's commands: `serve` exports the spans of its requests and
//! turns, and `run`, `decide`, `reply` and `deliver` the spans of their one turn, whenever
//! the standard `OTEL_EXPORTER_OTLP_*` variables name an endpoint (`archmax-telemetry`).
//!
//! The one thing to know: a bad `OTEL_*` value stops the command before it does anything
//! (the error names the variable), and the spans still batched are sent before the
//! process exits, whatever the command's outcome.

use std::process::ExitCode;

use archmax_telemetry::Tracing;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The service name when `OTEL_SERVICE_NAME` is unset.
const SERVICE: &str = "archmax";

/// Tracing as the environment configures it: `Ok(None)` when it is off.
pub fn start() -> Result<Option<Tracing>, String> {
    let settings = archmax_telemetry::settings_from_env(SERVICE).map_err(|error| format!("tracing: {error}"))?;
    match settings {
        Some(settings) => Tracing::start(&settings).map(Some).map_err(|error| format!("tracing: {error}")),
        None => Ok(None),
    }
}

/// Runs one session command with its spans exported when tracing is on; the command
/// writes no log, so the subscriber holds only the OpenTelemetry layer.
pub fn traced(command: impl FnOnce() -> ExitCode) -> ExitCode {
    let tracing = match start() {
        Ok(tracing) => tracing,
        Err(problem) => return crate::output::failure(problem),
    };
    let Some(tracing) = tracing else {
        return command();
    };
    if let Err(error) = tracing_subscriber::registry().with(tracing.layer()).try_init() {
        eprintln!("warning: could not install the trace exporter: {error}");
    }
    let code = command();
    tracing.shutdown();
    code
}
