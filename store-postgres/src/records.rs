//! Shared records in PostgreSQL ([`archmax_vm::session::records`]): the
//! `archmax_records` table (migration 3).
//!
//! A claim is one transaction: it takes a transaction-level advisory lock for the
//! record's kind (so claims of one kind take turns across every runner and the capacity
//! is exact), deletes the kind's expired rows, counts the live ones, and then writes the
//! row with `INSERT … ON CONFLICT (kind, key) DO UPDATE … WHERE` the old row has expired:
//! a row comes back only when this claim won the key. Reads and removals are single
//! statements.
//!
//! The one thing to know: expiry is decided by the `now_ms` each caller passes, the
//! runner's clock, not the database's, so every store agrees on what "live" means.

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};

use archmax_vm::session::StoreError;
use archmax_vm::session::records::{Record, RecordKind, check_record_key, records_full};

use crate::{db_error, io_error, number};

/// The advisory lock claims of `kind` take turns on.
fn kind_lock(kind: RecordKind) -> i64 {
    let digest = Sha256::digest(format!("archmax-records/{}", kind.as_str()).as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

fn label(kind: RecordKind) -> String {
    format!("records/{}", kind.as_str())
}

pub(crate) async fn claim(pool: Pool, record: Record, now_ms: u64) -> Result<bool, StoreError> {
    record.check()?;
    let id = label(record.kind);
    let id = id.as_str();
    let (now, expires) = (number(id, now_ms)?, number(id, record.expires_ms)?);
    let capacity = i64::try_from(record.kind.capacity()).unwrap_or(i64::MAX);
    let kind = record.kind.as_str();
    let mut client = pool.get().await.map_err(|error| io_error(id, error.to_string()))?;
    let transaction = client.transaction().await.map_err(db_error(id))?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&kind_lock(record.kind)]).await.map_err(db_error(id))?;
    transaction
        .execute("DELETE FROM archmax_records WHERE kind = $1 AND expires_ms <= $2", &[&kind, &now])
        .await
        .map_err(db_error(id))?;
    let live: i64 = transaction
        .query_one(
            "SELECT count(*) FROM archmax_records WHERE kind = $1 AND key <> $2 AND expires_ms > $3",
            &[&kind, &record.key, &now],
        )
        .await
        .map_err(db_error(id))?
        .get(0);
    if live >= capacity {
        return Err(records_full(record.kind));
    }
    let won = transaction
        .query_opt(
            "INSERT INTO archmax_records (kind, key, value, expires_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kind, key) DO UPDATE SET value = EXCLUDED.value, expires_ms = EXCLUDED.expires_ms \
             WHERE archmax_records.expires_ms <= $5 RETURNING 1",
            &[&kind, &record.key, &record.value, &expires, &now],
        )
        .await
        .map_err(db_error(id))?
        .is_some();
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
    let client = pool.get().await.map_err(|error| io_error(id, error.to_string()))?;
    let row = client
        .query_opt(
            "SELECT value FROM archmax_records WHERE kind = $1 AND key = $2 AND expires_ms > $3",
            &[&kind.as_str(), &key, &now],
        )
        .await
        .map_err(db_error(id))?;
    Ok(row.map(|row| row.get(0)))
}

pub(crate) async fn remove(pool: Pool, kind: RecordKind, key: String) -> Result<bool, StoreError> {
    check_record_key(kind, &key)?;
    let id = label(kind);
    let id = id.as_str();
    let client = pool.get().await.map_err(|error| io_error(id, error.to_string()))?;
    let removed = client
        .execute("DELETE FROM archmax_records WHERE kind = $1 AND key = $2", &[&kind.as_str(), &key])
        .await
        .map_err(db_error(id))?;
    Ok(removed > 0)
}
