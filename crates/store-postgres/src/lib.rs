//! The PostgreSQL session store: sessions shared by every runner that reaches one
//! database.
//!
//! A separate crate so the VM carries no database driver for hosts that do not need one.
//! [`PgStore::connect`] takes a libpq-style target (`postgres://user@host/db` or
//! `host=/run/postgresql dbname=archmax`), applies the embedded migrations ([`schema`];
//! a newer schema than this binary knows is refused) and implements
//! [`SessionStore`]. The SQL lives in `migrations/` (tables) and in this crate's
//! modules (statements), nowhere else. TCP connections speak TLS as the target's
//! `sslmode` asks, with `sslrootcert`, `sslcert` and `sslkey` as libpq reads them
//! ([`tls`]): managed servers that require TLS are reached, and `verify-full` checks
//! the server's certificate and name.
//!
//! The tables: `archmax_sessions` (one row per session: its head, status, park,
//! program hash, a compacted snapshot), `archmax_steps` (append-only, one row per
//! committed step, keyed by `(session_id, seq)`), `archmax_files` (each session's own
//! files), `archmax_programs` (pinned specs by hash) and `archmax_records` (small
//! expiring records every runner shares, [`records`]).
//!
//! **A step is one statement.** A commit is a single `UPDATE … WHERE seq = previous`
//! with the step's `INSERT` and the files the step wrote in data-modifying `WITH`
//! clauses, sent in one round trip and committed as one transaction with
//! `synchronous_commit = on`: a crash leaves the step, its head and its files wholly
//! present or wholly absent, and a writer whose view is stale (the session moved on)
//! changes no row and is refused with [`StoreError::Conflict`]. Nothing in a commit
//! reads or rewrites the transcript, so its cost does not grow with the session; the
//! snapshot is refolded when a session is opened with 64 or more steps after it. The
//! step's announcement to listeners follows on the same connection, pipelined, as a
//! transaction of its own (inside the step's, it would serialize every session's commit).
//!
//! **One writer per session** is a session-level advisory lock
//! (`pg_try_advisory_lock` on a digest of the id) held on the writer's own pooled
//! connection for as long as the [`SessionWriter`] lives: a second writer anywhere is
//! [`StoreError::Busy`]. A process that dies loses its connection and with it the lock,
//! so another runner can open the session and resume from its last committed step.
//! A dropped writer unlocks and returns its connection; a connection whose unlock cannot
//! be confirmed is closed rather than pooled.
//!
//! **Files.** [`SessionStore::files`] hands out a synchronous [`Vfs`] while the driver is
//! asynchronous. The store starts no executor of its own: it borrows the host's, which
//! must be a multi-threaded tokio runtime ([`PgStore::connect_with`] takes the one it is
//! called on, [`PgStore::connect_blocking`] is handed one, and anything else is
//! [`ConnectError::Executor`]). The pool's connections are tasks of that executor; the
//! async methods spawn their work there and await it from any executor, and a `Vfs` call
//! spawns its query there and waits for the answer (under
//! [`archmax_vm::blocking::run_blocking`], so the waiting worker hands its other tasks
//! over while the remaining workers drive the connection). While a writer for the session
//! is open in this store value, writes and removals are staged in memory (this store
//! value reads them back at once) and flushed in the transaction of the next commit, so
//! a step and the files it wrote become durable together; staged changes of a writer
//! dropped without another commit belonged to no step and are discarded. Without an open
//! writer (a sub-workflow's seeds before its session exists, an import) a write goes to
//! the database at once, in its own transaction. Reads always come from the database
//! under the staged changes. Writes are held to the session caps of
//! [`archmax_stdlib::limits`] ([`PgOptions::limits`]): file size, total bytes, file count.
//!
//! **Other runners' steps.** Every commit notifies `archmax_steps` with `<id> <seq>`;
//! [`PgStore::subscribe`] hands out a [`StepFeed`] of them.
//!
//! **Listing** ([`listing`]): [`SessionStore::list_page`] is one keyset query on the
//! sessions' columns (`id > cursor`, the filters, `ORDER BY id LIMIT n + 1`), ids in byte
//! order (the column's collation is `"C"`); [`PgStore::due`] lists the sessions whose
//! `resumeAt` has come. Resume times are kept as instants too (`resume_due`), so "due" is a
//! time comparison; indexes serve the workflow, status and due filters.

mod files;
mod listing;
mod notify;
mod records;
pub mod schema;
#[cfg(any(test, feature = "test-support"))]
pub mod test_cluster;
pub mod tls;
mod writer;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use sha2::{Digest, Sha256};
use tokio_postgres::types::{Json, ToSql};
use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_stdlib::limits::Limits;
use archmax_stdlib::vfs::Vfs;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::records::{Record, RecordKind};
use archmax_vm::session::spec::{PinnedSpec, is_spec_hash};
use archmax_vm::session::store::{ListPage, ListQuery, StoreFuture, resume_time_ms};
use archmax_vm::session::{Delta, SessionState, SessionStore, SessionWriter, StoreError};

use files::{PgFiles, SessionFiles};
pub use notify::{CHANNEL, CommittedStep, StepFeed};
use writer::{LockedClient, PgWriter};

/// A session opened with at least this many steps after its snapshot gets a new one.
const COMPACT_AFTER_STEPS: usize = 64;
/// How long an operation waits for a pooled connection before it fails.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// Why the store could not be reached or prepared.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the PostgreSQL store target is not a libpq connection string or URL: {0}")]
    Config(String),
    #[error("cannot reach PostgreSQL: {0}")]
    Connect(String),
    #[error(
        "the database's archmax schema is version {found}, newer than this archmax knows ({known}); upgrade archmax before using this database"
    )]
    SchemaTooNew { found: i32, known: i32 },
    #[error("the PostgreSQL store target's TLS settings cannot be used: {0}")]
    Tls(String),
    #[error("applying the archmax schema failed: {0}")]
    Migration(String),
    #[error("the PostgreSQL store runs on its host's executor, which must be a multi-threaded tokio runtime: {0}")]
    Executor(&'static str),
}

/// How a [`PgStore`] runs.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Most connections the store opens. Every open writer holds one (its lock lives on
    /// it), so this bounds how many sessions one process runs at once; the server's
    /// `max_connections` must leave room for every runner's pool.
    pub max_connections: usize,
    /// The caps a session's files are held to.
    pub limits: Limits,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions { max_connections: 96, limits: Limits::default() }
    }
}

/// Sessions in a PostgreSQL database. Clones share the pool and the staged files.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The host's executor, whose tasks hold every connection of the pool.
    handle: tokio::runtime::Handle,
    pool: Pool,
    /// How to open a connection of its own (a [`StepFeed`] listens on one).
    config: tokio_postgres::Config,
    /// The TLS the target asks for, for that connection too.
    tls: MakeRustlsConnect,
    limits: Limits,
    /// The staged files of sessions this store value has handed out, by id.
    open: Mutex<HashMap<String, Weak<SessionFiles>>>,
}

impl Inner {
    /// Runs `work` on the host's executor and waits for it from whichever executor
    /// (or none) the caller is on.
    async fn run<T, F>(&self, id: &str, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        match self.handle.spawn(work).await {
            Ok(result) => result,
            Err(error) => Err(io_error(id, format!("the store's task ended early: {error}"))),
        }
    }

    /// Runs `work` on the host's executor and blocks the calling thread until it is done
    /// (under `run_blocking`, so a multi-threaded host hands the worker over), for at most
    /// `limit` when given; `None` when it did not finish (the executor stopped, or time ran
    /// out: the work itself carries on).
    fn wait<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
        limit: Option<Duration>,
    ) -> Option<T> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        drop(self.handle.spawn(async move {
            let _ = sender.send(work.await);
        }));
        archmax_vm::blocking::run_blocking(|| match limit {
            Some(limit) => receiver.recv_timeout(limit).ok(),
            None => receiver.recv().ok(),
        })
    }

    /// The staged files of session `id`, shared by its writer and every `Vfs` handed out.
    fn session_files(&self, id: &str) -> Arc<SessionFiles> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(files) = open.get(id).and_then(Weak::upgrade) {
            return files;
        }
        if open.len() >= 1024 {
            open.retain(|_, files| files.strong_count() > 0);
        }
        let files = Arc::new(SessionFiles::default());
        open.insert(id.to_string(), Arc::downgrade(&files));
        files
    }
}

impl PgStore {
    /// Connects to `target` with [`PgOptions::default`] and brings the schema up to date.
    pub async fn connect(target: &str) -> Result<PgStore, ConnectError> {
        PgStore::connect_with(target, PgOptions::default()).await
    }

    /// Connects to `target` (libpq URL or `key=value` form) and brings the schema up to
    /// date; a newer schema is [`ConnectError::SchemaTooNew`]. The store runs on the
    /// executor this is awaited on, which must be a multi-threaded tokio runtime.
    pub async fn connect_with(target: &str, options: PgOptions) -> Result<PgStore, ConnectError> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| ConnectError::Executor("the connection was awaited outside any tokio runtime"))?;
        let (store, migrated) = PgStore::prepare(target, options, handle)?;
        match migrated.await {
            Ok(result) => result.map(|()| store),
            Err(error) => Err(ConnectError::Connect(format!("the store's task ended early: {error}"))),
        }
    }

    /// [`PgStore::connect_with`] for synchronous code: the store runs on `executor` (a
    /// multi-threaded tokio runtime's handle) and the calling thread waits for the schema.
    /// The caller may be outside any runtime or inside a multi-threaded one.
    pub fn connect_blocking(
        executor: &tokio::runtime::Handle,
        target: &str,
        options: PgOptions,
    ) -> Result<PgStore, ConnectError> {
        let (store, migrated) = PgStore::prepare(target, options, executor.clone())?;
        match store.inner.wait(migrated, None) {
            Some(Ok(result)) => result.map(|()| store),
            Some(Err(error)) => Err(ConnectError::Connect(format!("the store's task ended early: {error}"))),
            None => Err(ConnectError::Connect("the store's executor stopped".to_string())),
        }
    }

    /// The store and its migration, started on `handle`'s executor.
    fn prepare(
        target: &str,
        options: PgOptions,
        handle: tokio::runtime::Handle,
    ) -> Result<(PgStore, tokio::task::JoinHandle<Result<(), ConnectError>>), ConnectError> {
        // A `Vfs` call blocks its thread until a connection task answers: on a runtime of
        // one thread that task could never run.
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(ConnectError::Executor("the one given runs every task on a single thread"));
        }

        let (driver_target, tls_settings) = tls::split(target).map_err(ConnectError::Config)?;
        let mut config: tokio_postgres::Config =
            driver_target.parse().map_err(|error: tokio_postgres::Error| ConnectError::Config(error.to_string()))?;
        let tls = tls::connector(&tls_settings).map_err(ConnectError::Tls)?;
        // A unix socket carries no TLS (the server refuses it there, and libpq ignores
        // the mode): a target that reaches the server only through sockets goes without.
        let hosts = config.get_hosts();
        if !hosts.is_empty()
            && config.get_hostaddrs().is_empty()
            && hosts.iter().all(|host| !matches!(host, tokio_postgres::config::Host::Tcp(_)))
        {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        }
        let durable = match config.get_options() {
            Some(options) if !options.trim().is_empty() => format!("{options} -c synchronous_commit=on"),
            _ => "-c synchronous_commit=on".to_string(),
        };
        config.options(&durable);
        if config.get_application_name().is_none() {
            config.application_name("archmax");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(2))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .recycle_timeout(Some(POOL_WAIT))
            .build()
            .map_err(|error| ConnectError::Connect(error.to_string()))?;
        let inner = Arc::new(Inner {
            handle,
            pool: pool.clone(),
            config,
            tls,
            limits: options.limits,
            open: Mutex::new(HashMap::new()),
        });
        let migrated = inner.handle.spawn(async move {
            let mut object = pool.get().await.map_err(|error| ConnectError::Connect(with_causes(&error)))?;
            let client: &mut tokio_postgres::Client = &mut object;
            schema::migrate(client).await
        });
        Ok((PgStore { inner }, migrated))
    }
}

impl PgStore {
    /// Every step committed from now on, by any process, as it commits: a dedicated
    /// connection `LISTEN`s on [`CHANNEL`]. A runner streaming a session's events uses
    /// it to see steps another runner committed.
    pub async fn subscribe(&self) -> Result<StepFeed, StoreError> {
        let config = self.inner.config.clone();
        let tls = self.inner.tls.clone();
        self.inner.run("", notify::listen(config, tls)).await
    }
}

/// The advisory lock key of a session: the first 8 bytes of a digest of its id.
fn lock_key(id: &str) -> i64 {
    let digest = Sha256::new().chain_update(b"archmax-session\0").chain_update(id.as_bytes()).finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// An error and every cause under it, `: `-joined: the driver's own text is often only
/// "db error" or "error performing TLS handshake", with the server's reason or the
/// certificate problem one level down.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text
}

/// A store I/O error naming the session.
fn io_error(id: &str, message: String) -> StoreError {
    StoreError::Io { id: id.to_string(), source: io::Error::other(message) }
}

/// What a driver error says, with the server's own message when there is one.
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}

fn db_error(id: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |error| io_error(id, describe(&error))
}

fn number(id: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| io_error(id, format!("{value} does not fit the store's bigint columns")))
}

fn corrupt(id: &str, message: String) -> StoreError {
    StoreError::Corrupt { id: id.to_string(), message }
}

/// The head's columns, as a commit and a create write them.
struct HeadColumns {
    status: &'static str,
    workflow: String,
    spec_hash: String,
    parent: Option<String>,
    resume_at: Option<String>,
    /// `resume_at` as an instant, for "due" (see [`listing`]).
    resume_due: Option<SystemTime>,
    head: Json<serde_json::Value>,
    created_at: i64,
    updated_at: i64,
}

impl HeadColumns {
    fn of(id: &str, head: &archmax_vm::session::Head) -> Result<HeadColumns, StoreError> {
        Ok(HeadColumns {
            status: head.status.as_str(),
            workflow: head.workflow.clone(),
            spec_hash: head.spec_hash.clone(),
            parent: head.parent.as_ref().map(ToString::to_string),
            resume_at: head.pending_input.as_ref().and_then(|input| input.resume_at.clone()),
            resume_due: resume_time_ms(head).and_then(listing::instant),
            head: Json(serde_json::to_value(head).map_err(|error| io_error(id, error.to_string()))?),
            created_at: number(id, head.created_at)?,
            updated_at: number(id, head.updated_at)?,
        })
    }

    /// The parameters for `status, workflow, spec_hash, parent, resume_at, resume_due,
    /// head`, in that order (every statement writing a head lists them so).
    fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [&self.status, &self.workflow, &self.spec_hash, &self.parent, &self.resume_at, &self.resume_due, &self.head]
    }
}

/// A session's state and how many steps follow its snapshot; `None` when absent.
async fn load(client: &tokio_postgres::Client, id: &str) -> Result<Option<(SessionState, usize)>, StoreError> {
    let Some(row) = client
        .query_opt("SELECT snapshot_seq, snapshot FROM archmax_sessions WHERE id = $1", &[&id])
        .await
        .map_err(db_error(id))?
    else {
        return Ok(None);
    };
    let snapshot_seq: i64 = row.get(0);
    // Steps are never removed, so a commit landing between the two reads only adds one.
    let steps = client
        .query(
            "SELECT seq, delta FROM archmax_steps WHERE session_id = $1 AND seq > $2 ORDER BY seq",
            &[&id, &snapshot_seq],
        )
        .await
        .map_err(db_error(id))?;
    let state = fold(id, snapshot_seq, row.get(1), steps.iter().map(|step| (step.get(0), step.get(1))))?;
    Ok(Some((state, steps.len())))
}

/// A session's state from its snapshot (taken at `snapshot_seq`) and the steps after it,
/// in order; [`StoreError::Corrupt`] when they do not decode or do not follow each other.
fn fold<'a>(
    id: &str,
    snapshot_seq: i64,
    snapshot: &[u8],
    steps: impl Iterator<Item = (i64, &'a [u8])>,
) -> Result<SessionState, StoreError> {
    let mut state: SessionState = serde_json::from_slice(snapshot)
        .map_err(|error| corrupt(id, format!("the snapshot is unreadable: {error}")))?;
    if state.id != id || i64::try_from(state.seq).ok() != Some(snapshot_seq) {
        return Err(corrupt(id, format!("the snapshot holds session `{}` at step {}", state.id, state.seq)));
    }
    for (seq, delta) in steps {
        let delta: Delta =
            serde_json::from_slice(delta).map_err(|error| corrupt(id, format!("step {seq} is unreadable: {error}")))?;
        if i64::try_from(delta.seq).ok() != Some(seq) || delta.seq != state.seq + 1 {
            return Err(corrupt(id, format!("step {seq} does not follow step {}", state.seq)));
        }
        state.apply(&delta);
    }
    Ok(state)
}

impl SessionStore for PgStore {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        Box::pin(async move {
            let id = state.id.to_string();
            let columns = HeadColumns::of(&id, &state.head)?;
            let snapshot = serde_json::to_vec(state).map_err(|error| io_error(&id, error.to_string()))?;
            let seq = number(&id, state.seq)?;
            let pool = self.inner.pool.clone();
            let task_id = id.clone();
            let client = self
                .inner
                .run(&id, async move {
                    let id = task_id;
                    let Some(client) = LockedClient::try_lock(&pool, lock_key(&id), &id).await? else {
                        let exists = pool
                            .get()
                            .await
                            .map_err(|error| io_error(&id, error.to_string()))?
                            .query_opt("SELECT 1 FROM archmax_sessions WHERE id = $1", &[&id])
                            .await
                            .map_err(db_error(&id))?
                            .is_some();
                        return Err(if exists { StoreError::Exists(id) } else { StoreError::Busy(id) });
                    };
                    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&id, &seq];
                    params.extend(columns.params());
                    params.extend([&snapshot as &(dyn ToSql + Sync), &columns.created_at, &columns.updated_at]);
                    let inserted = client
                        .client()?
                        .execute(
                            "INSERT INTO archmax_sessions (id, seq, status, workflow, spec_hash, parent, resume_at, \
                             resume_due, head, snapshot_seq, snapshot, created_at, updated_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $2, $10, $11, $12) \
                             ON CONFLICT (id) DO NOTHING",
                            &params,
                        )
                        .await
                        .map_err(db_error(&id))?;
                    if inserted == 0 {
                        client.release().await;
                        return Err(StoreError::Exists(id));
                    }
                    Ok(client)
                })
                .await?;
            let writer =
                PgWriter::new(Arc::clone(&self.inner), id.clone(), state.seq, client, self.inner.session_files(&id));
            Ok(Box::new(writer) as Box<dyn SessionWriter>)
        })
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            let (state, client) = self
                .inner
                .run(id, async move {
                    let id = task_id;
                    let Some(client) = LockedClient::try_lock(&pool, lock_key(&id), &id).await? else {
                        return Err(StoreError::Busy(id));
                    };
                    let loaded = load(client.client()?, &id).await;
                    let (state, steps) = match loaded {
                        Ok(Some(loaded)) => loaded,
                        Ok(None) => {
                            client.release().await;
                            return Err(StoreError::Missing(id));
                        }
                        Err(error) => {
                            client.release().await;
                            return Err(error);
                        }
                    };
                    if steps >= COMPACT_AFTER_STEPS {
                        let snapshot = serde_json::to_vec(&state).map_err(|error| io_error(&id, error.to_string()))?;
                        let seq = number(&id, state.seq)?;
                        client
                            .client()?
                            .execute(
                                "UPDATE archmax_sessions SET snapshot = $2, snapshot_seq = $3 WHERE id = $1 AND seq = $3",
                                &[&id, &snapshot, &seq],
                            )
                            .await
                            .map_err(db_error(&id))?;
                    }
                    Ok((state, client))
                })
                .await?;
            let writer =
                PgWriter::new(Arc::clone(&self.inner), id.to_string(), state.seq, client, self.inner.session_files(id));
            Ok((state, Box::new(writer) as Box<dyn SessionWriter>))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            self.inner
                .run(id, async move {
                    let client = pool.get().await.map_err(|error| io_error(&task_id, error.to_string()))?;
                    Ok(load(&client, &task_id).await?.map(|(state, _)| state))
                })
                .await
        })
    }

    fn list(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            self.inner
                .run("", async move {
                    let client = pool.get().await.map_err(|error| io_error("", error.to_string()))?;
                    let rows = client.query("SELECT id FROM archmax_sessions", &[]).await.map_err(db_error(""))?;
                    let mut ids: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
                    ids.sort();
                    Ok(ids)
                })
                .await
        })
    }

    fn list_page<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, ListPage> {
        let pool = self.inner.pool.clone();
        let query = query.clone();
        Box::pin(self.inner.run("", async move {
            let client = pool.get().await.map_err(|error| io_error("", error.to_string()))?;
            listing::page(&client, &query).await
        }))
    }

    fn files(&self, id: &str) -> Result<Arc<dyn Vfs>, StoreError> {
        SessionId::parse(id, &[]).map_err(|message| StoreError::Io {
            id: id.to_string(),
            source: io::Error::new(io::ErrorKind::InvalidInput, message),
        })?;
        Ok(Arc::new(PgFiles::new(Arc::clone(&self.inner), id.to_string(), self.inner.session_files(id))))
    }

    fn keep_spec<'a>(&'a self, spec: &'a PinnedSpec) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let hash = spec.spec_hash.clone();
            if !is_spec_hash(&hash) {
                return Err(StoreError::Spec { hash, message: "a spec hash is lowercase hexadecimal".to_string() });
            }
            let body = serde_json::to_value(spec)
                .map_err(|error| StoreError::Spec { hash: hash.clone(), message: error.to_string() })?;
            let pool = self.inner.pool.clone();
            self.inner
                .run(&spec.spec_hash, async move {
                    let failed = |message: String| StoreError::Spec { hash: hash.clone(), message };
                    let client = pool.get().await.map_err(|error| failed(error.to_string()))?;
                    client
                        .execute(
                            "INSERT INTO archmax_programs (spec_hash, spec) VALUES ($1, $2) \
                             ON CONFLICT (spec_hash) DO NOTHING",
                            &[&hash, &Json(&body)],
                        )
                        .await
                        .map_err(|error| failed(describe(&error)))?;
                    Ok(())
                })
                .await
        })
    }

    fn spec<'a>(&'a self, hash: &'a str) -> StoreFuture<'a, Option<PinnedSpec>> {
        Box::pin(async move {
            if !is_spec_hash(hash) {
                return Err(StoreError::Spec {
                    hash: hash.to_string(),
                    message: "a spec hash is lowercase hexadecimal".to_string(),
                });
            }
            let pool = self.inner.pool.clone();
            let hash = hash.to_string();
            self.inner
                .run("", async move {
                    let failed = |message: String| StoreError::Spec { hash: hash.clone(), message };
                    let client = pool.get().await.map_err(|error| failed(error.to_string()))?;
                    let Some(row) = client
                        .query_opt("SELECT spec FROM archmax_programs WHERE spec_hash = $1", &[&hash])
                        .await
                        .map_err(|error| failed(describe(&error)))?
                    else {
                        return Ok(None);
                    };
                    let Json(body): Json<serde_json::Value> =
                        row.try_get(0).map_err(|error| failed(describe(&error)))?;
                    let spec: PinnedSpec = serde_json::from_value(body).map_err(|error| failed(error.to_string()))?;
                    if spec.spec_hash != hash {
                        return Err(failed(format!("the row holds the spec of `{}`", spec.spec_hash)));
                    }
                    Ok(Some(spec))
                })
                .await
        })
    }

    /// Removes the session's row (its steps go with it) and its files in one transaction,
    /// under the session's advisory lock taken for the transaction: a writer holding the
    /// lock makes this `Busy` and nothing is removed.
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            self.inner
                .run(id, async move {
                    let id = task_id.as_str();
                    let mut client = pool.get().await.map_err(|error| io_error(id, error.to_string()))?;
                    let transaction = client.transaction().await.map_err(db_error(id))?;
                    let locked: bool = transaction
                        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&lock_key(id)])
                        .await
                        .map_err(db_error(id))?
                        .get(0);
                    if !locked {
                        return Err(StoreError::Busy(id.to_string()));
                    }
                    transaction
                        .execute("DELETE FROM archmax_files WHERE session_id = $1", &[&id])
                        .await
                        .map_err(db_error(id))?;
                    let removed = transaction
                        .execute("DELETE FROM archmax_sessions WHERE id = $1", &[&id])
                        .await
                        .map_err(db_error(id))?;
                    transaction.commit().await.map_err(db_error(id))?;
                    Ok(removed > 0)
                })
                .await
        })
    }

    fn claim_record<'a>(&'a self, record: &'a Record, now_ms: u64) -> StoreFuture<'a, bool> {
        let work = records::claim(self.inner.pool.clone(), record.clone(), now_ms);
        Box::pin(self.inner.run("records", work))
    }

    fn read_record<'a>(&'a self, kind: RecordKind, key: &'a str, now_ms: u64) -> StoreFuture<'a, Option<Vec<u8>>> {
        let work = records::read(self.inner.pool.clone(), kind, key.to_string(), now_ms);
        Box::pin(self.inner.run("records", work))
    }

    fn remove_record<'a>(&'a self, kind: RecordKind, key: &'a str) -> StoreFuture<'a, bool> {
        let work = records::remove(self.inner.pool.clone(), kind, key.to_string());
        Box::pin(self.inner.run("records", work))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_differ_per_session_and_are_stable() {
        assert_eq!(lock_key("a"), lock_key("a"));
        assert_ne!(lock_key("a"), lock_key("b"));
        assert_ne!(lock_key("a"), lock_key("a~1"));
    }
}
