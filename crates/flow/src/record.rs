//! The durable flow record: what `--resume` continues from.
//!
//! One session per walk in the run's session store (the filesystem store or
//! PostgreSQL), whose id is the flow-run id and whose head carries a
//! [`FlowPart`] with no path: that is what makes it a record. Its variables are the
//! record's lines: `header` (the document's digest, the input, the attempt override),
//! `step <key>` per finished step (its whole report: outcome, gives, the messages it
//! added, what it spent, the tape's reading) and `hook <key>` per transition hook
//! answer, each keyed by its place in the walk (`root.1.shape.2.specify`,
//! `root.1.shape.2@leave`). A pause is the marker's `paused`; the end is the status
//! (`completed` clean, `failed` not; `resumable` while the walk can go on). Every line
//! is one committed step of the store, durable before the walk goes on.
//!
//! The one thing to know: **the key carries every enclosing attempt**, so a resumed
//! walk that re-walks the document meets each finished step at exactly one key and
//! takes its report from here instead of running it again. A commit is whole or absent
//! (the store's own guarantee: a torn tail of a filesystem session is cut on reading),
//! and the walk holds the record open for writing, so a second process resuming the
//! same walk at once is refused as busy.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use archmax_vm::model::TapeReading;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::{
    Delta, FlowPart, Head, Message, SessionState, SessionStore, SessionWriter, Status, StoreError, Variable,
};

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
    #[error("the flow record `{run}` cannot be used: {message}")]
    Store { run: String, message: String },
    #[error("there is no flow record `{0}` in the session store")]
    Missing(String),
    #[error("session `{0}` is not a flow record (it was not filed by `archmax flow run` as a walk's record)")]
    NotARecord(String),
    #[error("the flow record `{run}` is damaged: its `{variable}` does not read ({problem}); nothing was changed")]
    Damaged { run: String, variable: String, problem: String },
    #[error("the flow record `{0}` has no header")]
    NoHeader(String),
}

impl RecordError {
    fn store(run: &str, error: &StoreError) -> RecordError {
        RecordError::Store { run: run.to_string(), message: error.to_string() }
    }
}

/// What `--resume` brings besides the run id.
#[derive(Clone, Copy, Debug)]
pub struct Continuing<'a> {
    /// `--input`, when it was given again: it must be the recorded one.
    pub input: Option<&'a str>,
    /// Whether an operator's verdict was given.
    pub operator: bool,
}

/// Why a walk cannot start or continue: one sentence.
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
/// override and the operator's verdict. No store (`--no-session`) is no record.
pub async fn open(
    store: Option<Arc<dyn SessionStore>>,
    header: &Header,
    continuing: Option<Continuing<'_>>,
    now_ms: u64,
) -> Result<(Option<Record>, Recorded), OpenError> {
    let Some(store) = store else { return Ok((None, Recorded::default())) };
    let Some(continuing) = continuing else {
        return Ok((Some(Record::create(store, header, now_ms).await?), Recorded::default()));
    };
    let (record, recorded) = Record::resume(store, &header.run).await?;
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
    #[error(
        "no flow run `{prefix}` is recorded in {store}; `archmax sessions` lists the walks' records by their flow-run ids"
    )]
    Unknown { prefix: String, store: String },
    #[error("`{prefix}` is the start of {} flow-run ids: {}; give more of the id", .candidates.len(), list_names(.candidates))]
    Ambiguous { prefix: String, candidates: Vec<String> },
    #[error("the session store cannot be listed: {0}")]
    Store(String),
}

/// Whether `id` is shaped like a flow-run id (16 and 8 lowercase hex digits).
pub fn is_run_id(id: &str) -> bool {
    let hex = |part: &str, length: usize| {
        part.len() == length && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    id.split_once('-').is_some_and(|(first, second)| hex(first, 16) && hex(second, 8))
}

/// The walk in `store` whose flow-run id is `prefix` or, failing that, the one whose id
/// starts with it. `shown` names the store in a refusal.
pub async fn find_run(store: &dyn SessionStore, prefix: &str, shown: &str) -> Result<String, FindError> {
    let ids = store.list().await.map_err(|error| FindError::Store(error.to_string()))?;
    let mut candidates = Vec::new();
    for id in ids.into_iter().filter(|id| is_run_id(id) && id.starts_with(prefix)) {
        // Only a walk's record counts; an unreadable session is not taken for one.
        if let Ok(Some(state)) = store.read(&id).await
            && state.head.flow.as_ref().is_some_and(FlowPart::is_record)
        {
            candidates.push(id);
        }
    }
    candidates.sort();
    if candidates.iter().any(|run| run == prefix) {
        return Ok(prefix.to_string());
    }
    match candidates.len() {
        0 => Err(FindError::Unknown { prefix: prefix.to_string(), store: shown.to_string() }),
        1 => Ok(candidates.remove(0)),
        _ => Err(FindError::Ambiguous { prefix: prefix.to_string(), candidates }),
    }
}

/// The variable holding the header.
const HEADER: &str = "header";
/// The prefix of a finished step's variable.
const STEP: &str = "step ";
/// The prefix of a transition hook answer's variable.
const HOOK: &str = "hook ";

/// An open record being appended to: the walk holds it for writing.
pub struct Record {
    run: String,
    writer: Box<dyn SessionWriter>,
    state: SessionState,
}

impl Record {
    /// Creates the record with its header (a new walk).
    pub async fn create(store: Arc<dyn SessionStore>, header: &Header, now_ms: u64) -> Result<Record, RecordError> {
        let run = header.run.clone();
        let mut state = SessionState {
            id: SessionId::from_store(run.clone()),
            head: Head {
                workflow: header.flow.clone(),
                status: Status::Completed,
                resumable: true,
                flow: Some(FlowPart { run: run.clone(), ..FlowPart::default() }),
                created_at: now_ms,
                updated_at: now_ms,
                ..Head::default()
            },
            ..SessionState::default()
        };
        state.variables.insert(HEADER.to_string(), variable(header));
        let writer = store.create(&state).await.map_err(|error| RecordError::store(&run, &error))?;
        Ok(Record { run, writer, state })
    }

    /// Opens an existing record for writing (exclusively), and reads what it holds.
    pub async fn resume(store: Arc<dyn SessionStore>, run: &str) -> Result<(Record, Recorded), RecordError> {
        let (state, writer) = match store.open(run).await {
            Ok(opened) => opened,
            Err(StoreError::Missing(_)) => return Err(RecordError::Missing(run.to_string())),
            Err(error) => return Err(RecordError::store(run, &error)),
        };
        let recorded = read(run, &state)?;
        Ok((Record { run: run.to_string(), writer, state }, recorded))
    }

    /// Commits one line: a variable set and the head as `change` leaves it.
    async fn commit(
        &mut self,
        line: Option<(String, Variable)>,
        now_ms: u64,
        change: impl FnOnce(&mut Head),
    ) -> Result<(), RecordError> {
        let mut head = self.state.head.clone();
        change(&mut head);
        head.updated_at = now_ms.max(head.created_at);
        let delta = Delta {
            seq: self.state.seq + 1,
            head,
            variables: line.map(|(name, value)| (name, Some(value))).into_iter().collect(),
            ..Delta::default()
        };
        self.writer.commit(&delta).await.map_err(|error| RecordError::store(&self.run, &error))?;
        self.state.apply(&delta);
        Ok(())
    }

    pub async fn step(&mut self, key: &str, step: &RecordedStep, now_ms: u64) -> Result<(), RecordError> {
        self.commit(Some((format!("{STEP}{key}"), variable(step))), now_ms, |head| {
            if let Some(flow) = head.flow.as_mut() {
                flow.paused = None;
            }
        })
        .await
    }

    pub async fn hook(&mut self, key: &str, answer: &HookAnswer, now_ms: u64) -> Result<(), RecordError> {
        self.commit(Some((format!("{HOOK}{key}"), variable(answer))), now_ms, |_| {}).await
    }

    pub async fn paused(&mut self, key: &str, now_ms: u64) -> Result<(), RecordError> {
        self.commit(None, now_ms, |head| {
            if let Some(flow) = head.flow.as_mut() {
                flow.paused = Some(key.to_string());
            }
        })
        .await
    }

    pub async fn finished(&mut self, clean: bool, now_ms: u64) -> Result<(), RecordError> {
        self.commit(None, now_ms, |head| {
            head.status = if clean { Status::Completed } else { Status::Failed };
            head.resumable = false;
            if let Some(flow) = head.flow.as_mut() {
                flow.paused = None;
            }
        })
        .await
    }
}

/// A line's value as a record variable.
fn variable<T: Serialize>(value: &T) -> Variable {
    Variable { value: serde_json::to_value(value).unwrap_or(Value::Null), locked: false }
}

/// What the record session `state` holds; a line that does not read refuses the record
/// (a store commits whole lines, so one that does not read was damaged, not torn).
pub fn read(run: &str, state: &SessionState) -> Result<Recorded, RecordError> {
    let Some(flow) = state.head.flow.as_ref().filter(|flow| flow.is_record()) else {
        return Err(RecordError::NotARecord(run.to_string()));
    };
    let damaged = |variable: &str, error: serde_json::Error| RecordError::Damaged {
        run: run.to_string(),
        variable: variable.to_string(),
        problem: error.to_string(),
    };
    let mut recorded = Recorded {
        paused: flow.paused.clone(),
        finished: !(state.head.status == Status::Completed && state.head.resumable),
        ..Recorded::default()
    };
    for (name, variable) in &state.variables {
        let value = variable.value.clone();
        if name == HEADER {
            recorded.header = Some(serde_json::from_value(value).map_err(|error| damaged(name, error))?);
        } else if let Some(key) = name.strip_prefix(STEP) {
            recorded
                .steps
                .insert(key.to_string(), serde_json::from_value(value).map_err(|error| damaged(name, error))?);
        } else if let Some(key) = name.strip_prefix(HOOK) {
            recorded
                .hooks
                .insert(key.to_string(), serde_json::from_value(value).map_err(|error| damaged(name, error))?);
        }
    }
    if recorded.header.is_none() {
        return Err(RecordError::NoHeader(run.to_string()));
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use archmax_vm::session::fs::{FsStore, SealKeys};
    use archmax_vm::session::memory::MemoryStore;

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

    fn scratch(label: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!("archmax-flow-record-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        directory
    }

    fn fs_store(directory: &std::path::Path, keys: &SealKeys) -> Arc<dyn SessionStore> {
        Arc::new(FsStore::new(directory, keys.clone()))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_torn_last_commit_is_dropped_and_the_next_append_starts_clean() {
        let directory = scratch("torn");
        let keys = SealKeys::generate().expect("a key");
        let run = "0123456789abcdef-01234567";
        let mut record = Record::create(fs_store(&directory, &keys), &header(run), 5).await.expect("created");
        record.step("root.1.a", &step(Outcome::Passed), 6).await.expect("a step");
        let answer = HookAnswer { proceed: true, reason: None, status: Some(0) };
        record.hook("root.1@enter", &answer, 7).await.expect("a hook answer");
        // The process dies while it writes step b: the record as it stood, and half of
        // the bytes that commit appends to its log. Closed first, so the log holds its
        // records alone (an open writer keeps zeros after them for its next commits).
        drop(record);
        let log = directory.join(run).join("checkpoints").join("log");
        let before = scratch("torn-before");
        copy_tree(&directory, &before);
        let written = std::fs::metadata(&log).expect("the record's log").len() as usize;
        let (mut record, _) = Record::resume(fs_store(&directory, &keys), run).await.expect("reopened");
        record.step("root.1.b", &step(Outcome::Passed), 8).await.expect("a step");
        drop(record);
        let appended = std::fs::read(&log).expect("the record's log")[written..].to_vec();
        std::fs::remove_dir_all(&directory).expect("cleared");
        copy_tree(&before, &directory);
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("the record's log");
        std::io::Write::write_all(&mut file, &appended[..appended.len() / 2]).expect("a torn tail");
        drop(file);
        let (mut record, recorded) = Record::resume(fs_store(&directory, &keys), run).await.expect("resumed");
        assert_eq!(recorded.header, Some(header(run)));
        assert!(recorded.steps.contains_key("root.1.a"));
        assert!(!recorded.steps.contains_key("root.1.b"), "the torn commit is not a step");
        assert_eq!(recorded.hooks.get("root.1@enter"), Some(&answer));
        assert!(!recorded.finished && recorded.paused.is_none());
        record.step("root.1.b", &step(Outcome::Failed), 8).await.expect("the next append");
        drop(record);
        let (_, again) = Record::resume(fs_store(&directory, &keys), run).await.expect("resumed again");
        assert!(again.steps.get("root.1.b").is_some_and(|step| step.outcome == Outcome::Failed));
        let _ = std::fs::remove_dir_all(&directory);
        let _ = std::fs::remove_dir_all(&before);
    }

    fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).expect("a directory");
        for entry in std::fs::read_dir(from).expect("a directory").flatten() {
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).expect("a copy");
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_walk_being_resumed_is_refused_to_a_second_process_as_busy() {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let run = "0123456789abcdef-01234567";
        let held = Record::create(store.clone(), &header(run), 1).await.expect("created");
        let second = Record::resume(store.clone(), run).await.err().map(|error| error.to_string());
        assert_eq!(
            second.as_deref(),
            Some(
                "the flow record `0123456789abcdef-01234567` cannot be used: session `0123456789abcdef-01234567` is \
                 in use by another process; try again when it finishes"
            )
        );
        drop(held);
        assert!(Record::resume(store, run).await.is_ok());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_pause_is_forgotten_once_a_later_step_is_recorded_and_the_end_closes_the_record() {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let run = "fedcba9876543210-76543210";
        let mut record = Record::create(store.clone(), &header(run), 1).await.expect("created");
        record.paused("root.1.review", 2).await.expect("paused");
        drop(record);
        let (mut record, recorded) = Record::resume(store.clone(), run).await.expect("resumed");
        assert_eq!(recorded.paused.as_deref(), Some("root.1.review"));
        let shown =
            store.read(run).await.ok().flatten().map(|state| (state.head.status_label(), state.head.updated_at));
        assert_eq!(shown, Some(("resumable", 2)), "a paused walk is never `running`");
        record.step("root.1.review", &step(Outcome::Passed), 3).await.expect("a step");
        record.finished(false, 4).await.expect("finished");
        drop(record);
        let state = store.read(run).await.ok().flatten().expect("the record");
        let recorded = read(run, &state).expect("reads");
        assert_eq!(recorded.paused, None);
        assert!(recorded.finished);
        assert_eq!(state.head.status, Status::Failed);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_changed_document_and_a_damaged_or_foreign_session_are_refused() {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let run = "0123456789abcdef-01234567";
        drop(Record::create(store.clone(), &header(run), 1).await.expect("created"));
        let changed = Header { digest: "other".into(), ..header(run) };
        let continuing = Continuing { input: None, operator: false };
        let refused =
            open(Some(store.clone()), &changed, Some(continuing), 2).await.err().map(|error| error.to_string());
        assert_eq!(
            refused.as_deref(),
            Some(
                "the flow record of `0123456789abcdef-01234567` was made from another document; resume it with the \
                 document it ran"
            )
        );
        let mut state = store.read(run).await.ok().flatten().expect("the record");
        state.variables.insert(format!("{STEP}root.1.a"), Variable { value: Value::from(3), locked: false });
        assert!(matches!(read(run, &state), Err(RecordError::Damaged { variable, .. }) if variable == "step root.1.a"));
        state.head.flow = None;
        assert!(matches!(read(run, &state), Err(RecordError::NotARecord(_))));
        let missing = open(Some(store), &header("0000000000000000-00000000"), Some(continuing), 2).await;
        assert!(matches!(missing, Err(OpenError::Record(RecordError::Missing(_)))));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_run_is_found_by_its_id_or_a_unique_start_and_an_ambiguous_start_lists_the_candidates() {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        for run in ["0123456789abcdef-01234567", "0123456789abcdef-01234568", "fedcba9876543210-76543210"] {
            drop(Record::create(store.clone(), &header(run), 1).await.expect("created"));
        }
        // A section attempt's session and a workflow session are not walks.
        let attempt = SessionState {
            id: SessionId::from_store("0123456789abcdef-01234569.root.1"),
            head: Head {
                flow: Some(FlowPart {
                    run: "x".into(),
                    path: Some("root".into()),
                    attempt: Some(1),
                    ..FlowPart::default()
                }),
                ..Head::default()
            },
            ..SessionState::default()
        };
        drop(store.create(&attempt).await.expect("an attempt"));
        let workflow =
            SessionState { id: SessionId::from_store("9999999999999999-99999999"), ..SessionState::default() };
        drop(store.create(&workflow).await.expect("a workflow session"));
        let store = store.as_ref();
        assert_eq!(find_run(store, "fe", "the store").await, Ok("fedcba9876543210-76543210".to_string()));
        assert_eq!(
            find_run(store, "0123456789abcdef-01234568", "the store").await,
            Ok("0123456789abcdef-01234568".to_string())
        );
        let ambiguous = find_run(store, "0123", "the store").await.map_err(|error| error.to_string());
        assert_eq!(
            ambiguous,
            Err("`0123` is the start of 2 flow-run ids: `0123456789abcdef-01234567` and \
                 `0123456789abcdef-01234568`; give more of the id"
                .to_string())
        );
        assert!(matches!(find_run(store, "9", "the store").await, Err(FindError::Unknown { .. })));
    }

    #[test]
    fn a_record_key_names_its_place_without_the_attempts() {
        assert_eq!(place_of("root.1.shape.2.specify"), "root.shape.specify");
        assert_eq!(place_of("root.3.publish"), "root.publish");
    }
}
