//! Replay protection across runners: a signed webhook accepted by one runner is refused
//! by every runner on the same session store, and by a runner started again on it,
//! because the accepted signatures are kept in the store (filesystem and PostgreSQL);
//! and a firing that was refused keeps its signature for an honest retry, while one whose
//! runner was taken over after it committed is answered as running and keeps it.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use archmax_store_postgres::PgStore;
use archmax_store_postgres::test_cluster::TestCluster;
use archmax_vm::session::SessionStore;
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::memory::MemoryStore;

use super::configured::{INBOX, INBOX_TAPE, NOW_MS, SECRET, clock, server_on, server_with_model};
use super::{compiled, listen, workspace_of};

/// Fires one signed request at a runner on `first`, then the same bytes at a second
/// runner on `second` (the same sessions), then at a runner started afresh on `restarted`.
async fn a_replay_is_refused_by_every_runner_on_the_store(
    first: Arc<dyn SessionStore>,
    second: Arc<dyn SessionStore>,
    restarted: Arc<dyn SessionStore>,
) {
    let files = [("workflows/inbox/workflow.yaml", INBOX)];
    let one = listen(Arc::new(server_on(&files, INBOX_TAPE, clock(), first))).await;
    let two = listen(Arc::new(server_on(&files, INBOX_TAPE, clock(), second))).await;
    let now = NOW_MS / 1000;
    let mail = json!({ "thread_id": "thread-replayed", "mail": { "text": "Where is my parcel?" } });

    let (status, accepted) = one.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "the first delivery runs: {accepted}");
    let (status, replayed) = two.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "another runner on the store refuses the replay: {replayed}");
    assert!(replayed["error"]["message"].as_str().is_some_and(|text| text.contains("replay is refused")), "{replayed}");
    // Another request signed at the same second is not a replay.
    let other = json!({ "thread_id": "thread-replayed", "mail": { "text": "Any news?" } });
    let (status, joined) = two.fire("mail-in", &other, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    one.stop().await;
    two.stop().await;

    let again = listen(Arc::new(server_on(&files, INBOX_TAPE, clock(), restarted))).await;
    let (status, replayed) = again.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a runner started again refuses the replay: {replayed}");
    let (status, replayed) = again.fire("mail-in", &other, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{replayed}");
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_replayed_to_another_runner_on_one_sessions_folder_or_after_a_restart_is_refused() {
    let workspace = workspace_of(&[]);
    let folder = workspace.join("shared-sessions");
    // Runners sharing one sessions folder share its seal key too.
    let keys = archmax_vm::session::fs::seal_key::SealKeys::for_workspace(&workspace).expect("the seal key");
    let store = || Arc::new(FsStore::new(&folder, keys.clone())) as Arc<dyn SessionStore>;
    a_replay_is_refused_by_every_runner_on_the_store(store(), store(), store()).await;
    let _ = std::fs::remove_dir_all(folder);
}

#[test]
fn a_signed_webhook_replayed_to_another_runner_on_one_database_or_after_a_restart_is_refused() {
    // The cluster is made and dropped outside the executor (it blocks).
    let cluster = TestCluster::require();
    let target = cluster.database("replay").expect("a database");
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor");
    executor.block_on(async {
        let mut stores = Vec::new();
        for _ in 0..3 {
            stores.push(Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>);
        }
        let [first, second, restarted]: [Arc<dyn SessionStore>; 3] =
            stores.try_into().unwrap_or_else(|_| panic!("three stores"));
        a_replay_is_refused_by_every_runner_on_the_store(first, second, restarted).await;
    });
    drop(executor);
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_firing_refused_400_is_accepted_when_sent_again_after_the_fix_and_then_refused_as_a_replay() {
    let files = [("workflows/inbox/workflow.yaml", INBOX)];
    let server = Arc::new(server_on(&files, INBOX_TAPE, clock(), Arc::new(MemoryStore::new())));
    let running = listen(Arc::clone(&server)).await;
    let now = NOW_MS / 1000;
    // `priority` is not declared by the trigger yet: the firing is refused, 400.
    let mail = json!({ "thread_id": "thread-retried", "priority": "high", "mail": { "text": "Where is my parcel?" } });
    let (status, refused) = running.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    // The host declares it; the sender sends the very same signed request again.
    let declared = INBOX.replace(
        "          - { name: thread_id, type: string }\n",
        "          - { name: thread_id, type: string }\n          - { name: priority, type: string }\n",
    );
    assert_ne!(declared, INBOX);
    let loaded = server.load_program(compiled(&workspace_of(&[("workflows/inbox/workflow.yaml", &declared)])));
    assert_eq!(loaded.len(), 1);
    let (status, accepted) = running.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::OK, "the refused firing did not use up its signature: {accepted}");
    let (status, replayed) = running.fire("mail-in", &mail, Some(SECRET), now).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "an accepted firing is not accepted twice: {replayed}");
    assert!(replayed["error"]["message"].as_str().is_some_and(|text| text.contains("replay is refused")), "{replayed}");
    running.stop().await;
}

/// Answers once the test lets it, saying when it was asked.
#[derive(Default)]
struct Held {
    asked: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

impl archmax_vm::model::ModelAdapter for Held {
    fn call<'a>(&'a self, _: archmax_vm::model::ModelRequest<'a>) -> archmax_vm::model::ModelFuture<'a> {
        Box::pin(async move {
            self.asked.notify_one();
            self.release.notified().await;
            Ok(archmax_vm::model::ModelResponse {
                text: "Thanks, we read your mail.".to_string(),
                ..Default::default()
            })
        })
    }
}

#[test]
fn a_firing_whose_runner_was_taken_over_after_it_committed_is_answered_running_and_not_run_again() {
    // The runner stalls in its model call (a pause, a long GC, a VM frozen) and another
    // runner takes the session's lease: the stalled runner's next commit is fenced off.
    // The firing was applied (its session was created), so the sender hears that it runs
    // on, and the same signed request sent again is a replay, not a second firing.
    let cluster = TestCluster::require();
    let target = cluster.database("taken_firing").expect("a database");
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor");
    executor.block_on(async {
        let store = Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>;
        let held = Arc::new(Held::default());
        let files = [("workflows/inbox/workflow.yaml", INBOX)];
        let model = Arc::clone(&held) as Arc<dyn archmax_vm::model::ModelAdapter>;
        let runner = listen(Arc::new(server_with_model(&files, model, clock(), store))).await;
        let (database, connection) =
            tokio_postgres::connect(&target, tokio_postgres::NoTls).await.expect("a raw connection");
        tokio::spawn(connection);
        let now = NOW_MS / 1000;
        let mail = json!({ "thread_id": "thread-taken", "mail": { "text": "Is my parcel lost?" } });

        let take_over = async {
            held.asked.notified().await;
            let moved = database
                .execute(
                    "UPDATE archmax_sessions SET lease_owner = 'another runner', \
                     lease_token = nextval('archmax_lease_tokens'), lease_expires = now() + interval '1 hour' \
                     WHERE id = 'thread-taken'",
                    &[],
                )
                .await
                .expect("the lease moves");
            assert_eq!(moved, 1, "the session was created before its model call");
            held.release.notify_one();
        };
        let ((status, answered), ()) = tokio::join!(runner.fire("mail-in", &mail, Some(SECRET), now), take_over);
        assert_eq!(status, StatusCode::ACCEPTED, "{answered}");
        assert_eq!(
            (answered["sessionId"].as_str(), answered["status"].as_str()),
            (Some("thread-taken"), Some("running"))
        );

        let (status, replayed) = runner.fire("mail-in", &mail, Some(SECRET), now).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "the record was kept: {replayed}");
        assert!(
            replayed["error"]["message"].as_str().is_some_and(|text| text.contains("replay is refused")),
            "{replayed}"
        );
        runner.stop().await;
    });
    drop(executor);
}

#[test]
fn a_firing_refused_busy_while_another_runner_commits_keeps_its_signature_for_the_retry() {
    // Another runner holds the conversation and keeps committing to it: this runner's
    // firing is refused busy and applied nothing, however far the session moved
    // meanwhile, so the sender's retry once the session is free is not a replay.
    let cluster = TestCluster::require();
    let target = cluster.database("busy_firing").expect("a database");
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("an executor");
    executor.block_on(async {
        let store = Arc::new(PgStore::connect(&target).await.expect("connect")) as Arc<dyn SessionStore>;
        let other = Arc::new(PgStore::connect(&target).await.expect("another runner"));
        let files = [("workflows/inbox/workflow.yaml", INBOX)];
        let runner = listen(Arc::new(server_on(&files, INBOX_TAPE, clock(), store))).await;
        let now = NOW_MS / 1000;
        let first = json!({ "thread_id": "thread-held", "mail": { "text": "Hello." } });
        let (status, answered) = runner.fire("mail-in", &first, Some(SECRET), now).await;
        assert_eq!(status, StatusCode::OK, "the conversation starts: {answered}");

        let (state, mut writer) = other.open("thread-held").await.expect("the other runner holds it");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let committing = {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut seq = state.seq;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    seq += 1;
                    let step = archmax_vm::session::Delta { seq, head: state.head.clone(), ..Default::default() };
                    writer.commit(&step).await.expect("the other runner commits");
                    tokio::task::yield_now().await;
                }
                writer
            })
        };
        let second = json!({ "thread_id": "thread-held", "mail": { "text": "Any news?" } });
        let (status, refused) = runner.fire("mail-in", &second, Some(SECRET), now).await;
        assert_eq!(status, StatusCode::CONFLICT, "{refused}");
        assert_eq!(refused["error"]["code"], "session.busy", "{refused}");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(committing.await.expect("the committer"));

        let (status, retried) = runner.fire("mail-in", &second, Some(SECRET), now).await;
        assert_eq!(status, StatusCode::OK, "the retry runs, it is no replay: {retried}");
        runner.stop().await;
    });
    drop(executor);
}
