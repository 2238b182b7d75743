//! No panic on any input.
//!
//! Replays the fuzzing regressions in `crates/compiler/fuzz/regressions/`, hand-made hostile
//! documents, and deterministic mutations (truncations, byte flips, insertions) of every
//! workflow and case file in `specs/` and `golden/`, through the whole front end and
//! every renderer. Each run must finish, and every reported span must lie inside its file.

use std::fs;
use std::path::{Path, PathBuf};

use archmax_compiler::diagnostic::render;
use archmax_compiler::{analyze_workspace, load_memory};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the front end over one workflow file and an optional case file.
fn exercise(spec: &[u8], case: Option<&[u8]>) {
    let mut files: Vec<(&str, &[u8])> = vec![("workflows/subject/workflow.yaml", spec)];
    if let Some(case) = case {
        files.push(("workflows/subject/tests/subject.test.yaml", case));
    }
    let workspace = load_memory(files).expect("a workflows/ directory is present");
    let analysis = analyze_workspace(workspace);
    let report = analysis.report(&[]).expect("no selection");
    for diagnostic in report.distinct() {
        if let Some(span) = diagnostic.span {
            let file = analysis.sources().file(span.file);
            assert!(
                span.start <= span.end && span.end as usize <= file.text.len(),
                "span {span:?} outside {} ({} bytes) for {:?}",
                file.name,
                file.text.len(),
                diagnostic.code
            );
        }
    }
    let _ = render::human(analysis.sources(), &report, false);
    let _ = render::json(analysis.sources(), &report);
    let _ = render::sarif(analysis.sources(), &report, ".");
    let _ = render::github(analysis.sources(), &report, ".");
}

/// xorshift64*: a fixed-seed generator, so every run mutates the same way.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|entry| entry.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.is_file() && path.extension().is_some_and(|extension| extension == "yaml" || extension == "yml")
        {
            out.push(path);
        }
    }
}

#[test]
fn fuzzing_regressions_replay_without_panicking() {
    let dir = repository().join("crates/compiler/fuzz/regressions");
    let mut count = 0;
    if let Ok(entries) = fs::read_dir(&dir) {
        let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths.into_iter().filter(|path| path.is_file()) {
            let bytes = fs::read(&path).expect("regression input is readable");
            let mut parts = bytes.splitn(2, |byte| *byte == 0);
            let spec = parts.next().unwrap_or_default();
            exercise(spec, parts.next());
            count += 1;
        }
    }
    assert!(count > 0, "crates/compiler/fuzz/regressions/ holds the replayed inputs");
}

#[test]
fn hostile_documents_are_diagnosed_not_fatal() {
    let deep_flow = format!("states: {}{}", "[".repeat(20_000), "]".repeat(20_000));
    let deep_block: String = (0..500).map(|depth| format!("{}k{depth}:\n", " ".repeat(depth))).collect();
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = level - 1;
        bomb.push_str(&format!("a{level}: &a{level} [{}]\n", vec![format!("*a{previous}"); 10].join(", ")));
    }
    let wide_keys: String = (0..20_000).map(|index| format!("k{index}: {index}\n")).collect();
    let long_line = format!("title: {}\n", "x".repeat(1_000_000));
    let inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\0\0\0".to_vec(),
        vec![0xff, 0xfe, 0xfd, b'\n', 0x80],
        b"\xef\xbb\xbf".to_vec(),
        b"---\n---\n---\n".to_vec(),
        b"%YAML 1.2\n---\na: b\n".to_vec(),
        b"!!binary aGVsbG8=\n".to_vec(),
        b"? [a, b]\n: c\n".to_vec(),
        b"states: &s\n  a: *s\n".to_vec(),
        b"states:\n  a:\n    transitions: [{ to: a, to: b }]\n".to_vec(),
        b"states: { \"\": null, \"-\": 3, \"a b\": [] }\n".to_vec(),
        b"states:\n  a:\n    triggers: { manual: { requires: [{ name: x, type: string, pattern: \"(?<=a)b\", minimum: 1 }] } }\n".to_vec(),
        b"states:\n  a:\n    tools: { allow: [{ tool: write_file, paths: [\"${{\", \"${{}}\", \"$${{x}}\", \"../../x\"] }] }\n".to_vec(),
        deep_flow.into_bytes(),
        deep_block.into_bytes(),
        bomb.into_bytes(),
        wide_keys.into_bytes(),
        long_line.into_bytes(),
    ];
    for input in &inputs {
        exercise(input, Some(input));
    }
}

#[test]
fn mutated_workspace_files_never_panic() {
    let mut files = Vec::new();
    yaml_files(&repository().join("specs"), &mut files);
    yaml_files(&repository().join("golden/diagnostics"), &mut files);
    assert!(files.len() > 50, "the corpus finds the example and golden files");
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let noise: &[&[u8]] =
        &[b"{", b"}", b"[", b"]", b":", b"- ", b"\n", b"&a ", b"*a", b"\"", b"'", b"${{", b"}}", b"\t", b"#"];
    for path in files {
        let original = fs::read(&path).expect("corpus file is readable");
        let is_case = path.to_string_lossy().contains(".test.y");
        let run = |bytes: &[u8]| {
            if is_case {
                exercise(b"states: { a: { triggers: { manual: } } }\n", Some(bytes))
            } else {
                exercise(bytes, None)
            }
        };
        let step = (original.len() / 24).max(1);
        for cut in (0..original.len()).step_by(step) {
            run(&original[..cut]);
        }
        for _ in 0..12 {
            let mut mutated = original.clone();
            for _ in 0..1 + random.below(4) {
                if mutated.is_empty() {
                    break;
                }
                let at = random.below(mutated.len());
                match random.below(3) {
                    0 => mutated[at] ^= 1 << random.below(8),
                    1 => {
                        let piece = noise[random.below(noise.len())];
                        mutated.splice(at..at, piece.iter().copied());
                    }
                    _ => {
                        let end = (at + random.below(16)).min(mutated.len());
                        mutated.drain(at..end);
                    }
                }
            }
            run(&mutated);
        }
    }
}
