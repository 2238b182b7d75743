//! The PostgreSQL store against a real server: the conformance suite every store runs,
//! then what only this store does (the schema's version, the seq key against a stale
//! writer, files committed with their step, the size caps). Leases, claims and the
//! pooler are in `leases.rs`.
//!
//! Each test starts its own throwaway server ([`TestCluster::require`]) unless
//! `ARCHMAX_TEST_DATABASE_URL` names one; without PostgreSQL they fail, saying how to
//! get it.

use std::sync::Arc;

use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{ConnectError, PgOptions, PgStore};
use archmax_vm::session::id::SessionId;
use archmax_vm::session::store::ListQuery;
use archmax_vm::session::{Delta, Head, Message, PendingInput, SessionState, SessionStore, StoreError, conformance};
use archmax_vm::stdlib::limits::Limits;
use archmax_vm::stdlib::vfs::VfsError;

/// A host's executor: the store runs its connections on it, so it has worker threads.
fn executor() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor")
}

fn initial(id: &str) -> SessionState {
    SessionState {
        id: SessionId::from_store(id),
        head: Head { workflow: "w".into(), spec_hash: "ab".into(), ..Head::default() },
        ..SessionState::default()
    }
}

fn step(seq: u64, text: &str) -> Delta {
    Delta {
        seq,
        head: Head { workflow: "w".into(), spec_hash: "ab".into(), updated_at: seq, ..Head::default() },
        messages: vec![Message::User { text: text.to_string(), opening: None }],
        ..Delta::default()
    }
}

/// A raw connection to `target`, for changing rows behind the store's back.
async fn raw(target: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(target, tokio_postgres::NoTls).await.expect("a raw connection");
    tokio::spawn(connection);
    client
}

#[test]
fn the_postgres_store_keeps_the_store_contract() {
    let cluster = TestCluster::require();
    let target = cluster.database("conformance").expect("a database");
    // Each store value has its own pool, as another process would; all of them run on
    // one host executor, the suite's own being another.
    let host = executor();
    let connect = || -> Arc<dyn SessionStore> {
        Arc::new(PgStore::connect_blocking(host.handle(), &target, PgOptions::default()).expect("connect"))
    };
    conformance::run("postgres store", &connect);
}

#[test]
fn the_schema_is_versioned_and_a_newer_one_is_refused() {
    let cluster = TestCluster::require();
    let target = cluster.database("schema").expect("a database");
    executor().block_on(async {
        // Two runners starting at once both find the schema applied once.
        let (first, second) = tokio::join!(PgStore::connect(&target), PgStore::connect(&target));
        first.expect("first runner");
        second.expect("second runner");
        let client = raw(&target).await;
        let versions =
            client.query("SELECT version FROM archmax_schema_version ORDER BY version", &[]).await.expect("versions");
        let versions: Vec<i32> = versions.iter().map(|row| row.get(0)).collect();
        assert_eq!(versions, (1..=archmax_store_postgres::schema::SCHEMA_VERSION).collect::<Vec<_>>());

        client.execute("INSERT INTO archmax_schema_version (version) VALUES (999)", &[]).await.expect("bump");
        match PgStore::connect(&target).await {
            Err(error @ ConnectError::SchemaTooNew { found: 999, .. }) => {
                assert!(error.to_string().contains("upgrade archmax"), "{error}");
            }
            Err(other) => panic!("a newer schema is refused, got {other}"),
            Ok(_) => panic!("a newer schema is refused, got a store"),
        }
        assert!(matches!(PgStore::connect("host=/ port=x").await, Err(ConnectError::Config(_))));
        // A database that is not there: the server's words and what to do, without the
        // pool's wrapping.
        let missing = PgStore::connect(&cluster.target_of("archmax_no_such_database")).await;
        match missing {
            Err(error @ ConnectError::Connect(_)) => {
                let said = error.to_string();
                assert!(said.contains("does not exist") && said.contains("createdb"), "{said}");
                assert!(!said.contains("creating a new object"), "{said}");
            }
            Err(other) => panic!("a missing database is a connect error, got {other}"),
            Ok(_) => panic!("a missing database is refused"),
        }
        // The server's hint is kept: here it names the units the setting takes.
        let mistyped = PgStore::connect(&format!("{target} options='-c statement_timeout=5fortnights'")).await;
        match mistyped {
            Err(error @ ConnectError::Connect(_)) => {
                let said = error.to_string();
                assert!(said.contains("statement_timeout") && said.contains("hint: Valid units"), "{said}");
            }
            Err(other) => panic!("a bad setting is a connect error, got {other}"),
            Ok(_) => panic!("a bad setting is refused"),
        }
        // A unix socket carries no TLS (the server offers none there): as with libpq, the
        // mode does not apply to a target that reaches the server only through sockets.
        // (TLS settings that cannot work are still refused, socket or not.)
        let unreadable = PgStore::connect(&format!("{target} sslmode=verify-full sslrootcert=/nonexistent.pem")).await;
        assert!(matches!(unreadable, Err(ConnectError::Tls(_))), "{:?}", unreadable.err());
        // (This database's schema was bumped above: reaching it at all is the point.)
        let over_socket = PgStore::connect(&format!("{target} sslmode=require")).await;
        assert!(matches!(over_socket, Err(ConnectError::SchemaTooNew { .. })), "{:?}", over_socket.err());
    });
}

#[test]
fn the_store_runs_on_its_hosts_multi_threaded_executor_and_starts_none_of_its_own() {
    let cluster = TestCluster::require();
    let target = cluster.database("executor").expect("a database");
    // Outside any runtime, and on a runtime of one thread, there is nothing to run the
    // connections on while a file call waits: both are refused with the reason.
    let outside = futures_lite_block_on(PgStore::connect(&target));
    match outside {
        Err(error @ ConnectError::Executor(_)) => {
            assert!(error.to_string().contains("outside any tokio runtime"), "{error}")
        }
        other => panic!("connecting outside a runtime is refused, got {:?}", other.err()),
    }
    let single = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a one-thread runtime");
    match single.block_on(PgStore::connect(&target)) {
        Err(error @ ConnectError::Executor(_)) => assert!(error.to_string().contains("single thread"), "{error}"),
        other => panic!("a one-thread runtime is refused, got {:?}", other.err()),
    }
    match PgStore::connect_blocking(single.handle(), &target, PgOptions::default()) {
        Err(ConnectError::Executor(_)) => {}
        other => panic!("a one-thread runtime's handle is refused, got {:?}", other.err()),
    }

    // On a host's multi-threaded executor the synchronous files answer from a plain
    // thread and from inside the host alike.
    let host = executor();
    let store = PgStore::connect_blocking(host.handle(), &target, PgOptions::default()).expect("connect");
    let files = store.files("plain-thread").expect("files");
    std::thread::scope(|scope| {
        scope.spawn(|| files.write("notes/a.txt", b"from a plain thread").expect("a write outside the runtime"));
    });
    assert_eq!(files.read("notes/a.txt").expect("read back"), b"from a plain thread");
    host.block_on(async {
        let inside = store.files("plain-thread").expect("files");
        assert_eq!(inside.read("notes/a.txt").expect("read inside the host"), b"from a plain thread");
    });
    // The store has no executor of its own: once its host's has stopped, a file call is
    // an error naming the store, not a hang and not an answer.
    drop(host);
    match files.read("notes/a.txt") {
        Err(VfsError::Other(path, message)) => {
            assert_eq!(path, "notes/a.txt");
            assert!(message.contains("shut down"), "{message}");
        }
        other => panic!("a file call after the host stopped is an error, got {other:?}"),
    }
}

/// Polls a future on the calling thread with no tokio runtime around it.
fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::yield_now();
    }
}

#[test]
fn a_stale_writer_and_the_files_of_its_refused_step() {
    let cluster = TestCluster::require();
    let target = cluster.database("writers").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect(&target).await.expect("connect");
        let client = raw(&target).await;

        // A stale writer: the row moved on behind its back. The (session, seq) guard refuses it, and the file
        // it staged for that step is not written either.
        let mut stale = store.create(&initial("stale")).await.expect("create");
        stale.commit(&step(1, "one")).await.expect("commit 1");
        let files = store.files("stale").expect("files");
        files.write("scratchpad/step2.md", b"never").expect("stage");
        client.execute("UPDATE archmax_sessions SET seq = 2 WHERE id = 'stale'", &[]).await.expect("bump");
        match stale.commit(&step(2, "two")).await {
            Err(StoreError::Conflict { expected: 1, found: 2, .. }) => {}
            other => panic!("a stale writer is Conflict, got {other:?}"),
        }
        let steps = client.query("SELECT seq FROM archmax_steps WHERE session_id = 'stale'", &[]).await.expect("steps");
        assert_eq!(steps.len(), 1, "the refused step wrote no row");
        let rows = client.query("SELECT path FROM archmax_files WHERE session_id = 'stale'", &[]).await.expect("files");
        assert!(rows.is_empty(), "the refused step's file was not written");
        drop(stale);
    });
}

#[test]
fn a_sessions_files_are_held_to_the_caps() {
    let cluster = TestCluster::require();
    let target = cluster.database("caps").expect("a database");
    executor().block_on(async {
        let limits = Limits { file_bytes: 8, session_bytes: 12, session_files: 2, ..Limits::default() };
        let store =
            PgStore::connect_with(&target, PgOptions { limits, ..PgOptions::default() }).await.expect("connect");
        let files = store.files("capped").expect("files");
        assert!(matches!(files.write("scratchpad/big.md", b"123456789"), Err(VfsError::TooLarge { size: 9, .. })));
        files.write("scratchpad/a.md", b"12345678").expect("a file within the cap");
        assert!(matches!(files.write("scratchpad/b.md", b"12345"), Err(VfsError::Other(..))), "over the bytes cap");
        files.write("scratchpad/a.md", b"1234").expect("replacing a file counts its new size");
        files.write("scratchpad/b.md", b"1234").expect("a second file");
        assert!(matches!(files.write("scratchpad/c.md", b"1"), Err(VfsError::Other(..))), "over the files cap");
        assert!(matches!(files.write("scratchpad/a.md/x", b"1"), Err(VfsError::NotADirectory(_))));
        assert!(matches!(files.write("scratchpad", b"1"), Err(VfsError::IsADirectory(_))));
        assert_eq!(files.read_head("scratchpad/a.md", 2).expect("head"), (b"12".to_vec(), 4));
    });
}

#[test]
fn a_runner_hears_the_steps_another_runner_commits() {
    let cluster = TestCluster::require();
    let target = cluster.database("notify").expect("a database");
    executor().block_on(async {
        let watcher = PgStore::connect(&target).await.expect("the watching runner");
        let mut feed = watcher.subscribe().await.expect("subscribe");
        let runner = PgStore::connect(&target).await.expect("the committing runner");
        let mut writer = runner.create(&initial("watched")).await.expect("create");
        writer.commit(&step(1, "one")).await.expect("commit 1");
        // A refused step is never announced.
        assert!(writer.commit(&step(3, "skipped")).await.is_err());
        writer.commit(&step(2, "two")).await.expect("commit 2");
        let wait = std::time::Duration::from_secs(30);
        for seq in [1, 2] {
            let heard = tokio::time::timeout(wait, feed.next()).await.expect("heard in time").expect("a step");
            assert_eq!(heard, archmax_store_postgres::CommittedStep { session: "watched".into(), seq });
            // What was heard is there to read.
            assert!(watcher.read("watched").await.expect("read").expect("exists").seq >= seq);
        }

        // Sessions due at their resumeAt, soonest first.
        drop(runner.create(&waiting("waiting", "2026-01-06T09:00:00Z")).await.expect("create a waiting session"));
        // 2026-01-06T09:00:00Z, and a second before.
        assert!(watcher.due(1_767_689_999_000).await.expect("due").is_empty());
        assert_eq!(watcher.due(1_767_690_000_000).await.expect("due"), ["waiting"]);
    });
}

/// A session waiting for input until `resume_at`.
fn waiting(id: &str, resume_at: &str) -> SessionState {
    let mut state = initial(id);
    state.head.pending_input = Some(PendingInput {
        state: "wait".into(),
        reason: "a delivery".into(),
        parked_at: "2026-01-05T09:00:00Z".into(),
        resume_at: Some(resume_at.into()),
        child: None,
    });
    state.head.status = archmax_vm::session::Status::AwaitingInput;
    state
}

#[test]
fn version_two_keeps_the_sessions_of_version_one_and_their_resume_times_as_instants() {
    let cluster = TestCluster::require();
    let target = cluster.database("upgrade").expect("a database");
    executor().block_on(async {
        // A database as version 1 left it: one session waiting until 11:00 at +02:00
        // (09:00Z, which sorts after "2026-01-06T09:30:00Z" as text), one whose resume time
        // is shaped like an instant but is none.
        let client = raw(&target).await;
        client
            .batch_execute(&format!(
                "CREATE TABLE archmax_schema_version (version integer PRIMARY KEY, \
                 applied_at timestamptz NOT NULL DEFAULT now()); {} \
                 INSERT INTO archmax_schema_version (version) VALUES (1);",
                include_str!("../migrations/0001_sessions.sql")
            ))
            .await
            .expect("schema version 1");
        for (id, resume_at) in [("east", "2026-01-06T11:00:00+02:00"), ("never", "2026-02-30T09:00:00Z")] {
            let state = waiting(id, resume_at);
            let snapshot = serde_json::to_vec(&state).expect("a snapshot");
            let head = tokio_postgres::types::Json(serde_json::to_value(&state.head).expect("a head"));
            client
                .execute(
                    "INSERT INTO archmax_sessions (id, seq, status, workflow, spec_hash, resume_at, head, \
                     snapshot_seq, snapshot, created_at, updated_at) \
                     VALUES ($1, 0, 'awaiting_input', 'w', 'ab', $2, $3, 0, $4, 0, 0)",
                    &[&id, &resume_at, &head, &snapshot],
                )
                .await
                .expect("a version 1 row");
        }
        let store = PgStore::connect(&target).await.expect("upgrade to the current schema");
        // 2026-01-06T09:30:00Z, then 08:59:59Z.
        assert_eq!(store.due(1_767_691_800_000).await.expect("due"), ["east"]);
        assert!(store.due(1_767_689_999_000).await.expect("due").is_empty());
        let query = ListQuery { due_by: Some(1_767_691_800_000), ..ListQuery::default() };
        let page = store.list_page(&query).await.expect("a page");
        assert_eq!(page.sessions.iter().map(|state| state.id.to_string()).collect::<Vec<_>>(), ["east"]);
        assert_eq!(store.read("never").await.expect("read"), Some(waiting("never", "2026-02-30T09:00:00Z")));
    });
}

#[test]
fn pages_list_ids_in_byte_order_whatever_the_database_collation() {
    let cluster = TestCluster::require();
    let target = cluster.database("collation").expect("a database");
    executor().block_on(async {
        // A database whose own order is a language's (ICU, English): there "a" < "B".
        let admin = raw(&target).await;
        let name = format!("archmax_icu_{}", std::process::id());
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.expect("no leftover");
        admin
            .batch_execute(&format!(
                "CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' \
                 LOCALE 'C'"
            ))
            .await
            .expect("an ICU database (PostgreSQL 15 or later, built with ICU)");
        let current: String = admin.query_one("SELECT current_database()", &[]).await.expect("a name").get(0);
        let icu = target.replace(&current, &name);
        {
            let linguistic = raw(&icu).await;
            let row = linguistic.query_one("SELECT 'a'::text < 'B'::text", &[]).await.expect("compare");
            assert!(row.get::<_, bool>(0), "the database's own order puts a before B");
            let store = PgStore::connect(&icu).await.expect("connect");
            let ids = ["a", "B", "a-b", "a~1", "ab", "A", "a_b", "b"];
            for id in ids {
                drop(store.create(&initial(id)).await.expect("create"));
            }
            let mut wanted: Vec<String> = ids.iter().map(ToString::to_string).collect();
            wanted.sort();
            let mut walked = Vec::new();
            let mut query = ListQuery { limit: 3, ..ListQuery::default() };
            loop {
                let page = store.list_page(&query).await.expect("a page");
                walked.extend(page.sessions.iter().map(|state| state.id.to_string()));
                match page.next {
                    Some(next) => query.cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(walked, wanted);
            assert_eq!(store.list().await.expect("list"), wanted);
        }
        admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await.expect("drop the ICU database");
    });
}

fn replay_record(key: &str, expires_ms: u64) -> archmax_vm::session::records::Record {
    use archmax_vm::session::records::{Record, RecordKind};
    Record { kind: RecordKind::WebhookReplay, key: key.to_string(), value: b"v".to_vec(), expires_ms }
}

/// The kind's counter row and the number of its rows in `archmax_records`.
async fn counted_and_held(client: &tokio_postgres::Client, kind: &str) -> (i64, i64) {
    let counted = client
        .query_one("SELECT records FROM archmax_record_counts WHERE kind = $1", &[&kind])
        .await
        .expect("the kind's counter row")
        .get(0);
    let held =
        client.query_one("SELECT count(*) FROM archmax_records WHERE kind = $1", &[&kind]).await.expect("count").get(0);
    (counted, held)
}

#[test]
fn a_record_claim_checks_the_capacity_against_the_kinds_counter_row_without_counting_its_records() {
    use archmax_vm::session::records::{Record, RecordKind};
    let cluster = TestCluster::require();
    let target = cluster.database("record-counts").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect(&target).await.expect("connect");
        let client = raw(&target).await;
        let kind = RecordKind::Conformance;
        let record = |key: &str| Record { kind, key: key.to_string(), value: b"v".to_vec(), expires_ms: 2_000 };
        // As many live rows as the kind holds, put there behind the store's back with the
        // counter saying none: a claim that counted them would be refused.
        client
            .execute(
                "INSERT INTO archmax_records (kind, key, value, expires_ms) \
                 SELECT $1, 'behind-' || n, '\\x00', 2000 FROM generate_series(1, $2::int) AS n",
                &[&kind.as_str(), &i32::try_from(kind.capacity()).expect("small")],
            )
            .await
            .expect("rows behind the store's back");
        client
            .execute(
                "INSERT INTO archmax_record_counts (kind, records) VALUES ($1, 0) \
                 ON CONFLICT (kind) DO UPDATE SET records = 0",
                &[&kind.as_str()],
            )
            .await
            .expect("a counter of none");
        assert!(store.claim_record(&record("counted-by-the-row"), 1_000).await.expect("the counter has room"));
        assert_eq!(counted_and_held(&client, kind.as_str()).await.0, 1, "the claim added one to the counter");
        // And the other way: no rows, a counter at the capacity: the kind is full.
        client.execute("DELETE FROM archmax_records WHERE kind = $1", &[&kind.as_str()]).await.expect("clear");
        client
            .execute(
                "UPDATE archmax_record_counts SET records = $2 WHERE kind = $1",
                &[&kind.as_str(), &i64::try_from(kind.capacity()).expect("small")],
            )
            .await
            .expect("a full counter");
        match store.claim_record(&record("refused"), 1_000).await {
            Err(StoreError::RecordsFull { .. }) => {}
            other => panic!("a full counter refuses the claim, got {other:?}"),
        }
    });
}

#[test]
fn the_kinds_counter_row_follows_claims_removals_and_pruning() {
    let cluster = TestCluster::require();
    let target = cluster.database("record-counter").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect(&target).await.expect("connect");
        let client = raw(&target).await;
        let kind = "webhook-replay";
        for index in 0..200 {
            // Half expire at 2,000, half live on.
            let expires = if index % 2 == 0 { 2_000 } else { 100_000 };
            assert!(store.claim_record(&replay_record(&format!("r{index}"), expires), 1_000).await.expect("claim"));
        }
        assert!(!store.claim_record(&replay_record("r1", 100_000), 1_000).await.expect("a held key loses"));
        assert_eq!(counted_and_held(&client, kind).await, (200, 200));
        for index in 0..10 {
            assert!(store.remove_record(replay_record("x", 0).kind, &format!("r{index}")).await.expect("remove"));
        }
        assert!(!store.remove_record(replay_record("x", 0).kind, "r0").await.expect("remove again"));
        assert_eq!(counted_and_held(&client, kind).await, (190, 190));
        // A claim after the first half expired prunes them and counts the survivors.
        assert!(store.claim_record(&replay_record("late", 100_000), 3_000).await.expect("claim"));
        assert_eq!(counted_and_held(&client, kind).await, (96, 96));
    });
}

#[test]
fn version_four_counts_the_records_version_three_left() {
    let cluster = TestCluster::require();
    let target = cluster.database("upgrade-records").expect("a database");
    executor().block_on(async {
        let client = raw(&target).await;
        client
            .batch_execute(&format!(
                "CREATE TABLE archmax_schema_version (version integer PRIMARY KEY, \
                 applied_at timestamptz NOT NULL DEFAULT now()); {} {} {} \
                 INSERT INTO archmax_schema_version (version) VALUES (1), (2), (3); \
                 INSERT INTO archmax_records (kind, key, value, expires_ms) \
                     SELECT 'webhook-replay', 'r' || n, '\\x00', 2000 FROM generate_series(1, 5) AS n; \
                 INSERT INTO archmax_records (kind, key, value, expires_ms) VALUES ('inbox-key', 'k', '\\x00', 2000);",
                include_str!("../migrations/0001_sessions.sql"),
                include_str!("../migrations/0002_listing.sql"),
                include_str!("../migrations/0003_records.sql"),
            ))
            .await
            .expect("schema version 3 with records");
        let store = PgStore::connect(&target).await.expect("upgrade to the current schema");
        assert_eq!(counted_and_held(&client, "webhook-replay").await, (5, 5));
        assert_eq!(counted_and_held(&client, "inbox-key").await, (1, 1));
        assert!(!store.claim_record(&replay_record("r1", 3_000), 1_000).await.expect("a kept record holds its key"));
        assert!(store.claim_record(&replay_record("r6", 3_000), 1_000).await.expect("claim"));
        assert_eq!(counted_and_held(&client, "webhook-replay").await, (6, 6));
    });
}

/// A server of this test's own: roles are made on it.
fn own_cluster() -> TestCluster {
    TestCluster::start_own().unwrap_or_else(|message| panic!("these tests need PostgreSQL: {message}"))
}

#[test]
fn a_role_without_create_on_a_fresh_database_is_told_the_servers_words_and_what_to_grant() {
    let cluster = own_cluster();
    let dbname = cluster.database_named("grants").expect("a database");
    let role = cluster.role("rows", None).expect("a role");
    let as_role = cluster.target_as(&dbname, &role).expect("the role's target");
    executor().block_on(async {
        // A role that may not create tables (PostgreSQL 15 and later grant PUBLIC no
        // CREATE on `public`).
        match PgStore::connect(&as_role).await {
            Err(error @ ConnectError::Migration(_)) => {
                let said = error.to_string();
                assert!(said.contains("permission denied for schema public"), "{said}");
                assert!(said.contains(&format!("GRANT CREATE ON SCHEMA public TO {role}")), "{said}");
                assert!(said.contains("as the schema's owner"), "{said}");
            }
            Err(other) => panic!("a role without CREATE cannot migrate, got {other}"),
            Ok(_) => panic!("a role without CREATE cannot migrate"),
        }
    });
}

#[test]
fn once_migrated_a_role_with_only_its_rows_needs_no_create() {
    let cluster = own_cluster();
    let dbname = cluster.database_named("rows").expect("a database");
    let owner = cluster.target_of(&dbname);
    let role = cluster.role("rows", None).expect("a role");
    let as_role = cluster.target_as(&dbname, &role).expect("the role's target");
    executor().block_on(async {
        drop(PgStore::connect(&owner).await.expect("the owner migrates"));
        raw(&owner)
            .await
            .batch_execute(&format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}; \
                 GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"
            ))
            .await
            .expect("grants");
        let store = PgStore::connect(&as_role).await.expect("a migrated database needs no CREATE");
        let mut writer = store.create(&initial("granted")).await.expect("create");
        writer.commit(&step(1, "one")).await.expect("commit");
        drop(writer);
        assert_eq!(store.read("granted").await.expect("read").map(|state| state.seq), Some(1));
        let may_create: bool = raw(&owner)
            .await
            .query_one("SELECT has_schema_privilege($1, 'public', 'CREATE')", &[&role])
            .await
            .expect("privilege")
            .get(0);
        assert!(!may_create, "the role never had CREATE");

        // A newer schema is still refused without the lock or any CREATE.
        raw(&owner)
            .await
            .execute("INSERT INTO archmax_schema_version (version) VALUES (999)", &[])
            .await
            .expect("bump");
        assert!(matches!(PgStore::connect(&as_role).await, Err(ConnectError::SchemaTooNew { found: 999, .. })));
    });
}

#[test]
fn a_target_without_a_password_takes_it_from_its_passfile_unless_others_may_read_it() {
    use std::os::unix::fs::PermissionsExt;
    let cluster = own_cluster();
    let dbname = cluster.database_named("passfile").expect("a database");
    let role = cluster.role("signin", Some(r"pa:ss\word")).expect("a role with a password");
    let as_role = cluster.target_as(&dbname, &role).expect("the role's target");
    let socket = cluster.socket_dir().expect("a socket folder").display().to_string();
    let dir = std::env::temp_dir().join(format!("archmax-passfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let file = dir.join("pgpass");
    std::fs::write(&file, format!("# archmax\n{socket}:*:{dbname}:{role}:pa\\:ss\\\\word\n")).expect("a passfile");
    let chmod = |mode| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
    chmod(0o600);
    executor().block_on(async {
        let owner = raw(&cluster.target_of(&dbname)).await;
        owner.batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {role}")).await.expect("grant");
        let target = format!("{as_role} passfile={}", file.display());
        let store = PgStore::connect(&target).await.expect("signed in with the passfile's password");
        drop(store.create(&initial("signed-in")).await.expect("create"));

        // A passfile its group may read is ignored, as libpq ignores it, and the refused
        // sign-in says why.
        chmod(0o640);
        match PgStore::connect(&target).await {
            Err(error @ ConnectError::Connect(_)) => {
                let said = error.to_string();
                assert!(said.contains("password") && said.contains(&format!("chmod 600 {}", file.display())), "{said}");
            }
            Err(other) => panic!("no password is no sign-in, got {other}"),
            Ok(_) => panic!("a passfile others may read is ignored"),
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_target_that_does_not_read_names_its_key_or_says_to_percent_encode_the_password() {
    executor().block_on(async {
        let refused = |target: &'static str| async move {
            match PgStore::connect(target).await {
                Err(error @ ConnectError::Config(_)) => error.to_string(),
                Err(other) => panic!("{target}: a target that does not read is a Config error, got {other}"),
                Ok(_) => panic!("{target} does not read"),
            }
        };
        let said = refused("host=db.example port=54x32").await;
        assert!(said.contains("`port`"), "{said}");
        let said = refused("host=db.example colour=blue").await;
        assert!(said.contains("`colour`"), "{said}");
        // A password holding `@` or `/` would otherwise move the host: `ss@db.example`.
        for target in ["postgres://app:p@ss@db.example/archmax", "postgres://app:pa/ss@db.example/archmax"] {
            let said = refused(target).await;
            assert!(said.contains("percent-encoded") && said.contains("%40") && said.contains("%2F"), "{said}");
            assert!(!said.contains("pa/ss") && !said.contains("p@ss"), "the password is not shown: {said}");
        }
        // The driver takes all before a URL's first `@` for the credentials: with none
        // before the host, an `@` in the query would make it read another host and drop
        // the TLS mode archmax read. It is refused, to be written `%40`.
        let smuggled = "postgres://db.example/archmax?sslmode=verify-full&application_name=x@db.example/archmax";
        let said = refused(smuggled).await;
        assert!(said.contains("%40"), "{said}");
        // An `@` in a query value after the credentials is not a password's.
        let fine = PgStore::connect("postgres://app@127.0.0.1:1/archmax?application_name=me@home&connect_timeout=1");
        assert!(matches!(fine.await, Err(ConnectError::Connect(_))), "the target reads and is dialled");
    });
}

/// The `application_name`s of the connections to `target`'s database other than `client`'s.
async fn application_names(client: &tokio_postgres::Client) -> Vec<String> {
    let rows = client
        .query(
            "SELECT application_name FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_activity");
    rows.iter().map(|row| row.get(0)).collect()
}

#[test]
fn each_runner_is_named_with_its_host_and_pid_in_pg_stat_activity_unless_the_target_names_it() {
    let cluster = TestCluster::require();
    let target = cluster.database("appname").expect("a database");
    let named = cluster.database("appname-named").expect("a database");
    executor().block_on(async {
        let _store = PgStore::connect(&target).await.expect("connect");
        let names = application_names(&raw(&target).await).await;
        let pid = format!(" {}", std::process::id());
        assert!(!names.is_empty(), "the pool keeps its first connection");
        for name in &names {
            assert!(name.starts_with("archmax ") && name.ends_with(&pid), "{name}");
            assert!(name.len() > "archmax ".len() + pid.len(), "the host is in it: {name}");
            assert!(name.len() <= 63 && name.is_ascii(), "{name}");
        }

        let _store = PgStore::connect(&format!("{named} application_name=blue-runner")).await.expect("connect");
        let names = application_names(&raw(&named).await).await;
        assert!(!names.is_empty() && names.iter().all(|name| name == "blue-runner"), "{names:?}");
    });
}

#[test]
fn a_database_that_takes_no_connection_is_unavailable_not_a_broken_session() {
    // A server that refuses every new connection (down, restarting, at its limit) is a
    // store that cannot be reached for now: the host answers 503 and retries, where a
    // broken session would be a 500.
    let cluster = TestCluster::require();
    let target = cluster.database("unreachable").expect("a database");
    let name = target.rsplit("dbname=").next().expect("a database name").to_string();
    executor().block_on(async {
        let store = PgStore::connect_with(&target, PgOptions { max_connections: 1, ..PgOptions::default() })
            .await
            .expect("connect");
        let admin = raw(&cluster.target_of("postgres")).await;
        admin.batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false")).await.expect("closed");
        admin
            .execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", &[&name])
            .await
            .expect("the store's connections end");
        // The pool may lend its dead connection once before it notices; the next read
        // opens a new one, which the server refuses.
        let mut said = None;
        for _ in 0..20 {
            match store.read("anyone").await {
                Err(StoreError::Unavailable(message)) => {
                    said = Some(message);
                    break;
                }
                Err(_) => continue,
                Ok(found) => panic!("a read of a database that takes no connection answered {found:?}"),
            }
        }
        let said = said.expect("the store says it cannot be reached");
        assert!(said.contains("not currently accepting connections"), "the server's words: {said}");
        assert!(!said.contains("creating a new object"), "the pool's wrapping is left out: {said}");
        admin.batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")).await.expect("open again");
        assert_eq!(store.read("anyone").await.expect("read again").map(|state| state.id.to_string()), None);
    });
}

#[test]
fn a_nul_a_model_put_in_the_head_is_kept_and_refuses_no_commit() {
    // jsonb refuses `\u0000`; the head's column is a copy for filters (a model's todos, a rejection's words), the session is
    // read back from its steps, whole.
    let cluster = TestCluster::require();
    let target = cluster.database("nul_head").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect(&target).await.expect("connect");
        let mut writer = store.create(&initial("nul")).await.expect("create");
        let mut delta = step(1, "noted");
        delta.head.rejected = Some("before\0after".to_string());
        delta.head.todos = vec![serde_json::json!({ "text\0": "a\0b" })];
        writer.commit(&delta).await.expect("the commit is not refused");
        drop(writer);
        let state = store.read("nul").await.expect("read").expect("the session");
        assert_eq!(state.head.rejected.as_deref(), Some("before\0after"));
        assert_eq!(state.head.todos, vec![serde_json::json!({ "text\0": "a\0b" })]);
    });
}
