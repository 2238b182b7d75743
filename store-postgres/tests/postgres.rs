//! The PostgreSQL store against a real server: the conformance suite every store runs,
//! then what only this store does (the schema's version, the seq key against a stale
//! writer, a lost lock, files committed with their step, the size caps).
//!
//! Each test starts its own throwaway server ([`TestCluster::require`]) unless
//! `ARCHMAX_TEST_DATABASE_URL` names one; without PostgreSQL they fail, saying how to
//! get it.

use std::sync::Arc;

use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{ConnectError, PgOptions, PgStore};
use archmax_vm::session::id::SessionId;
use archmax_vm::session::{Delta, Head, Message, SessionState, SessionStore, StoreError, conformance};
use archmax_vm::stdlib::limits::Limits;
use archmax_vm::stdlib::vfs::VfsError;

fn executor() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("an executor")
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
    // Each store value has its own pool and executor, as another process would.
    let connect = || -> Arc<dyn SessionStore> {
        Arc::new(PgStore::connect_blocking(&target, PgOptions::default()).expect("connect"))
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
        let versions = client.query("SELECT version FROM archmax_schema_version", &[]).await.expect("versions");
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].get::<_, i32>(0), archmax_store_postgres::schema::SCHEMA_VERSION);

        client.execute("INSERT INTO archmax_schema_version (version) VALUES (999)", &[]).await.expect("bump");
        match PgStore::connect(&target).await {
            Err(error @ ConnectError::SchemaTooNew { found: 999, .. }) => {
                assert!(error.to_string().contains("upgrade archmax"), "{error}");
            }
            Err(other) => panic!("a newer schema is refused, got {other}"),
            Ok(_) => panic!("a newer schema is refused, got a store"),
        }
        assert!(matches!(PgStore::connect("host=/ port=x").await, Err(ConnectError::Config(_))));
        // This build has no TLS: a target that requires it is refused, never downgraded.
        let tls = PgStore::connect(&format!("{target} sslmode=require")).await;
        assert!(matches!(tls, Err(ConnectError::Connect(_))), "{:?}", tls.err());
    });
}

#[test]
fn stale_writers_lost_locks_and_the_files_of_a_refused_step() {
    let cluster = TestCluster::require();
    let target = cluster.database("writers").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect(&target).await.expect("connect");
        let client = raw(&target).await;

        // A stale writer: the row moved on behind its back (as a writer that lost its
        // lock meanwhile would find). The (session, seq) guard refuses it, and the file
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

        // A writer whose process died: its connection goes, and the lock with it.
        let mut lost = store.create(&initial("lost")).await.expect("create");
        let other = PgStore::connect(&target).await.expect("a second runner");
        assert!(matches!(other.open("lost").await, Err(StoreError::Busy(_))));
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("terminate the writer's connection");
        let mut reopened = None;
        for _ in 0..100 {
            match other.open("lost").await {
                Ok((_, writer)) => {
                    reopened = Some(writer);
                    break;
                }
                Err(StoreError::Busy(_)) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                Err(error) => panic!("reopening after the writer died: {error}"),
            }
        }
        let mut reopened = reopened.expect("the session is free once its writer's connection is gone");
        assert!(lost.commit(&step(1, "from the dead")).await.is_err(), "the dead writer cannot commit");
        reopened.commit(&step(1, "resumed")).await.expect("the new runner commits");
        let state = other.read("lost").await.expect("read").expect("exists");
        assert_eq!(state.messages, vec![Message::User { text: "resumed".into(), opening: None }]);
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
        let mut waiting = initial("waiting");
        waiting.head.pending_input = Some(archmax_vm::session::PendingInput {
            state: "wait".into(),
            reason: "a delivery".into(),
            parked_at: "2026-01-05T09:00:00Z".into(),
            resume_at: Some("2026-01-06T09:00:00Z".into()),
            child: None,
        });
        drop(runner.create(&waiting).await.expect("create a waiting session"));
        assert!(watcher.due("2026-01-06T08:59:59Z").await.expect("due").is_empty());
        assert_eq!(watcher.due("2026-01-06T09:00:00Z").await.expect("due"), ["waiting"]);
    });
}
