//! Building programs from in-memory workspaces.

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::{analyze_workspace, load_memory};

/// Compiles an in-memory workspace; panics with the diagnostics when it is invalid.
pub fn compile(files: &[(&str, &str)]) -> Program {
    let analysis = analyze_workspace(load_memory(files.iter().copied()).expect("workspace"));
    let report = analysis.report(&[]).expect("report");
    assert!(report.errors() == 0, "the test workspace must validate: {:#?}", report.distinct());
    lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT }).expect("lowers")
}
