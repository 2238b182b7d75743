//! Loading an artifact against compiling from source (target: loading at least 20 times
//! faster), for the `specs/` workspace and a generated 1,000-state workflow. Both sides
//! start from bytes in memory: compiling is load + analyze + lower (QuickJS included),
//! loading is verify + decode.

#[path = "common/generated.rs"]
mod generated;

use std::hint::black_box;
use std::path::Path;

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, artifact, load_memory};
use criterion::{Criterion, criterion_group, criterion_main};

const PLATFORM_PROMPT: &str = include_str!("../../stdlib/src/platform-prompt.md");

fn compile(files: &[(String, Vec<u8>)]) -> Program {
    let workspace =
        load_memory(files.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice()))).expect("workspace");
    let analysis = analyze_workspace(workspace);
    lower(&analysis, &[], &BuildInputs { platform_prompt: PLATFORM_PROMPT }).expect("lowers")
}

fn specs_files() -> Vec<(String, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("specs is readable").flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(&root).expect("inside specs").to_string_lossy().replace('\\', "/");
            if relative.starts_with("target") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push((relative, std::fs::read(&path).expect("readable")));
            }
        }
    }
    files.sort();
    files
}

fn bench(criterion: &mut Criterion) {
    let generated_files = vec![
        ("workflows/generated/workflow.yaml".to_string(), generated::workflow(1_000).into_bytes()),
        ("workflows/generated/scripts/check.js".to_string(), generated::SCRIPT.as_bytes().to_vec()),
    ];
    for (name, files) in [("specs", specs_files()), ("generated-1000", generated_files)] {
        let program = compile(&files);
        let bytes = artifact::encode(&program);
        assert_eq!(artifact::decode(&bytes).expect("decodes"), program);
        let mut group = criterion.benchmark_group(format!("artifact/{name}"));
        group.bench_function("compile", |bencher| bencher.iter(|| black_box(compile(black_box(&files)))));
        group.bench_function("load", |bencher| {
            bencher.iter(|| black_box(artifact::decode(black_box(&bytes)).expect("decodes")))
        });
        group.finish();
        eprintln!("{name}: artifact {} bytes", bytes.len());
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
