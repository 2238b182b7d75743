//! What tracing costs per turn: one turn of ten model calls (each with one tool call and
//! its commit) and a final answer, on the tape model and the memory store, with tracing
//! off (no subscriber: every span is disabled) and on (the OpenTelemetry layer, spans
//! batched to an exporter that keeps nothing, so no network is measured).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_telemetry::{TraceSettings, Tracing};
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

const CALLS: usize = 10;

const SPEC: &str = r#"
instructions: Work.
states:
  work:
    triggers: { manual: }
    instructions: Do the work.
"#;

/// An exporter that takes every batch and keeps none of it.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

fn program() -> Program {
    let analysis = analyze_workspace(load_memory([("workflows/bench/workflow.yaml", SPEC)]).expect("workspace"));
    lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT }).expect("lowers")
}

fn tape() -> Tape {
    let mut text = String::new();
    for _ in 0..CALLS {
        text.push_str(
            "- tool_calls: [{ name: archmax_get_variables, args: {} }]\n  usage: { input: 900, output: 20 }\n",
        );
    }
    text.push_str("- text: Done.\n");
    Tape::parse("bench", &text).expect("tape")
}

/// One whole turn on a new session; how long it took.
fn one_turn(program: &Arc<Program>, executor: &tokio::runtime::Runtime) -> Duration {
    let runtime = Runtime::builder(RuntimeParts {
        program: program.clone(),
        store: Arc::new(MemoryStore::new()),
        model: Arc::new(tape()),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build();
    let request = TurnRequest {
        workflow: "bench".to_string(),
        message: Some("Go on.".to_string()),
        variables: json!({ "order_id": "ORD-1" }).as_object().cloned().unwrap_or_default(),
        ..TurnRequest::default()
    };
    let started = Instant::now();
    let outcome = executor.block_on(runtime.run_turn(request)).expect("turn");
    let took = started.elapsed();
    runtime.close_session(&outcome.session_id);
    black_box(outcome);
    took
}

fn tracing_overhead(criterion: &mut Criterion) {
    let program = Arc::new(program());
    let executor = tokio::runtime::Builder::new_current_thread().build().expect("executor");
    let mut group = criterion.benchmark_group("telemetry/turn");
    group.bench_function("tracing-off", |bencher| {
        bencher.iter_custom(|iterations| (0..iterations).map(|_| one_turn(&program, &executor)).sum())
    });
    let settings = TraceSettings::from_lookup(
        |name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".to_string()),
        "bench",
    )
    .expect("settings")
    .expect("tracing on");
    let tracing = Tracing::with_exporter(Discard, &settings);
    let subscriber = tracing_subscriber::registry().with(tracing.layer());
    tracing::subscriber::with_default(subscriber, || {
        group.bench_function("tracing-on", |bencher| {
            bencher.iter_custom(|iterations| (0..iterations).map(|_| one_turn(&program, &executor)).sum())
        });
    });
    group.finish();
    tracing.shutdown();
}

criterion_group!(benches, tracing_overhead);
criterion_main!(benches);
