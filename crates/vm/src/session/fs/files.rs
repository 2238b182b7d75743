//! File access for the store's own files: never through a symbolic link.
//!
//! The one thing to know: every file under `checkpoints/` is opened with `O_NOFOLLOW`
//! and the folder itself is refused when it is a link, so a local user who plants a
//! link there cannot make the runtime read, append to or replace a file elsewhere.
//! Files are replaced by writing a staging file (`.archmax-staging-*`, created
//! exclusively) and renaming it over the target; staging files a killed process left
//! behind are removed the next time the session is opened with its lock held.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::faults::Faults;

/// The prefix of every staging file and folder the store writes.
pub(super) const STAGING_PREFIX: &str = ".archmax-staging-";

/// Adds `O_NOFOLLOW` (the final component is never a followed link) and `O_NONBLOCK`
/// (a FIFO planted in place of a file cannot hang the open), plus `extra` flags.
fn no_follow(options: &mut OpenOptions, extra: i32) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | extra)
    }
    #[cfg(not(unix))]
    {
        let _ = extra;
        options
    }
}

/// Rewrites the error of opening a link with `O_NOFOLLOW` into one that says so.
fn name_links(path: &Path, error: io::Error) -> io::Error {
    #[cfg(unix)]
    if error.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is a symbolic link; the session store never follows links in its own files", path.display()),
        );
    }
    let _ = path;
    error
}

/// Opens the regular file `path` without following a link at its last component;
/// anything else there (a FIFO, a device, a folder) is refused, checked on the handle.
pub(super) fn open(path: &Path, options: &OpenOptions) -> io::Result<File> {
    let mut options = options.clone();
    let file = no_follow(&mut options, 0).open(path).map_err(|error| name_links(path, error))?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a regular file; the session store refuses to use it", path.display()),
        ));
    }
    Ok(file)
}

/// Refuses `path` when it is a symbolic link or not a folder; `Ok(false)` when absent.
pub(super) fn real_dir_exists(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is a symbolic link; the session store refuses to use it", path.display()),
        )),
        Ok(metadata) if metadata.is_dir() => Ok(true),
        Ok(_) => Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a folder", path.display()))),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// At most `limit + 1` bytes of the file, or `None` when it does not exist: a file that
/// should be small is never read whole when it is not (a 1 TB sparse file).
pub(super) fn read_at_most(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    match open(path, OpenOptions::new().read(true)) {
        Ok(file) => {
            let mut bytes = Vec::new();
            file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// The whole file, or `None` when it does not exist.
pub(super) fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match open(path, OpenOptions::new().read(true)) {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// A fresh staging path in `dir` for a file to be renamed to `target`.
pub(super) fn staging_name(target: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{STAGING_PREFIX}{target}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Replaces `dir/name` with `bytes` atomically: a synced staging file renamed over it,
/// then the folder synced. Each durable step is a fault point for the crash tests.
pub(super) fn replace(dir: &Path, name: &str, bytes: &[u8], faults: &mut Faults) -> io::Result<()> {
    let staging = dir.join(staging_name(name));
    let staged = (|| {
        let mut file = open(&staging, OpenOptions::new().write(true).create_new(true))?;
        file.write_all(bytes)?;
        faults.synced();
        file.sync_all()
    })();
    if let Err(error) = staged {
        let _ = fs::remove_file(&staging);
        return Err(error);
    }
    faults.hit("staged")?;
    if let Err(error) = fs::rename(&staging, dir.join(name)) {
        let _ = fs::remove_file(&staging);
        return Err(error);
    }
    faults.hit("renamed")?;
    faults.synced();
    sync_dir(dir)
}

/// Overwrites `bytes` at `offset` of `file` in place (the seal's slots).
pub(super) fn write_at(file: &File, offset: u64, bytes: &[u8]) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom};
        let mut file = file;
        file.seek(SeekFrom::Start(offset))?;
        file.write_all(bytes)
    }
}

/// Removes the staging files in `dir` a killed writer left; only with the lock held.
pub(super) fn remove_stale_staging_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let is_staging = entry.file_name().to_str().is_some_and(|name| name.starts_with(STAGING_PREFIX));
        let is_file = entry.file_type().is_ok_and(|kind| kind.is_file() || kind.is_symlink());
        if is_staging && is_file {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Makes a folder's entries (a rename, a new file) durable.
pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        no_follow(OpenOptions::new().read(true), libc::O_DIRECTORY)
            .open(path)
            .map_err(|error| name_links(path, error))?
            .sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Enough of a file's metadata to notice that someone else replaced or wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
    /// The inode on Unix (a rename-over always changes it); 0 elsewhere.
    pub inode: u64,
}

impl FileStamp {
    /// The stamp of the entry at `path` itself (a link is stamped, not followed).
    pub fn of(path: &Path) -> io::Result<Option<Self>> {
        match fs::symlink_metadata(path) {
            Ok(metadata) => Ok(Some(Self::from_metadata(&metadata))),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The stamp of the entry `name` in the open folder `dir` (a link is stamped, not
    /// followed): one lookup of one name, where [`Self::of`] walks the whole path.
    pub fn at(dir: &std::os::fd::OwnedFd, name: &str) -> io::Result<Option<Self>> {
        match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                // As the standard library reads it: seconds either side of the epoch,
                // then the nanoseconds forward.
                let nanos = std::time::Duration::from_nanos(stat.st_mtime_nsec);
                let seconds = std::time::Duration::from_secs(stat.st_mtime.unsigned_abs());
                let whole = if stat.st_mtime >= 0 {
                    SystemTime::UNIX_EPOCH.checked_add(seconds)
                } else {
                    SystemTime::UNIX_EPOCH.checked_sub(seconds)
                };
                let modified = whole.and_then(|whole| whole.checked_add(nanos));
                Ok(Some(Self { len: stat.st_size as u64, modified, inode: stat.st_ino }))
            }
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(errno) => Err(errno.into()),
        }
    }

    /// The folder `dir` opened for [`Self::at`], never through a link.
    pub fn open_dir(dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(rustix::fs::open(dir, flags, Mode::empty())?)
    }

    pub(crate) fn of_file(file: &File) -> io::Result<Self> {
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
