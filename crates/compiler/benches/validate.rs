//! How long `archmax validate` takes in process, for generated workflows of 10, 100,
//! 200 and 1,000 states (target: 200 states under 5 ms, time linear in states). Also the
//! code-state script check's scan for `archmax_advance` targets over scripts of 1,000 to
//! 20,000 advance calls left open (time linear in the script's size).

#[path = "common/generated.rs"]
mod generated;

use std::hint::black_box;

use archmax_compiler::{analyze_workspace, load_memory};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn bench(criterion: &mut Criterion) {
    let script = generated::SCRIPT;
    let mut group = criterion.benchmark_group("validate");
    for states in [10usize, 100, 200, 1_000] {
        let spec = generated::workflow(states);
        let files =
            [("workflows/generated/workflow.yaml", spec.as_str()), ("workflows/generated/scripts/check.js", script)];
        let analysis = analyze_workspace(load_memory(files).expect("workspace"));
        let report = analysis.report(&[]).expect("report");
        assert!(report.is_valid(), "the generated workflow must be valid: {:#?}", report.distinct());
        group.throughput(Throughput::Elements(states as u64));
        group.bench_with_input(BenchmarkId::from_parameter(states), &files, |bencher, files| {
            bencher.iter(|| {
                let analysis = analyze_workspace(load_memory(black_box(*files)).expect("workspace"));
                black_box(analysis.report(&[]).expect("report").errors())
            })
        });
    }
    group.finish();

    let mut group = criterion.benchmark_group("validate/advance-targets-unclosed");
    for calls in [1_000usize, 5_000, 20_000] {
        let script: String = (0..calls)
            .map(|number| format!("  await tools.archmax_advance({{ to: \"s{number}\", reason: \"r\", next: "))
            .collect();
        group.throughput(Throughput::Bytes(script.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(calls), &script, |bencher, script| {
            bencher.iter(|| black_box(archmax_program::script::advance_targets(black_box(script)).len()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
