//! Refusals the turn makes around the kernel, through the whole runtime: what the model
//! reads and what the record shows. The kernel's own rules are in `kernel.rs`; the rule
//! coverage check there counts the rules these tests exercise.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest};
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Message, ToolStatus};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

/// A tape that also keeps every tool answer the model was shown.
struct Recording {
    tape: Tape,
    answers: Mutex<Vec<(String, String, ToolStatus)>>,
}

impl ModelAdapter for Recording {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        if let Ok(mut answers) = self.answers.lock() {
            for message in request.messages {
                if let Message::Tool { name, content, status, .. } = message {
                    let answer = (name.clone(), content.clone(), *status);
                    if !answers.contains(&answer) {
                        answers.push(answer);
                    }
                }
            }
        }
        self.tape.call(request)
    }
}

const DESK: &str = r#"
instructions: Answer order questions.
states:
  desk:
    triggers: { manual: }
    instructions: Look the order up.
    tools:
      allow: [read_file]
"#;

/// Runs one turn of `DESK` with `tape`; the tool answers the model read and the events.
fn run(tape: &str) -> (Vec<(String, String, ToolStatus)>, Vec<Value>) {
    let program = compile(&[("workflows/desk/workflow.yaml", DESK)]);
    let model = Arc::new(Recording { tape: Tape::parse("tape", tape).expect("tape"), answers: Mutex::new(Vec::new()) });
    let events = EventSink::new();
    events.record();
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(program),
        store: Arc::new(MemoryStore::new()),
        model: model.clone(),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build();
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Where is ORD-1?".to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    };
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    executor.block_on(runtime.run_turn(request)).expect("the turn ends");
    let recorded = events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    let answers = model.answers.lock().map(|answers| answers.clone()).unwrap_or_default();
    (answers, recorded)
}

#[test]
fn a_name_that_is_no_tool_is_answered_with_the_state_tools_and_leaves_no_block() {
    let (answers, events) =
        run("- tool_calls: [{ name: lookup_order, args: { id: ORD-1 } }]\n- text: I cannot look orders up here.\n");
    let (content, status) = answers
        .iter()
        .find(|(name, _, _)| name == "lookup_order")
        .map(|(_, content, status)| (content.as_str(), *status))
        .expect("the model read an answer to its call");
    assert_eq!(status, ToolStatus::Error);
    assert!(
        content.starts_with("[workflow] 'lookup_order' is not a tool. The tools of state 'desk' are: "),
        "{content}"
    );
    assert!(content.contains("read_file"), "the answer lists the state's tools: {content}");
    // `tool.unknown` is not a governance decision: no call, no block is recorded.
    for event in &events {
        assert!(event["tool"] != "lookup_order", "an unknown name leaves no tool event: {event}");
    }
}
