//! One host-tool call over stdio against the fixture server (`echo`, which answers at
//! once), two ways: through [`McpHost::call`] (server lookup, the tool-list check,
//! the timeout, the answer's conversion and redaction), and straight through an `rmcp`
//! client on its own child, which is the server's and the transport's own time. The
//! difference is the host's overhead.
//!
//! `cargo bench -p archmax-mcp --bench call`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Stdio;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use serde_json::{Map, Value, json};

use archmax_compiler::host_settings::{McpServer, McpTransport};
use archmax_compiler::source::{FileId, Span};
use archmax_mcp::{HostOptions, McpHost};
use archmax_vm::host_tools::{HostCall, ToolHost};

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

criterion_group!(benches, call);
criterion_main!(benches);
