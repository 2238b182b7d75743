//! The VM embedded in a long-running host: turn futures are `Send`, so a multi-threaded
//! tokio runtime runs many sessions at once, and a session's files live in its store,
//! so a store that is not a local directory keeps them from one runtime to the next.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use tokio::sync::Barrier;

use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, TokenUsage};
use archmax_vm::runtime::{DecideRequest, DeliverRequest, ErrorKind, ReplyRequest};
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Message, SessionStore, Status, ToolCall};
use archmax_vm::stdlib::vfs::Vfs;
use archmax_vm::{RunError, Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

fn assert_send<T: Send>(_: &T) {}

/// A compile-time check: every entry point's future may move between worker threads.
#[allow(dead_code)]
fn entry_point_futures_are_send(runtime: &Runtime) {
    assert_send(&runtime.run_turn(TurnRequest::default()));
    assert_send(&runtime.decide(DecideRequest::default()));
    assert_send(&runtime.reply(ReplyRequest::default()));
    assert_send(&runtime.deliver(DeliverRequest::default()));
}

const SESSIONS: usize = 64;

const INTAKE: &str = r#"title: Intake
instructions: You take one customer's intake note and hand it to a reviewer.
tools:
  allow_always: [read_file, write_file]
states:
  draft:
    triggers:
      manual:
        description: Take one customer's intake.
        requires:
          - { name: customer, type: string }
    instructions: Write the intake note to scratchpad/note.md, then hand it to review.
    transitions:
      - to: review
        description: The note is written.
  review:
    type: human
    instructions: Approve the intake note or turn it down.
    transitions:
      - { to: done, type: approve, description: Approve the note. }
      - { to: declined, type: reject, description: Turn the note down. }
  done:
    instructions: Read the note back to the customer.
  declined:
    instructions: Tell the customer the note was turned down.
"#;

/// A scripted model that reads each session's own variables and transcript, so any
/// number of sessions can share it. In `draft` every session waits at a barrier until
/// all of them have made their first call: the test cannot pass unless the host really
/// runs them at once.
struct Intake {
    arrived: Barrier,
    calls: AtomicUsize,
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall { id: id.to_string(), name: name.to_string(), args }
}

fn answered(messages: &[Message], tool: &str) -> Option<String> {
    messages.iter().rev().find_map(|message| match message {
        Message::Tool { name, content, .. } if name == tool => Some(content.clone()),
        _ => None,
    })
}

impl ModelAdapter for Intake {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let customer = request.variables["customer"].as_str().unwrap_or("nobody").to_string();
            let usage = TokenUsage { input: 100, output: 10, ..TokenUsage::default() };
            let response = match request.state {
                "draft" if answered(request.messages, "write_file").is_none() => {
                    self.arrived.wait().await;
                    let note = format!("Intake note for {customer}.");
                    ModelResponse {
                        tool_calls: vec![call(
                            "w1",
                            "write_file",
                            json!({ "file_path": "scratchpad/note.md", "content": note }),
                        )],
                        ..ModelResponse::default()
                    }
                }
                "draft" => ModelResponse {
                    tool_calls: vec![call("a1", "archmax_advance", json!({ "to": "review", "reason": "written" }))],
                    ..ModelResponse::default()
                },
                "review" => ModelResponse { text: "A reviewer has your note.".to_string(), ..ModelResponse::default() },
                "done" => match answered(request.messages, "read_file") {
                    None => ModelResponse {
                        tool_calls: vec![call("r1", "read_file", json!({ "file_path": "scratchpad/note.md" }))],
                        ..ModelResponse::default()
                    },
                    Some(content) => ModelResponse { text: format!("Approved: {content}"), ..ModelResponse::default() },
                },
                other => ModelResponse { text: format!("unexpected state {other}"), ..ModelResponse::default() },
            };
            Ok(ModelResponse { usage, ..response })
        })
    }
}

fn runtime(store: Arc<dyn SessionStore>, model: Arc<Intake>, root: &std::path::Path) -> Arc<Runtime> {
    let program = compile(&[("workflows/intake/workflow.yaml", INTAKE)]);
    Arc::new(
        Runtime::builder(RuntimeParts {
            program: Arc::new(program),
            store,
            model,
            events: EventSink::new(),
            clock: Arc::new(FixedClock(1_767_605_400_000)),
            root: root.to_path_buf(),
            pricing: PricingTable::default(),
        })
        .build(),
    )
}

fn customer(index: usize) -> String {
    format!("customer-{index:02}")
}

/// Runs `each` for sessions `0..sessions`, every one its own task on the executor.
async fn on_every_session<T, Each, Run>(runtime: &Arc<Runtime>, sessions: usize, each: Each) -> Vec<T>
where
    T: Send + 'static,
    Each: Fn(Arc<Runtime>, usize) -> Run,
    Run: std::future::Future<Output = T> + Send + 'static,
{
    let tasks: Vec<_> = (0..sessions).map(|index| tokio::spawn(each(Arc::clone(runtime), index))).collect();
    futures_util::future::join_all(tasks).await.into_iter().map(|task| task.expect("the task ran")).collect()
}

/// Starts `sessions` sessions at once on a multi-threaded executor, each writing its own
/// note; then a second runtime on the same store decides them all at once, and each
/// reads its own note back.
fn run_fleet(store: Arc<dyn SessionStore>, root: &std::path::Path, sessions: usize) {
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().expect("executor");
    let model = Arc::new(Intake { arrived: Barrier::new(sessions), calls: AtomicUsize::new(0) });

    let first = runtime(Arc::clone(&store), Arc::clone(&model), root);
    let starts = executor.block_on(async {
        let all = on_every_session(&first, sessions, |runtime, index| async move {
            let mut variables = Map::new();
            variables.insert("customer".to_string(), Value::String(customer(index)));
            let request = TurnRequest {
                workflow: "intake".to_string(),
                session: Some(format!("s{index:02}")),
                message: Some("Please take my intake.".to_string()),
                variables,
                ..TurnRequest::default()
            };
            runtime.run_turn(request).await
        });
        tokio::time::timeout(std::time::Duration::from_secs(120), all)
            .await
            .expect("every session reached the barrier together (a host that runs them one by one never does)")
    });
    for (index, start) in starts.into_iter().enumerate() {
        let outcome = start.expect("the turn ran");
        assert_eq!(outcome.status, Status::AwaitingDecision, "session {index}: {outcome:?}");
        assert_eq!(outcome.state, "review");
        let files = store.files(&outcome.session_id).expect("the session's files");
        let note = files.read("scratchpad/note.md").expect("the note is in the store");
        assert_eq!(String::from_utf8_lossy(&note), format!("Intake note for {}.", customer(index)));
    }

    // A second runtime on the same store, as another process of the fleet.
    let second = runtime(Arc::clone(&store), Arc::clone(&model), root);
    let decisions = executor.block_on(on_every_session(&second, sessions, |runtime, index| async move {
        let session = format!("s{index:02}");
        let request = DecideRequest { session: session.clone(), to: "done".to_string(), ..Default::default() };
        let outcome = runtime.decide(request).await;
        runtime.close_session(&session);
        outcome
    }));
    for (index, decided) in decisions.into_iter().enumerate() {
        let outcome = decided.expect("the decision ran");
        assert_eq!(outcome.status, Status::Completed, "session {index}: {outcome:?}");
        assert_eq!(outcome.reply, format!("Approved:      1\tIntake note for {}.", customer(index)));
    }
    // Per session: write, advance, handoff, read, answer.
    assert_eq!(model.calls.load(Ordering::SeqCst), sessions * 5);
    let listed = executor.block_on(store.list()).expect("list");
    assert_eq!(listed.len(), sessions);
}

#[test]
fn sixty_four_sessions_run_at_once_on_a_multi_threaded_executor_with_their_files_in_the_store() {
    // Nothing may touch the local disk: the workspace root does not even exist.
    let root = std::env::temp_dir().join(format!("archmax-embedding-{}-absent", std::process::id()));
    let store = MemoryStore::new();
    run_fleet(Arc::new(store.clone()), &root, SESSIONS);
    assert!(!root.exists(), "nothing was written to local disk");
    // The files are the store's: a clone of it (another runtime's handle) reads them.
    let note = store.clone().files("s07").read("scratchpad/note.md").expect("kept");
    assert_eq!(String::from_utf8_lossy(&note), "Intake note for customer-07.");
}

#[test]
fn the_filesystem_store_serves_concurrent_sessions_without_holding_up_the_executor() {
    let root = std::env::temp_dir().join(format!("archmax-embedding-fs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("scratch root");
    // Every commit blocks on fsync; the barrier still needs all sessions in flight.
    run_fleet(Arc::new(FsStore::for_workspace(&root).expect("the workspace's seal key")), &root, 16);
    assert!(root.join("sessions/s03/scratchpad/note.md").is_file());
    std::fs::remove_dir_all(&root).expect("clean up");
}

#[test]
fn a_host_maps_every_refusal_to_a_kind() {
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    let store = MemoryStore::new();
    let model = Arc::new(Intake { arrived: Barrier::new(1), calls: AtomicUsize::new(0) });
    let root = std::env::temp_dir();
    let runtime = runtime(Arc::new(store.clone()), model, &root);
    let start = |variables: Value, workflow: &str| {
        let Value::Object(variables) = variables else { panic!("an object") };
        TurnRequest {
            workflow: workflow.to_string(),
            session: Some("k1".to_string()),
            message: Some("Hello.".to_string()),
            variables,
            ..TurnRequest::default()
        }
    };
    let unknown = executor.block_on(runtime.run_turn(start(json!({}), "nope"))).expect_err("no such workflow");
    assert_eq!(unknown.kind(), ErrorKind::NotFound);
    assert_eq!(unknown.kind().http_status(), 404);

    // Every offending field is named, not just the first.
    let invalid = executor
        .block_on(runtime.run_turn(start(json!({ "Bad.Name": 1, "Other Name": 2 }), "intake")))
        .expect_err("bad names");
    let RunError::InvalidInput { fields, .. } = &invalid else { panic!("got {invalid:?}") };
    let named: Vec<&str> = fields.iter().map(|field| field.field.as_str()).collect();
    assert_eq!(named, ["Bad.Name", "Other Name"]);
    assert_eq!(invalid.kind().http_status(), 400);

    let unmet = executor.block_on(runtime.run_turn(start(json!({}), "intake"))).expect_err("customer is required");
    let RunError::InvalidInput { fields, message, .. } = &unmet else { panic!("got {unmet:?}") };
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].field, "customer");
    assert!(message.contains("requires 'customer'"), "{message}");

    let missing = executor
        .block_on(runtime.decide(DecideRequest { session: "none".into(), to: "done".into(), ..Default::default() }))
        .expect_err("no such session");
    assert_eq!(missing.kind(), ErrorKind::NotFound);

    // `~` names sub-workflow sessions: a caller cannot start one under such an id.
    let mut reserved = start(json!({ "customer": "x" }), "intake");
    reserved.session = Some("k1~1".to_string());
    let refused = executor.block_on(runtime.run_turn(reserved)).expect_err("a child's id");
    assert!(matches!(&refused, RunError::InvalidInput { fields, .. } if fields[0].field == "session"), "{refused:?}");

    // Seeds count against the bound on a session's variables, before anything is written.
    let huge = "x".repeat(11 * 1024 * 1024);
    let flooded = executor.block_on(runtime.run_turn(start(json!({ "customer": huge }), "intake")));
    let Err(RunError::InvalidInput { fields, message, .. }) = flooded else { panic!("over the bound: {flooded:?}") };
    assert_eq!(fields[0].field, "variables");
    assert!(message.contains("over the bound"), "{message}");
    assert!(store.list().is_empty(), "no refusal created a session");
}

const CALC: &str = r#"title: Counter
instructions: You count with the sandbox.
states:
  count:
    triggers:
      manual:
        description: Count once more.
    instructions: Count with archmax_eval, then say the number.
"#;

/// Counts in the session's REPL: a REPL kept between turns remembers the count.
struct Counter;

impl ModelAdapter for Counter {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let opened = request.messages.iter().rposition(|message| matches!(message, Message::User { .. }));
            let since = &request.messages[opened.map_or(0, |index| index + 1)..];
            Ok(match answered(since, "archmax_eval") {
                None => ModelResponse {
                    tool_calls: vec![call(
                        "e1",
                        "archmax_eval",
                        json!({ "code": "globalThis.count = (globalThis.count || 0) + 1; count" }),
                    )],
                    ..ModelResponse::default()
                },
                Some(result) => ModelResponse { text: format!("count {}", result.trim()), ..ModelResponse::default() },
            })
        })
    }
}

#[test]
fn repls_are_bounded_least_recently_used_first_and_dropped_by_close_session() {
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/calc/workflow.yaml", CALC)])),
        store: Arc::new(MemoryStore::new()),
        model: Arc::new(Counter),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build();
    runtime.set_repl_capacity(2);
    let count = |session: &str| {
        let request = TurnRequest {
            workflow: "calc".to_string(),
            session: Some(session.to_string()),
            message: Some("Again.".to_string()),
            ..TurnRequest::default()
        };
        let outcome = executor.block_on(runtime.run_turn(request)).expect("the turn runs");
        assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
        outcome.reply
    };
    assert_eq!(count("a"), "count 1");
    assert_eq!(count("a"), "count 2", "a kept REPL remembers");
    assert_eq!(count("b"), "count 1");
    assert_eq!(count("c"), "count 1");
    assert_eq!(runtime.kept_repls(), 2, "the cap holds");
    assert_eq!(count("a"), "count 1", "the least recently used REPL (a's) was evicted and starts afresh");
    assert_eq!(count("c"), "count 2", "c's REPL was more recent and is kept");
    runtime.close_session("c");
    assert_eq!(runtime.kept_repls(), 1);
    assert_eq!(count("c"), "count 1", "a closed session's REPL starts afresh");
}

const SPIN: &str = r#"title: Spinner
instructions: You run a script that never ends.
settings:
  timeoutMs: 1500
states:
  spin:
    triggers:
      manual:
        description: Spin once.
    instructions: Run the loop with archmax_eval, then say how far the other task got.
"#;

/// Asks for a script that loops until its deadline; the second time, says how many turns
/// the test's other task took on the executor meanwhile.
struct Spinner {
    ticks: Arc<AtomicUsize>,
    at_start: AtomicUsize,
}

impl ModelAdapter for Spinner {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            Ok(match answered(request.messages, "archmax_eval") {
                None => {
                    self.at_start.store(self.ticks.load(Ordering::SeqCst), Ordering::SeqCst);
                    ModelResponse {
                        tool_calls: vec![call("e1", "archmax_eval", json!({ "code": "while (true) {}" }))],
                        ..ModelResponse::default()
                    }
                }
                Some(result) => {
                    let meanwhile = self.ticks.load(Ordering::SeqCst) - self.at_start.load(Ordering::SeqCst);
                    ModelResponse { text: format!("{meanwhile}|{}", result.trim()), ..ModelResponse::default() }
                }
            })
        })
    }
}

#[test]
fn a_script_that_loops_holds_none_of_the_executors_workers() {
    // One worker: were the script run on it, nothing else on the executor (a server's
    // requests, its lease renewals) would run until the deadline stopped the script. The
    // other task yields after every tick, so it ticks a few times at most wherever the
    // turn itself yields, and countless times while the worker is free.
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("executor");
    let ticks = Arc::new(AtomicUsize::new(0));
    let runtime = Arc::new(
        Runtime::builder(RuntimeParts {
            program: Arc::new(compile(&[("workflows/spin/workflow.yaml", SPIN)])),
            store: Arc::new(MemoryStore::new()),
            model: Arc::new(Spinner { ticks: Arc::clone(&ticks), at_start: AtomicUsize::new(0) }),
            events: EventSink::new(),
            clock: Arc::new(FixedClock(1_767_605_400_000)),
            root: std::env::temp_dir(),
            pricing: PricingTable::default(),
        })
        .build(),
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outcome = executor.block_on(async {
        let other = {
            let (ticks, done) = (Arc::clone(&ticks), Arc::clone(&done));
            tokio::spawn(async move {
                while !done.load(Ordering::SeqCst) {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            })
        };
        let request =
            TurnRequest { workflow: "spin".to_string(), message: Some("Spin.".to_string()), ..TurnRequest::default() };
        let turn = {
            let runtime = Arc::clone(&runtime);
            tokio::spawn(async move { runtime.run_turn(request).await })
        };
        let outcome = turn.await.expect("the turn task").expect("the turn runs");
        done.store(true, Ordering::SeqCst);
        other.await.expect("the other task");
        outcome
    });
    let (meanwhile, said) = outcome.reply.split_once('|').expect("the count and the answer");
    let meanwhile: usize = meanwhile.parse().expect("a count");
    assert!(meanwhile > 1000, "the other task took {meanwhile} turns while the script looped");
    assert!(said.contains("1500 ms budget"), "the deadline stopped the script: {said}");
}

/// A runtime is built once per program: one built for another program with the same host
/// choices has its mount table and tool definitions derived from that program, never
/// carried over from the first.
#[test]
fn a_runtime_rebuilt_for_another_program_derives_its_tables_from_it() {
    const READER: &str = "title: Reader\ninstructions: Read.\nstates:\n  read:\n    triggers: { manual: }\n    instructions: Read the notes.\n    tools:\n      forbid: [write_file]\n";
    const WRITER: &str = "title: Writer\ninstructions: Write.\nstates:\n  write:\n    triggers: { manual: }\n    instructions: Write a note.\n";
    let first = compile(&[
        ("archmax.toml", "[mounts.\"rates/\"]\nread_only = true\n"),
        ("rates/notes.md", "# Rates\n"),
        ("workflows/reader/workflow.yaml", READER),
    ]);
    let second = compile(&[("workflows/writer/workflow.yaml", WRITER)]);
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(first),
        store: Arc::new(MemoryStore::new()),
        model: Arc::new(Counter),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .recursion_limit(7)
    .build();
    let names = |runtime: &Runtime| -> Vec<String> {
        let program = runtime.program();
        let workflow = &program.workflows[0];
        let state = &workflow.states[0];
        let id = runtime.workflow_id(program.str(workflow.slug)).expect("the workflow");
        runtime.definitions(id, state.surface).iter().map(|definition| definition.name.clone()).collect()
    };
    let has_rates = |runtime: &Runtime| runtime.mounts().mounts.iter().any(|mount| mount.key == "rates/");
    assert!(has_rates(&runtime));
    assert!(!names(&runtime).contains(&"write_file".to_string()), "{:?}", names(&runtime));

    let rebuilt = runtime.for_program(Arc::new(second));
    assert!(rebuilt.workflow_id("writer").is_ok() && rebuilt.workflow_id("reader").is_err());
    assert!(!has_rates(&rebuilt), "the mounts of the first program stayed");
    let tools = names(&rebuilt);
    assert!(tools.contains(&"write_file".to_string()), "the first program's surface stayed: {tools:?}");
    assert_eq!(rebuilt.recursion_limit(), 7, "the host's choices carry over");
}
