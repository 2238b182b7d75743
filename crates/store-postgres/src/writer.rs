//! The writer of one open session: its lock's connection and the one-statement commit.
//!
//! The one thing to know: the advisory lock lives on the writer's connection, so that
//! connection must never go back to the pool still locked. [`LockedClient`] returns it
//! only after `pg_advisory_unlock` answered; dropped any other way (a cancelled commit,
//! a failed unlock, a process shutting down) it closes the connection, and the server
//! releases the lock with it.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use archmax_vm::session::store::StoreFuture;
use archmax_vm::session::{Delta, SessionWriter, StoreError};

use crate::files::SessionFiles;
use crate::{HeadColumns, Inner, db_error, io_error, number};

/// How long dropping a writer waits for its unlock.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// A pooled connection holding a session's advisory lock.
pub(crate) struct LockedClient {
    object: Option<Object>,
    key: i64,
}

impl LockedClient {
    /// A connection holding the lock `key`, or `None` when another connection holds it.
    pub(crate) async fn try_lock(pool: &Pool, key: i64, id: &str) -> Result<Option<LockedClient>, StoreError> {
        let object = pool.get().await.map_err(|error| io_error(id, error.to_string()))?;
        let row = object.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(db_error(id))?;
        Ok(row.get::<_, bool>(0).then(|| LockedClient { object: Some(object), key }))
    }

    pub(crate) fn client(&self) -> Result<&Object, StoreError> {
        self.object.as_ref().ok_or_else(|| io_error("", "the writer's connection is gone".to_string()))
    }

    /// Unlocks and returns the connection to the pool; closes it when the unlock fails.
    pub(crate) async fn release(mut self) {
        if let Some(object) = self.object.take() {
            let unlocked = object.query_one("SELECT pg_advisory_unlock($1)", &[&self.key]).await;
            if !matches!(unlocked, Ok(row) if row.get::<_, bool>(0)) {
                drop(Object::take(object));
            }
        }
    }
}

impl Drop for LockedClient {
    /// Not released: close the connection, which releases the lock server-side.
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            drop(Object::take(object));
        }
    }
}

/// The one statement of a commit: the head moves from `$2` to `$3` only if it is still
/// at `$2`, and the step row and the step's files are written only if it moved.
const COMMIT: &str = "WITH head AS (
        UPDATE archmax_sessions
        SET seq = $3, status = $4, workflow = $5, spec_hash = $6, parent = $7, resume_at = $8, resume_due = $9,
            head = $10, updated_at = $11
        WHERE id = $1 AND seq = $2
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
    )
    SELECT (SELECT count(*) FROM step)";

/// The announcement of a committed step on the `archmax_steps` channel, as `<id> <seq>`:
/// sent right behind [`COMMIT`] on the same connection (pipelined, no extra wait) as a
/// transaction of its own, so it runs only once the step is durable, and says nothing
/// unless the session holds that step. Inside the step's transaction it would serialize
/// every session's commit: PostgreSQL holds one lock for all notifying transactions
/// until their commit record is flushed, which undoes group commit (measured with
/// pgbench, 64 clients: about 700 commits a second with the notification inside, 6,000
/// and more without).
const ANNOUNCE: &str = "SELECT pg_notify('archmax_steps', id || ' ' || seq::text) FROM archmax_sessions \
     WHERE id = $1 AND seq = $2";

/// Commits steps to one session of a [`crate::PgStore`]; unlocks it when dropped.
pub(crate) struct PgWriter {
    inner: Arc<Inner>,
    id: String,
    last_seq: u64,
    client: Option<LockedClient>,
    files: Arc<SessionFiles>,
}

impl PgWriter {
    pub(crate) fn new(
        inner: Arc<Inner>,
        id: String,
        last_seq: u64,
        client: LockedClient,
        files: Arc<SessionFiles>,
    ) -> PgWriter {
        files.writer_opened();
        PgWriter { inner, id, last_seq, client: Some(client), files }
    }

    async fn commit_step(&mut self, delta: &Delta) -> Result<(), StoreError> {
        let id = self.id.clone();
        if delta.seq != self.last_seq.wrapping_add(1) {
            return Err(StoreError::Conflict { id, expected: delta.seq.saturating_sub(1), found: self.last_seq });
        }
        let columns = HeadColumns::of(&id, &delta.head)?;
        let body = serde_json::to_vec(delta).map_err(|error| io_error(&id, error.to_string()))?;
        let (previous, seq) = (number(&id, self.last_seq)?, number(&id, delta.seq)?);
        let client = self.client.take().ok_or_else(|| {
            io_error(&id, "this writer lost its connection in an earlier commit; open the session again".to_string())
        })?;
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
        let expected = self.last_seq;
        let task_id = id.clone();
        let outcome = self
            .inner
            .run(&id, async move {
                let id = task_id;
                let result = async {
                    let object = client.client()?;
                    let statement = object.prepare_cached(COMMIT).await.map_err(db_error(&id))?;
                    let announce = object.prepare_cached(ANNOUNCE).await.map_err(db_error(&id))?;
                    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&id, &previous, &seq];
                    params.extend(columns.params());
                    params.extend([&columns.updated_at as &(dyn ToSql + Sync), &body, &paths, &contents, &removed]);
                    // Both are sent at once; the server runs them in order.
                    let step: [&(dyn ToSql + Sync); 2] = [&id, &seq];
                    let (row, announced) =
                        tokio::join!(object.query_one(&statement, &params), object.execute(&announce, &step));
                    // The step's fate is the commit's answer; an announcement that failed loses
                    // no step, and listeners learn of it with the session's next one.
                    drop(announced);
                    match row {
                        Ok(row) if row.get::<_, i64>(0) == 1 => Ok(()),
                        Ok(_) => {
                            let found = object
                                .query_opt("SELECT seq FROM archmax_sessions WHERE id = $1", &[&id])
                                .await
                                .map_err(db_error(&id))?;
                            Err(match found {
                                None => StoreError::Missing(id.clone()),
                                Some(row) => StoreError::Conflict {
                                    id: id.clone(),
                                    expected,
                                    found: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                                },
                            })
                        }
                        Err(error) if error.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                            Err(StoreError::Conflict { id: id.clone(), expected, found: expected + 1 })
                        }
                        Err(error) => Err(db_error(&id)(error)),
                    }
                }
                .await;
                Ok((client, result))
            })
            .await;
        match outcome {
            Ok((client, result)) => {
                self.client = Some(client);
                if result.is_err() {
                    self.files.restore_staged(staged);
                }
                result?;
                self.last_seq = delta.seq;
                Ok(())
            }
            Err(error) => {
                self.files.restore_staged(staged);
                Err(error)
            }
        }
    }
}

impl SessionWriter for PgWriter {
    fn commit<'a>(&'a mut self, delta: &'a Delta) -> StoreFuture<'a, ()> {
        Box::pin(self.commit_step(delta))
    }
}

impl Drop for PgWriter {
    /// Unlocks before returning, so the session can be opened again at once (as with
    /// the other stores). The wait is bounded: past it the unlock still finishes, or the
    /// connection closes, which releases the lock all the same.
    fn drop(&mut self) {
        self.files.writer_closed();
        if let Some(client) = self.client.take() {
            let _ = self.inner.wait(client.release(), Some(RELEASE_WAIT));
        }
    }
}
