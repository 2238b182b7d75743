//! The writer of one open session: commits, seals and compactions.
//!
//! The one thing to know: every durable step happens in the order the crash table of
//! the parent module assumes (append and sync the record, then replace the seal;
//! snapshot, then log, then seal), and a failed write leaves the writer broken, so the
//! next step is only taken after a reopen has verified the disk again.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::super::store::StoreFuture;
use super::super::{Delta, SessionState, SessionWriter, StoreError};
use super::faults::Faults;
use super::files::{self, FileStamp, replace};
use super::format::{self, LogHeader, Seal, SnapshotToStore, encode_record, sha256_hex};
use super::verify::{Loaded, Settle};
use super::{CHECKPOINT_FILE, LOG_FILE, MIN_COMPACTION_LOG_BYTES, RUNTIME_DIR, corrupt, io_error, load, write_seal};
use crate::blocking::run_blocking;

/// Commits steps to one session of an [`FsStore`](super::FsStore); holds the session's lock until dropped.
///
/// It keeps its own copy of the state (to write snapshots without reading the log back),
/// the running digest of its log (to seal each commit in O(step)), and what it expects on
/// disk, so a commit can tell, in O(1), that another writer wrote behind its back.
pub struct FsWriter {
    id: String,
    session_path: PathBuf,
    log: File,
    pub(super) lock: File,
    state: SessionState,
    pub(super) generation: u64,
    checkpoint_sha256: String,
    /// The log's length after this writer's last write, and the digest of those bytes.
    log_len: u64,
    log_digest: Sha256,
    log_inode: u64,
    checkpoint: FileStamp,
    /// The size of the last snapshot, which the log must outgrow before compaction.
    snapshot_len: u64,
    /// Why the writer can no longer be trusted, after a failed write.
    broken: Option<String>,
    pub(super) faults: Faults,
}

impl FsWriter {
    pub(super) fn new(
        id: &str,
        session_path: PathBuf,
        lock: File,
        log: File,
        loaded: Loaded,
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
            state: loaded.state,
            generation: loaded.generation,
            checkpoint_sha256: loaded.checkpoint_sha256,
            log_len: loaded.log_len,
            log_digest: loaded.log_digest,
            log_inode: log_stamp.inode,
            checkpoint,
            snapshot_len: loaded.checkpoint_len,
            broken: None,
            faults: Faults::default(),
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

    fn runtime_dir(&self) -> PathBuf {
        self.session_path.join(RUNTIME_DIR)
    }

    /// Folds the log into a fresh snapshot now (commits do this on their own when due).
    pub fn compact(&mut self) -> Result<(), StoreError> {
        self.ensure_usable()?;
        self.ensure_disk_unchanged()?;
        let snapshot = SnapshotToStore { generation: self.generation + 1, seq: self.state.seq, state: &self.state };
        let bytes = serde_json::to_vec(&snapshot).map_err(|error| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        })?;
        if let Err(error) = replace(&self.runtime_dir(), CHECKPOINT_FILE, &bytes, &mut self.faults) {
            return Err(self.mark_broken(error));
        }
        self.generation += 1;
        self.checkpoint_sha256 = sha256_hex(&bytes);
        self.snapshot_len = bytes.len() as u64;
        match FileStamp::of(&self.runtime_dir().join(CHECKPOINT_FILE)) {
            Ok(Some(stamp)) => self.checkpoint = stamp,
            Ok(None) => return Err(self.mark_broken(io::Error::other("checkpoint.json vanished"))),
            Err(error) => return Err(self.mark_broken(error)),
        }
        self.start_log()
    }

    /// Replaces the log with an empty one following the current snapshot, and seals it.
    fn start_log(&mut self) -> Result<(), StoreError> {
        let header = LogHeader { generation: self.generation, base_seq: self.state.seq }.encode();
        let runtime_dir = self.runtime_dir();
        let replaced = replace(&runtime_dir, LOG_FILE, &header, &mut self.faults)
            .and_then(|()| files::open(&runtime_dir.join(LOG_FILE), OpenOptions::new().append(true)));
        let log = match replaced {
            Ok(log) => log,
            Err(error) => return Err(self.mark_broken(error)),
        };
        match FileStamp::of_file(&log) {
            Ok(stamp) => self.log_inode = stamp.inode,
            Err(error) => return Err(self.mark_broken(error)),
        }
        self.log = log;
        self.log_len = header.len() as u64;
        self.log_digest = Sha256::new();
        self.log_digest.update(&header);
        self.seal()
    }

    /// Replaces the seal with one vouching for everything this writer wrote.
    fn seal(&mut self) -> Result<(), StoreError> {
        let seal = Seal {
            generation: self.generation,
            seq: self.state.seq,
            log_len: self.log_len,
            log_sha256: format::digest_hex(&self.log_digest),
            checkpoint_sha256: self.checkpoint_sha256.clone(),
        };
        let runtime_dir = self.runtime_dir();
        write_seal(&runtime_dir, &seal, &mut self.faults).map_err(|error| self.mark_broken(error))
    }

    /// Finishes what a crash interrupted, as the load found it.
    pub(super) fn settle(&mut self, settle: Settle) -> Result<(), StoreError> {
        match settle {
            Settle::Nothing => Ok(()),
            Settle::CutTornTail => {
                if let Err(error) = self.log.set_len(self.log_len).and_then(|()| self.log.sync_data()) {
                    return Err(self.mark_broken(error));
                }
                Ok(())
            }
            Settle::SealLastStep => self.seal(),
            Settle::FinishCompaction => self.start_log(),
        }
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
        let runtime_dir = self.runtime_dir();
        let log_stamp = FileStamp::of(&runtime_dir.join(LOG_FILE)).map_err(io_error(&self.id))?;
        let checkpoint_stamp = FileStamp::of(&runtime_dir.join(CHECKPOINT_FILE)).map_err(io_error(&self.id))?;
        let log_unchanged = log_stamp.is_some_and(|log| log.len == self.log_len && log.inode == self.log_inode);
        if log_unchanged && checkpoint_stamp == Some(self.checkpoint) {
            return Ok(());
        }
        match load(&self.id, &runtime_dir) {
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

    /// Appends the step's record and syncs it.
    fn append(&mut self, delta: &Delta) -> Result<(), StoreError> {
        let payload = serde_json::to_vec(delta).map_err(|error| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        })?;
        let record = encode_record(&payload).ok_or_else(|| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the step is larger than 4 GiB"),
        })?;
        if let Err(error) = self.write_record(&record) {
            return Err(self.mark_broken(error));
        }
        self.log_len += record.len() as u64;
        self.log_digest.update(&record);
        Ok(())
    }

    fn write_record(&mut self, record: &[u8]) -> io::Result<()> {
        self.faults.hit("before append")?;
        let half = record.len() / 2;
        self.log.write_all(&record[..half])?;
        self.faults.hit("mid append")?;
        self.log.write_all(&record[half..])?;
        self.log.sync_data()?;
        self.faults.hit("appended")
    }

    fn mark_broken(&mut self, error: io::Error) -> StoreError {
        self.broken = Some(format!("an earlier write failed ({error})"));
        StoreError::Io { id: self.id.clone(), source: error }
    }
}

impl SessionWriter for FsWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(async move { run_blocking(|| FsWriter::commit(self, delta)) })
    }
}

impl FsWriter {
    /// Checks the seq and the disk, compacts when due (so a failed compaction leaves the
    /// step unwritten), appends the delta's record, syncs it and seals it: the blocking
    /// form of [`SessionWriter::commit`].
    pub fn commit(&mut self, delta: &Delta) -> Result<(), StoreError> {
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
        self.seal()
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
            .field("generation", &self.generation)
            .field("log_len", &self.log_len)
            .field("snapshot_len", &self.snapshot_len)
            .finish_non_exhaustive()
    }
}
