//! The session store interface.
//!
//! A store owns everything of a session: its committed steps, the files its tools write
//! (`scratchpad/`, `artifacts/`, the offload zones), and the programs sessions are
//! pinned to ([`PinnedSpec`], by hash). The interface is asynchronous so a host can
//! run many sessions on one executor; a store whose work blocks (the filesystem store)
//! runs it through [`crate::blocking::run_blocking`], never on an executor thread's time.
//!
//! Opening a session for writing takes an exclusive lock that lasts as long as the
//! returned [`SessionWriter`]; a second writer is refused with [`StoreError::Busy`]. Every
//! commit carries the next sequence number; a writer whose view is stale (the store holds
//! a newer sequence) is refused with [`StoreError::Conflict`] and writes nothing.
//!
//! The one thing to know: **a session's files come from its store** ([`SessionStore::files`]),
//! never from a path the runtime makes up, so a store that is not a local directory keeps
//! them as durably as it keeps the steps.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use archmax_stdlib::vfs::Vfs;

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

/// What every store operation returns: a future that may move between threads.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Commits steps to one open session.
pub trait SessionWriter: Send + Sync {
    /// Makes one step durable. `delta.seq` must be one more than the last committed seq.
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()>;
}

/// Where sessions live.
pub trait SessionStore: Send + Sync {
    /// Creates a session with its first state and opens it for writing.
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>>;
    /// Opens an existing session for writing (exclusively), with its current state.
    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)>;
    /// Reads a session without locking it; `None` when it does not exist.
    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>>;
    /// Every session id, sorted.
    fn list(&self) -> StoreFuture<'_, Vec<String>>;
    /// The session's own file system (`scratchpad/`, `artifacts/`, the offload zones),
    /// kept by the store. It may be asked for before the session exists; what is written
    /// there lives as long as the store keeps the session.
    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError>;
    /// Keeps `spec` under its hash unless one is kept there already; losing a race to
    /// write the same hash is success.
    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()>;
    /// The spec kept under `hash`, if any.
    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>>;
}

/// A future that is already finished, for stores whose work never blocks.
pub(crate) fn ready<'a, T: Send + 'a>(result: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(result))
}
