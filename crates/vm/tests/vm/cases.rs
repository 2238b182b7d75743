//! The case runner as a host drives it: what a case's judge is asked, and that every model
//! call of the session (the agent's, the grader's, the judge's) is cached as the workflow's
//! `settings.prompt_cache` declares.

use std::sync::{Arc, Mutex};

use archmax_compiler::lower::BuildInputs;
use archmax_compiler::{analyze_workspace, compile_analysis, load_memory};
use archmax_vm::cases::suite::{self, Models};
use archmax_vm::cases::{CaseEnv, Harness, Verdict};
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, Role, Sampling};
use archmax_vm::session::ToolCall;

const WORKFLOW: &str = r#"title: Greeter
instructions: You greet customers.
tests:
  judge:
    model: judge-model
    modelOptions: { temperature: 0, maxTokens: 200 }
settings:
  prompt_cache: { enabled: true, ttl: 1h }
states:
  greet:
    triggers:
      manual:
        description: Greet one customer.
    instructions: Plan a warm greeting, then have it checked.
    transitions:
      - to: check
        description: The greeting is planned.
  check:
    type: grader
    instructions: Pass the greeting when it is warm.
    transitions:
      - to: welcome
        description: The greeting is warm.
  welcome:
    instructions: Greet the customer warmly.
"#;

const CASE: &str = r#"title: A warm greeting
description: The judge grades the greeting.
steps:
  - send: "Hello!"
  - grade:
      closedQA: The customer is greeted warmly.
      atLeast: 0.5
"#;

/// Moves the agent to the grader, passes it, answers with a greeting and the judge with a
/// score, recording every judge request's model and sampling and every request's caching.
#[derive(Default)]
struct Recorder {
    judged: Mutex<Vec<(Option<String>, Sampling)>>,
    cached: Mutex<Vec<Cached>>,
}

/// A request's role and its prompt caching (enabled, ttl).
type Cached = (Role, Option<bool>, Option<String>);

fn advance(to: &str) -> Vec<ToolCall> {
    vec![ToolCall {
        id: format!("to-{to}"),
        name: "archmax_advance".to_string(),
        args: serde_json::json!({ "to": to, "reason": "done here" }),
    }]
}

impl ModelAdapter for Recorder {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let mut cached = self.cached.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            cached.push((request.role, request.prompt_cache.enabled, request.prompt_cache.ttl.map(str::to_string)));
            let text = match (request.role, request.state) {
                (Role::Judge, _) => {
                    let mut judged = self.judged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    judged.push((request.model.map(str::to_string), request.sampling));
                    r#"{"score": 0.9, "pass": true, "reason": "Warm."}"#.to_string()
                }
                (Role::Agent, "greet") => {
                    return Ok(ModelResponse { tool_calls: advance("check"), ..ModelResponse::default() });
                }
                (Role::Grader, _) => {
                    return Ok(ModelResponse { tool_calls: advance("welcome"), ..ModelResponse::default() });
                }
                _ => "Welcome, it is lovely to see you!".to_string(),
            };
            Ok(ModelResponse { text, ..ModelResponse::default() })
        })
    }
}

#[test]
fn the_judge_is_asked_with_the_model_options_the_workflow_names() {
    let mut analysis = analyze_workspace(
        load_memory([("workflows/greeter/workflow.yaml", WORKFLOW), ("workflows/greeter/tests/warm.test.yaml", CASE)])
            .expect("workspace"),
    );
    let cases = suite::discover(&mut analysis, "greeter").expect("the workflow exists");
    let inputs = BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT };
    let program = match compile_analysis(analysis, &["greeter".to_string()], &inputs) {
        Ok(compiled) => compiled.program,
        Err(error) => panic!("the test workspace compiles: {error}"),
    };
    let harness = Harness {
        program: Arc::new(program),
        workflow: "greeter".to_string(),
        root: std::env::temp_dir(),
        tests_dir: std::env::temp_dir(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        pricing: PricingTable::default(),
        tools: Default::default(),
        context: Default::default(),
    };
    let recorder = Arc::new(Recorder::default());
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let case = cases[0].case.as_ref().expect("the case parses");
    let result =
        executor.block_on(harness.run_case(case, CaseEnv { model: recorder.clone(), events: EventSink::new() }));
    assert_eq!(result.verdict, Verdict::Passed, "{:?}", result.failures());
    let judged = recorder.judged.lock().expect("lock").clone();
    assert_eq!(judged, [(Some("judge-model".to_string()), Sampling { temperature: Some(0.0), max_tokens: Some(200) })]);
    let cached = recorder.cached.lock().expect("lock").clone();
    let roles: Vec<Role> = cached.iter().map(|(role, _, _)| *role).collect();
    assert_eq!(roles, [Role::Agent, Role::Grader, Role::Agent, Role::Judge], "{cached:?}");
    assert!(
        cached.iter().all(|(_, enabled, ttl)| *enabled == Some(true) && ttl.as_deref() == Some("1h")),
        "every call is cached as settings.prompt_cache says: {cached:?}"
    );

    // The suite runs the same case against an endpoint the same way.
    let tally = executor.block_on(harness.run_suite(
        &suite::select(&cases, None),
        &Models::Endpoint(recorder.clone()),
        &mut Quiet,
    ));
    assert_eq!((tally.passed(), tally.failed()), (1, 0));
}

struct Quiet;

impl suite::Observer for Quiet {
    fn case_started(&mut self, _: usize, _: usize, _: &suite::SuiteCase) -> EventSink {
        EventSink::new()
    }

    fn case_finished(&mut self, _: &archmax_vm::cases::CaseResult, _: &suite::ModelNotes) {}
}
