//! `archmax serve` as a child process, for the tests that drive it: spawned on a free
//! loopback port, its log collected, talked to with one-shot HTTP/1.1 requests, stopped
//! with a signal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The overall bound on every wait here; nothing is timed against it, it only ends a hang.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// One `archmax serve` process and what it logged.
pub struct Served {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// Set when the log's reader reached the end of the process's stderr.
    log_ended: Arc<std::sync::atomic::AtomicBool>,
    pub address: String,
}

impl Served {
    /// Starts `archmax serve --listen 127.0.0.1:0 ARGS…` in `root` with `env` and waits
    /// until it says where it listens.
    pub fn spawn(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env_remove("ARCHMAX_SERVE_TOKEN")
            .env_remove("ARCHMAX_TRUSTED_KEYS")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("archmax serve starts");
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let lines = BufReader::new(child.stderr.take().expect("stderr is piped"));
        let collected = Arc::clone(&log);
        let log_ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = Arc::clone(&log_ended);
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                collected.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
            }
            ended.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut served = Served { child, log, log_ended, address: String::new() };
        let listening = served.wait_for_log("archmax serve is listening");
        let at = listening.split("http://").nth(1).expect("an address");
        served.address = at.split(|c: char| c == '"' || c.is_whitespace()).next().unwrap_or_default().to_string();
        served
    }

    /// Every line logged so far.
    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The first log line containing `text`, waiting for it.
    pub fn wait_for_log(&mut self, text: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(line) = self.lines().into_iter().find(|line| line.contains(text)) {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("archmax serve exited ({status}) before logging `{text}`:\n{}", self.lines().join("\n"));
            }
            assert!(started.elapsed() < PATIENCE, "no log line `{text}`:\n{}", self.lines().join("\n"));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many log lines contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.lines().iter().filter(|line| line.contains(text)).count()
    }

    /// Sends signal `name` (`TERM`, `HUP`) to the process.
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status();
        assert!(sent.is_ok_and(|status| status.success()), "kill -{name}");
    }

    /// One request on a fresh connection: the status and the JSON body (`Null` when it
    /// is not JSON), or the error of connecting or reading.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> std::io::Result<(u16, Value)> {
        let mut stream = TcpStream::connect(&self.address)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        let body = body.map(Value::to_string).unwrap_or_default();
        let auth = token.map(|token| format!("authorization: Bearer {token}\r\n")).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.address,
            body.len()
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer.as_str(), ""));
        let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
    }

    /// [`Served::try_request`], which must be answered.
    pub fn request(&self, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
        self.try_request(method, path, token, body).expect("the server answers")
    }

    /// Polls session `id` until `done` holds of it.
    pub fn session_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let began = Instant::now();
        loop {
            let (status, shown) = self.request("GET", &format!("/v1/sessions/{id}"), None, None);
            if status == 200 && done(&shown) {
                return shown;
            }
            assert!(began.elapsed() < PATIENCE, "session {id} never got there; last seen {shown}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running (not exited, not killed by a signal).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit code once the process has exited, with everything it logged collected
    /// (its last lines may still be in the pipe when it exits).
    pub fn exit_code(&mut self) -> Option<i32> {
        let began = Instant::now();
        while began.elapsed() < PATIENCE {
            if let Ok(Some(status)) = self.child.try_wait() {
                while !self.log_ended.load(std::sync::atomic::Ordering::SeqCst) && began.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("archmax serve did not exit; it logged:\n{}", self.lines().join("\n"));
    }

    /// SIGTERM, then the exit code.
    pub fn stop(mut self) -> Option<i32> {
        self.signal("TERM");
        self.exit_code()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
