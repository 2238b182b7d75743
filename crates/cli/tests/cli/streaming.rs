//! Streaming end to end: `archmax run` against an in-suite chat-completions endpoint that
//! answers with server-sent events prints the reply while the answer is still arriving
//! (the endpoint holds the rest back until the test has read the first piece from the
//! command's stdout), reassembles tool-call fragments, and a stream cut after some text
//! fails the turn cleanly: the text shown is reported as a partial answer and the session
//! keeps none of it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{copy_dir, repository, scratch};

/// How long a test waits for something that should come at once; it only bounds a hang.
const PATIENCE: Duration = Duration::from_secs(60);

fn chunk(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn text(piece: &str) -> String {
    chunk(
        json!({ "id": "chatcmpl-live", "model": "relay-model-1", "choices": [{ "index": 0, "delta": { "content": piece } }] }),
    )
}

/// One streamed answer per request: each answer's `first` bytes go out at once, the
/// `rest` once `release` says so (or at once when it is `None`); `rest` ends the answer
/// and closes the connection.
fn endpoint(answers: Vec<(String, Option<Receiver<()>>, String)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for mut stream in listener.incoming().flatten() {
            let Some(_) = crate::serve::read_request(&mut stream) else { continue };
            let Some((first, release, rest)) = answers.next() else { return };
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(first.as_bytes());
            let _ = stream.flush();
            if let Some(release) = release {
                let _ = release.recv_timeout(PATIENCE);
            }
            let _ = stream.write_all(rest.as_bytes());
        }
    });
    base_url
}

fn command(root: &std::path::Path, base_url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
    command
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
        .env("ARCHMAX_API_BASE_URL", base_url)
        .env("ARCHMAX_API_KEY", "sk-suite")
        .env("ARCHMAX_MODEL", "relay-model")
        .env("ARCHMAX_MAX_RETRIES", "0")
        .env_remove("ARCHMAX_STREAMING")
        .env_remove("ARCHMAX_TRUSTED_KEYS");
    command
}

fn workspace(label: &str) -> std::path::PathBuf {
    let root = scratch(label);
    copy_dir(&repository().join("golden/runs/wait-deliver/workspace"), &root);
    root
}

#[test]
fn run_prints_the_reply_while_it_streams_and_puts_tool_call_fragments_together() {
    let root = workspace("stream-live");
    let (release, held) = channel();
    let advance = [
        chunk(json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": 0, "id": "call_adv", "type": "function", "function": { "name": "archmax_advance", "arguments": "{\"to\": \"deliv" } } ] } }] })),
        chunk(json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": 0, "function": { "arguments": "ered\", \"reason\": \"the scan says so\"}" } } ] } }] })),
        chunk(json!({ "choices": [], "usage": { "prompt_tokens": 300, "completion_tokens": 20 } })),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let base_url = endpoint(vec![
        (text("The carrier says "), Some(held), [text("it arrived."), advance].concat()),
        ([text("Enjoy "), text("your table!")].concat(), None, "data: [DONE]\n\n".to_string()),
    ]);
    let mut child = command(&root, &base_url, &["run", "parcel-follow", "Has it arrived?", "--events", "events.jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("archmax starts");
    let mut stdout = child.stdout.take().expect("stdout");
    // The first piece is on stdout while the endpoint still holds the rest of the answer.
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("The carrier says ") {
        match stdout.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => panic!("stdout ended before the first piece: {:?}", String::from_utf8_lossy(&seen)),
        }
    }
    release.send(()).expect("the endpoint waits");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("stdout");
    let status = child.wait().expect("archmax ends");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
    assert!(status.success(), "{stderr}");
    let printed = format!("{}{rest}", String::from_utf8_lossy(&seen));
    assert_eq!(printed, "The carrier says it arrived.\n\nEnjoy your table!\n");
    assert!(stderr.contains("→ delivered"), "the fragments made one archmax_advance call: {stderr}");
    let events = std::fs::read_to_string(root.join("events.jsonl")).expect("events");
    let deltas: Vec<Value> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["event"] == "agent-text-delta")
        .collect();
    let pieces: Vec<&str> = deltas.iter().filter_map(|event| event["text"].as_str()).collect();
    assert_eq!(pieces, ["The carrier says ", "it arrived.", "Enjoy ", "your table!"]);
    assert!(deltas.iter().all(|event| event["messageId"] == "chatcmpl-live"), "{events}");
}

#[test]
fn a_stream_cut_after_text_fails_the_turn_and_keeps_nothing_of_it() {
    let root = workspace("stream-cut");
    let base_url = endpoint(vec![(text("Your parcel is"), None, String::new())]);
    let output = command(
        &root,
        &base_url,
        &["run", "parcel-follow", "Where is it?", "--session", "s1", "--events", "events.jsonl"],
    )
    .output()
    .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Your parcel is\n", "the shown text, its line ended");
    assert!(stderr.contains("cut before its end"), "{stderr}");
    let events = std::fs::read_to_string(root.join("events.jsonl")).expect("events");
    assert!(
        events.contains(r#""event":"agent-text","state":"watch","text":"Your parcel is","partial":true"#),
        "{events}"
    );
    let shown = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["sessions", "s1", "--transcript", "--json"])
        .current_dir(&root)
        .output()
        .expect("archmax runs");
    let transcript = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(!transcript.contains("Your parcel is"), "the session keeps none of the broken answer: {transcript}");
}
