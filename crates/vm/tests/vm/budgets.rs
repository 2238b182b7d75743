//! Budgets across a park: a session whose spend reached `max_cost_per_session` while it
//! waited for a decision stops before the next state's first call once decided, and a
//! message to it meanwhile is not answered (a warning says why); a decision that raises
//! the budget lets the next state run. Every call costs the same, so the stops do not
//! depend on the prompt's estimate.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use archmax_config::settings::{BudgetLimits, Budgets};
use archmax_vm::clock::FixedClock;
use archmax_vm::events::{Event, EventSink};
use archmax_vm::model::pricing::{PricingTable, Rates};
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, TokenUsage};
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Status, ToolCall};
use archmax_vm::{DecideRequest, ErrorKind, ReplyRequest, RunError, Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const QUOTE: &str = r#"title: Quote
instructions: You prepare quotes for Fernhill's trade customers.
settings:
  model: relay-large
states:
  draft:
    triggers:
      manual:
        description: A customer asks for a quote.
    instructions: Draft the quote, then hand it to review.
    transitions:
      - { to: review, description: The quote is drafted. }
  review:
    type: human
    instructions: Approve the quote.
    transitions:
      - { to: send, type: approve, description: Approve the quote. }
  send:
    instructions: Tell the customer the quote is approved.
"#;

/// Every call reports 10,000 output tokens: at 10 USD per million, 0.10 USD a call (input
/// is free here, so the next prompt's estimated cost is nothing).
const CALL_COST: f64 = 0.10;

/// Answers `draft` by advancing to review, and every other call with one line; counts
/// the calls.
#[derive(Default)]
struct Scripted {
    calls: AtomicUsize,
}

impl ModelAdapter for Scripted {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        let number = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let drafting = request.state == "draft";
        let answer = ModelResponse {
            text: if drafting { String::new() } else { format!("Answer {number}.") },
            tool_calls: if drafting {
                vec![ToolCall {
                    id: format!("call-{number}"),
                    name: "archmax_advance".to_string(),
                    args: serde_json::json!({ "to": "review", "reason": "drafted" }),
                }]
            } else {
                Vec::new()
            },
            // Output, so the prompt's estimate is not calibrated up by the counts.
            usage: TokenUsage { input: 1, output: 10_000, ..TokenUsage::default() },
            ..ModelResponse::default()
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// A runtime whose sessions may spend two calls' worth.
fn runtime(model: Arc<Scripted>, events: EventSink) -> Runtime {
    let limits = BudgetLimits { max_cost_per_session: Some(2.0 * CALL_COST), ..BudgetLimits::default() };
    Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/quote/workflow.yaml", QUOTE)])),
        store: Arc::new(MemoryStore::new()),
        model,
        events,
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir().join("archmax-budgets-absent"),
        pricing: PricingTable {
            models: vec![("relay-large".to_string(), Rates::new(0.0, 10.0))],
            ..PricingTable::default()
        },
    })
    .budgets(Budgets { default: limits, ..Budgets::default() })
    .build()
}

/// Starts session `id`: the draft's call and the park's message, two calls' worth.
async fn parked_at_review(runtime: &Runtime, id: &str) {
    let start = TurnRequest {
        workflow: "quote".into(),
        session: Some(id.into()),
        message: Some("A quote for 40 stoneware plates, please.".into()),
        ..TurnRequest::default()
    };
    let outcome = runtime.run_turn(start).await.expect("the turn runs");
    assert_eq!(outcome.status, Status::AwaitingDecision, "{outcome:?}");
    let spent = outcome.usage.cost_usd.expect("priced");
    assert!((spent - 2.0 * CALL_COST).abs() < 1e-9, "{spent} {outcome:?}");
}

fn decision(id: &str, raise_budget: bool) -> DecideRequest {
    DecideRequest {
        session: id.into(),
        to: "send".into(),
        decider: Some("lead@fernhill.example".into()),
        raise_budget,
        ..DecideRequest::default()
    }
}

#[tokio::test]
async fn a_decision_past_the_cost_limit_stops_before_the_next_call_unless_it_raises_the_budget() {
    let model = Arc::new(Scripted::default());
    let events = EventSink::new();
    events.record();
    let runtime = runtime(Arc::clone(&model), events.clone());

    parked_at_review(&runtime, "q1").await;
    // A message meanwhile would pass the limit: not answered, and the park holds.
    let reply = ReplyRequest { session: "q1".into(), message: "Any news?".into(), ..ReplyRequest::default() };
    let outcome = runtime.reply(reply).await.expect("the reply is taken");
    assert_eq!(outcome.status, Status::AwaitingDecision);
    assert_eq!(model.calls.load(Ordering::SeqCst), 2, "no call for the message");
    let warned = events.recorded().iter().any(|envelope| {
        matches!(&envelope.event, Event::Warning { scope, message } if scope == "budget" && message.contains("max_cost_per_session"))
    });
    assert!(warned, "a warning says why the message went unanswered");

    // Decided without a raise: `send` stops before its first call.
    let outcome = runtime.decide(decision("q1", false)).await.expect("the decision is taken");
    assert_eq!(outcome.status, Status::AwaitingInput, "{outcome:?}");
    let stop = outcome.budget_stop.expect("stopped at the budget");
    assert_eq!((stop.state.as_str(), stop.limit.as_str()), ("send", "max_cost_per_session"));
    assert!((stop.ceiling - 2.0 * CALL_COST).abs() < 1e-6 && stop.spent >= stop.ceiling, "{stop:?}");
    assert_eq!(model.calls.load(Ordering::SeqCst), 2, "the call was not made");
    // Another decision is refused: the session waits for a raise now.
    let refused = runtime.decide(decision("q1", false)).await.expect_err("stopped");
    assert!(matches!(refused, RunError::BudgetStopped { .. }), "{refused:?}");
    assert_eq!(refused.kind(), ErrorKind::Conflict);
    // A reply that raises the budget lifts the stop, and `send` answers.
    let lift = ReplyRequest {
        session: "q1".into(),
        message: "Go ahead.".into(),
        raise_budget: true,
        raised_by: Some("lead@fernhill.example".into()),
        ..ReplyRequest::default()
    };
    let outcome = runtime.reply(lift).await.expect("the raise is taken");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert_eq!(outcome.reply, "Answer 3.");

    // A second session, decided with a raise: one more allowance, and `send` runs.
    parked_at_review(&runtime, "q2").await;
    let outcome = runtime.decide(decision("q2", true)).await.expect("the decision is taken");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert_eq!(outcome.reply, "Answer 6.");
    let raised = events.recorded().into_iter().filter_map(|envelope| match envelope.event {
        Event::BudgetRaised { raised_by, raises, max_cost, lifted, .. } => Some((raised_by, raises, max_cost, lifted)),
        _ => None,
    });
    let raised: Vec<_> = raised.collect();
    let who = Some("lead@fernhill.example".to_string());
    let ceiling = 4.0 * CALL_COST;
    assert_eq!(raised.len(), 2, "{raised:?}");
    assert!(raised[0].0 == who && raised[0].1 == 1 && raised[0].3, "the reply lifted q1's stop: {raised:?}");
    assert!(raised[1].0 == who && raised[1].1 == 1 && !raised[1].3, "q2 was raised ahead: {raised:?}");
    assert!(raised.iter().all(|raise| raise.2.is_some_and(|cost| (cost - ceiling).abs() < 1e-6)));
}

const GRADED: &str = r#"title: Graded quote
instructions: You prepare quotes for Fernhill's trade customers.
settings:
  model: relay-large
states:
  draft:
    triggers:
      manual:
        description: A customer asks for a quote.
    instructions: Draft the quote, then hand it to the check.
    transitions:
      - { to: check, description: The quote is drafted. }
  check:
    type: grader
    instructions: Pass the quote when it names a price.
    transitions:
      - { to: send, description: The quote names a price. }
  send:
    instructions: Tell the customer the quote is ready.
"#;

/// The draft advances; the grader reads the variables until a raise, then passes; the
/// last state answers. Every call is a step of the script, in order.
#[derive(Default)]
struct Grading {
    calls: AtomicUsize,
}

impl ModelAdapter for Grading {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        let number = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let call = |name: &str, args: serde_json::Value| ToolCall {
            id: format!("call-{number}"),
            name: name.to_string(),
            args,
        };
        let tool_calls = match (request.state, number) {
            ("draft", _) => vec![call("archmax_advance", serde_json::json!({ "to": "check", "reason": "drafted" }))],
            ("check", 2) => vec![call("archmax_get_variables", serde_json::json!({}))],
            ("check", _) => vec![call("archmax_advance", serde_json::json!({ "to": "send", "reason": "priced" }))],
            _ => Vec::new(),
        };
        let text = if tool_calls.is_empty() { format!("Answer {number}.") } else { String::new() };
        let answer = ModelResponse { text, tool_calls, ..ModelResponse::default() };
        Box::pin(async move { Ok(answer) })
    }
}

#[tokio::test]
async fn a_grader_stops_before_a_call_past_the_limit_and_judges_afresh_once_raised() {
    let model = Arc::new(Grading::default());
    let limits = BudgetLimits { max_model_calls_per_turn: Some(2), ..BudgetLimits::default() };
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/graded/workflow.yaml", GRADED)])),
        store: Arc::new(MemoryStore::new()),
        model: model.clone(),
        events: EventSink::new(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: std::env::temp_dir().join("archmax-budgets-absent"),
        pricing: PricingTable::default(),
    })
    .budgets(Budgets { default: limits, ..Budgets::default() })
    .build();
    let start = TurnRequest {
        workflow: "graded".into(),
        session: Some("g1".into()),
        message: Some("A quote for 40 plates.".into()),
        ..TurnRequest::default()
    };
    // The draft's call and the grader's first: the grader's second would be the third.
    let outcome = runtime.run_turn(start).await.expect("the turn runs");
    assert_eq!(outcome.status, Status::AwaitingInput, "{outcome:?}");
    let stop = outcome.budget_stop.expect("stopped at the budget");
    assert_eq!((stop.state.as_str(), stop.limit.as_str()), ("check", "max_model_calls_per_turn"));
    assert_eq!(model.calls.load(Ordering::SeqCst), 2);
    let lift =
        ReplyRequest { session: "g1".into(), message: "Go on.".into(), raise_budget: true, ..ReplyRequest::default() };
    let outcome = runtime.reply(lift).await.expect("the raise is taken");
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert_eq!(outcome.state, "send");
    assert_eq!(outcome.reply, "Answer 4.");
}
