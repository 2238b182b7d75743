//! Semantic checks: rules that relate one part of a workspace to another.
//!
//! Each module takes the parsed workflows and reports through a [`Findings`] sink:
//! [`graph`] (targets, descriptions, reachability, triggers, locks; [`follow_on`] keeps an
//! unknown target from also reporting what it makes unreachable), [`scripts`] (code
//! state scripts, compiled once by [`bytecode`] and kept on the [`Unit`]), [`governance`] (tool, skill and mount entries probed against the zones,
//! the registry and the host table), [`references`] (which `${{…}}` guards are
//! guaranteed, by dominator analysis), [`variables`] (references in instructions, and
//! near misses of declared names), [`delegation`] (the sub-workflow call graph),
//! [`cases`] (what cases name) and [`tapes`] (what tapes name). Checks never stop at the
//! first finding.

pub mod bytecode;
pub mod cases;
pub mod delegation;
pub mod follow_on;
pub mod governance;
pub mod graph;
pub mod references;
pub mod scripts;
pub mod tapes;
pub mod variables;

use crate::diagnostic::{Diagnostic, Scope};
use crate::schema::ast::Workflow;
use crate::schema::case::Case;
use crate::schema::tape::Tape;
use crate::workspace::Workspace;
use bytecode::CompiledScript;

/// One workflow as the checks see it.
#[derive(Debug)]
pub struct Unit {
    pub slug: String,
    /// `None` when `workflow.yaml` is missing or unusable.
    pub workflow: Option<Workflow>,
    pub cases: Vec<Case>,
    /// What its tapes (`tests/*.tape.yaml`) name, for `validate` and a state rename.
    pub tapes: Vec<Tape>,
    pub diagnostics: Vec<Diagnostic>,
    /// The scripts of its code states that compiled, each once, for lowering to reuse.
    pub scripts: Vec<CompiledScript>,
}

impl Unit {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Where a check reports: every finding lands in its workflow's scope.
pub struct Findings<'d> {
    scope: Scope,
    sink: &'d mut Vec<Diagnostic>,
}

impl<'d> Findings<'d> {
    pub fn new(slug: &str, sink: &'d mut Vec<Diagnostic>) -> Findings<'d> {
        Findings { scope: Scope::Workflow(slug.to_string()), sink }
    }

    pub fn push(&mut self, diagnostic: Diagnostic, path: impl Into<String>) {
        self.sink.push(diagnostic.with_path(path.into()).with_scope(self.scope.clone()));
    }
}

/// Runs every check over every workflow. Order matters only for delegation, which reads
/// whether a target has errors of its own.
pub fn check_workspace(workspace: &Workspace, units: &mut [Unit]) {
    for unit in units.iter_mut() {
        let Some(workflow) = unit.workflow.as_ref() else {
            continue;
        };
        let mut findings = Findings::new(&unit.slug, &mut unit.diagnostics);
        graph::check(workflow, &mut findings);
        scripts::check(workspace, workflow, &mut unit.scripts, &mut findings);
        governance::check(workspace, workflow, &mut findings);
        references::check(workflow, &mut findings);
        variables::check(workspace, workflow, &mut findings);
    }
    for index in 0..units.len() {
        let mut findings = cases::check(workspace, units, index);
        findings.extend(tapes::check(units, index));
        units[index].diagnostics.extend(findings);
    }
    let delegation = delegation::check(units);
    for (index, findings) in delegation {
        units[index].diagnostics.extend(findings);
    }
}
