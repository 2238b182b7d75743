//! The writer of one open session: commits, seals and compactions.
//!
//! The one thing to know: a commit makes one thing durable, its log record (one
//! `fdatasync`); the seal slot it then writes in place is not synced, so after a power
//! loss the seal may lag behind the log, never run ahead of it (it is written only once
//! the record it vouches for is on disk). Compaction syncs the seal first, then replaces
//! snapshot, log and seal in that order, as the crash table of the parent module
//! assumes. A failed write leaves the writer broken, so the next step is only taken
//! after a reopen has verified the disk again.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::super::store::StoreFuture;
use super::super::{Delta, SessionState, SessionWriter, StoreError};
use super::faults::Faults;
use super::files::{self, FileStamp, replace, write_at};
use super::format::{
    LOG_ROOM, LogHeader, RECORD_HEADER_BYTES, RECORD_TAG_BYTES, SEAL_SLOT_BYTES, Seal, SealSource, Sha256Digest,
    SnapshotToStore, digest_of, encode_record, keyed_payload, sha256,
};
use super::seal_key::SealKeys;
use super::verify::{Loaded, Settle, Trust};
use super::{
    CHECKPOINT_FILE, LOG_FILE, MIN_COMPACTION_LOG_BYTES, RUNTIME_DIR, SEAL_FILE, corrupt, io_error, load, write_seal,
};
use crate::blocking::run_blocking;

/// Commits steps to one session of an [`FsStore`](super::FsStore); holds the session's lock until dropped.
///
/// It keeps its own copy of the state (to write snapshots without reading the log back),
/// the running digest of its log (to seal each commit in O(step)), and what it expects on
/// disk, so a commit can tell, in O(1), that another writer wrote behind its back.
pub struct FsWriter {
    id: String,
    session_path: PathBuf,
    /// The session's `checkpoints/` folder, held open so a commit stamps its three files
    /// by name: the path is walked once per commit (for the folder itself), not once per
    /// file.
    runtime: std::os::fd::OwnedFd,
    /// That folder's device and inode, which the folder at the session's path must still
    /// have: a session folder moved aside and replaced (a restore, on this filesystem or
    /// a snapshot of it with the same inode numbers) is not this writer's any more.
    runtime_identity: (u64, u64),
    /// Shared with the thread that syncs a commit's record (see [`FsWriter::commit_async`]).
    log: Arc<File>,
    /// The seal file, opened for writing its slots in place; none before a new
    /// session's first seal.
    seal: Option<File>,
    pub(super) lock: File,
    state: SessionState,
    pub(super) generation: u64,
    checkpoint_sha256: Sha256Digest,
    /// The log's length after this writer's last write, and the digest of those bytes.
    log_len: u64,
    /// The log file's size: `log_len` and the zeros of its room after it (`LOG_ROOM`).
    log_room: u64,
    log_digest: Sha256,
    log_inode: u64,
    seal_inode: Option<u64>,
    /// The seal that vouches for the last step on disk; the next one goes into the other slot.
    seal_source: SealSource,
    /// `checkpoint.json`'s stamp; none while a new session's snapshot is its log's genesis.
    checkpoint: Option<FileStamp>,
    /// The size of the last snapshot, which the log must outgrow before compaction.
    snapshot_len: u64,
    /// The bytes of a new session's log that hold its snapshot (the genesis record),
    /// which compaction does not count as steps; 0 once `checkpoint.json` holds it.
    genesis_len: u64,
    /// Why the writer can no longer be trusted, after a failed write.
    broken: Option<String>,
    pub(super) faults: Faults,
    /// The keys: records and seals are written under the current one.
    keys: SealKeys,
}

impl FsWriter {
    pub(super) fn new(
        id: &str,
        session_path: PathBuf,
        lock: File,
        log: File,
        loaded: Loaded,
        keys: SealKeys,
    ) -> Result<Self, StoreError> {
        let runtime_dir = session_path.join(RUNTIME_DIR);
        let runtime = FileStamp::open_dir(&runtime_dir).map_err(io_error(id))?;
        let held = rustix::fs::fstat(&runtime).map_err(|error| io_error(id)(error.into()))?;
        let runtime_identity = (held.st_dev, held.st_ino);
        let log_stamp = FileStamp::of_file(&log).map_err(io_error(id))?;
        // A new session has no seal before its first commit; a power loss may have left
        // one that does not vouch, which the next seal overwrites in place.
        let (seal, seal_inode) = match open_seal(&runtime_dir) {
            Ok((seal, stamp)) => (Some(seal), Some(stamp.inode)),
            Err(error) if error.kind() == io::ErrorKind::NotFound && loaded.seal_source == SealSource::Missing => {
                (None, None)
            }
            Err(error) => return Err(StoreError::Io { id: id.to_string(), source: error }),
        };
        let checkpoint = FileStamp::of(&runtime_dir.join(CHECKPOINT_FILE)).map_err(io_error(id))?;
        if checkpoint.is_none() && loaded.generation > 0 {
            return Err(corrupt(id, "checkpoint.json vanished while opening".to_string()));
        }
        Ok(Self {
            id: id.to_string(),
            session_path,
            runtime,
            runtime_identity,
            log: Arc::new(log),
            seal,
            lock,
            state: loaded.state,
            generation: loaded.generation,
            checkpoint_sha256: loaded.checkpoint_sha256,
            log_len: loaded.log_len,
            log_room: log_stamp.len,
            log_digest: loaded.log_digest,
            log_inode: log_stamp.inode,
            seal_inode,
            seal_source: loaded.seal_source,
            checkpoint,
            snapshot_len: loaded.checkpoint_len,
            genesis_len: match checkpoint {
                None => (RECORD_HEADER_BYTES + RECORD_TAG_BYTES) as u64 + loaded.checkpoint_len,
                Some(_) => 0,
            },
            broken: None,
            faults: Faults::default(),
            keys,
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
    #[cfg(test)]
    pub(crate) fn snapshot_len(&self) -> u64 {
        self.snapshot_len
    }

    fn runtime_dir(&self) -> PathBuf {
        self.session_path.join(RUNTIME_DIR)
    }

    /// Folds the log into a fresh snapshot now (commits do this on their own when due).
    /// The seal is synced first: a crash later in the compaction leaves the old log
    /// sealed through the new snapshot's step, which is how a load recognises it.
    pub fn compact(&mut self) -> Result<(), StoreError> {
        self.ensure_usable()?;
        self.ensure_disk_unchanged()?;
        let snapshot = SnapshotToStore { generation: self.generation + 1, seq: self.state.seq, state: &self.state };
        let bytes = serde_json::to_vec(&snapshot).map_err(|error| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        })?;
        let runtime_dir = self.runtime_dir();
        if self.seal.is_none() || self.seal_source == SealSource::Missing {
            // A new session's first seal (or one over what a power loss left of it), so
            // the old log is sealed through the new snapshot.
            self.write_whole_seal()?;
        }
        self.faults.synced();
        let synced = self.seal.as_ref().map_or(Ok(()), File::sync_data);
        let replaced = synced.and_then(|()| replace(&runtime_dir, CHECKPOINT_FILE, &bytes, &mut self.faults));
        if let Err(error) = replaced {
            return Err(self.mark_broken(error));
        }
        self.generation += 1;
        self.checkpoint_sha256 = sha256(&bytes);
        self.snapshot_len = bytes.len() as u64;
        self.genesis_len = 0;
        match FileStamp::of(&runtime_dir.join(CHECKPOINT_FILE)) {
            Ok(Some(stamp)) => self.checkpoint = Some(stamp),
            Ok(None) => return Err(self.mark_broken(io::Error::other("checkpoint.json vanished"))),
            Err(error) => return Err(self.mark_broken(error)),
        }
        self.start_log()
    }

    /// Replaces the log with an empty one following the current snapshot, and seals it.
    fn start_log(&mut self) -> Result<(), StoreError> {
        let header = LogHeader::keyed(self.generation, self.state.seq).encode();
        let runtime_dir = self.runtime_dir();
        let replaced = replace(&runtime_dir, LOG_FILE, &header, &mut self.faults)
            .and_then(|()| files::open(&runtime_dir.join(LOG_FILE), OpenOptions::new().read(true).write(true)));
        let log = match replaced {
            Ok(log) => log,
            Err(error) => return Err(self.mark_broken(error)),
        };
        match FileStamp::of_file(&log) {
            Ok(stamp) => self.log_inode = stamp.inode,
            Err(error) => return Err(self.mark_broken(error)),
        }
        self.log = Arc::new(log);
        self.log_len = header.len() as u64;
        self.log_room = self.log_len;
        self.log_digest = Sha256::new();
        self.log_digest.update(&header);
        self.rewrite_seal()
    }

    /// What this writer would seal now: its snapshot and everything it wrote to the log.
    fn current_seal(&self) -> Seal {
        Seal {
            generation: self.generation,
            seq: self.state.seq,
            log_len: self.log_len,
            log_sha256: digest_of(&self.log_digest),
            checkpoint_sha256: self.checkpoint_sha256,
        }
    }

    /// Replaces the whole seal file (staged, synced, renamed) with the current seal in
    /// slot 0: at compaction, and to give an earlier build's seal its slots.
    fn rewrite_seal(&mut self) -> Result<(), StoreError> {
        let runtime_dir = self.runtime_dir();
        let rewritten = write_seal(&runtime_dir, &self.current_seal(), &self.keys, &mut self.faults)
            .and_then(|()| open_seal(&runtime_dir));
        match rewritten {
            Ok((seal, stamp)) => {
                self.seal = Some(seal);
                self.seal_inode = Some(stamp.inode);
                self.seal_source = SealSource::Slot(0);
                Ok(())
            }
            Err(error) => Err(self.mark_broken(error)),
        }
    }

    /// Writes the current seal into the slot that does not vouch now, in place and not
    /// synced: the older slot stays whole until this one is.
    fn advance_seal(&mut self) -> Result<(), StoreError> {
        let (current, seal) = match (self.seal_source, &self.seal) {
            (SealSource::Slot(current), Some(seal)) => (current, seal),
            (SealSource::Legacy, _) => return self.rewrite_seal(),
            (SealSource::Missing, _) | (SealSource::Slot(_), None) => return self.write_whole_seal(),
        };
        let next = 1 - current;
        let slot = self.current_seal().encode_slot(&self.keys);
        let base = (next * SEAL_SLOT_BYTES) as u64;
        if let Err(error) =
            self.faults.torn_write("mid seal", &slot, |offset, part| write_at(seal, base + offset as u64, part))
        {
            return Err(self.mark_broken(error));
        }
        self.seal_source = SealSource::Slot(next);
        Ok(())
    }

    /// Writes a new session's first seal (or one over what a power loss left of it): the
    /// whole file in place, the current seal in slot 0, unsynced like every slot write.
    fn write_whole_seal(&mut self) -> Result<(), StoreError> {
        let path = self.runtime_dir().join(SEAL_FILE);
        let seal = match files::open(&path, OpenOptions::new().read(true).write(true).create(true).truncate(false)) {
            Ok(seal) => seal,
            Err(error) => return Err(self.mark_broken(error)),
        };
        let mut bytes = vec![0; 2 * SEAL_SLOT_BYTES];
        bytes[..SEAL_SLOT_BYTES].copy_from_slice(&self.current_seal().encode_slot(&self.keys));
        let written = self
            .faults
            .torn_write("mid seal", &bytes, |offset, part| write_at(&seal, offset as u64, part))
            .and_then(|()| seal.set_len(bytes.len() as u64))
            .and_then(|()| FileStamp::of_file(&seal));
        match written {
            Ok(stamp) => {
                self.seal = Some(seal);
                self.seal_inode = Some(stamp.inode);
                self.seal_source = SealSource::Slot(0);
                Ok(())
            }
            Err(error) => Err(self.mark_broken(error)),
        }
    }

    /// Finishes what a crash interrupted, as the load found it.
    pub(super) fn settle(&mut self, settle: Settle) -> Result<(), StoreError> {
        match settle {
            Settle::Log { cut_torn_tail, unsealed_steps } => {
                if cut_torn_tail {
                    self.faults.synced();
                    if let Err(error) = self.log.set_len(self.log_len).and_then(|()| self.log.sync_data()) {
                        return Err(self.mark_broken(error));
                    }
                    self.log_room = self.log_len;
                }
                match self.seal_source {
                    SealSource::Legacy => self.rewrite_seal(),
                    SealSource::Slot(_) | SealSource::Missing if unsealed_steps > 0 => self.advance_seal(),
                    SealSource::Slot(_) | SealSource::Missing => Ok(()),
                }
            }
            Settle::FinishCompaction => self.start_log(),
        }
    }

    fn compaction_due(&self) -> bool {
        self.log_len.saturating_sub(self.genesis_len) > self.snapshot_len.max(MIN_COMPACTION_LOG_BYTES)
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

    /// Refuses when the log, seal or snapshot on disk is not what this writer left there:
    /// the log's length and inode, the seal's inode (its slots change in place), the
    /// snapshot's stamp, each looked up by name in the `checkpoints/` folder the writer
    /// opened, once the folder at the session's path is found to be that folder (its
    /// device and inode). That guards against an honest restore (a copy put back while a
    /// writer is open), not against a local attacker: a swap between the check and the
    /// write still lands the record in the folder that was moved, and an attacker who can
    /// swap folders can already roll a session back by restoring an old copy.
    fn ensure_disk_unchanged(&self) -> Result<(), StoreError> {
        let here = match rustix::fs::lstat(self.runtime_dir()) {
            Ok(stat) => Some((stat.st_dev, stat.st_ino)),
            Err(rustix::io::Errno::NOENT) => None,
            Err(error) => return Err(io_error(&self.id)(error.into())),
        };
        if here != Some(self.runtime_identity) {
            return self.disk_changed();
        }
        let log_stamp = FileStamp::at(&self.runtime, LOG_FILE).map_err(io_error(&self.id))?;
        let seal_stamp = FileStamp::at(&self.runtime, SEAL_FILE).map_err(io_error(&self.id))?;
        let checkpoint_stamp = FileStamp::at(&self.runtime, CHECKPOINT_FILE).map_err(io_error(&self.id))?;
        let log_unchanged = log_stamp.is_some_and(|log| log.len == self.log_room && log.inode == self.log_inode)
            && self.room_untouched().map_err(io_error(&self.id))?;
        let seal_unchanged = seal_stamp.map(|seal| seal.inode) == self.seal_inode;
        if log_unchanged && seal_unchanged && checkpoint_stamp == self.checkpoint {
            return Ok(());
        }
        self.disk_changed()
    }

    /// The refusal of a commit whose session on disk is not what this writer left there:
    /// what the session at its path holds now says which.
    fn disk_changed(&self) -> Result<(), StoreError> {
        match load(&self.id, &self.runtime_dir(), Trust { keys: &self.keys, adopt_unkeyed: false }) {
            Ok(None) => Err(StoreError::Missing(self.id.clone())),
            Ok(Some(loaded)) => {
                Err(StoreError::Conflict { id: self.id.clone(), expected: self.state.seq, found: loaded.state.seq })
            }
            Err(error) if error.is_unreadable() => {
                Err(StoreError::Conflict { id: self.id.clone(), expected: self.state.seq, found: self.state.seq })
            }
            Err(error) => Err(error),
        }
    }

    /// Whether the log's room still starts with zeros: a commit into the room leaves
    /// the file's size as it was, so a record another writer put there (one that took
    /// the lock behind this one's back) shows only in its bytes.
    fn room_untouched(&self) -> io::Result<bool> {
        if self.log_room <= self.log_len {
            return Ok(true);
        }
        let mut head = [0u8; RECORD_HEADER_BYTES];
        let len = head.len().min((self.log_room - self.log_len) as usize);
        std::os::unix::fs::FileExt::read_exact_at(&*self.log, &mut head[..len], self.log_len)?;
        Ok(head[..len].iter().all(|&byte| byte == 0))
    }

    /// The step's framed record: its JSON and the MAC over the log before it.
    fn encode(&self, delta: &Delta) -> Result<Vec<u8>, StoreError> {
        let json = serde_json::to_vec(delta).map_err(|error| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        })?;
        let payload = keyed_payload(&self.keys, &digest_of(&self.log_digest), &json);
        encode_record(&payload).ok_or_else(|| StoreError::Io {
            id: self.id.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the step is larger than 4 GiB"),
        })
    }

    /// Writes the step's record and syncs it: the commit's one durable write (the
    /// blocking form; [`Self::commit_async`] syncs on the blocking pool).
    fn write_record(&mut self, record: &[u8]) -> io::Result<()> {
        self.write_unsynced(record)?;
        self.log.sync_data()?;
        self.faults.hit("appended")
    }

    /// The record's bytes into the page cache, not yet synced: over the room's zeros
    /// after the last record, refilling the room first when the record does not fit.
    fn write_unsynced(&mut self, record: &[u8]) -> io::Result<()> {
        self.faults.hit("before append")?;
        let end = self.log_len + record.len() as u64;
        let mut bytes = std::borrow::Cow::Borrowed(record);
        // Grown while the record would reach the room's end, so zeros always follow the
        // last record: what tells a torn append from a damaged record (`classify_rest`).
        if end >= self.log_room {
            let mut grown = record.to_vec();
            grown.resize(record.len() + LOG_ROOM as usize, 0);
            bytes = std::borrow::Cow::Owned(grown);
        }
        let (log, base) = (&self.log, self.log_len);
        self.faults.torn_write("mid append", &bytes, |offset, part| write_at(log, base + offset as u64, part))?;
        self.log_room = self.log_room.max(base + bytes.len() as u64);
        self.faults.synced();
        Ok(())
    }

    fn mark_broken(&mut self, error: io::Error) -> StoreError {
        self.broken = Some(format!("an earlier write failed ({error})"));
        StoreError::Io { id: self.id.clone(), source: error }
    }
}

/// The seal file opened for writing its slots in place, and its stamp.
fn open_seal(runtime_dir: &std::path::Path) -> io::Result<(File, FileStamp)> {
    let seal = files::open(&runtime_dir.join(SEAL_FILE), OpenOptions::new().read(true).write(true))?;
    let stamp = FileStamp::of_file(&seal)?;
    Ok((seal, stamp))
}

impl SessionWriter for FsWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(self.commit_async(delta))
    }
}

impl FsWriter {
    /// Checks the seq and the disk, compacts when due (so a failed compaction leaves the
    /// step unwritten), appends the delta's record and syncs it, then writes its seal
    /// slot: the blocking form of [`SessionWriter::commit`].
    pub fn commit(&mut self, delta: &Delta) -> Result<(), StoreError> {
        self.check_commit(delta)?;
        if self.compaction_due() {
            self.compact()?;
        }
        let record = self.encode(delta)?;
        if let Err(error) = self.write_record(&record) {
            return Err(self.mark_broken(error));
        }
        self.committed(delta, &record)
    }

    /// [`Self::commit`] on an executor. On a multi-threaded one, the work that only
    /// reaches the page cache (the checks, the record's write, the seal slot) runs in
    /// place, and the record's one `fdatasync` runs on the executor's blocking pool
    /// while this worker serves other sessions; a compaction, which syncs several
    /// files, runs whole through [`run_blocking`]. Elsewhere (a current-thread executor,
    /// which has nothing else to run meanwhile) it is the blocking form, in place.
    ///
    /// Until the sync has returned the writer counts as broken, so a commit whose
    /// future is dropped while it waits leaves a writer that refuses the next step
    /// (the next open verifies what reached the disk).
    async fn commit_async(&mut self, delta: &Delta) -> Result<(), StoreError> {
        if !crate::blocking::on_multi_threaded_executor() {
            return self.commit(delta);
        }
        self.check_commit(delta)?;
        if self.compaction_due() {
            run_blocking(|| self.compact())?;
        }
        let record = self.encode(delta)?;
        if let Err(error) = self.write_unsynced(&record) {
            return Err(self.mark_broken(error));
        }
        self.broken = Some("a commit was cut off before its record was synced".to_string());
        let log = Arc::clone(&self.log);
        let synced = match tokio::task::spawn_blocking(move || log.sync_data()).await {
            Ok(synced) => synced,
            Err(stopped) => Err(io::Error::other(format!("the sync's thread stopped: {stopped}"))),
        };
        if let Err(error) = synced.and_then(|()| self.faults.hit("appended")) {
            return Err(self.mark_broken(error));
        }
        self.broken = None;
        self.committed(delta, &record)
    }

    /// After a record's sync returned: the log's length and digest, the writer's state,
    /// the seal slot vouching for it.
    fn committed(&mut self, delta: &Delta, record: &[u8]) -> Result<(), StoreError> {
        self.log_len += record.len() as u64;
        self.log_digest.update(record);
        self.state.apply(delta);
        self.advance_seal()
    }

    /// What a commit checks before writing: a usable writer, the next seq, the disk as
    /// this writer left it.
    fn check_commit(&self, delta: &Delta) -> Result<(), StoreError> {
        self.ensure_usable()?;
        if Some(delta.seq) != self.state.seq.checked_add(1) {
            return Err(StoreError::Conflict {
                id: self.id.clone(),
                expected: delta.seq.saturating_sub(1),
                found: self.state.seq,
            });
        }
        self.ensure_disk_unchanged()
    }
}

impl Drop for FsWriter {
    /// Gives the log's room back (unsynced: a crash leaves zeros a load keeps as room),
    /// then unlocks; closing the file would release the lock too, unlocking says so.
    ///
    /// The room is cut only from a writer that is still sound and finds the disk as it
    /// left it: a writer broken by a failed or cut-off commit leaves what it wrote for
    /// the next open to verify (as a killed process would), and one that another writer
    /// went behind must not cut that writer's records.
    fn drop(&mut self) {
        if self.log_room > self.log_len && self.broken.is_none() && self.ensure_disk_unchanged().is_ok() {
            let _ = self.log.set_len(self.log_len);
        }
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
