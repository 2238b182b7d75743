//! The filesystem session store: the default, durable home of sessions.
//!
//! Each session lives in `<dir>/<id>/`. The runtime's own files sit in its
//! `checkpoints/` folder, a zone no tool call can reach: `checkpoint.json` (a compacted
//! snapshot, `{"seq": n, "state": …}`, replaced atomically), `log` (one framed, fsync'ed
//! record per committed [`Delta`] after the snapshot) and `lock` (held by the one
//! writer). Beside it are the session's own folders `scratchpad/` and `artifacts/`.
//!
//! The one thing to know: **a commit appends only the step's delta**, so its cost does
//! not grow with the session. The state is the snapshot plus the log's records with a
//! higher seq; the log is folded into a new snapshot when it outgrows the last one (and
//! 64 KiB), which keeps both the per-step cost (amortised) and the load time bounded.
//!
//! A log record is `<u32 payload length LE><u32 CRC-32 of payload LE><u32 CRC-32 of
//! the previous 8 bytes LE><payload>`, the payload being the delta as JSON. A record
//! torn by a crash can only be the last one; it is dropped on load and cut off the next
//! time the session is opened for writing. Damage anywhere else is
//! [`StoreError::Corrupt`].

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{Delta, SessionState, SessionStore, SessionWriter, StoreError};

/// The store's directory under the workspace root.
pub const DEFAULT_SESSIONS_DIR: &str = "sessions";

/// The folder of a session that holds the runtime's own files. It is a runtime-internal
/// zone: the kernel refuses every tool call into it and listings never show it.
const RUNTIME_DIR: &str = "checkpoints";
const LOG_FILE: &str = "log";
const CHECKPOINT_FILE: &str = "checkpoint.json";
const LOCK_FILE: &str = "lock";
const CHECKPOINT_TEMP_PREFIX: &str = "checkpoint.json.";
const CHECKPOINT_TEMP_SUFFIX: &str = ".tmp";
/// Folders every session owns.
const SESSION_FOLDERS: [&str; 3] = [RUNTIME_DIR, "scratchpad", "artifacts"];
/// The log is never compacted below this size, so small sessions are not rewritten often.
const MIN_COMPACTION_LOG_BYTES: u64 = 64 * 1024;
const RECORD_HEADER_BYTES: usize = 12;
/// How deep `list` looks for sessions whose ids contain `/`.
const MAX_LISTED_ID_SEGMENTS: usize = 100;
/// How often `read` retries when a writer replaced the snapshot while it was loading.
const READ_ATTEMPTS: usize = 8;

/// Sessions as folders under `dir`.
#[derive(Clone, Debug)]
pub struct FsStore {
    pub dir: PathBuf,
}

impl FsStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default store of a workspace: `<root>/sessions/`.
    pub fn for_workspace(root: &Path) -> Self {
        Self::new(root.join(DEFAULT_SESSIONS_DIR))
    }

    /// Creates a session (writing its first state as the snapshot) and returns its
    /// concrete writer.
    pub fn create_writer(&self, state: &SessionState) -> Result<FsWriter, StoreError> {
        let id = state.id.as_str();
        let session_path = self.session_path(id)?;
        fs::create_dir_all(session_path.join(RUNTIME_DIR)).map_err(io_error(id))?;
        let lock = take_lock(id, &session_path)?;
        for file in [LOG_FILE, CHECKPOINT_FILE] {
            if session_path.join(RUNTIME_DIR).join(file).try_exists().map_err(io_error(id))? {
                return Err(StoreError::Exists(id.to_string()));
            }
        }
        create_session_folders(id, &session_path)?;
        let snapshot_len = write_checkpoint(id, &session_path, state)?;
        let log = open_log(id, &session_path)?;
        sync_dir(&session_path).map_err(io_error(id))?;
        if let Some(parent) = session_path.parent() {
            sync_dir(parent).map_err(io_error(id))?;
        }
        FsWriter::new(id, session_path, lock, log, state.clone(), snapshot_len)
    }

    /// Opens a session for writing: takes its lock, loads it, cuts a torn tail off its
    /// log, and returns the state with the concrete writer.
    pub fn open_writer(&self, id: &str) -> Result<(SessionState, FsWriter), StoreError> {
        let session_path = self.session_path(id)?;
        if !session_path.join(RUNTIME_DIR).is_dir() {
            return Err(StoreError::Missing(id.to_string()));
        }
        let lock = take_lock(id, &session_path)?;
        remove_stale_checkpoint_temps(&session_path);
        let loaded = load(id, &session_path)?.ok_or_else(|| StoreError::Missing(id.to_string()))?;
        create_session_folders(id, &session_path)?;
        let log = open_log(id, &session_path)?;
        let on_disk_len = log.metadata().map_err(io_error(id))?.len();
        if on_disk_len != loaded.log_good_len {
            log.set_len(loaded.log_good_len).map_err(io_error(id))?;
            log.sync_data().map_err(io_error(id))?;
        }
        let writer = FsWriter::new(id, session_path, lock, log, loaded.state.clone(), loaded.checkpoint_len)?;
        Ok((loaded.state, writer))
    }

    /// `<dir>/<id>`, refusing ids that are not a plain relative path (which could reach
    /// outside the store); callers are expected to have checked ids already.
    fn session_path(&self, id: &str) -> Result<PathBuf, StoreError> {
        let plain_segments = !id.is_empty()
            && !id.contains(['\\', '\0'])
            && id.split('/').all(|segment| !segment.is_empty() && segment != "." && segment != "..");
        let plain_path = Path::new(id).components().all(|component| matches!(component, Component::Normal(_)));
        if plain_segments && plain_path {
            Ok(self.dir.join(id))
        } else {
            Err(StoreError::Io {
                id: id.to_string(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "a session id must be a plain relative path"),
            })
        }
    }
}

impl SessionStore for FsStore {
    fn create(&self, state: &SessionState) -> Result<Box<dyn SessionWriter>, StoreError> {
        Ok(Box::new(self.create_writer(state)?))
    }

    fn open(&self, id: &str) -> Result<(SessionState, Box<dyn SessionWriter>), StoreError> {
        let (state, writer) = self.open_writer(id)?;
        Ok((state, Box::new(writer)))
    }

    /// Loads without the lock. A writer may replace the snapshot and cut the log
    /// meanwhile, so the load is retried until the snapshot stayed the same throughout.
    fn read(&self, id: &str) -> Result<Option<SessionState>, StoreError> {
        let session_path = self.session_path(id)?;
        let checkpoint_path = session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE);
        let mut attempts_left = READ_ATTEMPTS;
        loop {
            let before = FileStamp::of(&checkpoint_path).map_err(io_error(id))?;
            let loaded = load(id, &session_path);
            let after = FileStamp::of(&checkpoint_path).map_err(io_error(id))?;
            attempts_left -= 1;
            if before == after || attempts_left == 0 {
                return loaded.map(|loaded| loaded.map(|loaded| loaded.state));
            }
        }
    }

    fn list(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        collect_session_ids(&self.dir, "", &mut ids).map_err(io_error(&self.dir.display().to_string()))?;
        ids.sort();
        Ok(ids)
    }

    fn session_dir(&self, id: &str) -> Option<PathBuf> {
        self.session_path(id).ok()
    }
}

/// Commits steps to one session of an [`FsStore`]; holds the session's lock until dropped.
///
/// It keeps its own copy of the state (to write snapshots without reading the log back)
/// and what it expects on disk, so a commit can tell, in O(1), that another writer
/// wrote behind its back.
pub struct FsWriter {
    id: String,
    session_path: PathBuf,
    log: File,
    lock: File,
    state: SessionState,
    /// The log's length after this writer's last write.
    log_len: u64,
    log_inode: u64,
    checkpoint: FileStamp,
    /// The size of the last snapshot, which the log must outgrow before compaction.
    snapshot_len: u64,
    /// Why the writer can no longer be trusted, after a failed write.
    broken: Option<String>,
}

impl FsWriter {
    fn new(
        id: &str,
        session_path: PathBuf,
        lock: File,
        log: File,
        state: SessionState,
        snapshot_len: u64,
    ) -> Result<Self, StoreError> {
        let log_stamp = FileStamp::of_file(&log).map_err(io_error(id))?;
        let checkpoint = FileStamp::of(&session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE))
            .map_err(io_error(id))?
            .ok_or_else(|| corrupt(id, "checkpoint.json vanished while opening".to_string()))?;
        Ok(Self {
            id: id.to_string(),
            session_path,
            log,
            lock,
            state,
            log_len: log_stamp.len,
            log_inode: log_stamp.inode,
            checkpoint,
            snapshot_len,
            broken: None,
        })
    }

    /// The seq of the last committed step.
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// The session as committed so far.
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// The log's size in bytes.
    pub fn log_len(&self) -> u64 {
        self.log_len
    }

    /// The last snapshot's size in bytes.
    pub fn snapshot_len(&self) -> u64 {
        self.snapshot_len
    }

    /// Folds the log into a fresh snapshot now (commits do this on their own when due).
    pub fn compact(&mut self) -> Result<(), StoreError> {
        self.ensure_usable()?;
        self.ensure_disk_unchanged()?;
        let written = write_checkpoint(&self.id, &self.session_path, &self.state);
        // Whether or not the new snapshot landed, both candidates agree with the log.
        let refreshed = FileStamp::of(&self.session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE));
        match refreshed {
            Ok(Some(stamp)) => self.checkpoint = stamp,
            Ok(None) => return Err(self.mark_broken(io::Error::other("checkpoint.json vanished"))),
            Err(error) => return Err(self.mark_broken(error)),
        }
        self.snapshot_len = written?;
        // Every record is now at or below the snapshot's seq: redundant, so cut them.
        if let Err(error) = self.log.set_len(0).and_then(|()| self.log.sync_data()) {
            return Err(self.mark_broken(error));
        }
        self.log_len = 0;
        Ok(())
    }

    fn compaction_due(&self) -> bool {
        self.log_len > self.snapshot_len.max(MIN_COMPACTION_LOG_BYTES)
    }

    fn ensure_usable(&self) -> Result<(), StoreError> {
        match &self.broken {
            None => Ok(()),
            Some(reason) => Err(StoreError::Io {
                id: self.id.clone(),
                source: io::Error::other(format!("{reason}; reopen the session to continue")),
            }),
        }
    }

    /// Refuses when the log or snapshot on disk is not what this writer left there.
    fn ensure_disk_unchanged(&self) -> Result<(), StoreError> {
        let log_stamp =
            FileStamp::of(&self.session_path.join(RUNTIME_DIR).join(LOG_FILE)).map_err(io_error(&self.id))?;
        let checkpoint_stamp =
            FileStamp::of(&self.session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE)).map_err(io_error(&self.id))?;
        let log_unchanged = log_stamp.is_some_and(|log| log.len == self.log_len && log.inode == self.log_inode);
        if log_unchanged && checkpoint_stamp == Some(self.checkpoint) {
            return Ok(());
        }
        match load(&self.id, &self.session_path) {
            Ok(None) => Err(StoreError::Missing(self.id.clone())),
            Ok(Some(loaded)) => {
                Err(StoreError::Conflict { id: self.id.clone(), expected: self.state.seq, found: loaded.state.seq })
            }
            Err(StoreError::Corrupt { .. }) => {
                Err(StoreError::Conflict { id: self.id.clone(), expected: self.state.seq, found: self.state.seq })
            }
            Err(error) => Err(error),
        }
    }

    fn append(&mut self, delta: &Delta) -> Result<(), StoreError> {
        let payload = serde_json::to_vec(delta).map_err(|error| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        })?;
        let record = encode_record(&payload).ok_or_else(|| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the step is larger than 4 GiB"),
        })?;
        if let Err(error) = self.log.write_all(&record).and_then(|()| self.log.sync_data()) {
            // Best effort: leave no partial record behind; a reopen would cut it anyway.
            let _ = self.log.set_len(self.log_len);
            return Err(self.mark_broken(error));
        }
        self.log_len += record.len() as u64;
        Ok(())
    }

    fn mark_broken(&mut self, error: io::Error) -> StoreError {
        self.broken = Some(format!("an earlier write failed ({error})"));
        StoreError::Io { id: self.id.clone(), source: error }
    }

    /// Lets tests play a second process that took the lock behind this writer's back.
    #[cfg(test)]
    fn release_lock_for_tests(&self) {
        let _ = self.lock.unlock();
    }
}

impl SessionWriter for FsWriter {
    /// Checks the seq and the disk, compacts when due (so a failed compaction leaves the
    /// step unwritten), appends the delta's record and syncs it.
    fn commit(&mut self, delta: &Delta) -> Result<(), StoreError> {
        self.ensure_usable()?;
        if Some(delta.seq) != self.state.seq.checked_add(1) {
            return Err(StoreError::Conflict {
                id: self.id.clone(),
                expected: delta.seq.saturating_sub(1),
                found: self.state.seq,
            });
        }
        self.ensure_disk_unchanged()?;
        if self.compaction_due() {
            self.compact()?;
        }
        self.append(delta)?;
        self.state.apply(delta);
        Ok(())
    }
}

impl Drop for FsWriter {
    /// Closing the file would release the lock too; unlocking says so.
    fn drop(&mut self) {
        let _ = self.lock.unlock();
    }
}

impl std::fmt::Debug for FsWriter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FsWriter")
            .field("id", &self.id)
            .field("seq", &self.state.seq)
            .field("log_len", &self.log_len)
            .field("snapshot_len", &self.snapshot_len)
            .finish_non_exhaustive()
    }
}

/// What a session's files add up to.
struct LoadedSession {
    state: SessionState,
    /// Where the last intact log record ends; anything after it is a torn tail.
    log_good_len: u64,
    checkpoint_len: u64,
}

#[derive(Deserialize)]
struct StoredCheckpoint {
    seq: u64,
    state: SessionState,
}

#[derive(Serialize)]
struct CheckpointToStore<'a> {
    seq: u64,
    state: &'a SessionState,
}

/// Loads a session: the snapshot, then the log records above its seq. `None` when the
/// folder holds neither.
fn load(id: &str, session_path: &Path) -> Result<Option<LoadedSession>, StoreError> {
    let checkpoint = read_if_exists(&session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE)).map_err(io_error(id))?;
    let log = read_if_exists(&session_path.join(RUNTIME_DIR).join(LOG_FILE)).map_err(io_error(id))?;
    let Some(checkpoint) = checkpoint else {
        return match log {
            None => Ok(None),
            Some(_) => Err(corrupt(id, "it has a step log but no checkpoint.json".to_string())),
        };
    };
    let stored: StoredCheckpoint = serde_json::from_slice(&checkpoint)
        .map_err(|error| corrupt(id, format!("checkpoint.json is not a valid checkpoint ({error})")))?;
    if stored.state.seq != stored.seq {
        return Err(corrupt(
            id,
            format!("checkpoint.json says step {} but its state is at step {}", stored.seq, stored.state.seq),
        ));
    }
    if stored.state.id != id {
        return Err(corrupt(id, format!("checkpoint.json belongs to session `{}`", stored.state.id)));
    }
    let mut state = stored.state;
    let log_good_len = replay_log(id, log.as_deref().unwrap_or_default(), &mut state)?;
    Ok(Some(LoadedSession { state, log_good_len, checkpoint_len: checkpoint.len() as u64 }))
}

/// Applies the log's records above the state's seq; returns where the intact records end.
fn replay_log(id: &str, log: &[u8], state: &mut SessionState) -> Result<u64, StoreError> {
    let mut offset = 0;
    let mut previous_seq: Option<u64> = None;
    while offset < log.len() {
        let (payload, end) = match read_record(log, offset) {
            RecordRead::Intact { payload, end } => (payload, end),
            RecordRead::TornTail => break,
            RecordRead::Damaged(what) => return Err(corrupt(id, format!("the log record at byte {offset} {what}"))),
        };
        let delta: Delta = serde_json::from_slice(payload)
            .map_err(|error| corrupt(id, format!("the log record at byte {offset} is not a step ({error})")))?;
        match previous_seq {
            Some(previous) if Some(delta.seq) != previous.checked_add(1) => {
                return Err(corrupt(
                    id,
                    format!("the log record at byte {offset} holds step {} after step {previous}", delta.seq),
                ));
            }
            None if delta.seq > state.seq.saturating_add(1) => {
                return Err(corrupt(
                    id,
                    format!("the log starts at step {} but checkpoint.json ends at step {}", delta.seq, state.seq),
                ));
            }
            _ => {}
        }
        previous_seq = Some(delta.seq);
        if delta.seq > state.seq {
            state.apply(&delta);
        }
        offset = end;
    }
    Ok(offset as u64)
}

/// One record, read from `offset`.
enum RecordRead<'a> {
    Intact {
        payload: &'a [u8],
        end: usize,
    },
    /// What a crash mid-append leaves: to be dropped.
    TornTail,
    /// Damage a crash cannot explain, saying what is wrong.
    Damaged(&'static str),
}

/// Frames `payload` as a log record; `None` when it is too long for the length field.
fn encode_record(payload: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(payload.len()).ok()?;
    let mut record = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&crc32(payload).to_le_bytes());
    let header_crc = crc32(&record);
    record.extend_from_slice(&header_crc.to_le_bytes());
    record.extend_from_slice(payload);
    Some(record)
}

/// Reads the record at `offset`, telling a torn tail (a prefix of the last append, or
/// an append whose bytes never reached the disk and read as zeros) from damage.
fn read_record(log: &[u8], offset: usize) -> RecordRead<'_> {
    let Some(header) = log.get(offset..offset.saturating_add(RECORD_HEADER_BYTES)) else {
        return RecordRead::TornTail;
    };
    if let Some((payload, end)) = intact_record_at(log, offset) {
        return RecordRead::Intact { payload, end };
    }
    if !header_is_intact(header) {
        if header.iter().all(|&byte| byte == 0) && !intact_record_after(log, offset) {
            return RecordRead::TornTail;
        }
        return RecordRead::Damaged("has a damaged header");
    }
    let payload_len = le_u32(header, 0).map_or(usize::MAX, |len| len as usize);
    match offset.checked_add(RECORD_HEADER_BYTES).and_then(|start| start.checked_add(payload_len)) {
        Some(end) if end < log.len() => RecordRead::Damaged("fails its checksum"),
        // Incomplete, or complete but the last record: the final append did not land whole.
        _ => RecordRead::TornTail,
    }
}

/// The payload and end of the record at `offset` when both checksums hold.
fn intact_record_at(log: &[u8], offset: usize) -> Option<(&[u8], usize)> {
    let header = log.get(offset..offset.checked_add(RECORD_HEADER_BYTES)?)?;
    if !header_is_intact(header) {
        return None;
    }
    let start = offset + RECORD_HEADER_BYTES;
    let end = start.checked_add(usize::try_from(le_u32(header, 0)?).ok()?)?;
    let payload = log.get(start..end)?;
    (crc32(payload) == le_u32(header, 4)?).then_some((payload, end))
}

/// Whether any intact record starts after `offset`. Linear: the header checksum
/// rejects almost every position before the payload's is computed.
fn intact_record_after(log: &[u8], offset: usize) -> bool {
    (offset + 1..log.len()).any(|candidate| intact_record_at(log, candidate).is_some())
}

fn header_is_intact(header: &[u8]) -> bool {
    match (header.get(..8), le_u32(header, 8)) {
        (Some(covered), Some(header_crc)) => crc32(covered) == header_crc,
        _ => false,
    }
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(word))
}

const CRC32_TABLE: [u32; 256] = crc32_table();

/// The CRC-32/IEEE table (reflected polynomial 0xEDB88320).
const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut index = 0;
    while index < 256 {
        let mut value = index as u32;
        let mut bit = 0;
        while bit < 8 {
            value = if value & 1 == 1 { 0xEDB8_8320 ^ (value >> 1) } else { value >> 1 };
            bit += 1;
        }
        table[index] = value;
        index += 1;
    }
    table
}

/// CRC-32/IEEE, as used by zip, PNG and Ethernet.
fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |crc, &byte| CRC32_TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8))
}

/// Replaces `checkpoint.json` atomically with a snapshot of `state`; returns its size.
fn write_checkpoint(id: &str, session_path: &Path, state: &SessionState) -> Result<u64, StoreError> {
    static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
    let bytes = serde_json::to_vec(&CheckpointToStore { seq: state.seq, state }).map_err(|error| StoreError::Io {
        id: id.to_string(),
        source: io::Error::new(io::ErrorKind::InvalidData, error),
    })?;
    let temp_name = format!(
        "{CHECKPOINT_TEMP_PREFIX}{}.{}{CHECKPOINT_TEMP_SUFFIX}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let temp_path = session_path.join(RUNTIME_DIR).join(temp_name);
    let written = (|| {
        let mut temp = OpenOptions::new().write(true).create_new(true).open(&temp_path)?;
        temp.write_all(&bytes)?;
        temp.sync_all()?;
        drop(temp);
        fs::rename(&temp_path, session_path.join(RUNTIME_DIR).join(CHECKPOINT_FILE))?;
        sync_dir(&session_path.join(RUNTIME_DIR))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp_path);
    }
    written.map_err(io_error(id))?;
    Ok(bytes.len() as u64)
}

/// Removes snapshot temp files a crash left behind; only with the lock held.
fn remove_stale_checkpoint_temps(session_path: &Path) {
    let Ok(entries) = fs::read_dir(session_path.join(RUNTIME_DIR)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(CHECKPOINT_TEMP_PREFIX) && name.ends_with(CHECKPOINT_TEMP_SUFFIX) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Takes the session's writer lock, or says who holds it.
fn take_lock(id: &str, session_path: &Path) -> Result<File, StoreError> {
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(session_path.join(RUNTIME_DIR).join(LOCK_FILE))
        .map_err(io_error(id))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(TryLockError::WouldBlock) => Err(StoreError::Busy(id.to_string())),
        Err(TryLockError::Error(error)) => Err(StoreError::Io { id: id.to_string(), source: error }),
    }
}

fn open_log(id: &str, session_path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(session_path.join(RUNTIME_DIR).join(LOG_FILE))
        .map_err(io_error(id))
}

fn create_session_folders(id: &str, session_path: &Path) -> Result<(), StoreError> {
    for folder in SESSION_FOLDERS {
        fs::create_dir_all(session_path.join(folder)).map_err(io_error(id))?;
    }
    Ok(())
}

/// Collects the ids of the sessions under `dir`, descending into folders that are not
/// sessions themselves (ids may contain `/`).
fn collect_session_ids(dir: &Path, id_prefix: &str, ids: &mut Vec<String>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let depth = if id_prefix.is_empty() { 0 } else { id_prefix.split('/').count() };
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else { continue };
        let id = if id_prefix.is_empty() { name } else { format!("{id_prefix}/{name}") };
        let path = entry.path();
        if path.join(RUNTIME_DIR).join(LOG_FILE).try_exists()?
            || path.join(RUNTIME_DIR).join(CHECKPOINT_FILE).try_exists()?
        {
            ids.push(id);
        } else if depth + 1 < MAX_LISTED_ID_SEGMENTS {
            collect_session_ids(&path, &id, ids)?;
        }
    }
    Ok(())
}

fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Makes a directory's entries (a rename, a new file) durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(path)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Enough of a file's metadata to notice that someone else replaced or wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    /// The inode on Unix (a rename-over always changes it); 0 elsewhere.
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> io::Result<Option<Self>> {
        match fs::metadata(path) {
            Ok(metadata) => Ok(Some(Self::from_metadata(&metadata))),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn of_file(file: &File) -> io::Result<Self> {
        Ok(Self::from_metadata(&file.metadata()?))
    }

    fn from_metadata(metadata: &fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Self { len: metadata.len(), modified: metadata.modified().ok(), inode }
    }
}

fn io_error(id: &str) -> impl Fn(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { id: id.to_string(), source }
}

fn corrupt(id: &str, message: String) -> StoreError {
    StoreError::Corrupt { id: id.to_string(), message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Head, Message, Variable};

    /// A unique directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> Self {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let nanos =
                SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
            let name = format!(
                "archmax-fs-store-{label}-{}-{nanos}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            let path = std::env::temp_dir().join(name);
            fs::create_dir_all(&path).expect("temp dir");
            Self(path)
        }

        fn store(&self) -> FsStore {
            FsStore::new(self.0.join("sessions"))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn initial(id: &str) -> SessionState {
        SessionState {
            id: id.to_string(),
            head: Head { workflow: "w".into(), spec_hash: "h".into(), ..Head::default() },
            ..SessionState::default()
        }
    }

    fn step(seq: u64, text: &str) -> Delta {
        Delta {
            seq,
            head: Head { workflow: "w".into(), spec_hash: "h".into(), updated_at: seq, ..Head::default() },
            messages: vec![Message::User { text: text.to_string(), opening: None }],
            variables: vec![(
                format!("v{}", seq % 3),
                Some(Variable { value: seq.into(), locked: seq.is_multiple_of(2) }),
            )],
            ..Delta::default()
        }
    }

    fn log_path(store: &FsStore, id: &str) -> PathBuf {
        store.dir.join(id).join(RUNTIME_DIR).join(LOG_FILE)
    }

    fn append_bytes(path: &Path, bytes: &[u8]) {
        let mut file = OpenOptions::new().append(true).open(path).expect("open log");
        file.write_all(bytes).expect("append");
    }

    fn record_of(delta: &Delta) -> Vec<u8> {
        encode_record(&serde_json::to_vec(delta).expect("json")).expect("record")
    }

    /// Commits steps 1..=count and returns the expected state.
    fn commit_steps(writer: &mut FsWriter, mut expected: SessionState, count: u64) -> SessionState {
        for seq in expected.seq + 1..=expected.seq + count {
            let delta = step(seq, &format!("message {seq}"));
            writer.commit(&delta).expect("commit");
            expected.apply(&delta);
        }
        expected
    }

    fn assert_corrupt(result: Result<Option<SessionState>, StoreError>) {
        assert!(matches!(result, Err(StoreError::Corrupt { .. })), "{result:?}");
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn round_trip_through_log_and_snapshot() {
        let temp = TempDir::new("round-trip");
        let store = temp.store();
        let mut writer = store.create_writer(&initial("s1")).expect("create");
        let session_path = store.session_dir("s1").expect("dir");
        for name in ["checkpoints/log", "checkpoints/checkpoint.json", "checkpoints/lock", "scratchpad", "artifacts"] {
            assert!(session_path.join(name).exists(), "{name}");
        }
        let expected = commit_steps(&mut writer, initial("s1"), 3);
        assert_eq!(writer.state(), &expected);
        assert_eq!(store.read("s1").expect("read"), Some(expected.clone()));

        writer.compact().expect("compact");
        assert_eq!(writer.log_len(), 0);
        let expected = commit_steps(&mut writer, expected, 2);
        drop(writer);

        let (reopened, mut writer) = store.open_writer("s1").expect("open");
        assert_eq!(reopened, expected);
        let expected = commit_steps(&mut writer, expected, 1);
        drop(writer);
        assert_eq!(store.read("s1").expect("read"), Some(expected));
    }

    #[test]
    fn create_exists_open_missing_read_none() {
        let temp = TempDir::new("exists");
        let store = temp.store();
        drop(store.create(&initial("s")).expect("create"));
        assert!(matches!(store.create(&initial("s")), Err(StoreError::Exists(id)) if id == "s"));
        assert!(matches!(store.open("nope"), Err(StoreError::Missing(id)) if id == "nope"));
        assert!(matches!(store.read("nope"), Ok(None)));
        assert!(matches!(store.read("../escape"), Err(StoreError::Io { .. })));
        assert!(store.session_dir("/abs").is_none());
    }

    #[test]
    fn torn_tail_is_dropped_and_the_next_commit_succeeds() {
        let temp = TempDir::new("torn");
        let store = temp.store();
        let mut writer = store.create_writer(&initial("s")).expect("create");
        let expected = commit_steps(&mut writer, initial("s"), 2);
        let good_len = writer.log_len();
        drop(writer);

        let record = record_of(&step(3, "never committed"));
        for torn in [&record[..5], &record[..RECORD_HEADER_BYTES + 4], &record[..record.len() - 1], &[0u8; 40][..]] {
            append_bytes(&log_path(&store, "s"), torn);
            assert_eq!(store.read("s").expect("read"), Some(expected.clone()));
            let (state, writer) = store.open_writer("s").expect("open");
            assert_eq!(state, expected);
            assert_eq!(fs::metadata(log_path(&store, "s")).expect("meta").len(), good_len);
            drop(writer);
        }

        append_bytes(&log_path(&store, "s"), &record[..record.len() / 2]);
        let (_, mut writer) = store.open_writer("s").expect("open");
        let expected = commit_steps(&mut writer, expected, 1);
        drop(writer);
        assert_eq!(store.read("s").expect("read"), Some(expected));
    }

    #[test]
    fn flipped_bytes_mid_log_are_corrupt_and_in_the_last_record_are_dropped() {
        let temp = TempDir::new("flip");
        let store = temp.store();
        let mut writer = store.create_writer(&initial("s")).expect("create");
        let after_one = commit_steps(&mut writer, initial("s"), 1);
        let first_record_len = writer.log_len() as usize;
        let after_two = commit_steps(&mut writer, after_one.clone(), 1);
        let second_record_end = writer.log_len() as usize;
        commit_steps(&mut writer, after_two.clone(), 1);
        drop(writer);
        let pristine = fs::read(log_path(&store, "s")).expect("log");

        let flip = |at: usize| {
            let mut bytes = pristine.clone();
            bytes[at] ^= 0x20;
            fs::write(log_path(&store, "s"), bytes).expect("write");
        };
        // Payload, length field, payload CRC and header CRC of the first record.
        for at in [RECORD_HEADER_BYTES + 3, 0, 5, 9, first_record_len - 1] {
            flip(at);
            assert_corrupt(store.read("s"));
            assert!(matches!(store.open("s"), Err(StoreError::Corrupt { .. })));
        }
        // The last record's payload: dropped as a torn tail.
        flip(second_record_end + RECORD_HEADER_BYTES + 2);
        assert_eq!(store.read("s").expect("read"), Some(after_two));
    }

    #[test]
    fn gaps_and_garbage_in_the_log_are_corrupt() {
        let temp = TempDir::new("gap");
        let store = temp.store();
        drop(store.create_writer(&initial("s")).expect("create"));
        let log = log_path(&store, "s");

        fs::write(&log, [record_of(&step(1, "a")), record_of(&step(3, "c"))].concat()).expect("write");
        assert_corrupt(store.read("s"));
        fs::write(&log, record_of(&step(2, "starts too late"))).expect("write");
        assert_corrupt(store.read("s"));
        fs::write(&log, encode_record(b"{\"not\": \"a delta\"}").expect("record")).expect("write");
        assert_corrupt(store.read("s"));
        fs::write(&log, b"this is not a log at all, just some garbage text").expect("write");
        assert_corrupt(store.read("s"));
        assert!(matches!(store.open("s"), Err(StoreError::Corrupt { .. })));

        // Records at or below the snapshot (a crash between snapshot and truncation) are skipped.
        fs::write(&log, [record_of(&step(1, "old")), record_of(&step(2, "new"))].concat()).expect("write");
        let mut expected = initial("s");
        expected.apply(&step(1, "old"));
        expected.apply(&step(2, "new"));
        assert_eq!(store.read("s").expect("read"), Some(expected));
    }

    #[test]
    fn bad_checkpoints_are_corrupt() {
        let temp = TempDir::new("checkpoint");
        let store = temp.store();
        drop(store.create_writer(&initial("s")).expect("create"));
        let checkpoint = store.dir.join("s").join(RUNTIME_DIR).join(CHECKPOINT_FILE);

        for garbage in [&b"\xff\x00garbage"[..], b"{}", b"{\"seq\": 3, \"state\": {\"id\": \"s\"}}", b""] {
            fs::write(&checkpoint, garbage).expect("write");
            assert_corrupt(store.read("s"));
            assert!(matches!(store.open("s"), Err(StoreError::Corrupt { .. })));
        }
        let mut other = initial("other");
        other.seq = 0;
        fs::write(&checkpoint, serde_json::to_vec(&CheckpointToStore { seq: 0, state: &other }).expect("json"))
            .expect("write");
        assert_corrupt(store.read("s"));

        fs::remove_file(&checkpoint).expect("remove");
        assert_corrupt(store.read("s"));
    }

    #[test]
    fn compaction_keeps_the_state_through_5000_growing_steps() {
        let temp = TempDir::new("compaction");
        let store = temp.store();
        let mut writer = store.create_writer(&initial("s")).expect("create");
        let mut expected = initial("s");
        let (mut compactions, mut snapshot_bytes, mut log_bytes) = (0u64, 0u64, 0u64);
        let mut largest_log = 0;
        for seq in 1..=5_000u64 {
            let text = "x".repeat((seq / 10) as usize);
            let delta = step(seq, &text);
            let log_before = writer.log_len();
            writer.commit(&delta).expect("commit");
            expected.apply(&delta);
            if writer.log_len() < log_before {
                compactions += 1;
                snapshot_bytes += writer.snapshot_len();
                log_bytes += log_before;
            }
            let record_len = record_of(&delta).len() as u64;
            assert!(writer.log_len() <= writer.snapshot_len().max(MIN_COMPACTION_LOG_BYTES) + record_len);
            largest_log = largest_log.max(writer.log_len());
        }
        assert!(compactions >= 3, "{compactions} compactions");
        // Amortised O(1): snapshots never cost more than a small multiple of what was logged.
        assert!(snapshot_bytes <= 2 * log_bytes, "{snapshot_bytes} snapshot bytes for {log_bytes} logged");
        assert!(largest_log < 2 * writer.snapshot_len().max(MIN_COMPACTION_LOG_BYTES));
        assert_eq!(writer.state(), &expected);
        drop(writer);

        assert_eq!(store.read("s").expect("read"), Some(expected.clone()));
        let (reopened, _writer) = store.open_writer("s").expect("open");
        assert_eq!(reopened, expected);
    }

    #[test]
    fn a_second_writer_is_busy() {
        let temp = TempDir::new("busy");
        let store = temp.store();
        let writer = store.create(&initial("s")).expect("create");
        assert!(matches!(store.open("s"), Err(StoreError::Busy(id)) if id == "s"));
        assert!(store.read("s").expect("read while locked").is_some());
        drop(writer);
        let (_, writer) = store.open("s").expect("open after drop");
        assert!(matches!(store.open("s"), Err(StoreError::Busy(_))));
        drop(writer);
    }

    #[test]
    fn a_stale_writer_gets_conflict_and_writes_nothing() {
        let temp = TempDir::new("stale");
        let store = temp.store();
        let mut stale = store.create_writer(&initial("s")).expect("create");
        let expected = commit_steps(&mut stale, initial("s"), 1);

        assert!(matches!(stale.commit(&step(3, "gap")), Err(StoreError::Conflict { expected: 2, found: 1, .. })));
        assert!(matches!(stale.commit(&step(1, "again")), Err(StoreError::Conflict { .. })));

        stale.release_lock_for_tests();
        let (state, mut fresh) = store.open_writer("s").expect("open behind its back");
        assert_eq!(state, expected);
        let expected = commit_steps(&mut fresh, expected, 1);
        let refused = stale.commit(&step(2, "stale"));
        assert!(matches!(refused, Err(StoreError::Conflict { expected: 1, found: 2, .. })), "{refused:?}");
        assert_eq!(store.read("s").expect("read"), Some(expected.clone()));

        // Same log length on both sides: the replaced snapshot still gives the stale writer away.
        drop(fresh);
        let (_, mut stale) = store.open_writer("s").expect("reopen");
        stale.compact().expect("compact");
        stale.release_lock_for_tests();
        let (_, mut fresh) = store.open_writer("s").expect("open again");
        let expected = commit_steps(&mut fresh, expected, 1);
        fresh.compact().expect("compact");
        assert_eq!(fresh.log_len(), stale.log_len());
        assert!(matches!(stale.commit(&step(3, "stale")), Err(StoreError::Conflict { found: 3, .. })));
        assert!(matches!(stale.compact(), Err(StoreError::Conflict { .. })));
        drop(fresh);
        assert_eq!(store.read("s").expect("read"), Some(expected));
    }

    #[test]
    fn list_returns_sorted_session_ids() {
        let temp = TempDir::new("list");
        let store = temp.store();
        assert_eq!(store.list().expect("list of a missing dir"), Vec::<String>::new());
        for id in ["b", "a~1", "a", "tenant/1"] {
            drop(store.create(&initial(id)).expect("create"));
        }
        fs::create_dir_all(store.dir.join("_specs")).expect("specs");
        fs::create_dir_all(store.dir.join("empty")).expect("empty");
        fs::write(store.dir.join("stray-file"), b"x").expect("file");
        assert_eq!(store.list().expect("list"), ["a", "a~1", "b", "tenant/1"]);
    }
}
