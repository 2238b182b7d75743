//! `archmax validate [WORKFLOW…] [--root DIR] [--format human|json|sarif|github]`.

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::analyze;
use archmax_compiler::diagnostic::render;

use crate::Format;
use crate::output::{failure, stderr_color};

pub fn run(root: &Path, selection: &[String], format: Format) -> ExitCode {
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
    let report = match analysis.report(selection) {
        Ok(report) => report,
        Err(error) => return failure(error),
    };
    let sources = analysis.sources();
    let prefix = root.to_string_lossy();
    match format {
        Format::Human => {
            eprint!("{}", render::human(sources, &report, stderr_color()));
            println!("{}", render::verdict(&report));
        }
        Format::Json => print!("{}", render::json(sources, &report)),
        Format::Sarif => print!("{}", render::sarif(sources, &report, &prefix)),
        Format::Github => {
            print!("{}", render::github(sources, &report, &prefix));
            eprintln!("{}", render::verdict(&report));
        }
    }
    if report.is_valid() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
