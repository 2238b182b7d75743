//! The cost of one durable step on the filesystem store.
//!
//! Times `commit` of a delta carrying two ~500-byte messages on a session that already
//! holds 20 messages and on one holding 2,000. The one thing to read from the result:
//! the two times should be about equal, because a commit appends only the delta (the
//! periodic compaction is amortised into the per-step cost). Every sample starts from a
//! fresh session of the stated size in a temp dir, so a sample's own commits do not blur
//! the comparison. Note that the fsync cost depends on the filesystem under the temp dir.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use archmax_vm::session::fs::FsStore;
use archmax_vm::session::{Delta, Head, Message, SessionState, ToolCall, ToolStatus};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

const MESSAGE_BYTES: usize = 500;

/// A unique temp dir for the bench's sessions, removed when dropped.
struct BenchDir(PathBuf);

impl BenchDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!("archmax-store-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
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

fn durable_commit(criterion: &mut Criterion) {
    let bench_dir = BenchDir::new();
    let store = FsStore::new(&bench_dir.0);
    let mut group = criterion.benchmark_group("fs_store_commit");
    group.measurement_time(Duration::from_secs(10));
    let mut sample = 0u64;
    for message_count in [20usize, 2_000] {
        group.bench_with_input(BenchmarkId::new("messages", message_count), &message_count, |bencher, &count| {
            bencher.iter_custom(|iterations| {
                sample += 1;
                let id = format!("bench-{count}-{sample}");
                let Ok(mut writer) = store.create_writer(&session_with(&id, count)) else {
                    panic!("could not create the bench session `{id}`");
                };
                let deltas: Vec<Delta> = (1..=iterations)
                    .map(|seq| Delta { seq, head: head(seq), messages: two_messages(seq), ..Delta::default() })
                    .collect();
                let started = Instant::now();
                for delta in &deltas {
                    if let Err(error) = writer.commit(black_box(delta)) {
                        panic!("commit failed: {error}");
                    }
                }
                let elapsed = started.elapsed();
                drop(writer);
                let _ = std::fs::remove_dir_all(bench_dir.0.join(&id));
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, durable_commit);
criterion_main!(benches);
