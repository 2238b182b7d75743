//! The in-memory session store, for tests and benches.
//!
//! It keeps the filesystem store's contract without touching disk: one writer per
//! session (a second is [`StoreError::Busy`] until the first is dropped) and a
//! compare-and-swap on the sequence number, so a stale writer gets
//! [`StoreError::Conflict`] and changes nothing. Pinned specs and every session's files
//! ([`SessionStore::files`], a [`MemoryVfs`] per session) are kept in the store too, so
//! runtimes sharing one store (clones share everything) see the same files, as processes
//! sharing a sessions folder do. Nothing survives the process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use archmax_stdlib::vfs::{MemoryVfs, Vfs};

use super::records::{Record, RecordKind, check_record_key, records_full};
use super::spec::PinnedSpec;
use super::store::{StoreFuture, ready};
use super::{Delta, SessionState, SessionStore, SessionWriter, StoreError};

/// Sessions held in memory; clones share the same sessions.
#[derive(Clone, Default)]
pub struct MemoryStore {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    sessions: Mutex<HashMap<String, Entry>>,
    /// Pinned specs by hash.
    specs: Mutex<HashMap<String, PinnedSpec>>,
    /// Each session's files, by session id.
    files: Mutex<HashMap<String, Arc<MemoryVfs>>>,
    /// Shared records by kind, then key.
    records: Mutex<HashMap<RecordKind, KeptRecords>>,
    next_writer_token: AtomicU64,
}

/// One kind's shared records by key: the value and when it expires (ms since the epoch).
type KeptRecords = HashMap<String, (Vec<u8>, u64)>;

struct Entry {
    state: SessionState,
    /// The token of the writer holding the session, if any.
    locked_by: Option<u64>,
}

impl Shared {
    /// A poisoned mutex only means another thread panicked mid-operation; every
    /// operation leaves the map consistent, so the data is still good.
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn new_writer_token(&self) -> u64 {
        self.next_writer_token.fetch_add(1, Ordering::Relaxed)
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a session and returns its concrete writer.
    pub fn create_writer(&self, state: &SessionState) -> Result<MemoryWriter, StoreError> {
        let token = self.shared.new_writer_token();
        let mut sessions = self.shared.sessions();
        if sessions.contains_key(state.id.as_str()) {
            return Err(StoreError::Exists(state.id.to_string()));
        }
        sessions.insert(state.id.to_string(), Entry { state: state.clone(), locked_by: Some(token) });
        Ok(MemoryWriter { shared: Arc::clone(&self.shared), id: state.id.to_string(), last_seq: state.seq, token })
    }

    /// Opens a session for writing and returns its state and concrete writer.
    pub(crate) fn open_writer(&self, id: &str) -> Result<(SessionState, MemoryWriter), StoreError> {
        let token = self.shared.new_writer_token();
        let mut sessions = self.shared.sessions();
        let entry = sessions.get_mut(id).ok_or_else(|| StoreError::Missing(id.to_string()))?;
        if entry.locked_by.is_some() {
            return Err(StoreError::Busy(id.to_string()));
        }
        entry.locked_by = Some(token);
        let writer =
            MemoryWriter { shared: Arc::clone(&self.shared), id: id.to_string(), last_seq: entry.state.seq, token };
        Ok((entry.state.clone(), writer))
    }

    /// Releases a session's writer lock without dropping the writer, as a crashed or
    /// partitioned process would: lets tests exercise stale writers.
    #[cfg(test)]
    fn force_unlock(&self, id: &str) {
        if let Some(entry) = self.shared.sessions().get_mut(id) {
            entry.locked_by = None;
        }
    }

    /// Removes a session and its files unless a writer holds it.
    pub fn remove(&self, id: &str) -> Result<bool, StoreError> {
        let mut sessions = self.shared.sessions();
        match sessions.get(id) {
            None => return Ok(false),
            Some(entry) if entry.locked_by.is_some() => return Err(StoreError::Busy(id.to_string())),
            Some(_) => {}
        }
        sessions.remove(id);
        self.shared.files.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        Ok(true)
    }

    /// Reads a session without locking it; `None` when it does not exist.
    pub fn read(&self, id: &str) -> Option<SessionState> {
        self.shared.sessions().get(id).map(|entry| entry.state.clone())
    }

    /// Every session id, sorted.
    pub fn list(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.shared.sessions().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The spec kept under `hash`, if any.
    pub fn spec(&self, hash: &str) -> Option<PinnedSpec> {
        self.shared.specs.lock().unwrap_or_else(PoisonError::into_inner).get(hash).cloned()
    }

    /// Claims a shared record (see [`SessionStore::claim_record`]).
    pub fn claim_record(&self, record: &Record, now_ms: u64) -> Result<bool, StoreError> {
        record.check()?;
        let mut records = self.shared.records.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = records.entry(record.kind).or_default();
        if kept.get(&record.key).is_some_and(|(_, expires)| *expires > now_ms) {
            return Ok(false);
        }
        if !kept.contains_key(&record.key) && kept.len() >= record.kind.capacity() {
            kept.retain(|_, (_, expires)| *expires > now_ms);
            if kept.len() >= record.kind.capacity() {
                return Err(records_full(record.kind));
            }
        }
        kept.insert(record.key.clone(), (record.value.clone(), record.expires_ms));
        Ok(true)
    }

    /// The value of a live shared record.
    pub fn read_record(&self, kind: RecordKind, key: &str, now_ms: u64) -> Result<Option<Vec<u8>>, StoreError> {
        check_record_key(kind, key)?;
        let records = self.shared.records.lock().unwrap_or_else(PoisonError::into_inner);
        let found = records.get(&kind).and_then(|kept| kept.get(key));
        Ok(found.filter(|(_, expires)| *expires > now_ms).map(|(value, _)| value.clone()))
    }

    /// Forgets a shared record.
    pub fn remove_record(&self, kind: RecordKind, key: &str) -> Result<bool, StoreError> {
        check_record_key(kind, key)?;
        let mut records = self.shared.records.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(records.get_mut(&kind).and_then(|kept| kept.remove(key)).is_some())
    }

    /// A session's files, made empty on first use.
    pub fn files(&self, id: &str) -> Arc<MemoryVfs> {
        let mut files = self.shared.files.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(files.entry(id.to_string()).or_default())
    }
}

impl SessionStore for MemoryStore {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        ready(self.create_writer(state).map(|writer| Box::new(writer) as Box<dyn SessionWriter>))
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        ready(self.open_writer(id).map(|(state, writer)| (state, Box::new(writer) as Box<dyn SessionWriter>)))
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        ready(Ok(MemoryStore::read(self, id)))
    }

    fn list(&self) -> StoreFuture<'_, Vec<String>> {
        ready(Ok(MemoryStore::list(self)))
    }

    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        ready(Ok(self.shared.sessions().get(id).map(|entry| entry.locked_by.is_some())))
    }

    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError> {
        Ok(MemoryStore::files(self, id) as Arc<dyn Vfs>)
    }

    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()> {
        let mut specs = self.shared.specs.lock().unwrap_or_else(PoisonError::into_inner);
        specs.entry(spec.spec_hash.clone()).or_insert_with(|| spec.clone());
        ready(Ok(()))
    }

    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>> {
        ready(Ok(MemoryStore::spec(self, hash)))
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        ready(MemoryStore::remove(self, id))
    }

    fn claim_record<'a>(&'a self, record: &'a Record, now_ms: u64) -> StoreFuture<'a, bool> {
        ready(MemoryStore::claim_record(self, record, now_ms))
    }

    fn read_record<'a>(&'a self, kind: RecordKind, key: &'a str, now_ms: u64) -> StoreFuture<'a, Option<Vec<u8>>> {
        ready(MemoryStore::read_record(self, kind, key, now_ms))
    }

    fn remove_record<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, bool> {
        ready(MemoryStore::remove_record(self, kind, key))
    }
}

/// Commits steps to one session of a [`MemoryStore`]; releases the session when dropped.
pub struct MemoryWriter {
    shared: Arc<Shared>,
    id: String,
    last_seq: u64,
    token: u64,
}

impl MemoryWriter {
    /// The seq of the last step this writer committed (or found when opening).
    pub fn seq(&self) -> u64 {
        self.last_seq
    }
}

impl MemoryWriter {
    /// Commits one step (see [`SessionWriter::commit`]).
    pub fn commit(&mut self, delta: &Delta) -> Result<(), StoreError> {
        let mut sessions = self.shared.sessions();
        let entry = sessions.get_mut(&self.id).ok_or_else(|| StoreError::Missing(self.id.clone()))?;
        if entry.state.seq != self.last_seq {
            return Err(StoreError::Conflict { id: self.id.clone(), expected: self.last_seq, found: entry.state.seq });
        }
        if delta.seq != self.last_seq.wrapping_add(1) {
            return Err(StoreError::Conflict {
                id: self.id.clone(),
                expected: delta.seq.saturating_sub(1),
                found: self.last_seq,
            });
        }
        entry.state.apply(delta);
        self.last_seq = delta.seq;
        Ok(())
    }
}

impl SessionWriter for MemoryWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        ready(MemoryWriter::commit(self, delta))
    }
}

impl Drop for MemoryWriter {
    fn drop(&mut self) {
        if let Some(entry) = self.shared.sessions().get_mut(&self.id)
            && entry.locked_by == Some(self.token)
        {
            entry.locked_by = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Head, Message, Status};

    fn initial(id: &str) -> SessionState {
        SessionState {
            id: crate::session::id::SessionId::parse(id, &[]).expect("a test id"),
            head: Head { workflow: "w".into(), ..Head::default() },
            ..Default::default()
        }
    }

    fn step(seq: u64, text: &str) -> Delta {
        Delta {
            seq,
            head: Head { workflow: "w".into(), updated_at: seq, ..Head::default() },
            messages: vec![Message::User { text: text.to_string(), opening: None }],
            ..Delta::default()
        }
    }

    #[test]
    fn round_trip_and_list() {
        let store = MemoryStore::new();
        let mut writer = store.create_writer(&initial("b")).expect("create");
        writer.commit(&step(1, "hi")).expect("commit 1");
        writer.commit(&step(2, "there")).expect("commit 2");
        drop(writer);
        store.create_writer(&initial("a")).expect("create a");

        let state = store.read("b").expect("exists");
        assert_eq!(state.seq, 2);
        assert_eq!(state.messages.len(), 2);
        assert_eq!(state.head.status, Status::Running);
        assert_eq!(store.list(), ["a", "b"]);
        assert!(store.read("c").is_none());
        // A session's files belong to the store: a clone (another runtime) sees them.
        store.files("b").write("scratchpad/note.md", b"kept").expect("write");
        assert_eq!(store.clone().files("b").read("scratchpad/note.md").expect("read"), b"kept");
        assert!(store.files("a").stat("scratchpad/note.md").expect("stat").is_none());

        let (reopened, mut writer) = store.open_writer("b").expect("open");
        assert_eq!(reopened, state);
        writer.commit(&step(3, "again")).expect("commit 3");
    }

    #[test]
    fn create_twice_is_exists_and_open_unknown_is_missing() {
        let store = MemoryStore::new();
        let _writer = store.create_writer(&initial("s")).expect("create");
        assert!(matches!(store.create_writer(&initial("s")), Err(StoreError::Exists(id)) if id == "s"));
        assert!(matches!(store.open_writer("nope"), Err(StoreError::Missing(id)) if id == "nope"));
    }

    #[test]
    fn second_writer_is_busy_until_the_first_is_dropped() {
        let store = MemoryStore::new();
        let writer = store.create_writer(&initial("s")).expect("create");
        assert!(matches!(store.open_writer("s"), Err(StoreError::Busy(id)) if id == "s"));
        drop(writer);
        assert!(store.open_writer("s").is_ok());
    }

    #[test]
    fn wrong_seq_is_conflict_and_writes_nothing() {
        let store = MemoryStore::new();
        let mut writer = store.create_writer(&initial("s")).expect("create");
        assert!(matches!(writer.commit(&step(2, "skip")), Err(StoreError::Conflict { .. })));
        assert!(matches!(writer.commit(&step(0, "again")), Err(StoreError::Conflict { .. })));
        assert_eq!(store.read("s").expect("exists").seq, 0);
        writer.commit(&step(1, "ok")).expect("commit");
    }

    #[test]
    fn stale_writer_is_conflict() {
        let store = MemoryStore::new();
        let mut stale = store.create_writer(&initial("s")).expect("create");
        store.force_unlock("s");
        let (_, mut fresh) = store.open_writer("s").expect("open behind the stale writer's back");
        fresh.commit(&step(1, "fresh")).expect("fresh commit");
        let refused = stale.commit(&step(1, "stale"));
        assert!(
            matches!(refused, Err(StoreError::Conflict { ref id, expected: 0, found: 1 }) if id == "s"),
            "{refused:?}"
        );
        let state = store.read("s").expect("exists");
        assert_eq!(state.messages, vec![Message::User { text: "fresh".into(), opening: None }]);
        // The stale writer's drop must not release the live writer's lock.
        drop(stale);
        assert!(matches!(store.open_writer("s"), Err(StoreError::Busy(_))));
        drop(fresh);
        assert!(store.open_writer("s").is_ok());
    }
}

#[cfg(test)]
mod conformance {
    use std::sync::Arc;

    use super::MemoryStore;
    use crate::session::SessionStore;

    /// Clones share the sessions, as processes sharing one backing would.
    #[test]
    fn the_memory_store_keeps_the_store_contract() {
        let backing = MemoryStore::new();
        crate::session::conformance::run("memory store", &|| Arc::new(backing.clone()) as Arc<dyn SessionStore>);
    }
}
