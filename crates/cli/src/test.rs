//! `archmax test [WORKFLOW] [FILTER] [--replay] [--json]`: run a workflow's cases, or
//! those of every workflow that has cases when none is named (the others are noted).
//!
//! Each workflow is compiled in process, alone with what it calls. A case file that does not validate becomes a
//! failed case of its own (its first finding is the error) while the others run; any
//! other finding refuses the suite like `build` does. With `--replay` each case runs
//! against the tape beside it (`<case>.tape.yaml`); without, against the configured
//! model endpoint. stderr carries, per case, its header, the state flow of its session,
//! the verdict and every failure, and a per-workflow tally; stdout carries the one
//! summary line or, with `--json`, one results document, refusals included.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use archmax_compiler::lower::BuildInputs;
use archmax_compiler::{analyze, compile_analysis};
use archmax_vm::cases::suite::{self, Models, Observer, SuiteCase, Tally};
use archmax_vm::cases::{CaseResult, Harness, RecordStatus, Verdict};
use archmax_vm::environment::{self, ClockAndPricing, EndpointError, process_env};
use archmax_vm::events::EventSink;
use archmax_vm::stdlib::PLATFORM_PROMPT;

use crate::build::refused;
use crate::output::{note, quiet, stderr_color};
use crate::session::footer;
use crate::trace::Trace;

/// What `archmax test` takes.
#[derive(clap::Args)]
pub struct TestArgs {
    /// The workflow; when left out, every workflow that has cases (the others are noted).
    pub workflow: Option<String>,
    /// Run only case files whose path contains this text.
    pub filter: Option<String>,
    /// Replay each case's tape (`<case>.tape.yaml` beside it) instead of calling a model.
    #[arg(long)]
    pub replay: bool,
    /// Run against the live model and write each case's answers as its tape
    /// (`<case>.tape.yaml`, replaced), so `--replay` runs it offline afterwards.
    #[arg(long, conflicts_with = "replay")]
    pub record: bool,
    /// Print the results document as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Refuse a suite (exit 1) whose workflow has warnings, as one with errors.
    #[arg(long)]
    pub deny_warnings: bool,
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
        note!("{}", paint(self.color, "2", &format!("── {counter}{} · {}", case.id, case.title)));
        let events = EventSink::new();
        if !quiet() {
            events.listen(Box::new(Trace::for_case(self.color)));
        }
        events
    }

    fn case_finished(&mut self, result: &CaseResult, model: &archmax_vm::cases::suite::ModelNotes) {
        let leftover = model.leftover;
        if let Some(report) = &model.report {
            eprintln!("  {report}");
        }
        if leftover > 0 {
            eprintln!(
                "  warning: the tape still holds {leftover} unused entr{}",
                if leftover == 1 { "y" } else { "ies" }
            );
        }
        report(result, self.color);
    }
}

/// How one workflow's suite ended.
enum Suite {
    /// Its cases ran (the tally may hold failures).
    Ran { tally: Tally, discovered: usize },
    /// The workflow is disabled: nothing ran, and that is no failure.
    Disabled,
    /// No workflow was named and this one has no cases: noted, and no failure.
    NoCases,
    /// It could not run at all; the reason was printed on stderr.
    Refused { reason: String, exit: u8, discovered: usize },
}

impl Suite {
    fn exit(&self) -> u8 {
        match self {
            Suite::Ran { tally, .. } => tally.exit_code(),
            Suite::Disabled | Suite::NoCases => 0,
            Suite::Refused { exit, .. } => *exit,
        }
    }

    /// The `--json` document of one workflow's suite.
    fn document(&self, workflow: &str) -> serde_json::Value {
        match self {
            Suite::Ran { tally, discovered } => tally.document(workflow, *discovered),
            Suite::Disabled => {
                json!({ "workflow": workflow, "results": [], "exitCode": 0, "discovered": 0, "skipped": "disabled" })
            }
            Suite::NoCases => {
                json!({ "workflow": workflow, "results": [], "exitCode": 0, "discovered": 0, "skipped": "no cases" })
            }
            Suite::Refused { reason, exit, discovered } => {
                json!({ "workflow": workflow, "results": [], "exitCode": exit, "discovered": discovered, "error": reason })
            }
        }
    }
}

/// A refusal before any suite ran: the one line on stderr, and with `--json` still one
/// document on stdout.
fn refuse(json: bool, workflow: Option<&str>, reason: String, exit: u8) -> ExitCode {
    eprintln!("error: {reason}");
    if json {
        let document =
            json!({ "workflow": workflow, "results": [], "exitCode": exit, "discovered": 0, "error": reason });
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    }
    ExitCode::from(exit)
}

/// `archmax test`: the named workflow's suite, or every workflow's when none is named
/// (a workflow without cases is then noted and passed over).
pub fn run(executor: &tokio::runtime::Runtime, root: &Path, args: &TestArgs) -> ExitCode {
    let slugs: Vec<(String, bool)> = match args.workflow.as_deref() {
        Some(slug) => vec![(slug.to_string(), true)],
        None => match analyze(root) {
            Ok(analysis) => analysis
                .units
                .iter()
                .map(|unit| {
                    let has_cases =
                        analysis.workspace.workflow(&unit.slug).is_some_and(|source| !source.cases.is_empty());
                    (unit.slug.clone(), has_cases)
                })
                .collect(),
            Err(error) => return refuse(args.json, None, error.to_string(), 1),
        },
    };
    if slugs.is_empty() {
        return refuse(args.json, None, "the workspace has no workflow under workflows/".to_string(), 1);
    }
    if !slugs.iter().any(|(_, has_cases)| *has_cases) {
        let reason = "no workflow of the workspace has cases: write them under workflows/<slug>/tests/ as *.test.yaml";
        return refuse(args.json, None, reason.to_string(), 1);
    }
    let color = stderr_color();
    // With several suites, each ends with its own tally on stderr; the summary on stdout
    // is the total, printed once.
    let several = slugs.iter().filter(|(_, has_cases)| *has_cases).count() > 1;
    let suites: Vec<(String, Suite)> = slugs
        .into_iter()
        .map(|(slug, has_cases)| {
            if !has_cases {
                note!("suite {slug} skipped — no cases under its tests/");
                return (slug, Suite::NoCases);
            }
            let suite = run_workflow(executor, root, &slug, args, color);
            if several && let Suite::Ran { tally, .. } = &suite {
                note!("{}", paint(color, "1", &format!("{slug}: {}", tally.summary())));
            }
            (slug, suite)
        })
        .collect();
    let exit = suites.iter().map(|(_, suite)| suite.exit()).max().unwrap_or(0);
    let mut total = Tally::default();
    for (_, suite) in &suites {
        if let Suite::Ran { tally, .. } = suite {
            for result in &tally.results {
                total.add(result.clone());
            }
        }
    }
    let ran_any = suites.iter().any(|(_, suite)| matches!(suite, Suite::Ran { .. }));
    if ran_any && let Some(line) = footer(&total.usage) {
        note!("{line}");
    }
    if args.json {
        let document = match suites.as_slice() {
            [(slug, suite)] => suite.document(slug),
            many => json!({
                "workflows": many.iter().map(|(slug, suite)| suite.document(slug)).collect::<Vec<_>>(),
                "exitCode": exit,
            }),
        };
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else if ran_any || suites.iter().all(|(_, suite)| matches!(suite, Suite::Disabled | Suite::NoCases)) {
        println!("{}", total.summary());
    }
    ExitCode::from(exit)
}

/// One workflow's suite: discover, compile, select, then run each case.
fn run_workflow(executor: &tokio::runtime::Runtime, root: &Path, slug: &str, args: &TestArgs, color: bool) -> Suite {
    let refused_with = |reason: String, exit: u8, discovered: usize| {
        eprintln!("error: {reason}");
        Suite::Refused { reason, exit, discovered }
    };
    let mut analysis = match analyze(root) {
        Ok(analysis) => analysis,
        Err(error) => return refused_with(error.to_string(), 1, 0),
    };
    let names: Vec<String> = analysis.units.iter().map(|unit| unit.slug.clone()).collect();
    let Some(source) = analysis.workspace.workflow(slug).cloned() else {
        return refused_with(format!("there is no workflow `{slug}` (the workspace has {})", names.join(", ")), 1, 0);
    };
    // Errors inside case files fail those cases only; the rest must validate.
    let cases = suite::discover(&mut analysis, slug).unwrap_or_default();
    if args.deny_warnings
        && let Some(reason) = crate::build::denied_warnings(&analysis, &[slug.to_string()])
    {
        return refused_with(reason, 1, cases.len());
    }
    let inputs = BuildInputs { platform_prompt: PLATFORM_PROMPT };
    let program = match compile_analysis(analysis, &[slug.to_string()], &inputs) {
        Ok(compiled) => Arc::new(compiled.program),
        Err(error) => {
            let reason = error.to_string();
            refused(error);
            return Suite::Refused { reason, exit: 1, discovered: cases.len() };
        }
    };
    if program.workflow(slug).is_some_and(|(_, workflow)| workflow.disabled) {
        eprintln!("suite {slug} skipped — disabled");
        return Suite::Disabled;
    }
    let selected = suite::select(&cases, args.filter.as_deref());
    if selected.is_empty() {
        let reason = match args.filter.as_deref() {
            Some(filter) => format!("no cases matched '{filter}' ({} discovered)", cases.len()),
            None => format!("`{slug}` has no cases under {}/tests/", source.dir),
        };
        return refused_with(reason, 1, cases.len());
    }
    let tests_dir = root.join(&source.dir).join("tests");
    // A model is only needed when some case will call one: skipped cases and case files
    // that do not validate run without.
    let needs_model = selected.iter().any(|case| case.case.as_ref().is_ok_and(|case| case.skip.is_none()));
    let settings = match crate::tools::read_settings(root) {
        Ok(settings) => settings,
        Err(error) => return refused_with(error, 1, cases.len()),
    };
    let models = if args.replay || !needs_model {
        // The flag that asked for tapes, as the missing-tape reason names it.
        Models::Tapes { tests_dir: tests_dir.clone(), replaying: "--replay".to_string() }
    } else {
        match environment::endpoint_for(&settings, process_env, None) {
            Ok(endpoint) if args.record => Models::Record { endpoint, tests_dir: tests_dir.clone() },
            Ok(endpoint) => Models::Endpoint(endpoint),
            Err(EndpointError::Environment(error)) => {
                return refused_with(format!("{error} (or run the cases offline with --replay)"), 1, cases.len());
            }
            Err(error) => return refused_with(error.to_string(), 1, cases.len()),
        }
    };
    let ClockAndPricing { clock, pricing } = match ClockAndPricing::for_settings(&settings, process_env) {
        Ok(from_env) => from_env,
        Err(error) => return refused_with(error.to_string(), 1, cases.len()),
    };
    let tools = match crate::tools::host_tools(root, &settings) {
        Ok(tools) => tools,
        Err(error) => return refused_with(error, 1, cases.len()),
    };
    let harness = Harness {
        program: Arc::clone(&program),
        workflow: slug.to_string(),
        root: root.to_path_buf(),
        tests_dir,
        clock,
        pricing,
        tools,
        context: settings.context,
    };
    note!(
        "archmax test · workflow {slug} · root {} · {}",
        root.canonicalize().unwrap_or_else(|_| root.to_path_buf()).display(),
        match (args.replay, args.record) {
            (true, _) => "replaying tapes",
            (false, true) => "live model, recording each case's tape",
            (false, false) => "live model",
        }
    );
    let mut printer = Printer { color, progress: std::io::IsTerminal::is_terminal(&std::io::stderr()) };
    let tally = executor.block_on(harness.run_suite(&selected, &models, &mut printer));
    note!();
    Suite::Ran { tally, discovered: cases.len() }
}

/// The verdict line and what went wrong, on stderr.
fn report(result: &CaseResult, color: bool) {
    // Under --quiet only a failed case says anything.
    if quiet() && result.verdict != Verdict::Failed {
        return;
    }
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
