//! The case runner as a host drives it: what a case's judge is asked.

use std::sync::{Arc, Mutex};

use archmax_vm::clock::FixedClock;
use archmax_vm::compiler::lower::BuildInputs;
use archmax_vm::compiler::{analyze_workspace, compile_analysis, load_memory};
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse, Role, Sampling};
use archmax_vm::testing::suite::{self, Models};
use archmax_vm::testing::{CaseEnv, Harness, Verdict};

const WORKFLOW: &str = r#"title: Greeter
instructions: You greet customers.
tests:
  judge:
    model: judge-model
    modelOptions: { temperature: 0, maxTokens: 200 }
states:
  greet:
    triggers:
      manual:
        description: Greet one customer.
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

/// Answers the agent with a greeting and the judge with a score, recording every
/// judge request's model and sampling.
#[derive(Default)]
struct Recorder {
    judged: Mutex<Vec<(Option<String>, Sampling)>>,
}

impl ModelAdapter for Recorder {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let text = match request.role {
                Role::Judge => {
                    let mut judged = self.judged.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    judged.push((request.model.map(str::to_string), request.sampling));
                    r#"{"score": 0.9, "pass": true, "reason": "Warm."}"#.to_string()
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

    fn case_finished(&mut self, _: &archmax_vm::testing::CaseResult, _: &suite::ModelNotes) {}
}
