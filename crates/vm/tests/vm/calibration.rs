//! The token estimate corrected by the provider's counts: a model whose provider reports
//! a prompt three times the size archmax estimated has its next prompt judged at the
//! measured size, so a conversation that fits by the estimate is found too large for the
//! window before it is sent; the same conversation under a provider that agrees with the
//! estimate goes through.

use std::sync::Arc;

use archmax_vm::clock::FixedClock;
use archmax_vm::context::{ContextSettings, estimate};
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, Role, TokenUsage};
use archmax_vm::session::Status;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const NOTES: &str = r#"title: Notes
instructions: You keep a customer's notes.
states:
  keep:
    model: relay-large
    triggers:
      manual:
        description: Keep a note.
    instructions: Acknowledge each note in one word.
"#;

const WINDOW: u64 = 16_000;

/// A provider that answers every call with one word and reports the prompt's size as
/// `factor` times a plain estimate of what it was sent.
struct Counting {
    factor: f64,
}

impl ModelAdapter for Counting {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        let sent = serde_json::to_string(request.messages).unwrap_or_default();
        let estimated = estimate(request.system_static) + estimate(request.system_volatile) + estimate(&sent);
        let input = (estimated as f64 * self.factor) as u64;
        let text = if request.role == Role::Summarizer { "Earlier: notes." } else { "Noted." };
        let answer = ModelResponse {
            text: text.to_string(),
            usage: TokenUsage { input, output: 2, ..TokenUsage::default() },
            ..ModelResponse::default()
        };
        Box::pin(async move { Ok(answer) })
    }
}

fn runtime(factor: f64) -> Runtime {
    Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/notes/workflow.yaml", NOTES)])),
        store: Arc::new(MemoryStore::new()),
        model: Arc::new(Counting { factor }),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir().join("archmax-calibration-absent"),
        pricing: PricingTable::default(),
    })
    .context(ContextSettings {
        window_tokens: Some(WINDOW),
        compact_at: 0.8,
        max_tool_result_tokens: 1_000,
        keep_recent: 12,
    })
    .build()
}

/// Two turns of one session: a long note (about 7,500 estimated tokens, under the
/// window's compaction mark of 12,800), then a short one. The second turn's status.
async fn two_notes(runtime: &Runtime) -> (Status, Option<String>) {
    let first = TurnRequest {
        workflow: "notes".into(),
        session: Some("n1".into()),
        message: Some("note ".repeat(6_000)),
        ..TurnRequest::default()
    };
    let outcome = runtime.run_turn(first).await.expect("the first turn runs");
    assert_eq!(outcome.reply, "Noted.", "{outcome:?}");
    let second = TurnRequest {
        workflow: "notes".into(),
        session: Some("n1".into()),
        message: Some("And one more.".into()),
        ..TurnRequest::default()
    };
    let outcome = runtime.run_turn(second).await.expect("the second turn runs");
    (outcome.status, outcome.exit.map(|exit| exit.reason))
}

#[tokio::test]
async fn a_prompt_is_judged_by_the_size_its_provider_measured_for_the_last_one() {
    let agreeing = runtime(1.0);
    let (status, reason) = two_notes(&agreeing).await;
    assert_eq!(status, Status::Completed, "a provider that agrees changes nothing: {reason:?}");
    assert!(agreeing.calibration().scale("n1", Some("relay-large")).is_some_and(|scale| (1.0..1.5).contains(&scale)));

    let measuring = runtime(3.0);
    let (status, reason) = two_notes(&measuring).await;
    let scale = measuring.calibration().scale("n1", Some("relay-large")).expect("a ratio was learned");
    assert!((2.0..4.0).contains(&scale), "{scale}");
    assert_eq!(status, Status::Failed);
    let reason = reason.expect("why the turn failed");
    assert!(reason.contains("more than the model's window of 16000 tokens"), "{reason}");
}
