//! The VM's own cost per model call (target: at most 50 µs), with the tape model and the
//! memory store, on a session whose transcript already holds 20 or 2,000 messages; and
//! the cost of one kernel decision (target: 1 µs).
//!
//! Each measured turn makes 100 model calls (each answering with one cheap tool call,
//! then a final text), so the per-turn costs (opening the session, the turn boundary) are
//! spread thin and what remains is the loop: the volatile prompt, the model request, the
//! recorded answer, the tool call through the kernel, and the committed step.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::kernel::{Call, Origin, Policy, decide};
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::runtime::mount_table;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Head, Message, SessionState, ToolCall, ToolStatus};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

const CALLS: usize = 100;

const SPEC: &str = r#"
instructions: Work.
skills: { allow_always: [] }
mounts: { allow_always: [] }
states:
  work:
    triggers: { manual: }
    instructions: Do the work.
    tools:
      allow:
        - { tool: write_file, paths: ["reports/${{order_id}}/*.md"] }
"#;

fn program() -> Program {
    let analysis = analyze_workspace(load_memory([("workflows/bench/workflow.yaml", SPEC)]).expect("workspace"));
    lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT }).expect("lowers")
}

fn tape() -> Tape {
    let mut text = String::new();
    for _ in 0..CALLS {
        text.push_str("- tool_calls: [{ name: archmax_get_variables, args: { name: order_id } }]\n  usage: { input: 900, output: 20 }\n");
    }
    text.push_str("- text: Done.\n");
    Tape::parse("bench", &text).expect("tape")
}

/// A session already holding `messages` messages, idle in `work`.
fn seeded(store: &MemoryStore, messages: usize, spec_hash: &str) {
    let mut state = SessionState {
        id: archmax_vm::session::id::SessionId::parse("bench", &[]).expect("a bench id"),
        ..SessionState::default()
    };
    state.head = Head {
        workflow: "bench".to_string(),
        position: Some("work".to_string()),
        entry_state: Some("work".to_string()),
        // Pinned to the program it runs under, as a session the runtime made would be.
        spec_hash: spec_hash.to_string(),
        ..Head::default()
    };
    for index in 0..messages / 2 {
        state.messages.push(Message::Assistant {
            text: format!(
                "Step {index}: looked the order up and wrote a short summary of what the customer asked for."
            ),
            tool_calls: vec![ToolCall {
                id: format!("c{index}"),
                name: "read_file".to_string(),
                args: json!({ "file_path": "scratchpad/a.md" }),
            }],
        });
        state.messages.push(Message::Tool {
            call_id: format!("c{index}"),
            name: "read_file".to_string(),
            content: "     1\tThe customer wants to know where order ORD-1 is.".to_string(),
            status: ToolStatus::Ok,
        });
    }
    store.create_writer(&state).expect("create");
}

fn turn_overhead(criterion: &mut Criterion) {
    let program = Arc::new(program());
    let executor = tokio::runtime::Builder::new_current_thread().build().expect("executor");
    let mut group = criterion.benchmark_group("vm/model-call-overhead");
    group.measurement_time(Duration::from_secs(8));
    for messages in [20usize, 2_000] {
        group.bench_with_input(BenchmarkId::from_parameter(messages), &messages, |bencher, &messages| {
            bencher.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let store = MemoryStore::new();
                    seeded(&store, messages, &program.workflows[0].spec_hash);
                    let runtime = Runtime::builder(RuntimeParts {
                        program: program.clone(),
                        store: Arc::new(store),
                        model: Arc::new(tape()),
                        events: EventSink::new(),
                        clock: Arc::new(FixedClock(1_767_605_400_000)),
                        root: std::env::temp_dir(),
                        pricing: PricingTable::default(),
                    })
                    .build();
                    let request = TurnRequest {
                        workflow: "bench".to_string(),
                        session: Some("bench".to_string()),
                        message: Some("Go on.".to_string()),
                        variables: json!({ "order_id": "ORD-1" }).as_object().cloned().unwrap_or_default(),
                        ..TurnRequest::default()
                    };
                    let started = Instant::now();
                    let outcome = executor.block_on(runtime.run_turn(request)).expect("turn");
                    total += started.elapsed() / (CALLS as u32 + 1);
                    black_box(outcome);
                }
                total
            })
        });
    }
    group.finish();
}

fn kernel_decision(criterion: &mut Criterion) {
    let program = program();
    let mounts = mount_table(&program);
    let policy =
        Policy { program: &program, workflow: &program.workflows[0], mounts: &mounts, ancestors: &[], essential: &[] };
    let state = &program.workflows[0].states[0];
    let variables = json!({ "order_id": "ORD-1", "trigger": "manual" });
    let args = json!({ "file_path": "reports/ORD-1/summary.md", "content": "x" });
    criterion.bench_function("vm/kernel-decision", |bencher| {
        bencher.iter(|| {
            black_box(decide(
                &policy,
                &Call {
                    state,
                    tool: "write_file",
                    args: black_box(&args),
                    origin: Origin::Model,
                    reply_only: false,
                    variables: &variables,
                    declared_paths: None,
                },
            ))
        })
    });
}

criterion_group!(benches, turn_overhead, kernel_decision);
criterion_main!(benches);
