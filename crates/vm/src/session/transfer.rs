//! Moving a session between stores: `archmax sessions export ID > file` and
//! `archmax sessions import < file`.
//!
//! An export is JSON lines, one record a line, in this order: a `header` (format name and
//! version), the session's `state` (everything it is, through its last committed step),
//! the `spec` it is pinned to when the store keeps one, one `file` per file of its own
//! (`scratchpad/`, `artifacts/`, the offload zones; bytes in base64), and an `end` record
//! counting the files. Any store reads any store's export: the records use only the
//! [`SessionStore`] interface.
//!
//! The one thing to know: an import checks the whole export before it writes anything
//! (a missing `end`, a miscount, a file over the size caps, a bad id are refused), then
//! writes the files and the spec, and creates the session last, so a session that
//! exists after an import is whole. A failed import leaves nothing behind: the files it
//! wrote are removed, and on a store that keeps sessions on disk so is every folder it
//! created (the session's own, and any missing folder above it, `sessions/` included).
//! Only a process killed mid-import can leave files, in a folder with no session in it,
//! which no listing shows and the next import of that id overwrites. The history of steps is not carried: the state is
//! their fold, which is everything a session needs to continue (its seq included).

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use archmax_stdlib::limits;
use archmax_stdlib::vfs::{Vfs, VfsError};

use super::id::check_session_id;
use super::spec::PinnedSpec;
use super::{SessionState, SessionStore, StoreError};
use crate::blocking::run_blocking;

/// The `format` every export's header names.
pub const FORMAT: &str = "archmax-session";
/// The version of the record layout this build writes and reads.
pub const VERSION: u64 = 1;
/// A session's folder that belongs to the store, never exported (the filesystem store's
/// `checkpoints/`).
const RUNTIME_DIR: &str = "checkpoints";
/// The reserved session areas an export carries: the agent's scratchpad, the offload
/// zones and the artifacts. Any other reserved name (the runtime's `checkpoints/`, the
/// authoring plane), in any letter case, is refused on import.
const EXPORTED_AREAS: [&str; 4] = ["scratchpad", "large_tool_results", "conversation_history", "artifacts"];
/// The longest line an import reads: the largest file a session may hold, in base64,
/// with room for its path.
const MAX_LINE_BYTES: u64 = limits::MAX_FILE_BYTES / 3 * 4 + 64 * 1024;

/// One line of an export.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
enum Record {
    Header { format: String, version: u64 },
    State { state: Box<SessionState> },
    Spec { spec: PinnedSpec },
    File { path: String, base64: String },
    End { files: u64 },
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    pub seq: u64,
    pub files: u64,
    /// Whether the pinned spec was found and written.
    pub spec: bool,
}

/// What an import created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    pub id: String,
    pub seq: u64,
    pub files: u64,
}

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the session's file `{path}` could not be used: {source}")]
    File {
        path: String,
        #[source]
        source: VfsError,
    },
    #[error("writing the export failed: {0}")]
    Write(#[source] std::io::Error),
    #[error("the export is unusable (line {line}): {message}; nothing was imported")]
    Invalid { line: usize, message: String },
}

/// Writes session `id` of `store` to `out` as an export.
pub async fn export(
    store: &dyn SessionStore,
    id: &str,
    out: &mut (dyn Write + Send),
) -> Result<ExportSummary, TransferError> {
    let state = store.read(id).await?.ok_or_else(|| StoreError::Missing(id.to_string()))?;
    let spec = match state.head.spec_hash.as_str() {
        "" => None,
        hash => store.spec(hash).await.ok().flatten(),
    };
    let files = store.files(id)?;
    let paths = run_blocking(|| session_files(files.as_ref()))?;
    let mut line = |record: &Record| -> Result<(), TransferError> {
        let mut bytes = serde_json::to_vec(record).map_err(|error| TransferError::Write(error.into()))?;
        bytes.push(b'\n');
        out.write_all(&bytes).map_err(TransferError::Write)
    };
    line(&Record::Header { format: FORMAT.to_string(), version: VERSION })?;
    let seq = state.seq;
    line(&Record::State { state: Box::new(state) })?;
    let has_spec = spec.is_some();
    if let Some(spec) = spec {
        line(&Record::Spec { spec })?;
    }
    for path in &paths {
        let bytes =
            run_blocking(|| files.read(path)).map_err(|source| TransferError::File { path: path.clone(), source })?;
        line(&Record::File { path: path.clone(), base64: BASE64.encode(bytes) })?;
    }
    line(&Record::End { files: paths.len() as u64 })?;
    out.flush().map_err(TransferError::Write)?;
    Ok(ExportSummary { seq, files: paths.len() as u64, spec: has_spec })
}

/// Every file of a session's own, sorted, without the store's runtime folder.
fn session_files(files: &dyn Vfs) -> Result<Vec<String>, TransferError> {
    let mut found = Vec::new();
    let mut folders = vec![String::new()];
    while let Some(folder) = folders.pop() {
        let entries = match files.list(&folder) {
            Ok(entries) => entries,
            Err(VfsError::NotFound(_)) if folder.is_empty() => Vec::new(),
            Err(source) => return Err(TransferError::File { path: folder, source }),
        };
        for entry in entries {
            if folder.is_empty() && entry.name == RUNTIME_DIR {
                continue;
            }
            let path = if folder.is_empty() { entry.name } else { format!("{folder}/{}", entry.name) };
            if entry.is_dir {
                folders.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Reads an export from `input` and creates its session in `store`.
pub async fn import(
    store: &dyn SessionStore,
    input: &mut (dyn BufRead + Send),
) -> Result<ImportSummary, TransferError> {
    let parsed = parse(input)?;
    let id = parsed.state.id.to_string();
    if store.read(&id).await?.is_some() {
        return Err(StoreError::Exists(id).into());
    }
    let files = store.files(&id)?;
    let new_folder = run_blocking(|| first_missing_folder(store.local_dir(&id)));
    // Files first, the session last, so a session that exists is whole; if anything
    // fails, the files this import wrote are taken away again, and the folders it made.
    let undo = |written: &[(String, Vec<u8>)], folders_too: bool| {
        for (path, _) in written {
            let _ = run_blocking(|| files.remove(path));
        }
        if let Some(folder) = new_folder.as_ref().filter(|_| folders_too) {
            let _ = run_blocking(|| std::fs::remove_dir_all(folder));
        }
    };
    for (index, (path, bytes)) in parsed.files.iter().enumerate() {
        if let Err(source) = run_blocking(|| files.write(path, bytes)) {
            undo(&parsed.files[..=index], true);
            return Err(TransferError::File { path: path.clone(), source });
        }
    }
    let created = async {
        if let Some(spec) = &parsed.spec {
            store.keep_spec(spec).await?;
        }
        store.create(&parsed.state).await
    };
    match created.await {
        Ok(writer) => drop(writer),
        Err(error) => {
            // A session another process created meanwhile is theirs: only this
            // import's files go, never the folder.
            undo(&parsed.files, !matches!(error, StoreError::Exists(_)));
            return Err(error.into());
        }
    }
    Ok(ImportSummary { id, seq: parsed.state.seq, files: parsed.files.len() as u64 })
}

/// The outermost folder on the way to `dir` that does not exist yet (what an import
/// creates, and removes again when it fails); `None` when `dir` exists or the store
/// keeps no folders.
fn first_missing_folder(dir: Option<PathBuf>) -> Option<PathBuf> {
    let mut missing = None;
    let mut at = dir.as_deref();
    while let Some(path) = at {
        match std::fs::symlink_metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => missing = Some(path.to_path_buf()),
            _ => break,
        }
        at = path.parent();
    }
    missing
}

struct Parsed {
    state: SessionState,
    spec: Option<PinnedSpec>,
    files: Vec<(String, Vec<u8>)>,
}

/// Reads and checks a whole export; nothing is written until it passes.
fn parse(input: &mut (dyn BufRead + Send)) -> Result<Parsed, TransferError> {
    let mut state = None;
    let mut spec = None;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut total_bytes = 0u64;
    let mut line_number = 0;
    let mut ended = false;
    loop {
        let mut line = String::new();
        line_number += 1;
        let invalid = |message: String| TransferError::Invalid { line: line_number, message };
        let read = (&mut *input)
            .take(MAX_LINE_BYTES + 1)
            .read_line(&mut line)
            .map_err(|error| invalid(format!("it could not be read: {error}")))?;
        if read == 0 {
            break;
        }
        if read as u64 > MAX_LINE_BYTES {
            return Err(invalid(format!("a line is longer than {MAX_LINE_BYTES} bytes")));
        }
        if ended {
            return Err(invalid("there is more after the `end` record".to_string()));
        }
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(&line).map_err(|error| invalid(error.to_string()))?;
        match (line_number, record) {
            (1, Record::Header { format, version }) => {
                if format != FORMAT || version != VERSION {
                    return Err(invalid(format!(
                        "it is `{format}` version {version}; this archmax reads `{FORMAT}` version {VERSION}"
                    )));
                }
            }
            (1, _) => return Err(invalid("it does not start with an archmax session header".to_string())),
            (_, Record::Header { .. }) => return Err(invalid("a second header".to_string())),
            (_, Record::State { state: found }) => {
                if state.is_some() {
                    return Err(invalid("a second state".to_string()));
                }
                check_session_id(&found.id, &[]).map_err(invalid)?;
                state = Some(*found);
            }
            (_, Record::Spec { spec: found }) => {
                if !super::spec::is_spec_hash(&found.spec_hash) {
                    return Err(invalid(format!("the spec hash `{}` is not lowercase hexadecimal", found.spec_hash)));
                }
                spec = Some(found);
            }
            (_, Record::File { path, base64 }) => {
                let bytes = BASE64.decode(base64.as_bytes()).map_err(|error| invalid(format!("`{path}`: {error}")))?;
                // Canonical first (so `./checkpoints/seal` is `checkpoints/seal`), then a
                // reserved first segment must be one of the areas an export carries.
                let path = archmax_program::zones::canonicalize(&path)
                    .ok()
                    .filter(|canonical| !canonical.is_empty() && !path.starts_with('/'))
                    .filter(|canonical| {
                        let top = canonical.split('/').next().unwrap_or_default();
                        match archmax_program::zones::session_root(top) {
                            Some(area) => area.name == top && EXPORTED_AREAS.contains(&top),
                            None => true,
                        }
                    })
                    .ok_or_else(|| invalid(format!("the file path `{path}` is not one of the session's own")))?;
                if bytes.len() as u64 > limits::MAX_FILE_BYTES {
                    return Err(invalid(format!("`{path}` is larger than {} bytes", limits::MAX_FILE_BYTES)));
                }
                total_bytes += bytes.len() as u64;
                if total_bytes > limits::MAX_SESSION_BYTES || files.len() >= limits::MAX_SESSION_FILES {
                    return Err(invalid("the files are over a session's size caps".to_string()));
                }
                files.push((path, bytes));
            }
            (_, Record::End { files: count }) => {
                if count != files.len() as u64 {
                    return Err(invalid(format!(
                        "the end record counts {count} files, the export holds {}",
                        files.len()
                    )));
                }
                ended = true;
            }
        }
    }
    let incomplete = |message: &str| TransferError::Invalid { line: line_number, message: message.to_string() };
    if !ended {
        return Err(incomplete("it stops before its `end` record (a cut-off export?)"));
    }
    let state = state.ok_or_else(|| incomplete("it holds no session state"))?;
    Ok(Parsed { state, spec, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export_with(path: &str) -> String {
        let state = SessionState { id: super::super::id::SessionId::from_store("s1"), ..SessionState::default() };
        let lines = [
            serde_json::to_string(&Record::Header { format: FORMAT.to_string(), version: VERSION }),
            serde_json::to_string(&Record::State { state: Box::new(state) }),
            serde_json::to_string(&Record::File { path: path.to_string(), base64: BASE64.encode(b"x") }),
            serde_json::to_string(&Record::End { files: 1 }),
        ];
        lines.into_iter().map(|line| line.expect("a record") + "\n").collect()
    }

    #[test]
    fn an_import_refuses_files_outside_the_areas_an_export_carries() {
        for path in [
            "./checkpoints/seal",
            "checkpoints/seal",
            "Checkpoints/seal",
            "scratchpad/../checkpoints/log",
            "../outside",
            "/etc/passwd",
            "workflows/w/workflow.yaml",
            "_specs/abc.json",
            "",
        ] {
            let text = export_with(path);
            let refused = parse(&mut text.as_bytes());
            assert!(matches!(refused, Err(TransferError::Invalid { .. })), "{path:?} was accepted");
        }
    }

    /// Every path under `dir` with its bytes (folders as `None`), sorted.
    fn tree(dir: &std::path::Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(path) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    found.push((path.clone(), None));
                    stack.push(path);
                } else {
                    found.push((path.clone(), std::fs::read(&path).ok()));
                }
            }
        }
        found.sort();
        found
    }

    fn export_of(id: &str, spec: Option<&str>, files: &[(&str, &[u8])], end: usize) -> String {
        let state = SessionState { id: super::super::id::SessionId::from_store(id), ..SessionState::default() };
        let mut records = vec![
            Record::Header { format: FORMAT.to_string(), version: VERSION },
            Record::State { state: Box::new(state) },
        ];
        if let Some(hash) = spec {
            records.push(Record::Spec {
                spec: PinnedSpec { workflow: "w".into(), spec_hash: hash.into(), states: Vec::new() },
            });
        }
        for (path, bytes) in files {
            records.push(Record::File { path: path.to_string(), base64: BASE64.encode(bytes) });
        }
        records.push(Record::End { files: end as u64 });
        records.iter().map(|record| serde_json::to_string(record).expect("a record") + "\n").collect()
    }

    #[test]
    fn a_failed_import_leaves_the_sessions_folder_exactly_as_it_was() {
        use super::super::fs::{FsStore, SealKeys};
        let root = std::env::temp_dir().join(format!("archmax-import-undo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("scratch");
        let store = FsStore::new(root.join("sessions"), SealKeys::generate().expect("a key"));
        let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let import_text = |text: String| executor.block_on(import(&store, &mut text.as_bytes()));

        // Into a store folder that does not exist yet: a file write fails midway (the
        // second file's folder is the first file), after the session folder was made.
        let writes_fail = [("scratchpad/a", &b"1"[..]), ("scratchpad/a/b", &b"2"[..])];
        let before = tree(&root);
        let refused = import_text(export_of("s1", None, &writes_fail, 2));
        assert!(matches!(refused, Err(TransferError::File { .. })), "{refused:?}");
        assert_eq!(tree(&root), before, "the failed import left files or folders behind");

        // Beside an existing session, under an id with a folder of its own (`tenant/`).
        let existing = SessionState { id: super::super::id::SessionId::from_store("kept"), ..SessionState::default() };
        drop(executor.block_on(store.create(&existing)).expect("an existing session"));
        let before = tree(&root);
        assert!(import_text(export_of("tenant/s2", None, &writes_fail, 2)).is_err());
        assert_eq!(tree(&root), before, "a nested id's folders were left behind");

        // An invalid file in the middle of the archive: refused before anything is written.
        let invalid = [("scratchpad/a", &b"1"[..]), ("checkpoints/seal", &b"x"[..]), ("artifacts/c", &b"3"[..])];
        assert!(matches!(import_text(export_of("s3", None, &invalid, 3)), Err(TransferError::Invalid { .. })));
        assert_eq!(tree(&root), before);

        // Every file written, then the spec cannot be kept (its folder is a file).
        std::fs::write(root.join("sessions/_specs"), b"not a folder").expect("a blocking file");
        let before = tree(&root);
        let files = [("scratchpad/a", &b"1"[..]), ("artifacts/b", &b"2"[..])];
        assert!(import_text(export_of("s4", Some("ab12"), &files, 2)).is_err());
        assert_eq!(tree(&root), before, "a failed spec left the session's files behind");

        // And the same export imports whole once nothing stands in its way.
        std::fs::remove_file(root.join("sessions/_specs")).expect("unblock");
        let summary = import_text(export_of("s4", Some("ab12"), &files, 2)).expect("import");
        assert_eq!(summary.files, 2);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_import_keeps_the_session_areas_canonically() {
        for (path, kept) in [
            ("scratchpad/notes.md", "scratchpad/notes.md"),
            ("./scratchpad//notes.md", "scratchpad/notes.md"),
            ("large_tool_results/call-1", "large_tool_results/call-1"),
            ("artifacts/report.pdf", "artifacts/report.pdf"),
        ] {
            let text = export_with(path);
            let parsed = parse(&mut text.as_bytes()).unwrap_or_else(|error| panic!("{path}: {error}"));
            assert_eq!(parsed.files[0].0, kept);
        }
    }
}
