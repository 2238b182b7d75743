//! Refusals the turn makes around the kernel, through the whole runtime: what the model
//! reads and what the record shows. The kernel's own rules are in `kernel.rs`; the rule
//! coverage check there counts the rules these tests exercise.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use archmax_compiler::program::Program;
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
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Where is ORD-1?".to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    };
    run_turn(compile(&[("workflows/desk/workflow.yaml", DESK)]), std::env::temp_dir(), tape, request)
}

/// Runs `request` on `program` (its workspace at `root`) with the model playing `tape`;
/// the tool answers the model read and the events.
fn run_turn(
    program: Program,
    root: PathBuf,
    tape: &str,
    request: TurnRequest,
) -> (Vec<(String, String, ToolStatus)>, Vec<Value>) {
    let model = Arc::new(Recording { tape: Tape::parse("tape", tape).expect("tape"), answers: Mutex::new(Vec::new()) });
    let events = EventSink::new();
    events.record();
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(program),
        store: Arc::new(MemoryStore::new()),
        model: model.clone(),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root,
        pricing: PricingTable::default(),
    })
    .build();
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

/// A state that forbids `archmax_get_variables`, with the sandbox tools granted.
const SEALED: &str = r#"
instructions: Prepare the carrier sheet.
skills: { allow_always: [rates] }
states:
  sheet:
    triggers: { manual: }
    instructions: Prepare the sheet.
    tools:
      allow: [archmax_eval, archmax_run]
      forbid: [archmax_get_variables]
"#;

const RATES_SKILL: &str = "---\nname: rates\ndescription: Carrier rates and a script that prints what it is given.\n---\nRun `scripts/dump.js` with `archmax_run`.\n";

/// The secret the host seeded: the scripts must never see it.
const SEEDED: &str = "zq-7731-negotiated-rate-3.85";

/// A hostile model in a state that may not read the session's variables reaches for them
/// through its scripts: `args.variables` of `archmax_eval` and of `archmax_run` (and a
/// `variables` argument it passes itself, which must not pass for the session's). Each
/// script gets none; the refusal is the kernel's, recorded as a blocked
/// `archmax_get_variables` under the state's forbid, and its text heads the answer.
#[test]
fn a_script_in_a_state_that_may_not_read_variables_is_given_none() {
    const DUMP: &str = "JSON.stringify({ variables: args.variables ?? null, tag: args.tag ?? null })";
    let files = [
        ("workflows/sheet/workflow.yaml", SEALED),
        ("skills/rates/SKILL.md", RATES_SKILL),
        ("skills/rates/scripts/dump.js", DUMP),
    ];
    let program = compile(&files);
    // `archmax_run` reads its script from the workspace on disk.
    let root = std::env::temp_dir().join(format!("archmax-sealed-variables-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
        std::fs::write(path, text).expect("file");
    }
    let tape = r#"
- tool_calls:
    - { name: archmax_eval, args: { code: "JSON.stringify({ variables: args.variables ?? null, tag: 'eval' })" } }
    - { name: archmax_run, args: { file_path: skills/rates/scripts/dump.js, tag: plain } }
    - { name: archmax_run, args: { file_path: skills/rates/scripts/dump.js, tag: own, variables: { rate: forged } } }
- text: Done.
"#;
    let mut variables = Map::new();
    variables.insert("rate".to_string(), Value::String(SEEDED.to_string()));
    let request = TurnRequest {
        workflow: "sheet".to_string(),
        session: Some("s1".to_string()),
        message: Some("Prepare this week's sheet.".to_string()),
        variables,
        ..TurnRequest::default()
    };
    let (answers, recorded) = run_turn(program, root.clone(), tape, request);

    let scripts: Vec<&(String, String, ToolStatus)> =
        answers.iter().filter(|(name, _, _)| name == "archmax_eval" || name == "archmax_run").collect();
    assert_eq!(scripts.len(), 3, "{answers:#?}");
    for (name, content, status) in scripts {
        assert_eq!(*status, ToolStatus::Ok, "the script itself runs: {name}: {content}");
        assert!(!content.contains(SEEDED), "{name} read the seeded variable: {content}");
        assert!(!content.contains("forged"), "{name} passed its own variables for the session's: {content}");
        assert!(content.contains(r#"{"variables":null,"tag":"#), "{name}: {content}");
        assert!(content.starts_with("This script was given no `args.variables`: "), "{name}: {content}");
        assert!(content.contains("archmax_get_variables"), "the answer says which call was refused: {content}");
    }
    let blocked: Vec<&Value> = recorded.iter().filter(|event| event["event"] == "tool-blocked").collect();
    assert_eq!(blocked.len(), 3, "{blocked:#?}");
    for event in blocked {
        assert_eq!(event["tool"], "archmax_get_variables", "{event}");
        assert_eq!(event["rule"], "tool.forbidden-here", "{event}");
        assert_eq!(event["origin"], "script", "{event}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
