//! Operating `archmax serve` as a process: reloads without downtime (SIGHUP for
//! artifacts and tokens, a changed workspace in development mode), JSON logs, and a start
//! refused on a runner table that does not hold.
//!
//! Requests go over a plain HTTP/1.1 connection on loopback; the model is a tape.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::serving::Served;
use crate::support::{archmax, copy_dir, repository, scratch};

const DESK: &str = r#"title: Desk
instructions: You answer one question.
states:
  answer:
    triggers:
      manual:
        description: Answer one question.
    instructions: Answer the question.
"#;

const TAPE: &str = "- { state: answer, text: Answered. }\n";

struct Workspace(PathBuf);

impl Workspace {
    fn new(label: &str) -> Workspace {
        let root = scratch(&format!("serve-ops-{label}"));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("workflows/desk")).expect("workspace");
        fs::write(root.join("workflows/desk/workflow.yaml"), DESK).expect("workflow");
        fs::write(root.join("tape.yaml"), TAPE).expect("tape");
        Workspace(root)
    }

    /// A copy of `specs/` with the in-transit tape of its golden run as `tape.yaml`.
    fn specs(label: &str) -> Workspace {
        let root = scratch(&format!("serve-ops-{label}"));
        let _ = fs::remove_dir_all(&root);
        copy_dir(&repository().join("specs"), &root);
        let tape = repository().join("golden/runs/specs-order-status/workspace/in-transit.tape.yaml");
        fs::copy(tape, root.join("tape.yaml")).expect("tape");
        Workspace(root)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, text: &str) {
        fs::write(self.path(name), text).expect("write");
    }

    /// Writes a secret (a tokens file) that only its owner may read, as the runner requires.
    fn write_private(&self, name: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        self.write(name, text);
        fs::set_permissions(self.path(name), fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    /// `archmax serve` here, answering from `tape.yaml` at a fixed time.
    fn serve(&self, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut all = vec!["--tape", "tape.yaml"];
        all.extend_from_slice(args);
        let mut env = env.to_vec();
        env.push(("ARCHMAX_FIXED_CLOCK", "2025-03-18T09:30:00Z"));
        Served::spawn(&self.0, &all, &env)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Starts session `id` of the desk and waits for its turn; the session as shown.
fn start(served: &Served, id: &str, token: Option<&str>) -> Value {
    let body = json!({ "message": "What is it?", "sessionId": id });
    let (status, shown) = served.request("POST", "/v1/workflows/desk/sessions?wait=60", token, Some(&body));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "completed", "{shown}");
    shown
}

fn spec_hash(shown: &Value) -> String {
    shown["specHash"].as_str().expect("a spec hash").to_string()
}

#[test]
fn development_mode_recompiles_a_changed_workspace_and_keeps_serving_through_a_broken_edit() {
    let workspace = Workspace::new("dev");
    let mut served = workspace.serve(&["--log-format", "json"], &[]);
    let first = spec_hash(&start(&served, "d1", None));

    workspace.write("workflows/desk/workflow.yaml", &DESK.replace("Answer the question.", "Answer it briefly."));
    served.wait_for_log("new sessions start on a new program");
    let second = spec_hash(&start(&served, "d2", None));
    assert_ne!(first, second, "the edit is served");

    // A broken edit is logged with its diagnostic; the program served stays.
    workspace.write("workflows/desk/workflow.yaml", &DESK.replace("states:", "states: [unclosed"));
    let failed = served.wait_for_log("the reload failed");
    assert!(failed.contains("desk"), "the log names what failed: {failed}");
    assert_eq!(spec_hash(&start(&served, "d3", None)), second);
    let (status, old) = served.request("GET", "/v1/sessions/d1", None, None);
    assert_eq!((status, spec_hash(&old)), (200, first));

    let lines = served.lines();
    for line in &lines {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON log line: {line}"));
        assert!(parsed["level"].is_string() && parsed["message"].is_string(), "{line}");
    }
    assert_eq!(served.stop(), Some(0));
}

#[test]
fn sighup_loads_the_rebuilt_artifact_and_the_new_tokens_without_a_restart() {
    let workspace = Workspace::new("hup");
    let build = |text: &str| {
        workspace.write("workflows/desk/workflow.yaml", text);
        let run = archmax(&workspace.0, &["build", "-o", "desk.amx"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    build(DESK);
    let tokens = |token: &str| {
        let digest = archmax_serve_digest(token);
        format!("[[tokens]]\nidentity = \"ops\"\nscopes = [\"admin\"]\nsha256 = \"{digest}\"\n")
    };
    workspace.write_private("tokens.toml", &tokens("first-token"));
    let mut served = workspace.serve(&["--artifact", "desk.amx", "--tokens", "tokens.toml"], &[]);
    let first = spec_hash(&start(&served, "h1", Some("first-token")));

    build(&DESK.replace("Answer the question.", "Answer it in one line."));
    workspace.write_private("tokens.toml", &tokens("second-token"));
    served.signal("HUP");
    served.wait_for_log("tokens reloaded");
    assert_eq!(served.count("new sessions start on a new program"), 1, "{}", served.lines().join("\n"));
    let (status, _) = served.request("GET", "/v1/sessions", Some("first-token"), None);
    assert_eq!(status, 401, "the old token is gone");
    let second = spec_hash(&start(&served, "h2", Some("second-token")));
    assert_ne!(first, second);

    // A tokens file that no longer holds keeps the tokens served, and says so.
    workspace.write_private("tokens.toml", "[[tokens]]\nidentity = 3\n");
    served.signal("HUP");
    served.wait_for_log("the tokens were not reloaded");
    let (status, _) = served.request("GET", "/v1/sessions", Some("second-token"), None);
    assert_eq!(status, 200);
    assert_eq!(served.stop(), Some(0));
}

/// The SHA-256 (hex) of a token, as a tokens file holds it.
fn archmax_serve_digest(token: &str) -> String {
    let output =
        Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().and_then(|mut child| {
            child.stdin.take().expect("stdin").write_all(token.as_bytes())?;
            child.wait_with_output()
        });
    let output = output.expect("sha256sum runs");
    String::from_utf8_lossy(&output.stdout).split_whitespace().next().expect("a digest").to_string()
}

#[test]
fn an_inbox_provider_without_its_secret_or_without_tokens_refuses_the_start() {
    let workspace = Workspace::new("oidc-refused");
    let start = |token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml"])
            .current_dir(&workspace.0)
            .env("NO_COLOR", "1")
            .env("DESK_OIDC_SECRET", "")
            .env_remove("ARCHMAX_SERVE_TOKEN");
        if let Some(token) = token {
            command.env("ARCHMAX_SERVE_TOKEN", token);
        }
        let output = command.output().expect("archmax serve runs");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let table = "[serve]\npublic_url = \"https://inbox.example\"\n\n[inbox.oidc]\nissuer = \"https://login.example\"\nclient_id = \"inbox\"\nclient_secret_env = \"DESK_OIDC_SECRET\"\nallowed_domains = [\"example.com\"]\n";
    workspace.write("archmax.toml", table);
    let (code, stderr) = start(Some("a-token-of-at-least-16-bytes"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("DESK_OIDC_SECRET, which is not set or empty"), "{stderr}");
    let (code, stderr) = start(None);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("[inbox.oidc] is set, but no token is configured"), "{stderr}");

    workspace.write("archmax.toml", &table.replace("client_id", "clientid"));
    let validate = archmax(&workspace.0, &["validate"]);
    assert_ne!(validate.code, 0);
    let said = format!("{}{}", validate.stdout, validate.stderr);
    assert!(
        said.contains("`inbox.oidc.clientid` is not a setting") && said.contains("did you mean `client_id`?"),
        "{said}"
    );
}

#[test]
fn a_runner_table_that_does_not_hold_or_an_unset_secret_refuses_the_start() {
    let workspace = Workspace::new("refused");
    let start = |root: &Path| {
        let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
            .args(["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml"])
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env_remove("DESK_HOOK_SECRET")
            .output()
            .expect("archmax serve runs");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    workspace.write("archmax.toml", "[connections.mail]\nsignature_header = \"X-Sig\"\n");
    let (code, stderr) = start(&workspace.0);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("connection `mail` names no `secret_env`"), "{stderr}");

    workspace.write("archmax.toml", "[connections.mail]\nsecret_env = \"DESK_HOOK_SECRET\"\n");
    let (code, stderr) = start(&workspace.0);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("DESK_HOOK_SECRET, which is not set"), "{stderr}");

    let validate = archmax(&workspace.0, &["validate"]);
    assert_eq!(validate.code, 0, "a configured connection validates: {}", validate.stderr);
    workspace.write("archmax.toml", "[schedule.desk]\n");
    let validate = archmax(&workspace.0, &["validate"]);
    assert_ne!(validate.code, 0);
    assert!(validate.stdout.contains("AMX0011") || validate.stderr.contains("AMX0011"), "{}", validate.stderr);
}

#[test]
fn a_signed_specs_artifact_runs_under_serve_trust_and_an_unsigned_one_is_refused() {
    let workspace = Workspace::specs("signed");
    let keygen = archmax(&workspace.0, &["keygen", "-o", "release.key"]);
    assert_eq!(keygen.code, 0, "{}", keygen.stderr);
    let public = keygen.stdout.split_whitespace().find(|word| word.starts_with("ed25519:")).expect("a public key");
    let signed = archmax(&workspace.0, &["build", "--sign", "release.key", "-o", "signed.amx"]);
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    let unsigned = archmax(&workspace.0, &["build", "-o", "unsigned.amx"]);
    assert_eq!(unsigned.code, 0, "{}", unsigned.stderr);

    let mut served = workspace.serve(&["--artifact", "signed.amx", "--trust", public], &[]);
    served.wait_for_log("mode=\"artifacts\"");
    let (status, ready) = served.request("GET", "/readyz", None, None);
    assert_eq!(status, 200, "{ready}");
    assert!(ready["workflows"].as_array().is_some_and(|served| served.contains(&json!("order-status"))), "{ready}");
    let body = json!({ "message": "Wo ist meine Bestellung ORD-1045?", "sessionId": "YB4TQ8N2", "variables": { "order_id": "ORD-1045" } });
    let (status, parked) = served.request("POST", "/v1/workflows/order-status/sessions?wait=60", None, Some(&body));
    assert_eq!(status, 200, "{parked}");
    assert_eq!(parked["status"], "awaiting_input", "the session follows the parcel: {parked}");
    assert_eq!(parked["workflowState"], "watch-shipment", "{parked}");
    assert_eq!(served.stop(), Some(0));

    // Trusting a key, the server refuses an unsigned artifact, by name.
    let refused = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["serve", "--artifact", "unsigned.amx", "--trust", public, "--listen", "127.0.0.1:0"])
        .current_dir(&workspace.0)
        .env_remove("ARCHMAX_TRUSTED_KEYS")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`unsigned.amx` is refused"), "{stderr}");
}

/// A file under `dir` whose path ends in `tail`.
fn find_file(dir: &Path, tail: &str) -> Option<PathBuf> {
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, tail) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(tail) {
            return Some(path);
        }
    }
    None
}

#[test]
fn served_sessions_are_held_to_the_context_budgets_of_archmax_toml() {
    // The compaction golden's workspace: a 6,000-token window that eight ledger reads
    // overflow, so a served session must compact as `archmax run` does.
    let root = scratch("serve-ops-context");
    let _ = fs::remove_dir_all(&root);
    copy_dir(&repository().join("golden/runs/compaction-summary/workspace"), &root);
    let workspace = Workspace(root);
    let served = workspace.serve(&[], &[]);
    let body = json!({ "message": "Audit the weekly ledgers for invoices over 800 EUR.", "sessionId": "c1" });
    let (status, shown) = served.request("POST", "/v1/workflows/ledger-audit/sessions?wait=60", None, Some(&body));
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "completed", "{shown}");
    let history = find_file(&workspace.0, "conversation_history/1.jsonl").expect("the served session was compacted");
    let first = fs::read_to_string(history).expect("reads");
    assert!(first.lines().count() >= 8, "the summarized messages are kept whole:\n{first}");
    assert!(find_file(&workspace.0, "conversation_history/2.jsonl").is_none(), "one compaction, as under `run`");
    assert_eq!(served.stop(), Some(0));
}

#[test]
fn a_serve_token_shorter_than_16_bytes_refuses_the_start_naming_the_variable() {
    let workspace = Workspace::new("short-token");
    for short in ["a", "fifteen-bytes!!"] {
        let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
            .args(["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml"])
            .current_dir(&workspace.0)
            .env("NO_COLOR", "1")
            .env("ARCHMAX_SERVE_TOKEN", short)
            .output()
            .expect("archmax serve runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{short:?} refuses the start: {stderr}");
        assert!(stderr.contains("ARCHMAX_SERVE_TOKEN") && stderr.contains("at least 16"), "{stderr}");
    }
}

/// One request over a fresh connection with the headers in `head` (each ending in CRLF):
/// the status and the whole answer.
fn raw_request(served: &Served, method: &str, path: &str, head: &str, body: &str) -> (u16, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(&served.address).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).expect("a read timeout");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {}\r\n{head}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        served.address,
        body.len()
    )
    .expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let status = answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, answer)
}

/// Signs in to the inbox with `token`, the request forwarded for `client`: the status.
fn sign_in_forwarded_for(served: &Served, token: &str, client: &str) -> u16 {
    let (status, form) = raw_request(served, "GET", "/sign-in", "", "");
    assert_eq!(status, 200, "{form}");
    let cookie = form
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: archmax_sign_in="))
        .and_then(|value| value.split(';').next())
        .expect("a sign-in cookie");
    let marker = r#"name="csrf" value=""#;
    let csrf = form.split(marker).nth(1).and_then(|rest| rest.split('"').next()).expect("a CSRF token");
    let head = format!(
        "cookie: archmax_sign_in={cookie}\r\nx-forwarded-for: {client}\r\ncontent-type: application/x-www-form-urlencoded\r\n"
    );
    raw_request(served, "POST", "/sign-in", &head, &format!("csrf={csrf}&token={token}")).0
}

#[test]
fn serve_trusted_proxy_counts_failed_sign_ins_per_forwarded_client_and_refuses_a_value_that_is_no_address() {
    let workspace = Workspace::new("trusted-proxy");
    let token = "a-serve-token-of-32-characters-0";
    let mut served = workspace.serve(&["--trusted-proxy", "127.0.0.1"], &[("ARCHMAX_SERVE_TOKEN", token)]);
    for attempt in 1..=10 {
        assert_eq!(sign_in_forwarded_for(&served, "guessed-token", "198.51.100.7"), 401, "attempt {attempt}");
    }
    assert_eq!(sign_in_forwarded_for(&served, "guessed-token", "198.51.100.7"), 429);
    assert_eq!(sign_in_forwarded_for(&served, token, "198.51.100.8"), 303, "another client through the proxy");
    assert!(served.is_running());
    assert_eq!(served.stop(), Some(0));

    let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml", "--trusted-proxy", "proxy.example"])
        .current_dir(&workspace.0)
        .env("NO_COLOR", "1")
        .output()
        .expect("archmax serve runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--trusted-proxy") && stderr.contains("proxy.example"), "{stderr}");
}
