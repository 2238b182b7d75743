//! A workflow's suite: which cases there are, which run, against which model, and the
//! verdict of the whole.
//!
//! [`discover`] lists a workflow's case files and takes each case file's own errors out
//! of the analysis, so a broken case fails alone while the workflow still compiles.
//! [`Harness::run_suite`] runs the selected cases in order, one fresh runtime each, and
//! tells an [`Observer`] what happens (the CLI prints it); [`Tally`] is the verdict:
//! counts, usage, the summary line, the exit code and the JSON results document.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use archmax_compiler::Analysis;
use archmax_compiler::schema::case::Case;
use archmax_program::diagnostic::Diagnostic;

use super::{CaseEnv, CaseResult, Harness, Verdict};
use crate::environment::{self, TapeFileError};
use crate::events::EventSink;
use crate::model::ModelAdapter;
use crate::model::record::Recorder;
use crate::session::Usage;

/// One case file of a suite.
#[derive(Clone, Debug)]
pub struct SuiteCase {
    /// The case id: its tests-relative path without the extension.
    pub id: String,
    /// Its tests-relative file path (`refunds/over-limit.test.yaml`).
    pub path: String,
    /// The case's title where the file names one (even a file with errors), else its id.
    pub title: String,
    /// The parsed case, or why the file cannot run (its first error, one line).
    pub case: Result<Case, String>,
}

/// One line for a finding: `file:line:column: CODE message`.
fn one_line(analysis: &Analysis, diagnostic: &Diagnostic) -> String {
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

/// The case files of workflow `slug`, sorted by path, or `None` when the workspace has
/// no such workflow. Errors inside a case file or its tape (`<case>.tape.yaml`) are taken
/// out of the workflow's findings and become that case's own failure; warnings inside
/// them are dropped. What is left in the analysis decides whether the workflow compiles.
pub fn discover(analysis: &mut Analysis, slug: &str) -> Option<Vec<SuiteCase>> {
    let source = analysis.workspace.workflow(slug)?.clone();
    let prefix = format!("{}/tests/", source.dir);
    let mut errors: Vec<(String, String)> = Vec::new();
    if let Some(index) = analysis.units.iter().position(|unit| unit.slug == slug) {
        let findings = std::mem::take(&mut analysis.units[index].diagnostics);
        let mut kept = Vec::new();
        for diagnostic in findings {
            let in_case = diagnostic.span.and_then(|span| {
                let case = source.cases.iter().find(|(_, file)| *file == span.file).map(|(id, _)| (id.clone(), "file"));
                case.or_else(|| {
                    let (tape, _) = source.tapes.iter().find(|(_, file)| *file == span.file)?;
                    let id = tape.strip_suffix(".tape.yaml").or_else(|| tape.strip_suffix(".tape.yml"))?;
                    Some((id.to_string(), "tape"))
                })
            });
            match in_case {
                Some((id, what)) if diagnostic.is_error() => {
                    if !errors.iter().any(|(known, _)| *known == id) {
                        let what = if what == "tape" { "the case's tape" } else { "the case file" };
                        errors.push((id, format!("{what} is invalid: {}", one_line(analysis, &diagnostic))));
                    }
                }
                Some(_) => {}
                None => kept.push(diagnostic),
            }
        }
        analysis.units[index].diagnostics = kept;
    }
    let parsed = analysis.units.iter().find(|unit| unit.slug == slug).map(|unit| unit.cases.as_slice()).unwrap_or(&[]);
    let mut cases: Vec<SuiteCase> = source
        .cases
        .iter()
        .map(|(id, file)| {
            let name = analysis.sources().file(*file).name.clone();
            let path = name.strip_prefix(&prefix).unwrap_or(&name).to_string();
            let found = parsed.iter().find(|case| &case.id == id);
            let title = found.map(|case| case.title.clone()).unwrap_or_else(|| id.clone());
            let case = match (errors.iter().find(|(known, _)| known == id), found) {
                (Some((_, error)), _) => Err(error.clone()),
                (None, Some(case)) => Ok(case.clone()),
                (None, None) => Err("the case file could not be read".to_string()),
            };
            SuiteCase { id: id.clone(), path, title, case }
        })
        .collect();
    cases.sort_by(|left, right| left.path.cmp(&right.path));
    Some(cases)
}

/// The cases whose path contains `filter` (every case without one).
pub fn select<'a>(cases: &'a [SuiteCase], filter: Option<&str>) -> Vec<&'a SuiteCase> {
    cases.iter().filter(|case| filter.is_none_or(|filter| case.path.contains(filter))).collect()
}

/// Where a suite's model calls go.
pub enum Models {
    /// Every case talks to this model.
    Endpoint(Arc<dyn ModelAdapter>),
    /// Each case replays the tape beside it (`<case>.tape.yaml` in `tests_dir`).
    /// `replaying` names, in the host's words, what made the suite replay (a flag, a
    /// setting): a case without a tape is told that it "needs a tape for this case".
    Tapes { tests_dir: PathBuf, replaying: String },
    /// Every case talks to this model, and its answers become the case's tape (written
    /// afresh over `<case>.tape.yaml`), so `--replay` runs it offline afterwards.
    Record { endpoint: Arc<dyn ModelAdapter>, tests_dir: PathBuf },
}

impl Models {
    /// The model one case runs against; `Err` says what is missing.
    pub fn for_case(&self, case: &SuiteCase) -> Result<Arc<dyn ModelAdapter>, String> {
        match self {
            Models::Endpoint(endpoint) => Ok(Arc::clone(endpoint)),
            Models::Record { endpoint, tests_dir } => {
                let file = tests_dir.join(format!("{}.tape.yaml", case.id));
                Ok(Arc::new(Recorder::afresh(Arc::clone(endpoint), &file)))
            }
            Models::Tapes { tests_dir, replaying } => {
                let id = &case.id;
                let file = tests_dir.join(format!("{id}.tape.yaml"));
                environment::tape_from_file(&file, &format!("tests/{id}.tape.yaml")).map_err(|error| match error {
                    TapeFileError::Unreadable { .. } => format!(
                        "{replaying} needs a tape for this case: write tests/{id}.tape.yaml beside tests/{} (one entry per model call)",
                        case.path
                    ),
                    TapeFileError::Invalid(error) => error.to_string(),
                })
            }
        }
    }
}

/// What a case's model has to say once the case ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelNotes {
    /// Tape entries the case did not use.
    pub leftover: usize,
    /// The adapter's closing report (a recorder's: the tape it wrote).
    pub report: Option<String>,
}

/// What a suite tells whoever runs it, case by case.
pub trait Observer {
    /// Case `position` (from 0) of `count` is about to run; the returned sink receives
    /// its session's events.
    fn case_started(&mut self, position: usize, count: usize, case: &SuiteCase) -> EventSink;
    /// The case ended; `model` says what its model left behind.
    fn case_finished(&mut self, result: &CaseResult, model: &ModelNotes);
}

/// The verdict of a suite so far.
#[derive(Debug, Default)]
pub struct Tally {
    pub results: Vec<CaseResult>,
    pub usage: Usage,
}

impl Tally {
    pub fn add(&mut self, result: CaseResult) {
        self.usage.add(&result.usage);
        self.results.push(result);
    }

    fn count(&self, verdict: Verdict) -> usize {
        self.results.iter().filter(|result| result.verdict == verdict).count()
    }

    pub fn passed(&self) -> usize {
        self.count(Verdict::Passed)
    }

    pub fn failed(&self) -> usize {
        self.count(Verdict::Failed)
    }

    pub fn skipped(&self) -> usize {
        self.count(Verdict::Skipped)
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed, {} skipped", self.passed(), self.failed(), self.skipped())
    }

    /// 1 when any case failed, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.failed() > 0)
    }

    /// The `--json` results document: the workflow, every case's result, the exit code
    /// and how many case files were discovered.
    pub fn document(&self, workflow: &str, discovered: usize) -> Value {
        json!({ "workflow": workflow, "results": self.results, "exitCode": self.exit_code(), "discovered": discovered })
    }
}

impl Harness {
    /// Runs `cases` in order, each against the model `models` gives it (a case without
    /// one fails with the reason and the rest still run).
    pub async fn run_suite(&self, cases: &[&SuiteCase], models: &Models, observer: &mut dyn Observer) -> Tally {
        let mut tally = Tally::default();
        let count = cases.len();
        for (position, suite_case) in cases.iter().enumerate() {
            let events = observer.case_started(position, count, suite_case);
            let title = &suite_case.title;
            let none = ModelNotes::default();
            let (result, notes) = match &suite_case.case {
                Err(error) => (CaseResult::dead(&suite_case.id, title, "", error.clone()), none),
                // A skipped case needs no model, so no tape or endpoint either.
                Ok(case) if case.skip.is_some() => (CaseResult::skipped(case), none),
                Ok(case) => match models.for_case(suite_case) {
                    Err(error) => (CaseResult::dead(&suite_case.id, title, &case.description, error), none),
                    Ok(model) => {
                        let result = self.run_case(case, CaseEnv { model: Arc::clone(&model), events }).await;
                        let leftover = if result.verdict == Verdict::Skipped { 0 } else { model.leftover() };
                        (result, ModelNotes { leftover, report: model.report() })
                    }
                },
            };
            observer.case_finished(&result, &notes);
            tally.add(result);
        }
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, verdict: Verdict) -> CaseResult {
        CaseResult { verdict, ..CaseResult::dead(id, id, "", String::new()) }
    }

    #[test]
    fn the_tally_counts_verdicts_and_fails_the_suite_on_any_failure() {
        let mut tally = Tally::default();
        tally.add(result("a", Verdict::Passed));
        tally.add(result("b", Verdict::Skipped));
        assert_eq!(tally.summary(), "1 passed, 0 failed, 1 skipped");
        assert_eq!(tally.exit_code(), 0);
        tally.add(result("c", Verdict::Failed));
        assert_eq!(tally.exit_code(), 1);
        let document = tally.document("w", 4);
        assert_eq!(document["exitCode"], 1);
        assert_eq!(document["discovered"], 4);
        assert_eq!(document["results"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn a_filter_selects_by_path() {
        let case = |id: &str, path: &str| SuiteCase {
            id: id.into(),
            path: path.into(),
            title: id.into(),
            case: Err(String::new()),
        };
        let cases = [case("a", "refunds/a.test.yaml"), case("b", "orders/b.test.yaml")];
        let picked: Vec<&str> = select(&cases, Some("refunds/")).iter().map(|case| case.id.as_str()).collect();
        assert_eq!(picked, ["a"]);
        assert_eq!(select(&cases, None).len(), 2);
    }

    #[test]
    fn a_missing_tape_names_the_file_to_write() {
        let models = Models::Tapes {
            tests_dir: std::env::temp_dir().join("archmax-no-such-tests-dir"),
            replaying: "replaying".to_string(),
        };
        let case = SuiteCase {
            id: "over-limit".into(),
            path: "over-limit.test.yaml".into(),
            title: "over-limit".into(),
            case: Err(String::new()),
        };
        let Err(reason) = models.for_case(&case) else { panic!("no tape there") };
        assert!(reason.starts_with("replaying needs a tape for this case"), "the host's words lead: {reason}");
        assert!(reason.contains("write tests/over-limit.tape.yaml beside tests/over-limit.test.yaml"), "{reason}");
    }
}
