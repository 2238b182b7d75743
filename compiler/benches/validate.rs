//! How long `archmax validate` takes in process, for generated workflows of 10, 100,
//! 200 and 1,000 states (target: 200 states under 5 ms, time linear in states).
//!
//! Each generated state is realistic: instructions, two described transitions, a
//! guarded tool entry, `requires`; every tenth state is a human review, every seventh a
//! code state with a script, so every check (graph, governance, dominator analysis of
//! guards, scripts) does real work.

use std::hint::black_box;

use archmax_compiler::{analyze_workspace, load_memory};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn workflow(states: usize) -> String {
    let mut text = String::from(
        "title: Generated\ninstructions: |-\n  Work carefully.\nsettings: { model: gpt-5-mini }\n\
         skills: { allow_always: [] }\nmounts: { allow_always: [] }\nstates:\n",
    );
    for index in 0..states {
        let next = (index + 1).min(states - 1);
        let skip = (index + 2).min(states - 1);
        text.push_str(&format!("  s{index}:\n"));
        if index == 0 {
            text.push_str(
                "    triggers:\n      manual:\n        requires:\n          - { name: order_id, type: string, pattern: \"^ORD-[0-9]+$\" }\n",
            );
        }
        if index % 10 == 5 && index + 1 < states {
            text.push_str(&format!(
                "    type: human\n    instructions: Approve step {index}.\n    transitions:\n\
                 \x20     - {{ to: s{next}, type: approve, description: The step is right. }}\n\
                 \x20     - {{ to: s{}, type: refine, description: The step needs work. }}\n",
                index - 1
            ));
            continue;
        }
        if index % 7 == 3 && index + 1 < states {
            text.push_str(&format!(
                "    type: code\n    script: scripts/check.js\n    on_error: s{}\n    transitions:\n\
                 \x20     - {{ to: s{next}, description: The check passes. }}\n",
                states - 1
            ));
            continue;
        }
        text.push_str(&format!("    instructions: Do step {index} for the order.\n"));
        text.push_str(&format!(
            "    tools:\n      allow:\n        - {{ tool: write_file, paths: [\"reports/${{{{order_id}}}}/s{index}/*.md\"] }}\n"
        ));
        text.push_str(&format!("    requires: [v{index}]\n"));
        if index + 1 < states {
            text.push_str(&format!(
                "    transitions:\n      - {{ to: s{next}, description: Step {index} is done. }}\n\
                 \x20     - {{ to: s{skip}, description: Step {index} is not needed. }}\n"
            ));
        }
    }
    text
}

fn bench(criterion: &mut Criterion) {
    let script = "/** Check */\nexport default async function ({ tools }) {\n  await tools.archmax_advance({ to: \"x\", reason: \"ok\" });\n}\n";
    let mut group = criterion.benchmark_group("validate");
    for states in [10usize, 100, 200, 1_000] {
        let spec = workflow(states);
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
