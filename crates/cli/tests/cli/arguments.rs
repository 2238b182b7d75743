//! Arguments and the hints the command line gives: usage errors that name what is
//! missing, suggest what was meant and list the accepted values.

use crate::support::{archmax, repository};

/// Runs a usage error and returns its one line on stderr (exit 2, nothing on stdout).
fn usage_line(args: &[&str]) -> String {
    let run = archmax(&repository(), args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert_eq!(run.stdout, "", "{args:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
    run.stderr
}

#[test]
fn a_missing_argument_is_named() {
    let line = usage_line(&["decide", "s1"]);
    assert!(line.contains("`--to <STATE>`"), "{line}");
    assert!(line.ends_with("try `archmax decide --help`\n"), "{line}");
    let line = usage_line(&["flow", "run"]);
    assert!(!line.contains("not provided:;"), "{line}");
    assert!(line.contains("try `archmax flow run --help`"), "the nested command's help: {line}");
}

#[test]
fn mistyped_subcommands_and_flags_get_did_you_mean() {
    let line = usage_line(&["valdate"]);
    assert!(line.contains("did you mean `validate`?"), "{line}");
    let line = usage_line(&["validate", "--formt", "json"]);
    assert!(line.contains("did you mean `--format`?"), "{line}");
    let line = usage_line(&["sessions", "--stauts", "failed"]);
    assert!(line.contains("did you mean `--status`?"), "{line}");
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
