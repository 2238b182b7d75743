//! A code state in the QuickJS sandbox, from precompiled module bytecode: the script reads
//! `variables`, calls `tools.archmaxAdvance(...)` once (answered by a host task on the
//! same thread, as the runtime does) and returns.
//!
//! - `cold` (target: at most 150 µs): `Sandbox::run_module`, a fresh runtime, context and
//!   module per run, the spec's "fresh REPL per run".
//! - `warm` (target: at most 10 µs): `CodeStateRunner::run`, the module loaded once and
//!   its default export called again.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use archmax_compiler::lower::script::module_bytecode;
use archmax_vm::sandbox::{Bridge, CodeStateRunner, HostCall, Limits, Sandbox};

const NAME: &str = "workflows/bench/scripts/route.js";

const SCRIPT: &str = r#"
export default async function ({ state, variables, tools }) {
  const total = variables.items.reduce((sum, item) => sum + item.qty, 0);
  const to = total > 10 ? "review" : "done";
  const answer = JSON.parse(await tools.archmaxAdvance({ to, reason: `${state}: ${total} items` }));
  return { to, total, accepted: answer.accepted };
}
"#;

/// The kernel's stand-in: accepts every advance.
async fn host(mut calls: UnboundedReceiver<HostCall>) {
    while let Some(call) = calls.recv().await {
        let _ = call.reply.send(Ok(r#"{"accepted":true}"#.to_string()));
    }
}

fn sandbox(criterion: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    let bytecode = module_bytecode(NAME, SCRIPT).expect("the script compiles");
    let bridge = Bridge::visible(["archmax_advance", "archmax_raise", "archmax_get_variables", "read_file"]);
    let limits = Limits::default();
    let input = json!({
        "state": "route",
        "trigger": "manual",
        "variables": { "order_id": "A-1", "items": [{ "sku": "x", "qty": 2 }, { "sku": "y", "qty": 3 }] },
    });
    let expected = json!({ "to": "done", "total": 5, "accepted": true });
    let (calls, answers) = unbounded_channel();
    runtime.spawn(host(answers));
    let runner =
        runtime.block_on(CodeStateRunner::new(limits.clone(), NAME, &bytecode, &bridge)).expect("the module loads");
    runtime.block_on(async {
        let cold = Sandbox::run_module(&limits, NAME, &bytecode, input.clone(), &bridge, calls.clone()).await;
        assert_eq!(cold.expect("runs cold").value, expected);
        let warm = runner.run(input.clone(), calls.clone()).await;
        assert_eq!(warm.expect("runs warm").value, expected);
    });

    let mut group = criterion.benchmark_group("code_state");
    group.bench_function("cold", |bencher| {
        bencher.iter_custom(|iterations| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iterations {
                    let output =
                        Sandbox::run_module(&limits, NAME, &bytecode, input.clone(), &bridge, calls.clone()).await;
                    black_box(output.expect("runs"));
                }
                start.elapsed()
            })
        })
    });
    group.bench_function("warm", |bencher| {
        bencher.iter_custom(|iterations| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iterations {
                    black_box(runner.run(input.clone(), calls.clone()).await.expect("runs"));
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = sandbox
}
criterion_main!(benches);
