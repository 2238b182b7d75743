//! Session leases against a real server: a runner that dies is taken over one term later,
//! one that stalls is fenced off, a long turn keeps its session, a small pool serves many
//! open sessions, claims hand each chore to one runner, and all of it works through
//! PgBouncer in transaction mode.
//!
//! Each test starts its own throwaway server ([`TestCluster::require`]) unless
//! `ARCHMAX_TEST_DATABASE_URL` names one (the pooler test always starts its own).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{ConnectError, PgOptions, PgStore};
use archmax_vm::session::id::SessionId;
use archmax_vm::session::store::Chore;
use archmax_vm::session::{
    Delta, Head, Message, PendingInput, SessionState, SessionStore, Status, StoreError, conformance,
};

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

fn running(id: &str) -> SessionState {
    let mut state = initial(id);
    state.head.status = Status::Running;
    state
}

fn due(id: &str, resume_at: &str) -> SessionState {
    let mut state = initial(id);
    state.head.status = Status::AwaitingInput;
    state.head.pending_input = Some(PendingInput {
        state: "wait".into(),
        reason: "a delivery".into(),
        parked_at: "2026-01-05T09:00:00Z".into(),
        resume_at: Some(resume_at.into()),
        child: None,
    });
    state
}

fn step(seq: u64, text: &str) -> Delta {
    Delta {
        seq,
        head: Head { workflow: "w".into(), spec_hash: "ab".into(), updated_at: seq, ..Head::default() },
        messages: vec![Message::User { text: text.to_string(), opening: None }],
        ..Delta::default()
    }
}

fn options(term: Duration) -> PgOptions {
    PgOptions { lease_term: term, ..PgOptions::default() }
}

async fn raw(target: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(target, tokio_postgres::NoTls).await.expect("a raw connection");
    tokio::spawn(connection);
    client
}

/// Opens `id` on `store` as soon as it is free, polling every 20 ms for at most a minute
/// (a guard against a hang, not a measurement); the time it took.
async fn open_when_free(store: &PgStore, id: &str) -> (Box<dyn archmax_vm::session::SessionWriter>, Duration) {
    let started = std::time::Instant::now();
    loop {
        match store.open(id).await {
            Ok((_, writer)) => return (writer, started.elapsed()),
            Err(StoreError::Busy(_)) if started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("opening {id}: {error}"),
        }
    }
}

#[test]
fn a_runner_that_stops_renewing_is_taken_over_one_term_later_and_a_live_one_keeps_its_session() {
    let cluster = TestCluster::require();
    let target = cluster.database("death").expect("a database");
    let term = Duration::from_millis(900);
    // The first runner's work runs on an executor of its own, so it can die on its own.
    let doomed = executor();
    let first = PgStore::connect_blocking(doomed.handle(), &target, options(term)).expect("the first runner");
    let host = executor();
    host.block_on(async {
        let second = PgStore::connect(&target).await.expect("the second runner");
        let mut writer = first.create(&running("cut")).await.expect("create");
        writer.commit(&step(1, "before the model call")).await.expect("commit 1");

        // A model call three terms long: the renewals keep the session the first runner's.
        for _ in 0..6 {
            tokio::time::sleep(term / 2).await;
            assert!(matches!(second.open("cut").await, Err(StoreError::Busy(_))), "renewed, still held");
        }
        writer.commit(&step(2, "after it")).await.expect("a writer that kept renewing commits");

        // The first runner dies: its executor stops, and nothing renews or gives back its
        // lease (its writer is never dropped).
        std::mem::forget(writer);
        doomed.shutdown_background();
        let (mut taken, waited) = open_when_free(&second, "cut").await;
        assert!(waited > Duration::ZERO);
        eprintln!("taken over {} ms after the runner died (lease term {} ms)", waited.as_millis(), term.as_millis());
        taken.commit(&step(3, "continued")).await.expect("the second runner continues from step 2");
        let state = second.read("cut").await.expect("read").expect("exists");
        assert_eq!(state.seq, 3);
        assert_eq!(state.messages.len(), 3, "nothing lost, nothing doubled");
    });
}

#[test]
fn a_writer_that_stalled_past_its_lease_is_fenced_off_and_cannot_end_the_new_holders_lease() {
    let cluster = TestCluster::require();
    let target = cluster.database("fence").expect("a database");
    executor().block_on(async {
        let first = PgStore::connect(&target).await.expect("the first runner");
        let second = PgStore::connect(&target).await.expect("the second runner");
        let third = PgStore::connect(&target).await.expect("a third runner");
        let client = raw(&target).await;
        let mut stalled = first.create(&initial("fenced")).await.expect("create");
        stalled.commit(&step(1, "one")).await.expect("commit 1");
        first.files("fenced").expect("files").write("scratchpad/late.md", b"never").expect("stage a file");

        // The first runner stalls past its lease (a pause longer than the term): as far
        // as the database can tell, its lease ran out.
        client
            .execute("UPDATE archmax_sessions SET lease_expires = now() - interval '1 second' WHERE id = 'fenced'", &[])
            .await
            .expect("run the lease out");
        let (state, mut taken) = second.open("fenced").await.expect("the second runner takes the session over");
        assert_eq!(state.seq, 1);

        // The stalled writer wakes: its step and its file are refused, whatever its seq.
        match stalled.commit(&step(2, "from the stalled runner")).await {
            Err(StoreError::TakenOver(id)) => assert_eq!(id, "fenced"),
            other => panic!("a fenced-off writer is TakenOver, got {other:?}"),
        }
        let files =
            client.query("SELECT path FROM archmax_files WHERE session_id = 'fenced'", &[]).await.expect("files");
        assert!(files.is_empty(), "the fenced-off writer's file was not written");
        // Dropping it gives back nothing of the new holder's.
        drop(stalled);
        assert!(matches!(third.open("fenced").await, Err(StoreError::Busy(_))), "the new holder keeps it");
        taken.commit(&step(2, "from the new holder")).await.expect("the new holder commits");
        drop(taken);
        let (state, _writer) = third.open("fenced").await.expect("free once the holder is done");
        assert_eq!(state.messages.last(), Some(&Message::User { text: "from the new holder".into(), opening: None }));
        assert!(matches!(first.remove("fenced").await, Err(StoreError::Busy(_))), "a held session is not removed");
    });
}

#[test]
fn a_pool_of_two_connections_serves_forty_open_sessions() {
    let cluster = TestCluster::require();
    let target = cluster.database("pool").expect("a database");
    executor().block_on(async {
        let store = PgStore::connect_with(&target, PgOptions { max_connections: 2, ..PgOptions::default() })
            .await
            .expect("connect");
        let client = raw(&target).await;
        let mut writers = Vec::new();
        for index in 0..40 {
            writers.push(store.create(&initial(&format!("open-{index:02}"))).await.expect("create"));
        }
        let commits = writers.iter_mut().enumerate().map(|(index, writer)| async move {
            writer.commit(&step(1, &format!("step of {index}"))).await
        });
        for result in futures_join_all(commits).await {
            result.expect("every open session commits");
        }
        let connections: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'archmax' AND datname = current_database()",
                &[],
            )
            .await
            .expect("count")
            .get(0);
        assert!(connections <= 2, "the store opened {connections} connections for 40 open sessions");
        let held: i64 = client
            .query_one("SELECT count(*) FROM archmax_sessions WHERE lease_owner IS NOT NULL", &[])
            .await
            .expect("count")
            .get(0);
        assert_eq!(held, 40);
        drop(writers);
        let held: i64 = client
            .query_one("SELECT count(*) FROM archmax_sessions WHERE lease_owner IS NOT NULL", &[])
            .await
            .expect("count")
            .get(0);
        assert_eq!(held, 0, "dropped writers gave their leases back");
    });
}

/// Runs every future to its end, concurrently, on the current task.
async fn futures_join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(context) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// What the test's runners run: workflow `w` at spec hash `ab`, as every session here.
fn runnable() -> Vec<(String, String)> {
    vec![("w".to_string(), "ab".to_string())]
}

#[test]
fn claims_hand_each_due_session_and_each_cut_turn_to_one_runner_of_a_fleet() {
    let cluster = TestCluster::require();
    let target = cluster.database("claims").expect("a database");
    let host = executor();
    host.block_on(async {
        let runners: Vec<Arc<PgStore>> = futures_join_all((0..3).map(|_| PgStore::connect(&target)))
            .await
            .into_iter()
            .map(|store| Arc::new(store.expect("a runner")))
            .collect();
        let maker = &runners[0];
        for index in 0..60 {
            drop(maker.create(&due(&format!("due-{index:02}"), "2026-01-06T09:00:00Z")).await.expect("create"));
            drop(maker.create(&running(&format!("cut-{index:02}"))).await.expect("create"));
        }
        drop(maker.create(&due("later", "2030-01-01T00:00:00Z")).await.expect("create"));
        drop(maker.create(&due("child~1", "2026-01-06T09:00:00Z")).await.expect("create"));
        // Held by a live writer: nobody else's to wake or continue.
        let _held = maker.create(&running("held")).await.expect("create");
        let by_ms = 1_767_690_000_000; // 2026-01-06T09:00:00Z
        // A runner that cannot run the sessions' spec (it serves another build of `w`, or
        // no `w` at all) is handed none of them, so none waits on a runner that would fail.
        let other_build = [("w".to_string(), "cd".to_string()), ("v".to_string(), "ab".to_string())];
        for chore in [Chore::Due { by_ms }, Chore::Stranded] {
            let none = runners[2].claim_chores(chore, &other_build, 100).await.expect("claim");
            assert_eq!(none, Some(Vec::new()), "{chore:?}");
        }

        for (chore, expected) in [(Chore::Due { by_ms }, "due-"), (Chore::Stranded, "cut-")] {
            // Every runner claims batches of 7 at once, until none is left.
            let claims = runners.iter().map(|runner| {
                let runner = Arc::clone(runner);
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    loop {
                        let batch =
                            runner.claim_chores(chore, &runnable(), 7).await.expect("claim").expect("a fleet store");
                        assert!(batch.len() <= 7, "a batch is bounded");
                        if batch.is_empty() {
                            return mine;
                        }
                        mine.extend(batch);
                    }
                })
            });
            let claimed: Vec<Vec<String>> =
                futures_join_all(claims).await.into_iter().map(|joined| joined.expect("a claimer")).collect();
            let all: Vec<&String> = claimed.iter().flatten().collect();
            let distinct: BTreeSet<&String> = all.iter().copied().collect();
            assert_eq!(all.len(), distinct.len(), "no session was claimed twice: {claimed:?}");
            let wanted: BTreeSet<String> = (0..60).map(|index| format!("{expected}{index:02}")).collect();
            assert_eq!(distinct.into_iter().cloned().collect::<BTreeSet<String>>(), wanted, "{chore:?}");
            // Claimed work stays claimed for a term: a second sweep finds nothing.
            assert_eq!(runners[1].claim_chores(chore, &runnable(), 100).await.expect("claim"), Some(Vec::new()));
        }
    });
}

#[test]
fn a_server_that_commits_without_waiting_for_its_disk_is_refused() {
    let cluster = TestCluster::require();
    let target = cluster.database("durable").expect("a database");
    executor().block_on(async {
        let client = raw(&target).await;
        client
            .batch_execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); END $$")
            .await
            .expect("turn durability off");
        match PgStore::connect(&target).await {
            Err(error @ ConnectError::NotDurable(_)) => {
                let said = error.to_string();
                assert!(said.contains("synchronous_commit = off") && said.contains("ALTER ROLE"), "{said}");
            }
            Err(other) => panic!("expected NotDurable, got {other}"),
            Ok(_) => panic!("a server that may lose committed steps was accepted"),
        }
    });
}

#[test]
fn the_store_keeps_its_contract_and_its_leases_through_pgbouncer_in_transaction_mode() {
    let cluster = TestCluster::start_own().unwrap_or_else(|message| panic!("these tests need PostgreSQL: {message}"));
    let name = cluster.database_named("pooled").expect("a database");
    // Two server connections for every runner together: no session can own one.
    let pooler = cluster.pooler(&name, 2).unwrap_or_else(|message| panic!("these tests need PgBouncer: {message}"));
    let target = pooler.target();
    let host = executor();
    let pooled = || PgOptions { behind_pooler: true, ..PgOptions::default() };
    let connect = || -> Arc<dyn SessionStore> {
        Arc::new(PgStore::connect_blocking(host.handle(), &target, pooled()).expect("connect"))
    };
    conformance::run("postgres store behind pgbouncer", &connect);

    host.block_on(async {
        let first = PgStore::connect_with(&target, pooled()).await.expect("a runner");
        let second = PgStore::connect_with(&target, pooled()).await.expect("another runner");
        // More open sessions than server connections, committing at once.
        let mut writers = Vec::new();
        for index in 0..12 {
            writers.push(first.create(&initial(&format!("pooled-{index:02}"))).await.expect("create"));
        }
        for seq in 1..=3 {
            let commits = writers.iter_mut().map(|writer| async move { writer.commit(&step(seq, "pooled")).await });
            for result in futures_join_all(commits).await {
                result.expect("a commit through the pooler");
            }
        }
        assert!(matches!(second.open("pooled-00").await, Err(StoreError::Busy(_))));
        drop(writers);
        let (state, _writer) = second.open("pooled-00").await.expect("free once dropped");
        assert_eq!(state.seq, 3);
        // A pooler cannot LISTEN: the feed of other runners' events goes to the server
        // itself while everything else goes through the pooler.
        let direct = PgOptions { listen_target: Some(cluster.target_of(&name)), ..pooled() };
        let listening = PgStore::connect_with(&target, direct).await.expect("a runner listening directly");
        listening.event_log().expect("a fleet store").check_follow().await.expect("a direct feed hears its probe");
        // Listening through the pooler opens a feed that hears nothing: the check says so.
        let deaf = first.event_log().expect("a fleet store");
        drop(deaf.follow().await.expect("a feed through the pooler opens"));
        match deaf.check_follow().await {
            Err(StoreError::Unavailable(said)) => assert!(said.contains("pooler in transaction mode"), "{said}"),
            other => panic!("a feed through a pooler in transaction mode passed the check: {other:?}"),
        }
        let mut feed = listening.event_log().expect("a fleet store").follow().await.expect("follow");
        let (_, mut writer) = first.open("pooled-05").await.expect("open");
        first.event_log().expect("a fleet store").stage("pooled-05", "{}");
        writer.commit(&step(4, "with an event")).await.expect("commit");
        let heard = tokio::time::timeout(Duration::from_secs(30), feed.next()).await.expect("heard in time");
        assert_eq!(heard, Some(("pooled-05".to_string(), 1)));
        drop(writer);

        // Claims through the pooler: every free running session, not the held one.
        let claimed =
            second.claim_chores(Chore::Stranded, &runnable(), 1000).await.expect("claim").expect("a fleet store");
        assert!(claimed.iter().any(|id| id == "pooled-01"), "{claimed:?}");
        assert!(!claimed.iter().any(|id| id == "pooled-00"), "{claimed:?}");
    });
}
