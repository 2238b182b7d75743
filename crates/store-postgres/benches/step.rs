//! A durable step on the PostgreSQL store, against a throwaway server on a unix socket
//! (`fsync = on`, `synchronous_commit = on`), or `ARCHMAX_TEST_DATABASE_URL`.
//!
//! `commit/messages/N`: one model call's step (an assistant message with a tool call and
//! its ~500-byte result) on a session already holding N messages; the two lengths should
//! cost the same, because a commit never touches the transcript. `concurrent/sessions/N`:
//! the same steps spread over N sessions committing at once on a multi-threaded
//! executor; criterion reports the step rate, so 64 against 1 is the fleet's speed-up.
//! `no_fsync_commit/messages/N` and `no_fsync_concurrent/sessions/N` repeat the first two
//! on a server started with `fsync = off` (not durable): the store's own cost per step,
//! and the fleet's step rate, without the disk's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use archmax_store_postgres::test_cluster::TestCluster;
use archmax_store_postgres::{PgOptions, PgStore};
use archmax_vm::session::id::SessionId;
use archmax_vm::session::{Delta, Head, Message, SessionState, SessionStore, ToolCall, ToolStatus};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// One model call: what the model said with its call, and the call's answer.
fn model_call(seq: u64) -> Vec<Message> {
    let body = |what: &str| format!("{what} {seq}: {}", "lorem ipsum dolor sit amet ".repeat(18));
    let call_id = format!("call-{seq}");
    vec![
        Message::Assistant {
            text: body("thinking"),
            tool_calls: vec![ToolCall {
                id: call_id.clone(),
                name: "read_file".into(),
                args: serde_json::json!({ "file_path": "scratchpad/a.md" }),
            }],
        },
        Message::Tool { call_id, name: "read_file".into(), content: body("content"), status: ToolStatus::Ok },
    ]
}

fn head(seq: u64) -> Head {
    Head { workflow: "ring".into(), spec_hash: "0123abcd".into(), updated_at: seq, ..Head::default() }
}

fn step(seq: u64) -> Delta {
    Delta { seq, head: head(seq), messages: model_call(seq), ..Delta::default() }
}

fn session(id: &str, messages: usize) -> SessionState {
    SessionState {
        id: SessionId::from_store(id),
        head: head(0),
        messages: (0..messages as u64 / 2).flat_map(model_call).collect(),
        ..SessionState::default()
    }
}

fn connect(cluster: &TestCluster, executor: &tokio::runtime::Runtime) -> Arc<dyn SessionStore> {
    let target = cluster.database("bench").unwrap_or_else(|error| panic!("no bench database: {error}"));
    Arc::new(
        PgStore::connect_blocking(executor.handle(), &target, PgOptions::default())
            .unwrap_or_else(|error| panic!("connect: {error}")),
    )
}

fn benches(criterion: &mut Criterion) {
    let cluster = TestCluster::require();
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("executor: {error}"));
    let store = connect(&cluster, &executor);
    let mut sample = 0u64;
    commits(criterion, "postgres_store_commit", &store, &executor, &mut sample);
    concurrent(criterion, "postgres_store_concurrent", &store, &executor, &mut sample);
    drop(store);
    drop(cluster);
    let unsynced = TestCluster::start_with(false).unwrap_or_else(|message| panic!("no server: {message}"));
    let store = connect(&unsynced, &executor);
    commits(criterion, "postgres_store_no_fsync_commit", &store, &executor, &mut sample);
    concurrent(criterion, "postgres_store_no_fsync_concurrent", &store, &executor, &mut sample);
}

/// One step at a time on a session of 20 and of 2,000 messages.
fn commits(
    criterion: &mut Criterion,
    name: &str,
    store: &Arc<dyn SessionStore>,
    executor: &tokio::runtime::Runtime,
    sample: &mut u64,
) {
    let mut group = criterion.benchmark_group(name);
    group.measurement_time(Duration::from_secs(8));
    for messages in [20usize, 2_000] {
        group.bench_with_input(BenchmarkId::new("messages", messages), &messages, |bencher, &messages| {
            bencher.iter_custom(|iterations| {
                *sample += 1;
                let id = format!("commit-{messages}-{sample}");
                executor.block_on(async {
                    let mut writer = store.create(&session(&id, messages)).await.unwrap_or_else(|e| panic!("{e}"));
                    let steps: Vec<Delta> = (1..=iterations).map(step).collect();
                    let started = Instant::now();
                    for delta in &steps {
                        writer.commit(delta).await.unwrap_or_else(|error| panic!("commit: {error}"));
                    }
                    started.elapsed()
                })
            });
        });
    }
    group.finish();
}

/// The step rate of 1 session against 64 committing at once.
fn concurrent(
    criterion: &mut Criterion,
    name: &str,
    store: &Arc<dyn SessionStore>,
    executor: &tokio::runtime::Runtime,
    sample: &mut u64,
) {
    let mut group = criterion.benchmark_group(name);
    group.measurement_time(Duration::from_secs(8));
    for sessions in [1usize, 64] {
        group.throughput(Throughput::Elements(sessions as u64));
        group.bench_with_input(BenchmarkId::new("sessions", sessions), &sessions, |bencher, &sessions| {
            // One iteration is one step in each of the sessions, all at once.
            bencher.iter_custom(|iterations| {
                *sample += 1;
                executor.block_on(async {
                    let mut writers = Vec::with_capacity(sessions);
                    for index in 0..sessions {
                        let id = format!("fleet-{sample}-{index}");
                        writers.push(store.create(&session(&id, 20)).await.unwrap_or_else(|e| panic!("{e}")));
                    }
                    let started = Instant::now();
                    let tasks: Vec<_> = writers
                        .into_iter()
                        .map(|mut writer| {
                            tokio::spawn(async move {
                                for seq in 1..=iterations {
                                    writer.commit(&step(seq)).await.unwrap_or_else(|error| panic!("commit: {error}"));
                                }
                            })
                        })
                        .collect();
                    for task in tasks {
                        task.await.unwrap_or_else(|error| panic!("a session task: {error}"));
                    }
                    started.elapsed()
                })
            });
        });
    }
    group.finish();
}

criterion_group!(postgres, benches);
criterion_main!(postgres);
