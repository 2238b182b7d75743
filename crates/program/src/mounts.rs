//! The host's mount table: which folders and files the host routes into the agent's
//! workspace, whether each is writable, governed by the spec, and searchable.
//!
//! A workspace declares its table in an optional `archmax.toml` at its root:
//!
//! ```toml
//! [mounts."reference/"]      # a key ending in `/` mounts a directory, else one file
//! source = "data/reference"  # where it lives, relative to the root (default: the key)
//! read_only = true           # the default; a ceiling no grant lifts
//! governed = true            # reachable only where a `mounts` list grants it (default false)
//! searchable = true          # glob and grep walk it (default true)
//! ```
//!
//! The default table is always present (`skills/`, `.platform/`, `AGENTS.md`, read-only
//! and ungoverned); a declaration with the same key replaces its defaults. A mount's
//! *name*, the token a `mounts` list takes, is its key without leading or trailing
//! slashes (`reference`, `catalogs/eu`, `AGENTS.md`).

use crate::source::Span;
use crate::zones::{RESERVED_ROOTS, ROOTS, canonicalize, reserved_area};

/// One mount of the host table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Normalized key: no leading slash; directory keys end in `/`.
    pub key: String,
    /// The key without its slashes: what `mounts` lists name.
    pub name: String,
    pub directory: bool,
    pub read_only: bool,
    pub governed: bool,
    pub searchable: bool,
    /// Where the content lives, relative to the workspace root.
    pub source: String,
    /// Where `archmax.toml` declared it; `None` for a default mount.
    pub declared: Option<Span>,
}

/// The host's mounts, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountTable {
    pub mounts: Vec<Mount>,
}

impl MountTable {
    /// The table a workspace without `archmax.toml` gets.
    pub fn default_table() -> MountTable {
        let default = |key: &str| {
            let directory = key.ends_with('/');
            Mount {
                key: key.to_string(),
                name: key.trim_matches('/').to_string(),
                directory,
                read_only: true,
                governed: false,
                searchable: true,
                source: key.trim_end_matches('/').to_string(),
                declared: None,
            }
        };
        MountTable { mounts: vec![default(".platform/"), default("AGENTS.md"), default("skills/")] }
    }

    pub fn by_name(&self, name: &str) -> Option<&Mount> {
        self.mounts.iter().find(|mount| mount.name == name)
    }

    /// The mount a canonical path falls in: longest directory prefix, or an exact file.
    pub fn containing(&self, canonical: &str) -> Option<usize> {
        self.mounts
            .iter()
            .enumerate()
            .filter(|(_, mount)| {
                if mount.directory {
                    let key = mount.key.trim_end_matches('/');
                    canonical == key
                        || (canonical.len() > key.len()
                            && canonical.starts_with(key)
                            && canonical.as_bytes()[key.len()] == b'/')
                } else {
                    canonical == mount.key
                }
            })
            .max_by_key(|(_, mount)| mount.key.len())
            .map(|(index, _)| index)
    }

    pub fn governed(&self) -> impl Iterator<Item = &Mount> {
        self.mounts.iter().filter(|mount| mount.governed)
    }

    pub fn names(&self) -> Vec<&str> {
        self.mounts.iter().map(|mount| mount.name.as_str()).collect()
    }
}

/// Why a mount key or source cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountPathError {
    /// Empty, escaping the root, or holding a NUL or a backslash.
    Outside,
    /// The first segment is a root the runtime owns.
    Reserved(String),
    /// A mount source that is, or lies inside, a folder or file the runtime or the
    /// workflow authors own on the host (named by its first segment).
    RuntimeArea(String),
}

/// Every runtime-owned top-level name, each once: the session roots and the host areas
/// of [`ROOTS`] (the session store, the workflow definitions, the build output and the
/// host's own table).
pub fn runtime_areas() -> Vec<&'static str> {
    ROOTS.iter().map(|root| root.name).collect()
}

/// The runtime-owned area `canonical` lies in, if any; compared without regard to ASCII
/// case, since the host's file system may not tell `Sessions` from `sessions`.
fn runtime_area(canonical: &str) -> Option<&'static str> {
    reserved_area(canonical.split('/').next().unwrap_or("")).map(|root| root.name)
}

/// The canonical form of a mount's source: a [`workspace_path`] outside every area the
/// runtime owns (every name of [`ROOTS`]), so a mount never reaches the
/// session store, the workflow definitions or the build output. The compiler and the
/// artifact loader both decide with this one function.
pub fn mount_source_path(raw: &str) -> Result<String, MountPathError> {
    let canonical = workspace_path(raw)?;
    match runtime_area(&canonical) {
        Some(area) => Err(MountPathError::RuntimeArea(area.to_string())),
        None => Ok(canonical),
    }
}

/// The canonical form of a path a mount table names: relative, inside the workspace root,
/// not empty, and free of NUL and backslashes (which another platform reads as a separator).
pub fn workspace_path(raw: &str) -> Result<String, MountPathError> {
    if raw.contains(['\0', '\\']) {
        return Err(MountPathError::Outside);
    }
    match canonicalize(raw) {
        Ok(canonical) if !canonical.is_empty() => Ok(canonical),
        _ => Err(MountPathError::Outside),
    }
}

/// The canonical form of a mount key (without its trailing slash): a source path whose
/// first segment is none of the runtime's reserved roots.
pub fn mount_key_path(raw: &str) -> Result<String, MountPathError> {
    let canonical = workspace_path(raw)?;
    let first = canonical.split('/').next().unwrap_or("");
    if RESERVED_ROOTS.contains(&first) {
        return Err(MountPathError::Reserved(first.to_string()));
    }
    Ok(canonical)
}
