//! `archmax lsp` driven by a real JSON-RPC client over pipes: `Content-Length` frames
//! written and read here, against the built binary. Waits are bounded by a generous
//! timeout only so a broken server fails the test instead of hanging it.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::scratch;

const WAIT: Duration = Duration::from_secs(60);

const WORKFLOW: &str = "title: Desk
instructions: Help the customer.
skills:
  allow_always: [order-data]
states:
  intake:
    title: Take the request
    triggers:
      manual:
        description: Start a request.
        requires:
          - { name: order_id, type: string }
    instructions: Look up ${{order_id}}.
    transitions:
      - to: chek
        description: The request is clear.
  check:
    type: code
    script: scripts/check.js
    transitions:
      - to: reply
        description: Checked.
  reply:
    title: Reply
    instructions: Answer the customer.
";

const SCRIPT: &str = "/** Check */\nexport default async function ({ tools }) {\n  await tools.archmax_advance({ to: \"reply\", reason: \"ok\" });\n}\n";

const TAPE: &str = "- state: intake\n  tool_calls:\n    - { name: archmax_advance, args: { to: check, reason: clear } }\n- state: reply\n  text: Done.\n";

fn workspace(label: &str) -> PathBuf {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("workflows/desk/scripts")).expect("workflow dir");
    fs::create_dir_all(root.join("skills/order-data")).expect("skill dir");
    // The disk copy is valid: the server must check the editor's text, not this one.
    fs::write(root.join("workflows/desk/workflow.yaml"), WORKFLOW.replace("to: chek", "to: check")).expect("spec");
    fs::write(root.join("workflows/desk/scripts/check.js"), SCRIPT).expect("script");
    fs::create_dir_all(root.join("workflows/desk/tests")).expect("tests dir");
    fs::write(
        root.join("workflows/desk/tests/checked.test.yaml"),
        "title: Checked\ndescription: The request is checked.\nsteps:\n  - send: Order ORD-1\n  - reachedState: check\n",
    )
    .expect("case");
    fs::write(root.join("workflows/desk/tests/checked.tape.yaml"), TAPE).expect("tape");
    fs::write(root.join("skills/order-data/SKILL.md"), "---\nname: order-data\ndescription: Orders.\n---\nOrders.\n")
        .expect("skill");
    fs::canonicalize(&root).expect("root")
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A client speaking to one server process.
struct Client {
    child: Child,
    stdin: ChildStdin,
    frames: Receiver<Value>,
    next_id: i64,
}

impl Client {
    fn start(root: &Path) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_archmax"))
            .arg("lsp")
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("archmax lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, frames) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(frame) = read_frame(&mut reader) {
                if sender.send(frame).is_err() {
                    break;
                }
            }
        });
        Client { child, stdin, frames, next_id: 1 }
    }

    fn write_raw(&mut self, body: &str) {
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write frame");
        self.stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.write_raw(&json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string());
    }

    /// Sends a request and returns its response (skipping notifications meanwhile).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.write_raw(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string());
        self.wait_for(|frame| frame["id"] == id && frame.get("method").is_none())
    }

    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.frames.recv_timeout(WAIT).expect("the server answers in time");
            if wanted(&frame) {
                return frame;
            }
        }
    }

    /// The next diagnostics published for `uri`.
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let frame = self
            .wait_for(|frame| frame["method"] == "textDocument/publishDiagnostics" && frame["params"]["uri"] == uri);
        frame["params"]["diagnostics"].as_array().cloned().unwrap_or_default()
    }

    fn initialize(&mut self, root: &Path) -> Value {
        let response = self.request(
            "initialize",
            json!({ "processId": null, "rootUri": uri(root), "capabilities": {}, "workspaceFolders": [{ "uri": uri(root), "name": "desk" }] }),
        );
        self.notify("initialized", json!({}));
        response
    }

    fn finish(mut self) -> i32 {
        let response = self.request("shutdown", Value::Null);
        assert_eq!(response["result"], Value::Null, "{response}");
        self.notify("exit", Value::Null);
        let status = self.child.wait().expect("the server exits");
        status.code().unwrap_or(-1)
    }
}

fn read_frame(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn position(line: u32, character: u32) -> Value {
    json!({ "line": line, "character": character })
}

fn at(uri: &str, line: u32, character: u32) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": position(line, character) })
}

fn labels(response: &Value) -> Vec<String> {
    let items = response["result"]["items"].as_array().cloned().unwrap_or_default();
    items.iter().filter_map(|item| item["label"].as_str().map(String::from)).collect()
}

#[test]
fn the_language_server_checks_the_editors_text_and_answers_about_it() {
    let root = workspace("lsp");
    let spec = root.join("workflows/desk/workflow.yaml");
    let spec_uri = uri(&spec);
    let mut client = Client::start(&root);

    let initialized = client.initialize(&root);
    let capabilities = &initialized["result"]["capabilities"];
    assert_eq!(capabilities["textDocumentSync"]["change"], 2, "{initialized}");
    for capability in
        ["hoverProvider", "completionProvider", "definitionProvider", "documentSymbolProvider", "renameProvider"]
    {
        assert!(!capabilities[capability].is_null(), "{capability} is announced: {initialized}");
    }

    // The unsaved text has a typo in a transition target; the disk copy has none.
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": spec_uri, "languageId": "yaml", "version": 1, "text": WORKFLOW } }),
    );
    let diagnostics = client.diagnostics(&spec_uri);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let typo = &diagnostics[0];
    assert_eq!(typo["code"], "AMX0300");
    assert_eq!(typo["severity"], 1);
    assert_eq!(typo["source"], "archmax");
    assert_eq!(typo["range"], json!({ "start": position(14, 12), "end": position(14, 16) }));
    let message = typo["message"].as_str().unwrap_or("");
    assert!(message.contains("`chek` is not a state") && message.contains("help: did you mean `check`?"), "{message}");

    // Hover on the finding: its code's explanation.
    let hover = client.request("textDocument/hover", at(&spec_uri, 14, 14));
    let text = hover["result"]["contents"]["value"].as_str().unwrap_or("");
    assert!(text.starts_with("**AMX0300**"), "{hover}");

    // The fix, as an incremental edit: the diagnostics are cleared.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": spec_uri, "version": 2 },
                "contentChanges": [{ "range": { "start": position(14, 12), "end": position(14, 16) }, "text": "check" }] }),
    );
    assert_eq!(client.diagnostics(&spec_uri), Vec::<Value>::new());

    // Hover: a state reference shows the state's summary; a key its schema text.
    let hover = client.request("textDocument/hover", at(&spec_uri, 14, 14));
    let text = hover["result"]["contents"]["value"].as_str().unwrap_or("");
    assert!(text.contains("state `check`** (code)") && text.contains("→ `reply`"), "{hover}");
    let hover = client.request("textDocument/hover", at(&spec_uri, 17, 5));
    let text = hover["result"]["contents"]["value"].as_str().unwrap_or("");
    assert!(text.starts_with("**`type`**") && text.contains("`grader`"), "{hover}");

    // Completion: state names after `to:`, keys of a state, variables after `${{`.
    let completion = client.request("textDocument/completion", at(&spec_uri, 14, 14));
    assert_eq!(labels(&completion), ["intake", "check", "reply"], "{completion}");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": spec_uri, "version": 3 },
                "contentChanges": [{ "range": { "start": position(24, 0), "end": position(24, 0) }, "text": "    on\n" }] }),
    );
    let completion = client.request("textDocument/completion", at(&spec_uri, 24, 6));
    let keys = labels(&completion);
    assert!(keys.contains(&"on_error".to_string()) && !keys.contains(&"title".to_string()), "{keys:?}");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": spec_uri, "version": 4 },
                "contentChanges": [{ "range": { "start": position(24, 0), "end": position(25, 0) }, "text": "" }] }),
    );
    let completion = client.request("textDocument/completion", at(&spec_uri, 12, 29));
    assert!(labels(&completion).contains(&"order_id".to_string()), "{completion}");

    // Tool names in a tools list; a code's explanation on hover.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": spec_uri, "version": 5 },
                "contentChanges": [{ "range": { "start": position(24, 0), "end": position(24, 0) },
                                     "text": "    tools:\n      allow: [re]\n# AMX0300\n" }] }),
    );
    let tools = labels(&client.request("textDocument/completion", at(&spec_uri, 25, 16)));
    assert!(
        tools.contains(&"read_file".to_string()) && tools.contains(&"archmax_workflow_desk".to_string()),
        "{tools:?}"
    );
    assert_eq!(labels(&client.request("textDocument/completion", at(&spec_uri, 3, 18))), ["order-data"]);
    let hover = client.request("textDocument/hover", at(&spec_uri, 26, 4));
    let text = hover["result"]["contents"]["value"].as_str().unwrap_or("");
    assert!(text.starts_with("**AMX0300**") && text.len() > 100, "{hover}");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": spec_uri, "version": 6 },
                "contentChanges": [{ "range": { "start": position(24, 0), "end": position(27, 0) }, "text": "" }] }),
    );

    // A script of the workflow: its unsaved text is checked and its file gets the finding.
    let script_uri = uri(&root.join("workflows/desk/scripts/check.js"));
    let broken = SCRIPT.replace("\"reply\", reason", "\"reply\" reason");
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": script_uri, "languageId": "javascript", "version": 1, "text": broken } }),
    );
    let script = client.diagnostics(&script_uri);
    assert_eq!(script.len(), 1, "{script:?}");
    assert_eq!(script[0]["code"], "AMX0219", "{script:?}");
    assert_eq!(script[0]["range"]["start"]["line"], 2, "{script:?}");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": script_uri, "version": 2 }, "contentChanges": [{ "text": SCRIPT }] }),
    );
    assert_eq!(client.diagnostics(&script_uri), Vec::<Value>::new());

    // Definition: a reference to its state, a script to its file, a skill to SKILL.md.
    let definition = client.request("textDocument/definition", at(&spec_uri, 20, 13));
    assert_eq!(definition["result"]["uri"], spec_uri.as_str());
    assert_eq!(definition["result"]["range"]["start"], position(22, 2), "{definition}");
    let definition = client.request("textDocument/definition", at(&spec_uri, 18, 16));
    assert_eq!(definition["result"]["uri"], uri(&root.join("workflows/desk/scripts/check.js")), "{definition}");
    let definition = client.request("textDocument/definition", at(&spec_uri, 3, 20));
    assert_eq!(definition["result"]["uri"], uri(&root.join("skills/order-data/SKILL.md")), "{definition}");

    // Symbols: the states, with the trigger under its state.
    let symbols = client.request("textDocument/documentSymbol", json!({ "textDocument": { "uri": spec_uri } }));
    let states = symbols["result"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = states.iter().filter_map(|symbol| symbol["name"].as_str()).collect();
    assert_eq!(names, ["intake", "check", "reply"], "{symbols}");
    assert_eq!(states[0]["children"][0]["name"], "manual", "{symbols}");

    // Rename: the key and every reference, exactly; a taken name is refused.
    let rename = client.request(
        "textDocument/rename",
        json!({ "textDocument": { "uri": spec_uri }, "position": position(16, 3), "newName": "verify" }),
    );
    let edits = rename["result"]["changes"][spec_uri.as_str()].as_array().cloned().unwrap_or_default();
    let mut ranges: Vec<Value> = edits.iter().map(|edit| edit["range"]["start"].clone()).collect();
    ranges.sort_by_key(|start| (start["line"].as_u64(), start["character"].as_u64()));
    assert_eq!(ranges, [position(14, 12), position(16, 2)], "{rename}");
    assert!(edits.iter().all(|edit| edit["newText"] == "verify"), "{rename}");
    let case_uri = uri(&root.join("workflows/desk/tests/checked.test.yaml"));
    let case = rename["result"]["changes"][case_uri.as_str()].as_array().cloned().unwrap_or_default();
    assert_eq!(case.len(), 1, "{rename}");
    assert_eq!(case[0]["range"], json!({ "start": position(4, 18), "end": position(4, 23) }), "{rename}");
    let tape_uri = uri(&root.join("workflows/desk/tests/checked.tape.yaml"));
    let tape = rename["result"]["changes"][tape_uri.as_str()].as_array().cloned().unwrap_or_default();
    assert_eq!(tape.len(), 1, "the tape's advance is renamed too: {rename}");
    assert_eq!(tape[0]["range"], json!({ "start": position(2, 43), "end": position(2, 48) }), "{rename}");
    let refused = client.request(
        "textDocument/rename",
        json!({ "textDocument": { "uri": spec_uri }, "position": position(16, 3), "newName": "reply" }),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    assert_eq!(client.finish(), 0);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn bad_input_gets_protocol_errors_and_the_server_goes_on() {
    let root = workspace("lsp-bad");
    let mut client = Client::start(&root);
    let early = client.request("textDocument/hover", at("file:///nowhere.yaml", 0, 0));
    assert_eq!(early["error"]["code"], -32002, "{early}");
    client.initialize(&root);

    client.write_raw("{not json");
    let parse = client.wait_for(|frame| frame.get("error").is_some());
    assert_eq!((parse["id"].clone(), parse["error"]["code"].clone()), (Value::Null, json!(-32700)), "{parse}");
    client.write_raw(r#"{"jsonrpc":"2.0","id":[1]}"#);
    let invalid = client.wait_for(|frame| frame.get("error").is_some());
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");

    let unknown = client.request("textDocument/unheardOf", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let spec_uri = uri(&root.join("workflows/desk/workflow.yaml"));
    let past = client.request("textDocument/hover", at(&spec_uri, 999, 0));
    assert_eq!(past["error"]["code"], -32602, "{past}");
    let outside = client.request("textDocument/hover", at("file:///etc/hostname", 0, 0));
    assert_eq!(outside["error"]["code"], -32602, "{outside}");
    let garbled = client.request("textDocument/hover", json!({ "position": "here" }));
    assert_eq!(garbled["error"]["code"], -32602, "{garbled}");

    assert_eq!(client.finish(), 0);
    let _ = fs::remove_dir_all(&root);
}

/// `archmax lsp` in `root` with every stream piped, for the tests of a misbehaving client.
fn spawn_bare(root: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_archmax"))
        .arg("lsp")
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("archmax lsp starts")
}

/// Waits (bounded by [`WAIT`], a hang guard only) for `child` to exit.
fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    let began = std::time::Instant::now();
    while began.elapsed() < WAIT {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("archmax lsp did not exit");
}

#[test]
fn a_client_that_closed_its_end_ends_the_server_with_an_error_not_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let root = workspace("lsp-closed-client");
    let mut child = spawn_bare(&root);
    // The client stops reading before it asks anything: the answer meets a closed pipe.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().expect("stdin");
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "processId": null, "capabilities": {} } })
        .to_string();
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write frame");
    stdin.flush().expect("flush");
    let status = exit_of(&mut child);
    assert_eq!(status.signal(), None, "killed by a signal ({status}); SIGPIPE must be ignored");
    assert_eq!(status.code(), Some(1), "{status}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_header_line_that_never_ends_stops_the_server_after_the_bound_and_says_why() {
    use std::io::Read;
    let root = workspace("lsp-endless-header");
    let mut child = spawn_bare(&root);
    let mut stdin = child.stdin.take().expect("stdin");
    // Far more than the bound, with no newline; the pipe stays open, so only the bound
    // can end the read. A write fails once the server has stopped reading: that is fine.
    let chunk = [b'X'; 4096];
    for _ in 0..64 {
        if stdin.write_all(&chunk).is_err() {
            break;
        }
    }
    let status = exit_of(&mut child);
    assert_eq!(status.code(), Some(1), "{status}");
    let mut said = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut said).expect("stderr");
    assert!(said.contains("header block is longer than 8192 bytes"), "{said}");
    drop(stdin);
    let _ = fs::remove_dir_all(&root);
}
