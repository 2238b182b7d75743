//! Shared records in PostgreSQL ([`archmax_vm::session::records`]): the
//! `archmax_records` table (migration 3) and its per-kind counter rows in
//! `archmax_record_counts` (migration 4).
//!
//! A claim is one transaction. It first locks the kind's counter row (made on a kind's
//! first claim), so claims of one kind take turns across every runner; deletes the kind's
//! expired rows (an index range, each row deleted once) and takes their number off the
//! counter; then, unless the counter says the kind is full, writes the row with
//! `INSERT … ON CONFLICT (kind, key) DO NOTHING`: a row comes back only when this claim
//! won the key (any row left for it is live, the expired ones were just deleted), and the
//! counter goes up by one. A removal deletes the row and lowers the counter under the
//! same lock. Reads are a single statement.
//!
//! The one thing to know: the capacity is checked against the counter row, never by
//! counting the kind's records, so a claim costs the same with 10 or 100,000 live records
//! of its kind. The counter stays exact because every statement that adds or deletes a
//! record changes it in the same transaction. Should it ever be wrong (rows deleted by
//! hand), `UPDATE archmax_record_counts c SET records = (SELECT count(*) FROM
//! archmax_records r WHERE r.kind = c.kind)` puts it right. Expiry is decided by the
//! `now_ms` each caller passes, the runner's clock, not the database's, so every store
//! agrees on what "live" means.

use deadpool_postgres::{Pool, Transaction};
use tokio_postgres::types::Type;

use archmax_vm::session::StoreError;
use archmax_vm::session::records::{Record, RecordKind, check_record_key, records_full};

use crate::{db_error, number, pool_error};

fn label(kind: RecordKind) -> String {
    format!("records/{}", kind.as_str())
}

/// Locks `kind`'s counter row (making it on the kind's first claim) for the rest of the
/// transaction, and returns how many rows the kind holds.
async fn lock_counter(transaction: &Transaction<'_>, kind: &str, id: &str) -> Result<i64, StoreError> {
    let row = transaction
        .query_typed_one(
            "INSERT INTO archmax_record_counts (kind, records) VALUES ($1, 0) \
             ON CONFLICT (kind) DO UPDATE SET records = archmax_record_counts.records RETURNING records",
            &[(&kind, Type::TEXT)],
        )
        .await
        .map_err(db_error(id))?;
    Ok(row.get(0))
}

async fn set_counter(transaction: &Transaction<'_>, kind: &str, records: i64, id: &str) -> Result<(), StoreError> {
    transaction
        .execute_typed(
            "UPDATE archmax_record_counts SET records = $2 WHERE kind = $1",
            &[(&kind, Type::TEXT), (&records, Type::INT8)],
        )
        .await
        .map_err(db_error(id))?;
    Ok(())
}

pub(crate) async fn claim(pool: Pool, record: Record, now_ms: u64) -> Result<bool, StoreError> {
    record.check()?;
    let id = label(record.kind);
    let id = id.as_str();
    let (now, expires) = (number(id, now_ms)?, number(id, record.expires_ms)?);
    let capacity = i64::try_from(record.kind.capacity()).unwrap_or(i64::MAX);
    let kind = record.kind.as_str();
    let mut client = pool.get().await.map_err(pool_error(id))?;
    let transaction = client.transaction().await.map_err(db_error(id))?;
    let counted = lock_counter(&transaction, kind, id).await?;
    let pruned = transaction
        .execute_typed(
            "DELETE FROM archmax_records WHERE kind = $1 AND expires_ms <= $2",
            &[(&kind, Type::TEXT), (&now, Type::INT8)],
        )
        .await
        .map_err(db_error(id))?;
    let live = counted.saturating_sub(i64::try_from(pruned).unwrap_or(i64::MAX)).max(0);
    if live >= capacity {
        let held = transaction
            .query_typed_opt(
                "SELECT 1 FROM archmax_records WHERE kind = $1 AND key = $2",
                &[(&kind, Type::TEXT), (&record.key, Type::TEXT)],
            )
            .await
            .map_err(db_error(id))?
            .is_some();
        set_counter(&transaction, kind, live, id).await?;
        transaction.commit().await.map_err(db_error(id))?;
        // A live record holds the key: the claim loses, as it would with room to spare.
        return if held { Ok(false) } else { Err(records_full(record.kind)) };
    }
    let won = transaction
        .query_typed_opt(
            "INSERT INTO archmax_records (kind, key, value, expires_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kind, key) DO NOTHING RETURNING 1",
            &[(&kind, Type::TEXT), (&record.key, Type::TEXT), (&record.value, Type::BYTEA), (&expires, Type::INT8)],
        )
        .await
        .map_err(db_error(id))?
        .is_some();
    set_counter(&transaction, kind, live + i64::from(won), id).await?;
    transaction.commit().await.map_err(db_error(id))?;
    Ok(won)
}

pub(crate) async fn read(
    pool: Pool,
    kind: RecordKind,
    key: String,
    now_ms: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    check_record_key(kind, &key)?;
    let id = label(kind);
    let id = id.as_str();
    let now = number(id, now_ms)?;
    let client = pool.get().await.map_err(pool_error(id))?;
    let row = client
        .query_typed_opt(
            "SELECT value FROM archmax_records WHERE kind = $1 AND key = $2 AND expires_ms > $3",
            &[(&kind.as_str(), Type::TEXT), (&key, Type::TEXT), (&now, Type::INT8)],
        )
        .await
        .map_err(db_error(id))?;
    Ok(row.map(|row| row.get(0)))
}

pub(crate) async fn remove(pool: Pool, kind: RecordKind, key: String) -> Result<bool, StoreError> {
    check_record_key(kind, &key)?;
    let id = label(kind);
    let id = id.as_str();
    let mut client = pool.get().await.map_err(pool_error(id))?;
    let transaction = client.transaction().await.map_err(db_error(id))?;
    // The counter's lock first, as a claim takes it, so the two never wait on each other
    // in opposite orders.
    let counted = lock_counter(&transaction, kind.as_str(), id).await?;
    let removed = transaction
        .execute_typed(
            "DELETE FROM archmax_records WHERE kind = $1 AND key = $2",
            &[(&kind.as_str(), Type::TEXT), (&key, Type::TEXT)],
        )
        .await
        .map_err(db_error(id))?;
    if removed > 0 {
        let left = counted.saturating_sub(i64::try_from(removed).unwrap_or(i64::MAX)).max(0);
        set_counter(&transaction, kind.as_str(), left, id).await?;
    }
    transaction.commit().await.map_err(db_error(id))?;
    Ok(removed > 0)
}
