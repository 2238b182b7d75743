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
//! Listing is paged ([`SessionStore::list_page`] with a [`ListQuery`]): sessions in id
//! order (bytes, as Rust compares strings) after a cursor, filtered by workflow, status,
//! park and due time. A store that can filter and page where it keeps the sessions (the
//! PostgreSQL store, with one keyset query) answers it itself; the default reads every
//! session after the cursor through [`SessionStore::list`] and [`SessionStore::read`].
//!
//! The one thing to know: **a session's files come from its store** ([`SessionStore::files`]),
//! never from a path the runtime makes up, so a store that is not a local directory keeps
//! them as durably as it keeps the steps.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use archmax_stdlib::vfs::Vfs;

use super::records::{Record, RecordKind};
use super::spec::PinnedSpec;
use super::{Delta, Head, SessionState, Status};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("session `{0}` is in use by another process; try again when it finishes")]
    Busy(String),
    /// A writer whose hold on the session ran out while it was away (a stalled process, a
    /// lost network) and whom another runner has since replaced: nothing was written, and
    /// the session is the other runner's to continue.
    #[error(
        "session `{0}` was taken over by another runner after this runner's hold on it ran out; this step was not written"
    )]
    TakenOver(String),
    #[error("session `{id}` moved on to step {found} while this process held step {expected}; nothing was written")]
    Conflict { id: String, expected: u64, found: u64 },
    #[error("session `{0}` already exists")]
    Exists(String),
    #[error("session `{0}` does not exist")]
    Missing(String),
    #[error("session `{id}` is unreadable: {message}")]
    Corrupt { id: String, message: String },
    /// A filesystem session whose files do not verify past some step; nothing was
    /// changed. Cutting it back to the steps before the damage (`FsStore::repair`) would
    /// load it: how a host offers that is the host's to say.
    #[error("session `{id}` is unreadable: {what}. Nothing was changed")]
    Damaged { id: String, what: String },
    /// A filesystem session sealed without the runner's seal key; nothing was changed.
    /// Adopting it under the key (`FsStore::reseal`) or restoring it from a backup would
    /// load it: how a host offers that is the host's to say.
    #[error("session `{id}` is unreadable: {UNKEYED_SEAL}. Nothing was changed")]
    Unkeyed { id: String },
    /// Damage a repair cannot cut back (the snapshot itself is damaged).
    #[error(
        "session `{id}` is unreadable: {what}; a repair cannot help, restore the session from a backup or delete it"
    )]
    Unrepairable { id: String, what: String },
    /// A pinned spec could not be kept or read (a bad hash, a damaged file, I/O).
    #[error("the session store's spec `{hash}` could not be used: {message}")]
    Spec { hash: String, message: String },
    /// A shared record's key or value the store cannot keep ([`super::records`]).
    #[error("the shared record `{kind}/{key}` is refused: {message}")]
    Record { kind: &'static str, key: String, message: String },
    /// A claim past a record kind's capacity ([`super::records::RecordKind::capacity`]).
    #[error("the store holds {capacity} live `{kind}` records, as many as it keeps; try again when some expire")]
    RecordsFull { kind: &'static str, capacity: usize },
    /// The store could not be reached at all (its database refused or dropped every
    /// connection): nothing was read or written, and the same call may succeed once it
    /// answers again.
    #[error("the session store cannot be reached: {0}")]
    Unavailable(String),
    #[error("session store I/O failed for `{id}`: {source}")]
    Io {
        id: String,
        #[source]
        source: std::io::Error,
    },
}

/// What is wrong with a session sealed without the runner's seal key ([`StoreError::Unkeyed`]).
pub(crate) const UNKEYED_SEAL: &str = "its seal was made without the runner's seal key (by a build before keyed seals, or by \
     someone rewriting it without the key), so nothing vouches that its steps are the ones the runner wrote";

impl StoreError {
    /// Whether the session exists but could not be read: its files are damaged or
    /// unvouched for. Listing names such a session as unreadable and goes on.
    pub fn is_unreadable(&self) -> bool {
        matches!(
            self,
            StoreError::Corrupt { .. }
                | StoreError::Damaged { .. }
                | StoreError::Unkeyed { .. }
                | StoreError::Unrepairable { .. }
        )
    }
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
    /// One page of the sessions `query` admits, in id order after its cursor (see
    /// [`ListPage`]). The default reads the sessions one by one ([`read_page`]).
    fn list_page<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, ListPage> {
        Box::pin(read_page(self, query))
    }
    /// The session's own file system (`scratchpad/`, `artifacts/`, the offload zones),
    /// kept by the store. It may be asked for before the session exists; what is written
    /// there lives as long as the store keeps the session.
    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError>;
    /// The folder on this machine that holds the session's own files, when the store keeps
    /// them in one (what a host tool's path arguments are translated into); `None` for a
    /// store that keeps them elsewhere (memory, a database).
    fn local_dir(&self, id: &str) -> Option<std::path::PathBuf> {
        let _ = id;
        None
    }
    /// Keeps `spec` under its hash unless one is kept there already; losing a race to
    /// write the same hash is success.
    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()>;
    /// The spec kept under `hash`, if any.
    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>>;
    /// Whether a writer holds the session at this moment, in this process or another:
    /// `Some(false)` when none does (a `running` session nobody holds had its turn cut and
    /// can be continued), `None` when the store cannot tell (the default) or there is no
    /// such session. Hosts ask it to show such a session as interrupted; nothing is
    /// taken that a writer would wait for beyond an instant.
    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        let _ = id;
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Removes a session and its files for good; `false` when there is no such session. A
    /// session open for writing (here or in another process) is [`StoreError::Busy`] and
    /// stays as it was.
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;
    /// Keeps `record` unless a live record of its kind already holds its key: `true` when
    /// this call claimed the key (until `record.expires_ms`), `false` when a live record
    /// holds it. Of several claims of one key at once, in any processes, one wins. An
    /// expired record under the key is replaced; a claim past the kind's capacity is
    /// [`StoreError::RecordsFull`] (see [`super::records`]).
    fn claim_record<'a>(&'a self, record: &'a Record, now_ms: u64) -> StoreFuture<'a, bool>;
    /// The value of the live record `kind`/`key`; `None` when there is none or it expired.
    fn read_record<'a>(&'a self, kind: RecordKind, key: &'a str, now_ms: u64) -> StoreFuture<'a, Option<Vec<u8>>>;
    /// Forgets the record `kind`/`key`; `true` when one (live or expired) was kept.
    fn remove_record<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, bool>;
    /// Hands this runner up to `limit` root sessions that need one ([`Chore`]), that are
    /// pinned to a workflow spec it can run (`runnable`: workflow slugs and spec hashes,
    /// in pairs), and that no other runner sharing the store holds or was handed within a
    /// short while, so a fleet does each chore once, on a runner able to. (A fleet in the
    /// middle of a rolling upgrade has runners without the newest workflows: a session
    /// they cannot run is left to one that can.) The sessions are not opened: the caller
    /// opens each and checks afresh that the chore is still there. `None` (the default)
    /// from a store only one process uses: its host keeps its own account of resume times
    /// and cut turns.
    fn claim_chores<'a>(
        &'a self,
        chore: Chore,
        runnable: &'a [(String, String)],
        limit: usize,
    ) -> StoreFuture<'a, Option<Vec<String>>> {
        let _ = (chore, runnable, limit);
        Box::pin(std::future::ready(Ok(None)))
    }
    /// The sessions' events, when the store keeps them for a fleet
    /// ([`super::event_log`]); `None` (the default) from a store only one process uses,
    /// whose host keeps them itself.
    fn event_log(&self) -> Option<Arc<dyn super::event_log::EventLog>> {
        None
    }
    /// How many root sessions are parked, by workflow and status, and when each workflow's
    /// oldest pending decision was asked for: what a host's gauges show. The default reads
    /// at most `max_pages` pages of [`SessionStore::list_page`] ([`read_parked_summary`]); a
    /// store that can count where it keeps the sessions answers in one query.
    fn parked_summary(&self, max_pages: usize) -> StoreFuture<'_, ParkedSummary> {
        Box::pin(read_parked_summary(self, max_pages))
    }
}

/// What [`SessionStore::parked_summary`] answers. Root sessions only: a sub-workflow
/// parked under its caller is counted once, as its caller (which presents the child's park).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParkedSummary {
    /// `(workflow, status)` → parked root sessions; the status is a parked one.
    pub sessions: std::collections::BTreeMap<(String, Status), u64>,
    /// Workflow → when its oldest pending decision was asked for (ms since the epoch).
    pub oldest_decision_ms: std::collections::BTreeMap<String, i64>,
    /// Whether every parked session was counted (a default summary cut at its page bound
    /// is not).
    pub complete: bool,
}

impl ParkedSummary {
    /// Counts one parked root session of `workflow`, asked for a decision at `asked_ms` if any.
    pub fn add(&mut self, workflow: &str, status: Status, count: u64, asked_ms: Option<i64>) {
        *self.sessions.entry((workflow.to_string(), status)).or_default() += count;
        if let Some(asked) = asked_ms {
            let oldest = self.oldest_decision_ms.entry(workflow.to_string()).or_insert(asked);
            *oldest = (*oldest).min(asked);
        }
    }
}

/// [`SessionStore::parked_summary`] for any store: pages through the parked sessions.
pub async fn read_parked_summary<S: SessionStore + ?Sized>(
    store: &S,
    max_pages: usize,
) -> Result<ParkedSummary, StoreError> {
    let mut summary = ParkedSummary::default();
    let mut query = ListQuery { parked: Some(true), limit: ListQuery::MAX_LIMIT, ..ListQuery::default() };
    for _ in 0..max_pages {
        let page = store.list_page(&query).await?;
        for head in page.sessions.iter().map(|state| &state.head).filter(|head| head.parent.is_none()) {
            let asked = head.pending_decision.as_ref().and_then(|pending| instant_ms(&pending.created_at));
            summary.add(&head.workflow, head.status, 1, asked);
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => {
                summary.complete = true;
                break;
            }
        }
    }
    Ok(summary)
}

/// Work a fleet shares out through [`SessionStore::claim_chores`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chore {
    /// Sessions waiting for input with a resume time at or before this one (milliseconds
    /// since the epoch): to be woken.
    Due { by_ms: u64 },
    /// Sessions whose status is still `running` while no runner holds them: their turn was
    /// cut (the runner died or was stopped) and is to be continued.
    Stranded,
}

/// Which sessions a listing wants, and where its page starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    /// List the sessions whose id sorts after this one: the previous page's
    /// [`ListPage::next`]. It need not name a session that exists (any more).
    pub cursor: Option<String>,
    /// Sessions per page; held to `1..=`[`ListQuery::MAX_LIMIT`] ([`ListQuery::page_size`]).
    pub limit: usize,
    /// Only this workflow's sessions.
    pub workflow: Option<String>,
    /// Only sessions with this status.
    pub status: Option<Status>,
    /// Only parked sessions (awaiting a decision or input), or only sessions that are not.
    pub parked: Option<bool>,
    /// Only sessions waiting for input whose resume time (`resumeAt`) is at or before this
    /// instant, in milliseconds since the epoch. Times are compared as instants, not as
    /// text, so a resume time written with an offset or a fraction compares correctly.
    pub due_by: Option<u64>,
}

impl ListQuery {
    /// The most sessions one page holds.
    pub const MAX_LIMIT: usize = 500;
    /// The page size when none is asked for.
    pub const DEFAULT_LIMIT: usize = 50;

    /// The page size a store serves: the asked limit held to `1..=MAX_LIMIT`.
    pub fn page_size(&self) -> usize {
        self.limit.clamp(1, ListQuery::MAX_LIMIT)
    }

    /// Whether the session's head passes every filter (the cursor aside).
    pub fn admits(&self, head: &Head) -> bool {
        self.workflow.as_deref().is_none_or(|workflow| head.workflow == workflow)
            && self.status.is_none_or(|status| head.status == status)
            && self.parked.is_none_or(|parked| head.status.is_parked() == parked)
            && self.due_by.is_none_or(|due_by| {
                resume_time_ms(head).is_some_and(|resume| resume <= i64::try_from(due_by).unwrap_or(i64::MAX))
            })
    }

    /// Whether `id` lies after the cursor.
    pub(crate) fn follows_cursor(&self, id: &str) -> bool {
        self.cursor.as_deref().is_none_or(|cursor| id > cursor)
    }
}

impl Default for ListQuery {
    fn default() -> ListQuery {
        ListQuery {
            cursor: None,
            limit: ListQuery::DEFAULT_LIMIT,
            workflow: None,
            status: None,
            parked: None,
            due_by: None,
        }
    }
}

/// One page of a listing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListPage {
    /// At most [`ListQuery::page_size`] sessions, in id order.
    pub sessions: Vec<SessionState>,
    /// The cursor of the next page (the id of the last session this page covers), or
    /// `None` when no admitted session follows.
    pub next: Option<String>,
    /// Sessions in the range this page covers (after the cursor, up to `next` or the end)
    /// that could not be read ([`StoreError::is_unreadable`]): named here and skipped, so one
    /// damaged session hides no other. A store that can filter without reading a session
    /// names only those the filters admit; the default names every one in the range.
    pub unreadable: Vec<String>,
}

/// A session's resume time (`resumeAt` of its wait for input) in milliseconds since the
/// epoch; `None` when it waits for no time, or the time is not an RFC 3339 instant (such a
/// session is never due).
pub fn resume_time_ms(head: &Head) -> Option<i64> {
    instant_ms(head.pending_input.as_ref()?.resume_at.as_deref()?)
}

/// An RFC 3339 instant in milliseconds since the epoch; `None` when `text` is not one.
pub fn instant_ms(text: &str) -> Option<i64> {
    let (seconds, nanos) = archmax_program::values::parse_date_time(text.trim())?;
    seconds.checked_mul(1000)?.checked_add(i64::from(nanos / 1_000_000))
}

/// [`SessionStore::list_page`] for any store: lists every id, then reads the sessions after
/// the cursor one by one until the page is full and one more admitted session shows that
/// another page follows.
pub(crate) async fn read_page<S: SessionStore + ?Sized>(store: &S, query: &ListQuery) -> Result<ListPage, StoreError> {
    let size = query.page_size();
    let mut page = ListPage::default();
    // Damaged sessions met after the page filled belong to the next page, unless none follows.
    let mut past_the_page = Vec::new();
    for id in store.list().await?.into_iter().filter(|id| query.follows_cursor(id)) {
        let state = match store.read(&id).await {
            Ok(Some(state)) => state,
            // Removed since the listing.
            Ok(None) => continue,
            Err(error) if error.is_unreadable() => {
                if page.sessions.len() < size { &mut page.unreadable } else { &mut past_the_page }.push(id);
                continue;
            }
            Err(error) => return Err(error),
        };
        if !query.admits(&state.head) {
            continue;
        }
        if page.sessions.len() == size {
            page.next = page.sessions.last().map(|last| last.id.to_string());
            return Ok(page);
        }
        page.sessions.push(state);
    }
    page.unreadable.extend(past_the_page);
    Ok(page)
}

/// A future that is already finished, for stores whose work never blocks.
pub(crate) fn ready<'a, T: Send + 'a>(result: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::id::SessionId;
    use crate::session::memory::MemoryStore;
    use crate::session::{PendingDecision, PendingInput};

    fn parked(id: &str, workflow: &str, status: Status, asked: Option<&str>, parent: Option<&str>) -> SessionState {
        let head = Head {
            workflow: workflow.into(),
            status,
            parent: parent.map(SessionId::from_store),
            pending_decision: asked.map(|created_at| PendingDecision {
                state: "review".into(),
                title: None,
                seq: 1,
                instructions: String::new(),
                approvers: Vec::new(),
                transitions: Vec::new(),
                evidence: Vec::new(),
                created_at: created_at.into(),
                child: None,
            }),
            pending_input: (status == Status::AwaitingInput).then(|| PendingInput {
                state: "wait".into(),
                reason: "later".into(),
                parked_at: "2026-01-05T09:00:00Z".into(),
                resume_at: None,
                child: None,
            }),
            ..Head::default()
        };
        SessionState { id: SessionId::from_store(id), head, ..SessionState::default() }
    }

    #[tokio::test]
    async fn the_parked_summary_counts_root_sessions_by_workflow_and_status_with_the_oldest_decision() {
        let store = MemoryStore::new();
        let sessions = [
            parked("a", "desk", Status::AwaitingDecision, Some("2026-01-05T09:30:00Z"), None),
            parked("b", "desk", Status::AwaitingDecision, Some("2026-01-05T08:00:00Z"), None),
            // A child parked under its caller counts as its caller only.
            parked("b~1", "review", Status::AwaitingDecision, Some("2026-01-01T00:00:00Z"), Some("b")),
            parked("c", "waiter", Status::AwaitingInput, None, None),
            parked("d", "desk", Status::Completed, None, None),
        ];
        for state in &sessions {
            store.create(state).await.expect("create");
        }
        let summary = store.parked_summary(10).await.expect("summary");
        let counted: Vec<(&str, Status, u64)> =
            summary.sessions.iter().map(|((workflow, status), count)| (workflow.as_str(), *status, *count)).collect();
        assert_eq!(
            counted,
            [("desk", Status::AwaitingDecision, 2), ("waiter", Status::AwaitingInput, 1)],
            "{summary:?}"
        );
        assert_eq!(summary.oldest_decision_ms.get("desk"), instant_ms("2026-01-05T08:00:00Z").as_ref());
        assert_eq!(summary.oldest_decision_ms.len(), 1, "{summary:?}");
        assert!(summary.complete);
        let cut = store.parked_summary(0).await.expect("summary");
        assert!(!cut.complete && cut.sessions.is_empty(), "no page read, nothing claimed: {cut:?}");
    }
}
