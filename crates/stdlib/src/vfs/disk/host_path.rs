//! The real path a host (MCP) tool is handed for a workspace path: resolved beneath its
//! store's root exactly as the file tools resolve it, and handed over so that it keeps
//! naming what was checked, whatever is renamed or swapped for a link afterwards.
//!
//! The one thing to know: a server is another process and opens the path by its text,
//! so the text must not be something a writer of the folder can redirect between the
//! check and the server's open. The check opens, with the same
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` the file tools use, the longest part
//! of the path that exists (refusing a symbolic link anywhere on it and, in a session's
//! folder, a file with a second hard link or a session folder that is itself a link),
//! and keeps that `O_PATH` handle open. The server is handed
//! `/proc/<runner pid>/fd/<handle>` followed by the part that does not exist yet: the
//! kernel resolves that through the open handle itself, so swapping any folder on the
//! way (the root included) for a link after the check changes nothing. The handle lives
//! in [`HandedPath`]; the caller keeps it until the server has answered.
//!
//! What stays open: the part that does not exist yet (a file a write tool will create,
//! and folders it may make first) is named by text below the pinned folder, so a writer
//! of that folder could still plant a link by that name after the check. A server must
//! be able to open the runner's `/proc/<pid>/fd` (the runner's own user on this
//! machine, as a stdio server is).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::beneath::{Root, file_type};
use super::{DiskVfs, StoreKind};

/// Why a workspace path cannot be handed to a host tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostPathError {
    /// A symbolic link is on the path (anywhere, the last part included).
    #[error("'{0}' passes through a symbolic link; a host tool is never handed a path that follows one")]
    SymbolicLink(String),
    /// A file in a session's folder with a second name elsewhere.
    #[error(
        "'{0}' has more than one hard link, so it is another name for a file elsewhere; no tool makes hard links, so it was planted"
    )]
    HardLink(String),
    /// The path climbs above the store's root.
    #[error("'{0}' climbs above its root")]
    Escape(String),
    /// The file system refused to look (permissions, a file where a folder should be).
    #[error("'{0}' cannot be checked: {1}")]
    Unresolvable(String, String),
}

impl HostPathError {
    /// Whether the path was refused because a link is on it (symbolic or hard).
    pub fn is_link(&self) -> bool {
        matches!(self, HostPathError::SymbolicLink(_) | HostPathError::HardLink(_))
    }
}

/// A path handed to a host tool, and the open handle it is resolved through. The path
/// names what was checked only while this value lives: keep it until the call is over.
#[derive(Debug)]
pub struct HandedPath {
    path: PathBuf,
    /// `None` only when nothing of the store exists yet, so nothing can be pinned.
    _pin: Option<OwnedFd>,
}

impl HandedPath {
    /// The absolute path to give the server.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl DiskVfs {
    /// The path on this machine to hand a host tool for the store-relative `path`, once
    /// every part of it that exists has been reached beneath the root without following
    /// a link: `/proc/<pid>/fd/<n>` of the deepest existing part, pinned open, then the
    /// rest. A mount's root is taken as the host named it; a session's folder must not
    /// itself be a link.
    pub fn host_path(&self, path: &str) -> Result<HandedPath, HostPathError> {
        let relative = self.relative(path).map_err(|_| HostPathError::Escape(path.to_string()))?;
        let Some(root) = self.open_root(path)? else {
            // Nothing of the store exists yet, so nothing on the path can be a link or be
            // pinned; the absolute path is all there is to hand over.
            let root = std::path::absolute(&self.root)
                .map_err(|error| HostPathError::Unresolvable(path.to_string(), error.to_string()))?;
            let handed = if relative.is_empty() { root } else { root.join(&relative) };
            return Ok(HandedPath { path: handed, _pin: None });
        };
        let (pin, rest) =
            if relative.is_empty() { (root, "") } else { self.open_existing_part(path, root, &relative)? };
        let mut handed = PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), pin.as_raw_fd()));
        if !rest.is_empty() {
            handed.push(rest);
        }
        Ok(HandedPath { path: handed, _pin: Some(pin) })
    }

    /// The root's handle: as the host named it for a mount (a folder, or a file mount's
    /// file), never through a link for a session's folder; `None` when it does not exist.
    fn open_root(&self, path: &str) -> Result<Option<OwnedFd>, HostPathError> {
        let flags = match self.kind {
            StoreKind::Mount => OFlags::PATH | OFlags::CLOEXEC,
            StoreKind::SessionFolder => OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        };
        let handle = match rustix::fs::open(&self.root, flags, Mode::empty()) {
            Ok(handle) => handle,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP | Errno::NOTDIR) if self.kind == StoreKind::SessionFolder => {
                return Err(HostPathError::SymbolicLink(path.to_string()));
            }
            Err(errno) => return Err(unresolvable(path, errno)),
        };
        let stat = rustix::fs::fstat(&handle).map_err(|errno| unresolvable(path, errno))?;
        if file_type(&stat) == FileType::Symlink {
            return Err(HostPathError::SymbolicLink(path.to_string()));
        }
        Ok(Some(handle))
    }

    /// Opens the longest existing prefix of `relative` beneath `root`, refusing any link
    /// on the way (a prefix that does not exist yet is tried one part shorter); gives its
    /// handle and the part of `relative` below it.
    fn open_existing_part<'r>(
        &self,
        path: &str,
        root: OwnedFd,
        relative: &'r str,
    ) -> Result<(OwnedFd, &'r str), HostPathError> {
        let root = Root::on(root);
        let mut prefix = relative;
        loop {
            match root.open(prefix, OFlags::PATH) {
                Ok(handle) => {
                    let stat = rustix::fs::fstat(&handle).map_err(|errno| unresolvable(path, errno))?;
                    let planted = self.kind == StoreKind::SessionFolder
                        && file_type(&stat) == FileType::RegularFile
                        && stat.st_nlink > 1;
                    if planted {
                        return Err(HostPathError::HardLink(path.to_string()));
                    }
                    let rest = relative[prefix.len()..].trim_start_matches('/');
                    return Ok((handle, rest));
                }
                Err(Errno::LOOP) => return Err(HostPathError::SymbolicLink(path.to_string())),
                Err(Errno::XDEV) => return Err(HostPathError::Escape(path.to_string())),
                Err(Errno::NOENT) => match prefix.rsplit_once('/') {
                    Some((shorter, _)) => prefix = shorter,
                    None => return Ok((root.into_handle(), relative)),
                },
                Err(errno) => return Err(unresolvable(path, errno)),
            }
        }
    }
}

fn unresolvable(path: &str, errno: Errno) -> HostPathError {
    let detail = match errno {
        Errno::NOTDIR => "a file stands where a folder is named",
        Errno::ACCESS | Errno::PERM => "permission denied",
        Errno::NAMETOOLONG => "the name is too long for this disk",
        Errno::NOSYS => "this system cannot resolve paths safely (openat2 needs Linux 5.6 or newer)",
        _ => "the file system refused to look",
    };
    HostPathError::Unresolvable(path.to_string(), detail.to_string())
}
