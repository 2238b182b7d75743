//! Sessions pinned to their program: a session parks under one program, the workspace
//! changes, and the resume is refused, or moved on with `upgrade`. Each test shares one
//! memory store between two runtimes, as two CLI processes share the session folder.
//!
//! The workflows are the golden `park-approve` and `delegate-parked-child` ones.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use archmax_compiler::program::Program;
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::runtime::{DecideRequest, ReplyRequest, RunError};
use archmax_vm::session::TrailKind;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const APPROVAL: &str =
    include_str!("../../../../golden/runs/park-approve/workspace/workflows/refund-approval/workflow.yaml");
const APPROVAL_TAPE: &str = include_str!("../../../../golden/runs/park-approve/workspace/tape.yaml");
const DECIDE_TAPE: &str = "- state: confirm\n  text: Your refund is approved.\n";

const DESK: &str =
    include_str!("../../../../golden/runs/delegate-parked-child/workspace/workflows/refund-desk/workflow.yaml");
const CHILD: &str =
    include_str!("../../../../golden/runs/delegate-parked-child/workspace/workflows/refund-approval/workflow.yaml");
const DESK_TAPE: &str = include_str!("../../../../golden/runs/delegate-parked-child/workspace/tape.yaml");
const DESK_DECIDE_TAPE: &str = include_str!("../../../../golden/runs/delegate-parked-child/workspace/tape-2.yaml");

/// A workflow no session here runs.
const UNRELATED: &str = "title: Notes\ninstructions: Keep notes.\nstates:\n  write:\n    triggers:\n      manual:\n        description: Write a note.\n    instructions: Write it.\n";

fn runtime(program: &Program, store: &MemoryStore, tape: &str) -> Runtime {
    Runtime::builder(RuntimeParts {
        program: Arc::new(program.clone()),
        store: Arc::new(store.clone()),
        model: Arc::new(Tape::parse("tape.yaml", tape).expect("tape")),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build()
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor").block_on(future)
}

fn spec_hash(program: &Program, workflow: &str) -> String {
    program.workflow(workflow).expect("workflow").1.spec_hash.clone()
}

/// Starts `s1` on `workflow` under `program` and checks that it parked.
fn park(program: &Program, store: &MemoryStore, workflow: &str, tape: &str, variables: Value) {
    let Value::Object(variables) = variables else { panic!("variables are an object") };
    let request = TurnRequest {
        workflow: workflow.to_string(),
        session: Some("s1".to_string()),
        message: Some("My board arrived cracked, please refund it.".to_string()),
        variables,
        ..TurnRequest::default()
    };
    let outcome = block_on(runtime(program, store, tape).run_turn(request)).expect("the first turn runs");
    assert_eq!(outcome.status.as_str(), "awaiting_decision");
}

fn decide(program: &Program, store: &MemoryStore, tape: &str, to: &str, upgrade: bool) -> Result<String, RunError> {
    let request = DecideRequest { session: "s1".to_string(), to: to.to_string(), upgrade, ..DecideRequest::default() };
    block_on(runtime(program, store, tape).decide(request)).map(|outcome| outcome.status.as_str().to_string())
}

fn approval(yaml: &str) -> Program {
    compile(&[("workflows/refund-approval/workflow.yaml", yaml), ("workflows/notes/workflow.yaml", UNRELATED)])
}

#[test]
fn the_same_program_resumes_without_refusal() {
    let store = MemoryStore::new();
    let program = approval(APPROVAL);
    park(&program, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    assert_eq!(decide(&program, &store, DECIDE_TAPE, "confirm", false).expect("decides"), "completed");
    let session = store.read("s1").unwrap();
    assert_eq!(session.head.spec_hash, spec_hash(&program, "refund-approval"));
    assert!(session.trail.iter().all(|step| step.kind != TrailKind::Upgrade));
}

#[test]
fn a_changed_workflow_is_refused_naming_both_hashes_and_the_change_then_upgraded() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    let after = approval(&APPROVAL.replace("Tell the customer the refund was turned down and why.", "Say no kindly."));
    let (old, new) = (spec_hash(&before, "refund-approval"), spec_hash(&after, "refund-approval"));
    assert_ne!(old, new);
    let parked = store.read("s1").unwrap();

    let refused = decide(&after, &store, DECIDE_TAPE, "confirm", false).expect_err("a changed program is refused");
    let RunError::ProgramChanged { pinned, current, changes, .. } = &refused else {
        panic!("expected ProgramChanged, got {refused:?}")
    };
    assert_eq!((pinned, current), (&old, &new));
    assert_eq!(changes.changed, ["decline"]);
    assert!(changes.added.is_empty() && changes.removed.is_empty());
    let text = refused.to_string();
    assert!(text.contains(&old) && text.contains(&new) && text.contains("'decline'"));
    // How to upgrade is the host's to say (the CLI adds its `--upgrade`; golden
    // pinned-program-refused-then-upgraded); the library says what is wrong.
    assert!(!text.contains("--upgrade"), "{text}");
    assert_eq!(store.read("s1").unwrap(), parked, "a refusal changes nothing");

    assert_eq!(decide(&after, &store, DECIDE_TAPE, "confirm", true).expect("upgrades"), "completed");
    let session = store.read("s1").unwrap();
    assert_eq!(session.head.spec_hash, new);
    let step = session.trail.iter().find(|step| step.kind == TrailKind::Upgrade).expect("an upgrade trail step");
    assert_eq!(step.to, "finance-review");
    assert_eq!(step.reason.as_deref(), Some(format!("from {old} to {new}").as_str()));
    assert!(store.spec(&old).is_some() && store.spec(&new).is_some());
}

#[test]
fn an_upgrade_is_refused_when_the_sessions_state_was_removed() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    let after = approval(&APPROVAL.replace("finance-review", "finance-check"));
    let parked = store.read("s1").unwrap();

    let refused = decide(&after, &store, DECIDE_TAPE, "confirm", false).expect_err("refused");
    let RunError::ProgramChanged { changes, .. } = &refused else { panic!("got {refused:?}") };
    assert_eq!(
        (changes.added.as_slice(), changes.removed.as_slice()),
        (&["finance-check".to_string()][..], &["finance-review".to_string()][..])
    );
    let text = refused.to_string();
    assert!(text.contains("the session's state 'finance-review' is gone"), "{text}");
    assert!(text.contains("cannot be upgraded") && !text.contains("--upgrade"), "no advice that cannot work: {text}");

    let impossible = decide(&after, &store, DECIDE_TAPE, "confirm", true).expect_err("the upgrade is refused");
    let RunError::UpgradeImpossible { state, .. } = &impossible else { panic!("got {impossible:?}") };
    assert_eq!(state, "finance-review");
    assert_eq!(store.read("s1").unwrap(), parked, "a refused upgrade changes nothing");
}

#[test]
fn an_unrelated_workflows_edit_strands_no_session() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    let edited = UNRELATED.replace("Write it.", "Write it in one line.");
    let after =
        compile(&[("workflows/refund-approval/workflow.yaml", APPROVAL), ("workflows/notes/workflow.yaml", &edited)]);
    assert_ne!(spec_hash(&before, "notes"), spec_hash(&after, "notes"));
    assert_eq!(decide(&after, &store, DECIDE_TAPE, "confirm", false).expect("decides"), "completed");
}

#[test]
fn a_parked_child_is_pinned_too() {
    let store = MemoryStore::new();
    let desk = |child: &str| {
        compile(&[("workflows/refund-desk/workflow.yaml", DESK), ("workflows/refund-approval/workflow.yaml", child)])
    };
    let before = desk(CHILD);
    park(&before, &store, "refund-desk", DESK_TAPE, json!({"order_id": "ORD-2291", "amount_eur": 64}));
    let child = store.read("s1~1").expect("the child session");
    assert_eq!(child.head.spec_hash, spec_hash(&before, "refund-approval"));
    assert!(store.spec(&child.head.spec_hash).is_some(), "the child's program is kept");

    let after = desk(&CHILD.replace("Set `approved` to false.", "Set `approved` to false at once."));
    assert_eq!(spec_hash(&before, "refund-desk"), spec_hash(&after, "refund-desk"));
    let refused = decide(&after, &store, DESK_DECIDE_TAPE, "approved", false).expect_err("the child is refused");
    let RunError::ProgramChanged { session, changes, .. } = &refused else { panic!("got {refused:?}") };
    assert_eq!(session, "s1~1");
    assert_eq!(changes.changed, ["declined"]);
    assert_eq!(store.read("s1~1").unwrap(), child);

    assert_eq!(decide(&after, &store, DESK_DECIDE_TAPE, "approved", true).expect("upgrades"), "completed");
    let child = store.read("s1~1").unwrap();
    assert_eq!(child.head.spec_hash, spec_hash(&after, "refund-approval"));
    assert!(child.trail.iter().any(|step| step.kind == TrailKind::Upgrade));
    let parent = store.read("s1").unwrap();
    assert!(parent.trail.iter().all(|step| step.kind != TrailKind::Upgrade), "the caller's own program did not change");
}

#[test]
fn a_new_turn_on_a_finished_session_is_pinned_as_well() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    decide(&before, &store, DECIDE_TAPE, "confirm", false).expect("completes");
    let after = approval(&APPROVAL.replace("Approve the refund or turn it down.", "Approve or decline."));
    let request = |upgrade| TurnRequest {
        workflow: "refund-approval".to_string(),
        session: Some("s1".to_string()),
        message: Some("One more question.".to_string()),
        variables: Map::new(),
        upgrade,
        ..TurnRequest::default()
    };
    let tape = "- state: assess\n  text: Happy to help.\n";
    let refused = block_on(runtime(&after, &store, tape).run_turn(request(false))).expect_err("refused");
    assert!(matches!(&refused, RunError::ProgramChanged { changes, .. } if changes.changed == ["finance-review"]));
    block_on(runtime(&after, &store, tape).run_turn(request(true))).expect("upgrades");
    assert_eq!(store.read("s1").unwrap().head.spec_hash, spec_hash(&after, "refund-approval"));
}

#[test]
fn a_reply_to_a_session_under_a_changed_program_is_refused_before_any_model_call() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    let after = approval(&APPROVAL.replace("Turn the refund down.", "Decline the refund."));
    let parked = store.read("s1").unwrap();
    let request =
        ReplyRequest { session: "s1".to_string(), message: "Any news?".to_string(), ..ReplyRequest::default() };
    // An empty tape: any model call would fail the reply with another error.
    let refused = block_on(runtime(&after, &store, "[]").reply(request)).expect_err("refused");
    assert!(matches!(&refused, RunError::ProgramChanged { changes, .. } if changes.changed == ["finance-review"]));
    assert_eq!(store.read("s1").unwrap(), parked);
}

#[test]
fn disabling_a_workflow_keeps_its_hash_so_parked_sessions_finish_while_starts_are_refused() {
    let store = MemoryStore::new();
    let before = approval(APPROVAL);
    park(&before, &store, "refund-approval", APPROVAL_TAPE, json!({}));
    let disabled = approval(&format!("disabled: true\n{APPROVAL}"));
    assert!(disabled.workflow("refund-approval").expect("workflow").1.disabled);
    assert_eq!(spec_hash(&before, "refund-approval"), spec_hash(&disabled, "refund-approval"));

    // A reply and a decision on the parked session need no upgrade.
    let reply = ReplyRequest { session: "s1".to_string(), message: "Any news?".to_string(), ..ReplyRequest::default() };
    let tape = "- state: finance-review\n  text: Finance decides soon.\n";
    let replied = block_on(runtime(&disabled, &store, tape).reply(reply)).expect("a reply still works");
    assert_eq!(replied.status.as_str(), "awaiting_decision");
    assert_eq!(decide(&disabled, &store, DECIDE_TAPE, "confirm", false).expect("decides"), "completed");
    let session = store.read("s1").unwrap();
    assert!(session.trail.iter().all(|step| step.kind != TrailKind::Upgrade));

    // A start, and a follow-up to the finished session, are refused as starts.
    for session in ["s2", "s1"] {
        let request = TurnRequest {
            workflow: "refund-approval".to_string(),
            session: Some(session.to_string()),
            message: Some("Another refund, please.".to_string()),
            ..TurnRequest::default()
        };
        let refused = block_on(runtime(&disabled, &store, "[]").run_turn(request)).expect_err("refused");
        assert!(refused.to_string().contains("is disabled"), "{session}: {refused}");
    }
}

#[test]
fn the_spec_hash_ignores_disabled_whatever_its_value_and_nothing_else() {
    let plain = spec_hash(&approval(APPROVAL), "refund-approval");
    for value in ["true", "false", "null"] {
        let toggled = approval(&format!("disabled: {value}\n{APPROVAL}"));
        assert_eq!(spec_hash(&toggled, "refund-approval"), plain, "disabled: {value}");
    }
    // Any governing edit still changes it.
    let edited = approval(&APPROVAL.replace("Approve the refund or turn it down.", "Approve or decline."));
    assert_ne!(spec_hash(&edited, "refund-approval"), plain);
}
