//! Files handed to a session (`--file`, an upload) count against the session's quota like
//! any file it keeps: a handover that would take it past the quota is refused naming the
//! input, before anything is written, and what the session already holds stays as it was.

use std::sync::Arc;

use serde_json::Map;

use archmax_stdlib::limits::Limits;
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::handover::{HandedFile, Sender};
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{SessionStore, Status};
use archmax_vm::{DeliverRequest, RunError, Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const SLIPS: &str = r#"title: Slips
instructions: You compare packing slips.
tools:
  allow_always: [read_file]
states:
  compare:
    triggers:
      manual:
        requires: [{ name: order, type: file, accept: [".txt"] }]
      slip_sent:
        requires: [{ name: slip, type: file, accept: [".txt"] }]
    instructions: Wait for the slip, then say what it lists.
"#;

const TAPE: &str = r#"
- { state: compare, text: "I will wait for the slip.", tool_calls: [{ name: archmax_wait, args: { until: 1d, reason: the slip has not arrived } }] }
- { state: compare, tool_calls: [{ name: read_file, args: { file_path: scratchpad/inputs/slip.txt } }] }
- { state: compare, text: The slip lists one board. }
"#;

fn file(input: &str, bytes: usize) -> Vec<HandedFile> {
    vec![HandedFile { input: Some(input.to_string()), name: format!("{input}.txt"), bytes: vec![b'x'; bytes] }]
}

fn field_of(error: &RunError) -> String {
    match error {
        RunError::InvalidInput { fields, .. } => fields.iter().map(|field| field.field.clone()).collect(),
        other => panic!("not an input refusal: {other}"),
    }
}

#[test]
fn a_handover_past_the_sessions_quota_is_refused_naming_the_input_and_writes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/slips/workflow.yaml", SLIPS)])),
        store: Arc::clone(&store) as Arc<dyn SessionStore>,
        model: Arc::new(Tape::parse("slips", TAPE).expect("tape")),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .limits(Limits { session_bytes: 100, file_bytes: 80, ..Limits::default() })
    .build();
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let start = |bytes: usize| {
        runtime.prepare_handover(("slips", "manual"), file("order", bytes), &Map::new(), Sender::Upload).map(|handed| {
            let mut variables = Map::new();
            handed.seed(&mut variables);
            TurnRequest {
                workflow: "slips".to_string(),
                session: Some("s1".to_string()),
                variables,
                handed,
                ..TurnRequest::default()
            }
        })
    };

    // Past the per-file bound, and refused before any session exists.
    let refused = start(81).expect_err("over the per-file bound");
    assert_eq!(field_of(&refused), "order");
    assert!(refused.to_string().contains("`order.txt` is 81 bytes, over the 80 bytes a session's file may hold"));
    assert!(
        executor.block_on(SessionStore::read(store.as_ref(), "s1")).expect("read").is_none(),
        "no session was created"
    );

    // 70 bytes fit; the session waits for the slip.
    let outcome = executor.block_on(runtime.run_turn(start(70).expect("fits"))).expect("the start runs");
    assert_eq!(outcome.status, Status::AwaitingInput);
    let files = SessionStore::files(store.as_ref(), "s1").expect("files");
    assert_eq!(files.read("scratchpad/inputs/order.txt").expect("kept").len(), 70);

    // A 40-byte slip would make the session's files 110 bytes: refused, nothing written.
    let deliver = |bytes: usize| {
        let handed = runtime
            .prepare_handover(("slips", "slip_sent"), file("slip", bytes), &Map::new(), Sender::Upload)
            .expect("the slip alone fits");
        let mut variables = Map::new();
        handed.seed(&mut variables);
        DeliverRequest {
            session: "s1".to_string(),
            trigger: "slip_sent".to_string(),
            declared_only: true,
            variables,
            handed,
            ..DeliverRequest::default()
        }
    };
    let refused = executor.block_on(runtime.deliver(deliver(40))).expect_err("over the session's quota");
    assert_eq!(field_of(&refused), "slip");
    assert!(
        refused.to_string().contains("would make the session's files total 110 bytes, over the session's limit of 100"),
        "{refused}"
    );
    assert!(files.read("scratchpad/inputs/slip.txt").is_err(), "the slip was not written");
    assert_eq!(
        executor.block_on(SessionStore::read(store.as_ref(), "s1")).expect("read").expect("kept").head.status,
        Status::AwaitingInput
    );

    // A slip that fits is delivered and read.
    let outcome = executor.block_on(runtime.deliver(deliver(30))).expect("the delivery runs");
    assert_eq!(outcome.status, Status::Completed, "{:?}", outcome.reason);
    assert_eq!(files.read("scratchpad/inputs/slip.txt").expect("kept").len(), 30);
    assert_eq!(outcome.reply, "The slip lists one board.");
}
