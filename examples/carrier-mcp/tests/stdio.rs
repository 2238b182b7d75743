//! The carrier server as archmax meets it: a child process speaking MCP's JSON-RPC over
//! stdio, one message per line, started in the example workspace `specs/`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The example workspace the server answers for.
fn specs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs")
}

/// A fresh folder of this test binary's own.
fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("archmax-carrier-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[test]
fn the_carrier_server_speaks_mcp_over_stdio() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax-carrier-mcp"))
        .args(["--scans", "carrier/scans.json", "--rates", "reference/shipping-rates.csv"])
        .current_dir(specs())
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
    let hello = ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "archmax-tests", "version": "0"}}}));
    assert_eq!(hello["result"]["serverInfo"]["name"], "archmax-carrier-mcp", "{hello}");
    assert!(hello["result"]["capabilities"]["tools"].is_object(), "{hello}");
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tools = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let mut names: Vec<&str> =
        tools["result"]["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["quote_shipping", "track_parcel"], "{tools}");

    let call = |id: u64, name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let text = |answer: &Value| answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let tracked = ask(call(3, "track_parcel", json!({"tracking_number": "YB4TQ8N2"})));
    assert_eq!(tracked["result"]["isError"], false, "{tracked}");
    assert!(text(&tracked).contains(r#""status":"in_transit","place":"GLS depot Wien 1230""#), "{tracked}");

    let unknown = ask(call(4, "track_parcel", json!({"tracking_number": "ZZ9ZZ9ZZ"})));
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    assert!(text(&unknown).contains("knows no parcel with tracking number ZZ9ZZ9ZZ"), "{unknown}");

    let mistyped = ask(call(5, "track_parcel", json!({"tracking_number": 7})));
    assert_eq!(mistyped["result"]["isError"], true, "{mistyped}");

    let quoted = ask(call(6, "quote_shipping", json!({"carrier": "GLS", "weight_kg": 3.8})));
    assert_eq!(quoted["result"]["isError"], false, "{quoted}");
    assert!(text(&quoted).contains(r#""band":"M""#), "{quoted}");

    drop(input);
    let status = child.wait().expect("the server ends when its stdin closes");
    assert!(status.success(), "{status}");
}

#[test]
fn a_bad_scan_file_stops_the_carrier_server_with_one_line() {
    let root = scratch("bad-scans");
    std::fs::write(
        root.join("scans.json"),
        r#"{"parcels": [{"tracking_number": "yb4", "carrier": "GLS", "scans": []}]}"#,
    )
    .expect("write the scan file");
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
    let _ = std::fs::remove_dir_all(&root);
}
