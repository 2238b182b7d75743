//! The old layout of a walk's files, imported into the session store once.
//!
//! Builds before flows moved into the session store kept them in a folder of the
//! workspace, `.archmax-flows/`: one `<flow-run-id>.flow.jsonl` record per walk (a header
//! line, then a line per finished step, hook answer, pause and end) and one
//! `<session>.json` per section attempt. [`import`] reads every one of them, and only
//! when all read does it write them to the store (each as one session, made in one
//! commit) and then rename the folder to `.archmax-flows.imported`, which marks the import
//! done. A crash before the rename leaves the folder in place; the next import skips what
//! the store already holds and finishes. A file that does not read refuses the whole
//! import, naming the file, before anything is written.
//!
//! The one thing to know: **the folder is renamed only after every session was
//! committed**, so the old files are never the only copy lost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use archmax_vm::session::id::{SessionId, check_session_id};
use archmax_vm::session::{FlowPart, Head, Message, SessionState, SessionStore, Status, StoreError, Variable};

use crate::hooks::HookAnswer;
use crate::record::{Header, RecordedStep, is_run_id};
use crate::step::Spend;

/// The old layout's folder, in the workspace.
pub const LEGACY_DIR: &str = ".archmax-flows";

/// What the folder is renamed to once its import committed.
pub const IMPORTED_DIR: &str = ".archmax-flows.imported";

/// The last commit whose `archmax` keeps flows in the old layout: a build of it finishes
/// such a walk where it stands.
pub const LAST_OLD_LAYOUT_COMMIT: &str = "a127c9e";

/// One line of an old record.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Header(Header),
    Step { key: String, step: RecordedStep },
    Hook { key: String, answer: HookAnswer },
    Paused { key: String },
    Finished { clean: bool },
}

/// An old section attempt's session file.
#[derive(Deserialize)]
struct OldSession {
    id: String,
    flow: String,
    run: String,
    scope: String,
    attempt: u32,
    failed: bool,
    spend: Spend,
    messages: Vec<Message>,
}

/// Why the old folder cannot be imported: nothing was written, the folder is as it was.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(
        "`{file}` cannot be imported into the session store: {problem}. Nothing was imported and `{LEGACY_DIR}` is \
         as it was; finish its walks with an archmax built from commit {LAST_OLD_LAYOUT_COMMIT} or earlier \
         (`archmax flow run FLOW --resume RUN --session-dir {LEGACY_DIR}`), or move the folder away to go on \
         without them"
    )]
    Unreadable { file: String, problem: String },
    #[error("the import of `{LEGACY_DIR}` stopped at `{id}`: {error}; run again to finish it")]
    Store { id: String, error: StoreError },
    #[error("the import of `{LEGACY_DIR}` committed, but the folder cannot be renamed to mark it done: {0}")]
    Rename(std::io::Error),
}

/// What an import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// Walk records and attempt sessions written now (those the store held are skipped).
    pub records: usize,
    pub sessions: usize,
    /// Where the folder went.
    pub renamed_to: PathBuf,
}

/// Imports `<workspace>/.archmax-flows` into `store` if the folder is there; `None` when
/// there is nothing to import.
pub async fn import(
    workspace: &Path,
    store: Arc<dyn SessionStore>,
    now_ms: u64,
) -> Result<Option<Imported>, ImportError> {
    let folder = workspace.join(LEGACY_DIR);
    if !folder.is_dir() {
        return Ok(None);
    }
    let states = read_folder(&folder)?;
    let mut imported = Imported::default();
    for (state, is_record) in states {
        let id = state.id.to_string();
        let stamped = stamp(state, now_ms);
        match store.create(&stamped).await {
            Ok(_) if is_record => imported.records += 1,
            Ok(_) => imported.sessions += 1,
            // Written by an import that stopped before its rename.
            Err(StoreError::Exists(_)) => {}
            Err(error) => return Err(ImportError::Store { id, error }),
        }
    }
    let renamed_to = free_name(workspace);
    std::fs::rename(&folder, &renamed_to).map_err(ImportError::Rename)?;
    imported.renamed_to = renamed_to;
    Ok(Some(imported))
}

/// `.archmax-flows.imported`, or the first of `….2`, `….3` that is free.
fn free_name(workspace: &Path) -> PathBuf {
    let first = workspace.join(IMPORTED_DIR);
    if !first.exists() {
        return first;
    }
    (2u32..).map(|n| workspace.join(format!("{IMPORTED_DIR}.{n}"))).find(|path| !path.exists()).unwrap_or(first)
}

fn stamp(mut state: SessionState, now_ms: u64) -> SessionState {
    state.head.created_at = now_ms;
    state.head.updated_at = now_ms;
    state
}

/// Every session the folder holds, attempts first, each checked; `(state, is_record)`.
fn read_folder(folder: &Path) -> Result<Vec<(SessionState, bool)>, ImportError> {
    let unreadable = |file: &Path, problem: String| ImportError::Unreadable {
        file: format!("{LEGACY_DIR}/{}", file.file_name().map(|name| name.to_string_lossy()).unwrap_or_default()),
        problem,
    };
    let entries = std::fs::read_dir(folder).map_err(|error| unreadable(folder, error.to_string()))?;
    let mut files: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    files.sort();
    let mut attempts = Vec::new();
    let mut records = Vec::new();
    for file in files {
        let name = file.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(run) = name.strip_suffix(".flow.jsonl") {
            let text = std::fs::read_to_string(&file).map_err(|error| unreadable(&file, error.to_string()))?;
            records.push((record_state(run, &text).map_err(|problem| unreadable(&file, problem))?, true));
        } else if let Some(id) = name.strip_suffix(".json") {
            let text = std::fs::read_to_string(&file).map_err(|error| unreadable(&file, error.to_string()))?;
            attempts.push((attempt_state(id, &text).map_err(|problem| unreadable(&file, problem))?, false));
        }
    }
    attempts.extend(records);
    Ok(attempts)
}

/// An old record as a record session ([`crate::record`]'s shape).
fn record_state(run: &str, text: &str) -> Result<SessionState, String> {
    if !is_run_id(run) {
        return Err("its name is not a flow-run id".to_string());
    }
    // A line is whole only when its newline was written; the last one may be torn.
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut variables = BTreeMap::new();
    let mut header: Option<Header> = None;
    let mut paused = None;
    let mut finished = None;
    for (index, line) in whole.lines().enumerate() {
        let parsed: Line = serde_json::from_str(line)
            .map_err(|error| format!("line {} is not a line of a flow record ({error})", index + 1))?;
        match parsed {
            Line::Header(found) => header = Some(found),
            Line::Step { key, step } => {
                variables.insert(format!("step {key}"), value(&step));
                paused = None;
            }
            Line::Hook { key, answer } => {
                variables.insert(format!("hook {key}"), value(&answer));
            }
            Line::Paused { key } => paused = Some(key),
            Line::Finished { clean } => finished = Some(clean),
        }
    }
    let header = header.ok_or_else(|| "it has no header line".to_string())?;
    if header.run != run {
        return Err(format!("its header names the run `{}`, not `{run}`", header.run));
    }
    variables.insert("header".to_string(), value(&header));
    Ok(SessionState {
        id: SessionId::from_store(run),
        head: Head {
            workflow: header.flow.clone(),
            status: if finished == Some(false) { Status::Failed } else { Status::Completed },
            resumable: finished.is_none(),
            flow: Some(FlowPart { run: run.to_string(), paused, ..FlowPart::default() }),
            ..Head::default()
        },
        variables,
        ..SessionState::default()
    })
}

/// An old attempt's session file as an attempt session.
fn attempt_state(id: &str, text: &str) -> Result<SessionState, String> {
    let old: OldSession =
        serde_json::from_str(text).map_err(|error| format!("it is not a flow session's file ({error})"))?;
    if old.id != id {
        return Err(format!("it holds the session `{}`, not `{id}`", old.id));
    }
    check_session_id(id, &[])?;
    if !is_run_id(&old.run) || !id.starts_with(&format!("{}.", old.run)) {
        return Err(format!("its run `{}` is not the start of its id", old.run));
    }
    // The same session a walk files for an attempt; `stamp` gives it the import's time.
    Ok(crate::walk::attempt_session(
        &old.flow,
        &old.run,
        id,
        &old.scope,
        old.attempt,
        old.failed,
        &old.messages,
        old.spend,
        0,
    ))
}

fn value<T: serde::Serialize>(line: &T) -> Variable {
    Variable { value: serde_json::to_value(line).unwrap_or(Value::Null), locked: false }
}

#[cfg(test)]
mod tests;
