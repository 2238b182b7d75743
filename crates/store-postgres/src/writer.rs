//! The writer of one open session: its lease and the one-statement commit.
//!
//! The one thing to know: a writer holds no connection. It holds the session's lease
//! ([`crate::lease`]) by its fencing token; each commit borrows a pooled connection for
//! its one round trip, names the token, and renews the lease. Dropping the writer gives
//! the lease back, so the session can be opened again at once; a writer that cannot give
//! it back (the database is unreachable) leaves a lease that runs out by itself.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use archmax_vm::session::store::StoreFuture;
use archmax_vm::session::{Delta, SessionWriter, StoreError};

use crate::announce::Announcement;
use crate::events::{self, root_of};
use crate::files::SessionFiles;
use crate::{HeadColumns, Inner, db_error, io_error, number, pool_error, run_statement};

/// How long dropping a writer waits for its lease to be given back.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// The one statement of a commit: the head moves from `$2` to `$3` only if it is still
/// at `$2` and lease token `$16` still holds the session (renewing it for `$17` seconds),
/// and the step row, the step's files and the events `$19` staged for its root session
/// `$18` ([`crate::events`]) are written only if it moved. Answers whether the step was
/// written and, when events were, the root's last event id.
const COMMIT: &str = "WITH head AS (
        UPDATE archmax_sessions
        SET seq = $3, status = $4, workflow = $5, spec_hash = $6, parent = $7, resume_at = $8, resume_due = $9,
            head = $10, updated_at = $11, lease_expires = now() + make_interval(secs => $17)
        WHERE id = $1 AND seq = $2 AND lease_token = $16
        RETURNING id
    ), step AS (
        INSERT INTO archmax_steps (session_id, seq, delta) SELECT id, $3, $12 FROM head RETURNING seq
    ), written AS (
        INSERT INTO archmax_files (session_id, path, size, content)
        SELECT head.id, file.path, octet_length(file.content), file.content
        FROM head, unnest($13::text[], $14::bytea[]) AS file (path, content)
        ON CONFLICT (session_id, path) DO UPDATE SET size = EXCLUDED.size, content = EXCLUDED.content
        RETURNING 1
    ), removed AS (
        DELETE FROM archmax_files
        WHERE session_id = (SELECT id FROM head) AND path = ANY($15::text[])
        RETURNING 1
    ), counter AS (
        INSERT INTO archmax_event_heads (root, last)
        SELECT $18, cardinality($19::text[]) FROM head WHERE cardinality($19::text[]) > 0
        ON CONFLICT (root) DO UPDATE SET last = archmax_event_heads.last + EXCLUDED.last
        RETURNING last
    ), logged AS (
        INSERT INTO archmax_events (root, id, body)
        SELECT $18, counter.last - cardinality($19::text[]) + event.ordinality, event.body
        FROM counter, unnest($19::text[]) WITH ORDINALITY AS event (body, ordinality)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM step)";

/// The types of [`COMMIT`]'s parameters, in order.
const COMMIT_TYPES: [Type; 19] = [
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    // The head's columns (`HEAD_TYPES`).
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TIMESTAMPTZ,
    Type::JSONB,
    Type::INT8,
    Type::BYTEA,
    Type::TEXT_ARRAY,
    Type::BYTEA_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8,
    Type::FLOAT8,
    Type::TEXT,
    Type::TEXT_ARRAY,
];

/// Commits steps to one session of a [`crate::PgStore`]; gives its lease back when dropped.
pub(crate) struct PgWriter {
    inner: Arc<Inner>,
    id: String,
    last_seq: u64,
    /// The fencing token of this writer's lease.
    token: i64,
    files: Arc<SessionFiles>,
}

impl PgWriter {
    /// The writer of session `id`, whose lease `token` this store took (and already
    /// renews).
    pub(crate) fn new(inner: Arc<Inner>, id: String, last_seq: u64, token: i64, files: Arc<SessionFiles>) -> PgWriter {
        files.writer_opened();
        PgWriter { inner, id, last_seq, token, files }
    }

    async fn commit_step(&mut self, delta: &Delta) -> Result<(), StoreError> {
        let id = self.id.clone();
        if delta.seq != self.last_seq.wrapping_add(1) {
            return Err(StoreError::Conflict { id, expected: delta.seq.saturating_sub(1), found: self.last_seq });
        }
        let columns = HeadColumns::of(&id, &delta.head)?;
        let body = serde_json::to_vec(delta).map_err(|error| io_error(&id, error.to_string()))?;
        let (previous, seq) = (number(&id, self.last_seq)?, number(&id, delta.seq)?);
        let staged = self.files.take_staged();
        let (mut paths, mut contents, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for (path, content) in &staged {
            match content {
                Some(bytes) => {
                    paths.push(path.clone());
                    contents.push(bytes.clone());
                }
                None => removed.push(path.clone()),
            }
        }
        let root = root_of(&id).to_string();
        let logged = self.inner.staged_events.take(&root);
        let carried_events = !logged.is_empty();
        let (expected, token) = (self.last_seq, self.token);
        let term = self.inner.leases.term_secs();
        let pooled = self.inner.behind_pooler;
        let pool = self.inner.pool.clone();
        let task_id = id.clone();
        let (task_root, task_logged) = (root.clone(), logged.clone());
        let result = self
            .inner
            .run(&id, async move {
                let id = task_id;
                let object = pool.get().await.map_err(pool_error(&id))?;
                let mut values: Vec<&(dyn ToSql + Sync)> = vec![&id, &previous, &seq];
                values.extend(columns.params());
                values.extend([
                    &columns.updated_at as &(dyn ToSql + Sync),
                    &body,
                    &paths,
                    &contents,
                    &removed,
                    &token,
                    &term,
                    &task_root,
                    &task_logged,
                ]);
                // The step is announced by the store's announcer once this returns
                // (`announce.rs`), never by this transaction.
                let params: Vec<(&(dyn ToSql + Sync), Type)> = values.into_iter().zip(COMMIT_TYPES).collect();
                let rows = run_statement(&object, pooled, COMMIT, &params).await;
                match rows {
                    Ok(rows) if rows.first().is_some_and(|row| row.get::<_, i64>(0) == 1) => Ok(()),
                    Ok(_) => Err(refused(&object, &id, expected, token).await),
                    Err(error)
                        if error.code() == Some(&SqlState::UNIQUE_VIOLATION)
                            && error.as_db_error().and_then(|db| db.constraint()) == Some("archmax_steps_pkey") =>
                    {
                        Err(StoreError::Conflict { id: id.clone(), expected, found: expected + 1 })
                    }
                    Err(error) => Err(db_error(&id)(error)),
                }
            })
            .await;
        if let Err(error) = &result {
            self.files.restore_staged(staged);
            // Events go back only when the commit was surely refused: after an I/O error the
            // step (and the events with it) may have been written.
            if matches!(error, StoreError::Conflict { .. } | StoreError::TakenOver(_) | StoreError::Missing(_)) {
                self.inner.staged_events.restore(&root, logged);
            }
        }
        result?;
        self.last_seq = delta.seq;
        let announcer = &self.inner.announcer;
        announcer.announce(Announcement::Step { id: self.id.clone(), seq: delta.seq });
        if carried_events {
            announcer.announce(Announcement::Events { root });
        }
        Ok(())
    }
}

/// Why a commit changed no row: the session is gone, another lease holds it, or it moved
/// past `expected`.
async fn refused(client: &tokio_postgres::Client, id: &str, expected: u64, token: i64) -> StoreError {
    let found = client
        .query_typed_opt("SELECT seq, lease_token FROM archmax_sessions WHERE id = $1", &[(&id, Type::TEXT)])
        .await;
    match found {
        Err(error) => db_error(id)(error),
        Ok(None) => StoreError::Missing(id.to_string()),
        Ok(Some(row)) if row.get::<_, i64>(1) != token => StoreError::TakenOver(id.to_string()),
        Ok(Some(row)) => StoreError::Conflict {
            id: id.to_string(),
            expected,
            found: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
        },
    }
}

impl SessionWriter for PgWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(self.commit_step(delta))
    }
}

impl Drop for PgWriter {
    /// Gives the lease back before returning, so the session can be opened again at once
    /// (as with the other stores), writing the root's events staged since the last
    /// commit with it. The wait is bounded: past it the release still finishes, or the
    /// lease runs out by itself.
    fn drop(&mut self) {
        self.files.writer_closed();
        self.inner.leases.forget(&self.id, self.token);
        let logged = self.inner.staged_events.take(root_of(&self.id));
        let (inner, id, token) = (Arc::clone(&self.inner), self.id.clone(), self.token);
        let released =
            self.inner.wait(async move { events::close(&inner, &id, token, logged).await }, Some(RELEASE_WAIT));
        if let Some(Err(error)) = released {
            tracing::warn!(session = self.id.as_str(), "the session's lease could not be given back: {error}");
        }
    }
}
