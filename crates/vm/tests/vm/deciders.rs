//! Who decides: a host passes the decider's identity on a decision, the trail step and
//! the decision note record it, and a host that enforces a human state's `approvers`
//! refuses anyone else with the park left as it was.

use std::sync::Arc;

use serde_json::json;

use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse};
use archmax_vm::runtime::{DecideRequest, DeliverRequest, ErrorKind, InputReason};
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Message, SessionStore, Status, ToolCall, TrailKind};
use archmax_vm::{Channel, Refusal, RunError, Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const PAYOUT: &str = r#"title: Payout
instructions: You prepare a payout for finance to approve.
states:
  prepare:
    triggers:
      manual:
        description: Prepare one payout.
    instructions: Hand the payout to finance.
    transitions:
      - to: approve
        description: The payout is ready.
  approve:
    type: human
    approvers: [finance@example.com, cfo@example.com]
    evidence: [scratchpad/memo.md]
    instructions: Approve the payout or turn it down.
    transitions:
      - { to: paid, type: approve, description: Pay it. }
      - { to: declined, type: reject, description: Turn it down. }
  paid:
    instructions: Say it was paid.
  declined:
    instructions: Say it was declined.
"#;

/// Advances out of `prepare`, and answers with a line everywhere else.
struct Scripted;

impl ModelAdapter for Scripted {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            Ok(match request.state {
                "prepare" => ModelResponse {
                    tool_calls: vec![ToolCall {
                        id: "a1".to_string(),
                        name: "archmax_advance".to_string(),
                        args: json!({ "to": "approve", "reason": "ready" }),
                    }],
                    ..ModelResponse::default()
                },
                other => ModelResponse { text: format!("Done in {other}."), ..ModelResponse::default() },
            })
        })
    }
}

fn parked_payout() -> (tokio::runtime::Runtime, Runtime, MemoryStore) {
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let store = MemoryStore::new();
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/payout/workflow.yaml", PAYOUT)])),
        store: Arc::new(store.clone()),
        model: Arc::new(Scripted),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir(),
        pricing: PricingTable::default(),
    })
    .build();
    let start = TurnRequest {
        workflow: "payout".to_string(),
        session: Some("p1".to_string()),
        message: Some("Pay the invoice.".to_string()),
        ..TurnRequest::default()
    };
    let outcome = executor.block_on(runtime.run_turn(start)).expect("the start runs");
    assert_eq!(outcome.status, Status::AwaitingDecision, "{outcome:?}");
    (executor, runtime, store)
}

fn decision(decider: Option<&str>, enforce_approvers: bool) -> DecideRequest {
    DecideRequest {
        session: "p1".to_string(),
        to: "paid".to_string(),
        decider: decider.map(str::to_string),
        enforce_approvers,
        ..DecideRequest::default()
    }
}

#[test]
fn the_deciders_identity_is_recorded_in_the_trail_and_the_decision_note() {
    let (executor, runtime, store) = parked_payout();
    let outcome = executor.block_on(runtime.decide(decision(Some("cfo@example.com"), true))).expect("an approver");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let session = executor.block_on(SessionStore::read(&store, "p1")).expect("read").expect("kept");
    let step = session.trail.iter().find(|step| step.kind == TrailKind::Human).expect("the decision's step");
    assert_eq!(step.to, "paid");
    assert_eq!(step.decided_by.as_deref(), Some("cfo@example.com"));
    let noted = session.messages.iter().any(|message| {
        matches!(message, Message::Note { text, .. } if text.starts_with("[decision] cfo@example.com (a person) decided"))
    });
    assert!(noted, "the note names the decider: {:?}", session.messages);
    let summary = archmax_vm::session::summary::summary(&session);
    let human = summary["trail"].as_array().and_then(|trail| trail.iter().find(|entry| entry["kind"] == "human"));
    assert_eq!(human.map(|entry| entry["decidedBy"].clone()), Some(json!("cfo@example.com")));
}

#[test]
fn the_trail_keeps_the_record_decided_on_with_the_evidence_as_it_was_then() {
    let (executor, runtime, store) = parked_payout();
    let files = SessionStore::files(&store, "p1").expect("the session's files");
    files.write("scratchpad/memo.md", b"Pay 120.00 EUR to Acme.").expect("the memo");
    let mut request = decision(Some("cfo@example.com"), true);
    request.comment = Some("Invoice checked.".to_string());
    executor.block_on(runtime.decide(request)).expect("an approver");
    // The memo changes after the decision; the record keeps what was shown.
    files.write("scratchpad/memo.md", b"Pay 9000.00 EUR to Mallory.").expect("a later memo");
    let session = executor.block_on(SessionStore::read(&store, "p1")).expect("read").expect("kept");
    let step = session.trail.iter().find(|step| step.kind == TrailKind::Human).expect("the decision's step");
    let record = step.decision.as_deref().expect("the record decided on");
    assert_eq!(
        (record.state.as_str(), record.instructions.as_str(), record.seq),
        ("approve", "Approve the payout or turn it down.", 1)
    );
    assert_eq!((record.choice.to.as_str(), record.choice.description.as_deref()), ("paid", Some("Pay it.")));
    assert_eq!(record.evidence.len(), 1);
    assert_eq!(record.evidence[0].path, "scratchpad/memo.md");
    assert_eq!(record.evidence[0].text.as_deref(), Some("Pay 120.00 EUR to Acme."));
    assert_eq!(
        (step.reason.as_deref(), step.decided_by.as_deref()),
        (Some("Invoice checked."), Some("cfo@example.com"))
    );
    // Hosts see it in the session's summary too.
    let summary = archmax_vm::session::summary::summary(&session);
    let human = summary["trail"].as_array().and_then(|trail| trail.iter().find(|entry| entry["kind"] == "human"));
    let shown = human.map(|entry| entry["decision"].clone()).unwrap_or_default();
    assert_eq!(shown["evidence"][0]["text"], json!("Pay 120.00 EUR to Acme."));
    assert_eq!(shown["choice"]["description"], json!("Pay it."));
    // A step written before records were kept still reads.
    let old: archmax_vm::session::TrailStep =
        serde_json::from_value(json!({ "to": "paid", "kind": "human", "decided_by": "cfo@example.com", "ts": 1 }))
            .expect("an old step reads");
    assert!(old.decision.is_none());
}

#[test]
fn an_enforced_decision_by_someone_not_among_the_approvers_is_refused_and_the_park_stays() {
    let (executor, runtime, store) = parked_payout();
    let before = executor.block_on(SessionStore::read(&store, "p1")).expect("read").expect("kept");
    for decider in [Some("intern@example.com"), None] {
        let error = executor.block_on(runtime.decide(decision(decider, true))).expect_err("not an approver");
        let RunError::Refused { reason, message } = &error else { panic!("got {error:?}") };
        assert_eq!(*reason, Refusal::NotAnApprover);
        assert_eq!(reason.as_str(), "decision.not-an-approver");
        assert!(message.contains("finance@example.com, cfo@example.com"), "{message}");
        assert_eq!(error.kind(), ErrorKind::Refused);
        assert_eq!(error.kind().http_status(), 403);
    }
    let after = executor.block_on(SessionStore::read(&store, "p1")).expect("read").expect("kept");
    assert_eq!(before, after, "a refused decision changes nothing");
}

#[test]
fn approvers_are_informational_unless_the_host_enforces_them() {
    let (executor, runtime, store) = parked_payout();
    let outcome = executor.block_on(runtime.decide(decision(None, false))).expect("not enforced");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let session = executor.block_on(SessionStore::read(&store, "p1")).expect("read").expect("kept");
    let step = session.trail.iter().find(|step| step.kind == TrailKind::Human).expect("the decision's step");
    assert_eq!(step.decided_by, None, "no identity, none recorded");
}

#[test]
fn a_call_on_the_wrong_channel_is_refused_in_typed_parts_that_name_no_command() {
    let (executor, runtime, _store) = parked_payout();
    let delivery = DeliverRequest { session: "p1".to_string(), trigger: "manual".to_string(), ..Default::default() };
    let refused = executor.block_on(runtime.deliver(delivery)).expect_err("parked for a decision");
    let RunError::NotParked(refusal) = &refused else { panic!("got {refused:?}") };
    assert_eq!(
        (refusal.wanted, refusal.status, refusal.position.as_str()),
        (Channel::Input, Status::AwaitingDecision, "approve")
    );
    let said = "session `p1` is not waiting for input: it waits for a decision at 'approve'";
    assert_eq!(refused.to_string(), format!("{said}. Nothing was changed."));
    // A host adds how its users decide, where the sentence leaves room for it.
    assert_eq!(refusal.sentence(Some("decide it")), format!("{said}; decide it. Nothing was changed."));

    let variables = json!({ "amount": 1 }).as_object().cloned().unwrap_or_default();
    let message = TurnRequest {
        workflow: "payout".to_string(),
        session: Some("p1".to_string()),
        message: Some("Here are the numbers.".to_string()),
        variables,
        ..TurnRequest::default()
    };
    let refused = executor.block_on(runtime.run_turn(message)).expect_err("variables to a decision");
    assert!(
        matches!(&refused, RunError::InvalidInput { reason: InputReason::VariablesWhileDeciding, .. }),
        "{refused:?}"
    );
    assert_eq!(refused.to_string(), "session `p1` waits for a decision; variables cannot be delivered to it");
}
