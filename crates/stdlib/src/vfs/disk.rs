//! [`DiskVfs`]: a store rooted at a directory (or, for a file mount, a single file) on
//! disk.
//!
//! The one thing to know: every path below the root is resolved by the kernel, with
//! `openat2(RESOLVE_BENEATH)` relative to a handle on the root (see the `beneath`
//! submodule), and every operation then works on the handle it opened, never on a path
//! checked a moment earlier. So neither `..`, nor a symbolic link, nor a link swapped in
//! while a session runs can take a read or a write outside the root. No store follows a
//! symbolic link, not even one that stays beneath its root: the kernel judges a path as
//! the model wrote it, so a link inside a mount (`reference/alias -> internal`) would
//! otherwise reach what a denial forbids under another name. Listings hide links, so no
//! walk descends into one. A session's own folder ([`StoreKind::SessionFolder`]) also
//! refuses a file with more than one hard link, since no tool creates hard links and one
//! planted there could name the session's log or a mount's file.
//!
//! Only regular files are read or written: a named pipe, socket or device is refused,
//! judged on the opened handle (opened non-blocking), so it can never hang a tool.
//! Writes land whole or not at all (a staging file beside the target, then a rename);
//! staging files a killed process left behind are removed the next time their folder is
//! listed or written, and are never shown. Errors describe what went wrong in words of
//! their own and carry only the store-relative path, never the host's.

mod beneath;
mod host_path;
#[cfg(test)]
mod tests;

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use self::beneath::{Root, file_type};
pub use self::host_path::{HandedPath, HostPathError};
use super::{Entry, Vfs, VfsError, relative_segments};

/// Prefix of the temporary files a write stages beside its target; listings hide them
/// and no path may name one.
const STAGING_PREFIX: &str = ".archmax-staging-";

/// Distinguishes concurrent writes of one process.
static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What a [`DiskVfs`] holds. Neither kind follows symbolic links: a link anywhere on a
/// path refuses the operation, and listings hide links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A session's own folder: no tool creates links of either sort, so any there was
    /// planted. A regular file with more than one hard link is refused too.
    SessionFolder,
    /// A host mount, whose author's tree may hold hard links of its own.
    Mount,
}

/// A directory on disk. For a file mount, `root` is the file and the file is path `""`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskVfs {
    /// The host's choice of location: the root itself is opened as named, links and all.
    pub root: PathBuf,
    pub kind: StoreKind,
}

impl DiskVfs {
    /// A session's own folder: follows no link, reads and writes no hard-linked file.
    pub fn new(root: impl Into<PathBuf>) -> DiskVfs {
        DiskVfs { root: root.into(), kind: StoreKind::SessionFolder }
    }

    /// A host mount: follows no symbolic link, even one that stays beneath `root`.
    pub fn mount(root: impl Into<PathBuf>) -> DiskVfs {
        DiskVfs { root: root.into(), kind: StoreKind::Mount }
    }

    /// The store-relative path, `/`-joined; `""` is the root. Climbing, absolute paths
    /// and the store's own staging names are refused.
    fn relative(&self, path: &str) -> Result<String, VfsError> {
        let segments = relative_segments(path)?;
        if segments.iter().any(|segment| segment.starts_with(STAGING_PREFIX)) {
            return Err(VfsError::Other(
                path.to_string(),
                format!("names beginning with `{STAGING_PREFIX}` are reserved for the store's own use"),
            ));
        }
        Ok(segments.join("/"))
    }

    fn root_handle(&self) -> Result<Root, Errno> {
        Root::new(&self.root)
    }

    /// Opens a path with `flags`: the root itself as named, anything below it beneath it.
    fn open(&self, relative: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        if relative.is_empty() {
            return rustix::fs::open(&self.root, flags | OFlags::CLOEXEC, Mode::empty());
        }
        self.root_handle()?.open(relative, flags)
    }

    /// Opens a regular file for reading; returns it with its size.
    fn open_regular(&self, path: &str) -> Result<(fs::File, u64), VfsError> {
        let relative = self.relative(path)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let handle = match self.open(&relative, flags) {
            Ok(handle) => handle,
            // A socket cannot be opened at all; say what it is.
            Err(Errno::NXIO) => return Err(self.describe_unopenable(path, &relative)),
            Err(errno) => return Err(self.failure(path, errno)),
        };
        let stat = rustix::fs::fstat(&handle).map_err(|errno| self.failure(path, errno))?;
        match file_type(&stat) {
            FileType::RegularFile => {
                self.check_single_link(path, &stat)?;
                Ok((fs::File::from(handle), size_of(&stat)))
            }
            FileType::Directory => Err(VfsError::IsADirectory(path.to_string())),
            other => Err(not_regular(path, other)),
        }
    }

    /// Refuses a hard-linked regular file in a session's folder: it is another name for
    /// a file elsewhere (the session's log, a mount's file), planted from outside.
    fn check_single_link(&self, path: &str, stat: &Stat) -> Result<(), VfsError> {
        if self.kind == StoreKind::SessionFolder && stat.st_nlink > 1 {
            return Err(VfsError::Other(
                path.to_string(),
                "has more than one hard link, so it is another name for a file elsewhere; no tool makes hard links, \
                 so it was planted: remove it and write the file afresh"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// Why a path that refused to open (ENXIO) is no regular file.
    fn describe_unopenable(&self, path: &str, relative: &str) -> VfsError {
        let kind = self
            .open(relative, OFlags::PATH)
            .and_then(|handle| rustix::fs::fstat(&handle))
            .map_or(FileType::Unknown, |stat| file_type(&stat));
        not_regular(path, kind)
    }

    /// A store error for a failed system call, in our own words.
    fn failure(&self, path: &str, errno: Errno) -> VfsError {
        let path = path.to_string();
        let detail = match errno {
            Errno::NOENT => return VfsError::NotFound(path),
            Errno::ISDIR => return VfsError::IsADirectory(path),
            Errno::NOTDIR => return VfsError::NotADirectory(path),
            Errno::XDEV => return VfsError::Escape(path),
            Errno::LOOP => return link_refused(&path),
            Errno::ACCESS | Errno::PERM => "permission denied",
            Errno::NOSPC | Errno::DQUOT => "the disk is full",
            Errno::ROFS => "the disk is read-only",
            Errno::NAMETOOLONG => "the name is too long for this disk",
            Errno::INVAL | Errno::ILSEQ => "the name is not valid on this disk",
            Errno::NOSYS => "this system cannot open files safely (openat2 needs Linux 5.6 or newer)",
            _ => "the file system refused the operation",
        };
        VfsError::Other(path, detail.to_string())
    }

    /// The handle of the folder that holds `relative`, creating missing folders one at a
    /// time, each inside a handle resolved beneath the root.
    fn make_parent(&self, root: &Root, relative: &str) -> Result<OwnedFd, Errno> {
        let Some((parent, _)) = relative.rsplit_once('/') else {
            return root.open(".", OFlags::PATH | OFlags::DIRECTORY);
        };
        let mut current = root.open(".", OFlags::PATH | OFlags::DIRECTORY)?;
        let mut prefix = String::new();
        for segment in parent.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(segment);
            current = match root.open(&prefix, OFlags::PATH | OFlags::DIRECTORY) {
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&current, segment, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(errno),
                    }
                    root.open(&prefix, OFlags::PATH | OFlags::DIRECTORY)?
                }
                other => other?,
            };
        }
        Ok(current)
    }

    /// Refuses a write over anything but a regular file or nothing: a folder, a special
    /// file, a link, or (in a session's folder) a hard-linked file.
    fn check_replaceable(&self, parent: &OwnedFd, relative: &str, path: &str) -> Result<(), VfsError> {
        let name = last_name(relative);
        let stat = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(()),
            Err(errno) => return Err(self.failure(path, errno)),
        };
        match file_type(&stat) {
            FileType::RegularFile => self.check_single_link(path, &stat),
            FileType::Directory => Err(VfsError::IsADirectory(path.to_string())),
            FileType::Symlink => Err(link_refused(path)),
            other => Err(not_regular(path, other)),
        }
    }

    /// A file mount writes its own file: staged beside it in the host's folder.
    fn write_root_file(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        if self.root.is_dir() {
            return Err(VfsError::IsADirectory(path.to_string()));
        }
        let (Some(folder), Some(name)) = (self.root.parent(), self.root.file_name()) else {
            return Err(VfsError::IsADirectory(path.to_string()));
        };
        let folder = if folder.as_os_str().is_empty() { std::path::Path::new(".") } else { folder };
        fs::create_dir_all(folder).map_err(|error| self.failure(path, io_errno(&error)))?;
        let parent = rustix::fs::open(folder, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|errno| self.failure(path, errno))?;
        write_atomically(&parent, name, bytes).map_err(|errno| self.failure(path, errno))
    }

    /// An entry for a listing; a link is no entry at all, so no walk descends into one.
    fn listed_entry(folder: &OwnedFd, name: &str) -> Option<Entry> {
        let stat = rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some(match file_type(&stat) {
            FileType::Symlink => return None,
            FileType::Directory => Entry::directory(name),
            FileType::RegularFile => Entry::file(name, size_of(&stat)),
            // Shown so the model learns why it cannot be read when it tries.
            _ => Entry::file(name, 0),
        })
    }
}

impl Vfs for DiskVfs {
    fn read(&self, path: &str) -> Result<Vec<u8>, VfsError> {
        let (mut file, size) = self.open_regular(path)?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 20));
        file.read_to_end(&mut bytes).map_err(|error| self.failure(path, io_errno(&error)))?;
        Ok(bytes)
    }

    fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, VfsError> {
        let (file, size) = self.open_regular(path)?;
        if size > limit {
            return Err(VfsError::TooLarge { path: path.to_string(), size, limit });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|error| self.failure(path, io_errno(&error)))?;
        let read = bytes.len() as u64;
        if read > limit {
            // The file grew after it was opened.
            return Err(VfsError::TooLarge { path: path.to_string(), size: read, limit });
        }
        Ok(bytes)
    }

    fn read_head(&self, path: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
        let (file, size) = self.open_regular(path)?;
        let mut bytes = Vec::with_capacity(max.min(usize::try_from(size).unwrap_or(max)));
        file.take(max as u64).read_to_end(&mut bytes).map_err(|error| self.failure(path, io_errno(&error)))?;
        Ok((bytes, size))
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError> {
        let relative = self.relative(path)?;
        if relative.is_empty() {
            return self.write_root_file(path, bytes);
        }
        if !self.root.exists() {
            // The root is the host's choice; creating it follows no agent-named link.
            fs::create_dir_all(&self.root).map_err(|error| self.failure(path, io_errno(&error)))?;
        }
        let root = self.root_handle().map_err(|errno| self.failure(path, errno))?;
        let parent = self.make_parent(&root, &relative).map_err(|errno| self.failure(path, errno))?;
        self.check_replaceable(&parent, &relative, path)?;
        sweep_staging(&parent);
        write_atomically(&parent, last_name(&relative), bytes).map_err(|errno| self.failure(path, errno))
    }

    fn remove(&self, path: &str) -> Result<(), VfsError> {
        let relative = self.relative(path)?;
        if relative.is_empty() {
            let metadata = fs::symlink_metadata(&self.root).map_err(|error| self.failure(path, io_errno(&error)))?;
            if metadata.is_dir() {
                return Err(VfsError::IsADirectory(path.to_string()));
            }
            return fs::remove_file(&self.root).map_err(|error| self.failure(path, io_errno(&error)));
        }
        let root = self.root_handle().map_err(|errno| self.failure(path, errno))?;
        let parent = match relative.rsplit_once('/') {
            Some((parent, _)) => root.open(parent, OFlags::PATH | OFlags::DIRECTORY),
            None => root.open(".", OFlags::PATH | OFlags::DIRECTORY),
        }
        .map_err(|errno| self.failure(path, errno))?;
        let name = last_name(&relative);
        let stat =
            rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|errno| self.failure(path, errno))?;
        match file_type(&stat) {
            FileType::Directory => return Err(VfsError::IsADirectory(path.to_string())),
            FileType::Symlink => return Err(link_refused(path)),
            _ => {}
        }
        // Never a folder: without AT_REMOVEDIR the kernel refuses one swapped in since.
        rustix::fs::unlinkat(&parent, name, AtFlags::empty()).map_err(|errno| self.failure(path, errno))
    }

    fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError> {
        let relative = self.relative(dir)?;
        let folder =
            self.open(&relative, OFlags::RDONLY | OFlags::DIRECTORY).map_err(|errno| self.failure(dir, errno))?;
        sweep_staging(&folder);
        let reader = rustix::fs::Dir::read_from(&folder).map_err(|errno| self.failure(dir, errno))?;
        let mut entries = Vec::new();
        for item in reader {
            let Ok(item) = item else { continue };
            let Ok(name) = item.file_name().to_str() else { continue };
            if name == "." || name == ".." || name.starts_with(STAGING_PREFIX) {
                continue;
            }
            if let Some(entry) = Self::listed_entry(&folder, name) {
                entries.push(entry);
            }
        }
        entries.sort_by(|left, right| left.name.cmp(&right.name));
        Ok(entries)
    }

    fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError> {
        let relative = self.relative(path)?;
        let name = super::last_segment(path);
        let handle = match self.open(&relative, OFlags::PATH) {
            Ok(handle) => handle,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None),
            Err(errno) => return Err(self.failure(path, errno)),
        };
        let stat = rustix::fs::fstat(&handle).map_err(|errno| self.failure(path, errno))?;
        Ok(Some(match file_type(&stat) {
            FileType::Directory => Entry::directory(name),
            _ => Entry::file(name, size_of(&stat)),
        }))
    }
}

/// The refusal for a symbolic link in a store that follows none.
fn link_refused(path: &str) -> VfsError {
    VfsError::Other(
        path.to_string(),
        "a symbolic link is on the way; links are never followed, in the session's folder or in a mount".to_string(),
    )
}

/// The refusal for a named pipe, socket or device.
fn not_regular(path: &str, kind: FileType) -> VfsError {
    let what = match kind {
        FileType::Fifo => "a named pipe",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Symlink => "a symbolic link",
        _ => "a special file",
    };
    VfsError::Other(path.to_string(), format!("is not a regular file but {what}; only regular files can be used"))
}

fn size_of(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

fn io_errno(error: &io::Error) -> Errno {
    Errno::from_io_error(error).unwrap_or(Errno::IO)
}

fn last_name(relative: &str) -> &str {
    relative.rsplit_once('/').map_or(relative, |(_, name)| name)
}

/// A staging file name, unique within this process; its owner's pid tells a later
/// process whether the file was abandoned.
fn staging_name() -> String {
    let sequence = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{STAGING_PREFIX}{}-{sequence}", std::process::id())
}

/// Writes `bytes` to a staging file in `parent` and renames it over `name`.
fn write_atomically(parent: &OwnedFd, name: impl rustix::path::Arg, bytes: &[u8]) -> Result<(), Errno> {
    let staging = staging_name();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let handle = rustix::fs::openat(parent, &staging, flags, Mode::from_raw_mode(0o666))?;
    let mut file = fs::File::from(handle);
    let written = file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|error| io_errno(&error));
    let renamed = written.and_then(|()| rustix::fs::renameat(parent, &staging, parent, name));
    if renamed.is_err() {
        // Best effort: the staging file is ours and must not linger.
        let _ = rustix::fs::unlinkat(parent, &staging, AtFlags::empty());
    }
    renamed
}

/// Removes the staging files in a folder whose writer is gone (a process killed
/// mid-write). A live writer's files, this process's included, are left alone.
fn sweep_staging(folder: &impl AsFd) {
    let Ok(readable) =
        rustix::fs::openat(folder, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return;
    };
    let Ok(reader) = rustix::fs::Dir::read_from(&readable) else { return };
    for item in reader {
        let Ok(item) = item else { continue };
        let Ok(name) = item.file_name().to_str() else { continue };
        if name.starts_with(STAGING_PREFIX) && abandoned(name) {
            let _ = rustix::fs::unlinkat(&readable, name, AtFlags::empty());
        }
    }
}

/// True when a staging name's writer process no longer exists.
fn abandoned(name: &str) -> bool {
    let Some(owner) = name.strip_prefix(STAGING_PREFIX).and_then(|rest| rest.split('-').next()) else {
        return false;
    };
    let Some(pid) = owner.parse::<i32>().ok().and_then(rustix::process::Pid::from_raw) else { return false };
    if pid == rustix::process::getpid() {
        return false;
    }
    rustix::process::test_kill_process(pid) == Err(Errno::SRCH)
}
