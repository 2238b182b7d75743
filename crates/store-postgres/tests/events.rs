//! Session events in the store: staged events are written with the next step of their
//! root session (a sub-workflow's count with its root), numbered from 1 without gaps,
//! never by a writer that was taken over, the rest when the writer closes, the oldest
//! pruned past the retention, announced to every runner, and removed with the session.

use std::time::Duration;

use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{PgOptions, PgStore};
use archmax_vm::session::event_log::EventLog;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::{Delta, Head, SessionState, SessionStore, StoreError};

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

fn step(seq: u64) -> Delta {
    Delta { seq, head: Head { workflow: "w".into(), spec_hash: "ab".into(), ..Head::default() }, ..Delta::default() }
}

async fn bodies(log: &dyn EventLog, root: &str, after: u64) -> Vec<(u64, String)> {
    log.after(root, after, 1000).await.expect("read").into_iter().map(|event| (event.id, event.json)).collect()
}

#[test]
fn events_are_written_with_their_roots_steps_numbered_once_and_never_by_a_writer_taken_over() {
    let cluster = TestCluster::require();
    let target = cluster.database("events").expect("a database");
    executor().block_on(async {
        let options = PgOptions { events_kept: 4, ..PgOptions::default() };
        let runner = PgStore::connect_with(&target, options.clone()).await.expect("a runner");
        let other = PgStore::connect_with(&target, options).await.expect("another runner");
        let (log, seen) = (runner.event_log().expect("a fleet store"), other.event_log().expect("a fleet store"));
        let mut feed = seen.follow().await.expect("follow");

        let mut root = runner.create(&initial("r")).await.expect("create");
        log.stage("r", "{\"n\":1}");
        log.stage("r", "{\"n\":2}");
        assert!(bodies(&*seen, "r", 0).await.is_empty(), "staged is not committed");
        root.commit(&step(1)).await.expect("commit 1");
        assert_eq!(bodies(&*seen, "r", 0).await, [(1, "{\"n\":1}".into()), (2, "{\"n\":2}".into())]);
        let heard = tokio::time::timeout(Duration::from_secs(30), feed.next()).await.expect("in time");
        assert_eq!(heard, Some(("r".to_string(), 2)), "another runner hears of them");

        // A sub-workflow's events count with its root, written by the child's commit.
        let mut child = runner.create(&initial("r~1")).await.expect("create the child");
        log.stage("r~1", "{\"n\":3}");
        child.commit(&step(1)).await.expect("the child commits");
        drop(child);
        assert_eq!(seen.last("r").await.expect("last"), 3);

        // A writer taken over writes no events; they are the dead runner's, shown nowhere.
        let client = raw(&target).await;
        client
            .execute("UPDATE archmax_sessions SET lease_expires = now() - interval '1 second' WHERE id = 'r'", &[])
            .await
            .expect("run the lease out");
        let (_, mut taken) = other.open("r").await.expect("taken over");
        log.stage("r", "{\"n\":\"stale\"}");
        assert!(matches!(root.commit(&step(2)).await, Err(StoreError::TakenOver(_))));
        drop(root);
        assert_eq!(seen.last("r").await.expect("last"), 3, "neither the commit nor the close wrote them");

        // The new holder's events follow on; closing writes the rest and keeps the newest 4.
        seen.stage("r", "{\"n\":4}");
        taken.commit(&step(2)).await.expect("the new holder commits");
        seen.stage("r", "{\"n\":5}");
        seen.stage("r", "{\"n\":6}");
        drop(taken);
        let kept = bodies(&*seen, "r", 0).await;
        let ids: Vec<u64> = kept.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [3, 4, 5, 6], "numbered on without a gap, the oldest pruned: {kept:?}");
        assert_eq!(bodies(&*log, "r", 5).await, [(6, "{\"n\":6}".into())]);

        assert!(other.remove("r").await.expect("remove"));
        assert!(bodies(&*seen, "r", 0).await.is_empty() && seen.last("r").await.expect("last") == 0);
    });
}

async fn raw(target: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(target, tokio_postgres::NoTls).await.expect("a raw connection");
    tokio::spawn(connection);
    client
}
