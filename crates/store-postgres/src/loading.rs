//! Reading a session: its snapshot and the steps after it, folded into its state, and
//! opening one for writing (its lease taken in the statement that reads it).
//!
//! The one thing to know: steps are never removed, so a commit landing between reading the
//! snapshot and reading the steps only adds a step, and a state is refused as corrupt only
//! when its steps do not decode or do not follow each other.

use tokio_postgres::types::Type;

use archmax_vm::session::{Delta, SessionState, StoreError};

use crate::{COMPACT_AFTER_STEPS, Inner, corrupt, db_error, io_error, lease, number, pool_error};

/// A session's state and how many steps follow its snapshot; `None` when absent.
pub(crate) async fn load(
    client: &tokio_postgres::Client,
    id: &str,
) -> Result<Option<(SessionState, usize)>, StoreError> {
    let Some(row) = client
        .query_typed_opt("SELECT snapshot_seq, snapshot FROM archmax_sessions WHERE id = $1", &[(&id, Type::TEXT)])
        .await
        .map_err(db_error(id))?
    else {
        return Ok(None);
    };
    complete(client, id, row.get(0), row.get(1)).await.map(Some)
}

/// The state of session `id` from its snapshot (taken at `snapshot_seq`) and the steps
/// stored after it, with how many there were. Steps are never removed, so a commit
/// landing after the snapshot was read only adds one.
async fn complete(
    client: &tokio_postgres::Client,
    id: &str,
    snapshot_seq: i64,
    snapshot: &[u8],
) -> Result<(SessionState, usize), StoreError> {
    let steps = client
        .query_typed(
            "SELECT seq, delta FROM archmax_steps WHERE session_id = $1 AND seq > $2 ORDER BY seq",
            &[(&id, Type::TEXT), (&snapshot_seq, Type::INT8)],
        )
        .await
        .map_err(db_error(id))?;
    let state = fold(id, snapshot_seq, snapshot, steps.iter().map(|step| (step.get(0), step.get(1))))?;
    Ok((state, steps.len()))
}

/// A session's state from its snapshot (taken at `snapshot_seq`) and the steps after it,
/// in order; [`StoreError::Corrupt`] when they do not decode or do not follow each other.
pub(crate) fn fold<'a>(
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

/// Takes session `id`'s lease and reads the session under it, compacting its snapshot when
/// many steps follow it. Missing, held elsewhere and unreadable sessions keep no lease; the
/// caller has the lease renewed once it has the writer.
pub(crate) async fn take_and_load(inner: &Inner, id: &str) -> Result<(SessionState, i64), StoreError> {
    let client = inner.pool.get().await.map_err(pool_error(id))?;
    let (owner, term) = (inner.leases.owner(), inner.leases.term_secs());
    let taken = client
        .query_typed_opt(lease::TAKE, &[(&id, Type::TEXT), (&owner, Type::TEXT), (&term, Type::FLOAT8)])
        .await
        .map_err(db_error(id))?;
    let Some(row) = taken else {
        let exists = client
            .query_typed_opt("SELECT 1 FROM archmax_sessions WHERE id = $1", &[(&id, Type::TEXT)])
            .await
            .map_err(db_error(id))?
            .is_some();
        return Err(if exists { StoreError::Busy(id.to_string()) } else { StoreError::Missing(id.to_string()) });
    };
    let token: i64 = row.get(0);
    let loaded = async {
        let (state, steps) = complete(&client, id, row.get(1), row.get(2)).await?;
        if steps >= COMPACT_AFTER_STEPS {
            let snapshot = serde_json::to_vec(&state).map_err(|error| io_error(id, error.to_string()))?;
            let seq = number(id, state.seq)?;
            client
                .execute_typed(
                    "UPDATE archmax_sessions SET snapshot = $2, snapshot_seq = $3 \
                     WHERE id = $1 AND seq = $3 AND lease_token = $4",
                    &[(&id, Type::TEXT), (&snapshot, Type::BYTEA), (&seq, Type::INT8), (&token, Type::INT8)],
                )
                .await
                .map_err(db_error(id))?;
        }
        Ok(state)
    }
    .await;
    match loaded {
        Ok(state) => Ok((state, token)),
        Err(error) => {
            drop(client);
            if let Err(release) = lease::release(&inner.pool, id, token).await {
                tracing::warn!(
                    session = id,
                    "the lease of a session that failed to open is left to run out: {release}"
                );
            }
            Err(error)
        }
    }
}
