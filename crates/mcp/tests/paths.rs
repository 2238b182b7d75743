//! Host-tool path arguments against the real fixture server (`archmax-mcp-fixture`),
//! through the whole runtime: the kernel decides each call, the runtime resolves each
//! declared path beneath its root as the file tools do, and the server opens what it is
//! handed. The server's `cat` answers a file's text and `save` writes one, so each test
//! sees what a server would really have read or written.
//!
//! The attacks: a link inside a mount that leads past a `forbid_always` denial, a link
//! (or a hard link) planted in a session's folder that leads outside it, a relative real
//! path that a server's own `cwd` would resolve somewhere else, and a folder swapped for
//! a link after the runner's check and before the server's open (the fixture plays that
//! race itself, deterministically, with `FIXTURE_SWAP_BEFORE_OPEN`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::Program;
use archmax_compiler::source::{FileId, Span};
use archmax_compiler::{analyze_workspace, load_memory};
use archmax_config::settings::{McpServer, McpTransport};
use archmax_mcp::{HostOptions, McpHost};
use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::{ModelAdapter, ModelFuture, ModelRequest, ModelResponse};
use archmax_vm::session::fs::FsStore;
use archmax_vm::session::{Message, ToolCall};
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

const FIXTURE: &str = env!("CARGO_BIN_EXE_archmax-mcp-fixture");

const CONFIG: &str = r#"
[mounts."docs/"]
read_only = false
"#;

const DESK: &str = r#"title: Desk
instructions: You keep the docs.
tools:
  forbid_always:
    # The keys are never read by any tool, host tools included.
    - { tool: fx__cat, paths: ["docs/secret/**"] }
mounts:
  allow_always: [docs]
states:
  work:
    triggers:
      manual:
        description: Work one request.
    instructions: Read and write what you are asked to.
    tools:
      allow: [fx__cat, fx__save]
"#;

fn compile() -> Program {
    let files = [("archmax.toml", CONFIG), ("workflows/desk/workflow.yaml", DESK)];
    let analysis = analyze_workspace(load_memory(files).expect("workspace"));
    let report = analysis.report(&[]).expect("report");
    assert!(report.errors() == 0, "the test workspace must validate: {:#?}", report.distinct());
    lower(&analysis, &[], &BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT }).expect("lowers")
}

/// A fresh, empty folder for one test.
fn scratch(label: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("paths-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("folder");
    }
    std::fs::write(path, text).expect("write");
}

fn fixture(cwd: Option<&Path>) -> McpServer {
    McpServer {
        name: "fx".to_string(),
        collection: "fx".to_string(),
        transport: McpTransport::Stdio {
            command: FIXTURE.to_string(),
            args: Vec::new(),
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: cwd.map(|cwd| cwd.to_string_lossy().into_owned()),
        },
        startup_timeout_ms: 60_000,
        tool_timeout_ms: 60_000,
        path_arguments: BTreeMap::new(),
        span: Span::new(FileId(0), 0, 0),
    }
}

/// Plays one batch of calls, then answers in text.
struct Script(Vec<ToolCall>);

impl ModelAdapter for Script {
    fn call<'a>(&'a self, request: ModelRequest<'a>) -> ModelFuture<'a> {
        Box::pin(async move {
            if request.messages.iter().any(|message| matches!(message, Message::Tool { .. })) {
                return Ok(ModelResponse { text: "Done.".to_string(), ..ModelResponse::default() });
            }
            Ok(ModelResponse { tool_calls: self.0.clone(), ..ModelResponse::default() })
        })
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall { id: id.to_string(), name: name.to_string(), args }
}

struct Ran {
    events: Vec<Value>,
    messages: Vec<Message>,
}

impl Ran {
    fn answer(&self, call_id: &str) -> String {
        self.messages
            .iter()
            .find_map(|message| match message {
                Message::Tool { call_id: id, content, .. } if id == call_id => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no answer to {call_id}: {:#?}", self.messages))
    }

    fn blocked(&self, call_id: &str) -> Option<String> {
        self.events
            .iter()
            .find(|event| event["event"] == "tool-blocked" && event["callId"] == call_id)
            .and_then(|event| event["rule"].as_str())
            .map(str::to_string)
    }

    fn reached_the_server(&self, call_id: &str) -> bool {
        self.events.iter().any(|event| event["event"] == "tool-called" && event["callId"] == call_id)
    }
}

/// Runs one turn of `batch` in workspace `root` (sessions kept under `sessions`) against
/// the fixture server started in `server_cwd`.
fn run(root: &Path, sessions: &Path, server_cwd: Option<&Path>, batch: Vec<ToolCall>) -> Ran {
    run_against(root, sessions, fixture(server_cwd), batch)
}

/// [`run`] against the fixture server as `server` configures it.
fn run_against(root: &Path, sessions: &Path, server: McpServer, batch: Vec<ToolCall>) -> Ran {
    let executor =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("executor");
    let options = HostOptions::new(std::path::absolute(root).expect("absolute root"))
        .with_env_map(BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap_or_default())]));
    let host = Arc::new(McpHost::new(vec![server], options));
    let events = EventSink::new();
    events.record();
    let runtime = Runtime::builder(RuntimeParts {
        program: Arc::new(compile()),
        store: Arc::new(FsStore::new(sessions, archmax_vm::session::fs::SealKeys::generate().expect("a seal key"))),
        model: Arc::new(Script(batch)),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: root.to_path_buf(),
        pricing: PricingTable::default(),
    })
    .tool_host(host.clone(), Vec::new())
    .build();
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Go.".to_string()),
        ..TurnRequest::default()
    };
    executor.block_on(runtime.run_turn(request)).expect("the turn runs");
    let session = executor.block_on(runtime.store().read("s1")).expect("the store reads").expect("the session is kept");
    executor.block_on(host.shutdown());
    let events = events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    Ran { events, messages: session.messages.clone() }
}

#[test]
fn a_link_inside_a_mount_does_not_lead_a_host_tool_past_a_forbid_always_denial() {
    let root = scratch("mount-link");
    write(&root.join("docs/public.md"), "public text");
    write(&root.join("docs/secret/key.txt"), "SECRET-KEY-7731");
    std::os::unix::fs::symlink("secret", root.join("docs/alias")).expect("link");
    std::os::unix::fs::symlink("secret/key.txt", root.join("docs/key-link.txt")).expect("link");
    let ran = run(
        &root,
        &root.join("sessions"),
        None,
        vec![
            call("c1", "fx__cat", json!({ "file_path": "docs/alias/key.txt" })),
            call("c2", "fx__cat", json!({ "file_path": "docs/key-link.txt" })),
            call("c3", "fx__cat", json!({ "file_path": "docs/secret/key.txt" })),
            call("c4", "fx__cat", json!({ "file_path": "docs/public.md" })),
            call("c5", "fx__save", json!({ "destination": "docs/alias/key.txt", "text": "overwritten" })),
        ],
    );
    for through_a_link in ["c1", "c2", "c5"] {
        assert_eq!(ran.blocked(through_a_link).as_deref(), Some("zone.link"), "{}", ran.answer(through_a_link));
        assert!(!ran.reached_the_server(through_a_link));
        assert!(ran.answer(through_a_link).contains("symbolic link"), "{}", ran.answer(through_a_link));
        assert!(!ran.answer(through_a_link).contains("SECRET-KEY"), "{}", ran.answer(through_a_link));
    }
    assert_eq!(ran.blocked("c3").as_deref(), Some("tool.forbidden"), "the denial itself still holds");
    assert_eq!(ran.answer("c4"), "public text", "a path with no link reaches the server");
    assert_eq!(std::fs::read_to_string(root.join("docs/secret/key.txt")).ok().as_deref(), Some("SECRET-KEY-7731"));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_link_planted_in_a_session_folder_neither_reads_nor_writes_outside_it() {
    let root = scratch("session-link");
    let sessions = root.join("sessions");
    let outside = root.join("outside");
    write(&outside.join("private.txt"), "PRIVATE-TEXT-5120");
    write(&outside.join("hard-target.txt"), "HARD-LINKED-TEXT");
    // Planted before the session runs, by anyone who can write its folder.
    let scratchpad = sessions.join("s1/scratchpad");
    std::fs::create_dir_all(&scratchpad).expect("scratchpad");
    std::os::unix::fs::symlink(&outside, scratchpad.join("out")).expect("folder link");
    std::os::unix::fs::symlink(outside.join("private.txt"), scratchpad.join("file-link.txt")).expect("file link");
    std::fs::hard_link(outside.join("hard-target.txt"), scratchpad.join("hard.txt")).expect("hard link");
    let ran = run(
        &root,
        &sessions,
        None,
        vec![
            call("c1", "fx__cat", json!({ "file_path": "scratchpad/out/private.txt" })),
            call("c2", "fx__cat", json!({ "file_path": "scratchpad/file-link.txt" })),
            call("c3", "fx__save", json!({ "destination": "scratchpad/out/planted.txt", "text": "pwned" })),
            call("c4", "fx__save", json!({ "destination": "scratchpad/file-link.txt", "text": "pwned" })),
            call("c5", "fx__cat", json!({ "file_path": "scratchpad/hard.txt" })),
            call("c6", "fx__save", json!({ "destination": "scratchpad/own.txt", "text": "mine" })),
        ],
    );
    for through_a_link in ["c1", "c2", "c3", "c4", "c5"] {
        assert_eq!(ran.blocked(through_a_link).as_deref(), Some("zone.link"), "{}", ran.answer(through_a_link));
        assert!(!ran.reached_the_server(through_a_link));
    }
    assert!(ran.answer("c5").contains("hard link"), "{}", ran.answer("c5"));
    assert!(!outside.join("planted.txt").exists(), "nothing was written outside the session's folder");
    assert_eq!(std::fs::read_to_string(outside.join("private.txt")).ok().as_deref(), Some("PRIVATE-TEXT-5120"));
    // A path with no link is handed over through a handle on the session's own folder.
    let own = sessions.join("s1/scratchpad/own.txt");
    assert!(ran.answer("c6").starts_with(&format!("saved /proc/{}/fd/", std::process::id())), "{}", ran.answer("c6"));
    assert_eq!(std::fs::read_to_string(&own).ok().as_deref(), Some("mine"));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_server_with_its_own_cwd_is_handed_an_absolute_path_and_opens_what_the_kernel_decided() {
    let base = scratch("relative");
    // The runner names its workspace by a relative path (as `--root ../ws` would) …
    let root = base.join("ws");
    write(&root.join("docs/note.txt"), "THE DECIDED FILE");
    let relative_root = relative_to_current_dir(&root);
    assert!(relative_root.is_relative(), "{}", relative_root.display());
    // … and the server runs in a folder of its own, where that same relative text names
    // another file: as deep as the text climbs, with the text's tail below its base.
    let climbs = relative_root.components().take_while(|part| part.as_os_str() == "..").count();
    let tail: PathBuf = relative_root.components().skip(climbs).collect();
    let server_home = base.join("server-home");
    let server_cwd = (0..climbs).fold(server_home.clone(), |dir, level| dir.join(format!("d{level}")));
    std::fs::create_dir_all(&server_cwd).expect("server cwd");
    write(&server_home.join(&tail).join("docs/note.txt"), "A FILE NOBODY DECIDED ON");
    assert_eq!(
        std::fs::read_to_string(server_cwd.join(&relative_root).join("docs/note.txt")).ok().as_deref(),
        Some("A FILE NOBODY DECIDED ON"),
        "the decoy is what the relative text names from the server's cwd"
    );
    let ran = run(
        &relative_root,
        &base.join("sessions"),
        Some(&server_cwd),
        vec![call("c1", "fx__cat", json!({ "file_path": "docs/note.txt" }))],
    );
    assert_eq!(ran.answer("c1"), "THE DECIDED FILE");
    let _ = std::fs::remove_dir_all(&base);
}

/// `path` (absolute) as a path relative to the process's working directory, climbing
/// with `..` as far as needed.
fn relative_to_current_dir(path: &Path) -> PathBuf {
    let here = std::env::current_dir().expect("current dir");
    let here: Vec<_> = here.components().collect();
    let there: Vec<_> = path.components().collect();
    let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..here.len() {
        relative.push("..");
    }
    for component in &there[common..] {
        relative.push(component);
    }
    relative
}

/// The fixture server, swapping `folder` for a link to `target` just before it opens
/// the path it was handed.
fn racing_fixture(folder: &Path, target: &Path) -> McpServer {
    let mut server = fixture(None);
    if let McpTransport::Stdio { env, .. } = &mut server.transport {
        let swap = format!("{}\t{}", folder.display(), target.display());
        env.insert("FIXTURE_SWAP_BEFORE_OPEN".to_string(), swap);
    }
    server
}

fn is_link(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|metadata| metadata.file_type().is_symlink())
}

#[test]
fn a_folder_swapped_for_a_link_between_the_check_and_the_servers_open_does_not_redirect_it() {
    let root = std::path::absolute(scratch("swap-race")).expect("absolute");
    let outside = root.join("outside");
    write(&outside.join("note.txt"), "OUTSIDE-SECRET-4471");
    // A read in a mount: `docs/sub` is swapped for a link to `outside` after the check.
    write(&root.join("docs/sub/note.txt"), "THE DECIDED FILE");
    let sessions = root.join("sessions");
    let read = vec![call("c1", "fx__cat", json!({ "file_path": "docs/sub/note.txt" }))];
    let ran = run_against(&root, &sessions, racing_fixture(&root.join("docs/sub"), &outside), read);
    assert!(is_link(&root.join("docs/sub")), "the race was played: the folder is a link now");
    assert_eq!(ran.answer("c1"), "THE DECIDED FILE", "the server read what the kernel decided");

    // A write in the session's folder, of a file that does not exist yet.
    let sessions = root.join("sessions-2");
    let scratchpad = sessions.join("s1/scratchpad");
    std::fs::create_dir_all(scratchpad.join("sub")).expect("scratchpad");
    let save = vec![call("c2", "fx__save", json!({ "destination": "scratchpad/sub/new.txt", "text": "mine" }))];
    let ran = run_against(&root, &sessions, racing_fixture(&scratchpad.join("sub"), &outside), save);
    assert!(is_link(&scratchpad.join("sub")), "the race was played");
    assert!(ran.answer("c2").starts_with("saved "), "{}", ran.answer("c2"));
    assert!(!outside.join("new.txt").exists(), "nothing was written outside the session's folder");
    assert_eq!(std::fs::read_to_string(scratchpad.join("sub.moved/new.txt")).ok().as_deref(), Some("mine"));
    let _ = std::fs::remove_dir_all(&root);
}
