//! `--record`: a session run against a live (in-suite) chat-completions endpoint is
//! written as a tape, across commands, and replaying that tape offline gives the very
//! same events; `test --record` writes each case's tape so `--replay` passes offline.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::{copy_dir, repository, scratch};

const CLOCK: &str = "2026-01-05T09:30:00Z";

/// A chat-completions endpoint on loopback that answers requests with `answers` in
/// order, and counts what it was asked.
struct Endpoint {
    base_url: String,
    asked: Arc<Mutex<usize>>,
}

fn endpoint(answers: Vec<Value>) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").expect("loopback");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("address"));
    let asked = Arc::new(Mutex::new(0usize));
    let count = Arc::clone(&asked);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let Some(_) = crate::serve::read_request(&mut stream) else { continue };
            let mut asked = count.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let answer = answers
                .get(*asked)
                .cloned()
                .unwrap_or_else(|| json!({ "error": { "message": "the script has no more answers" } }));
            *asked += 1;
            drop(asked);
            respond(&mut stream, &answer);
        }
    });
    Endpoint { base_url, asked }
}

fn respond(stream: &mut TcpStream, answer: &Value) {
    let text = answer.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn completion(id: &str, message: Value, finish: &str) -> Value {
    json!({
        "id": id,
        "model": "relay-model-2026-01",
        "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        "usage": { "prompt_tokens": 310, "completion_tokens": 42, "prompt_tokens_details": { "cached_tokens": 200 } },
    })
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments.to_string() } })
}

/// Runs archmax in `root`; `base_url` is the live endpoint, or `None` for none at all.
fn archmax(root: &Path, base_url: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
    command
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", CLOCK)
        .env("ARCHMAX_MAX_RETRIES", "0")
        .env_remove("ARCHMAX_TRUSTED_KEYS")
        .env_remove("ARCHMAX_PROMPT_CACHE");
    match base_url {
        Some(url) => command
            .env("ARCHMAX_API_BASE_URL", url)
            .env("ARCHMAX_API_KEY", "sk-suite")
            .env("ARCHMAX_MODEL", "relay-model"),
        None => command.env_remove("ARCHMAX_API_BASE_URL").env_remove("ARCHMAX_API_KEY").env_remove("ARCHMAX_MODEL"),
    };
    let output = command.output().expect("archmax runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn workspace(label: &str) -> std::path::PathBuf {
    let root = scratch(label);
    copy_dir(&repository().join("golden/runs/wait-deliver/workspace"), &root);
    // Only the workflow: the case's own tapes are not used here.
    for tape in ["tape.yaml", "tape-2.yaml"] {
        let _ = std::fs::remove_file(root.join(tape));
    }
    root
}

#[test]
fn a_recorded_session_replays_offline_with_the_same_events() {
    let live = endpoint(vec![
        completion(
            "chatcmpl-1",
            json!({ "role": "assistant", "content": "It is with DHL: \"in transit\" # since Monday\nI'll keep you posted.",
                    "tool_calls": [call("call_w", "archmax_wait", json!({ "reason": "the parcel is with DHL", "until": "1d" }))] }),
            "stop",
        ),
        completion(
            "chatcmpl-2",
            json!({ "role": "assistant", "content": null,
                    "tool_calls": [call("call_a", "archmax_advance", json!({ "to": "delivered", "reason": "the scan says delivered" }))] }),
            "stop",
        ),
        completion("chatcmpl-3", json!({ "role": "assistant", "content": "Your side table has arriv" }), "length"),
    ]);
    let recorded = workspace("record-live");
    let tape = recorded.join("recorded.yaml");
    let tape_arg = tape.to_string_lossy().into_owned();
    let question = "Where is my side table from ORD-4410?";
    let delivery = r#"{"scan":{"status":"delivered"}}"#;
    let run = ["run", "parcel-follow", question, "--session", "s1", "--events", "events-1.jsonl"];
    let deliver =
        ["deliver", "s1", "--trigger", "carrier_update", "--variables", delivery, "--events", "events-2.jsonl"];

    let (code, stderr) = archmax(&recorded, Some(&live.base_url), &[&run[..], &["--record", &tape_arg]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("recording to") && stderr.contains("recorded 1 model answer to the tape"), "{stderr}");
    let (code, stderr) = archmax(&recorded, Some(&live.base_url), &[&deliver[..], &["--record", &tape_arg]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("recorded 2 model answers to the tape"), "{stderr}");
    assert_eq!(*live.asked.lock().unwrap(), 3, "every model call went to the endpoint");

    let text = std::fs::read_to_string(&tape).expect("the tape was written");
    for matcher in
        ["workflow: \"parcel-follow\"", "state: \"watch\"", "state: \"delivered\"", "role: agent", "truncated: true"]
    {
        assert!(text.contains(matcher), "the tape fills in `{matcher}`:\n{text}");
    }

    // Offline, from a fresh workspace, with no endpoint configured at all.
    let replayed = workspace("record-replay");
    std::fs::copy(&tape, replayed.join("recorded.yaml")).expect("copy the tape");
    let (code, stderr) = archmax(&replayed, None, &[&run[..], &["--tape", "recorded.yaml"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = archmax(&replayed, None, &[&deliver[..], &["--tape", "recorded.yaml"]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("unused"), "the replay used every entry: {stderr}");
    for events in ["events-1.jsonl", "events-2.jsonl"] {
        let live_events = std::fs::read_to_string(recorded.join(events)).expect("live events");
        let replay_events = std::fs::read_to_string(replayed.join(events)).expect("replayed events");
        assert!(live_events.contains("\"event\":\"model-usage\""), "{live_events}");
        assert_eq!(live_events, replay_events, "{events}: the replay emits the recorded session's events");
    }
    let last = std::fs::read_to_string(replayed.join("events-2.jsonl")).unwrap();
    assert!(last.contains(r#""messageId":"chatcmpl-3","partial":true"#), "{last}");
}

#[test]
fn record_refuses_a_file_that_is_not_a_tape_and_conflicts_with_tape() {
    let root = workspace("record-refuse");
    std::fs::write(root.join("notes.yaml"), "title: my notes\n").unwrap();
    let live = endpoint(Vec::new());
    let (code, stderr) =
        archmax(&root, Some(&live.base_url), &["run", "parcel-follow", "Hello", "--record", "notes.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("`notes.yaml` is not a tape"), "{stderr}");
    assert_eq!(std::fs::read_to_string(root.join("notes.yaml")).unwrap(), "title: my notes\n", "left alone");
    assert_eq!(*live.asked.lock().unwrap(), 0, "nothing was asked of the model");
    let (code, stderr) = archmax(
        &root,
        Some(&live.base_url),
        &["run", "parcel-follow", "Hello", "--record", "a.yaml", "--tape", "b.yaml"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--record") && stderr.contains("--tape"), "{stderr}");
}

#[test]
fn test_record_writes_each_cases_tape_and_replay_then_passes_offline() {
    let root = workspace("record-test");
    let tests = root.join("workflows/parcel-follow/tests");
    std::fs::create_dir_all(&tests).unwrap();
    std::fs::write(
        tests.join("waits.test.yaml"),
        "title: A moving parcel parks the session\ndescription: The agent tells the customer and waits for the carrier.\nsteps:\n  - send: \"Where is my side table?\"\n  - calledTool: { name: archmax_wait }\n  - reply:\n      includes: DHL\n",
    )
    .unwrap();
    let live = endpoint(vec![completion(
        "chatcmpl-1",
        json!({ "role": "assistant", "content": "It is with DHL.",
                "tool_calls": [call("call_w", "archmax_wait", json!({ "reason": "with DHL", "until": "1d" }))] }),
        "stop",
    )]);
    let (code, stderr) = archmax(&root, Some(&live.base_url), &["test", "parcel-follow", "--record"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("recording each case's tape") && stderr.contains("waits.tape.yaml"), "{stderr}");
    assert!(tests.join("waits.tape.yaml").is_file());
    let (code, stderr) = archmax(&root, None, &["test", "parcel-follow", "--replay"]);
    assert_eq!(code, 0, "the recorded tape passes offline: {stderr}");
    assert!(stderr.contains("✔ passed waits"), "{stderr}");
    let (code, stderr) = archmax(&root, None, &["test", "parcel-follow", "--record", "--replay"]);
    assert_eq!(code, 2, "{stderr}");
}
