//! The filesystem session store: the default, durable home of sessions.
//!
//! Each session lives in `<dir>/<id>/`; the workflow specs sessions are pinned to live
//! in `<dir>/_specs/<hash>.json` ([`specs`]); the records runners share (webhook replays,
//! inbox sign-ins) in `<dir>/+records/<kind>/<name>`, each named and sealed by an HMAC
//! under the seal key ([`records`]). The runtime's own files sit in its
//! `checkpoints/` folder, a zone no tool call can reach; beside it are the session's own
//! folders `scratchpad/` and `artifacts/`. The files:
//!
//! - `checkpoint.json`, the snapshot: `{"generation": g, "seq": s, "state": …}`, the
//!   state folded through step `s`; the `g`-th snapshot of the session. The first
//!   compaction writes it: before that, snapshot 0 is the log's genesis record.
//! - `log`, the steps after it: a header naming the snapshot it follows (magic,
//!   generation `g`, base seq `s`, CRC-32), then one framed record per committed
//!   [`Delta`](super::Delta) (length, CRC-32 of the payload, CRC-32 of the header; the payload, as
//!   JSON, carries its seq). Records hold `s+1, s+2, …` with no gap. A new session's
//!   log (`AMXLOG3`) holds snapshot 0 as its first record, the genesis, before them.
//! - `seal`, what vouches for the files: two fixed-size slots (512 bytes each), each
//!   `{generation, seq, log_len, log SHA-256, snapshot SHA-256, key id}` with an
//!   HMAC-SHA256 under the seal key and a CRC-32; the newer whole slot vouches. The
//!   first commit writes it.
//! - `lock`, held by the one writer. A writer tries it for a moment before it is busy, so
//!   a probe's instant hold ([`FsStore::is_held`]) never makes it fail.
//!
//! **The seal is keyed** ([`SealKeys`]: `ARCHMAX_SEAL_KEY`, a key file named by
//! `ARCHMAX_SEAL_KEY_FILE`, else `<root>/.archmax/seal.key`, created on first use), so a
//! writer of `sessions/` who cannot read the key cannot forge a step. Each log record
//! ends in an HMAC over the SHA-256 of the log before it and its step, so a whole record
//! after the seal (which a power loss can leave, and which a load accepts) is still
//! proved the runner's own; each seal slot carries an HMAC of its fields and the id of
//! the key that made it. A whole slot or a record whose MAC fails is refused as
//! tampered: no crash makes one. Rotation: the key file lists the current key first and
//! previous keys after it; a session sealed under a previous key loads, and is resealed
//! (compacted) under the current key when opened for writing. Migration: the unkeyed
//! formats of earlier builds (`AMXLOG1` logs, `AMXSEAL2` slots, JSON seals) load only on
//! a store [adopting unkeyed sessions](FsStore::adopting_unkeyed_sessions)
//! (`archmax sessions ID --reseal`), which reseals them; everywhere else they are
//! refused, so rewriting a keyed session into the unkeyed format (a downgrade, to get a
//! seal anyone can compute) gains nothing.
//!
//! The one thing to know: **a commit is durable when its record is**. A commit writes
//! the step's record after the last one and `fdatasync`s the log (its one sync), then writes the seal into
//! the slot that does not vouch now, in place and not synced. So the seal is exact
//! after a killed process (the page cache survives it) and at worst behind the log
//! after a power loss, never ahead of it: a slot is written only once the record it
//! vouches for is on disk. A load accepts, after the sealed prefix, a run of whole,
//! intact records continuing the seqs without a gap, then at most a torn append. When
//! the log outgrows the snapshot (and 64 KiB) it is compacted: the seal is synced, then
//! the snapshot `g+1` replaces `checkpoint.json`, a log holding only the header for
//! `g+1` replaces `log`, and a seal for `g+1` replaces `seal`, each by an fsync'ed
//! staging file (`.archmax-staging-*`) renamed over the old one.
//!
//! **The log keeps room.** An open writer keeps zeros after the last record
//! (`LOG_ROOM` in `format.rs`, 32 KiB, refilled a whole room at a time), and a commit writes
//! its record over them: the file's size does not change, so its `fdatasync` writes the
//! record's blocks alone instead of also committing a new size to the journal (which
//! serializes concurrent syncs). A load reads zeros after the last record as room, kept
//! as it is; a whole frame failing its checksum with only zeros after it as an append a
//! crash tore, cut on open (exactly what cutting a strict prefix gives, so nothing a
//! writer without the key could not already do); closing the writer gives the room back
//! (unsynced). Because a commit into the room leaves the size as it was, a writer also
//! checks before each commit that its room still begins with zeros: a record another
//! writer put there is a conflict.
//!
//! **A creation is one new file and one sync.** With the session's lock taken, it
//! writes the log alone: the header, then the first state as the genesis record, whose
//! MAC (like every record's) covers the bytes before it, then the first room, and `fsync`s it. Everything a
//! load needs is in that one file, proved by the key, so nothing else has to be
//! durable: the seal is first written by the first commit (in place, unsynced, like
//! every slot), and `checkpoint.json` by the first compaction (which writes the first
//! seal first if there is none, and syncs it as every compaction does). The sync is of
//! the new file itself, so the filesystem writes its data, its size and its name in
//! the folders just made (the path ext4, with or without a journal, XFS and btrfs take
//! for an `fsync` of a new file; POSIX alone would also want each new folder synced).
//! A crash before the sync returns leaves a log with no whole genesis (a torn write,
//! zeros, nothing) and no seal: a creation cut short, which a load reads as no session,
//! `list` skips and the next creation of the id replaces. Until a whole seal is on
//! disk (a power loss can take the first one, which is not synced), a load proves the
//! records after the genesis by their MACs alone; that trusts nothing a writer without
//! the key could make, and rolling such a session back to its genesis (deleting the
//! seal, cutting the log) is what restoring the first seal's bytes already allowed.
//!
//! What a crash can leave, and what a load makes of it:
//!
//! | crash during | on disk | loads as |
//! |---|---|---|
//! | creation, before its sync returns | a log with no whole genesis (or none), no seal | no session; the next creation replaces it |
//! | the first commit, before its seal | the genesis log and whole records, no whole seal | every whole record, proved by its MAC; sealed on open |
//! | a commit's append | the log through the last commit + a strict prefix of one record, a whole frame whose pages landed in part with zeros after it, a header failing its CRC with a sector of it still zeros (it never landed), whatever follows it, or zeros alone where its bytes never landed | old; the torn record is cut on open, zeros stay as room |
//! | after the append, before the seal's slot | one whole intact record after the sealed ones | new; sealed on open |
//! | the seal's slot write | that slot torn; the other whole, one step behind | new; sealed on open |
//! | any of these, after a power loss | the seal as the disk last got it: behind by any number of whole, consecutive records, maybe a torn one after them | every whole record; the torn one cut and the rest sealed on open |
//! | compaction, before the snapshot's rename | the old files, the seal synced through the last step (+ a staging file) | old |
//! | compaction, before the log's rename | snapshot `g+1`; log and seal of `g`, sealed through the snapshot's seq | same state; finished on open |
//! | compaction, before the seal's rename | snapshot and header-only log of `g+1`; seal of `g` | same state; finished on open |
//!
//! Anything else is [`StoreError::Damaged`], naming the session and the damage: a log
//! shorter than the seal says (cut at a record boundary or rolled back to an earlier
//! log), a missing log, seal or snapshot (beside a genesis log only a damaged genesis
//! counts), no whole seal slot (likewise), a record failing its
//! checksum or the seal's digest (also the last complete one, sealed or not), a seq
//! gap, bytes after the last whole record that are not a prefix of one, a snapshot
//! that is not the one sealed. A seal slot that fails its CRC while the other is whole
//! cannot be told from a slot write a crash cut short, so the other vouches. Records
//! after the seal are checked by their CRC-32s, seqs and record MACs: they exist only
//! after a power loss (or to a read racing commits). A load never
//! writes; [`FsStore::repair`] (the CLI's `archmax sessions ID --repair`) keeps the longest
//! verified prefix when asked. The store's files are opened without following symbolic
//! links or reading anything but a regular file.

mod faults;
mod files;
mod format;
mod records;
pub mod seal_key;
mod specs;
mod verify;
mod writer;

#[cfg(test)]
mod tests;

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use archmax_stdlib::vfs::{DiskVfs, Vfs};

use super::store::StoreFuture;
use super::{SessionState, SessionStore, SessionWriter, StoreError};
use crate::blocking::run_blocking;
use faults::Faults;
use files::{FileStamp, STAGING_PREFIX, real_dir_exists, remove_stale_staging_files, replace, staging_name};
use format::{LogHeader, Seal, SealSource, SealedBy, SnapshotToStore, encode_record, keyed_payload, sha256};
pub use seal_key::{SealKeyError, SealKeys};
use verify::{Files, Loaded, Refusal, Settle, Trust};
pub use writer::FsWriter;

/// The store's directory under the workspace root.
pub(crate) const DEFAULT_SESSIONS_DIR: &str = "sessions";

/// The folder of a session that holds the runtime's own files. It is a runtime-internal
/// zone: the kernel refuses every tool call into it and listings never show it.
const RUNTIME_DIR: &str = "checkpoints";
const LOG_FILE: &str = "log";
const CHECKPOINT_FILE: &str = "checkpoint.json";
const SEAL_FILE: &str = "seal";
const LOCK_FILE: &str = "lock";
/// Folders every session owns.
const SESSION_FOLDERS: [&str; 3] = [RUNTIME_DIR, "scratchpad", "artifacts"];
/// The log is never compacted below this size, so small sessions are not rewritten often.
const MIN_COMPACTION_LOG_BYTES: u64 = 64 * 1024;
/// How deep `list` looks for sessions whose ids contain `/`.
const MAX_LISTED_ID_SEGMENTS: usize = 100;
/// How often `read` retries when a writer changed the files while it was loading.
const READ_ATTEMPTS: usize = 32;

/// Sessions as folders under `dir`, sealed under `keys`.
#[derive(Clone, Debug)]
pub struct FsStore {
    pub dir: PathBuf,
    keys: SealKeys,
    /// Whether sessions sealed without a key load (then resealed when opened for
    /// writing): only for an explicit adoption (`archmax sessions ID --reseal`).
    adopt_unkeyed: bool,
}

/// What [`FsStore::repair`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepairOutcome {
    /// The session loads as it is; nothing was changed.
    Healthy { seq: u64 },
    /// The log was cut back to the longest verified prefix.
    Repaired {
        /// The last step kept.
        kept_through: u64,
        /// How many sealed steps were dropped, when the seal was readable.
        dropped_steps: Option<u64>,
        /// How many bytes of the old log were dropped.
        dropped_bytes: u64,
    },
}

impl FsStore {
    /// The store in `dir`, sealing under the current key of `keys` and accepting seals
    /// of its previous keys.
    pub fn new(dir: impl Into<PathBuf>, keys: SealKeys) -> Self {
        Self { dir: dir.into(), keys, adopt_unkeyed: false }
    }

    /// The default store of a workspace: `<root>/sessions/`, with the workspace's seal
    /// keys ([`SealKeys::for_workspace`]: the key file is created on first use).
    pub fn for_workspace(root: &Path) -> Result<Self, SealKeyError> {
        Ok(Self::new(root.join(DEFAULT_SESSIONS_DIR), SealKeys::for_workspace(root)?))
    }

    /// This store, also loading sessions sealed without a key (an earlier build's, or
    /// a downgrade): an explicit adoption, for `archmax sessions ID --reseal` only. A
    /// session so loaded is rewritten under the current key when opened for writing.
    pub fn adopting_unkeyed_sessions(mut self) -> Self {
        self.adopt_unkeyed = true;
        self
    }

    /// The seal keys this store uses.
    pub fn seal_keys(&self) -> &SealKeys {
        &self.keys
    }

    fn trust(&self) -> Trust<'_> {
        Trust { keys: &self.keys, adopt_unkeyed: self.adopt_unkeyed }
    }

    /// Creates a session and returns its concrete writer: one new file, the log, holding
    /// its header and its first state as the genesis record, and one sync of it (see the
    /// module doc for why that is enough, and what a crash leaves).
    pub fn create_writer(&self, state: &SessionState) -> Result<FsWriter, StoreError> {
        self.create_writer_with(state, &mut Faults::default())
    }

    /// [`Self::create_writer`], passing the fault points of `faults` (the crash tests
    /// inject crashes there; the writer keeps counting syncs in them).
    fn create_writer_with(&self, state: &SessionState, faults: &mut Faults) -> Result<FsWriter, StoreError> {
        let id = state.id.as_str();
        let session_path = self.session_path(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        // The session's folder is checked before anything is made in it: a link there
        // must not lead the creation elsewhere.
        fs::create_dir_all(&session_path).map_err(io_error(id))?;
        real_dir_exists(&session_path).map_err(io_error(id))?;
        match fs::create_dir(&runtime_dir) {
            Err(error) if error.kind() != io::ErrorKind::AlreadyExists => return Err(io_error(id)(error)),
            _ => real_dir_exists(&runtime_dir).map_err(io_error(id))?,
        };
        let lock = take_lock(id, &runtime_dir).map_err(|error| match error {
            StoreError::Busy(id) => StoreError::Exists(id),
            error => error,
        })?;
        match load(id, &runtime_dir, self.trust()) {
            // Nothing, or a creation cut before its sync: its log goes.
            Ok(None) => remove_if_exists(&runtime_dir.join(LOG_FILE)).map_err(io_error(id))?,
            Ok(Some(_)) | Err(StoreError::Damaged { .. } | StoreError::Unkeyed { .. }) => {
                return Err(StoreError::Exists(id.to_string()));
            }
            Err(error) => return Err(error),
        }
        let (log, sealed) = write_genesis_log(id, &runtime_dir, state, &self.keys, faults)?;
        create_session_folders(id, &session_path)?;
        let mut writer = FsWriter::new(id, session_path, lock, log, sealed, self.keys.clone())?;
        writer.faults = std::mem::take(faults);
        Ok(writer)
    }

    /// Opens a session for writing: takes its lock, loads and verifies it, finishes
    /// what a crash interrupted (cuts a torn tail, seals the synced steps after the
    /// seal, gives an earlier build's seal its slots, completes a compaction), reseals
    /// it under the current key when a previous key (or, when adopting, none) sealed
    /// it, and returns the state with the concrete writer.
    pub(crate) fn open_writer(&self, id: &str) -> Result<(SessionState, FsWriter), StoreError> {
        let (session_path, lock) = self.lock_session(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        let loaded = load(id, &runtime_dir, self.trust())?.ok_or_else(|| StoreError::Missing(id.to_string()))?;
        create_session_folders(id, &session_path)?;
        let settle = loaded.settle;
        let reseal = loaded.needs_reseal() && settle != Settle::FinishCompaction;
        let state = loaded.state.clone();
        let log = open_log(id, &runtime_dir)?;
        let mut writer = FsWriter::new(id, session_path, lock, log, loaded, self.keys.clone())?;
        writer.settle(settle)?;
        if reseal {
            // A compaction rewrites snapshot, log and seal under the current key.
            writer.compact()?;
        }
        Ok((state, writer))
    }

    /// Reseals a session under the current key (`archmax sessions ID --reseal`):
    /// after a key rotation, or, on a store [adopting unkeyed sessions](Self::adopting_unkeyed_sessions),
    /// for a session an earlier build sealed. Returns the session's last step.
    pub fn reseal(&self, id: &str) -> Result<u64, StoreError> {
        // Opening reseals whatever needs it; a session already under the current key
        // is left as it is.
        let (state, writer) = self.open_writer(id)?;
        drop(writer);
        Ok(state.seq)
    }

    /// Cuts a corrupt session back to its longest verified prefix: the snapshot and
    /// the intact, consecutive records of its log. Changes nothing when the session
    /// loads as it is; refuses when the snapshot itself is damaged.
    pub fn repair(&self, id: &str) -> Result<RepairOutcome, StoreError> {
        let (session_path, lock) = self.lock_session(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        let files = Files::read(&runtime_dir).map_err(io_error(id))?;
        match verify_for(id, &files, self.trust()) {
            Ok(Some(loaded)) => return Ok(RepairOutcome::Healthy { seq: loaded.state.seq }),
            Ok(None) => return Err(StoreError::Missing(id.to_string())),
            // Cutting a log back never adopts a session sealed without the key.
            Err(_) if matches!(verify::verify(&files, self.trust()), Err(Refusal::Unkeyed)) => return Err(unkeyed(id)),
            Err(_) => {}
        }
        let salvage = verify::salvage(&files, self.trust())
            .map_err(|what| StoreError::Unrepairable { id: id.to_string(), what })?;
        if salvage.state.id != id {
            return Err(corrupt(id, format!("checkpoint.json belongs to session `{}`", salvage.state.id)));
        }
        let mut faults = Faults::default();
        replace(&runtime_dir, LOG_FILE, &salvage.log, &mut faults).map_err(io_error(id))?;
        let seal = Seal {
            generation: salvage.generation,
            seq: salvage.state.seq,
            log_len: salvage.log.len() as u64,
            log_sha256: sha256(&salvage.log),
            checkpoint_sha256: salvage.checkpoint_sha256,
        };
        write_seal(&runtime_dir, &seal, &self.keys, &mut faults).map_err(io_error(id))?;
        drop(lock);
        let kept_through = salvage.state.seq;
        Ok(RepairOutcome::Repaired {
            kept_through,
            dropped_steps: salvage.sealed_seq.map(|sealed| sealed.saturating_sub(kept_through)),
            dropped_bytes: salvage.dropped_bytes,
        })
    }

    /// Takes an existing session's lock and removes what killed writers left behind.
    fn lock_session(&self, id: &str) -> Result<(PathBuf, File), StoreError> {
        let session_path = self.session_path(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        let exists = real_dir_exists(&session_path).map_err(io_error(id))?
            && real_dir_exists(&runtime_dir).map_err(io_error(id))?;
        if !exists {
            return Err(StoreError::Missing(id.to_string()));
        }
        let lock = take_lock(id, &runtime_dir)?;
        remove_stale_staging_files(&runtime_dir);
        remove_abandoned_creations(&session_path);
        Ok((session_path, lock))
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

impl FsStore {
    /// Loads a session without the lock (the blocking form of [`SessionStore::read`]).
    /// A writer may append, seal or compact meanwhile, so a load that finds the files
    /// disagreeing is retried while they keep changing. (A seal slot being written
    /// while it is read is torn to the reader, which then reads the other slot.)
    pub fn read(&self, id: &str) -> Result<Option<SessionState>, StoreError> {
        let session_path = self.session_path(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        if !real_dir_exists(&session_path).map_err(io_error(id))? {
            return Ok(None);
        }
        let mut attempts_left = READ_ATTEMPTS;
        loop {
            let before = stamps(&runtime_dir).map_err(io_error(id))?;
            let loaded = load(id, &runtime_dir, self.trust());
            let after = stamps(&runtime_dir).map_err(io_error(id))?;
            attempts_left -= 1;
            let settled = before == after || attempts_left == 0;
            match loaded {
                Ok(loaded) => return Ok(loaded.map(|loaded| loaded.state)),
                Err(error) if error.is_unreadable() && !settled => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Every session id, sorted (the blocking form of [`SessionStore::list`]).
    pub fn list(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        collect_session_ids(&self.dir, "", &mut ids).map_err(io_error(&self.dir.display().to_string()))?;
        ids.sort();
        Ok(ids)
    }

    /// Removes a session's folder (the blocking form of [`SessionStore::remove`]). The
    /// session's lock is taken first, so a running writer is refused; its runtime folder is
    /// then renamed to a staging name, which ends the session at once (a crash after that
    /// leaves only files the next creation or open of the id clears), and the folder goes.
    /// Folders left empty above it, up to the store's own, go too.
    pub fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let (session_path, lock) = match self.lock_session(id) {
            Ok(locked) => locked,
            Err(StoreError::Missing(_)) => return Ok(false),
            Err(error) => return Err(error),
        };
        let staging = session_path.join(staging_name(RUNTIME_DIR));
        fs::rename(session_path.join(RUNTIME_DIR), &staging).map_err(io_error(id))?;
        let removed = fs::remove_dir_all(&session_path).map_err(io_error(id));
        drop(lock);
        removed?;
        let mut parent = session_path.parent();
        while let Some(dir) = parent.filter(|dir| *dir != self.dir && dir.starts_with(&self.dir)) {
            if fs::remove_dir(dir).is_err() {
                break;
            }
            parent = dir.parent();
        }
        Ok(true)
    }

    /// Whether a writer holds the session's lock (the blocking form of
    /// [`SessionStore::is_held`]). A free lock is taken and let go at once; a writer that
    /// meets it in that instant tries again ([`try_lock_patiently`]), so a probe never
    /// makes a writer fail as busy. A session whose folders are links is refused, as
    /// every other use of them is; `None` when there is no such session.
    pub fn is_held(&self, id: &str) -> Result<Option<bool>, StoreError> {
        let session_path = self.session_path(id)?;
        let runtime_dir = session_path.join(RUNTIME_DIR);
        let exists = real_dir_exists(&session_path).map_err(io_error(id))?
            && real_dir_exists(&runtime_dir).map_err(io_error(id))?;
        if !exists {
            return Ok(None);
        }
        let lock = match files::open(&runtime_dir.join(LOCK_FILE), OpenOptions::new().read(true).write(true)) {
            Ok(lock) => lock,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error(id)(error)),
        };
        // Another probe may hold the lock for an instant too: a few tries tell it from a
        // writer, which holds it for its whole turn.
        match try_lock_patiently(&lock, PROBE_LOCK_ATTEMPTS) {
            Ok(true) => Ok(Some(false)),
            Ok(false) => Ok(Some(true)),
            Err(error) => Err(io_error(id)(error)),
        }
    }

    /// A session's own folder, where its `scratchpad/` and `artifacts/` live.
    pub fn session_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        self.session_path(id)
    }
}

/// Every operation runs its blocking file work through [`run_blocking`].
impl SessionStore for FsStore {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        Box::pin(async move {
            run_blocking(|| self.create_writer(state)).map(|writer| Box::new(writer) as Box<dyn SessionWriter>)
        })
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        Box::pin(async move {
            run_blocking(|| self.open_writer(id))
                .map(|(state, writer)| (state, Box::new(writer) as Box<dyn SessionWriter>))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        Box::pin(async move { run_blocking(|| FsStore::read(self, id)) })
    }

    fn list(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move { run_blocking(|| FsStore::list(self)) })
    }

    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        Box::pin(async move { run_blocking(|| FsStore::is_held(self, id)) })
    }

    /// The session's folder as a [`DiskVfs`]: links are never followed and only regular
    /// files are opened. The runtime's own `checkpoints/` folder is in it too; the kernel
    /// refuses every tool call there.
    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError> {
        Ok(Arc::new(DiskVfs::new(self.session_path(id)?)))
    }

    fn keep_spec<'a>(&'a self, spec: &'a super::spec::PinnedSpec) -> StoreFuture<'a, ()> {
        Box::pin(async move { run_blocking(|| self.write_spec(spec)) })
    }

    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<super::spec::PinnedSpec>> {
        Box::pin(async move { run_blocking(|| self.read_spec(hash)) })
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { run_blocking(|| FsStore::remove(self, id)) })
    }

    fn local_dir(&self, id: &str) -> Option<PathBuf> {
        self.session_path(id).ok()
    }

    fn claim_record<'a>(&'a self, record: &'a crate::session::records::Record, now_ms: u64) -> StoreFuture<'a, bool> {
        Box::pin(async move { run_blocking(|| FsStore::claim_record(self, record, now_ms)) })
    }

    fn read_record<'a>(
        &'a self,
        kind: crate::session::records::RecordKind,
        key: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move { run_blocking(|| FsStore::read_record(self, kind, key, now_ms)) })
    }

    fn remove_record<'a>(&'a self, kind: crate::session::records::RecordKind, key: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { run_blocking(|| FsStore::remove_record(self, kind, key)) })
    }
}

/// Loads and verifies a session's files; never writes.
fn load(id: &str, runtime_dir: &Path, trust: Trust<'_>) -> Result<Option<Loaded>, StoreError> {
    let tampered = |error: io::Error| match error.kind() {
        io::ErrorKind::InvalidData => StoreError::Corrupt { id: id.to_string(), message: error.to_string() },
        _ => StoreError::Io { id: id.to_string(), source: error },
    };
    if !real_dir_exists(runtime_dir).map_err(tampered)? {
        return Ok(None);
    }
    let files = Files::read(runtime_dir).map_err(tampered)?;
    verify_for(id, &files, trust)
}

/// [`verify::verify`], for the session `id`.
fn verify_for(id: &str, files: &Files, trust: Trust<'_>) -> Result<Option<Loaded>, StoreError> {
    let loaded = verify::verify(files, trust).map_err(|refusal| match refusal {
        Refusal::Damage(what) => corrupt(id, what),
        Refusal::Unkeyed => unkeyed(id),
    })?;
    match loaded {
        Some(loaded) if loaded.state.id != id => {
            Err(corrupt(id, format!("checkpoint.json belongs to session `{}`", loaded.state.id)))
        }
        loaded => Ok(loaded),
    }
}

/// Writes a new session's log (its header, then its first state as the genesis record
/// under the current key) and syncs it: the creation's one sync. Returns the log, open
/// for appending, and the session as loaded.
fn write_genesis_log(
    id: &str,
    runtime_dir: &Path,
    state: &SessionState,
    keys: &SealKeys,
    faults: &mut Faults,
) -> Result<(File, Loaded), StoreError> {
    let invalid = |error: serde_json::Error| StoreError::Io {
        id: id.to_string(),
        source: io::Error::new(io::ErrorKind::InvalidData, error),
    };
    let snapshot = serde_json::to_vec(&SnapshotToStore { generation: 0, seq: state.seq, state }).map_err(invalid)?;
    let mut log_bytes = LogHeader::genesis(state.seq).encode();
    let genesis =
        encode_record(&keyed_payload(keys, &sha256(&log_bytes), &snapshot)).ok_or_else(|| StoreError::Io {
            id: id.to_string(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the session's first state is larger than 4 GiB"),
        })?;
    log_bytes.extend_from_slice(&genesis);
    let written = (|| {
        let mut log =
            files::open(&runtime_dir.join(LOG_FILE), OpenOptions::new().read(true).write(true).create_new(true))?;
        faults.torn_write("mid genesis", &log_bytes, |_, part| log.write_all(part))?;
        // The log's first room (zeros), so the first commits write blocks the creation's
        // sync already made part of the file.
        log.write_all(&vec![0; format::LOG_ROOM as usize])?;
        faults.synced();
        log.sync_all()?;
        faults.hit("synced")?;
        Ok(log)
    })();
    let log = written.map_err(io_error(id))?;
    let mut log_digest = Sha256::new();
    log_digest.update(&log_bytes);
    let loaded = Loaded {
        state: state.clone(),
        generation: 0,
        checkpoint_len: snapshot.len() as u64,
        checkpoint_sha256: sha256(&snapshot),
        log_len: log_bytes.len() as u64,
        log_digest,
        seal_source: SealSource::Missing,
        settle: Settle::NOTHING,
        sealed_by: SealedBy::Key(0),
        log_keyed: true,
    };
    Ok((log, loaded))
}

/// Removes the file at `path`, which may not exist.
fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Replaces the seal file with one holding `seal` in its first slot, under the current key.
fn write_seal(runtime_dir: &Path, seal: &Seal, keys: &SealKeys, faults: &mut Faults) -> io::Result<()> {
    replace(runtime_dir, SEAL_FILE, &seal.encode_file(keys), faults)
}

/// Removes runtime folders of creations a killed process left: staging folders whose
/// lock nobody holds.
fn remove_abandoned_creations(session_path: &Path) {
    let Ok(entries) = fs::read_dir(session_path) else { return };
    for entry in entries.flatten() {
        let is_staging = entry.file_name().to_str().is_some_and(|name| name.starts_with(STAGING_PREFIX));
        if !is_staging || !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let lock = files::open(&entry.path().join(LOCK_FILE), OpenOptions::new().read(true).write(true));
        let abandoned = match lock {
            Ok(lock) => lock.try_lock().is_ok(),
            Err(error) => error.kind() == io::ErrorKind::NotFound,
        };
        if abandoned {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// The stamps of the files a load reads, to notice a writer changed them meanwhile.
fn stamps(runtime_dir: &Path) -> io::Result<[Option<FileStamp>; 3]> {
    Ok([
        FileStamp::of(&runtime_dir.join(CHECKPOINT_FILE))?,
        FileStamp::of(&runtime_dir.join(SEAL_FILE))?,
        FileStamp::of(&runtime_dir.join(LOG_FILE))?,
    ])
}

/// Takes the session's writer lock, or says who holds it.
fn take_lock(id: &str, runtime_dir: &Path) -> Result<File, StoreError> {
    let lock = files::open(
        &runtime_dir.join(LOCK_FILE),
        OpenOptions::new().read(true).write(true).create(true).truncate(false),
    )
    .map_err(io_error(id))?;
    match try_lock_patiently(&lock, WRITER_LOCK_ATTEMPTS) {
        Ok(true) => Ok(lock),
        Ok(false) => Err(StoreError::Busy(id.to_string())),
        Err(error) => Err(StoreError::Io { id: id.to_string(), source: error }),
    }
}

/// How often a writer tries a session's lock before it is busy: a probe
/// ([`FsStore::is_held`]) or a cleanup holds a free lock for an instant, never for this
/// long ([`LOCK_RETRY`] between tries), so only another writer makes one busy.
const WRITER_LOCK_ATTEMPTS: u32 = 40;
/// How often a probe tries: it only has to tell another probe's instant from a writer.
const PROBE_LOCK_ATTEMPTS: u32 = 4;
/// The pause between two tries of a lock.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

/// Takes `lock` exclusively: `Ok(true)` when taken, `Ok(false)` when still held by
/// someone else after `attempts` tries.
fn try_lock_patiently(lock: &File, attempts: u32) -> io::Result<bool> {
    for attempt in 1..=attempts {
        match lock.try_lock() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if attempt < attempts => std::thread::sleep(LOCK_RETRY),
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(error)) => return Err(error),
        }
    }
    Ok(false)
}

fn open_log(id: &str, runtime_dir: &Path) -> Result<File, StoreError> {
    files::open(&runtime_dir.join(LOG_FILE), OpenOptions::new().read(true).write(true)).map_err(io_error(id))
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
        if id_prefix.is_empty() && name == records::RECORDS_DIR {
            continue;
        }
        let id = if id_prefix.is_empty() { name } else { format!("{id_prefix}/{name}") };
        let path = entry.path();
        let is_session = holds_a_session(&path.join(RUNTIME_DIR));
        if is_session {
            ids.push(id);
        } else if depth + 1 < MAX_LISTED_ID_SEGMENTS {
            collect_session_ids(&path, &id, ids)?;
        }
    }
    Ok(())
}

/// Whether a runtime folder holds a session, whole or damaged: `checkpoint.json` or a
/// seal, or else a log whose genesis record is whole. A creation cut before its one
/// sync (a log with no whole genesis and nothing else) is no session.
fn holds_a_session(runtime_dir: &Path) -> bool {
    if [CHECKPOINT_FILE, SEAL_FILE].iter().any(|file| fs::symlink_metadata(runtime_dir.join(file)).is_ok()) {
        return true;
    }
    let log_path = runtime_dir.join(LOG_FILE);
    match files::read_if_exists(&log_path) {
        Ok(Some(log)) => match LogHeader::decode(&log) {
            Ok(header) if header.genesis => format::intact_record_at(&log, format::LOG_HEADER_BYTES).is_some(),
            Ok(_) => true,
            Err(_) => false,
        },
        Ok(None) => false,
        // A log that cannot be read is shown, so a read names what is wrong with it.
        Err(_) => true,
    }
}

fn io_error(id: &str) -> impl Fn(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { id: id.to_string(), source }
}

/// The error of a session sealed without a key.
fn unkeyed(id: &str) -> StoreError {
    StoreError::Unkeyed { id: id.to_string() }
}

/// A corrupt session's error: what is wrong (a repair may cut it back).
fn corrupt(id: &str, what: String) -> StoreError {
    StoreError::Damaged { id: id.to_string(), what }
}
