//! Session events a fleet shares: the [`EventLog`] a store may keep.
//!
//! A host streams each session's events (the `Envelope`s of [`crate::events`]) to its
//! clients. On a store one process uses, the host keeps them in memory. On a store a
//! fleet shares, a client's stream may be served by any runner, so the events are kept by
//! the store: the host hands each event to [`EventLog::stage`] as it happens, and the
//! store makes the staged events of a session durable with the next step one of its
//! sessions commits (or when the writer is closed), numbered per root session (a
//! sub-workflow `<root>~<n>` counts with its root) from 1 without gaps, in the order they
//! were staged. Any runner reads them back with [`EventLog::after`] and learns that new
//! ones committed from an [`EventFeed`].
//!
//! The one thing to know: only committed events are read back. An event staged by a
//! runner that dies before its next commit belonged to no committed step and is never
//! shown, so every reader on every runner sees one history, and a reader that resumes
//! after the last id it saw (`Last-Event-ID`) on another runner misses and repeats
//! nothing.

use std::future::Future;
use std::pin::Pin;

use super::store::StoreFuture;

/// One committed event of a root session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its number within the root session, from 1.
    pub id: u64,
    /// The event as the stream carries it (JSON).
    pub json: String,
}

/// The events of every session, kept by a store a fleet shares.
pub trait EventLog: Send + Sync {
    /// Keeps `json`, an event of session `session` (or of its sub-workflow), until the
    /// next commit of one of the root session's writers open in this store value makes
    /// it durable. Never blocks; a store bounds what it holds for one session.
    fn stage(&self, session: &str, json: &str);
    /// The committed events of root session `root` after id `after`, oldest first, at most
    /// `limit`.
    fn after<'a>(&'a self, root: &'a str, after: u64, limit: usize) -> StoreFuture<'a, Vec<LoggedEvent>>;
    /// The id of root session `root`'s last committed event; 0 when it has none.
    fn last<'a>(&'a self, root: &'a str) -> StoreFuture<'a, u64>;
    /// A feed of `(root, last id)` as events commit, on any runner, from now on.
    fn follow(&self) -> StoreFuture<'_, Box<dyn EventFeed>>;
    /// Whether a feed hears what is announced: opens one, announces something only it
    /// reads, and waits a bounded time to hear it. A host checks it once before it
    /// serves, so a feed that can be opened but hears nothing (a listening connection
    /// through a pooler that hands its server connection to others) stops the start. By
    /// default, that a feed can be opened.
    fn check_follow(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move { self.follow().await.map(drop) })
    }
}

/// What [`EventFeed::next`] returns: a future of the next `(root session, id of its last
/// committed event)`.
pub type NextCommitted<'a> = Pin<Box<dyn Future<Output = Option<(String, u64)>> + Send + 'a>>;

/// What [`EventLog::follow`] hands out.
pub trait EventFeed: Send {
    /// The next `(root session, id of its last committed event)`; `None` once the feed
    /// ended (the follower opens another, and re-reads what it follows).
    fn next(&mut self) -> NextCommitted<'_>;
}
