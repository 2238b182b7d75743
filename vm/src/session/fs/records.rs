//! The filesystem store's shared records ([`crate::session::records`]):
//! `<dir>/+records/<kind>/<key>`, one file each.
//!
//! A record's file holds its expiry (8 bytes, big-endian milliseconds since the epoch)
//! and then its value. `+` is not a session-id character, so the folder can never be
//! taken for a session, and listings skip it. Every change of a kind's records (a claim,
//! a removal, a prune) happens under an exclusive `flock` of `<kind>/.lock`, so
//! processes sharing the folder take turns: a claim looks at the key and writes it while
//! no other process can, which is what makes exactly one of two racing claims win. A
//! record is written as a synced staging file renamed into place, so a reader (which
//! takes no lock) sees the old file or the new one, never half of one.
//!
//! The one thing to know: the bound. `<kind>/.state` holds an upper estimate of the
//! kind's live records and when they were last counted. A claim adds one; when the
//! estimate reaches the kind's capacity, or a minute has passed, the claim first sweeps
//! the folder (removes expired and damaged records and staging files a killed process
//! left, and counts what is live). A claim that still finds the kind full is refused, so
//! the folder never holds much more than the capacity in live records.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::FsStore;
use super::faults::Faults;
use super::files::{STAGING_PREFIX, open, read_at_most, real_dir_exists, replace};
use crate::session::StoreError;
use crate::session::records::{MAX_RECORD_BYTES, Record, RecordKind, check_record_key, records_full};

/// The folder of the shared records, under the store's own.
pub const RECORDS_DIR: &str = "+records";
const LOCK_FILE: &str = ".lock";
const STATE_FILE: &str = ".state";
/// The longest a kind goes between sweeps while claims are made, in milliseconds.
const SWEEP_EVERY_MS: u64 = 60_000;
/// The bytes before a record's value: its expiry.
const EXPIRY_BYTES: usize = 8;

fn records_io(kind: RecordKind) -> impl Fn(io::Error) -> StoreError {
    move |source| StoreError::Io { id: format!("{RECORDS_DIR}/{}", kind.as_str()), source }
}

/// What a kind's `.state` file says.
#[derive(Clone, Copy, Debug, Default)]
struct SweepState {
    /// At least as many live records as the folder holds.
    estimate: usize,
    /// When the folder was last swept (milliseconds since the epoch).
    swept_ms: u64,
}

impl SweepState {
    fn read(dir: &Path) -> SweepState {
        let text = read_at_most(&dir.join(STATE_FILE), 64).ok().flatten().unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let mut numbers = text.split_whitespace().map(str::parse::<u64>);
        match (numbers.next(), numbers.next()) {
            (Some(Ok(estimate)), Some(Ok(swept_ms))) => {
                SweepState { estimate: usize::try_from(estimate).unwrap_or(usize::MAX), swept_ms }
            }
            // Missing or damaged: sweep at the next claim.
            _ => SweepState::default(),
        }
    }

    fn write(self, dir: &Path) -> io::Result<()> {
        let mut file = open(&dir.join(STATE_FILE), OpenOptions::new().write(true).create(true).truncate(true))?;
        file.write_all(format!("{} {}\n", self.estimate, self.swept_ms).as_bytes())
    }

    fn needs_sweep(self, kind: RecordKind, now_ms: u64) -> bool {
        self.estimate >= kind.capacity()
            || now_ms.saturating_sub(self.swept_ms) >= SWEEP_EVERY_MS
            || now_ms < self.swept_ms
    }
}

/// A record's file: its expiry and value; `None` when absent or damaged.
fn read_entry(path: &Path) -> io::Result<Option<(u64, Vec<u8>)>> {
    let Some(bytes) = read_at_most(path, (EXPIRY_BYTES + MAX_RECORD_BYTES) as u64)? else {
        return Ok(None);
    };
    if bytes.len() < EXPIRY_BYTES || bytes.len() > EXPIRY_BYTES + MAX_RECORD_BYTES {
        return Ok(None);
    }
    let (expiry, value) = bytes.split_at(EXPIRY_BYTES);
    let mut stamp = [0u8; EXPIRY_BYTES];
    stamp.copy_from_slice(expiry);
    Ok(Some((u64::from_be_bytes(stamp), value.to_vec())))
}

/// Holds `<kind>/.lock` exclusively until dropped.
fn lock_kind(dir: &Path) -> io::Result<fs::File> {
    let file = open(&dir.join(LOCK_FILE), OpenOptions::new().read(true).write(true).create(true))?;
    file.lock()?;
    Ok(file)
}

/// Removes expired and damaged records and leftover staging files; counts the live.
fn sweep(dir: &Path, now_ms: u64) -> io::Result<SweepState> {
    let mut live = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if name.starts_with(STAGING_PREFIX) {
            let _ = fs::remove_file(entry.path());
            continue;
        }
        if name.starts_with('.') {
            continue;
        }
        match read_entry(&entry.path()) {
            Ok(Some((expires, _))) if expires > now_ms => live += 1,
            _ => {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    Ok(SweepState { estimate: live, swept_ms: now_ms })
}

impl FsStore {
    /// `<dir>/+records/<kind>`, made when `create`; `None` when absent. A link anywhere
    /// on the way is refused.
    fn records_dir(&self, kind: RecordKind, create: bool) -> Result<Option<PathBuf>, StoreError> {
        let failed = records_io(kind);
        let top = self.dir.join(RECORDS_DIR);
        let dir = top.join(kind.as_str());
        for folder in [&self.dir, &top, &dir] {
            if !real_dir_exists(folder).map_err(&failed)? {
                if !create {
                    return Ok(None);
                }
                fs::create_dir_all(folder).map_err(&failed)?;
                // Made here or by a racing process: a link in its place is still refused.
                real_dir_exists(folder).map_err(&failed)?;
            }
        }
        Ok(Some(dir))
    }

    /// Claims a shared record (the blocking form of
    /// [`crate::session::SessionStore::claim_record`]).
    pub fn claim_record(&self, record: &Record, now_ms: u64) -> Result<bool, StoreError> {
        record.check()?;
        let kind = record.kind;
        let failed = records_io(kind);
        let Some(dir) = self.records_dir(kind, true)? else {
            return Err(failed(io::Error::other("the records folder could not be made")));
        };
        let _lock = lock_kind(&dir).map_err(&failed)?;
        let path = dir.join(&record.key);
        if read_entry(&path).map_err(&failed)?.is_some_and(|(expires, _)| expires > now_ms) {
            return Ok(false);
        }
        let mut state = SweepState::read(&dir);
        if state.needs_sweep(kind, now_ms) {
            state = sweep(&dir, now_ms).map_err(&failed)?;
        }
        if state.estimate >= kind.capacity() {
            return Err(records_full(kind));
        }
        let mut bytes = Vec::with_capacity(EXPIRY_BYTES + record.value.len());
        bytes.extend_from_slice(&record.expires_ms.to_be_bytes());
        bytes.extend_from_slice(&record.value);
        replace(&dir, &record.key, &bytes, &mut Faults::default()).map_err(&failed)?;
        state.estimate = state.estimate.saturating_add(1);
        // The estimate only steers sweeps; a lost write means an earlier sweep.
        let _ = state.write(&dir);
        Ok(true)
    }

    /// The value of a live shared record (the blocking form of
    /// [`crate::session::SessionStore::read_record`]). Reads take no lock: a record is
    /// replaced by a rename, so a read sees a whole file.
    pub fn read_record(&self, kind: RecordKind, key: &str, now_ms: u64) -> Result<Option<Vec<u8>>, StoreError> {
        check_record_key(kind, key)?;
        let Some(dir) = self.records_dir(kind, false)? else { return Ok(None) };
        let entry = read_entry(&dir.join(key)).map_err(records_io(kind))?;
        Ok(entry.filter(|(expires, _)| *expires > now_ms).map(|(_, value)| value))
    }

    /// Forgets a shared record (the blocking form of
    /// [`crate::session::SessionStore::remove_record`]), under the kind's lock.
    pub fn remove_record(&self, kind: RecordKind, key: &str) -> Result<bool, StoreError> {
        check_record_key(kind, key)?;
        let failed = records_io(kind);
        let Some(dir) = self.records_dir(kind, false)? else { return Ok(false) };
        let _lock = lock_kind(&dir).map_err(&failed)?;
        match fs::remove_file(dir.join(key)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(failed(error)),
        }
    }
}
