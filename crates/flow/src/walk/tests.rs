//! The walker driven in process: a parallel layer against the sequential walk.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use archmax_stdlib::vfs::{MemoryVfs, Workspace};
use archmax_vm::clock::FixedClock;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse};
use archmax_vm::session::ToolCall;

use std::path::Path;

use super::*;
use crate::hooks::Hooks;
use crate::read::{Format, read_text};
use crate::step::{self, StepEnvironment};

/// Answers every step `passed`, giving `verdicts` its own name, after yielding a number
/// of times that differs per step, so concurrent steps finish out of document order.
/// It counts how many calls were in flight at once.
#[derive(Default)]
struct Staggered {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    order: Mutex<Vec<String>>,
    /// The walk's events so far (the sink writes them here).
    events: Mutex<Vec<String>>,
    /// Per call, the step and the last event emitted before the model was asked.
    last_before_call: Mutex<Vec<(String, String)>>,
}

impl ModelAdapter for Staggered {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let step = request.state.rsplit('.').next().unwrap_or_default().to_string();
            let last = self.events.lock().ok().and_then(|events| events.last().cloned()).unwrap_or_default();
            if let Ok(mut seen) = self.last_before_call.lock() {
                seen.push((step.clone(), last));
            }
            for _ in 0..2 + (10 - step.len().min(10)) * 2 {
                tokio::task::yield_now().await;
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            if let Ok(mut order) = self.order.lock() {
                order.push(step.clone());
            }
            let args = json!({ "outcome": "passed", "gives": { "verdicts": step } });
            Ok(ModelResponse {
                tool_calls: vec![ToolCall { id: format!("{}-call", request.state), name: "answer".into(), args }],
                ..ModelResponse::default()
            })
        })
    }
}

const DOCUMENT: &str = "id: four\nroot:\n  id: root\n  nodes:\n    - id: reviews\n      gives: [verdicts]\n      nodes:\n        - id: security\n        - id: docs\n        - id: tests\n        - id: style\n        - {id: collect, needs: [security, docs, tests, style]}\n";

async fn walk_with(parallel: usize, model: &Staggered) -> (Vec<String>, Option<WalkEnd>) {
    let loaded = read_text("four.yaml", Path::new("four.yaml"), DOCUMENT, Format::Yaml);
    let Some(document) = loaded.document else { return (Vec::new(), None) };
    let workspace = Workspace { session: std::sync::Arc::new(MemoryVfs::new()), mounts: Vec::new() };
    let pricing = PricingTable::default();
    let clock = FixedClock(0);
    let environment = StepEnvironment {
        flow: "four",
        run: "0000000000000000-00000000",
        model,
        model_name: None,
        pricing: &pricing,
        clock: &clock,
        workspace: &workspace,
        workspace_root: Path::new("."),
        reserved: None,
        run_scope: None,
        budget: step::StepBudget::default(),
        flow_budget: step::FlowBudget::default(),
        allow_program: &[],
        approver: &crate::gate::Approver::Unattended,
        hooks: &Hooks::default(),
        credential_variables: &[],
        system: "system",
    };
    let hooks = Hooks::default();
    let cancel = AtomicBool::new(false);
    let options = WalkOptions {
        input: "review",
        max_attempts: None,
        hooks: &hooks,
        parallel,
        store: None,
        recorded: Recorded::default(),
        operator: None,
        cancel: &cancel,
        resume_command: None,
    };
    let mut sink = |event: &FlowEvent| {
        if let Ok(mut events) = model.events.lock() {
            events.push(event.json());
        }
    };
    let end = walk(&environment, &document, options, None, &mut sink).await.ok();
    let events = model.events.lock().map(|events| events.clone()).unwrap_or_default();
    (events, end)
}

#[tokio::test(flavor = "current_thread")]
async fn a_parallel_layer_runs_at_once_and_reports_in_document_order() {
    let sequential_model = Staggered::default();
    let (sequential, end) = walk_with(1, &sequential_model).await;
    assert_eq!(end, Some(WalkEnd::Finished { clean: true }));
    assert_eq!(sequential_model.most.load(Ordering::SeqCst), 1);
    let parallel_model = Staggered::default();
    let (parallel, end) = walk_with(4, &parallel_model).await;
    assert_eq!(end, Some(WalkEnd::Finished { clean: true }));
    assert_eq!(parallel_model.most.load(Ordering::SeqCst), 4, "the four reviews were in flight together");
    let finished = parallel_model.order.lock().map(|order| order.clone()).unwrap_or_default();
    assert_ne!(finished[..4], ["security", "docs", "tests", "style"], "they finished out of document order");
    assert_eq!(parallel, sequential, "the events are the sequential walk's, in its order");
    let collect = sequential.iter().find(|event| event.contains("group-left")).cloned().unwrap_or_default();
    assert!(collect.contains(r#""gave":{"verdicts":"collect"}"#), "the last write wins: {collect}");
}

/// A step that runs alone says it started before it asks anything (its model, an approver
/// on the terminal); steps run together are announced with their reports.
#[tokio::test(flavor = "current_thread")]
async fn a_step_run_alone_is_announced_before_it_runs() {
    let model = Staggered::default();
    let (_, end) = walk_with(1, &model).await;
    assert_eq!(end, Some(WalkEnd::Finished { clean: true }));
    let seen = model.last_before_call.lock().map(|seen| seen.clone()).unwrap_or_default();
    assert_eq!(seen.len(), 5, "{seen:?}");
    for (step, last) in &seen {
        assert!(
            last.contains(r#""event":"step-started""#) && last.contains(&format!(r#"reviews.{step}""#)),
            "{step} was asked after: {last}"
        );
    }
    let together = Staggered::default();
    let _ = walk_with(4, &together).await;
    let seen = together.last_before_call.lock().map(|seen| seen.clone()).unwrap_or_default();
    assert!(
        seen.iter().take(4).all(|(_, last)| !last.contains("step-started")),
        "a parallel layer's steps are announced after they ran: {seen:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_attempt_filed_again_by_a_resumed_walk_keeps_when_it_started() {
    let store = archmax_vm::session::memory::MemoryStore::new();
    let spend = Spend::default();
    let first = attempt_session("notes", "run-1", "run-1.root.1", "root", 1, false, &[], spend, 1_000);
    file(&store, &first).await.expect("filed");
    let again = attempt_session("notes", "run-1", "run-1.root.1", "root", 1, true, &[], spend, 9_000);
    file(&store, &again).await.expect("filed again");
    let filed = store.read("run-1.root.1").expect("the attempt");
    assert_eq!(filed.head.created_at, 1_000, "it started when it first did");
    assert_eq!(filed.head.updated_at, 9_000);
    assert_eq!(filed.head.status, Status::Failed, "as it now stands");
}

#[tokio::test(flavor = "current_thread")]
async fn an_attempt_whose_earlier_filing_cannot_be_read_is_filed_again_all_the_same() {
    use archmax_vm::session::fs::{FsStore, SealKeys};
    let folder = std::env::temp_dir().join(format!("archmax-flow-refile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let attempt =
        |failed, now| attempt_session("notes", "run-1", "run-1.root.1", "root", 1, failed, &[], Spend::default(), now);
    let before = FsStore::new(&folder, SealKeys::generate().expect("a seal key"));
    file(&before, &attempt(false, 1_000)).await.expect("filed");
    // Under another seal key the earlier filing reads as damaged.
    let after = FsStore::new(&folder, SealKeys::generate().expect("a seal key"));
    file(&after, &attempt(true, 9_000)).await.expect("filed again over what cannot be read");
    let filed = after.read("run-1.root.1").expect("readable now").expect("the attempt");
    assert_eq!((filed.head.created_at, filed.head.status), (9_000, Status::Failed), "its start is lost, not the walk");
    let _ = std::fs::remove_dir_all(&folder);
}
