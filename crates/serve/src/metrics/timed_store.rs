//! A session store that times its commits for `archmax_store_commit_duration_seconds`.
//!
//! The server wraps the store it is given once, before any runtime is built, so every
//! commit of every turn goes through [`TimedWriter::commit`]. Everything else is handed to
//! the wrapped store as it is, the methods with a default included: the PostgreSQL store's
//! own listing, chores and event log must stay its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use archmax_vm::session::records::{Record, RecordKind};
use archmax_vm::session::spec::PinnedSpec;
use archmax_vm::session::store::{Chore, ListPage, ListQuery, ParkedSummary, StoreFuture};
use archmax_vm::session::{Delta, SessionState, SessionStore, SessionWriter, StoreError};
use archmax_vm::stdlib::vfs::Vfs;

use super::Metrics;

/// `store`, its commits timed into `metrics`.
pub fn timed(store: Arc<dyn SessionStore>, metrics: Arc<Metrics>) -> Arc<dyn SessionStore> {
    Arc::new(TimedStore { store, metrics })
}

struct TimedStore {
    store: Arc<dyn SessionStore>,
    metrics: Arc<Metrics>,
}

struct TimedWriter {
    writer: Box<dyn SessionWriter>,
    metrics: Arc<Metrics>,
    session: String,
}

/// The commits one admitted turn made to its own session (its sub-workflows' sessions
/// are not counted): what tells a turn that failed half-way from one that changed
/// nothing (`crate::server::Refused::applied`).
pub(crate) struct TurnCommits {
    pub session: String,
    pub count: Arc<AtomicU64>,
}

tokio::task_local! {
    /// Set around an admitted turn's future ([`crate::server::Server::admit`]).
    pub(crate) static TURN_COMMITS: TurnCommits;
}

impl TimedStore {
    fn writer(&self, session: &str, writer: Box<dyn SessionWriter>) -> Box<dyn SessionWriter> {
        Box::new(TimedWriter { writer, metrics: Arc::clone(&self.metrics), session: session.to_string() })
    }
}

impl SessionWriter for TimedWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let began = Instant::now();
            let result = self.writer.commit(delta).await;
            self.metrics.observe_commit(result.is_ok(), began.elapsed());
            if result.is_ok() {
                let _ = TURN_COMMITS.try_with(|turn| {
                    if turn.session == self.session {
                        turn.count.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            result
        })
    }
}

impl SessionStore for TimedStore {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        Box::pin(async move { self.store.create(state).await.map(|writer| self.writer(&state.id, writer)) })
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        Box::pin(async move { self.store.open(id).await.map(|(state, writer)| (state, self.writer(id, writer))) })
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        self.store.read(id)
    }

    fn list(&self) -> StoreFuture<'_, Vec<String>> {
        self.store.list()
    }

    fn list_page<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, ListPage> {
        self.store.list_page(query)
    }

    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError> {
        self.store.files(id)
    }

    fn local_dir(&self, id: &str) -> Option<std::path::PathBuf> {
        self.store.local_dir(id)
    }

    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()> {
        self.store.keep_spec(spec)
    }

    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>> {
        self.store.spec(hash)
    }

    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        self.store.is_held(id)
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        self.store.remove(id)
    }

    fn claim_record<'a>(&'a self, record: &'a Record, now_ms: u64) -> StoreFuture<'a, bool> {
        self.store.claim_record(record, now_ms)
    }

    fn read_record<'a>(&'a self, kind: RecordKind, key: &'a str, now_ms: u64) -> StoreFuture<'a, Option<Vec<u8>>> {
        self.store.read_record(kind, key, now_ms)
    }

    fn remove_record<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, bool> {
        self.store.remove_record(kind, key)
    }

    fn claim_chores<'a>(
        &'a self,
        chore: Chore,
        runnable: &'a [(String, String)],
        limit: usize,
    ) -> StoreFuture<'a, Option<Vec<String>>> {
        self.store.claim_chores(chore, runnable, limit)
    }

    fn event_log(&self) -> Option<Arc<dyn archmax_vm::session::event_log::EventLog>> {
        self.store.event_log()
    }

    fn parked_summary(&self, max_pages: usize) -> StoreFuture<'_, ParkedSummary> {
        self.store.parked_summary(max_pages)
    }
}
