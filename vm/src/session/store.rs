//! The session store interface.
//!
//! A store keeps each session's committed steps durably. Opening a session for writing
//! takes an exclusive lock that lasts as long as the returned [`SessionWriter`]; a second
//! writer is refused with [`StoreError::Busy`]. Every commit carries the next sequence
//! number; a writer whose view is stale (the store holds a newer sequence) is refused
//! with [`StoreError::Conflict`] and writes nothing. Beside the sessions a store keeps
//! the workflow specs they are pinned to ([`PinnedSpec`]), by hash.

use std::path::PathBuf;

use super::spec::PinnedSpec;
use super::{Delta, SessionState};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session `{0}` is in use by another process; try again when it finishes")]
    Busy(String),
    #[error("session `{id}` moved on to step {found} while this process held step {expected}; nothing was written")]
    Conflict { id: String, expected: u64, found: u64 },
    #[error("session `{0}` already exists")]
    Exists(String),
    #[error("session `{0}` does not exist")]
    Missing(String),
    #[error("session `{id}` is unreadable: {message}")]
    Corrupt { id: String, message: String },
    /// A pinned spec could not be kept or read (a bad hash, a damaged file, I/O).
    #[error("the session store's spec `{hash}` could not be used: {message}")]
    Spec { hash: String, message: String },
    #[error("session store I/O failed for `{id}`: {source}")]
    Io {
        id: String,
        #[source]
        source: std::io::Error,
    },
}

/// Commits steps to one open session.
pub trait SessionWriter: Send {
    /// Makes one step durable. `delta.seq` must be one more than the last committed seq.
    fn commit(&mut self, delta: &Delta) -> Result<(), StoreError>;
}

/// Where sessions live.
pub trait SessionStore: Send + Sync {
    /// Creates a session with its first state and opens it for writing.
    fn create(&self, state: &SessionState) -> Result<Box<dyn SessionWriter>, StoreError>;
    /// Opens an existing session for writing (exclusively), with its current state.
    fn open(&self, id: &str) -> Result<(SessionState, Box<dyn SessionWriter>), StoreError>;
    /// Reads a session without locking it; `None` when it does not exist.
    fn read(&self, id: &str) -> Result<Option<SessionState>, StoreError>;
    /// Every session id, sorted.
    fn list(&self) -> Result<Vec<String>, StoreError>;
    /// The directory holding a session's files (`scratchpad/`, `artifacts/`), when the
    /// store keeps them on disk.
    fn session_dir(&self, id: &str) -> Option<PathBuf>;
    /// Keeps `spec` under its hash unless one is kept there already; losing a race to
    /// write the same hash is success.
    fn keep_spec(&self, spec: &PinnedSpec) -> Result<(), StoreError>;
    /// The spec kept under `hash`, if any.
    fn spec(&self, hash: &str) -> Result<Option<PinnedSpec>, StoreError>;
}
