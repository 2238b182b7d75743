//! Host tools over the Model Context Protocol, through the binary: the reference server
//! `@modelcontextprotocol/server-everything` (pinned in `interop/package-lock.json`,
//! installed by `npm ci --prefix interop`) answering a taped session's calls through the
//! kernel, and the example workspace's order-status polling the carrier server shipped in
//! this repository (`archmax-carrier-mcp`, built beside `archmax`).
//!
//! The carrier server is also spoken to directly, over raw JSON-RPC on its stdio.
//!
//! These tests never skip: without Node.js or the installed reference server they fail,
//! saying what to run.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{archmax, copy_dir, repository, scratch};

/// The reference server's stdio entry point, or a failure saying how to install it.
fn reference_server() -> PathBuf {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|output| output.status.success()),
        "`node` is not on PATH: the MCP interoperability tests need Node.js 20 or newer, then `npm ci --prefix interop`"
    );
    let entry = repository().join("interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the reference MCP server is not installed ({} is missing): run `npm ci --prefix interop` in the repository first",
        entry.display()
    );
    entry
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().expect("a file has a folder")).expect("create the folder");
    fs::write(path, text).expect("write the file");
}

/// Runs `archmax run WORKFLOW PROMPT --root . --tape TAPE` plus `extra` in `root`; it
/// must exit 0. Returns what it printed (stdout, then stderr) and every event it wrote.
fn run_session(root: &Path, workflow: &str, prompt: &str, tape: &str, extra: &[&str]) -> (String, Vec<Value>) {
    let events_file = root.join("events.jsonl");
    let events_path = events_file.to_string_lossy().into_owned();
    let mut args = vec!["run", workflow, prompt, "--root", ".", "--tape", tape, "--events", &events_path];
    args.extend_from_slice(extra);
    let run = archmax(root, &args);
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let text = fs::read_to_string(&events_file).expect("the run wrote its events");
    let events = text.lines().map(|line| serde_json::from_str(line).expect("one JSON event per line")).collect();
    (run.stdout + "\n--- stderr\n" + &run.stderr, events)
}

/// The events of one kind about one tool, in order.
fn tool_events<'a>(events: &'a [Value], kind: &str, tool: &str) -> Vec<&'a Value> {
    events.iter().filter(|event| event["event"] == kind && event["tool"] == tool).collect()
}

const INTEROP_WORKFLOW: &str = r#"title: Reference server
instructions: |-
  You check that the reference MCP server answers, and say what it answered.
tools:
  allow_always: [read_file]
states:
  ask:
    triggers:
      manual:
        description: Call the reference server's echo and sum tools and report their answers.
    instructions: |-
      Call everything__echo with the message "hello from archmax" and
      everything__get-sum with 2 and 40, then say what both answered.
    tools:
      allow:
        - { tool: everything__echo, args: { message: ["hello from archmax"] } }
        - everything__get-sum
"#;

/// The model calls both granted tools, then tries the echo with another message (the
/// guard refuses it) and a tool the state does not grant, then reports what it read.
const INTEROP_TAPE: &str = r#"- state: ask
  tool_calls:
    - { name: everything__echo, args: { message: hello from archmax } }
    - { name: everything__get-sum, args: { a: 2, b: 40 } }
  usage: { input: 400, output: 40 }
- state: ask
  tool_calls:
    - { name: everything__echo, args: { message: something else } }
    - { name: everything__get-env, args: {} }
  usage: { input: 600, output: 30 }
- state: ask
  text: The reference server echoed "hello from archmax" and says the sum of 2 and 40 is 42.
  usage: { input: 800, output: 25 }
"#;

#[test]
fn the_reference_server_answers_echo_and_get_sum_through_the_kernel() {
    let entry = reference_server();
    let root = scratch("mcp-everything");
    let _ = fs::remove_dir_all(&root);
    write(
        &root,
        "archmax.toml",
        &format!(
            "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\nstartup_timeout_ms = 30000\n",
            toml_string(&entry.to_string_lossy())
        ),
    );
    write(&root, "workflows/interop/workflow.yaml", INTEROP_WORKFLOW);
    write(&root, "tape.yaml", INTEROP_TAPE);
    let (printed, events) =
        run_session(&root, "interop", "Check the reference server.", "tape.yaml", &["--session", "everything-1"]);
    assert!(printed.contains("the sum of 2 and 40 is 42"), "{printed}");

    let echoed = tool_events(&events, "tool-result", "everything__echo");
    assert_eq!(echoed.len(), 1, "one echo ran (the second was refused): {echoed:?}");
    assert_eq!(echoed[0]["status"], "ok", "{}", echoed[0]);
    assert!(echoed[0]["output"].as_str().unwrap_or_default().contains("Echo: hello from archmax"), "{}", echoed[0]);

    let summed = tool_events(&events, "tool-result", "everything__get-sum");
    assert_eq!(summed.len(), 1, "{summed:?}");
    assert_eq!(summed[0]["status"], "ok", "{}", summed[0]);
    assert!(summed[0]["output"].as_str().unwrap_or_default().contains("The sum of 2 and 40 is 42."), "{}", summed[0]);

    // The guard pins the echo's message; a tool the state does not grant is refused
    // before any server sees it, the environment-dumping one included.
    let refused_echo = tool_events(&events, "tool-blocked", "everything__echo");
    assert_eq!(refused_echo.len(), 1, "{refused_echo:?}");
    assert_eq!(refused_echo[0]["rule"], "tool.not-allowed", "{}", refused_echo[0]);
    for kind in ["tool-called", "tool-result"] {
        assert!(tool_events(&events, kind, "everything__get-env").is_empty(), "an ungranted tool never runs");
    }
    let _ = fs::remove_dir_all(&root);
}

/// The example workspace, copied to a scratch folder (its `archmax.toml` names the
/// carrier server by its bare command, found beside the `archmax` binary).
fn specs_copy(label: &str) -> PathBuf {
    let carrier = Path::new(env!("CARGO_BIN_EXE_archmax-carrier-mcp"));
    assert_eq!(
        carrier.parent(),
        Path::new(env!("CARGO_BIN_EXE_archmax")).parent(),
        "the carrier server is built beside archmax"
    );
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    copy_dir(&repository().join("specs"), &root);
    root
}

#[test]
fn order_status_cases_pass_against_the_real_carrier_server() {
    let root = specs_copy("mcp-specs-cases");
    let run = archmax(&root, &["test", "order-status", "--replay", "--json", "--root", "."]);
    assert_eq!(run.code, 0, "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let document: Value = serde_json::from_str(&run.stdout).expect("one results document");
    let verdicts: Vec<(&str, &str)> = document["results"]
        .as_array()
        .expect("a results list")
        .iter()
        .map(|result| (result["id"].as_str().unwrap_or(""), result["verdict"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(verdicts, [("parcel-delivered-while-waiting", "passed"), ("poll-shows-delivery", "passed")]);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_poll_reads_the_carrier_servers_delivered_scan_and_ends_the_watch() {
    let root = specs_copy("mcp-specs-poll");
    let tape = root.join("workflows/order-status/tests/poll-shows-delivery.tape.yaml");
    let (_, events) = run_session(
        &root,
        "order-status",
        "Has my order ORD-1058 arrived?",
        &tape.to_string_lossy(),
        &["--variables", r#"{"order_id":"ORD-1058"}"#, "--session", "JJD000390012133905"],
    );
    let polled = tool_events(&events, "tool-result", "carrier__track_parcel");
    assert_eq!(polled.len(), 1, "{polled:?}");
    assert_eq!(polled[0]["status"], "ok", "{}", polled[0]);
    // The carrier's own answer, as the model read it: the newest scan first.
    let said = polled[0]["output"].as_str().unwrap_or_default();
    assert!(
        said.contains(r#""tracking_number":"JJD000390012133905","carrier":"DHL","status":"delivered""#)
            && said.contains(
                r#""scans":[{"status":"delivered","place":"Hamburg 22765","time":"2025-03-19T11:24:00+01:00"}"#
            ),
        "{}",
        polled[0]
    );

    let shown = archmax(&root, &["sessions", "JJD000390012133905", "--root", ".", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let session: Value = serde_json::from_str(&shown.stdout).expect("the session as JSON");
    assert_eq!(session["status"], "completed");
    assert_eq!(session["variables"]["shipment_status"]["value"], "delivered");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn the_carrier_guard_refuses_a_number_of_no_carriers_format() {
    let root = specs_copy("mcp-specs-guard");
    write(
        &root,
        "probe.tape.yaml",
        r#"- state: look-up
  tool_calls:
    - { name: archmax_advance, args: { to: watch-shipment, reason: "ORD-1045 is with GLS" } }
- state: watch-shipment
  tool_calls:
    - { name: carrier__track_parcel, args: { tracking_number: "../../etc/passwd" } }
- state: watch-shipment
  text: I could not find the parcel.
  tool_calls:
    - { name: archmax_wait, args: { reason: "no scan yet", until: "1d" } }
"#,
    );
    let (printed, events) = run_session(
        &root,
        "order-status",
        "Wo ist ORD-1045?",
        "probe.tape.yaml",
        &["--variables", r#"{"order_id":"ORD-1045"}"#],
    );
    assert!(printed.contains("awaiting input"), "{printed}");
    // The traversal never reaches the server: the kernel's guard refuses it, and the
    // session parks as the model asked.
    let blocked = tool_events(&events, "tool-blocked", "carrier__track_parcel");
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0]["rule"], "tool.not-allowed", "{}", blocked[0]);
    assert!(tool_events(&events, "tool-result", "carrier__track_parcel").is_empty(), "a refused call never runs");
    let _ = fs::remove_dir_all(&root);
}

/// Speaks JSON-RPC to the carrier server over its stdio: one request per line, one answer
/// per line.
#[test]
fn the_carrier_server_speaks_mcp_over_stdio() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax-carrier-mcp"))
        .args(["--scans", "carrier/scans.json", "--rates", "reference/shipping-rates.csv"])
        .current_dir(repository().join("specs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the carrier server starts");
    let mut input = child.stdin.take().expect("its stdin");
    let mut output = BufReader::new(child.stdout.take().expect("its stdout"));
    // A request gets one answer line; a notification (no `id`) gets none.
    let mut ask = |message: Value| -> Value {
        writeln!(input, "{message}").expect("send a message");
        if message.get("id").is_none() {
            return Value::Null;
        }
        let mut line = String::new();
        output.read_line(&mut line).expect("read an answer");
        serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line:?}"))
    };
    let hello = ask(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "archmax-tests", "version": "0"}}}));
    assert_eq!(hello["result"]["serverInfo"]["name"], "archmax-carrier-mcp", "{hello}");
    assert!(hello["result"]["capabilities"]["tools"].is_object(), "{hello}");
    ask(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tools = ask(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let mut names: Vec<&str> =
        tools["result"]["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    names.sort();
    assert_eq!(names, ["quote_shipping", "track_parcel"], "{tools}");

    let call = |id: u64, name: &str, arguments: Value| serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let text = |answer: &Value| answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let tracked = ask(call(3, "track_parcel", serde_json::json!({"tracking_number": "YB4TQ8N2"})));
    assert_eq!(tracked["result"]["isError"], false, "{tracked}");
    assert!(text(&tracked).contains(r#""status":"in_transit","place":"GLS depot Wien 1230""#), "{tracked}");

    let unknown = ask(call(4, "track_parcel", serde_json::json!({"tracking_number": "ZZ9ZZ9ZZ"})));
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(text(&unknown).contains("knows no parcel with tracking number ZZ9ZZ9ZZ"), "{unknown}");

    let mistyped = ask(call(5, "track_parcel", serde_json::json!({"tracking_number": 7})));
    assert_eq!(mistyped["result"]["isError"], true, "{mistyped}");

    let quoted = ask(call(6, "quote_shipping", serde_json::json!({"carrier": "GLS", "weight_kg": 3.8})));
    assert_eq!(quoted["result"]["isError"], false, "{quoted}");
    assert!(text(&quoted).contains(r#""band":"M""#), "{quoted}");

    drop(input);
    let status = child.wait().expect("the server ends when its stdin closes");
    assert!(status.success(), "{status}");
}

#[test]
fn a_bad_scan_file_stops_the_carrier_server_with_one_line() {
    let root = scratch("mcp-bad-scans");
    let _ = fs::remove_dir_all(&root);
    write(&root, "scans.json", r#"{"parcels": [{"tracking_number": "yb4", "carrier": "GLS", "scans": []}]}"#);
    let output = Command::new(env!("CARGO_BIN_EXE_archmax-carrier-mcp"))
        .args(["--scans", "scans.json"])
        .current_dir(&root)
        .stdin(Stdio::null())
        .output()
        .expect("the carrier server runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "nothing on the protocol channel");
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("scans.json: `yb4` is not a tracking number"), "{said}");
    let _ = fs::remove_dir_all(&root);
}
