//! The real path a host (MCP) tool is handed for a workspace path: resolved beneath its
//! store's root exactly as the file tools resolve it, so a server never opens anything
//! the file tools would refuse.
//!
//! The one thing to know: a server is another process and opens the path by its text,
//! so the store cannot hand it a handle. What it can do is check, with the same
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` the file tools use, that every part
//! of the path that exists is reached without a symbolic link (and, in a session's
//! folder, that an existing file has no second hard link), and then hand over an
//! ABSOLUTE path, so a server's own working directory can never change what it names.
//! What is not there yet (a file a write tool will create) cannot hide a link.

use std::path::PathBuf;

use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;

use super::beneath::file_type;
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

impl DiskVfs {
    /// The absolute path on this machine for the store-relative `path`, once every part
    /// of it that exists has been reached beneath the root without following a link.
    /// The root itself is the host's choice and is taken as named (made absolute).
    pub fn host_path(&self, path: &str) -> Result<PathBuf, HostPathError> {
        let relative = self.relative(path).map_err(|_| HostPathError::Escape(path.to_string()))?;
        let root = std::path::absolute(&self.root)
            .map_err(|error| HostPathError::Unresolvable(path.to_string(), error.to_string()))?;
        if relative.is_empty() {
            return Ok(root);
        }
        self.check_existing_part(path, &relative)?;
        Ok(root.join(&relative))
    }

    /// Opens the longest existing prefix of `relative` beneath the root, refusing any
    /// link on the way; a prefix that does not exist yet is tried one part shorter.
    fn check_existing_part(&self, path: &str, relative: &str) -> Result<(), HostPathError> {
        let root = match self.root_handle() {
            Ok(root) => root,
            // Nothing of the store exists yet, so nothing on the path can be a link.
            Err(Errno::NOENT) => return Ok(()),
            Err(errno) => return Err(unresolvable(path, errno)),
        };
        let mut prefix = relative;
        loop {
            match root.open(prefix, OFlags::PATH) {
                Ok(handle) => {
                    let stat = rustix::fs::fstat(&handle).map_err(|errno| unresolvable(path, errno))?;
                    let planted = self.kind == StoreKind::SessionFolder
                        && file_type(&stat) == FileType::RegularFile
                        && stat.st_nlink > 1;
                    return if planted { Err(HostPathError::HardLink(path.to_string())) } else { Ok(()) };
                }
                Err(Errno::LOOP) => return Err(HostPathError::SymbolicLink(path.to_string())),
                Err(Errno::XDEV) => return Err(HostPathError::Escape(path.to_string())),
                Err(Errno::NOENT) => match prefix.rsplit_once('/') {
                    Some((shorter, _)) => prefix = shorter,
                    None => return Ok(()),
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
