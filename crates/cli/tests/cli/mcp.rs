//! Host tools over the Model Context Protocol, through the binary: the reference server
//! `@modelcontextprotocol/server-everything` (pinned in `interop/package-lock.json`,
//! installed by `npm ci --prefix interop`) answering a taped session's calls through the
//! kernel, and the example workspace's order-status polling the carrier server shipped in
//! this repository (`archmax-carrier-mcp`, the `archmax-example-carrier` package, built
//! beside `archmax` by `cargo test --workspace`; its own tests speak to it directly).
//!
//! These tests never skip: without Node.js or the installed reference server they fail,
//! saying what to run.

use std::fs;

use std::path::{Path, PathBuf};
use std::process::Command;

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
    let carrier = Path::new(env!("CARGO_BIN_EXE_archmax")).with_file_name("archmax-carrier-mcp");
    assert!(
        carrier.is_file(),
        "{} is missing: the example's carrier server is another package; run the whole suite \
         (`cargo test --workspace`) or build it first (`cargo build -p archmax-example-carrier`)",
        carrier.display()
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
