//! Deliberate faults for the test suite's durability and exclusion tests, applied by
//! wrapping the session store, so the library itself never reads these variables:
//!
//! - `ARCHMAX_TEST_ABORT_AFTER_COMMITS=n` aborts the process right after its n-th
//!   committed step, as a kill would leave it;
//! - `ARCHMAX_TEST_PAUSE_AFTER_OPEN_MS=n` holds each session it opens for writing for n
//!   milliseconds before handing it over, so two processes overlap.
//!
//! With neither set, the store is returned as it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use archmax_vm::session::records::{Record, RecordKind};
use archmax_vm::session::spec::PinnedSpec;
use archmax_vm::session::store::StoreFuture;
use archmax_vm::session::{Delta, SessionState, SessionStore, SessionWriter};
use archmax_vm::stdlib::vfs::Vfs;

fn setting(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|value| value.trim().parse().ok())
}

/// `store`, with the faults the environment asks for.
pub fn with_test_faults(store: Arc<dyn SessionStore>) -> Arc<dyn SessionStore> {
    let abort_after = setting("ARCHMAX_TEST_ABORT_AFTER_COMMITS");
    let pause = setting("ARCHMAX_TEST_PAUSE_AFTER_OPEN_MS").map(Duration::from_millis);
    if abort_after.is_none() && pause.is_none() {
        return store;
    }
    Arc::new(Faulty {
        inner: store,
        counter: Arc::new(Counter { limit: abort_after, commits: AtomicU64::new(0) }),
        pause,
    })
}

struct Counter {
    limit: Option<u64>,
    commits: AtomicU64,
}

impl Counter {
    fn committed(&self) {
        if let Some(limit) = self.limit
            && self.commits.fetch_add(1, Ordering::SeqCst) + 1 >= limit
        {
            std::process::abort();
        }
    }
}

struct Faulty {
    inner: Arc<dyn SessionStore>,
    counter: Arc<Counter>,
    pause: Option<Duration>,
}

struct FaultyWriter {
    inner: Box<dyn SessionWriter>,
    counter: Arc<Counter>,
}

impl SessionWriter for FaultyWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.inner.commit(delta).await?;
            self.counter.committed();
            Ok(())
        })
    }
}

impl Faulty {
    fn writer(&self, inner: Box<dyn SessionWriter>) -> Box<dyn SessionWriter> {
        Box::new(FaultyWriter { inner, counter: Arc::clone(&self.counter) })
    }
}

impl SessionStore for Faulty {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        Box::pin(async move { Ok(self.writer(self.inner.create(state).await?)) })
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        Box::pin(async move {
            let (state, writer) = self.inner.open(id).await?;
            if let Some(pause) = self.pause {
                tokio::time::sleep(pause).await;
            }
            Ok((state, self.writer(writer)))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        self.inner.read(id)
    }

    fn list(&self) -> StoreFuture<'_, Vec<String>> {
        self.inner.list()
    }

    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        self.inner.is_held(id)
    }

    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, archmax_vm::session::StoreError> {
        self.inner.files(id)
    }

    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()> {
        self.inner.keep_spec(spec)
    }

    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>> {
        self.inner.spec(hash)
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        self.inner.remove(id)
    }

    fn local_dir(&self, id: &str) -> Option<std::path::PathBuf> {
        self.inner.local_dir(id)
    }

    fn claim_record<'a>(&'a self, record: &'a Record, now_ms: u64) -> StoreFuture<'a, bool> {
        self.inner.claim_record(record, now_ms)
    }

    fn read_record<'a>(&'a self, kind: RecordKind, key: &'a str, now_ms: u64) -> StoreFuture<'a, Option<Vec<u8>>> {
        self.inner.read_record(kind, key, now_ms)
    }

    fn remove_record<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, bool> {
        self.inner.remove_record(kind, key)
    }
}
