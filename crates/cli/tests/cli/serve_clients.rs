//! `archmax serve` against clients that go away mid-answer or never finish: the process
//! must outlive every one of them.
//!
//! Each test runs the real binary (its signal dispositions are the binary's own, which an
//! in-process server cannot show) on a loopback port, with the model on a tape.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::serving::{PATIENCE, Served};
use crate::support::scratch;

const CHAT: &str = r#"title: Chat
instructions: You answer every message.
states:
  answer:
    triggers:
      manual:
        description: Answer a message.
    instructions: Answer the message.
"#;

/// Event streams opened, and dropped, in each round.
const STREAMS_PER_ROUND: usize = 24;
/// Rounds of streams dropped while a turn posts events.
const ROUNDS: usize = 6;

struct Workspace(PathBuf);

impl Workspace {
    fn new(label: &str) -> Workspace {
        let root = scratch(&format!("serve-clients-{label}"));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("workflows/chat")).expect("workspace");
        std::fs::write(root.join("workflows/chat/workflow.yaml"), CHAT).expect("workflow");
        let tape: String = (0..4 * ROUNDS + 8).map(|_| "- { state: answer, text: Answered. }\n").collect();
        std::fs::write(root.join("tape.yaml"), tape).expect("tape");
        Workspace(root)
    }

    fn serve(&self) -> Served {
        Served::spawn(&self.0, &["--tape", "tape.yaml"], &[("ARCHMAX_FIXED_CLOCK", "2025-03-18T09:30:00Z")])
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens `GET /v1/sessions/{id}/events` and reads until the first event has arrived.
///
/// The request is followed on the same connection by the start of a pipelined second
/// request, as a fuzzer or a pipelining client sends: the server then holds unread bytes
/// and does not notice the client's close by reading, so its next writes go to a socket
/// the client has already closed (first answered by a reset, then refused).
fn open_stream(served: &Served, id: &str) -> TcpStream {
    let mut stream = TcpStream::connect(&served.address).expect("connects");
    stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
    let request = format!("GET /v1/sessions/{id}/events HTTP/1.1\r\nhost: {}\r\n\r\nGET /heal", served.address);
    stream.write_all(request.as_bytes()).expect("sent");
    let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader.read_line(&mut line).expect("the stream answers");
        assert!(read > 0, "the event stream ended before its first event");
        if line.starts_with("data:") {
            return stream;
        }
    }
}

/// One message turn on session `id`, waited for: its events go to every open stream.
fn post_message(served: &Served, id: &str) {
    let body = json!({ "message": "Again?" });
    let (status, answer) = served.request("POST", &format!("/v1/sessions/{id}/messages?wait=60"), None, Some(&body));
    assert_eq!(status, 200, "the message is taken: {answer}");
}

#[test]
fn event_streams_dropped_mid_write_while_turns_post_events_never_end_the_server() {
    let workspace = Workspace::new("dropped-streams");
    let mut served = workspace.serve();
    let body = json!({ "message": "First?", "sessionId": "c1" });
    let (status, shown) = served.request("POST", "/v1/workflows/chat/sessions?wait=60", None, Some(&body));
    assert_eq!(status, 200, "{shown}");

    for _ in 0..ROUNDS {
        let streams: Vec<TcpStream> = (0..STREAMS_PER_ROUND).map(|_| open_stream(&served, "c1")).collect();
        drop(streams);
        // Each turn posts several events to every stream still registered: the first
        // write to a closed client draws a reset, the next one is refused.
        post_message(&served, "c1");
        post_message(&served, "c1");
        assert!(served.is_running(), "archmax serve ended:\n{}", served.lines().join("\n"));
    }

    // Still serving: a health check and a full event stream from the start.
    let (status, health) = served.request("GET", "/healthz", None, None);
    assert_eq!((status, &health["ok"]), (200, &json!(true)));
    let mut fresh = TcpStream::connect(&served.address).expect("connects");
    fresh.set_read_timeout(Some(Duration::from_secs(5))).expect("a read timeout");
    write!(fresh, "GET /v1/sessions/c1/events HTTP/1.1\r\nhost: {}\r\n\r\n", served.address).expect("sent");
    let mut first = [0u8; 64];
    let read = fresh.read(&mut first).expect("an answer");
    let answer = String::from_utf8_lossy(&first[..read]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(served.is_running(), "archmax serve ended:\n{}", served.lines().join("\n"));
    assert_eq!(served.stop(), Some(0), "a clean stop after it all");
}
