//! The payment server as archmax meets it: a child process speaking MCP's JSON-RPC over
//! stdio, one message per line, paying into a ledger in its working directory.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A fresh folder of this test binary's own.
fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("archmax-payments-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[test]
fn the_payment_server_pays_into_its_ledger_over_stdio() {
    let folder = scratch("stdio");
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax-payments-mcp"))
        .args(["--ledger", "payments.jsonl", "--limit", "500"])
        .current_dir(&folder)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the payment server starts");
    let mut input = child.stdin.take().expect("its stdin");
    let mut output = BufReader::new(child.stdout.take().expect("its stdout"));
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
    assert_eq!(hello["result"]["serverInfo"]["name"], "archmax-payments-mcp", "{hello}");
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tools = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let mut names: Vec<&str> =
        tools["result"]["tools"].as_array().into_iter().flatten().filter_map(|tool| tool["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["list_payments", "pay"], "{tools}");

    let call = |id: u64, name: &str, arguments: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let text = |answer: &Value| answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
    let paid = ask(call(3, "pay", json!({"amount": 142.5, "memo": "Hotel Adler"})));
    assert_eq!(paid["result"]["isError"], false, "{paid}");
    let payment: Value = serde_json::from_str(&text(&paid)).expect("the payment as JSON");
    assert_eq!((payment["payment"].as_str(), payment["amount"].as_f64()), (Some("PAY-000001"), Some(142.5)));
    assert_eq!(payment["currency"], "EUR");

    let over = ask(call(4, "pay", json!({"amount": 1420})));
    assert_eq!(over["result"]["isError"], true, "{over}");
    assert!(text(&over).contains("at most 500") && text(&over).contains("nothing was paid"), "{over}");
    let wrong_type = ask(call(5, "pay", json!({"amount": "142.50"})));
    assert!(wrong_type["result"]["isError"] == true || wrong_type.get("error").is_some(), "{wrong_type}");

    let listed = ask(call(6, "list_payments", json!({})));
    let listed: Value = serde_json::from_str(&text(&listed)).expect("the payments as JSON");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    drop(input);
    assert!(child.wait().expect("the server ends").success(), "the server ends cleanly when stdin closes");
    let ledger = std::fs::read_to_string(folder.join("payments.jsonl")).expect("the ledger");
    assert_eq!(ledger.lines().count(), 1, "{ledger}");
    assert!(ledger.contains(r#""payment":"PAY-000001","amount":142.5"#), "{ledger}");
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn a_broken_ledger_stops_the_server_at_start_naming_the_line() {
    let folder = scratch("broken");
    std::fs::write(folder.join("payments.jsonl"), "not a payment\n").expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_archmax-payments-mcp"))
        .args(["--ledger", "payments.jsonl"])
        .current_dir(&folder)
        .stdin(Stdio::null())
        .output()
        .expect("the payment server runs");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("line 1 is not a payment") && said.contains("repair or move the file"), "{said}");
    let _ = std::fs::remove_dir_all(&folder);
}
