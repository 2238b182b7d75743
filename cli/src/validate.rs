//! `archmax validate [WORKFLOW…] [--root DIR] [--format human|json|sarif|github] [--tools]`.
//!
//! Plain `validate` is offline; `--tools` adds the host tool check of [`crate::tools`],
//! which starts the configured MCP servers.

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::analyze;
use archmax_compiler::diagnostic::render::{self, Stream};

use crate::Format;
use crate::output::{failure, stderr_color};

impl From<Format> for render::Format {
    fn from(format: Format) -> Self {
        match format {
            Format::Human => render::Format::Human,
            Format::Json => render::Format::Json,
            Format::Sarif => render::Format::Sarif,
            Format::Github => render::Format::Github,
        }
    }
}

pub fn run(root: &Path, selection: &[String], format: Format, tools: bool) -> ExitCode {
    let analysis = match analyze(root) {
        Ok(analysis) => analysis,
        Err(error) => return failure(error),
    };
    if analysis.units.is_empty() {
        return failure(format!(
            "`{}` has no workflows: add `workflows/<slug>/workflow.yaml`",
            root.join("workflows").display()
        ));
    }
    let mut report = match analysis.report(selection) {
        Ok(report) => report,
        Err(error) => return failure(error),
    };
    let analysis = if tools && report.is_valid() {
        match crate::tools::check(root, analysis, selection, &mut report) {
            Ok(analysis) => analysis,
            Err(error) => return failure(error),
        }
    } else {
        analysis
    };
    let printout =
        render::validation(analysis.sources(), &report, format.into(), &root.to_string_lossy(), stderr_color());
    for (stream, text) in &printout.writes {
        match stream {
            Stream::Stdout => print!("{text}"),
            Stream::Stderr => eprint!("{text}"),
        }
    }
    ExitCode::from(printout.exit_code)
}
