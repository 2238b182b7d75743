//! # archmax-telemetry
//!
//! OpenTelemetry traces for the `archmax` binary: the standard `OTEL_*` variables read
//! into settings ([`config`]), an OTLP/HTTP (protobuf) exporter behind a batch processor,
//! the `tracing` layer that turns the runtime's and the server's spans into OpenTelemetry
//! spans, the bridge the VM calls for trace ids, links and W3C headers ([`bridge`]), and
//! log lines that carry the ids of their span ([`logs`]).
//!
//! The one thing to know: nothing here is on unless an OTLP endpoint is set. The VM and
//! the server never link this crate's OpenTelemetry dependencies; they make `tracing`
//! spans and reach OpenTelemetry only through `archmax_vm::trace`'s bridge, which
//! [`Tracing::start`] installs. A host starts tracing once per process, adds
//! [`Tracing::layer`] to its subscriber, and calls [`Tracing::shutdown`] before it exits,
//! so the spans still in the batch are sent.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tracing = match archmax_telemetry::settings_from_env("archmax")? {
//!     Some(settings) => Some(archmax_telemetry::Tracing::start(&settings)?),
//!     None => None,
//! };
//! tracing_subscriber::registry().with(tracing.as_ref().map(|tracing| tracing.layer())).try_init()?;
//! // … run turns …
//! if let Some(tracing) = tracing {
//!     tracing.shutdown();
//! }
//! # Ok(())
//! # }
//! ```

pub mod bridge;
pub mod config;
pub mod logs;

use std::collections::HashMap;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::registry::LookupSpan;

pub use config::{SettingError, TraceSettings};

/// The instrumentation scope the spans are made under.
const SCOPE: &str = "archmax";

/// Reads the process environment into settings; `Ok(None)` when tracing is off.
pub fn settings_from_env(default_service: &str) -> Result<Option<TraceSettings>, SettingError> {
    TraceSettings::from_lookup(|name| std::env::var(name).ok(), default_service)
}

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
#[error("the OTLP trace exporter for {endpoint} could not be built: {reason}")]
pub struct StartError {
    pub endpoint: String,
    pub reason: String,
}

/// Tracing, started: the provider whose batch the spans go through.
pub struct Tracing {
    provider: SdkTracerProvider,
}

impl Tracing {
    /// Builds the exporter and the provider, and installs the VM's bridge (content capture
    /// as the settings say). Exports run on the batch processor's own thread.
    pub fn start(settings: &TraceSettings) -> Result<Tracing, StartError> {
        // The exporter percent-decodes what it is given, and the settings hold decoded
        // values: encode them again, so a value is decoded once (`%25` stays `%`).
        let headers: HashMap<String, String> = settings
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.clone(),
                    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string(),
                )
            })
            .collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .with_headers(headers)
            .build()
            .map_err(|error| StartError { endpoint: settings.endpoint.clone(), reason: error.to_string() })?;
        Ok(Tracing::with_exporter(exporter, settings))
    }

    /// [`Tracing::start`] with another exporter behind the batch processor (a bench's,
    /// which sends nothing); the settings' endpoint and headers are not used.
    pub fn with_exporter(
        exporter: impl opentelemetry_sdk::trace::SpanExporter + 'static,
        settings: &TraceSettings,
    ) -> Tracing {
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(sampler(settings.sampling))
            .with_resource(Resource::builder().with_service_name(settings.service_name.clone()).build())
            .build();
        bridge::install(settings.capture_content);
        Tracing { provider }
    }

    /// The layer that makes OpenTelemetry spans of archmax's own `tracing` spans and
    /// events at INFO and above (the runtime's and the server's spans are all INFO; debug
    /// detail stays in logs). Libraries' spans are left out whatever `RUST_LOG` says: what
    /// they record (an MCP library's notification contents, say) was never reviewed for
    /// what it may carry, and the content opt-in governs only archmax's spans.
    pub fn layer<S>(&self) -> impl Layer<S> + 'static
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer(SCOPE);
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(exported())
    }

    /// Sends every span still in the batch and stops the exporter. A failure is written
    /// to stderr: spans lost at exit must not change the command's outcome.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.force_flush() {
            eprintln!("warning: the last spans could not be exported: {error}");
        }
        if let Err(error) = self.provider.shutdown() {
            eprintln!("warning: the trace exporter did not stop cleanly: {error}");
        }
    }
}

fn sampler(sampling: config::Sampling) -> Sampler {
    use config::{ParentlessRule, Sampling};
    match sampling {
        Sampling::AlwaysOn => Sampler::AlwaysOn,
        Sampling::AlwaysOff => Sampler::AlwaysOff,
        Sampling::Ratio(ratio) => Sampler::TraceIdRatioBased(ratio),
        Sampling::ParentBased(root) => Sampler::ParentBased(Box::new(match root {
            ParentlessRule::AlwaysOn => Sampler::AlwaysOn,
            ParentlessRule::AlwaysOff => Sampler::AlwaysOff,
            ParentlessRule::Ratio(ratio) => Sampler::TraceIdRatioBased(ratio),
        })),
    }
}

/// What the trace layer sees: spans and events whose target is one of archmax's crates
/// (`archmax_vm`, `archmax_serve`, …, and the `archmax` binary), at INFO and above.
fn exported() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target("archmax", LevelFilter::INFO)
}
