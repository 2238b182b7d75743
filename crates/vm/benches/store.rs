//! The cost of one durable step on the filesystem store, beside the floor it is held to.
//!
//! - `fs_store_commit/messages/{20,2000}`: `commit` of a delta carrying two ~500-byte
//!   messages (one model call: the assistant message and its tool result) on a session
//!   that already holds 20 messages, and on one holding 2,000. The two should be about
//!   equal, because a commit appends only the delta (the periodic compaction is amortised
//!   into the per-step cost). Every sample starts from a fresh session of the stated size,
//!   so a sample's own commits do not blur the comparison.
//! - `fs_floor/fdatasync_append`: one raw `write` of a record-sized buffer to a file in the
//!   same temp dir, then `fdatasync`: the floor a commit is compared with (target: a
//!   commit costs at most 1.3 times this).
//! - `fs_store_concurrent/sessions/64`: 64 sessions, one thread each, committing at once;
//!   criterion reports commits per second (`Throughput::Elements`, one element a commit).
//!
//! The fsync cost depends on the filesystem and device under the temp dir (and on what
//! else is writing to it), so compare numbers from one run, never across machines.
//!
//! Measured on the development machine (ext4 on a virtual disk shared with other
//! engineers' builds, so the floor itself moved between 0.18 and 4 ms during the day),
//! medians; "before" is the store that replaced its seal after every commit, run
//! alternately with "after" from two copies of this bench:
//!
//! | | before | after |
//! |---|---|---|
//! | `fdatasync_append` (the floor) | 3.97 ms; 228 µs; 258 µs | 3.82 ms; 256 µs; 187 µs |
//! | commit, 20 messages | 14.9 ms; 1.04 ms; 2.29 ms | 4.18 ms; 587 µs; 444 µs |
//! | commit, 2,000 messages | 16.7 ms; 832 µs; 2.35 ms | 3.86 ms; 375 µs; 206 µs |
//! | 64 sessions at once | 1.70; 4.49; 3.43 K commits/s | 8.9; 11.2; 11.1 K commits/s |
//!
//! In the quietest run the commit cost its floor: 176 µs at 20 and 177 µs at 2,000
//! messages against 176 µs. At 20 messages the cost above the floor is mostly the
//! amortised compaction (seven syncs every ~50 commits while the log stays under
//! 64 KiB), which is why that row varies most.
//!
//! Group commit was tried and left out: a store-wide coordinator where one leader
//! issues `syncfs(2)` for every committer waiting (a lone one `fdatasync`s its own log)
//! did 1.2–1.8 K commits/s in three runs alternating with the plain store's 3.4–7.8 K
//! (one quiet run earlier: 10.6 K against 8.9 K). `syncfs` waits for every dirty page of
//! the whole filesystem, other programs' too, while ext4 already folds concurrent
//! `fdatasync`s of different files into one journal commit: 64 commits take about two
//! fsync latencies without any coordination.

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use archmax_vm::session::fs::{FsStore, FsWriter, SealKeys};
use archmax_vm::session::{Delta, Head, Message, SessionState, ToolCall, ToolStatus};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

const MESSAGE_BYTES: usize = 500;
/// How many sessions commit at once in the concurrent bench.
const CONCURRENT_SESSIONS: usize = 64;

/// A unique temp dir for the bench's sessions, removed when dropped.
struct BenchDir(PathBuf);

impl BenchDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!("archmax-store-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(error) = std::fs::create_dir_all(&path) {
            panic!("could not create the bench dir {}: {error}", path.display());
        }
        Self(path)
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn head(seq: u64) -> Head {
    Head {
        workflow: "support".into(),
        spec_hash: "0123456789abcdef".into(),
        position: Some("triage".into()),
        entry_state: Some("triage".into()),
        trigger: Some("chat".into()),
        updated_at: seq,
        ..Head::default()
    }
}

fn filler(seed: u64) -> String {
    let mut text = format!("step {seed}: ");
    while text.len() < MESSAGE_BYTES {
        text.push_str("the quick brown fox jumps over the lazy dog; ");
    }
    text.truncate(MESSAGE_BYTES);
    text
}

/// An assistant call and its tool answer, about 500 bytes each.
fn two_messages(seq: u64) -> Vec<Message> {
    let call_id = format!("call-{seq}");
    vec![
        Message::Assistant {
            text: filler(seq),
            tool_calls: vec![ToolCall { id: call_id.clone(), name: "read_file".into(), args: json!({"path": "/a"}) }],
        },
        Message::Tool { call_id, name: "read_file".into(), content: filler(seq + 1), status: ToolStatus::Ok },
    ]
}

fn session_with(id: &str, message_count: usize) -> SessionState {
    let messages = (0..message_count as u64 / 2).flat_map(two_messages).collect();
    SessionState {
        id: archmax_vm::session::id::SessionId::parse(id, &[]).expect("a bench id"),
        head: head(0),
        messages,
        ..SessionState::default()
    }
}

/// The deltas of steps `1..=count`: one model call each.
fn deltas(count: u64) -> Vec<Delta> {
    (1..=count).map(|seq| Delta { seq, head: head(seq), messages: two_messages(seq), ..Delta::default() }).collect()
}

fn create(store: &FsStore, id: &str, message_count: usize) -> FsWriter {
    match store.create_writer(&session_with(id, message_count)) {
        Ok(writer) => writer,
        Err(error) => panic!("could not create the bench session `{id}`: {error}"),
    }
}

fn commit_all(writer: &mut FsWriter, deltas: &[Delta]) {
    for delta in deltas {
        if let Err(error) = writer.commit(black_box(delta)) {
            panic!("commit failed: {error}");
        }
    }
}

fn durable_commit(criterion: &mut Criterion) {
    let bench_dir = BenchDir::new();
    let store = FsStore::new(&bench_dir.0, SealKeys::generate().expect("a seal key"));
    let mut group = criterion.benchmark_group("fs_store_commit");
    group.measurement_time(Duration::from_secs(10));
    let mut sample = 0u64;
    for message_count in [20usize, 2_000] {
        group.bench_with_input(BenchmarkId::new("messages", message_count), &message_count, |bencher, &count| {
            bencher.iter_custom(|iterations| {
                sample += 1;
                let id = format!("bench-{count}-{sample}");
                let mut writer = create(&store, &id, count);
                let deltas = deltas(iterations);
                let started = Instant::now();
                commit_all(&mut writer, &deltas);
                let elapsed = started.elapsed();
                drop(writer);
                let _ = std::fs::remove_dir_all(bench_dir.0.join(&id));
                elapsed
            });
        });
    }
    group.finish();
}

/// A record-sized buffer: what one commit of [`two_messages`] appends.
fn record_sized_buffer() -> Vec<u8> {
    let delta = Delta { seq: 1, head: head(1), messages: two_messages(1), ..Delta::default() };
    match serde_json::to_vec(&delta) {
        Ok(bytes) => bytes,
        Err(error) => panic!("the bench delta does not serialise: {error}"),
    }
}

fn append_file(path: &Path) -> File {
    match OpenOptions::new().create(true).append(true).open(path) {
        Ok(file) => file,
        Err(error) => panic!("could not open {}: {error}", path.display()),
    }
}

fn raw_fdatasync(criterion: &mut Criterion) {
    let bench_dir = BenchDir::new();
    let buffer = record_sized_buffer();
    let mut group = criterion.benchmark_group("fs_floor");
    group.measurement_time(Duration::from_secs(10));
    let mut sample = 0u64;
    group.bench_function("fdatasync_append", |bencher| {
        bencher.iter_custom(|iterations| {
            sample += 1;
            let path = bench_dir.0.join(format!("floor-{sample}"));
            let mut file = append_file(&path);
            let started = Instant::now();
            for _ in 0..iterations {
                let synced = file.write_all(black_box(&buffer)).and_then(|()| file.sync_data());
                if let Err(error) = synced {
                    panic!("append and fdatasync failed: {error}");
                }
            }
            let elapsed = started.elapsed();
            drop(file);
            let _ = std::fs::remove_file(&path);
            elapsed
        });
    });
    group.finish();
}

/// 64 sessions on one store, each committing `iterations` steps on its own thread, all
/// released at once; one iteration is one commit by each session.
fn concurrent_sessions(criterion: &mut Criterion) {
    let bench_dir = BenchDir::new();
    let store = FsStore::new(&bench_dir.0, SealKeys::generate().expect("a seal key"));
    let mut group = criterion.benchmark_group("fs_store_concurrent");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(CONCURRENT_SESSIONS as u64));
    let mut sample = 0u64;
    group.bench_with_input(
        BenchmarkId::new("sessions", CONCURRENT_SESSIONS),
        &CONCURRENT_SESSIONS,
        |bencher, &count| {
            bencher.iter_custom(|iterations| {
                sample += 1;
                let ids: Vec<String> = (0..count).map(|index| format!("concurrent-{sample}-{index}")).collect();
                let start = Arc::new(Barrier::new(count + 1));
                let threads: Vec<_> = ids
                    .iter()
                    .map(|id| {
                        let mut writer = create(&store, id, 20);
                        let deltas = deltas(iterations);
                        let start = Arc::clone(&start);
                        std::thread::spawn(move || {
                            start.wait();
                            commit_all(&mut writer, &deltas);
                        })
                    })
                    .collect();
                start.wait();
                let started = Instant::now();
                for thread in threads {
                    if thread.join().is_err() {
                        panic!("a committing session panicked");
                    }
                }
                let elapsed = started.elapsed();
                for id in &ids {
                    let _ = std::fs::remove_dir_all(bench_dir.0.join(id));
                }
                elapsed
            });
        },
    );
    group.finish();
}

criterion_group!(benches, durable_commit, raw_fdatasync, concurrent_sessions);
criterion_main!(benches);
