//! Session events in `archmax_events` (migration 6): the [`EventLog`] of a fleet.
//!
//! The host stages each event in this store value ([`StagedEvents`], per root session,
//! bounded); the next commit of one of the root's sessions takes them and writes them in
//! its own statement ([`crate::writer`]'s `COMMIT`: the root's counter row in
//! `archmax_event_heads` is raised by their number and they are inserted under the ids
//! it frees, only when the step itself is written), and a closing writer writes what is
//! left with the statement that gives its lease back ([`CLOSE`]), which also prunes the
//! root's events past [`crate::PgOptions::events_kept`]. A commit that wrote events
//! notifies `archmax_events` with `<root> <last id>`; [`EventLog::follow`] listens.
//!
//! The one thing to know: the counter row is locked by the statement that raises it, so
//! two statements writing one root's events (its writer and a sub-workflow's) take turns
//! and their ids never collide, and since the rows are written only with a committed step
//! (or a lease still held), a runner that was taken over writes none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_postgres::types::{ToSql, Type};

use archmax_vm::session::StoreError;
use archmax_vm::session::event_log::{EventFeed, EventLog, LoggedEvent, NextCommitted};
use archmax_vm::session::store::StoreFuture;

use crate::announce::Announcement;
use crate::notify::{self, Notifications};
use crate::{Inner, db_error, pool_error, run_statement};

/// The channel a commit that wrote events notifies.
pub const CHANNEL: &str = "archmax_events";

/// The most events one root session stages between commits; past it the oldest staged
/// ones are dropped (the transcript keeps everything; the stream is a view of it).
const STAGED_EVENTS: usize = 8192;
/// The most bytes of events one root session stages between commits.
const STAGED_BYTES: usize = 16 * 1024 * 1024;
/// Roots with staged events past which those of roots no writer here has open are
/// forgotten (a host staging for sessions another runner runs).
const STAGED_ROOTS: usize = 4096;

/// The root session of `session`: the part before its first `~`.
pub(crate) fn root_of(session: &str) -> &str {
    session.split('~').next().unwrap_or(session)
}

/// Events waiting for their root's next commit, per root session.
#[derive(Default)]
pub(crate) struct StagedEvents {
    roots: Mutex<HashMap<String, Staged>>,
}

#[derive(Default)]
struct Staged {
    bodies: Vec<String>,
    bytes: usize,
}

impl StagedEvents {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Staged>> {
        self.roots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stage(&self, root: &str, json: &str, open: impl Fn(&str) -> bool) {
        let mut roots = self.lock();
        if !roots.contains_key(root) && roots.len() >= STAGED_ROOTS {
            roots.retain(|root, _| open(root));
        }
        let staged = roots.entry(root.to_string()).or_default();
        staged.bodies.push(json.to_string());
        staged.bytes += json.len();
        let mut dropped = 0;
        while staged.bodies.len() > STAGED_EVENTS || (staged.bytes > STAGED_BYTES && staged.bodies.len() > 1) {
            let oldest = staged.bodies.remove(0);
            staged.bytes -= oldest.len();
            dropped += 1;
        }
        if dropped > 0 {
            tracing::warn!(
                session = root,
                dropped,
                "a session staged more events than a commit carries; the oldest were dropped"
            );
        }
    }

    /// Hands `root`'s staged events to a commit.
    pub(crate) fn take(&self, root: &str) -> Vec<String> {
        self.lock().remove(root).map(|staged| staged.bodies).unwrap_or_default()
    }

    /// Puts back the events of a commit that failed, before anything staged since.
    pub(crate) fn restore(&self, root: &str, mut taken: Vec<String>) {
        if taken.is_empty() {
            return;
        }
        let mut roots = self.lock();
        let staged = roots.entry(root.to_string()).or_default();
        let bytes: usize = taken.iter().map(String::len).sum();
        taken.append(&mut staged.bodies);
        staged.bodies = taken;
        staged.bytes += bytes;
    }
}

/// Gives back the lease of writer `$1`/`$2` and writes the events `$4` of its root `$3`
/// left staged, then prunes the root's events to the newest `$5`; returns a row when it
/// wrote any (announced then by the store's announcer). Nothing is written by a writer whose lease was taken over.
const CLOSE: &str = "WITH released AS (
        UPDATE archmax_sessions SET lease_owner = NULL, lease_expires = NULL
        WHERE id = $1 AND lease_token = $2
        RETURNING id
    ), counter AS (
        INSERT INTO archmax_event_heads (root, last)
        SELECT $3, cardinality($4::text[]) FROM released WHERE cardinality($4::text[]) > 0
        ON CONFLICT (root) DO UPDATE SET last = archmax_event_heads.last + EXCLUDED.last
        RETURNING last
    ), logged AS (
        INSERT INTO archmax_events (root, id, body)
        SELECT $3, counter.last - cardinality($4::text[]) + event.ordinality, event.body
        FROM counter, unnest($4::text[]) WITH ORDINALITY AS event (body, ordinality)
        RETURNING 1
    ), pruned AS (
        DELETE FROM archmax_events
        WHERE root = $3 AND EXISTS (SELECT 1 FROM released)
          AND id <= coalesce((SELECT last FROM counter), (SELECT last FROM archmax_event_heads WHERE root = $3)) - $5
        RETURNING 1
    )
    SELECT last FROM counter";

/// Closes writer `id` (lease `token`): its lease back, its root's staged events written,
/// the root's old events pruned.
pub(crate) async fn close(inner: &Inner, id: &str, token: i64, events: Vec<String>) -> Result<(), StoreError> {
    let client = inner.pool.get().await.map_err(pool_error(id))?;
    let root = root_of(id);
    let kept = inner.events_kept;
    let params: [(&(dyn ToSql + Sync), Type); 5] = [
        (&id, Type::TEXT),
        (&token, Type::INT8),
        (&root, Type::TEXT),
        (&events, Type::TEXT_ARRAY),
        (&kept, Type::INT8),
    ];
    let written = run_statement(&client, inner.behind_pooler, CLOSE, &params).await.map_err(db_error(id))?;
    if !written.is_empty() {
        inner.announcer.announce(Announcement::Events { root: root.to_string() });
    }
    Ok(())
}

/// A root's committed events, read by any runner.
pub(crate) struct PgEventLog {
    pub(crate) inner: Arc<Inner>,
}

impl EventLog for PgEventLog {
    fn stage(&self, session: &str, json: &str) {
        let inner = &self.inner;
        inner.staged_events.stage(root_of(session), json, |root| inner.has_open_writer(root));
    }

    fn after<'a>(&'a self, root: &'a str, after: u64, limit: usize) -> StoreFuture<'a, Vec<LoggedEvent>> {
        let pool = self.inner.pool.clone();
        let root = root.to_string();
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        Box::pin(self.inner.run("events", async move {
            let client = pool.get().await.map_err(pool_error(&root))?;
            let rows = client
                .query_typed(
                    "SELECT id, body FROM archmax_events WHERE root = $1 AND id > $2 ORDER BY id LIMIT $3",
                    &[(&root, Type::TEXT), (&after, Type::INT8), (&limit, Type::INT8)],
                )
                .await
                .map_err(db_error(&root))?;
            Ok(rows
                .iter()
                .map(|row| LoggedEvent { id: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0), json: row.get(1) })
                .collect())
        }))
    }

    fn last<'a>(&'a self, root: &'a str) -> StoreFuture<'a, u64> {
        let pool = self.inner.pool.clone();
        let root = root.to_string();
        Box::pin(self.inner.run("events", async move {
            let client = pool.get().await.map_err(pool_error(&root))?;
            let row = client
                .query_typed_opt("SELECT last FROM archmax_event_heads WHERE root = $1", &[(&root, Type::TEXT)])
                .await
                .map_err(db_error(&root))?;
            Ok(row.map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
        }))
    }

    fn follow(&self) -> StoreFuture<'_, Box<dyn EventFeed>> {
        let (config, tls) = (self.inner.listen_config.clone(), self.inner.listen_tls.clone());
        Box::pin(async move {
            let notifications = self.inner.run("events", notify::listen(config, tls, CHANNEL)).await?;
            Ok(Box::new(PgEventFeed(notifications)) as Box<dyn EventFeed>)
        })
    }

    /// Opens a feed, notifies the channel through the pool with a root no session has
    /// (`~probe-<random>`: `~` starts no session id), and waits [`PROBE_WAIT`] to hear it.
    /// Through a pooler in transaction mode the `LISTEN` lands on a server connection the
    /// pooler then lends to others, and the notification never reaches the feed.
    fn check_follow(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut feed = self.follow().await?;
            let mut random = [0u8; 8];
            getrandom::fill(&mut random)
                .map_err(|error| StoreError::Unavailable(format!("no random probe: {error}")))?;
            let probe = format!("~probe-{:016x}", u64::from_le_bytes(random));
            // The simple protocol: nothing is prepared (a pooler in transaction mode
            // would hand a named statement's connection to others), and the payload is
            // hex the text cannot be broken out of.
            let (pool, notify) = (self.inner.pool.clone(), format!("NOTIFY {CHANNEL}, '{probe} 0'"));
            self.inner
                .run("events", async move {
                    let client = pool.get().await.map_err(pool_error(""))?;
                    client.batch_execute(&notify).await.map_err(db_error(""))
                })
                .await?;
            let heard = tokio::time::timeout(PROBE_WAIT, async {
                while let Some((root, _)) = feed.next().await {
                    if root == probe {
                        return true;
                    }
                }
                false
            })
            .await;
            match heard {
                Ok(true) => Ok(()),
                _ => Err(StoreError::Unavailable(format!(
                    "the listening connection heard nothing of a notification sent through the store within {} s: \
                     it is likely through a pooler in transaction mode, which cannot listen",
                    PROBE_WAIT.as_secs()
                ))),
            }
        })
    }
}

/// How long [`EventLog::check_follow`] waits for its own notification.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

struct PgEventFeed(Notifications);

impl EventFeed for PgEventFeed {
    fn next(&mut self) -> NextCommitted<'_> {
        Box::pin(self.0.next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_events_are_bounded_and_a_failed_commit_puts_its_own_back_first() {
        let staged = StagedEvents::default();
        for index in 0..STAGED_EVENTS + 3 {
            staged.stage("a", &index.to_string(), |_| true);
        }
        let taken = staged.take("a");
        assert_eq!(taken.len(), STAGED_EVENTS);
        assert_eq!(taken[0], "3", "the oldest went first");
        staged.stage("a", "later", |_| true);
        staged.restore("a", vec!["earlier".to_string()]);
        assert_eq!(staged.take("a"), ["earlier", "later"]);
        assert_eq!(root_of("a~1~2"), "a");
    }
}
