//! `archmax graph [WORKFLOW] [--root DIR] [--format mermaid|dot|json]`, and
//! `archmax graph --flow FILE` for a flow document (groups as clusters; `json` is its plan).

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::{analyze, graph};

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

/// `archmax graph --flow FILE`: a document that does not validate is refused as `flow plan` refuses it.
pub fn run_flow(flow: &Path, format: GraphFormat) -> ExitCode {
    let document = match crate::flow::load(flow, crate::Format::Human) {
        Ok((_, document)) => document,
        Err(code) => return code,
    };
    let text = match format {
        GraphFormat::Mermaid => archmax_flow::graph::mermaid(&document),
        GraphFormat::Dot => archmax_flow::graph::dot(&document),
        GraphFormat::Json => {
            format!(
                "{}\n",
                serde_json::to_string_pretty(&archmax_flow::plan::to_json(&document, None)).unwrap_or_default()
            )
        }
    };
    print!("{text}");
    ExitCode::SUCCESS
}
