//! `archmax schema [workflow|case|config] [-o FILE]`: the JSON Schema (2020-12) of a file
//! an author writes, for editors and linters.
//!
//! The schemas are built by `archmax_compiler::authoring_schema`; `schemas/` in the
//! repository holds the same text (a test keeps them equal). The event stream's schema
//! is not printed here yet: it joins this command as `events` once its file is in the
//! tree.

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
}

impl From<Kind> for Document {
    fn from(kind: Kind) -> Document {
        match kind {
            Kind::Workflow => Document::Workflow,
            Kind::Case => Document::Case,
            Kind::Config => Document::Config,
        }
    }
}

pub fn run(kind: Kind, output: Option<&Path>) -> ExitCode {
    let text = Document::from(kind).text();
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
