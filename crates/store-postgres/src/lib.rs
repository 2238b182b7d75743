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
//! the server's certificate and name. A target without a password takes one from
//! libpq's other sources: `PGPASSWORD`, then the password file (`passfile=`,
//! `PGPASSFILE`, `~/.pgpass`; [`password`]).
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
//! step's announcement to listeners follows once the commit returned, sent by the
//! store's announcer ([`announce`]) with every other announcement that gathered meanwhile:
//! PostgreSQL commits transactions that `NOTIFY` one at a time, so inside the step's
//! transaction, or in one of its own per step, it would serialize every commit's flush.
//!
//! **One writer per session** is a lease on the session's row ([`lease`]): opening takes
//! it, every commit names its fencing token and renews it, a task renews every lease the
//! store holds, and dropping the writer gives it back. A second writer anywhere is
//! [`StoreError::Busy`]; a runner that dies stops renewing, so one lease term
//! ([`PgOptions::lease_term`]) later another runner can open the session and resume from
//! its last committed step, and the dead runner's writer, should it wake, is fenced off
//! ([`StoreError::TakenOver`]). No connection is held between statements: a bounded pool
//! serves any number of open sessions, and every statement is sent unnamed with its
//! parameter types, so a pooler in transaction mode (PgBouncer) can sit in between.
//! [`SessionStore::claim_chores`] hands due sessions and cut turns out to one runner of a
//! fleet each (`FOR UPDATE SKIP LOCKED`, a bounded batch).
//!
//! **Durability** is the server's `synchronous_commit`: connecting refuses a server (or a
//! role) set to `off`, which could lose steps it reported committed. No startup option is
//! sent to force it, since poolers refuse startup options.
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
//! **Other runners' steps.** Every commit is announced on `archmax_steps` as `<id> <seq>`;
//! [`PgStore::subscribe`] hands out a [`StepFeed`] of them.
//!
//! **Listing** ([`listing`]): [`SessionStore::list_page`] is one keyset query on the
//! sessions' columns (`id > cursor`, the filters, `ORDER BY id LIMIT n + 1`), ids in byte
//! order (the column's collation is `"C"`); [`PgStore::due`] lists the sessions whose
//! `resumeAt` has come. Resume times are kept as instants too (`resume_due`), so "due" is a
//! time comparison; indexes serve the workflow, status and due filters.

mod announce;
mod events;
mod failures;
mod files;
pub mod lease;
mod listing;
mod loading;
mod notify;
mod password;
mod records;
pub mod schema;
mod target;
#[cfg(any(test, feature = "test-support"))]
pub mod test_cluster;
pub mod tls;
mod writer;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::{Json, ToSql, Type};
use tokio_postgres_rustls::MakeRustlsConnect;

use archmax_stdlib::limits::Limits;
use archmax_stdlib::vfs::Vfs;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::records::{Record, RecordKind};
use archmax_vm::session::spec::{PinnedSpec, is_spec_hash};
use archmax_vm::session::store::{Chore, ListPage, ListQuery, ParkedSummary, StoreFuture, resume_time_ms};
use archmax_vm::session::{SessionState, SessionStore, SessionWriter, StoreError};

pub use events::CHANNEL as EVENTS_CHANNEL;
pub(crate) use failures::{corrupt, db_error, describe, io_error, number, pool_error};
use files::{PgFiles, SessionFiles};
use lease::{Claim, Leases};
use loading::{load, take_and_load};
pub use notify::{CHANNEL, CommittedStep, StepFeed};
use writer::PgWriter;

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
    #[error(
        "the PostgreSQL server commits without waiting for its disk (synchronous_commit = {0}), so a crash could lose steps it reported committed; set it to `on` for archmax's role (ALTER ROLE … SET synchronous_commit = on) or in postgresql.conf"
    )]
    NotDurable(String),
}

/// The pool [`PgOptions::default`] opens. Measured with the load bench on two cores
/// (`LOAD_PG_CONNECTIONS`): 16 connections gave about a fifth more turns a second than 96
/// at 32 and 64 clients, and 64 clients no fewer than 32; 8 gave slightly fewer than 16.
pub const DEFAULT_CONNECTIONS: u16 = 16;

/// How a [`PgStore`] runs.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// Most connections the store opens. A connection is borrowed for one statement (or
    /// one short transaction) at a time and open sessions hold none, so this bounds how
    /// many statements run at once, not how many sessions are open; the server's
    /// `max_connections` (or the pooler's) must leave room for every runner's pool.
    ///
    /// More is not faster: past a few statements per core of the database server, its
    /// backends only take turns on the same cores (and each snapshot scans them all), so
    /// the default, [`DEFAULT_CONNECTIONS`], queues the rest here instead.
    pub max_connections: usize,
    /// How long a writer's lease on its session lasts unless renewed (at least
    /// [`lease::SHORTEST_TERM`]): a runner that dies mid-turn is taken over this long
    /// after its last renewal. Renewed three times per term.
    pub lease_term: Duration,
    /// How many of each root session's newest events the store keeps for streams
    /// ([`archmax_vm::session::event_log`]); older ones are pruned when a writer closes.
    pub events_kept: u64,
    /// Where the connections that `LISTEN` for other runners' commits go, when not to the
    /// store's target: a pooler in transaction mode cannot listen, so behind PgBouncer this
    /// names the server itself (or a session-mode pool). Same forms as the target.
    pub listen_target: Option<String>,
    /// Whether the target is a pooler in transaction mode (PgBouncer), which may send each
    /// statement to another server connection: then no statement is prepared for reuse
    /// (each is sent unnamed with its types). Otherwise a turn's statements (creation,
    /// commit, close) are prepared once per connection, which saves the server their parse
    /// and plan every time.
    pub behind_pooler: bool,
    /// The caps a session's files are held to.
    pub limits: Limits,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: usize::from(DEFAULT_CONNECTIONS),
            lease_term: lease::DEFAULT_TERM,
            events_kept: 10_000,
            listen_target: None,
            behind_pooler: false,
            limits: Limits::default(),
        }
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
    /// How to open a connection that listens (a [`StepFeed`], an event feed).
    listen_config: tokio_postgres::Config,
    /// The TLS the listen target asks for.
    listen_tls: MakeRustlsConnect,
    limits: Limits,
    /// The leases this store holds, renewed by [`lease::keep_renewed`].
    leases: Leases,
    /// Events waiting for their root session's next commit ([`events`]).
    staged_events: events::StagedEvents,
    /// [`PgOptions::events_kept`], as the statements take it.
    events_kept: i64,
    /// [`PgOptions::behind_pooler`].
    behind_pooler: bool,
    /// The staged files of sessions this store value has handed out, by id.
    open: Mutex<HashMap<String, Weak<SessionFiles>>>,
    /// Sends the `NOTIFY`s of committed steps and written events, in batches.
    announcer: announce::Announcer,
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

    /// Whether a writer of a session of root `root` is open in this store value.
    fn has_open_writer(&self, root: &str) -> bool {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).iter().any(|(id, files)| {
            events::root_of(id) == root && files.upgrade().is_some_and(|files| files.writer_is_open())
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

        let target::Driver { config, tls, facts } = target::driver_config(target)?;
        let (listen_config, listen_tls) = match &options.listen_target {
            Some(listen) => {
                let listen = target::driver_config(listen)?;
                (listen.config, listen.tls)
            }
            None => (config.clone(), tls.clone()),
        };
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
        let announcer = announce::Announcer::start(&handle, pool.clone());
        let inner = Arc::new(Inner {
            handle,
            pool: pool.clone(),
            announcer,
            listen_config,
            listen_tls,
            limits: options.limits,
            leases: Leases::new(options.lease_term),
            staged_events: events::StagedEvents::default(),
            events_kept: i64::try_from(options.events_kept).unwrap_or(i64::MAX),
            behind_pooler: options.behind_pooler,
            open: Mutex::new(HashMap::new()),
        });
        drop(inner.handle.spawn(lease::keep_renewed(Arc::downgrade(&inner))));
        let migrated = inner.handle.spawn(async move {
            let mut object =
                pool.get().await.map_err(|error| ConnectError::Connect(target::first_connection(&error, &facts)))?;
            let client: &mut tokio_postgres::Client = &mut object;
            schema::check_durable(client).await?;
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
        let config = self.inner.listen_config.clone();
        let tls = self.inner.listen_tls.clone();
        self.inner.run("", notify::listen(config, tls, CHANNEL)).await.map(StepFeed)
    }
}

/// This machine's name as a person reading the server's tables meets it (printable ASCII
/// only), when it has one: in a lease's owner and the connections' application name.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().chars().filter(|c| c.is_ascii_graphic()).collect::<String>())
        .filter(|host| !host.is_empty())
}

/// Runs one of a turn's statements (a creation, a commit, a close): prepared once per
/// connection and reused, which spares the server its parse and plan every time; or,
/// behind a pooler in transaction mode ([`PgOptions::behind_pooler`]), which may route the
/// next statement to another server connection, sent unnamed with its types.
async fn run_statement(
    client: &deadpool_postgres::Object,
    pooled: bool,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    if pooled {
        return client.query_typed(sql, params).await;
    }
    let types: Vec<Type> = params.iter().map(|(_, kind)| kind.clone()).collect();
    let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(value, _)| *value).collect();
    let statement = client.prepare_typed_cached(sql, &types).await?;
    match client.query(&statement, &values).await {
        // The server no longer knows the statement (a pooler this store was not told of
        // moved the statement to another connection, or something ran DISCARD) or its
        // plan may not change shape: the connection's cache is stale. It is emptied, so
        // later statements prepare afresh, and this one is sent unnamed once. Either
        // error is raised before the statement runs, so nothing was written twice.
        Err(error) if stale_statement(&error) => {
            client.statement_cache.clear();
            client.query_typed(sql, params).await
        }
        answer => answer,
    }
}

/// Whether `error` says a prepared statement is gone or its cached plan can no longer
/// be used (SQLSTATE 26000, or 0A000 "cached plan must not change result type").
fn stale_statement(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    error.code() == Some(&SqlState::INVALID_SQL_STATEMENT_NAME)
        || (error.code() == Some(&SqlState::FEATURE_NOT_SUPPORTED)
            && error.as_db_error().is_some_and(|db| db.message().contains("cached plan")))
}

/// `value` with every NUL in its strings and member names made U+FFFD: PostgreSQL's
/// `jsonb` refuses `\u0000`, and a model may put one in what the head holds (its todos,
/// the title), which would refuse every commit of the session. The `head` column only
/// serves filters and counts; the session itself is read back from the snapshot and the
/// steps, which keep every character.
fn without_nul(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let clean = |text: String| if text.contains('\0') { text.replace('\0', "\u{FFFD}") } else { text };
    match value {
        Value::String(text) => Value::String(clean(text)),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nul).collect()),
        Value::Object(members) => {
            Value::Object(members.into_iter().map(|(name, member)| (clean(name), without_nul(member))).collect())
        }
        other => other,
    }
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
            head: Json(without_nul(serde_json::to_value(head).map_err(|error| io_error(id, error.to_string()))?)),
            created_at: number(id, head.created_at)?,
            updated_at: number(id, head.updated_at)?,
        })
    }

    /// The parameters for `status, workflow, spec_hash, parent, resume_at, resume_due,
    /// head`, in that order (every statement writing a head lists them so), typed as
    /// [`HEAD_TYPES`].
    fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [&self.status, &self.workflow, &self.spec_hash, &self.parent, &self.resume_at, &self.resume_due, &self.head]
    }
}

/// The types of [`HeadColumns::params`].
const HEAD_TYPES: [Type; 7] =
    [Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::TEXT, Type::TIMESTAMPTZ, Type::JSONB];

impl SessionStore for PgStore {
    fn create<'a>(&'a self, state: &'a SessionState) -> StoreFuture<'a, Box<dyn SessionWriter>> {
        Box::pin(async move {
            let id = state.id.to_string();
            let columns = HeadColumns::of(&id, &state.head)?;
            let snapshot = serde_json::to_vec(state).map_err(|error| io_error(&id, error.to_string()))?;
            let seq = number(&id, state.seq)?;
            let pool = self.inner.pool.clone();
            let (owner, term) = (self.inner.leases.owner().to_string(), self.inner.leases.term_secs());
            let pooled = self.inner.behind_pooler;
            let task_id = id.clone();
            let token = self
                .inner
                .run(&id, async move {
                    let id = task_id;
                    let client = pool.get().await.map_err(pool_error(&id))?;
                    let mut values: Vec<&(dyn ToSql + Sync)> = vec![&id, &seq];
                    values.extend(columns.params());
                    values.extend([
                        &snapshot as &(dyn ToSql + Sync),
                        &columns.created_at,
                        &columns.updated_at,
                        &owner,
                        &term,
                    ]);
                    let types = [Type::TEXT, Type::INT8].into_iter().chain(HEAD_TYPES).chain([
                        Type::BYTEA,
                        Type::INT8,
                        Type::INT8,
                        Type::TEXT,
                        Type::FLOAT8,
                    ]);
                    let params: Vec<(&(dyn ToSql + Sync), Type)> = values.into_iter().zip(types).collect();
                    let inserted = run_statement(
                        &client,
                        pooled,
                        "INSERT INTO archmax_sessions (id, seq, status, workflow, spec_hash, parent, resume_at, \
                             resume_due, head, snapshot_seq, snapshot, created_at, updated_at, \
                             lease_owner, lease_token, lease_expires) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $2, $10, $11, $12, \
                             $13, nextval('archmax_lease_tokens'), now() + make_interval(secs => $14)) \
                             ON CONFLICT (id) DO NOTHING RETURNING lease_token",
                        &params,
                    )
                    .await
                    .map_err(db_error(&id))?;
                    inserted.first().map(|row| row.get::<_, i64>(0)).ok_or(StoreError::Exists(id))
                })
                .await?;
            self.inner.leases.hold(&id, token);
            let writer =
                PgWriter::new(Arc::clone(&self.inner), id.clone(), state.seq, token, self.inner.session_files(&id));
            Ok(Box::new(writer) as Box<dyn SessionWriter>)
        })
    }

    fn open<'a>(&'a self, id: &'a str) -> StoreFuture<'a, (SessionState, Box<dyn SessionWriter>)> {
        Box::pin(async move {
            let inner = Arc::clone(&self.inner);
            let task_id = id.to_string();
            let (state, token) = self.inner.run(id, async move { take_and_load(&inner, &task_id).await }).await?;
            // Renewed from here: a caller that gave up before this point leaves a lease
            // that runs out by itself, not one renewed for nobody.
            self.inner.leases.hold(id, token);
            let writer =
                PgWriter::new(Arc::clone(&self.inner), id.to_string(), state.seq, token, self.inner.session_files(id));
            Ok((state, Box::new(writer) as Box<dyn SessionWriter>))
        })
    }

    fn read<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionState>> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            self.inner
                .run(id, async move {
                    let client = pool.get().await.map_err(pool_error(&task_id))?;
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
                    let client = pool.get().await.map_err(pool_error(""))?;
                    let rows =
                        client.query_typed("SELECT id FROM archmax_sessions", &[]).await.map_err(db_error(""))?;
                    let mut ids: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
                    ids.sort();
                    Ok(ids)
                })
                .await
        })
    }

    fn is_held<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<bool>> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            self.inner.run(id, async move { lease::is_held(&pool, &task_id).await }).await
        })
    }

    fn list_page<'a>(&'a self, query: &'a ListQuery) -> StoreFuture<'a, ListPage> {
        let pool = self.inner.pool.clone();
        let query = query.clone();
        Box::pin(self.inner.run("", async move {
            let client = pool.get().await.map_err(pool_error(""))?;
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
                        .execute_typed(
                            "INSERT INTO archmax_programs (spec_hash, spec) VALUES ($1, $2) \
                             ON CONFLICT (spec_hash) DO NOTHING",
                            &[(&hash, Type::TEXT), (&Json(&body), Type::JSONB)],
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
                        .query_typed_opt(
                            "SELECT spec FROM archmax_programs WHERE spec_hash = $1",
                            &[(&hash, Type::TEXT)],
                        )
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
    /// with the row locked: a session whose lease is held and not run out is `Busy` and
    /// nothing is removed.
    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let pool = self.inner.pool.clone();
            let task_id = id.to_string();
            self.inner
                .run(id, async move {
                    let id = task_id.as_str();
                    let mut client = pool.get().await.map_err(pool_error(id))?;
                    let transaction = client.transaction().await.map_err(db_error(id))?;
                    let held = transaction
                        .query_typed_opt(
                            "SELECT lease_owner IS NOT NULL AND lease_expires >= now() FROM archmax_sessions \
                             WHERE id = $1 FOR UPDATE",
                            &[(&id, Type::TEXT)],
                        )
                        .await
                        .map_err(db_error(id))?;
                    if held.is_some_and(|row| row.get::<_, bool>(0)) {
                        return Err(StoreError::Busy(id.to_string()));
                    }
                    transaction
                        .execute_typed("DELETE FROM archmax_files WHERE session_id = $1", &[(&id, Type::TEXT)])
                        .await
                        .map_err(db_error(id))?;
                    // A root session's events go with it (a sub-workflow's are its root's).
                    // The counter row first: a commit numbering events waits on its lock.
                    for table in ["archmax_event_heads", "archmax_events"] {
                        transaction
                            .execute_typed(&format!("DELETE FROM {table} WHERE root = $1"), &[(&id, Type::TEXT)])
                            .await
                            .map_err(db_error(id))?;
                    }
                    let removed = transaction
                        .execute_typed("DELETE FROM archmax_sessions WHERE id = $1", &[(&id, Type::TEXT)])
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

    fn claim_chores<'a>(
        &'a self,
        chore: Chore,
        runnable: &'a [(String, String)],
        limit: usize,
    ) -> StoreFuture<'a, Option<Vec<String>>> {
        let what = match chore {
            Chore::Due { by_ms } => Claim::Due(listing::bound(by_ms)),
            Chore::Stranded => Claim::Stranded,
        };
        let inner = Arc::clone(&self.inner);
        let runnable = runnable.to_vec();
        Box::pin(self.inner.run("", async move {
            lease::claim(&inner.pool, inner.leases.term_secs(), what, &runnable, limit).await.map(Some)
        }))
    }

    fn event_log(&self) -> Option<Arc<dyn archmax_vm::session::event_log::EventLog>> {
        Some(Arc::new(events::PgEventLog { inner: Arc::clone(&self.inner) }))
    }

    /// One grouped query, whatever the number of parked sessions: `max_pages` bounds nothing.
    fn parked_summary(&self, _max_pages: usize) -> StoreFuture<'_, ParkedSummary> {
        let pool = self.inner.pool.clone();
        Box::pin(self.inner.run("", async move {
            let client = pool.get().await.map_err(pool_error(""))?;
            listing::parked_summary(&client).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection whose server-side statements went away behind the cache's back (what
    /// `DISCARD`, `DEALLOCATE` or an unannounced pooler does) still runs a turn's
    /// statement: sent once unnamed, the cache emptied, and prepared afresh after.
    #[test]
    fn a_statement_the_server_forgot_is_sent_again_and_the_stale_cache_dropped() {
        let cluster = test_cluster::TestCluster::require();
        let target = cluster.database("stale-statements").expect("a database");
        let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
        executor.block_on(async {
            let config: tokio_postgres::Config = target.parse().expect("the target parses");
            let manager = Manager::from_config(
                config,
                tokio_postgres::NoTls,
                ManagerConfig { recycling_method: RecyclingMethod::Fast },
            );
            let pool = Pool::builder(manager).max_size(1).build().expect("a pool");
            let client = pool.get().await.expect("a connection");
            let sql = "SELECT $1::int8 + 1";
            let seven = 7_i64;
            let params: [(&(dyn ToSql + Sync), Type); 1] = [(&seven, Type::INT8)];
            let answer = |rows: Vec<tokio_postgres::Row>| rows.first().map(|row| row.get::<_, i64>(0));
            assert_eq!(answer(run_statement(&client, false, sql, &params).await.expect("prepared")), Some(8));
            assert_eq!(client.statement_cache.size(), 1);
            client.batch_execute("DEALLOCATE ALL").await.expect("the server forgets");
            let again = run_statement(&client, false, sql, &params).await;
            assert_eq!(again.map(answer).map_err(|error| error.to_string()), Ok(Some(8)));
            assert_eq!(client.statement_cache.size(), 0, "the stale statement is gone from the cache");
            assert_eq!(answer(run_statement(&client, false, sql, &params).await.expect("prepared afresh")), Some(8));
            assert_eq!(client.statement_cache.size(), 1);
        });
    }
}
