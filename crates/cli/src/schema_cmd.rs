//! `archmax schema [workflow|case|config|events|flow|flow-events] [-o FILE]`: the JSON
//! Schema (2020-12) of a file an author writes, for editors and linters, or of one line
//! of an event stream.
//!
//! The authoring schemas are built by `archmax_compiler::authoring_schema`; `schemas/` in
//! the repository holds the same text (a test keeps them equal). The event schema is the
//! committed `schemas/events.schema.json` itself (`archmax_vm::events::SCHEMA`), which the
//! VM's tests and the golden harness check every event against. The flow document's and
//! the flow events' are `schemas/flow.schema.json` and `schemas/flow-events.schema.json`
//! (`archmax_flow::document::SCHEMA`, `archmax_flow::events::SCHEMA`); the golden flows
//! check every document and every `flow run --json` line against them.

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::authoring_schema::Document;
use clap::ValueEnum;

use crate::output::failure;

/// The documents `archmax schema` describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// `workflows/<slug>/workflow.yaml`.
    Workflow,
    /// A case, `workflows/<slug>/tests/**/*.test.yaml`.
    Case,
    /// `archmax.toml`.
    Config,
    /// One line of an event stream (`--events FILE`, the runner's event stream).
    Events,
    /// A flow document (`archmax flow plan|run --flow FILE`).
    Flow,
    /// One line of `archmax flow run --json`.
    FlowEvents,
}

/// The schema's text.
fn text(kind: Kind) -> String {
    match kind {
        Kind::Workflow => Document::Workflow.text(),
        Kind::Case => Document::Case.text(),
        Kind::Config => Document::Config.text(),
        Kind::Events => archmax_vm::events::SCHEMA.to_string(),
        Kind::Flow => archmax_flow::document::SCHEMA.to_string(),
        Kind::FlowEvents => archmax_flow::events::SCHEMA.to_string(),
    }
}

pub fn run(kind: Kind, output: Option<&Path>) -> ExitCode {
    let text = text(kind);
    match output {
        None => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Some(path) => match std::fs::write(path, text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => failure(format!("cannot write `{}`: {error}", path.display())),
        },
    }
}
