//! The event stream against its published JSON Schema (`schemas/events.schema.json`):
//! every kind, with its optional fields set and unset, validates, and what the schema
//! closes (unknown kinds, unknown fields, missing fields, wrong values) does not. The
//! golden harness checks every event the recorded runs emit against the same schema.

use archmax_vm::events::{CacheShaping, Envelope, Event, ModelCache};
use serde_json::{Value, json};

use archmax_vm::events::SCHEMA;

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(SCHEMA).expect("the committed schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the committed schema compiles")
}

/// The position of `event`'s kind among the match arms. `Event` is `#[non_exhaustive]`,
/// so a kind with no arm here maps to `ARMS`, and a sample of it fails
/// [`every_kind_has_a_sample_and_the_schema_lists_exactly_those`] until it has an arm; a
/// kind with neither fails there too, once the schema lists it (the golden runs' events
/// are checked against the schema).
fn arm(event: &Event) -> usize {
    match event {
        Event::InterpreterEnabled {} => 0,
        Event::SkillsLoaded { .. } => 1,
        Event::GraphTopology { .. } => 2,
        Event::PromptShaping { .. } => 3,
        Event::WorkflowReset { .. } => 4,
        Event::StateEnter { .. } => 5,
        Event::StateLeave { .. } => 6,
        Event::StateErrorRouted { .. } => 7,
        Event::Advance { .. } => 8,
        Event::Parked { .. } => 9,
        Event::Decided { .. } => 10,
        Event::Upgraded { .. } => 11,
        Event::ParkMessage { .. } => 12,
        Event::Delivered { .. } => 13,
        Event::Raised { .. } => 14,
        Event::AgentTextDelta { .. } => 15,
        Event::AgentText { .. } => 16,
        Event::ToolCalled { .. } => 17,
        Event::ToolResult { .. } => 18,
        Event::ToolResultOffloaded { .. } => 19,
        Event::ToolBlocked { .. } => 20,
        Event::VariablesSet { .. } => 21,
        Event::TitleSet { .. } => 22,
        Event::ModelUsage { .. } => 23,
        Event::CodeStart { .. } => 24,
        Event::CodeOutput { .. } => 25,
        Event::CodeResult { .. } => 26,
        Event::GraderStart { .. } => 27,
        Event::GraderResult { .. } => 28,
        Event::SubWorkflowStart { .. } => 29,
        Event::SubWorkflowResult { .. } => 30,
        Event::TurnEnd { .. } => 31,
        Event::Warning { .. } => 32,
        Event::ContextCompacted { .. } => 33,
        Event::ModelFallback { .. } => 34,
        Event::BudgetStopped { .. } => 35,
        Event::BudgetRaised { .. } => 36,
        _ => ARMS,
    }
}
const ARMS: usize = 37;

fn s(text: &str) -> String {
    text.to_string()
}

/// Every kind at least once, optional fields both ways where it has them.
fn samples() -> Vec<Event> {
    let topology = json!({
        "workflow": "refund-desk",
        "states": [
            { "state": "triage", "type": "agent", "terminal": false, "triggers": ["manual"] },
            { "state": "done", "type": "agent", "terminal": true, "triggers": [] },
        ],
        "edges": [
            { "kind": "entry", "trigger": "manual", "to": "triage" },
            { "kind": "transition", "from": "triage", "to": "done", "type": "approve" },
            { "kind": "on_error", "from": "triage", "to": "done" },
        ],
    });
    vec![
        Event::InterpreterEnabled {},
        Event::SkillsLoaded { names: vec![s("orders"), s("refunds")] },
        Event::GraphTopology { topology },
        Event::PromptShaping {
            cache: CacheShaping {
                enabled: true,
                ttl: Some(s("5m")),
                models: vec![
                    ModelCache { model: Some(s("claude-sonnet-4")), strategy: s("anthropic-compat") },
                    ModelCache { model: None, strategy: s("unsupported") },
                ],
            },
            withheld: vec![s("write_todos"), s("task")],
        },
        Event::PromptShaping {
            cache: CacheShaping {
                enabled: false,
                ttl: None,
                models: vec![ModelCache { model: None, strategy: s("off") }],
            },
            withheld: vec![s("task")],
        },
        Event::WorkflowReset { entry: s("triage") },
        Event::StateEnter { state: s("triage") },
        Event::StateLeave { state: s("triage"), next: Some(s("done")) },
        Event::StateLeave { state: s("triage"), next: None },
        Event::StateErrorRouted { state: s("triage"), to: s("done"), reason: s("the tool failed") },
        Event::Advance { from: s("__start__"), to: s("triage"), reason: None, call_id: None },
        Event::Advance { from: s("triage"), to: s("done"), reason: Some(s("refunded")), call_id: Some(s("c1")) },
        Event::Parked {
            state: s("approve"),
            awaiting: s("input"),
            reason: Some(s("waiting for the carrier")),
            resume_at: Some(s("2026-12-02T10:00:00Z")),
            call_id: Some(s("c2")),
        },
        Event::Parked { state: s("approve"), awaiting: s("decision"), reason: None, resume_at: None, call_id: None },
        Event::Decided { state: s("approve"), to: s("done"), decided_by: None, comment: None },
        Event::Decided {
            state: s("approve"),
            to: s("done"),
            decided_by: Some(s("finance@fernhill.example")),
            comment: Some(s("Matches the invoice.")),
        },
        Event::Upgraded { state: s("triage"), from: s("a1b2"), to: s("c3d4") },
        Event::ParkMessage { state: s("approve"), direction: s("inbound"), text: s("Any news?") },
        Event::Delivered { state: s("wait"), trigger: s("carrier-scan"), to: s("triage") },
        Event::Raised { state: s("triage"), code: s("fraud"), reason: s("flagged"), call_id: Some(s("c3")) },
        Event::AgentTextDelta { state: s("triage"), text: s("Hel"), message_id: Some(s("msg-1")) },
        Event::AgentTextDelta { state: s("triage"), text: s("lo."), message_id: None },
        Event::AgentText { state: s("triage"), text: s("Hello."), message_id: None, partial: None },
        Event::AgentText { state: s("triage"), text: s("Hel"), message_id: Some(s("msg-1")), partial: Some(true) },
        Event::ToolCalled {
            state: s("triage"),
            tool: s("read_file"),
            call_id: s("c4"),
            args: json!({ "file_path": "orders.json" }),
            args_cut: None,
            detail: Some(s("orders.json")),
            origin: s("model"),
            server: None,
        },
        Event::ToolCalled {
            state: s("triage"),
            tool: s("carrier__track_parcel"),
            call_id: s("c5"),
            args: json!({ "tracking_number": "YB4TQ8N2", "note": "… (90000 bytes)" }),
            args_cut: Some(90_040),
            detail: None,
            origin: s("script"),
            server: Some(s("carrier")),
        },
        Event::ToolResult {
            state: s("triage"),
            tool: s("read_file"),
            call_id: s("c4"),
            status: s("error"),
            duration_ms: 3,
            output: s("Error: no such file"),
            truncated: false,
            origin: s("code"),
            server: Some(s("carrier")),
        },
        Event::ToolResultOffloaded {
            state: s("triage"),
            tool: s("grep"),
            call_id: s("call_7"),
            path: s("large_tool_results/call_7"),
            bytes: 183_204,
            tokens: 45_801,
        },
        Event::ContextCompacted {
            state: s("triage"),
            count: 2,
            messages: 412,
            path: s("conversation_history/2.jsonl"),
            tokens_before: 104_220,
            tokens_after: 31_877,
            trimmed: false,
        },
        Event::ContextCompacted {
            state: s("triage"),
            count: 3,
            messages: 40,
            path: s("conversation_history/3.jsonl"),
            tokens_before: 14_220,
            tokens_after: 9_877,
            trimmed: true,
        },
        Event::ToolBlocked {
            state: s("triage"),
            tool: s("write_file"),
            rule: s("tool.not-allowed"),
            reason: s("not allowed here"),
            call_id: s("c6"),
            args: json!({ "file_path": "x" }),
            args_cut: None,
            origin: s("grader"),
        },
        Event::ToolBlocked {
            state: s("triage"),
            tool: s("write_file"),
            rule: s("tool.not-allowed"),
            reason: s("not allowed here"),
            call_id: s("c6b"),
            args: json!({ "file_path": "x", "content": "… (5000000 bytes)" }),
            args_cut: Some(5_000_040),
            origin: s("model"),
        },
        Event::VariablesSet {
            state: Some(s("triage")),
            names: vec![s("order")],
            locked: false,
            call_id: Some(s("c7")),
        },
        Event::VariablesSet { state: None, names: vec![s("trigger")], locked: true, call_id: None },
        Event::TitleSet { title: s("Refund for ORD-1042"), state: Some(s("triage")), call_id: Some(s("c8")) },
        Event::TitleSet { title: s("Seeded"), state: None, call_id: None },
        Event::ModelUsage {
            state: s("triage"),
            input_tokens: 20369,
            output_tokens: 287,
            cache_read_tokens: 18074,
            cache_creation_tokens: 0,
            model: Some(s("claude-sonnet-4")),
            cost_usd: Some(0.016612),
            fallback_for: None,
            role: Some(s("agent")),
        },
        Event::ModelUsage {
            state: s("triage"),
            input_tokens: 1200,
            output_tokens: 80,
            cache_read_tokens: 0,
            cache_creation_tokens: 0,
            model: Some(s("claude-sonnet-4-5")),
            cost_usd: None,
            fallback_for: Some(s("gpt-4.1")),
            role: None,
        },
        Event::ModelFallback {
            state: s("triage"),
            model: s("gpt-4.1"),
            provider: s("azure"),
            reason: s("the model endpoint answered 429: rate limited"),
            fallback: s("claude-sonnet-4-5"),
        },
        Event::BudgetStopped {
            state: s("triage"),
            limit: s("max_cost_per_session"),
            ceiling: 2.5,
            spent: 2.48,
            next: Some(0.04),
            reason: s("the session has spent $2.48 and the next prompt would cost about $0.04 more"),
        },
        Event::BudgetStopped {
            state: s("triage"),
            limit: s("max_model_calls_per_turn"),
            ceiling: 40.0,
            spent: 40.0,
            next: None,
            reason: s("this turn has made 40 model calls"),
        },
        Event::BudgetRaised {
            state: s("triage"),
            raised_by: Some(s("lead@fernhill.example")),
            raises: 1,
            max_cost: Some(5.0),
            lifted: true,
        },
        Event::BudgetRaised { state: s("review"), raised_by: None, raises: 2, max_cost: None, lifted: false },
        Event::CodeStart { state: s("assemble"), script: s("scripts/assemble.js") },
        Event::CodeOutput { state: s("assemble"), line: s("42 rows") },
        Event::CodeResult { state: s("assemble"), status: s("advanced"), duration_ms: 9, reason: None },
        Event::GraderStart { state: s("review") },
        Event::GraderResult { state: s("review"), status: s("failed"), duration_ms: 1, reason: Some(s("no verdict")) },
        Event::SubWorkflowStart {
            state: s("triage"),
            workflow: s("refund"),
            dispatch_id: s("subwf-1"),
            depth: 1,
            chain: vec![s("support"), s("refund")],
            call_id: Some(s("c9")),
        },
        Event::SubWorkflowResult {
            state: s("triage"),
            workflow: s("refund"),
            dispatch_id: s("subwf-1"),
            status: s("ok"),
            duration_ms: 12,
            reason: None,
            returns: vec![s("refund_id")],
        },
        Event::SubWorkflowResult {
            state: s("triage"),
            workflow: s("refund"),
            dispatch_id: s("subwf-2"),
            status: s("parked"),
            duration_ms: 0,
            reason: Some(s("waits for a decision")),
            returns: Vec::new(),
        },
        Event::TurnEnd { status: s("completed"), state: s("done"), terminal: true, code: None, reason: None },
        Event::TurnEnd {
            status: s("failed"),
            state: s("triage"),
            terminal: false,
            code: Some(s("fraud")),
            reason: Some(s("flagged")),
        },
        Event::Warning { scope: s("deliver"), message: s("Delivered title ignored: it is empty") },
    ]
}

fn line(event: Event, dispatch: Option<&str>) -> Value {
    let level = event.level();
    let envelope = Envelope {
        seq: 7,
        ts: 1_767_605_400_000,
        level,
        session_id: Some(s("s1~1")),
        sub_workflow_dispatch_id: dispatch.map(str::to_string),
        event,
    };
    serde_json::to_value(&envelope).expect("an envelope serializes")
}

fn problems(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator.iter_errors(value).map(|error| format!("{error} at {}", error.instance_path())).collect()
}

#[test]
fn every_kind_has_a_sample_and_the_schema_lists_exactly_those() {
    let samples = samples();
    let mut covered = [false; ARMS];
    for event in &samples {
        let index = arm(event);
        assert!(index < ARMS, "an event kind without an arm in `arm`: {event:?}");
        covered[index] = true;
    }
    let missing: Vec<usize> = (0..ARMS).filter(|index| !covered[*index]).collect();
    assert!(missing.is_empty(), "event kinds without a sample (arm numbers): {missing:?}");

    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let listed: Vec<&str> =
        schema["properties"]["event"]["enum"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let mut sampled: Vec<String> =
        samples.iter().map(|event| line(event.clone(), None)["event"].as_str().unwrap().to_string()).collect();
    sampled.dedup();
    assert_eq!(listed, sampled, "the schema's kinds, in the enum's order");
}

#[test]
fn every_sample_validates() {
    let validator = validator();
    for (index, event) in samples().into_iter().enumerate() {
        let value = line(event, (index % 2 == 0).then_some("subwf-3"));
        let found = problems(&validator, &value);
        assert!(found.is_empty(), "{value}\n{}", found.join("\n"));
    }
}

#[test]
fn what_the_schema_closes_fails_it() {
    let validator = validator();
    let good = line(Event::StateEnter { state: s("triage") }, None);
    assert!(problems(&validator, &good).is_empty());
    let mutate = |change: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut value = good.clone();
        change(value.as_object_mut().unwrap());
        value
    };
    let cases: Vec<(&str, Value)> = vec![
        ("an unknown kind", mutate(&|map| drop(map.insert(s("event"), json!("state-entered"))))),
        ("a field the kind does not have", mutate(&|map| drop(map.insert(s("next"), json!("done"))))),
        ("a missing required field", mutate(&|map| drop(map.remove("state")))),
        ("an envelope without a sequence number", mutate(&|map| drop(map.remove("seq")))),
        ("a sequence number of 0", mutate(&|map| drop(map.insert(s("seq"), json!(0))))),
        ("an unknown level", mutate(&|map| drop(map.insert(s("level"), json!("debug"))))),
        ("a snake_case envelope field", mutate(&|map| drop(map.insert(s("session_id"), json!("s1"))))),
        ("a malformed dispatch id", mutate(&|map| drop(map.insert(s("subWorkflowDispatchId"), json!("child"))))),
    ];
    for (what, value) in cases {
        assert!(!problems(&validator, &value).is_empty(), "{what} passed: {value}");
    }
    let title = line(Event::TitleSet { title: s("two\nlines"), state: None, call_id: None }, None);
    assert!(!problems(&validator, &title).is_empty(), "a two-line title passed");
    let usage = line(
        Event::ToolResult {
            state: s("a"),
            tool: s("t"),
            call_id: s("c"),
            status: s("maybe"),
            duration_ms: 0,
            output: String::new(),
            truncated: false,
            origin: s("model"),
            server: None,
        },
        None,
    );
    assert!(!problems(&validator, &usage).is_empty(), "an unknown tool-result status passed");
}
