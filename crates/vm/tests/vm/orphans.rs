//! Sub-workflow sessions a cut turn left running, settled when their caller goes on.

use std::sync::Arc;

use serde_json::Map;

use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::id::SessionId;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Delta, SessionStore, Status};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const DESK: &str = r#"
instructions: Answer order questions.
states:
  desk:
    triggers: { manual: }
    instructions: Answer the question.
"#;

fn turn(message: &str) -> TurnRequest {
    TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some(message.to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    }
}

/// The caller's second dispatch was refused (or answered by a mock): it took the number
/// 2 and made no session. Its turn was then cut while child 3 ran. The caller's next
/// turn settles child 3, past the gap, and leaves the finished child 1 as it was.
#[test]
fn a_child_past_a_number_no_session_took_is_settled() {
    let program = compile(&[("workflows/desk/workflow.yaml", DESK)]);
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let tape = Tape::parse("tape", "- text: Order ORD-1 ships today.\n- text: It left the depot.\n").expect("tape");
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(program),
        store: store.clone(),
        model: Arc::new(tape),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build();
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    executor.block_on(runtime.run_turn(turn("Where is ORD-1?"))).expect("the first turn ends");

    executor.block_on(async {
        // The caller as a cut turn leaves it: still running, one delegation committed.
        let (caller, mut writer) = store.open("s1").await.expect("opens");
        let mut head = caller.head.clone();
        head.status = Status::Running;
        head.delegations = 1;
        writer.commit(&Delta { seq: caller.seq + 1, head, ..Delta::default() }).await.expect("commits");
        drop(writer);
        for (number, status) in [(1, Status::Completed), (3, Status::Running)] {
            let mut child = caller.clone();
            child.id = SessionId::from_store(format!("s1~{number}"));
            child.head.status = status;
            child.head.parent = Some(caller.id.clone());
            child.head.delegations = 0;
            drop(store.create(&child).await.expect("a child"));
        }
    });

    executor.block_on(runtime.run_turn(turn("And now?"))).expect("the second turn ends");
    let read = |id: &str| executor.block_on(store.read(id)).expect("reads").expect("stored");
    let third = read("s1~3");
    assert_eq!(third.head.status, Status::Failed, "the child past the gap is settled: {:?}", third.head);
    let exit = third.head.exit.expect("an exit");
    assert_eq!(exit.code, "abandoned");
    assert!(exit.reason.contains("`s1`"), "{}", exit.reason);
    assert_eq!(read("s1~1").head.status, Status::Completed, "a finished child is left alone");
    assert!(executor.block_on(store.read("s1~2")).expect("reads").is_none(), "no session is made for the gap");
}
