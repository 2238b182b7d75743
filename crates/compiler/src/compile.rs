//! The one compile entry point: a workspace in, a [`Program`] out, or the reason why not.
//!
//! Every command that needs a program (`build`, `run` and the session commands, `test`)
//! calls [`compile`] or, when it must adjust the findings first, [`compile_analysis`]:
//! load and check the workspace, refuse it when the selected workflows (or the workspace
//! itself) have errors, and lower what is left. The one thing to know: a refusal for
//! errors carries the analysis and the report, so the caller renders the diagnostics
//! exactly as `validate` would; the library renders nothing.

use std::path::Path;

use crate::analysis::{Analysis, Report, UnknownWorkflow, analyze};
use crate::lower::{BuildError, BuildInputs, lower};
use crate::program::Program;
use crate::workspace::WorkspaceError;

/// A compiled workspace: the analysis it came from and the lowered program.
#[derive(Debug)]
pub struct Compiled {
    pub analysis: Analysis,
    pub program: Program,
    /// Workflows outside the selection (and what it calls) that do not validate: left
    /// out of the program, so they block nothing, but worth a warning.
    pub left_out: Vec<String>,
}

/// The analysis of a workspace that does not validate, and the report of its findings
/// for the selection.
#[derive(Debug)]
pub struct Invalid {
    pub analysis: Analysis,
    pub report: Report,
}

/// Why a workspace did not compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The workspace could not be loaded at all.
    #[error(transparent)]
    Load(#[from] WorkspaceError),
    /// The selection names a workflow the workspace does not have.
    #[error(transparent)]
    UnknownWorkflow(#[from] UnknownWorkflow),
    /// The selected workflows have errors; render `report` over `analysis.sources()`.
    #[error("the workspace does not validate; nothing was built")]
    Invalid(Box<Invalid>),
    /// Lowering refused the checked workspace.
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Loads, checks and lowers the workspace at `root`. `selection` names the workflows to
/// compile (every workflow when empty); the workflows they call come along, and only
/// their findings (and the workspace's own) can refuse the build: a broken sibling
/// blocks nothing and is named in [`Compiled::left_out`].
pub fn compile(root: &Path, selection: &[String], inputs: &BuildInputs<'_>) -> Result<Compiled, CompileError> {
    compile_analysis(analyze(root)?, selection, inputs)
}

/// Refuses an analysis whose selected workflows have errors, else lowers it.
pub fn compile_analysis(
    analysis: Analysis,
    selection: &[String],
    inputs: &BuildInputs<'_>,
) -> Result<Compiled, CompileError> {
    analysis.report(selection)?;
    let included =
        if selection.is_empty() { Vec::new() } else { crate::lower::included_workflows(&analysis, selection) };
    let report = analysis.report(&included)?;
    if !report.is_valid() {
        return Err(CompileError::Invalid(Box::new(Invalid { analysis, report })));
    }
    let program = lower(&analysis, selection, inputs)?;
    let left_out = analysis
        .units
        .iter()
        .filter(|unit| !included.is_empty() && !included.contains(&unit.slug))
        .filter(|unit| analysis.report(std::slice::from_ref(&unit.slug)).is_ok_and(|report| !report.is_valid()))
        .map(|unit| unit.slug.clone())
        .collect();
    Ok(Compiled { analysis, program, left_out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze_workspace;
    use crate::workspace::load_memory;

    const INPUTS: BuildInputs<'static> = BuildInputs { platform_prompt: "# Platform\n" };

    fn analysis(files: &[(&str, &str)]) -> Analysis {
        analyze_workspace(load_memory(files.iter().copied()).expect("the test workspace loads"))
    }

    const VALID: &str =
        "instructions: Be brief.\nstates:\n  work:\n    triggers:\n      manual:\n    instructions: Work.\n";

    #[test]
    fn a_selection_compiles_only_the_named_workflow() {
        let analysis =
            analysis(&[("workflows/orders/workflow.yaml", VALID), ("workflows/returns/workflow.yaml", VALID)]);
        let compiled = compile_analysis(analysis, &["returns".to_string()], &INPUTS).expect("returns compiles");
        let slugs: Vec<&str> =
            compiled.program.workflows.iter().map(|workflow| compiled.program.str(workflow.slug)).collect();
        assert_eq!(slugs, ["returns"]);
    }

    /// A syntax error in a sibling's file is a workspace-level finding of that sibling;
    /// a transition to nowhere a finding of the workflow itself.
    const BROKEN_YAML: &str = "instructions: [unclosed\n";
    const CALLER: &str = "instructions: Be brief.\nstates:\n  work:\n    triggers:\n      manual:\n    instructions: Work.\n    tools:\n      allow: [archmax_workflow_child]\n";
    const BROKEN_CHILD: &str = "instructions: Be brief.\nstates:\n  work:\n    triggers:\n      manual:\n    instructions: Work.\n    transitions:\n      - { to: nowhere, description: Gone. }\n";

    #[test]
    fn a_broken_sibling_blocks_nothing_and_is_named_as_left_out() {
        for broken in [BROKEN_YAML, BROKEN_CHILD] {
            let analysis =
                analysis(&[("workflows/orders/workflow.yaml", VALID), ("workflows/returns/workflow.yaml", broken)]);
            let compiled = match compile_analysis(analysis, &["orders".to_string()], &INPUTS) {
                Ok(compiled) => compiled,
                Err(CompileError::Invalid(invalid)) => panic!("a sibling refused the build: {:#?}", invalid.report),
                Err(error) => panic!("{error}"),
            };
            assert_eq!(compiled.left_out, ["returns"]);
        }
    }

    #[test]
    fn a_broken_callee_refuses_its_caller_with_its_own_findings() {
        let analysis =
            analysis(&[("workflows/orders/workflow.yaml", CALLER), ("workflows/child/workflow.yaml", BROKEN_CHILD)]);
        let Err(CompileError::Invalid(invalid)) = compile_analysis(analysis, &["orders".to_string()], &INPUTS) else {
            panic!("the caller must not compile over a broken callee")
        };
        let reported: Vec<&str> = invalid.report.workflows.iter().map(|workflow| workflow.slug.as_str()).collect();
        assert!(reported.contains(&"child"), "the callee's findings are shown: {reported:?}");
        assert!(!invalid.report.is_valid());
    }

    #[test]
    fn with_no_selection_every_workflow_must_validate() {
        let analysis =
            analysis(&[("workflows/orders/workflow.yaml", VALID), ("workflows/returns/workflow.yaml", BROKEN_CHILD)]);
        assert!(matches!(compile_analysis(analysis, &[], &INPUTS), Err(CompileError::Invalid(_))));
    }

    #[test]
    fn each_script_is_compiled_once_per_build_by_validation_and_reused_by_lowering() {
        use crate::check::bytecode::COMPILATIONS;
        let spec = r#"instructions: Be brief.
states:
  first:
    type: code
    triggers:
      manual:
    script: scripts/check.js
    transitions:
      - { to: second, description: The first check passed. }
  second:
    type: code
    script: scripts/check.js
"#;
        let script = "export default async function () { return { next: null }; }\n";
        let before = COMPILATIONS.with(|count| count.get());
        let analysis =
            analysis(&[("workflows/orders/workflow.yaml", spec), ("workflows/orders/scripts/check.js", script)]);
        assert_eq!(COMPILATIONS.with(|count| count.get()) - before, 1, "validation compiles the shared script once");
        let compiled = match compile_analysis(analysis, &[], &INPUTS) {
            Ok(compiled) => compiled,
            Err(CompileError::Invalid(invalid)) => panic!("the test workspace is invalid: {:#?}", invalid.report),
            Err(error) => panic!("the test workspace does not compile: {error}"),
        };
        assert_eq!(COMPILATIONS.with(|count| count.get()) - before, 1, "lowering compiles nothing again");
        let scripts = &compiled.program.workflows[0].scripts;
        assert_eq!(scripts.len(), 1);
        assert_eq!(
            Some(&scripts[0].bytecode),
            compiled.analysis.units[0].scripts.first().map(|script| &script.bytecode)
        );
        assert!(!scripts[0].bytecode.is_empty());
    }

    #[test]
    fn an_invalid_workflow_is_refused_with_its_report() {
        let analysis = analysis(&[("workflows/orders/workflow.yaml", "states: 3\n")]);
        match compile_analysis(analysis, &[], &INPUTS) {
            Err(CompileError::Invalid(invalid)) => assert!(invalid.report.errors() > 0),
            other => panic!("expected a refusal for errors, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_selection_is_refused_naming_it() {
        let analysis = analysis(&[("workflows/orders/workflow.yaml", VALID)]);
        match compile_analysis(analysis, &["order".to_string()], &INPUTS) {
            Err(CompileError::UnknownWorkflow(unknown)) => assert_eq!(unknown.name, "order"),
            other => panic!("expected an unknown workflow, got {other:?}"),
        }
    }
}
