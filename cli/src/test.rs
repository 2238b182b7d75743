//! `archmax test [WORKFLOW] [FILTER] [--replay] [--json]`: run a workflow's cases.
//!
//! The workspace is compiled in process. A case file that does not validate becomes a
//! failed case of its own (its first finding is the error) while the others run; any
//! other finding refuses the suite like `build` does. With `--replay` each case runs
//! against the tape beside it (`<case>.tape.yaml`); without, against the configured
//! model endpoint. stderr carries, per case, its header, the state flow of its session,
//! the verdict and every failure; stdout carries the summary line or, with `--json`, the
//! results document.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use archmax_vm::compiler::lower::BuildInputs;
use archmax_vm::compiler::{analyze, compile_analysis};
use archmax_vm::events::EventSink;
use archmax_vm::host_env::{self, ClockAndPricing, EndpointError, process_env};
use archmax_vm::stdlib::PLATFORM_PROMPT;
use archmax_vm::testing::suite::{self, Models, Observer, SuiteCase};
use archmax_vm::testing::{CaseResult, Harness, RecordStatus, Verdict};

use crate::build::refused;
use crate::flow::Flow;
use crate::output::{failure, stderr_color, usage};
use crate::session::footer;

pub struct TestArgs<'a> {
    pub workflow: Option<&'a str>,
    pub filter: Option<&'a str>,
    pub replay: bool,
    pub json: bool,
}

fn paint(color: bool, code: &str, text: &str) -> String {
    if color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
}

/// Prints each case as it runs: its header, its session's state flow, its verdict.
struct Printer {
    color: bool,
    /// On a terminal, each case header says how far the suite has come.
    progress: bool,
}

impl Observer for Printer {
    fn case_started(&mut self, position: usize, count: usize, case: &SuiteCase) -> EventSink {
        let counter = if self.progress { format!("[{}/{count}] ", position + 1) } else { String::new() };
        eprintln!("{}", paint(self.color, "2", &format!("── {counter}{} · {}", case.id, case.title)));
        let events = EventSink::new();
        events.listen(Box::new(Flow::new(self.color)));
        events
    }

    fn case_finished(&mut self, result: &CaseResult, leftover: usize) {
        if leftover > 0 {
            eprintln!(
                "  warning: the tape still holds {leftover} unused entr{}",
                if leftover == 1 { "y" } else { "ies" }
            );
        }
        report(result, self.color);
    }
}

pub fn run(root: &Path, args: TestArgs<'_>) -> ExitCode {
    let mut analysis = match analyze(root) {
        Ok(analysis) => analysis,
        Err(error) => return failure(error),
    };
    let names: Vec<String> = analysis.units.iter().map(|unit| unit.slug.clone()).collect();
    let slug = match args.workflow {
        Some(slug) => slug.to_string(),
        None => match names.as_slice() {
            [only] => only.clone(),
            [] => return failure("the workspace has no workflow under workflows/"),
            many => {
                return usage("test", &format!("name the workflow to test: the workspace has {}", many.join(", ")));
            }
        },
    };
    let Some(source) = analysis.workspace.workflow(&slug).cloned() else {
        return failure(format!("there is no workflow `{slug}` (the workspace has {})", names.join(", ")));
    };
    // Errors inside case files fail those cases only; the rest must validate.
    let cases = suite::discover(&mut analysis, &slug).unwrap_or_default();

    let inputs = BuildInputs { platform_prompt: PLATFORM_PROMPT };
    let program = match compile_analysis(analysis, std::slice::from_ref(&slug), &inputs) {
        Ok(compiled) => Arc::new(compiled.program),
        Err(error) => return refused(error),
    };
    let color = stderr_color();
    let disabled = program.workflow(&slug).is_some_and(|(_, workflow)| workflow.disabled);
    if disabled {
        eprintln!("suite skipped — disabled");
        if args.json {
            let document =
                json!({ "workflow": slug, "results": [], "exitCode": 0, "discovered": 0, "skipped": "disabled" });
            println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
        } else {
            println!("0 passed, 0 failed, 0 skipped");
        }
        return ExitCode::SUCCESS;
    }
    let selected = suite::select(&cases, args.filter);
    if selected.is_empty() {
        let message = match args.filter {
            Some(filter) => format!("no cases matched '{filter}' ({} discovered)", cases.len()),
            None => format!("`{slug}` has no cases under {}/tests/", source.dir),
        };
        if args.json {
            let document = json!({ "workflow": slug, "results": [], "exitCode": 1, "discovered": cases.len() });
            println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
        }
        return failure(message);
    }
    let tests_dir = root.join(&source.dir).join("tests");
    let models = if args.replay {
        Models::Tapes { tests_dir: tests_dir.clone() }
    } else {
        match host_env::endpoint_from_env(process_env) {
            Ok(endpoint) => Models::Endpoint(endpoint),
            Err(EndpointError::Environment(error)) => {
                return failure(format!("{error} (or run the cases offline with --replay)"));
            }
            Err(error) => return failure(error),
        }
    };
    let ClockAndPricing { clock, pricing } = match ClockAndPricing::from_env(process_env) {
        Ok(host) => host,
        Err(error) => return failure(error),
    };
    let harness = Harness {
        program: Arc::clone(&program),
        workflow: slug.clone(),
        root: root.to_path_buf(),
        tests_dir: tests_dir.clone(),
        clock,
        pricing,
    };
    let executor = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(executor) => executor,
        Err(error) => return failure(format!("could not start the runtime: {error}")),
    };
    eprintln!(
        "archmax test · workflow {slug} · root {} · {}",
        root.canonicalize().unwrap_or_else(|_| root.to_path_buf()).display(),
        if args.replay { "replaying tapes".to_string() } else { "live model".to_string() }
    );

    let mut printer = Printer { color, progress: std::io::IsTerminal::is_terminal(&std::io::stderr()) };
    let tally = executor.block_on(harness.run_suite(&selected, &models, &mut printer));
    let summary = tally.summary();
    eprintln!();
    eprintln!("{}", paint(color, "1", &summary));
    if let Some(line) = footer(&tally.usage) {
        eprintln!("{line}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tally.document(&slug, cases.len())).unwrap_or_default());
    } else {
        println!("{summary}");
    }
    ExitCode::from(tally.exit_code())
}

/// The verdict line and what went wrong, on stderr.
fn report(result: &CaseResult, color: bool) {
    let (icon, code, word) = match result.verdict {
        Verdict::Passed => ("✔", "32", "passed"),
        Verdict::Failed => ("✖", "31", "failed"),
        Verdict::Skipped => ("○", "33", "skipped"),
    };
    let mut line = format!("{} {word} {} — {}", paint(color, code, icon), result.id, result.title);
    if let Some(reason) = &result.skip_reason {
        line.push_str(&format!(" ({reason})"));
    }
    eprintln!("{line}");
    for failure in result.failures() {
        eprintln!("    {}", failure);
    }
    for record in
        result.records.iter().filter(|record| record.kind.starts_with("grade") && record.status == RecordStatus::Passed)
    {
        eprintln!(
            "    grade: score {:.2} ≥ atLeast {:.2}{}",
            record.score.unwrap_or(0.0),
            record.threshold.unwrap_or(0.0),
            record.detail.as_ref().map(|detail| format!(" — {detail}")).unwrap_or_default()
        );
    }
    let skipped = result.not_executed();
    if skipped > 0 {
        eprintln!("    {skipped} assertion{} not executed", if skipped == 1 { "" } else { "s" });
    }
    if let Some(line) = footer(&result.usage) {
        eprintln!("    {line}");
    }
}
