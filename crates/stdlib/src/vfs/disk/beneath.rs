//! A handle on a store's root and the one way to open anything below it.
//!
//! The one thing to know: a multi-segment path is only ever opened through
//! [`Root::open`], which asks the kernel (`openat2` with `RESOLVE_BENEATH` and
//! `RESOLVE_NO_SYMLINKS`) to resolve it from the root handle, following no symbolic link
//! at all. Code that then works relative to a folder handle passes single names only
//! (`mkdirat`, `statat`, `renameat`, `unlinkat` never follow a link in the middle of a
//! path, and never follow a final one either).

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

/// How often an open is retried when the kernel reports a concurrent rename (EAGAIN).
const RETRIES: usize = 8;

/// An open handle on a store's root folder.
pub(super) struct Root {
    handle: OwnedFd,
    resolve: ResolveFlags,
}

impl Root {
    /// Opens the root folder as the host named it.
    pub(super) fn new(root: &Path) -> Result<Root, Errno> {
        let handle = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Root::on(handle))
    }

    /// The root a folder handle opened elsewhere stands for (it must be a folder).
    pub(super) fn on(handle: OwnedFd) -> Root {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS;
        Root { handle, resolve }
    }

    /// The root folder's own handle.
    pub(super) fn into_handle(self) -> OwnedFd {
        self.handle
    }

    /// Opens a root-relative path (`.` is the root) without leaving the root: climbing
    /// out is EXDEV, a forbidden link ELOOP.
    pub(super) fn open(&self, relative: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        let mut outcome = Err(Errno::AGAIN);
        for _ in 0..RETRIES {
            outcome = rustix::fs::openat2(&self.handle, relative, flags | OFlags::CLOEXEC, Mode::empty(), self.resolve);
            if !matches!(outcome, Err(Errno::AGAIN)) {
                break;
            }
        }
        outcome
    }
}

/// The kind of file a `stat` describes.
pub(super) fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}
