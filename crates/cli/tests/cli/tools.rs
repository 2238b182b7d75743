//! `archmax tools` and the host tool configuration through the binary: plain `validate`
//! reports a bad `[mcp_servers]` table at its line, `tools --json` lists the carrier server's tools and names the granted host
//! tools no server provides, and `validate --tools` fails on them and on variables a
//! server needs that are not set.

use std::fs;
use std::path::PathBuf;

use crate::support::{archmax, repository, scratch};

const WORKFLOW: &str = "instructions: Tell the customer their order shipped.\nstates:\n  send:\n    triggers:\n      manual:\n    instructions: Send one short email.\n    tools:\n      allow:\n        - mail__send_email\n";

/// A workspace of one workflow granting `mail__send_email`, with `settings` as its archmax.toml.
fn workspace(label: &str, settings: &str) -> PathBuf {
    let root = scratch(&format!("tools-{label}"));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("workflows/notify")).expect("scratch workspace");
    fs::write(root.join("workflows/notify/workflow.yaml"), WORKFLOW).expect("workflow");
    fs::write(root.join("archmax.toml"), settings).expect("archmax.toml");
    root
}

#[test]
fn validate_reports_a_bad_server_table_at_its_line() {
    let root =
        workspace("bad-table", "# servers\n[mcp_servers.mail]\ncommand = \"mail-mcp\"\nurl = \"https://mail/mcp\"\n");
    let run = archmax(&root, &["validate"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("MCP server `mail` has both a `command` and a `url`"), "{}", run.stderr);
    assert!(run.stderr.contains("archmax.toml:4:1"), "the url's line: {}", run.stderr);
    assert!(run.stdout.contains("invalid — 1 error(s)"), "{}", run.stdout);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn tools_json_lists_the_servers_tools_and_the_granted_tools_no_server_provides() {
    let run = archmax(&repository(), &["tools", "--root", "specs", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let document: serde_json::Value = serde_json::from_str(&run.stdout).expect("tools --json prints JSON");
    // The shipped carrier server is started and lists its tools, with who grants them.
    let tools = document["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
    assert_eq!(names, ["carrier__quote_shipping", "carrier__track_parcel"], "{document}");
    let track = &tools[1];
    assert_eq!(track["server"], "carrier");
    assert_eq!(
        track["granted_in"],
        serde_json::json!([{ "workflow": "order-status", "state": "watch-shipment", "by": "allow" }])
    );
    assert_eq!(track["input_schema"]["required"], serde_json::json!(["tracking_number"]));
    let send_email = document["not_provided"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|missing| missing["name"] == "send_email")
        .unwrap_or_else(|| panic!("send_email is not provided: {document}"));
    assert_eq!(
        send_email["granted_in"],
        serde_json::json!([{ "workflow": "refund-desk", "state": "send", "by": "allow" }])
    );
    assert_eq!(send_email["essential"], false);
    assert_eq!(send_email["candidates"], serde_json::json!([]));
    assert_eq!(document["problems"], serde_json::json!([]));
}

#[test]
fn validate_with_tools_fails_where_plain_validate_passes() {
    let plain = archmax(&repository(), &["validate", "--root", "specs"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let checked = archmax(&repository(), &["validate", "--root", "specs", "--tools"]);
    assert_eq!(checked.code, 1, "{}", checked.stderr);
    assert!(checked.stderr.contains("AMX0617"), "{}", checked.stderr);
    assert!(
        checked.stderr.contains("`send_email` is granted in state `send` but no MCP server provides it"),
        "{}",
        checked.stderr
    );
    assert!(checked.stderr.contains("workflows/refund-desk/workflow.yaml:"), "{}", checked.stderr);
}

#[test]
fn a_variable_a_server_needs_is_checked_only_when_the_servers_are_asked() {
    let variable = "ARCHMAX_TEST_TOOLS_NEVER_SET";
    let root = workspace(
        "unset-variable",
        &format!("[mcp_servers.mail]\ncommand = \"mail-mcp\"\nenv_vars = [\"{variable}\"]\n"),
    );
    let plain = archmax(&root, &["validate"]);
    assert_eq!(plain.code, 0, "plain validate stays offline: {}", plain.stderr);
    let checked = archmax(&root, &["validate", "--tools", "--format", "json"]);
    assert_eq!(checked.code, 1, "{}", checked.stderr);
    let document: serde_json::Value = serde_json::from_str(&checked.stdout).expect("validate prints JSON");
    let found = &document["workflows"][0]["diagnostics"][0];
    let missing = format!("MCP server `mail` takes {variable} from the environment (`env_vars`), but it is not set");
    assert_eq!(found["message"], missing.as_str(), "{document}");
    assert_eq!(
        (&found["code"], &found["file"], &found["line"]),
        (&"AMX0011".into(), &"archmax.toml".into(), &1.into())
    );
    let listed = archmax(&root, &["tools"]);
    assert_eq!(listed.code, 1, "a problem fails the command after the report: {}", listed.stderr);
    assert!(listed.stdout.contains(&format!("problems:\n  {missing}\n")), "{}", listed.stdout);
    assert!(listed.stdout.contains("  mail__send_email: granted in notify/send (allow)\n"), "{}", listed.stdout);
    // A command that runs sessions is refused before anything runs, at the server's line.
    fs::write(root.join("tape.yaml"), "- state: send\n  text: Sent.\n").expect("tape");
    let run = archmax(&root, &["run", "notify", "Ship it.", "--tape", "tape.yaml"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("the MCP servers of `archmax.toml` cannot start:\n  archmax.toml:1:1: {missing}")),
        "{}",
        run.stderr
    );
    assert!(!root.join("sessions").exists(), "no session was started");
    let _ = fs::remove_dir_all(&root);
}
