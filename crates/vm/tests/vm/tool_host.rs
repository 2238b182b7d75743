//! Host tools through the kernel: a fake [`ToolHost`] stands in for MCP servers, and a
//! scripted model plays one turn of calls against it. Every call the host receives must
//! be one the kernel allowed (guards, path arguments, denials, essential tools), the model
//! must be shown the host's real schemas, and the answers (text, errors, binary content)
//! must reach the model as the host gave them.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use archmax_compiler::tools::PathAccess;
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse};
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::session::{Message, SessionStore, ToolCall};
use archmax_vm::tool_host::{Catalog, Content, HostAnswer, HostCall, HostError, HostFuture, HostTool, ToolHost};
use archmax_vm::{Mock, Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

const DESK: &str = r#"title: Desk
instructions: You work the customer records.
tools:
  allow_always: [read_file, archmax_eval]
  forbid_always: [crm__purge]
states:
  work:
    triggers:
      manual:
        description: Work one request.
        requires:
          - { name: region, type: string }
    instructions: Look the customer up and export what you find.
    tools:
      allow:
        - { tool: crm__lookup, args: { region: ["${{region}}"] } }
        - crm__export
        - crm__import
        - crm__picture
        - crm__broken
        - crm__oops
        - crm__flood
        - a__ping
        - b__ping
        - { tool: mail__send, connection: mail-eu }
      forbid: [crm__audit]
    transitions:
      - to: done
        description: The request is worked.
  done:
    instructions: Say that it is done.
"#;

fn tool(name: &str, server: &str, paths: &[(&str, PathAccess)]) -> HostTool {
    HostTool {
        name: name.to_string(),
        server: server.to_string(),
        description: format!("The {name} tool."),
        input_schema: json!({ "type": "object", "properties": { "region": { "type": "string" } }, "x-tool": name }),
        paths: paths.iter().map(|(argument, access)| (argument.to_string(), *access)).collect(),
    }
}

/// A desk whose host tool is granted only in its second state.
const SPLIT_DESK: &str = r#"title: Split desk
instructions: You work the customer records.
states:
  work:
    triggers:
      manual:
        description: Work one request.
        requires:
          - { name: region, type: string }
    instructions: Read the request.
    tools:
      allow: [read_file]
    transitions:
      - to: done
        description: The request is read.
  done:
    instructions: Look the customer up.
    tools:
      allow: [crm__lookup]
"#;

/// Serves a fixed catalog and records every call it receives.
struct FakeHost {
    catalog: Arc<Catalog>,
    calls: Mutex<Vec<(String, Option<String>, Value)>>,
    keys: Mutex<Vec<String>>,
}

impl FakeHost {
    fn new() -> FakeHost {
        let tools = vec![
            tool("crm__lookup", "crm", &[("file_path", PathAccess::Read)]),
            tool("crm__export", "crm", &[("destination", PathAccess::Write)]),
            tool("crm__import", "crm", &[("file_path", PathAccess::Read)]),
            tool("crm__picture", "crm", &[]),
            tool("crm__broken", "crm", &[]),
            tool("crm__oops", "crm", &[]),
            tool("crm__flood", "crm", &[]),
            tool("crm__whoami", "crm", &[]),
            tool("crm__audit", "crm", &[]),
            tool("crm__purge", "crm", &[]),
            tool("a__ping", "a", &[]),
            tool("b__ping", "b", &[]),
            tool("mail__send", "mail-eu", &[]),
        ];
        FakeHost {
            catalog: Arc::new(Catalog { tools, problems: Vec::new() }),
            calls: Mutex::new(Vec::new()),
            keys: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<(String, Option<String>, Value)> {
        self.calls.lock().map(|calls| calls.clone()).unwrap_or_default()
    }
}

/// `args` with each handed path (`/proc/<pid>/fd/<n>/…`) read back, while the call runs
/// and its handle is open, to the real path it names.
fn as_resolved(args: &Value) -> Value {
    match args {
        Value::Object(members) => Value::Object(members.iter().map(|(k, v)| (k.clone(), as_resolved(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(as_resolved).collect()),
        Value::String(text) => Value::String(resolved_path(text)),
        other => other.clone(),
    }
}

fn resolved_path(text: &str) -> String {
    let prefix = format!("/proc/{}/fd/", std::process::id());
    let Some(rest) = text.strip_prefix(&prefix) else { return text.to_string() };
    let (fd, below) = rest.split_once('/').unwrap_or((rest, ""));
    match std::fs::read_link(format!("{prefix}{fd}")) {
        Ok(target) if below.is_empty() => target.to_string_lossy().into_owned(),
        Ok(target) => target.join(below).to_string_lossy().into_owned(),
        Err(_) => text.to_string(),
    }
}

impl ToolHost for FakeHost {
    fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
        let catalog = Arc::clone(&self.catalog);
        Box::pin(async move { catalog })
    }

    fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
        Box::pin(async move {
            let Some(known) = self.catalog.tool(call.tool) else {
                return Err(HostError::NotProvided(call.tool.to_string()));
            };
            if let Ok(mut calls) = self.calls.lock() {
                calls.push((call.tool.to_string(), call.connection.map(str::to_string), as_resolved(call.args)));
            }
            if let Ok(mut keys) = self.keys.lock() {
                keys.push(call.idempotency_key.to_string());
            }
            let server = known.server.clone();
            match call.tool {
                "crm__picture" => Ok(HostAnswer {
                    server,
                    content: vec![
                        Content::Text("Here is the chart.".to_string()),
                        Content::Blob { mime_type: "image/png".to_string(), data: b"\x89PNG-chart".to_vec() },
                    ],
                    is_error: false,
                }),
                "crm__broken" => {
                    Err(HostError::Failed { server, message: "server `crm` stopped mid-call".to_string() })
                }
                "crm__oops" => Ok(HostAnswer { is_error: true, ..HostAnswer::text(server, "no such customer") }),
                // A hostile server: 100 images, and a megabyte of text.
                "crm__flood" => Ok(HostAnswer {
                    server,
                    content: (0..100)
                        .map(|_| Content::Blob { mime_type: "image/png".to_string(), data: vec![0; 10] })
                        .chain([Content::Text("y".repeat(1 << 20))])
                        .collect(),
                    is_error: false,
                }),
                tool => Ok(HostAnswer::text(server, format!("{tool} answered {}", call.args))),
            }
        })
    }

    fn may_provide(&self, name: &str) -> bool {
        name.contains("__")
    }
}

/// Plays one scripted batch of calls in `work`, then answers in text; records the tools
/// it was shown on its first call.
struct Script {
    batch: Vec<ToolCall>,
    shown: Mutex<Vec<(String, Value)>>,
}

impl ModelAdapter for Script {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            let answered = request.messages.iter().any(|message| matches!(message, Message::Tool { .. }));
            if answered {
                return Ok(ModelResponse { text: "Done.".to_string(), ..ModelResponse::default() });
            }
            if let Ok(mut shown) = self.shown.lock() {
                *shown = request.tools.iter().map(|tool| (tool.name.clone(), tool.parameters.clone())).collect();
            }
            Ok(ModelResponse { tool_calls: self.batch.clone(), ..ModelResponse::default() })
        })
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall { id: id.to_string(), name: name.to_string(), args }
}

struct Ran {
    runtime: Runtime,
    host: Arc<FakeHost>,
    model: Arc<Script>,
    events: Vec<Value>,
    messages: Vec<Message>,
}

fn run(batch: Vec<ToolCall>, essential: &[&str], mocks: Vec<Mock>) -> Ran {
    run_in(Arc::new(MemoryStore::new()), batch, essential, mocks)
}

fn run_in(store: Arc<dyn SessionStore>, batch: Vec<ToolCall>, essential: &[&str], mocks: Vec<Mock>) -> Ran {
    run_with(DESK, store, batch, essential, mocks)
}

fn run_workflow(workflow: &str, batch: Vec<ToolCall>, essential: &[&str], mocks: Vec<Mock>) -> Ran {
    run_with(workflow, Arc::new(MemoryStore::new()), batch, essential, mocks)
}

fn run_with(
    workflow: &str,
    store: Arc<dyn SessionStore>,
    batch: Vec<ToolCall>,
    essential: &[&str],
    mocks: Vec<Mock>,
) -> Ran {
    let host = Arc::new(FakeHost::new());
    let model = Arc::new(Script { batch, shown: Mutex::new(Vec::new()) });
    let events = EventSink::new();
    events.record();
    let root = std::env::temp_dir();
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile(&[("workflows/desk/workflow.yaml", workflow)])),
        store,
        model: model.clone(),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root,
        pricing: PricingTable::default(),
    })
    .tool_host(host.clone(), essential.iter().map(|tool| tool.to_string()).collect())
    .mocks(mocks)
    .build();
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let mut variables = serde_json::Map::new();
    variables.insert("region".to_string(), json!("eu"));
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Look up ACME.".to_string()),
        variables,
        ..TurnRequest::default()
    };
    executor.block_on(runtime.run_turn(request)).expect("the turn runs");
    let session =
        executor.block_on(runtime.store().read("s1")).expect("the store reads").expect("the session is stored");
    let events = events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    Ran { runtime, host, model, events, messages: session.messages.clone() }
}

impl Ran {
    fn answer(&self, call_id: &str) -> (String, String) {
        self.messages
            .iter()
            .find_map(|message| match message {
                Message::Tool { call_id: id, content, status, .. } if id == call_id => {
                    Some((content.clone(), format!("{status:?}")))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no answer to {call_id}: {:#?}", self.messages))
    }

    fn event(&self, kind: &str, call_id: &str) -> Option<&Value> {
        self.events.iter().find(|event| event["event"] == kind && event["callId"] == call_id)
    }

    fn blocked(&self, call_id: &str) -> Option<String> {
        self.event("tool-blocked", call_id).and_then(|event| event["rule"].as_str()).map(str::to_string)
    }
}

#[test]
fn every_host_call_passes_the_kernel_and_only_allowed_calls_reach_the_host() {
    let sessions = std::env::temp_dir().join(format!("archmax-host-tools-{}", std::process::id()));
    // A folder of a dead process with the same id (ids are reused) holds its sessions.
    let _ = std::fs::remove_dir_all(&sessions);
    let ran = run_in(
        Arc::new(FsStore::new(&sessions, archmax_vm::session::fs::SealKeys::generate().expect("a seal key"))),
        vec![
            call("c1", "crm__lookup", json!({ "region": "eu" })),
            call("c2", "crm__lookup", json!({ "region": "us" })),
            call("c3", "crm__export", json!({ "destination": "workflows/desk/workflow.yaml" })),
            call("c4", "crm__export", json!({ "destination": "../outside.csv" })),
            call("c5", "crm__export", json!({ "destination": "skills/notes.md" })),
            call("c6", "crm__export", json!({ "destination": "scratchpad/acme.csv" })),
            call("c7", "crm__audit", json!({})),
            call("c8", "crm__purge", json!({})),
            call("c9", "crm__unlisted", json!({})),
            call("c10", "mail__send", json!({ "to": "ops@example.com" })),
            call("c11", "crm__export", json!({ "destination": "/etc/cron.d/evil" })),
            call("c12", "crm__import", json!({ "file_path": "./AGENTS.md" })),
            // A read path into an offload area opens nothing of a host tool's guards.
            call("c13", "crm__lookup", json!({ "region": "us", "file_path": "large_tool_results/x" })),
        ],
        &[],
        Vec::new(),
    );
    // Only the allowed calls reached the host, a declared path argument as the real path
    // the kernel decided (handed through a handle on it, read back here): inside the
    // session's own folder, whatever the text said.
    let session_dir = sessions.join("s1");
    let real = |path: &str| session_dir.join(path).to_string_lossy().into_owned();
    assert_eq!(
        ran.host.calls(),
        vec![
            ("crm__lookup".to_string(), None, json!({ "region": "eu" })),
            ("crm__export".to_string(), None, json!({ "destination": real("scratchpad/acme.csv") })),
            ("mail__send".to_string(), Some("mail-eu".to_string()), json!({ "to": "ops@example.com" })),
            ("crm__export".to_string(), None, json!({ "destination": real("etc/cron.d/evil") })),
            // A mount's path is its source's, under the workspace root.
            (
                "crm__import".to_string(),
                None,
                json!({ "file_path": std::env::temp_dir().join("AGENTS.md").to_string_lossy() }),
            ),
        ]
    );
    let _ = std::fs::remove_dir_all(&sessions);
    assert_eq!(ran.blocked("c2").as_deref(), Some("tool.not-allowed"), "a guard mismatch is refused");
    assert_eq!(ran.blocked("c13").as_deref(), Some("tool.not-allowed"));
    assert_eq!(ran.blocked("c3").as_deref(), Some("zone.governance-plane"));
    assert_eq!(ran.blocked("c4").as_deref(), Some("zone.escape"));
    assert_eq!(ran.blocked("c5").as_deref(), Some("zone.read-only"), "a declared write path is a write");
    // A host tool the host provides but the state does not grant is a governance
    // decision, audited by its rule: denied here, denied workflow-wide.
    assert_eq!(ran.blocked("c7").as_deref(), Some("tool.forbidden-here"));
    assert_eq!(ran.blocked("c8").as_deref(), Some("tool.forbidden"));
    // A name no one provides is answered, not blocked.
    assert_eq!(ran.blocked("c9"), None, "a name that is no tool here is answered, not blocked");
    assert!(ran.answer("c9").0.contains("'crm__unlisted' is not a tool"), "{:?}", ran.answer("c9"));
    // Events name the server that served a call.
    let called = ran.event("tool-called", "c1").expect("tool-called");
    assert_eq!(called["server"], "crm");
    let result = ran.event("tool-result", "c1").expect("tool-result");
    assert_eq!((result["server"].as_str(), result["status"].as_str()), (Some("crm"), Some("ok")));
    assert_eq!(ran.answer("c1").0, r#"crm__lookup answered {"region":"eu"}"#);
}

#[test]
fn the_model_is_shown_the_hosts_schemas_and_the_essential_tools_it_may_use() {
    let ran =
        run(vec![call("c1", "crm__lookup", json!({ "region": "eu" }))], &["crm__whoami", "crm__audit"], Vec::new());
    let shown = ran.model.shown.lock().expect("shown").clone();
    let names: Vec<&str> = shown.iter().map(|(name, _)| name.as_str()).collect();
    let lookup = shown.iter().find(|(name, _)| name == "crm__lookup").expect("crm__lookup is shown");
    assert_eq!(lookup.1["x-tool"], "crm__lookup", "the host's own schema is shown");
    assert!(names.contains(&"crm__whoami"), "an essential tool is on: {names:?}");
    assert!(!names.contains(&"crm__audit"), "an essential tool the state forbids is hidden: {names:?}");
    assert!(!names.contains(&"crm__purge"), "{names:?}");
    // The precomputed built-ins keep their place ahead of the essential tools.
    assert_eq!(names.first(), Some(&"read_file"));
    assert_eq!(names.last(), Some(&"crm__whoami"));
    assert!(ran.runtime.essential_tools().contains(&"crm__whoami".to_string()));
}

#[test]
fn an_essential_tool_is_allowed_where_no_entry_names_it_and_a_denial_still_wins() {
    let ran = run(
        vec![
            call("c1", "crm__whoami", json!({})),
            call("c2", "crm__audit", json!({})),
            call("c3", "crm__purge", json!({})),
        ],
        &["crm__whoami", "crm__audit", "crm__purge"],
        Vec::new(),
    );
    assert_eq!(ran.host.calls(), vec![("crm__whoami".to_string(), None, json!({}))]);
    assert_eq!(ran.event("tool-called", "c1").map(|event| event["server"].clone()), Some(json!("crm")));
    assert_eq!(ran.blocked("c2").as_deref(), Some("tool.forbidden-here"));
    assert_eq!(ran.blocked("c3").as_deref(), Some("tool.forbidden"));
    // Without the host naming it essential, the same call is not granted: the host
    // provides the tool, so the refusal is a governance decision with its rule.
    let ran = run(vec![call("c1", "crm__whoami", json!({}))], &[], Vec::new());
    assert!(ran.host.calls().is_empty());
    assert_eq!(ran.blocked("c1").as_deref(), Some("tool.not-allowed"));
    assert!(ran.answer("c1").0.contains("'crm__whoami' is not allowed in state 'work'"), "{:?}", ran.answer("c1"));
}

#[test]
fn a_host_tool_granted_in_another_state_or_in_none_is_blocked_with_its_rule() {
    // `crm__lookup` is granted in `done`, not in `work`; `crm__whoami` nowhere; only a
    // case's mock knows `billing__charge`. Each is refused in `work` under
    // `tool.not-allowed` and recorded as `tool-blocked`; none reaches the host or the mock.
    let mock = Mock { tool: "billing__charge".to_string(), when_input: None, result: json!("charged") };
    let ran = run_workflow(
        SPLIT_DESK,
        vec![
            call("c1", "crm__lookup", json!({ "region": "eu" })),
            call("c2", "crm__whoami", json!({})),
            call("c3", "billing__charge", json!({})),
            call("c4", "crm__nothing", json!({})),
        ],
        &[],
        vec![mock],
    );
    assert!(ran.host.calls().is_empty(), "{:?}", ran.host.calls());
    for (call_id, tool) in [("c1", "crm__lookup"), ("c2", "crm__whoami"), ("c3", "billing__charge")] {
        let event = ran.event("tool-blocked", call_id).unwrap_or_else(|| panic!("no tool-blocked for {call_id}"));
        assert_eq!((event["rule"].as_str(), event["state"].as_str()), (Some("tool.not-allowed"), Some("work")));
        let (text, status) = ran.answer(call_id);
        assert!(text.contains(&format!("'{tool}' is not allowed in state 'work'")), "{text}");
        assert_eq!(status, "Error");
    }
    // A name no one provides stays a name that is no tool: answered, not audited.
    assert_eq!(ran.blocked("c4"), None);
    assert!(ran.answer("c4").0.contains("'crm__nothing' is not a tool"), "{:?}", ran.answer("c4"));
}

#[test]
fn a_short_name_resolves_to_the_one_tool_it_ends_and_an_ambiguous_one_lists_the_candidates() {
    let ran =
        run(vec![call("c1", "lookup", json!({ "region": "eu" })), call("c2", "ping", json!({}))], &[], Vec::new());
    assert_eq!(ran.host.calls(), vec![("crm__lookup".to_string(), None, json!({ "region": "eu" }))]);
    assert_eq!(ran.event("tool-called", "c1").map(|event| event["tool"].clone()), Some(json!("crm__lookup")));
    let (text, status) = ran.answer("c2");
    assert_eq!(status, "Error");
    assert!(text.contains("it could be any of: a__ping, b__ping"), "{text}");
    assert_eq!(ran.blocked("c2"), None);
}

#[test]
fn answers_reach_the_model_as_the_host_gave_them() {
    let ran = run(
        vec![
            call("c1", "crm__picture", json!({})),
            call("c2", "crm__broken", json!({})),
            call("c3", "crm__oops", json!({})),
            call("../../c4", "crm__picture", json!({})),
        ],
        &[],
        Vec::new(),
    );
    let (text, status) = ran.answer("c1");
    assert_eq!(status, "Ok");
    assert_eq!(text, "Here is the chart.\n[image/png, 10 bytes, written to scratchpad/tool-output/c1-2-1.png]");
    let workspace = ran.runtime.workspace("s1").expect("workspace");
    assert_eq!(workspace.read("scratchpad/tool-output/c1-2-1.png").expect("the image is kept"), b"\x89PNG-chart");
    // A hostile call id cannot move where the content lands.
    assert!(ran.answer("../../c4").0.contains("scratchpad/tool-output/c4-2-1.png"), "{:?}", ran.answer("../../c4"));
    assert!(workspace.read("scratchpad/tool-output/c4-2-1.png").is_ok());
    // A failed call and an `isError` answer are error answers; the turn goes on.
    assert_eq!(ran.answer("c2"), ("Error: server `crm` stopped mid-call".to_string(), "Error".to_string()));
    let failed = ran.event("tool-result", "c2").expect("tool-result");
    assert_eq!((failed["status"].as_str(), failed["server"].as_str()), (Some("error"), Some("crm")));
    assert_eq!(ran.answer("c3"), ("no such customer".to_string(), "Error".to_string()));
}

#[test]
fn a_case_mock_answers_before_the_host() {
    let mock = Mock { tool: "crm__lookup".to_string(), when_input: None, result: json!("mocked ACME") };
    let ran = run(vec![call("c1", "crm__lookup", json!({ "region": "eu" }))], &[], vec![mock]);
    assert!(ran.host.calls().is_empty(), "the mock answered: {:?}", ran.host.calls());
    assert_eq!(ran.answer("c1").0, "mocked ACME");
    assert!(ran.event("tool-result", "c1").is_some_and(|event| event.get("server").is_none()));
}

#[test]
fn a_script_calls_host_tools_through_the_same_kernel() {
    let code = "const ok = await tools.crm__lookup({ region: 'eu' }); \
                let refused = ''; try { await tools.crmLookup({ region: 'us' }); } catch (error) { refused = String(error); } \
                ok + ' | ' + refused";
    let ran = run(vec![call("c1", "archmax_eval", json!({ "code": code }))], &[], Vec::new());
    assert_eq!(ran.host.calls(), vec![("crm__lookup".to_string(), None, json!({ "region": "eu" }))]);
    let (text, _) = ran.answer("c1");
    assert!(text.contains(r#"crm__lookup answered {"region":"eu"} | "#), "{text}");
    assert!(text.contains("BLOCKED"), "the guard refuses the script's second call: {text}");
    let scripted = ran.events.iter().find(|event| event["event"] == "tool-called" && event["origin"] == "script");
    assert_eq!(scripted.map(|event| event["server"].clone()), Some(json!("crm")));
}

#[test]
fn a_path_into_session_files_a_store_keeps_off_this_machine_is_refused_before_the_host() {
    let ran = run(vec![call("c1", "crm__export", json!({ "destination": "scratchpad/acme.csv" }))], &[], Vec::new());
    assert!(ran.host.calls().is_empty(), "{:?}", ran.host.calls());
    let (text, status) = ran.answer("c1");
    assert_eq!(status, "Error");
    assert!(text.contains("cannot open them; give the server a path inside a mount"), "{text}");
}

#[test]
fn a_flooding_answer_is_bounded_before_it_reaches_the_transcript() {
    let ran = run(vec![call("c1", "crm__flood", json!({}))], &[], Vec::new());
    let (text, status) = ran.answer("c1");
    assert_eq!(status, "Ok");
    // The model reads a preview, the whole answer is offloaded once (never cut first).
    assert!(text.len() < 8 * 1024, "the model reads a preview of it: {} bytes", text.len());
    assert!(text.contains("[84 more binary part(s) dropped: at most 16 are kept per answer]"), "{text}");
    assert!(text.contains("saved whole in `large_tool_results/c1`"), "{text}");
    assert!(ran.event("tool-result-offloaded", "c1").is_some());
    let workspace = ran.runtime.workspace("s1").expect("workspace");
    let kept = workspace.list("scratchpad/tool-output").expect("the output folder");
    assert_eq!(kept.len(), 16, "16 images, and no cut copy of the text");
    let whole = workspace.read("large_tool_results/c1").expect("the whole text");
    assert!(whole.len() > 1 << 20);
    assert!(
        String::from_utf8_lossy(&whole).replace('\n', "").contains(&"y".repeat(1 << 20)),
        "nothing but line breaks added"
    );
}

#[test]
fn a_host_tools_path_through_a_link_planted_in_the_session_folder_is_refused_as_zone_link() {
    let sessions = std::env::temp_dir().join(format!("archmax-host-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&sessions);
    let outside = sessions.join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    let scratchpad = sessions.join("s1/scratchpad");
    std::fs::create_dir_all(&scratchpad).expect("scratchpad");
    std::os::unix::fs::symlink(&outside, scratchpad.join("out")).expect("link");
    let ran = run_in(
        Arc::new(FsStore::new(&sessions, archmax_vm::session::fs::SealKeys::generate().expect("a seal key"))),
        vec![
            call("c1", "crm__export", json!({ "destination": "scratchpad/out/leak.csv" })),
            call("c2", "crm__export", json!({ "destination": "scratchpad/own.csv" })),
        ],
        &[],
        Vec::new(),
    );
    let own = sessions.join("s1/scratchpad/own.csv").to_string_lossy().into_owned();
    let _ = std::fs::remove_dir_all(&sessions);
    assert_eq!(ran.blocked("c1").as_deref(), Some("zone.link"));
    let (text, status) = ran.answer("c1");
    assert_eq!(status, "Error");
    assert!(text.contains("'crm__export' was not called") && text.contains("symbolic link"), "{text}");
    assert!(ran.event("tool-called", "c1").is_none(), "a refused call is recorded as blocked only");
    // Only the path with no link reached the host, through a handle on the real path.
    assert_eq!(ran.host.calls(), vec![("crm__export".to_string(), None, json!({ "destination": own }))]);
}

#[test]
fn events_carry_arguments_cut_to_a_bound_and_the_session_record_keeps_them_whole() {
    let note = "n".repeat(20_000);
    let ran = run(
        vec![
            call("c1", "crm__lookup", json!({ "region": "eu", "note": note })),
            call("c2", "crm__lookup", json!({ "region": "us", "note": note })),
            call("c3", "crm__lookup", json!({ "region": "eu", "note": "short" })),
        ],
        &[],
        Vec::new(),
    );
    let whole =
        |region: &str| serde_json::to_vec(&json!({ "region": region, "note": note })).map_or(0, |json| json.len());
    for (kind, id, region) in [("tool-called", "c1", "eu"), ("tool-blocked", "c2", "us")] {
        let event = ran.event(kind, id).unwrap_or_else(|| panic!("no {kind} for {id}"));
        assert_eq!(event["argsCut"], json!(whole(region)), "{kind} says the whole size");
        let shown = serde_json::to_vec(&event["args"]).map_or(usize::MAX, |json| json.len());
        assert!(shown <= 4096, "{kind} carries {shown} bytes of arguments");
        assert_eq!(event["args"]["region"], region, "short values are kept as they are");
        let cut = event["args"]["note"].as_str().unwrap_or_default();
        assert!(cut.starts_with("nnnn") && cut.ends_with("… (20000 bytes)"), "{cut}");
    }
    // Arguments within the bound are carried as they are, with no mark.
    let small = ran.event("tool-called", "c3").expect("tool-called");
    assert_eq!(small["args"], json!({ "region": "eu", "note": "short" }));
    assert!(small.get("argsCut").is_none());
    // The host received the whole arguments, and the session record keeps them whole.
    assert_eq!(ran.host.calls()[0].2, json!({ "region": "eu", "note": note }));
    let recorded: Vec<&Value> = ran
        .messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|call| &call.args).collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(recorded[0], &json!({ "region": "eu", "note": note }));
    assert_eq!(recorded[1], &json!({ "region": "us", "note": note }));
}

#[test]
fn each_host_call_of_a_step_has_its_own_key_made_from_the_arguments_the_kernel_decided() {
    // Two identical calls of one step are two acts (two keys); a path argument counts as
    // the workspace path the model named, not the real path this process hands its
    // server, so a runner that redoes the step makes the same keys.
    let ran = run(
        vec![
            call("c1", "crm__import", json!({ "file_path": "./AGENTS.md" })),
            call("c2", "crm__import", json!({ "file_path": "./AGENTS.md" })),
            call("c3", "crm__whoami", json!({})),
        ],
        &["crm__whoami"],
        Vec::new(),
    );
    let keys = ran.host.keys.lock().map(|keys| keys.clone()).unwrap_or_default();
    // The turn's opening is step 1; the model's calls belong to step 2.
    let decided = json!({ "file_path": "./AGENTS.md" });
    let expected = vec![
        archmax_vm::tool_host::idempotency_key("s1", 2, 0, "crm__import", &decided),
        archmax_vm::tool_host::idempotency_key("s1", 2, 1, "crm__import", &decided),
        archmax_vm::tool_host::idempotency_key("s1", 2, 2, "crm__whoami", &json!({})),
    ];
    assert_eq!(keys, expected, "{:?}", ran.host.calls());
}
