//! The store's tables, as numbered migrations embedded in the binary.
//!
//! `migrations/NNNN_*.sql` are applied in order on connect, each inside one transaction
//! with its row in `archmax_schema_version`; an advisory transaction lock makes runners
//! starting at once take turns. A database already at [`SCHEMA_VERSION`] is only read
//! (no lock, no DDL), so the role a runner uses needs CREATE on the schema only for the
//! first start and for upgrades. The one thing to know: a database whose version is newer
//! than the last migration this binary knows is refused (an older binary would write rows
//! a newer schema does not expect), and nothing is changed. A migration the server
//! refuses is reported in its words, and a missing privilege with what to grant.

use tokio_postgres::Client;
use tokio_postgres::types::Type;

use crate::ConnectError;

/// Every migration this binary knows, by version, oldest first.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../migrations/0001_sessions.sql")),
    (2, include_str!("../migrations/0002_listing.sql")),
    (3, include_str!("../migrations/0003_records.sql")),
    (4, include_str!("../migrations/0004_record_counts.sql")),
    (5, include_str!("../migrations/0005_leases.sql")),
    (6, include_str!("../migrations/0006_events.sql")),
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i32 = 6;

/// The advisory lock migrators take turns on ("archmax" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_7263_686d_6178;

/// The schema's version: the highest row of `archmax_schema_version`.
const FOUND_VERSION: &str = "SELECT coalesce(max(version), 0) FROM archmax_schema_version";

/// Brings the database to [`SCHEMA_VERSION`], or refuses a newer one.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), ConnectError> {
    let row = client
        .query_typed_one(
            "SELECT current_user::text, current_schema()::text, to_regclass('archmax_schema_version') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|error| ConnectError::Migration(crate::describe(&error)))?;
    let grantee = Grantee { role: row.get(0), schema: row.get(1) };
    let failed = |error: tokio_postgres::Error| grantee.migration_failed(&error);
    // Most starts find the schema current. Its version is read first, without the lock
    // or any DDL (`CREATE TABLE IF NOT EXISTS` needs CREATE on the schema even when the
    // table is there), so a role that may only use the tables starts, and runners
    // starting together do not queue. The rows are written with the migrations they
    // record, so a current version means the tables are there.
    if row.get::<_, bool>(2) {
        let found = checked(client.query_typed_one(FOUND_VERSION, &[]).await.map_err(failed)?.get(0))?;
        if found == SCHEMA_VERSION {
            return Ok(());
        }
    }
    let transaction = client.transaction().await.map_err(failed)?;
    transaction
        .execute_typed("SELECT pg_advisory_xact_lock($1)", &[(&MIGRATION_LOCK, Type::INT8)])
        .await
        .map_err(failed)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS archmax_schema_version (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .map_err(failed)?;
    // Read again under the lock: another runner may have migrated meanwhile.
    let found = checked(transaction.query_typed_one(FOUND_VERSION, &[]).await.map_err(failed)?.get(0))?;
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > found) {
        transaction.batch_execute(sql).await.map_err(failed)?;
        transaction
            .execute_typed("INSERT INTO archmax_schema_version (version) VALUES ($1)", &[(version, Type::INT4)])
            .await
            .map_err(failed)?;
    }
    transaction.commit().await.map_err(failed)
}

/// `found`, unless it is newer than this binary knows.
fn checked(found: i32) -> Result<i32, ConnectError> {
    if found > SCHEMA_VERSION { Err(ConnectError::SchemaTooNew { found, known: SCHEMA_VERSION }) } else { Ok(found) }
}

/// The role the store connects as and the schema its tables go in, for saying what to
/// grant when a migration is refused.
struct Grantee {
    role: String,
    /// `None` when no schema of the role's `search_path` exists.
    schema: Option<String>,
}

impl Grantee {
    /// A failed migration in the server's words; a refused privilege adds what to grant.
    fn migration_failed(&self, error: &tokio_postgres::Error) -> ConnectError {
        let said = crate::describe(error);
        if error.code() != Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
            return ConnectError::Migration(said);
        }
        let (role, schema) = (&self.role, self.schema.as_deref().unwrap_or("public"));
        ConnectError::Migration(format!(
            "{said} (archmax creates and upgrades its own tables, so the role it connects as needs CREATE on \
             their schema the first time and whenever a new archmax version changes them \
             (`GRANT CREATE ON SCHEMA {schema} TO {role}`), or that start is run once as the schema's owner; \
             between upgrades USAGE on the schema, SELECT, INSERT, UPDATE and DELETE on the archmax_ tables \
             and USAGE on their sequences are enough)"
        ))
    }
}

/// Refuses a server that reports commits before they reach its disk
/// (`synchronous_commit = off`, for the whole server or the connecting role): the store
/// tells a runner a step is committed when PostgreSQL says so.
pub(crate) async fn check_durable(client: &Client) -> Result<(), ConnectError> {
    let row = client
        .query_typed_one("SELECT current_setting('synchronous_commit')", &[])
        .await
        .map_err(|error| ConnectError::Connect(crate::describe(&error)))?;
    let setting: String = row.get(0);
    if setting.eq_ignore_ascii_case("off") {
        return Err(ConnectError::NotDurable(setting));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (index, (version, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version as usize, index + 1);
            assert!(sql.contains("CREATE "), "migration {version} has SQL");
        }
        assert_eq!(MIGRATIONS.last().map(|(version, _)| *version), Some(SCHEMA_VERSION));
    }
}
