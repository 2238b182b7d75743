//! Fuzzes the whole front end: loading, YAML, schema, checks and every renderer.
//!
//! The input is split on `\0\0` into up to three files: `workflow.yaml`, a case file,
//! and a SKILL.md. Run with `cargo fuzz run validate` from `compiler/`; crashes that
//! matter go into `crates/compiler/fuzz/regressions/`, which the normal test suite replays.
#![no_main]

use archmax_compiler::diagnostic::render;
use archmax_compiler::{analyze_workspace, load_memory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |byte| *byte == 0).collect::<Vec<_>>().into_iter();
    let spec = parts.next().unwrap_or_default();
    let case = parts.next();
    let skill = parts.next();
    let mut files: Vec<(&str, &[u8])> = vec![("workflows/fuzz/workflow.yaml", spec)];
    if let Some(case) = case {
        files.push(("workflows/fuzz/tests/case.test.yaml", case));
    }
    if let Some(skill) = skill {
        files.push(("skills/fuzz-skill/SKILL.md", skill));
    }
    let Ok(workspace) = load_memory(files) else {
        return;
    };
    let analysis = analyze_workspace(workspace);
    if let Ok(report) = analysis.report(&[]) {
        let _ = render::human(analysis.sources(), &report, false);
        let _ = render::json(analysis.sources(), &report);
        let _ = render::sarif(analysis.sources(), &report, ".");
        let _ = render::github(analysis.sources(), &report, ".");
    }
});
