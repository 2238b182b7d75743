//! The MCP host against the in-crate fixture server (`archmax-mcp-fixture`), over stdio
//! and over streamable HTTP on loopback.
//!
//! No test measures time: a wait for a restart or a cancellation is a bounded number of
//! polls, each a real call.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use archmax_compiler::source::{FileId, Span};
use archmax_compiler::tools::PathAccess;
use archmax_config::settings::{McpServer, McpTransport};
use archmax_mcp::{HostOptions, McpHost};
use archmax_vm::tool_host::{Catalog, Content, HostAnswer, HostCall, HostError, ToolHost};

const FIXTURE: &str = env!("CARGO_BIN_EXE_archmax-mcp-fixture");
const SECRET: &str = "fixture-secret-7Qx9";
const RUNNER_KEY: &str = "sk-runner-only-4242";
const TABLE_VALUE: &str = "table-value-5150";
/// Polls allowed while waiting for a restart, a cancellation or a new tool list.
const POLLS: usize = 200;

fn server(name: &str, transport: McpTransport) -> McpServer {
    McpServer {
        name: name.to_string(),
        collection: "fx".to_string(),
        transport,
        startup_timeout_ms: 30_000,
        tool_timeout_ms: 30_000,
        path_arguments: BTreeMap::new(),
        span: Span::new(FileId(0), 0, 0),
    }
}

fn stdio(args: &[&str]) -> McpTransport {
    McpTransport::Stdio {
        command: FIXTURE.to_string(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        env: BTreeMap::from([("TABLE_VAR".to_string(), TABLE_VALUE.to_string())]),
        env_vars: vec!["FIXTURE_SECRET".to_string()],
        cwd: None,
    }
}

/// The runner's environment: a model key the children must never see, and the secret
/// their `env_vars` hands them.
fn options() -> HostOptions {
    let mut env = BTreeMap::from([
        ("OPENAI_API_KEY".to_string(), RUNNER_KEY.to_string()),
        ("FIXTURE_SECRET".to_string(), SECRET.to_string()),
        ("FIXTURE_TOKEN".to_string(), SECRET.to_string()),
    ]);
    if let Ok(path) = std::env::var("PATH") {
        env.insert("PATH".to_string(), path);
    }
    HostOptions::new(env!("CARGO_MANIFEST_DIR")).with_env_map(env)
}

async fn call(host: &McpHost, tool: &str, args: Value) -> Result<HostAnswer, HostError> {
    call_through(host, tool, None, args).await
}

async fn call_through(
    host: &McpHost,
    tool: &str,
    connection: Option<&str>,
    args: Value,
) -> Result<HostAnswer, HostError> {
    let key = "a-key";
    host.call(HostCall {
        session: "s1",
        idempotency_key: key,
        state: "work",
        call_id: "c1",
        tool,
        connection,
        args: &args,
    })
    .await
}

fn text(answer: &HostAnswer) -> &str {
    match answer.content.first() {
        Some(Content::Text(text)) => text,
        _ => "",
    }
}

fn failure(result: Result<HostAnswer, HostError>) -> String {
    match result {
        Err(HostError::Failed { message, .. }) => message,
        other => panic!("expected a failed call, got {other:?}"),
    }
}

fn assert_no_secret(text: &str) {
    for secret in [SECRET, RUNNER_KEY, TABLE_VALUE] {
        assert!(!text.contains(secret), "a secret leaked: {text}");
    }
}

/// The fixture serving streamable HTTP on loopback, restartable on the same address.
struct HttpFixture {
    child: tokio::process::Child,
    address: String,
}

impl HttpFixture {
    async fn start(address: &str) -> HttpFixture {
        let mut child = tokio::process::Command::new(FIXTURE)
            .args(["--http", address])
            // The fixture refuses requests without this bearer token.
            .env("FIXTURE_TOKEN", SECRET)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the fixture runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let address = lines.next_line().await.expect("a line").expect("the bound address");
        HttpFixture { child, address }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    fn transport(&self) -> McpTransport {
        McpTransport::Http { url: self.url(), bearer_token_env_var: Some("FIXTURE_TOKEN".to_string()) }
    }

    /// Waits for the crashed server to exit, then serves again on the same address.
    async fn restart(&mut self) {
        let _ = self.child.wait().await;
        *self = HttpFixture::start(&self.address.clone()).await;
    }
}

async fn check_catalog(host: &McpHost) -> std::sync::Arc<Catalog> {
    let catalog = host.catalog().await;
    let names: Vec<&str> = catalog.tools.iter().map(|tool| tool.name.as_str()).collect();
    // Nineteen tools over seven pages; `bad.name` is skipped.
    assert_eq!(names.len(), 18, "{names:?}");
    for name in ["fx__echo", "fx__add", "fx__read_note", "fx__export", "fx__hang", "fx__grow"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let echo = catalog.tool("fx__echo").expect("echo is listed");
    assert_eq!(echo.server, "fx");
    assert_eq!(echo.description, "Says the text back");
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    assert!(echo.paths.is_empty());
    let read_note = catalog.tool("fx__read_note").expect("read_note is listed");
    assert_eq!(read_note.paths, vec![("file_path".to_string(), PathAccess::Read)]);
    let export = catalog.tool("fx__export").expect("export is listed");
    assert_eq!(export.paths, vec![("destination".to_string(), PathAccess::Write)]);
    assert!(export.input_schema["properties"]["destination"].get("x-archmax-path").is_none());
    assert_eq!(catalog.problems.len(), 1, "{:?}", catalog.problems);
    assert!(
        catalog.problems[0].contains("`fx`") && catalog.problems[0].contains("`bad.name`"),
        "{:?}",
        catalog.problems
    );
    catalog
}

async fn check_answers(host: &McpHost) {
    let echo = call(host, "fx__echo", json!({"text": "hello"})).await.expect("echo answers");
    assert_eq!((echo.server.as_str(), text(&echo), echo.is_error), ("fx", "hello", false));
    let sum = call(host, "fx__add", json!({"a": 1, "b": 2})).await.expect("add answers");
    assert_eq!(text(&sum), "3");
    let failed = call(host, "fx__fail", json!({})).await.expect("fail answers");
    assert!(failed.is_error);
    assert_eq!(text(&failed), "it failed on purpose");
    let picture = call(host, "fx__picture", Value::Null).await.expect("picture answers");
    match picture.content.as_slice() {
        [Content::Blob { mime_type, data }] => {
            assert_eq!(mime_type, "image/png");
            assert!(data.starts_with(b"\x89PNG"), "{data:?}");
        }
        other => panic!("expected one blob, got {other:?}"),
    }
    assert!(matches!(call(host, "fx__nothing_here", json!({})).await, Err(HostError::NotProvided(_))));
}

/// Polls `tool` (a counter of the fixture's) until it reaches `at_least`.
async fn wait_for_count(host: &McpHost, tool: &str, at_least: u64) {
    for _ in 0..POLLS {
        let count = call(host, tool, json!({})).await.expect("the counter answers");
        if text(&count).parse::<u64>().is_ok_and(|count| count >= at_least) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("`{tool}` never reached {at_least}");
}

async fn check_timeout_cancels(host: std::sync::Arc<McpHost>) {
    let message = failure(call(&host, "fx__hang", json!({})).await);
    assert!(message.contains("did not answer `fx__hang` within 500 ms"), "{message}");
    assert!(message.contains("the call was cancelled"), "{message}");
    // The server was told: its hanging call ends with the cancellation it received.
    wait_for_count(&host, "fx__cancellations", 1).await;
    // A caller that drops the call future cancels it too.
    let dropped = tokio::spawn({
        let host = std::sync::Arc::clone(&host);
        async move { call(&host, "fx__hang", json!({})).await }
    });
    wait_for_count(&host, "fx__hangs", 2).await;
    dropped.abort();
    wait_for_count(&host, "fx__cancellations", 2).await;
}

async fn check_list_changed(host: &McpHost) {
    assert!(host.catalog().await.tool("fx__extra").is_none());
    call(host, "fx__grow", json!({})).await.expect("grow answers");
    let mut grown = false;
    for _ in 0..POLLS {
        if host.catalog().await.tool("fx__extra").is_some() {
            grown = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(grown, "the catalog never showed the tool added after list_changed");
    let extra = call(host, "fx__extra", json!({})).await.expect("extra answers");
    assert_eq!(text(&extra), "extra");
}

async fn echo_after_restart(host: &McpHost) -> HostAnswer {
    for _ in 0..POLLS {
        match call(host, "fx__echo", json!({"text": "again"})).await {
            Ok(answer) => return answer,
            Err(HostError::Failed { message, .. }) => {
                assert_no_secret(&message);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    panic!("the server was never restarted");
}

fn with_timeout(mut server: McpServer, tool_timeout_ms: u64) -> McpServer {
    server.tool_timeout_ms = tool_timeout_ms;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_catalog_calls_and_list_changed() {
    let host = McpHost::new(vec![server("fx", stdio(&[]))], options());
    check_catalog(&host).await;
    check_answers(&host).await;
    check_list_changed(&host).await;
    host.shutdown().await;
    let message = failure(call(&host, "fx__echo", json!({"text": "late"})).await);
    assert!(message.contains("shut down"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_catalog_calls_and_list_changed() {
    let fixture = HttpFixture::start("127.0.0.1:0").await;
    let host = McpHost::new(vec![server("fx", fixture.transport())], options());
    check_catalog(&host).await;
    check_answers(&host).await;
    check_list_changed(&host).await;
    host.shutdown().await;
    // The bearer token is what lets the host in: another variable's value is refused.
    let wrong = McpTransport::Http { url: fixture.url(), bearer_token_env_var: Some("OPENAI_API_KEY".to_string()) };
    let refused = McpHost::new(vec![server("fx", wrong)], options());
    let problems = refused.catalog().await.problems.clone();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("MCP server `fx` did not start"), "{problems:?}");
    assert_no_secret(&problems[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_hang_times_out_and_is_cancelled() {
    let host = std::sync::Arc::new(McpHost::new(vec![with_timeout(server("fx", stdio(&[])), 500)], options()));
    check_timeout_cancels(std::sync::Arc::clone(&host)).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_hang_times_out_and_is_cancelled() {
    let fixture = HttpFixture::start("127.0.0.1:0").await;
    let host = std::sync::Arc::new(McpHost::new(vec![with_timeout(server("fx", fixture.transport()), 500)], options()));
    check_timeout_cancels(std::sync::Arc::clone(&host)).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_crash_fails_the_call_with_the_redacted_stderr_tail_then_restarts() {
    let host = McpHost::new(vec![server("fx", stdio(&[]))], options());
    call(&host, "fx__echo", json!({"text": "first"})).await.expect("echo answers");
    let message = failure(call(&host, "fx__crash", json!({})).await);
    assert!(message.contains("MCP server `fx` stopped during the call of `fx__crash`"), "{message}");
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("fixture: crashing on purpose (secret [redacted])"), "{message}");
    assert_no_secret(&message);
    let again = echo_after_restart(&host).await;
    assert_eq!(text(&again), "again");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_stdio_line_cap_is_reported_as_too_large_not_as_a_timeout() {
    // The timeout is a hang guard only: the answer is refused as soon as it passes the cap.
    let host = McpHost::new(vec![with_timeout(server("fx", stdio(&[])), 120_000)], options());
    call(&host, "fx__echo", json!({"text": "first"})).await.expect("echo answers");
    // 16 MiB is the cap (the MCP SDK's own, which drops a longer line without a word).
    let over = 16 * 1024 * 1024 + 1024;
    let message = failure(call(&host, "fx__huge", json!({"bytes": over})).await);
    assert!(
        message.contains("MCP server `fx` answered `fx__huge` with a message over the line cap of 16777215 bytes"),
        "{message}"
    );
    assert!(message.contains("too large"), "{message}");
    assert!(!message.contains("tool_timeout_ms"), "{message}");
    // An answer under the cap still arrives, and the server is started again for it.
    let again = echo_after_restart(&host).await;
    assert_eq!(text(&again), "again");
    let under = call(&host, "fx__huge", json!({"bytes": 1 << 20})).await.expect("a large answer under the cap");
    assert_eq!(text(&under).len(), 1 << 20);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_crash_fails_the_call_then_the_restarted_server_answers() {
    let mut fixture = HttpFixture::start("127.0.0.1:0").await;
    let host = McpHost::new(vec![with_timeout(server("fx", fixture.transport()), 10_000)], options());
    call(&host, "fx__echo", json!({"text": "first"})).await.expect("echo answers");
    let message = failure(call(&host, "fx__crash", json!({})).await);
    assert!(message.contains("MCP server `fx` stopped during the call of `fx__crash`"), "{message}");
    assert_no_secret(&message);
    fixture.restart().await;
    let again = echo_after_restart(&host).await;
    assert_eq!(text(&again), "again");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_will_not_start_is_one_problem_with_its_redacted_stderr_tail() {
    let host = McpHost::new(vec![server("fx", stdio(&["--refuse-start"]))], options());
    for _ in 0..3 {
        let catalog = host.catalog().await;
        assert!(catalog.tools.is_empty());
        assert_eq!(catalog.problems.len(), 1, "{:?}", catalog.problems);
        let problem = &catalog.problems[0];
        assert!(problem.starts_with("MCP server `fx` did not start"), "{problem}");
        assert!(problem.contains("fixture: refusing to start (secret [redacted])"), "{problem}");
        assert_no_secret(problem);
    }
    let message = failure(call(&host, "fx__echo", json!({"text": "x"})).await);
    assert!(message.contains("did not start") && message.contains("tried again in"), "{message}");
    assert_no_secret(&message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_commands_and_variables_are_start_problems_that_name_them() {
    let mut missing_command = server("nocmd", stdio(&[]));
    if let McpTransport::Stdio { command, .. } = &mut missing_command.transport {
        *command = "archmax-no-such-mcp-server".to_string();
    }
    let mut missing_variable = server("novar", stdio(&[]));
    if let McpTransport::Stdio { env_vars, .. } = &mut missing_variable.transport {
        env_vars.push("NOT_IN_THE_RUNNER".to_string());
    }
    let missing_token = server(
        "notoken",
        McpTransport::Http {
            url: "http://127.0.0.1:9/mcp".to_string(),
            bearer_token_env_var: Some("NO_TOKEN".to_string()),
        },
    );
    let host = McpHost::new(vec![missing_command, missing_variable, missing_token], options());
    let problems = host.catalog().await.problems.clone();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[0].contains("`nocmd`") && problems[0].contains("`archmax-no-such-mcp-server` was found neither"),
        "{problems:?}"
    );
    assert!(problems[1].contains("`novar`") && problems[1].contains("`NOT_IN_THE_RUNNER`"), "{problems:?}");
    assert!(problems[2].contains("`notoken`") && problems[2].contains("`NO_TOKEN`"), "{problems:?}");
    for problem in &problems {
        assert_no_secret(problem);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_child_sees_only_its_base_its_env_vars_and_its_env_table() {
    let host = McpHost::new(vec![server("fx", stdio(&[]))], options());
    let mut seen = BTreeMap::new();
    for name in ["OPENAI_API_KEY", "FIXTURE_TOKEN", "CARGO_MANIFEST_DIR", "FIXTURE_SECRET", "TABLE_VAR", "PATH"] {
        let answer = call(&host, "fx__env", json!({"name": name})).await.expect("env answers");
        seen.insert(name, text(&answer).to_string());
    }
    let expected = BTreeMap::from([
        // Neither the runner's other variables nor the test process's own.
        ("OPENAI_API_KEY", "unset"),
        ("FIXTURE_TOKEN", "unset"),
        ("CARGO_MANIFEST_DIR", "unset"),
        ("FIXTURE_SECRET", "set"),
        ("TABLE_VAR", "set"),
        ("PATH", if std::env::var_os("PATH").is_some() { "set" } else { "unset" }),
    ]);
    assert_eq!(seen, expected.into_iter().map(|(name, state)| (name, state.to_string())).collect());
    let echoed = call(&host, "fx__echo", json!({"text": format!("the key is {SECRET}")})).await.expect("echo answers");
    assert_eq!(text(&echoed), "the key is [redacted]");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_of_one_collection_need_a_connection_to_pick() {
    let host = McpHost::new(vec![server("alpha", stdio(&[])), server("beta", stdio(&[]))], options());
    assert!(host.may_provide("fx__echo"));
    assert!(!host.may_provide("echo") && !host.may_provide("other__echo") && !host.may_provide("fx_echo"));
    let catalog = host.catalog().await;
    assert_eq!(catalog.tools.iter().filter(|tool| tool.name == "fx__echo").count(), 1);
    let message = failure(call(&host, "fx__echo", json!({"text": "x"})).await);
    assert!(
        message.contains("servers `alpha` and `beta`") && message.contains("add `connection: <server>`"),
        "{message}"
    );
    let picked = call_through(&host, "fx__echo", Some("beta"), json!({"text": "x"})).await.expect("beta answers");
    assert_eq!((picked.server.as_str(), text(&picked)), ("beta", "x"));
    let message = failure(call_through(&host, "fx__echo", Some("gamma"), json!({"text": "x"})).await);
    assert!(message.contains("connection `gamma`") && message.contains("`alpha` and `beta`"), "{message}");
    host.shutdown().await;
}

/// The catalog the interpreter reads to tell an ungranted host tool from a name no one
/// provides (`known_catalog`) never starts a server: only a real catalog build does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_known_catalog_is_only_what_a_build_already_fetched() {
    let marker = std::env::temp_dir().join(format!("archmax-mcp-started-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let started = format!("touch '{}' && exec '{FIXTURE}'", marker.display());
    let mut transport = stdio(&[]);
    if let McpTransport::Stdio { command, args, .. } = &mut transport {
        *command = "sh".to_string();
        *args = vec!["-c".to_string(), started];
    }
    let host = McpHost::new(vec![server("fx", transport)], options());
    assert!(host.known_catalog().await.is_none(), "nothing is known before a build");
    assert!(!marker.exists(), "asking what is known started the server");
    let built = host.catalog().await;
    assert!(marker.exists(), "a catalog build starts the server");
    let known = host.known_catalog().await.expect("the build is known");
    assert_eq!(known.tools.len(), built.tools.len());
    assert!(known.tool("fx__echo").is_some());
    host.shutdown().await;
    let _ = std::fs::remove_file(&marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_call_carries_the_calling_spans_trace_context_in_its_meta_and_headers_and_none_without_a_span() {
    use tracing::Instrument;
    use tracing_subscriber::layer::SubscriberExt;
    let fixture = HttpFixture::start("127.0.0.1:0").await;
    let host = McpHost::new(vec![server("fx", fixture.transport())], options());
    let untraced = call(&host, "fx__traceparent", json!({})).await.expect("an answer");
    assert_eq!(text(&untraced), "none", "no span, no trace context");

    // Tracing on, for this thread only; the exporter's endpoint is never reached here.
    let settings = archmax_telemetry::TraceSettings::from_lookup(
        |name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".to_string()),
        "mcp-test",
    )
    .expect("settings")
    .expect("tracing on");
    let tracing = archmax_telemetry::Tracing::start(&settings).expect("tracing starts");
    let _on = tracing::subscriber::set_default(tracing_subscriber::registry().with(tracing.layer()));
    // Named as the VM names it: the trace layer exports archmax's own spans only.
    let span = tracing::info_span!(target: "archmax_vm::interp", "execute_tool");
    let answer = call(&host, "fx__traceparent", json!({})).instrument(span.clone()).await.expect("an answer");
    let ids = archmax_telemetry::bridge::span_ids(&span).expect("the span has ids");
    assert_eq!(text(&answer), format!("00-{}-{}-01", ids.trace_id, ids.span_id), "the tool call's span is the parent");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_carries_its_idempotency_key_in_its_meta() {
    // A tool that must not act twice (a payment) recognises a redone call by the key.
    let host = McpHost::new(vec![server("fx", stdio(&[]))], options());
    let key = archmax_vm::tool_host::idempotency_key("s1", 3, 0, "fx__idempotency", &json!({}));
    let args = json!({});
    let call = HostCall {
        session: "s1",
        idempotency_key: &key,
        state: "work",
        call_id: "c1",
        tool: "fx__idempotency",
        connection: None,
        args: &args,
    };
    let answer = host.call(call).await.expect("an answer");
    assert_eq!(text(&answer), key, "the key the server got is the call's");
    host.shutdown().await;
}
