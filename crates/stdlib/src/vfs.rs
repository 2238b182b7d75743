//! The agent's workspace as a virtual file system.
//!
//! A [`Vfs`] stores files under canonical, `/`-separated paths relative to its own root
//! (no leading slash, no `.` or `..`; see `archmax_program::zones::canonicalize`).
//! [`Workspace`] composes the session's own folder with the host's mounts, routing each
//! path to the mount with the longest matching key, so `scratchpad/a.md` lands in the
//! session and `skills/x/SKILL.md` in the skills mount. Read-only mounts refuse writes
//! themselves; governance (which state may touch what) is the kernel's job, not the
//! file system's.
//!
//! Two stores ship here: [`DiskVfs`] (a directory on disk that nothing can climb out of,
//! which opens only regular files and follows no symbolic link, in a session's folder or
//! a host mount alike; see [`StoreKind`])
//! and [`MemoryVfs`] (a map, for tests and ephemeral sessions). The routing itself lives
//! in the `routing` submodule as methods on [`Workspace`].

use std::sync::Arc;

mod disk;
mod memory;
mod routing;

pub use disk::{DiskVfs, HandedPath, HostPathError, StoreKind};
pub use memory::MemoryVfs;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    /// Bytes, for files.
    pub size: u64,
}

impl Entry {
    pub fn file(name: impl Into<String>, size: u64) -> Entry {
        Entry { name: name.into(), is_dir: false, size }
    }

    pub fn directory(name: impl Into<String>) -> Entry {
        Entry { name: name.into(), is_dir: true, size: 0 }
    }
}

/// Why a file operation failed. Messages never reveal host paths.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VfsError {
    #[error("'{0}' does not exist")]
    NotFound(String),
    #[error("'{0}' is a directory")]
    IsADirectory(String),
    #[error("'{0}' is not a directory")]
    NotADirectory(String),
    #[error("'{0}' is read-only")]
    ReadOnly(String),
    #[error("'{0}' climbs above the workspace root")]
    Escape(String),
    #[error("'{path}' has {size} bytes, over the limit of {limit} bytes")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("'{0}': {1}")]
    Other(String, String),
}

/// A file store rooted at its own directory.
pub trait Vfs: Send + Sync {
    fn read(&self, path: &str) -> Result<Vec<u8>, VfsError>;
    /// Reads a whole file of at most `limit` bytes. A larger file is
    /// [`VfsError::TooLarge`] and is not read: this is the read every tool uses, so no
    /// answer can make the process hold more than its limit.
    fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, VfsError> {
        if let Some(entry) = self.stat(path)?
            && !entry.is_dir
            && entry.size > limit
        {
            return Err(VfsError::TooLarge { path: path.to_string(), size: entry.size, limit });
        }
        let bytes = self.read(path)?;
        let size = bytes.len() as u64;
        if size > limit {
            return Err(VfsError::TooLarge { path: path.to_string(), size, limit });
        }
        Ok(bytes)
    }
    /// The first `max` bytes of a file and the file's whole size, for classifying a file
    /// without reading all of it.
    fn read_head(&self, path: &str, max: usize) -> Result<(Vec<u8>, u64), VfsError> {
        let mut bytes = self.read(path)?;
        let size = bytes.len() as u64;
        bytes.truncate(max);
        Ok((bytes, size))
    }
    /// Writes a file, creating parent directories.
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), VfsError>;
    /// Removes a file (never a directory).
    fn remove(&self, path: &str) -> Result<(), VfsError>;
    /// The entries of a directory, sorted by name; `""` is the root.
    fn list(&self, dir: &str) -> Result<Vec<Entry>, VfsError>;
    /// What is at a path, if anything.
    fn stat(&self, path: &str) -> Result<Option<Entry>, VfsError>;
}

/// A host mount in the agent's workspace.
#[derive(Clone)]
pub struct MountPoint {
    /// Normalized key: `skills/`, `reference/`, `AGENTS.md`.
    pub key: String,
    pub read_only: bool,
    pub searchable: bool,
    pub store: Arc<dyn Vfs>,
}

/// The agent's view: the session folder plus the host's mounts.
#[derive(Clone)]
pub struct Workspace {
    pub session: Arc<dyn Vfs>,
    pub mounts: Vec<MountPoint>,
}

/// The segments of a store-relative path. `.` and empty segments are dropped; a leading
/// `/` or any `..` is refused, because a store never resolves anything above its root.
pub fn relative_segments(path: &str) -> Result<Vec<&str>, VfsError> {
    if path.starts_with('/') {
        return Err(VfsError::Escape(path.to_string()));
    }
    let mut segments = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => return Err(VfsError::Escape(path.to_string())),
            other => segments.push(other),
        }
    }
    Ok(segments)
}

/// The last segment of a canonical path (the whole path when it has one segment).
pub fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_segments_drop_dots_and_refuse_climbing() {
        assert_eq!(relative_segments("a/./b//c"), Ok(vec!["a", "b", "c"]));
        assert_eq!(relative_segments(""), Ok(vec![]));
        assert_eq!(relative_segments("a/../b"), Err(VfsError::Escape("a/../b".to_string())));
        assert_eq!(relative_segments("/etc/passwd"), Err(VfsError::Escape("/etc/passwd".to_string())));
    }

    #[test]
    fn last_segment_of_paths() {
        assert_eq!(last_segment("a/b/c.md"), "c.md");
        assert_eq!(last_segment("c.md"), "c.md");
        assert_eq!(last_segment(""), "");
    }
}
