//! Who may write a session: a lease on the session's row, and the claims a fleet uses to
//! hand out the sessions nobody is running.
//!
//! A writer holds its session by a lease kept in the row itself (migration 5):
//! `lease_owner` (which runner), `lease_expires` (the database's clock), and
//! `lease_token`, a fencing token drawn from one sequence for every lease ever taken.
//! Opening a session takes the lease in the statement that reads the session, and only
//! when nobody holds it or the holder's lease ran out; every commit names the token and
//! changes nothing when the row carries another, so a runner that stalled past its lease
//! while another took the session over can never write into it again
//! ([`StoreError::TakenOver`]). A commit also renews the lease, and one task per store
//! ([`keep_renewed`]) renews every lease the store holds, in one statement, three times
//! per term, so a long model call keeps its session. A runner that dies stops renewing:
//! its sessions are free one term later, whatever became of its connections.
//!
//! The one thing to know: nothing here lives on a connection. The pool lends any
//! connection to any statement, so a bounded pool serves any number of open sessions,
//! and a pooler in transaction mode (PgBouncer) may route each statement to another
//! server connection. Every statement of this crate is therefore sent unnamed with its
//! parameter types (`query_typed`), except the few a turn runs every time (its creation,
//! its commits, its close): those are prepared once per connection when the store is
//! told it talks to the server itself ([`crate::PgOptions::behind_pooler`]).
//!
//! **Claims.** A fleet must not have every runner wake the same due session, nor continue
//! the same cut turn. [`claim`] marks a batch of such sessions `claimed_until` a little
//! later, in one `UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`:
//! concurrent claims skip each other's rows, so each session goes to one runner, which
//! then opens it (taking the lease) and checks afresh that the work is still there. A
//! claimer that dies leaves a claim that simply runs out.
//!
//! [`StoreError::TakenOver`]: archmax_vm::session::StoreError::TakenOver

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use archmax_vm::session::StoreError;

use crate::{Inner, db_error, io_error, pool_error};

/// How long a lease lasts unless renewed, when the options name no other term.
pub const DEFAULT_TERM: Duration = Duration::from_secs(10);
/// The shortest term a store accepts: renewals go three times per term, and each is one
/// statement for every lease the store holds.
pub const SHORTEST_TERM: Duration = Duration::from_millis(300);

/// Takes the lease of session `$1` for owner `$2` for `$3` seconds, when nobody holds it
/// or its holder's ran out, and reads what opening the session needs. No row: the session
/// is missing or held. A claim on the session is left to run out, so a chore that fails
/// at once is handed out again a term later, not in a tight loop.
pub(crate) const TAKE: &str = "UPDATE archmax_sessions \
     SET lease_owner = $2, lease_token = nextval('archmax_lease_tokens'), \
         lease_expires = now() + make_interval(secs => $3) \
     WHERE id = $1 AND (lease_owner IS NULL OR lease_expires < now()) \
     RETURNING lease_token, snapshot_seq, snapshot";

/// Gives the lease of session `$1` back, if token `$2` still holds it.
const RELEASE: &str = "UPDATE archmax_sessions SET lease_owner = NULL, lease_expires = NULL \
     WHERE id = $1 AND lease_token = $2";

/// Renews, for `$3` seconds, every lease of `($1[i], $2[i])` still held; returns the ids
/// renewed.
const RENEW: &str = "UPDATE archmax_sessions AS s SET lease_expires = now() + make_interval(secs => $3) \
     FROM unnest($1::text[], $2::bigint[]) AS held (id, token) \
     WHERE s.id = held.id AND s.lease_token = held.token \
     RETURNING s.id";

/// The leases one store holds, and the name it holds them under.
pub(crate) struct Leases {
    /// This store in `lease_owner`: host, process and a random part, for people reading
    /// the table (the token, not the owner, is what fences).
    owner: String,
    term: Duration,
    /// Session id → token, for every lease this store holds.
    held: Mutex<HashMap<String, i64>>,
}

impl Leases {
    pub(crate) fn new(term: Duration) -> Leases {
        Leases { owner: owner_name(), term: term.max(SHORTEST_TERM), held: Mutex::new(HashMap::new()) }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, i64>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// The term in seconds, as the statements take it.
    pub(crate) fn term_secs(&self) -> f64 {
        self.term.as_secs_f64()
    }

    /// How often the renewing task runs.
    fn renew_every(&self) -> Duration {
        self.term / 3
    }

    pub(crate) fn hold(&self, id: &str, token: i64) {
        self.held().insert(id.to_string(), token);
    }

    /// Stops renewing `id`'s lease, if `token` is the one held.
    pub(crate) fn forget(&self, id: &str, token: i64) {
        let mut held = self.held();
        if held.get(id) == Some(&token) {
            held.remove(id);
        }
    }
}

/// `host/pid/random`.
fn owner_name() -> String {
    let host = crate::host_name().map_or_else(|| "archmax".to_string(), |host| host.chars().take(64).collect());
    let mut random = [0u8; 6];
    if getrandom::fill(&mut random).is_err() {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.subsec_nanos());
        random[..4].copy_from_slice(&nanos.to_be_bytes());
    }
    let random: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{host}/{}/{random}", std::process::id())
}

/// Whether a live lease holds session `$1`: no row, no session.
const HELD: &str = "SELECT lease_owner IS NOT NULL AND lease_expires >= now() FROM archmax_sessions WHERE id = $1";

/// Whether a runner's live lease holds `id` now; `None` when there is no such session.
pub(crate) async fn is_held(pool: &Pool, id: &str) -> Result<Option<bool>, StoreError> {
    let client = pool.get().await.map_err(pool_error(id))?;
    let row = client.query_typed_opt(HELD, &[(&id, Type::TEXT)]).await.map_err(db_error(id))?;
    Ok(row.map(|row| row.get::<_, Option<bool>>(0).unwrap_or(false)))
}

/// Gives `id`'s lease back (a no-op when `token` no longer holds it).
pub(crate) async fn release(pool: &Pool, id: &str, token: i64) -> Result<(), StoreError> {
    let client = pool.get().await.map_err(pool_error(id))?;
    client.execute_typed(RELEASE, &[(&id, Type::TEXT), (&token, Type::INT8)]).await.map_err(db_error(id))?;
    Ok(())
}

/// Renews the store's leases three times per term, until the store is gone. A lease found
/// taken over is dropped from the set (its writer learns it at its next commit).
pub(crate) async fn keep_renewed(inner: Weak<Inner>) {
    let Some(every) = inner.upgrade().map(|inner| inner.leases.renew_every()) else { return };
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let (ids, tokens): (Vec<String>, Vec<i64>) =
            inner.leases.held().iter().map(|(id, token)| (id.clone(), *token)).unzip();
        if ids.is_empty() {
            continue;
        }
        // Bounded well inside the term: a renewal stuck behind a busy pool or a locked row
        // is given up and tried again next round, while the leases still hold.
        let renewed = tokio::time::timeout(every, async {
            let client = inner.pool.get().await.map_err(pool_error(""))?;
            let term = inner.leases.term_secs();
            let rows = client
                .query_typed(RENEW, &[(&ids, Type::TEXT_ARRAY), (&tokens, Type::INT8_ARRAY), (&term, Type::FLOAT8)])
                .await
                .map_err(db_error(""))?;
            Ok::<Vec<String>, StoreError>(rows.iter().map(|row| row.get(0)).collect())
        })
        .await
        .unwrap_or_else(|_| Err(io_error("", format!("no answer within {} ms", every.as_millis()))));
        match renewed {
            Ok(renewed) if renewed.len() < ids.len() => {
                for (id, token) in ids.iter().zip(&tokens) {
                    if !renewed.contains(id) {
                        tracing::warn!(session = id.as_str(), "the session was taken over by another runner");
                        inner.leases.forget(id, *token);
                    }
                }
            }
            Ok(_) => {}
            // The next round tries again; a lease that runs out meanwhile is another
            // runner's to take, and this one's next commit is refused.
            Err(error) => tracing::warn!("the session leases could not be renewed: {error}"),
        }
    }
}

/// What a claim is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Claim {
    /// Root sessions waiting with a resume time at or before this instant.
    Due(SystemTime),
    /// Root sessions still `running` that nobody holds: a turn cut when its runner died
    /// (or stopped).
    Stranded,
}

/// Claims up to `limit` root sessions for `what`, for `term` seconds: only sessions pinned
/// to a workflow spec in `runnable` (slug and spec hash), none another claim took within
/// its term, none a runner holds (this one included: a held session is being worked on).
/// The ids, in id order.
pub(crate) async fn claim(
    pool: &Pool,
    term: f64,
    what: Claim,
    runnable: &[(String, String)],
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
    let (workflows, hashes): (Vec<&str>, Vec<&str>) =
        runnable.iter().map(|(workflow, hash)| (workflow.as_str(), hash.as_str())).unzip();
    let (filter, at) = match what {
        Claim::Due(at) => ("status = 'awaiting_input' AND resume_due IS NOT NULL AND resume_due <= $5", Some(at)),
        Claim::Stranded => ("status = 'running'", None),
    };
    let sql = format!(
        "WITH picked AS MATERIALIZED (SELECT id FROM archmax_sessions \
             WHERE {filter} AND strpos(id, '~') = 0 \
               AND (workflow, spec_hash) IN (SELECT * FROM unnest($3::text[], $4::text[])) \
               AND (claimed_until IS NULL OR claimed_until < now()) \
               AND (lease_owner IS NULL OR lease_expires < now()) \
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) \
         UPDATE archmax_sessions s SET claimed_until = now() + make_interval(secs => $2) \
         FROM picked WHERE s.id = picked.id \
         RETURNING s.id"
    );
    let client = pool.get().await.map_err(pool_error(""))?;
    let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> =
        vec![(&limit, Type::INT8), (&term, Type::FLOAT8), (&workflows, Type::TEXT_ARRAY), (&hashes, Type::TEXT_ARRAY)];
    if let Some(at) = &at {
        params.push((at, Type::TIMESTAMPTZ));
    }
    let rows = client.query_typed(&sql, &params).await.map_err(db_error(""))?;
    let mut ids: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    ids.sort();
    Ok(ids)
}
