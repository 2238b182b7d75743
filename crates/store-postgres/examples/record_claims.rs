//! Measures how many shared-record claims per second one PostgreSQL store makes while a
//! kind already holds many live records (10,000 by default; `cargo run -p
//! archmax-store-postgres --example record_claims -- 100000`). A claim's cost should not
//! grow with that number. Starts its own throwaway server, as the tests do.

use std::time::Instant;

use archmax_store_postgres::PgStore;
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_vm::session::SessionStore;
use archmax_vm::session::records::{Record, RecordKind};

const CLAIMS: usize = 1_000;
const NOW_MS: u64 = 1_000;

fn main() -> Result<(), String> {
    let live: i32 =
        std::env::args().nth(1).map_or(Ok(10_000), |text| text.parse()).map_err(|error| format!("{error}"))?;
    let cluster = TestCluster::require();
    let target = cluster.database("record-claims")?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|error| error.to_string())?;
    runtime.block_on(async {
        let store = PgStore::connect(&target).await.map_err(|error| error.to_string())?;
        let (client, connection) =
            tokio_postgres::connect(&target, tokio_postgres::NoTls).await.map_err(|error| error.to_string())?;
        tokio::spawn(connection);
        let kind = RecordKind::WebhookReplay.as_str();
        client
            .execute(
                "INSERT INTO archmax_records (kind, key, value, expires_ms) \
                 SELECT $1, 'live-' || n, '\\x00', 1000000000 FROM generate_series(1, $2::int) AS n",
                &[&kind, &live],
            )
            .await
            .map_err(|error| error.to_string())?;
        // Keep the kind's counter (where the schema has one) true to the rows just added.
        let _ = client
            .execute(
                "INSERT INTO archmax_record_counts (kind, records) VALUES ($1, $2::int) \
                 ON CONFLICT (kind) DO UPDATE SET records = EXCLUDED.records",
                &[&kind, &live],
            )
            .await;
        client.execute("ANALYZE archmax_records", &[]).await.map_err(|error| error.to_string())?;
        let started = Instant::now();
        for index in 0..CLAIMS {
            let record = Record {
                kind: RecordKind::WebhookReplay,
                key: format!("claim-{index}"),
                value: b"v".to_vec(),
                expires_ms: 1_000_000_000,
            };
            store.claim_record(&record, NOW_MS).await.map_err(|error| error.to_string())?;
        }
        let seconds = started.elapsed().as_secs_f64();
        println!("{CLAIMS} claims with {live} live records of the kind: {:.0} claims/s", CLAIMS as f64 / seconds);
        Ok(())
    })
}
