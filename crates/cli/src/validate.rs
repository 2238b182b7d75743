//! `archmax validate [WORKFLOW…] [--root DIR] [--format human|json|sarif|github] [--tools]
//! [--deny-warnings]` (which fails the check on warnings too).
//!
//! Plain `validate` is offline but for the model routes of `archmax.toml`, checked against
//! this environment (a provider's key variable, a model id no route serves); `--tools`
//! adds the host tool check of [`crate::tools`],
//! which starts the configured MCP servers. A refusal before any report (the workspace
//! does not load, an unknown workflow name) is still one document under `--format json`.

use std::path::Path;
use std::process::ExitCode;

use archmax_compiler::analyze;
use archmax_compiler::diagnostic::render::{self, Stream};

use crate::Format;
use crate::output::stderr_color;

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

pub fn run(
    executor: &tokio::runtime::Runtime,
    root: &Path,
    selection: &[String],
    format: Format,
    tools: bool,
    deny_warnings: bool,
) -> ExitCode {
    let refuse = |message: &dyn std::fmt::Display| print(&render::refusal(&message.to_string(), format.into()));
    let analysis = match analyze(root) {
        Ok(analysis) => analysis,
        Err(error) => return refuse(&error),
    };
    if analysis.units.is_empty() {
        return refuse(&format!(
            "`{}` has no workflows: add `workflows/<slug>/workflow.yaml`",
            root.join("workflows").display()
        ));
    }
    let mut report = match analysis.report(selection) {
        Ok(report) => report,
        Err(error) => return refuse(&error),
    };
    // What `archmax.toml`'s providers and routes need of this environment.
    let settings = crate::tools::settings(&analysis);
    let routes = archmax_config::settings::providers::check_routes(
        &settings,
        &analysis.model_uses(),
        archmax_vm::environment::process_env,
    );
    analysis.add_findings(&mut report, &routes);
    // A cost limit over a model with no price bounds nothing: said where the model is named.
    if let Ok(prices) =
        archmax_vm::environment::ClockAndPricing::for_settings(&settings, archmax_vm::environment::process_env)
    {
        let unpriced = archmax_vm::environment::check_budget_prices(&settings, &analysis.model_uses(), &prices.pricing);
        analysis.add_findings(&mut report, &unpriced);
    }
    let analysis = if tools && report.is_valid() {
        match crate::tools::check(executor, root, analysis, selection, &mut report) {
            Ok(analysis) => analysis,
            Err(error) => return refuse(&error),
        }
    } else {
        analysis
    };
    let printout =
        render::validation(analysis.sources(), &report, format.into(), &root.to_string_lossy(), stderr_color());
    let code = print(&printout);
    let warnings = report.warnings();
    if deny_warnings && printout.exit_code == 0 && warnings > 0 {
        eprintln!(
            "error: {warnings} warning{} and --deny-warnings was given, so the check fails",
            if warnings == 1 { "" } else { "s" }
        );
        return ExitCode::from(1);
    }
    code
}

/// Writes a printout out as it is, and ends with its exit code.
fn print(printout: &render::Printout) -> ExitCode {
    for (stream, text) in &printout.writes {
        match stream {
            Stream::Stdout => print!("{text}"),
            Stream::Stderr => eprint!("{text}"),
        }
    }
    ExitCode::from(printout.exit_code)
}
