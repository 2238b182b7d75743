//! The durable flow record: what `--resume` continues from.
//!
//! One JSON-lines file per walk, `<session-dir>/<flow-run-id>.flow.jsonl`, beside the
//! per-scope sessions. The first line is the header (the document's digest, the input,
//! the attempt override); then one line per finished step (its whole report: outcome,
//! gives, the messages it added, what it spent, the tape's reading) and per transition
//! hook answer, each keyed by its place in the walk (`root.1.shape.2.specify`,
//! `root.1.shape.2@leave`), and a line when the walk pauses or ends. Every line is
//! appended and synced before the walk goes on.
//!
//! The one thing to know: **the key carries every enclosing attempt**, so a resumed
//! walk that re-walks the document meets each finished step at exactly one key and
//! takes its report from here instead of running it again; a torn last line (the
//! process died while writing it) is dropped on reading.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use archmax_vm::model::TapeReading;
use archmax_vm::session::Message;

use archmax_program::diagnostic::list_names;

use crate::document::FlowDocument;
use crate::hooks::HookAnswer;
use crate::step::{Outcome, Spend, StepReport};

/// What the first line says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub flow: String,
    pub run: String,
    /// SHA-256 (hex) of the document's text: a resume refuses a changed document.
    pub digest: String,
    pub input: String,
    pub max_attempts: Option<u32>,
}

/// A finished step as the record keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedStep {
    pub outcome: Outcome,
    pub note: Option<String>,
    pub reason: Option<String>,
    pub gives: Map<String, Value>,
    pub messages: Vec<Message>,
    pub spend: Spend,
    pub tape: Option<TapeReading>,
}

impl RecordedStep {
    pub fn from_report(report: &StepReport) -> RecordedStep {
        RecordedStep {
            outcome: report.outcome,
            note: report.note.clone(),
            reason: report.reason.clone(),
            gives: report.gives.clone(),
            messages: report.messages.clone(),
            spend: report.spend,
            tape: report.tape.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Header(Header),
    Step { key: String, step: RecordedStep },
    Hook { key: String, answer: HookAnswer },
    Paused { key: String },
    Finished { clean: bool },
}

/// A record read back.
#[derive(Debug, Default)]
pub struct Recorded {
    pub header: Option<Header>,
    pub steps: HashMap<String, RecordedStep>,
    pub hooks: HashMap<String, HookAnswer>,
    /// The operator step the walk last paused at, if its last word was a pause.
    pub paused: Option<String>,
    pub finished: bool,
}

impl Recorded {
    /// Whether some model step of `document` has never finished in this record, so
    /// continuing the walk will call the model. (A step that finished may still run
    /// again when its section is re-entered; a walk that then meets no model fails there.)
    pub fn model_steps_left(&self, document: &FlowDocument) -> bool {
        let finished: HashSet<String> = self.steps.keys().map(|key| place_of(key)).collect();
        document.model_step_paths().iter().any(|path| !finished.contains(path))
    }
}

/// A record key's node path: `root.1.shape.2.specify` is `root.shape.specify` (every
/// group's name is followed by its attempt; a step's is not).
fn place_of(key: &str) -> String {
    key.split('.').enumerate().filter(|(index, _)| index % 2 == 0).map(|(_, name)| name).collect::<Vec<_>>().join(".")
}

/// Why the record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the flow record `{path}` cannot be written: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("there is no flow record `{path}`: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("the flow record `{0}` has no header line")]
    NoHeader(String),
}

/// What `--resume` brings besides the run id.
#[derive(Clone, Copy, Debug)]
pub struct Continuing<'a> {
    /// `--input`, when it was given again: it must be the recorded one.
    pub input: Option<&'a str>,
    /// Whether an operator's verdict was given.
    pub operator: bool,
}

/// Why a walk cannot start or continue from `directory`: one sentence.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("the flow record of `{0}` was made from another document; resume it with the document it ran")]
    OtherDocument(String),
    #[error("--input differs from the walk's recorded input; leave it out to resume")]
    OtherInput,
    #[error("the walk ran with another --max-attempts; resume it with the same")]
    OtherAttempts,
    #[error("the walk `{0}` already finished; there is nothing to resume")]
    Finished(String),
    #[error("the walk waits for the operator at `{0}`; record the verdict with --operator passed|failed [--note TEXT]")]
    AwaitingOperator(String),
    #[error("the walk is not waiting for an operator; leave out --operator")]
    NotAwaitingOperator,
}

/// The record a walk appends to and what it already holds: a new one for a new walk, or
/// the one `--resume` names, checked against the document, the input, the attempt
/// override and the operator's verdict. No directory (`--no-session`) is no record.
pub fn open(
    directory: Option<&Path>,
    header: &Header,
    continuing: Option<Continuing<'_>>,
) -> Result<(Option<Record>, Recorded), OpenError> {
    let Some(directory) = directory else { return Ok((None, Recorded::default())) };
    let Some(continuing) = continuing else {
        return Ok((Some(Record::create(directory, header)?), Recorded::default()));
    };
    let (record, recorded) = Record::resume(directory, &header.run)?;
    let found = recorded.header.as_ref().ok_or_else(|| RecordError::NoHeader(header.run.clone()))?;
    if found.digest != header.digest || found.flow != header.flow {
        return Err(OpenError::OtherDocument(header.run.clone()));
    }
    if continuing.input.is_some_and(|input| input != found.input) {
        return Err(OpenError::OtherInput);
    }
    if found.max_attempts != header.max_attempts {
        return Err(OpenError::OtherAttempts);
    }
    if recorded.finished {
        return Err(OpenError::Finished(header.run.clone()));
    }
    match (&recorded.paused, continuing.operator) {
        (Some(step), false) => return Err(OpenError::AwaitingOperator(step.clone())),
        (None, true) => return Err(OpenError::NotAwaitingOperator),
        _ => {}
    }
    Ok((Some(record), recorded))
}

/// Why `--resume` names no one walk.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    #[error("no flow run `{prefix}` is recorded in `{directory}`; the ids are the `<id>.flow.jsonl` files there")]
    Unknown { prefix: String, directory: String },
    #[error("`{prefix}` is the start of {} flow-run ids: {}; give more of the id", .candidates.len(), list_names(.candidates))]
    Ambiguous { prefix: String, candidates: Vec<String> },
}

/// The walk under `directory` whose flow-run id is `prefix` or, failing that, the one
/// whose id starts with it.
pub fn find_run(directory: &Path, prefix: &str) -> Result<String, FindError> {
    let unknown = || FindError::Unknown { prefix: prefix.to_string(), directory: directory.display().to_string() };
    let entries = std::fs::read_dir(directory).map_err(|_| unknown())?;
    let mut candidates: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.strip_suffix(".flow.jsonl").map(str::to_string))
        .filter(|run| run.starts_with(prefix))
        .collect();
    candidates.sort();
    if candidates.iter().any(|run| run == prefix) {
        return Ok(prefix.to_string());
    }
    match candidates.len() {
        0 => Err(unknown()),
        1 => Ok(candidates.remove(0)),
        _ => Err(FindError::Ambiguous { prefix: prefix.to_string(), candidates }),
    }
}

/// The file of the walk `run` under `directory`.
pub fn record_path(directory: &Path, run: &str) -> PathBuf {
    directory.join(format!("{run}.flow.jsonl"))
}

/// An open record being appended to.
pub struct Record {
    path: PathBuf,
    file: File,
}

impl Record {
    /// Creates the record with its header (a new walk).
    pub fn create(directory: &Path, header: &Header) -> Result<Record, RecordError> {
        let path = record_path(directory, &header.run);
        let failure = |error| RecordError::Write { path: path.display().to_string(), error };
        std::fs::create_dir_all(directory).map_err(failure)?;
        let file = OpenOptions::new().create_new(true).append(true).open(&path).map_err(failure)?;
        let mut record = Record { path, file };
        record.append(&Line::Header(header.clone()))?;
        Ok(record)
    }

    /// Opens an existing record to append to, and reads what it holds.
    pub fn resume(directory: &Path, run: &str) -> Result<(Record, Recorded), RecordError> {
        let path = record_path(directory, run);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|error| RecordError::Read { path: shown.clone(), error })?;
        let mut recorded = Recorded::default();
        // A line is whole only when its newline was written; the last one may be torn.
        let whole = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        for line in whole.lines() {
            let Ok(line) = serde_json::from_str::<Line>(line) else { continue };
            match line {
                Line::Header(header) => recorded.header = Some(header),
                Line::Step { key, step } => {
                    recorded.steps.insert(key, step);
                    recorded.paused = None;
                }
                Line::Hook { key, answer } => {
                    recorded.hooks.insert(key, answer);
                }
                Line::Paused { key } => recorded.paused = Some(key),
                Line::Finished { .. } => recorded.finished = true,
            }
        }
        if recorded.header.is_none() {
            return Err(RecordError::NoHeader(shown));
        }
        // Cut a torn tail so the next line starts on its own.
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|error| RecordError::Write { path: shown.clone(), error })?;
        file.set_len(whole.len() as u64 + u64::from(!whole.is_empty()))
            .map_err(|error| RecordError::Write { path: shown.clone(), error })?;
        drop(file);
        let file =
            OpenOptions::new().append(true).open(&path).map_err(|error| RecordError::Write { path: shown, error })?;
        Ok((Record { path, file }, recorded))
    }

    fn append(&mut self, line: &Line) -> Result<(), RecordError> {
        let mut text = serde_json::to_string(line).unwrap_or_default();
        text.push('\n');
        let path = self.path.display().to_string();
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|error| RecordError::Write { path, error })
    }

    pub fn step(&mut self, key: &str, step: &RecordedStep) -> Result<(), RecordError> {
        self.append(&Line::Step { key: key.to_string(), step: step.clone() })
    }

    pub fn hook(&mut self, key: &str, answer: &HookAnswer) -> Result<(), RecordError> {
        self.append(&Line::Hook { key: key.to_string(), answer: answer.clone() })
    }

    pub fn paused(&mut self, key: &str) -> Result<(), RecordError> {
        self.append(&Line::Paused { key: key.to_string() })
    }

    pub fn finished(&mut self, clean: bool) -> Result<(), RecordError> {
        self.append(&Line::Finished { clean })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(run: &str) -> Header {
        Header { flow: "f".into(), run: run.into(), digest: "d".into(), input: "task".into(), max_attempts: None }
    }

    fn step(outcome: Outcome) -> RecordedStep {
        RecordedStep {
            outcome,
            note: None,
            reason: None,
            gives: Map::new(),
            messages: Vec::new(),
            spend: Spend::default(),
            tape: None,
        }
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_the_next_append_starts_clean() {
        let directory = std::env::temp_dir().join(format!("archmax-flow-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let run = "0123456789abcdef-01234567";
        let created = Record::create(&directory, &header(run));
        assert!(created.is_ok());
        if let Ok(mut record) = created {
            assert!(record.step("root.1.a", &step(Outcome::Passed)).is_ok());
            assert!(record.hook("root.1@enter", &HookAnswer { proceed: true, reason: None, status: Some(0) }).is_ok());
        }
        let path = record_path(&directory, run);
        let mut file = OpenOptions::new().append(true).open(&path).ok();
        if let Some(file) = file.as_mut() {
            assert!(file.write_all(br#"{"step":{"key":"root.1.b","st"#).is_ok());
        }
        drop(file);
        let resumed = Record::resume(&directory, run);
        assert!(resumed.is_ok());
        if let Ok((mut record, recorded)) = resumed {
            assert_eq!(recorded.header, Some(header(run)));
            assert!(recorded.steps.contains_key("root.1.a"));
            assert!(!recorded.steps.contains_key("root.1.b"), "the torn line is not a step");
            assert!(recorded.hooks.contains_key("root.1@enter"));
            assert!(record.step("root.1.b", &step(Outcome::Failed)).is_ok());
        }
        let again = Record::resume(&directory, run).map(|(_, recorded)| recorded);
        assert!(
            again.is_ok_and(|recorded| recorded
                .steps
                .get("root.1.b")
                .is_some_and(|step| step.outcome == Outcome::Failed))
        );
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_pause_is_forgotten_once_a_later_step_is_recorded() {
        let directory = std::env::temp_dir().join(format!("archmax-flow-pause-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        let run = "fedcba9876543210-76543210";
        if let Ok(mut record) = Record::create(&directory, &header(run)) {
            assert!(record.paused("root.1.review").is_ok());
        }
        let paused = Record::resume(&directory, run).map(|(_, recorded)| recorded.paused);
        assert_eq!(paused.ok().flatten().as_deref(), Some("root.1.review"));
        if let Ok((mut record, _)) = Record::resume(&directory, run) {
            assert!(record.step("root.1.review", &step(Outcome::Passed)).is_ok());
        }
        let paused = Record::resume(&directory, run).map(|(_, recorded)| recorded.paused);
        assert_eq!(paused.ok().flatten(), None);
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_run_is_found_by_its_id_or_a_unique_start_and_an_ambiguous_start_lists_the_candidates() {
        let directory = std::env::temp_dir().join(format!("archmax-flow-find-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        for run in ["0123456789abcdef-01234567", "0123456789abcdef-01234568", "fedcba9876543210-76543210"] {
            assert!(Record::create(&directory, &header(run)).is_ok());
        }
        assert_eq!(find_run(&directory, "fe"), Ok("fedcba9876543210-76543210".to_string()));
        assert_eq!(find_run(&directory, "0123456789abcdef-01234568"), Ok("0123456789abcdef-01234568".to_string()));
        let ambiguous = find_run(&directory, "0123").map_err(|error| error.to_string());
        assert_eq!(
            ambiguous,
            Err("`0123` is the start of 2 flow-run ids: `0123456789abcdef-01234567` and \
                 `0123456789abcdef-01234568`; give more of the id"
                .to_string())
        );
        assert!(matches!(find_run(&directory, "9"), Err(FindError::Unknown { .. })));
        assert!(matches!(find_run(&directory.join("absent"), "0"), Err(FindError::Unknown { .. })));
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_record_key_names_its_place_without_the_attempts() {
        assert_eq!(place_of("root.1.shape.2.specify"), "root.shape.specify");
        assert_eq!(place_of("root.3.publish"), "root.publish");
    }
}
