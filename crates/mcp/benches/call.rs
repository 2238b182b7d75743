//! One host-tool call over stdio against the fixture server (`echo`, which answers at
//! once), two ways: through [`McpHost::call`] (server lookup, the tool-list check,
//! the timeout, the answer's conversion and redaction), and straight through an `rmcp`
//! client on its own child, which is the server's and the transport's own time. The
//! difference is the host's overhead. Then the same call made by a model through the whole
//! runtime (a turn: name resolution, `${{…}}` substitution, the kernel's decision, events,
//! the committed step), answered by the server and, for comparison, by a case mock: the
//! difference between those two turns is what the server call costs inside a turn.
//!
//! `cargo bench -p archmax-mcp --bench call`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Stdio;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use serde_json::{Map, Value, json};

use archmax_compiler::source::{FileId, Span};
use archmax_config::settings::{McpServer, McpTransport};
use archmax_mcp::{HostOptions, McpHost};
use archmax_vm::tool_host::{HostCall, ToolHost};

const FIXTURE: &str = env!("CARGO_BIN_EXE_archmax-mcp-fixture");

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

fn host() -> McpHost {
    let server = McpServer {
        name: "fx".to_string(),
        collection: "fx".to_string(),
        transport: McpTransport::Stdio {
            command: FIXTURE.to_string(),
            args: Vec::new(),
            env: BTreeMap::from([("BENCH_TABLE".to_string(), "table-value".to_string())]),
            env_vars: Vec::new(),
            cwd: None,
        },
        startup_timeout_ms: 30_000,
        tool_timeout_ms: 30_000,
        path_arguments: BTreeMap::new(),
        span: Span::new(FileId(0), 0, 0),
    };
    McpHost::new(vec![server], HostOptions::new(env!("CARGO_MANIFEST_DIR")))
}

fn call(criterion: &mut Criterion) {
    let runtime = runtime();
    let args = json!({"text": "hello"});
    let host = host();
    runtime.block_on(async {
        host.catalog().await;
    });
    criterion.bench_function("mcp_host_call_echo_stdio", |bencher| {
        bencher.iter(|| {
            runtime.block_on(async {
                let call = HostCall {
                    session: "s",
                    idempotency_key: "k",
                    state: "work",
                    call_id: "c",
                    tool: "fx__echo",
                    connection: None,
                    args: &args,
                };
                black_box(host.call(call).await.expect("echo answers"))
            })
        })
    });
    runtime.block_on(host.shutdown());

    let client = runtime.block_on(async {
        let mut child = tokio::process::Command::new(FIXTURE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the fixture runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        // The host's own handshake version, so both measure the same protocol.
        let config = ClientConfig::new(ClientCapabilities::default(), Implementation::new("bench", "0"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let client = config.serve((stdout, stdin)).await.expect("the handshake");
        (client, child)
    });
    let arguments: Map<String, Value> = match &args {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    criterion.bench_function("rmcp_client_call_echo_stdio", |bencher| {
        bencher.iter(|| {
            runtime.block_on(async {
                let params = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
                black_box(client.0.peer().call_tool(params).await.expect("echo answers"))
            })
        })
    });
    drop(client);
}

/// A one-state workflow granting the fixture's `echo`.
const DESK: &str = "title: Desk\ninstructions: Echo.\ntools:\n  allow_always: []\nstates:\n  work:\n    triggers:\n      manual:\n    instructions: Echo the word.\n    tools:\n      allow: [fx__echo]\n";

/// Calls `fx__echo` once, then answers in text.
struct Echoes;

impl archmax_vm::model::ModelAdapter for Echoes {
    fn call<'a>(&'a self, request: archmax_vm::model::ModelRequest<'a>) -> archmax_vm::model::ModelFuture<'a> {
        use archmax_vm::model::ModelResponse;
        use archmax_vm::session::{Message, ToolCall};
        let answered = request.messages.iter().any(|message| matches!(message, Message::Tool { .. }));
        Box::pin(async move {
            Ok(if answered {
                ModelResponse { text: "hello".to_string(), ..ModelResponse::default() }
            } else {
                let call =
                    ToolCall { id: "c1".to_string(), name: "fx__echo".to_string(), args: json!({"text": "hello"}) };
                ModelResponse { tool_calls: vec![call], ..ModelResponse::default() }
            })
        })
    }
}

fn desk_runtime(mocked: bool) -> archmax_vm::Runtime {
    use archmax_compiler::lower::{BuildInputs, lower};
    use archmax_compiler::{analyze_workspace, load_memory};
    let analysis = analyze_workspace(load_memory([("workflows/desk/workflow.yaml", DESK)]).expect("workspace"));
    let program = lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT })
        .expect("the desk compiles");
    let host: std::sync::Arc<dyn ToolHost> = std::sync::Arc::new(host());
    let builder = archmax_vm::Runtime::builder(archmax_vm::RuntimeParts {
        program: std::sync::Arc::new(program),
        store: std::sync::Arc::new(archmax_vm::session::memory::MemoryStore::new()),
        model: std::sync::Arc::new(Echoes),
        events: archmax_vm::events::EventSink::new(),
        clock: std::sync::Arc::new(archmax_vm::clock::FixedClock(1_767_605_400_000)),
        root: std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        pricing: archmax_vm::model::pricing::PricingTable::default(),
    })
    .tool_host(host, Vec::new());
    if mocked {
        let mock = archmax_vm::Mock { tool: "fx__echo".to_string(), when_input: None, result: json!("hello") };
        builder.mocks(vec![mock]).build()
    } else {
        builder.build()
    }
}

fn turn(criterion: &mut Criterion) {
    let executor = runtime();
    for (name, mocked) in [("turn_with_host_call_echo_stdio", false), ("turn_with_mocked_call_echo", true)] {
        let desk = desk_runtime(mocked);
        let mut session = 0u64;
        criterion.bench_function(name, |bencher| {
            bencher.iter(|| {
                session += 1;
                let request = archmax_vm::TurnRequest {
                    workflow: "desk".to_string(),
                    session: Some(format!("s{session}")),
                    message: Some("Echo hello.".to_string()),
                    ..archmax_vm::TurnRequest::default()
                };
                black_box(executor.block_on(desk.run_turn(request)).expect("the turn runs"))
            })
        });
    }
}

criterion_group!(benches, call, turn);
criterion_main!(benches);
