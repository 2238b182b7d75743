//! `archmax graph [WORKFLOW] [--root DIR] [--format mermaid|dot|json]`.

use std::path::Path;
use std::process::ExitCode;

use archmax_vm::compiler::{analyze, graph};

use crate::output::failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    Json,
}

pub fn run(root: &Path, workflow: Option<&str>, format: GraphFormat) -> ExitCode {
    let analysis = match analyze(root) {
        Ok(analysis) => analysis,
        Err(error) => return failure(error),
    };
    let selection: Vec<String> = workflow.map(|slug| vec![slug.to_string()]).unwrap_or_default();
    if let Err(error) = analysis.report(&selection) {
        return failure(error);
    }
    let workflows: Vec<_> = analysis
        .units
        .iter()
        .filter(|unit| workflow.is_none_or(|slug| unit.slug == slug))
        .filter_map(|unit| unit.workflow.as_ref())
        .collect();
    if workflows.is_empty() {
        return failure("no workflow could be read; run `archmax validate` to see why");
    }
    // No edge is left out silently: one that names no state is drawn marked, and said.
    for workflow in &workflows {
        for (from, to) in graph::dangling(workflow) {
            eprintln!(
                "warning: workflow `{}`: `{from}` leads to `{to}`, which is not one of its states; it is drawn as missing (`archmax validate {}` says more)",
                workflow.slug, workflow.slug
            );
        }
    }
    let text = match format {
        GraphFormat::Mermaid => graph::mermaid(&workflows),
        GraphFormat::Dot => graph::dot(&workflows),
        GraphFormat::Json => graph::json(&workflows),
    };
    print!("{text}");
    ExitCode::SUCCESS
}
