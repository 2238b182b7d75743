//! The filesystem store's shared records ([`crate::session::records`]):
//! `<dir>/+records/<kind>/<name>`, one file each, authenticated under the seal key.
//!
//! A writer of `sessions/` is not trusted with records (a forged inbox session would sign
//! its author in as someone else), so both the place and the content of a record are
//! keyed with the store's current seal key ([`super::SealKeys`]):
//!
//! - the file's **name** is the HMAC-SHA256 of the kind and the key, as 64 hex digits, so
//!   a listing shows no key and no one without the seal key can tell where a key's record
//!   would be;
//! - the file holds the expiry (8 bytes, big-endian milliseconds since the epoch), the
//!   value, and a 32-byte **MAC** over the kind, the file name (which binds the key), the
//!   expiry and the value. A record whose MAC fails (written by hand, copied from another
//!   key's file, or damaged) reads as absent, is never counted as live, does not hold its
//!   key against a claim, and is removed by the next sweep.
//!
//! Seal-key rotation: records are written and read under the current key only, so a
//! record written under a previous key reads as absent once the key changes (inbox users
//! sign in again). A claim, though, looks for the key's record under every accepted key
//! (the current one and the previous ones the key file still lists) when the kind holds
//! across rotations ([`RecordKind::holds_across_rotation`]: replays), and the sweep keeps
//! a record any accepted key vouches for until it expires: a webhook request accepted just
//! before a rotation is still refused as a replay after it. Other kinds start afresh under
//! the new key (the inbox's sign-in key is made again at once). A record whose key is no longer
//! accepted at all is unauthenticated, and is treated as absent and swept.
//!
//! Every operation opens `+records` and then `+records/<kind>` once, each with
//! `O_DIRECTORY | O_NOFOLLOW`, and does all its work (the `flock`, listing, opening,
//! renaming and unlinking files) relative to that handle with single file names. A link
//! standing in either folder is refused with an error naming the folder (remove it; the
//! next claim makes a real folder), and a folder swapped for a link after it was opened
//! changes nothing: the handle still names the folder that was opened, so no file outside
//! the store is ever read, written or deleted. Only the store's own folder is opened by
//! the path the runner was given.
//!
//! `+` is not a session-id character, so the folder can never be taken for a session,
//! and listings skip it. Every change of a kind's records (a claim, a removal, a prune)
//! happens under an exclusive `flock` of `<kind>/.lock`, so processes sharing the folder
//! take turns: a claim looks at the key and writes it while no other process can, which
//! is what makes exactly one of two racing claims win. A record is written as a synced
//! staging file renamed into place, so a reader (which takes no lock) sees the old file
//! or the new one, never half of one.
//!
//! The one thing to know: the bound. `<kind>/.state` holds an upper estimate of the
//! kind's live records and when they were last counted. A claim adds one; when the
//! estimate reaches the kind's capacity, or a minute has passed, the claim first sweeps
//! the folder (removes expired, damaged and unauthenticated records and staging files a
//! killed process left, and counts what is live). A claim that still finds the kind full
//! is refused, so the folder never holds much more than the capacity in live records.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::FsStore;
use super::files::{STAGING_PREFIX, staging_name};
use super::seal_key::SealKeys;
use crate::session::StoreError;
use crate::session::records::{MAX_RECORD_BYTES, Record, RecordKind, check_record_key, records_full};
use archmax_program::hex::hex;

/// The folder of the shared records, under the store's own.
pub(crate) const RECORDS_DIR: &str = "+records";
const LOCK_FILE: &str = ".lock";
const STATE_FILE: &str = ".state";
/// The longest a kind goes between sweeps while claims are made, in milliseconds.
const SWEEP_EVERY_MS: u64 = 60_000;
/// The bytes before a record's value: its expiry.
const EXPIRY_BYTES: usize = 8;
/// The bytes after a record's value: its MAC.
const MAC_BYTES: usize = 32;
/// A record file's name: an HMAC-SHA256 as hex.
const NAME_CHARS: usize = 64;
/// What the keyed digests are of, so a record's name or MAC is never another MAC's.
const NAME_DOMAIN: &[u8] = b"archmax record name\0";
/// The most bytes a record file may hold.
const RECORD_FILE_LIMIT: u64 = (EXPIRY_BYTES + MAX_RECORD_BYTES + MAC_BYTES) as u64;
const MAC_DOMAIN: &[u8] = b"archmax record\0";

fn records_io(kind: RecordKind) -> impl Fn(io::Error) -> StoreError {
    move |source| StoreError::Io { id: format!("{RECORDS_DIR}/{}", kind.as_str()), source }
}

/// The name of the file that holds `kind`'s record `key`: a keyed digest of both.
pub(super) fn record_file_name(keys: &SealKeys, kind: RecordKind, key: &str) -> String {
    hex(&keys.mac(&[NAME_DOMAIN, kind.as_str().as_bytes(), b"\0", key.as_bytes()]))
}

/// The file name `kind`'s record `key` has under each accepted key, the current first.
fn record_file_names(keys: &SealKeys, kind: RecordKind, key: &str) -> Vec<(usize, String)> {
    (0..keys.accepted())
        .filter_map(|index| {
            let name = keys.mac_by(index, &[NAME_DOMAIN, kind.as_str().as_bytes(), b"\0", key.as_bytes()])?;
            Some((index, hex(&name)))
        })
        .collect()
}

fn is_record_file_name(name: &str) -> bool {
    name.len() == NAME_CHARS && name.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

/// The bytes of a record file: expiry, value, and the MAC over them, the kind and `name`.
pub(super) fn encode_record(keys: &SealKeys, kind: RecordKind, name: &str, expires_ms: u64, value: &[u8]) -> Vec<u8> {
    let expiry = expires_ms.to_be_bytes();
    let mac = keys.mac(&[MAC_DOMAIN, kind.as_str().as_bytes(), b"\0", name.as_bytes(), &expiry, value]);
    [&expiry[..], value, &mac].concat()
}

/// Which accepted seal key a record's MAC must hold under.
#[derive(Clone, Copy)]
enum Vouching {
    /// This one (0 = current).
    Key(usize),
    /// Any of them.
    Any,
}

/// A record file's expiry and value; `None` unless its MAC holds under the key `by` asks.
fn decode_record(keys: &SealKeys, by: Vouching, kind: RecordKind, name: &str, bytes: &[u8]) -> Option<(u64, Vec<u8>)> {
    if bytes.len() < EXPIRY_BYTES + MAC_BYTES || bytes.len() > EXPIRY_BYTES + MAX_RECORD_BYTES + MAC_BYTES {
        return None;
    }
    let (expiry, rest) = bytes.split_at(EXPIRY_BYTES);
    let (value, mac) = rest.split_at(rest.len() - MAC_BYTES);
    let parts: [&[u8]; 6] = [MAC_DOMAIN, kind.as_str().as_bytes(), b"\0", name.as_bytes(), expiry, value];
    let vouched = match by {
        Vouching::Key(index) => keys.verify_by(index, &parts, mac),
        Vouching::Any => keys.check_any(&parts, mac).is_some(),
    };
    if !vouched {
        return None;
    }
    let mut stamp = [0u8; EXPIRY_BYTES];
    stamp.copy_from_slice(expiry);
    Some((u64::from_be_bytes(stamp), value.to_vec()))
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
    fn read(folder: &KindFolder) -> SweepState {
        let text = folder.read_small(STATE_FILE, 64).ok().flatten().unwrap_or_default();
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

    fn write(self, folder: &KindFolder) -> io::Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC;
        let mut file = folder.open_file(STATE_FILE, flags)?.ok_or_else(|| io::Error::from(Errno::NOENT))?;
        file.write_all(format!("{} {}\n", self.estimate, self.swept_ms).as_bytes())
    }

    fn needs_sweep(self, kind: RecordKind, now_ms: u64) -> bool {
        self.estimate >= kind.capacity()
            || now_ms.saturating_sub(self.swept_ms) >= SWEEP_EVERY_MS
            || now_ms < self.swept_ms
    }
}

/// Opens the folder `name` in `parent` without following a link; makes it first when
/// `create`. `None` when it is absent and not to be made.
fn open_folder(parent: impl AsFd, name: &str, create: bool, shown: &Path) -> io::Result<Option<OwnedFd>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&parent, name, flags, Mode::empty()) {
        Ok(handle) => return Ok(Some(handle)),
        Err(Errno::NOENT) if create => {}
        Err(Errno::NOENT) => return Ok(None),
        Err(errno) => return Err(folder_refused(shown, errno)),
    }
    match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o777)) {
        // Made here or by a racing process: a link in its place is still refused below.
        Ok(()) | Err(Errno::EXIST) => {}
        Err(errno) => return Err(errno.into()),
    }
    rustix::fs::openat(&parent, name, flags, Mode::empty()).map(Some).map_err(|errno| folder_refused(shown, errno))
}

/// The error of opening a records folder: a link (or a file) in its place is named.
fn folder_refused(shown: &Path, errno: Errno) -> io::Error {
    if errno == Errno::LOOP || errno == Errno::NOTDIR {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is a symbolic link or not a folder; the session store never follows links in its records \
                 (remove it, and the next claim makes the folder)",
                shown.display()
            ),
        )
    } else {
        errno.into()
    }
}

/// One kind's records folder, opened once: every file of one operation is reached
/// through this handle by a single name, never by a path.
struct KindFolder {
    handle: OwnedFd,
}

impl KindFolder {
    /// Opens the regular file `name` without following a link or blocking on a FIFO;
    /// `None` when it is absent.
    fn open_file(&self, name: &str, flags: OFlags) -> io::Result<Option<File>> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let handle = match rustix::fs::openat(&self.handle, name, flags, Mode::from_raw_mode(0o600)) {
            Ok(handle) => handle,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{name} is a symbolic link; the session store never follows links in its records"),
                ));
            }
            Err(errno) => return Err(errno.into()),
        };
        if FileType::from_raw_mode(rustix::fs::fstat(&handle)?.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is not a regular file; the session store refuses to use it"),
            ));
        }
        Ok(Some(File::from(handle)))
    }

    /// At most `limit + 1` bytes of the file `name`; `None` when it is absent.
    fn read_small(&self, name: &str, limit: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(file) = self.open_file(name, OFlags::RDONLY)? else { return Ok(None) };
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// The expiry and value of the record file `name`, when its MAC holds under the key
    /// `by` asks.
    fn read_record(
        &self,
        keys: &SealKeys,
        by: Vouching,
        kind: RecordKind,
        name: &str,
    ) -> io::Result<Option<(u64, Vec<u8>)>> {
        Ok(self.read_small(name, RECORD_FILE_LIMIT)?.and_then(|bytes| decode_record(keys, by, kind, name, &bytes)))
    }

    /// Holds `.lock` exclusively until the returned file is dropped.
    fn lock(&self) -> io::Result<File> {
        let lock = self.open_file(LOCK_FILE, OFlags::RDWR | OFlags::CREATE)?;
        let lock = lock.ok_or_else(|| io::Error::from(Errno::NOENT))?;
        rustix::fs::flock(&lock, FlockOperation::LockExclusive)?;
        Ok(lock)
    }

    /// Replaces the file `name` with `bytes`: a synced staging file renamed over it.
    fn replace(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let staging = staging_name(name);
        let written = (|| -> io::Result<()> {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
            let mut file = self.open_file(&staging, flags)?.ok_or_else(|| io::Error::from(Errno::NOENT))?;
            file.write_all(bytes)?;
            file.sync_all()?;
            rustix::fs::renameat(&self.handle, staging.as_str(), &self.handle, name)?;
            Ok(())
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.handle, staging.as_str(), AtFlags::empty());
        }
        written?;
        rustix::fs::fsync(&self.handle)?;
        Ok(())
    }

    /// Removes the file `name`; `false` when there was none.
    fn remove(&self, name: &str) -> io::Result<bool> {
        match rustix::fs::unlinkat(&self.handle, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(errno) => Err(errno.into()),
        }
    }

    /// Removes expired, damaged and unauthenticated records and leftover staging files;
    /// counts the live.
    fn sweep(&self, keys: &SealKeys, kind: RecordKind, now_ms: u64) -> io::Result<SweepState> {
        let mut live = 0;
        for entry in rustix::fs::Dir::read_from(&self.handle)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else { continue };
            if name.starts_with(STAGING_PREFIX) {
                let _ = self.remove(name);
                continue;
            }
            if name.starts_with('.') {
                continue;
            }
            let record =
                if is_record_file_name(name) { self.read_record(keys, Vouching::Any, kind, name) } else { Ok(None) };
            match record {
                Ok(Some((expires, _))) if expires > now_ms => live += 1,
                _ => {
                    let _ = self.remove(name);
                }
            }
        }
        Ok(SweepState { estimate: live, swept_ms: now_ms })
    }
}

impl FsStore {
    /// `<dir>/+records/<kind>`, opened (and made when `create`) without following a link
    /// at either level; `None` when absent.
    fn kind_folder(&self, kind: RecordKind, create: bool) -> Result<Option<KindFolder>, StoreError> {
        let failed = records_io(kind);
        if create {
            fs::create_dir_all(&self.dir).map_err(&failed)?;
        }
        // The store's own folder is taken as the runner was told to name it.
        let store =
            match rustix::fs::open(&self.dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
                Ok(handle) => handle,
                Err(Errno::NOENT) if !create => return Ok(None),
                Err(errno) => return Err(failed(errno.into())),
            };
        let top_path = self.dir.join(RECORDS_DIR);
        let Some(top) = open_folder(&store, RECORDS_DIR, create, &top_path).map_err(&failed)? else {
            return Ok(None);
        };
        let kind_path = top_path.join(kind.as_str());
        let handle = open_folder(&top, kind.as_str(), create, &kind_path).map_err(&failed)?;
        Ok(handle.map(|handle| KindFolder { handle }))
    }

    /// Claims a shared record (the blocking form of
    /// [`crate::session::SessionStore::claim_record`]).
    pub fn claim_record(&self, record: &Record, now_ms: u64) -> Result<bool, StoreError> {
        record.check()?;
        let kind = record.kind;
        let failed = records_io(kind);
        let Some(folder) = self.kind_folder(kind, true)? else {
            return Err(failed(io::Error::other("the records folder could not be made")));
        };
        let _lock = folder.lock().map_err(&failed)?;
        // The key is held while a live record of it exists under any accepted key: one
        // written just before a rotation still counts.
        let names = record_file_names(&self.keys, kind, &record.key);
        let checked = if kind.holds_across_rotation() { names.len() } else { 1 };
        for (index, name) in names.iter().take(checked) {
            let held = folder.read_record(&self.keys, Vouching::Key(*index), kind, name).map_err(&failed)?;
            if held.is_some_and(|(expires, _)| expires > now_ms) {
                return Ok(false);
            }
        }
        // The current key's name comes first.
        let Some((_, name)) = names.into_iter().next() else {
            return Err(failed(io::Error::other("no seal key to name the record with")));
        };
        let mut state = SweepState::read(&folder);
        if state.needs_sweep(kind, now_ms) {
            state = folder.sweep(&self.keys, kind, now_ms).map_err(&failed)?;
        }
        if state.estimate >= kind.capacity() {
            return Err(records_full(kind));
        }
        let bytes = encode_record(&self.keys, kind, &name, record.expires_ms, &record.value);
        folder.replace(&name, &bytes).map_err(&failed)?;
        state.estimate = state.estimate.saturating_add(1);
        // The estimate only steers sweeps; a lost write means an earlier sweep.
        let _ = state.write(&folder);
        Ok(true)
    }

    /// The value of a live shared record (the blocking form of
    /// [`crate::session::SessionStore::read_record`]). Reads take no lock: a record is
    /// replaced by a rename, so a read sees a whole file.
    pub fn read_record(&self, kind: RecordKind, key: &str, now_ms: u64) -> Result<Option<Vec<u8>>, StoreError> {
        check_record_key(kind, key)?;
        let failed = records_io(kind);
        let Some(folder) = self.kind_folder(kind, false)? else { return Ok(None) };
        let name = record_file_name(&self.keys, kind, key);
        let entry = folder.read_record(&self.keys, Vouching::Key(0), kind, &name).map_err(&failed)?;
        Ok(entry.filter(|(expires, _)| *expires > now_ms).map(|(_, value)| value))
    }

    /// Forgets a shared record (the blocking form of
    /// [`crate::session::SessionStore::remove_record`]), under the kind's lock.
    pub fn remove_record(&self, kind: RecordKind, key: &str) -> Result<bool, StoreError> {
        check_record_key(kind, key)?;
        let failed = records_io(kind);
        let Some(folder) = self.kind_folder(kind, false)? else { return Ok(false) };
        let _lock = folder.lock().map_err(&failed)?;
        // Under every accepted key, so a claim does not find the key still held.
        let mut removed = false;
        for (_, name) in record_file_names(&self.keys, kind, key) {
            removed |= folder.remove(&name).map_err(&failed)?;
        }
        Ok(removed)
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
