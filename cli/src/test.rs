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

use archmax_vm::compiler::diagnostic::Diagnostic;
use archmax_vm::compiler::lower::BuildInputs;
use archmax_vm::compiler::{analyze, compile_analysis, workspace::WorkflowSource};
use archmax_vm::events::EventSink;
use archmax_vm::host_env::{self, ClockAndPricing, EndpointError, TapeFileError, process_env};
use archmax_vm::model::ModelAdapter;
use archmax_vm::session::Usage;
use archmax_vm::stdlib::PLATFORM_PROMPT;
use archmax_vm::testing::{CaseEnv, CaseResult, Harness, RecordStatus, Verdict};

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

/// One line for a finding: `file:line:column: CODE message`.
fn one_line(analysis: &archmax_vm::compiler::Analysis, diagnostic: &Diagnostic) -> String {
    let location = diagnostic
        .span
        .map(|span| {
            let file = analysis.sources().file(span.file);
            let at = file.line_column(span.start);
            format!("{}:{}:{}: ", file.name, at.line, at.column)
        })
        .unwrap_or_default();
    format!("{location}{} {}", diagnostic.code.as_str(), diagnostic.message)
}

fn paint(color: bool, code: &str, text: &str) -> String {
    if color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
}

/// The case files of a workflow, sorted by path, with their tests-relative paths.
fn discovered(source: &WorkflowSource, analysis: &archmax_vm::compiler::Analysis) -> Vec<(String, String)> {
    let mut cases: Vec<(String, String)> = source
        .cases
        .iter()
        .map(|(id, file)| {
            let name = analysis.sources().file(*file).name.clone();
            let prefix = format!("{}/tests/", source.dir);
            (id.clone(), name.strip_prefix(&prefix).unwrap_or(&name).to_string())
        })
        .collect();
    cases.sort_by(|left, right| left.1.cmp(&right.1));
    cases
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
    let cases = discovered(&source, &analysis);

    // Findings inside case files fail those cases only; the rest must validate.
    let case_files: Vec<_> = source.cases.iter().map(|(id, file)| (*file, id.clone())).collect();
    let mut case_errors: Vec<(String, String)> = Vec::new();
    if let Some(index) = analysis.units.iter().position(|unit| unit.slug == slug) {
        let findings = std::mem::take(&mut analysis.units[index].diagnostics);
        let mut kept = Vec::new();
        for diagnostic in findings {
            let in_case = diagnostic
                .span
                .and_then(|span| case_files.iter().find(|(file, _)| *file == span.file).map(|(_, id)| id.clone()));
            match in_case {
                Some(id) if diagnostic.is_error() => {
                    if !case_errors.iter().any(|(known, _)| *known == id) {
                        case_errors.push((id, one_line(&analysis, &diagnostic)));
                    }
                }
                Some(_) => {}
                None => kept.push(diagnostic),
            }
        }
        analysis.units[index].diagnostics = kept;
    }
    let inputs = BuildInputs { platform_prompt: PLATFORM_PROMPT };
    let (analysis, program) = match compile_analysis(analysis, std::slice::from_ref(&slug), &inputs) {
        Ok(compiled) => (compiled.analysis, Arc::new(compiled.program)),
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
    let selected: Vec<&(String, String)> =
        cases.iter().filter(|(_, path)| args.filter.is_none_or(|filter| path.contains(filter))).collect();
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
    let endpoint: Option<Arc<dyn ModelAdapter>> = if args.replay {
        None
    } else {
        match host_env::endpoint_from_env(process_env) {
            Ok(endpoint) => Some(endpoint),
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
    let tests_dir = root.join(&source.dir).join("tests");
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

    let parsed =
        analysis.units.iter().find(|unit| unit.slug == slug).map(|unit| unit.cases.clone()).unwrap_or_default();
    let mut results: Vec<CaseResult> = Vec::new();
    let mut total = Usage::default();
    // On a terminal, each case header says how far the suite has come.
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let count = selected.len();
    for (position, (id, path)) in selected.into_iter().enumerate() {
        let case = parsed.iter().find(|case| &case.id == id);
        let title = case.map(|case| case.title.clone()).unwrap_or_else(|| id.clone());
        let counter = if progress { format!("[{}/{count}] ", position + 1) } else { String::new() };
        eprintln!("{}", paint(color, "2", &format!("── {counter}{id} · {title}")));
        let result = match (case, case_errors.iter().find(|(known, _)| known == id)) {
            (_, Some((_, error))) => CaseResult::dead(id, &title, "", format!("the case file is invalid: {error}")),
            (None, None) => CaseResult::dead(id, &title, "", "the case file could not be read".to_string()),
            (Some(case), None) => {
                let model: Result<Arc<dyn ModelAdapter>, String> = match &endpoint {
                    Some(endpoint) => Ok(Arc::clone(endpoint)),
                    None => tape_for(&tests_dir, path, id),
                };
                match model {
                    Err(error) => CaseResult::dead(id, &title, &case.description, error),
                    Ok(model) => {
                        let events = EventSink::new();
                        events.listen(Box::new(Flow::new(color)));
                        let result =
                            executor.block_on(harness.run_case(case, CaseEnv { model: Arc::clone(&model), events }));
                        let leftover = model.leftover();
                        if leftover > 0 && result.verdict != Verdict::Skipped {
                            eprintln!(
                                "  warning: the tape still holds {leftover} unused entr{}",
                                if leftover == 1 { "y" } else { "ies" }
                            );
                        }
                        result
                    }
                }
            }
        };
        report(&result, color);
        total.add(&result.usage);
        results.push(result);
    }
    let passed = results.iter().filter(|result| result.verdict == Verdict::Passed).count();
    let failed = results.iter().filter(|result| result.verdict == Verdict::Failed).count();
    let skipped = results.iter().filter(|result| result.verdict == Verdict::Skipped).count();
    let summary = format!("{passed} passed, {failed} failed, {skipped} skipped");
    eprintln!();
    eprintln!("{}", paint(color, "1", &summary));
    if let Some(line) = footer(&total) {
        eprintln!("{line}");
    }
    let exit = if failed > 0 { 1 } else { 0 };
    if args.json {
        let document = json!({ "workflow": slug, "results": results, "exitCode": exit, "discovered": cases.len() });
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else {
        println!("{summary}");
    }
    ExitCode::from(exit)
}

/// The tape beside a case: `<case>.tape.yaml`.
fn tape_for(tests_dir: &Path, path: &str, id: &str) -> Result<Arc<dyn ModelAdapter>, String> {
    let file = tests_dir.join(format!("{id}.tape.yaml"));
    host_env::tape_from_file(&file, &format!("tests/{id}.tape.yaml")).map_err(|error| match error {
        TapeFileError::Unreadable { .. } => format!(
            "--replay needs a tape for this case: write tests/{id}.tape.yaml beside tests/{path} (one entry per model call)"
        ),
        TapeFileError::Invalid(error) => error.to_string(),
    })
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
