//! A live `archmax serve` for the deployment checks: the small workspace Schemathesis
//! uses (`interop/schemathesis/workspace`, answered from its tape), with a token, so a
//! route answering without one is known to need none; and plain-text GETs (`/metrics` is
//! not JSON, which `Served::request` expects).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use serde_json::json;

use crate::serving::{PATIENCE, Served};
use crate::support::{copy_dir, repository, scratch};

/// The bearer token the live runner accepts (every scope).
pub const TOKEN: &str = "deploy-test-token-0123456789abcdef";

/// A runner and its scratch workspace, removed when dropped.
pub struct Runner {
    pub served: Served,
    root: PathBuf,
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Starts a runner on a copy of the Schemathesis workspace, with `archmax_toml` as its
/// `archmax.toml` when given, and `env` set.
pub fn start(label: &str, archmax_toml: Option<&str>, env: &[(&str, &str)]) -> Runner {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    copy_dir(&repository().join("interop/schemathesis/workspace"), &root);
    if let Some(text) = archmax_toml {
        fs::write(root.join("archmax.toml"), text).expect("write archmax.toml");
    }
    let tape = root.join("tape.yaml");
    let tape = tape.to_str().expect("a UTF-8 scratch path");
    let mut variables = vec![("ARCHMAX_SERVE_TOKEN", TOKEN)];
    variables.extend_from_slice(env);
    let served = Served::spawn(&root, &["--root", ".", "--tape", tape], &variables);
    Runner { served, root }
}

impl Runner {
    /// `GET path`, with the token when `authorized`: the status and the body as text.
    pub fn get_text(&self, path: &str, authorized: bool) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.served.address).expect("connect to the runner");
        stream.set_read_timeout(Some(PATIENCE)).expect("a read timeout");
        let auth = if authorized { format!("authorization: Bearer {TOKEN}\r\n") } else { String::new() };
        write!(stream, "GET {path} HTTP/1.1\r\nhost: {}\r\n{auth}connection: close\r\n\r\n", self.served.address)
            .expect("send the request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read the answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer.as_str(), ""));
        let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        (status, body.to_string())
    }

    /// Starts a `desk` session and waits until it parks at its decision, so turns, steps,
    /// model calls, parks, the parked gauges and both histograms have samples.
    pub fn park_one_session(&self) {
        let body = json!({ "sessionId": "deploy1", "message": "Pay out 40 EUR to Ines." });
        let (status, shown) =
            self.served.request("POST", "/v1/workflows/desk/sessions?wait=60", Some(TOKEN), Some(&body));
        assert_eq!(status, 200, "the session starts: {shown}");
        assert_eq!(shown["status"], "awaiting_decision", "the session parks at its decision: {shown}");
    }
}
