//! Arguments and the hints the command line gives: usage errors that name what is
//! missing and suggest what was meant, `--deny-warnings`, and a live run refused before
//! any session exists when no model is configured.

use std::fs;

use crate::support::{archmax, repository, scratch};

/// Runs a usage error and returns its one line on stderr (exit 2, nothing on stdout).
fn usage_line(args: &[&str]) -> String {
    refusal_line(args, 2)
}

/// Runs a refused command line and returns its one line on stderr (exit `code`,
/// nothing on stdout).
fn refusal_line(args: &[&str], code: i32) -> String {
    let run = archmax(&repository(), args);
    assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
    assert_eq!(run.stdout, "", "{args:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
    run.stderr
}

#[test]
fn a_missing_argument_is_named() {
    let line = usage_line(&["decide", "s1"]);
    assert!(line.contains("`--to <STATE>`"), "{line}");
    assert!(line.ends_with("try `archmax decide --help`\n"), "{line}");
    for (args, named) in [
        (&["run"][..], &["`<WORKFLOW>`", "`<PROMPT>...`"][..]),
        (&["deliver", "s1"], &["`--trigger <ID>`"]),
        (&["explain"], &["`<CODE>`"]),
        (&["keygen"], &["`--output <KEYFILE>`"]),
    ] {
        let line = usage_line(args);
        for name in named {
            assert!(line.contains(name), "{args:?} names {name}: {line}");
        }
        assert!(!line.contains("not provided:;"), "{line}");
    }
}

/// Runs a refused `archmax flow` command line: one line on stderr, exit 1 (2 is a walk
/// that finished unclean), nothing on stdout.
fn flow_usage_line(args: &[&str]) -> String {
    refusal_line(args, 1)
}

#[test]
fn a_refused_flow_command_line_exits_1_and_names_what_is_missing() {
    let line = flow_usage_line(&["flow", "run"]);
    assert!(line.contains("`--input <TEXT>`") && line.contains("`--flow <FILE>` (or `FLOW`)"), "{line}");
    assert!(line.contains("try `archmax flow run --help`"), "the nested command's help: {line}");
    let line = flow_usage_line(&["flow", "plan", "--flow", "a.yaml", "b.yaml"]);
    assert!(line.contains("'--flow <FILE>' cannot be used with '[FLOW]'; give only one of them"), "{line}");
    let line = flow_usage_line(&["flow", "run", "--flow", "a.yaml", "--input", "x", "--no-such-flag"]);
    assert!(line.contains("unexpected argument '--no-such-flag'"), "{line}");
    let line = flow_usage_line(&["flow", "rn"]);
    assert!(line.contains("did you mean `run`?"), "{line}");
    // `archmax flow` alone prints its help as a refusal: exit 1 too.
    let run = archmax(&repository(), &["flow"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("Usage: archmax flow"), "{}", run.stderr);
    // A flag's value that spells `flow` is not the flow command: exit 2, validate's help.
    let line = usage_line(&["--root", "flow", "validate", "--frmat", "json"]);
    assert!(line.contains("try `archmax validate --help`"), "{line}");
}

#[test]
fn mistyped_subcommands_and_flags_get_did_you_mean() {
    let line = usage_line(&["valdate"]);
    assert!(line.contains("did you mean `validate`?"), "{line}");
    let line = usage_line(&["validate", "--formt", "json"]);
    assert!(line.contains("did you mean `--format`?"), "{line}");
    let line = usage_line(&["sessions", "--stauts", "failed"]);
    assert!(line.contains("did you mean `--status`?"), "{line}");
    // Slips clap's own similarity misses are caught by edit distance, for every command.
    let line = usage_line(&["lp"]);
    assert!(line.contains("did you mean `lsp`?"), "{line}");
    let line = usage_line(&["validate", "--frmat", "json"]);
    assert!(line.contains("did you mean `--format`?"), "{line}");
}

#[test]
fn a_wrong_or_missing_value_lists_the_values() {
    for args in [vec!["graph", "--format", "svg"], vec!["graph", "--format"]] {
        let line = usage_line(&args);
        assert!(line.contains("mermaid, dot, json"), "{args:?}: {line}");
        assert!(line.contains("try `archmax graph --help`"), "{args:?}: {line}");
    }
    let line = usage_line(&["validate", "--format", "jsn"]);
    assert!(line.contains("(did you mean `json`?)") && line.contains("human, json, sarif, github"), "{line}");
}

/// A workspace whose one workflow has a warning (no top-level instructions) and one
/// skipped case, which runs with no model and no tape.
fn warned_workspace(label: &str) -> std::path::PathBuf {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    let tests = root.join("workflows/orders/tests");
    fs::create_dir_all(&tests).expect("scratch workspace");
    fs::write(
        root.join("workflows/orders/workflow.yaml"),
        "states:\n  answer:\n    triggers:\n      manual:\n    instructions: Answer the question.\n",
    )
    .expect("workflow");
    fs::write(
        tests.join("later.test.yaml"),
        "title: Later\ndescription: Not written yet.\nskip: not yet\nsteps:\n  - send: Hello\n  - succeeded: true\n",
    )
    .expect("case");
    root
}

#[test]
fn deny_warnings_fails_validate_build_and_test_and_says_why() {
    let root = warned_workspace("deny-warnings");
    let artifact = root.join("out.amx");
    let artifact_arg = artifact.to_string_lossy().into_owned();

    let run = archmax(&root, &["validate"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = archmax(&root, &["validate", "--deny-warnings"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "valid — 0 error(s), 1 warning(s)\n");
    assert!(run.stderr.contains("AMX0108"), "{}", run.stderr);
    assert!(run.stderr.contains("1 warning and --deny-warnings was given"), "{}", run.stderr);

    let run = archmax(&root, &["build", "--deny-warnings", "-o", &artifact_arg]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("AMX0108"), "the warning is shown: {}", run.stderr);
    assert!(run.stderr.contains("--deny-warnings") && run.stderr.contains("nothing was built"), "{}", run.stderr);
    assert!(!artifact.exists(), "no artifact is written");
    let run = archmax(&root, &["build", "-o", &artifact_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(artifact.exists());

    let run = archmax(&root, &["test", "orders", "--deny-warnings"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("AMX0108") && run.stderr.contains("--deny-warnings"), "{}", run.stderr);
    let run = archmax(&root, &["test", "orders"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "0 passed, 0 failed, 1 skipped\n");
    fs::remove_dir_all(&root).ok();
}

#[test]
fn a_live_run_without_a_model_is_refused_before_any_session_exists() {
    let root = warned_workspace("no-model");
    // An endpoint is configured (never reached), but no model: the state names none,
    // there is no settings.model, and ARCHMAX_MODEL is unset.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["run", "orders", "Where is my order?", "--session", "s1"])
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_API_BASE_URL", "http://127.0.0.1:9/v1")
        .env("ARCHMAX_API_KEY", "unused")
        .env_remove("ARCHMAX_MODEL")
        .env_remove("ARCHMAX_STORE")
        .output()
        .expect("the archmax binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no model is configured for state `answer` of workflow `orders`"), "{stderr}");
    assert!(stderr.contains("ARCHMAX_MODEL"), "says what to set: {stderr}");
    let sessions = archmax(&root, &["sessions", "--json"]);
    assert!(!sessions.stdout.contains("\"s1\""), "no session was created: {}", sessions.stdout);
    assert!(!root.join("sessions/s1").exists(), "no session folder was left behind");
    fs::remove_dir_all(&root).ok();
}
