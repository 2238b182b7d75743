//! The scope phase, and a flow step's whole decision ([`decide_scoped_call`]), as tables
//! of calls and the rules that decide them.

use serde_json::{Value, json};

use super::*;
use crate::kernel::{Rule, ScopedCall, ScopedPolicy, Verdict, decide_scoped_call};

const FILE_TOOLS: [&str; 9] =
    ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "copy_file", "move_file", "remove_file"];
const OTHER_TOOLS: [&str; 2] = ["run", "answer"];

fn scope(rules: &[&str]) -> WriteScope {
    WriteScope::parse_all(rules).unwrap_or_else(|error| panic!("{error}"))
}

fn policy<'a>(run: Option<&'a WriteScope>, node: Option<&'a WriteScope>) -> ScopedPolicy<'a> {
    ScopedPolicy {
        file_tools: &FILE_TOOLS,
        other_tools: &OTHER_TOOLS,
        records: Some("sessions"),
        scopes: ScopeStack { run, node },
    }
}

fn decide(policy: &ScopedPolicy<'_>, tool: &str, args: Value) -> Verdict {
    decide_scoped_call(policy, &ScopedCall { tool, args: &args })
}

fn write(path: &str) -> Value {
    json!({ "file_path": path, "content": "x" })
}

/// Each row: the tool, its arguments, and the rule that decides it.
fn check(policy: &ScopedPolicy<'_>, rows: &[(&str, Value, Rule)]) {
    let mut failures = Vec::new();
    for (index, (tool, args, rule)) in rows.iter().enumerate() {
        let verdict = decide(policy, tool, args.clone());
        if verdict.rule != *rule || verdict.allowed != rule.allows() {
            failures
                .push(format!("row {index}: {tool} {args} → {} ({}), expected {rule}", verdict.rule, verdict.reason));
        }
        assert!(!verdict.reason.starts_with("[workflow]"), "row {index}: a flow step's words: {}", verdict.reason);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_first_matching_rule_decides_in_the_order_written() {
    let deny_first = scope(&[".internal/**=denied", "**=allowed"]);
    let allow_first = scope(&["**=allowed", ".internal/**=denied"]);
    check(
        &policy(Some(&deny_first), None),
        &[
            ("write_file", write(".internal/notes.md"), Rule::ScopeDenied),
            ("write_file", write("src/lib.rs"), Rule::ToolAllowed),
        ],
    );
    check(&policy(Some(&allow_first), None), &[("write_file", write(".internal/notes.md"), Rule::ToolAllowed)]);
}

#[test]
fn partial_only_lets_an_edit_through_and_no_other_write() {
    let partial = scope(&["docs/**=partial-only", "secrets/**=denied"]);
    let edit = |path: &str| json!({ "file_path": path, "old_string": "a", "new_string": "b" });
    check(
        &policy(Some(&partial), None),
        &[
            ("edit_file", edit("docs/a.md"), Rule::ToolAllowed),
            ("write_file", write("docs/a.md"), Rule::ScopePartialOnly),
            ("remove_file", json!({ "file_path": "docs/a.md" }), Rule::ScopePartialOnly),
            ("copy_file", json!({ "source": "notes.md", "destination": "docs/a.md" }), Rule::ScopePartialOnly),
            // A move removes its source: partial-only refuses that too.
            ("move_file", json!({ "source": "docs/a.md", "destination": "docs/b.md" }), Rule::ScopePartialOnly),
            ("edit_file", edit("secrets/key"), Rule::ScopeDenied),
            // Reads are not a scope's to decide.
            ("read_file", json!({ "file_path": "secrets/key" }), Rule::ToolAllowed),
        ],
    );
}

#[test]
fn a_path_no_rule_matches_is_denied() {
    let notes = scope(&["notes/**=allowed"]);
    check(
        &policy(None, Some(&notes)),
        &[
            ("write_file", write("src/other.rs"), Rule::ScopeUnmatched),
            (
                "edit_file",
                json!({ "file_path": "src/a.rs", "old_string": "a", "new_string": "b" }),
                Rule::ScopeUnmatched,
            ),
            ("write_file", write("notes/today.md"), Rule::ToolAllowed),
        ],
    );
}

#[test]
fn a_node_can_only_narrow_the_run() {
    let run = scope(&["src/**=denied", "**=allowed"]);
    let wide = scope(&["**=allowed"]);
    let narrow = scope(&["notes.md=denied", "**=allowed"]);
    let widened = policy(Some(&run), Some(&wide));
    let verdict = decide(&widened, "write_file", write("src/main.rs"));
    assert_eq!(verdict.rule, Rule::ScopeDenied, "the node's `allowed` does not lift the run's `denied`");
    assert_eq!(
        verdict.reason,
        "The run's write scope refuses `src/main.rs`: the rule `src/**=denied` refuses writing the whole file."
    );
    let narrowed = policy(Some(&run), Some(&narrow));
    let verdict = decide(&narrowed, "write_file", write("notes.md"));
    assert_eq!(
        (verdict.rule, verdict.reason.as_str()),
        (
            Rule::ScopeDenied,
            "This step's write scope refuses `notes.md`: the rule `notes.md=denied` refuses writing the whole file."
        )
    );
    check(&narrowed, &[("write_file", write("docs.md"), Rule::ToolAllowed)]);
    // With no scope at all, a step writes anywhere in the workspace but the records.
    check(&policy(None, None), &[("write_file", write("src/main.rs"), Rule::ToolAllowed)]);
}

#[test]
fn a_scope_judges_the_path_as_the_file_tools_resolve_it() {
    let scope = scope(&["src/**=denied", "**=allowed"]);
    check(
        &policy(Some(&scope), None),
        &[
            ("write_file", write("docs/../src/main.rs"), Rule::ScopeDenied),
            ("write_file", write("./src//main.rs"), Rule::ScopeDenied),
            ("move_file", json!({ "source": "a/../b.md", "destination": "c/./src/d.md" }), Rule::ToolAllowed),
        ],
    );
}

#[test]
fn safety_beats_every_scope() {
    let open = scope(&["**=allowed"]);
    let policy = policy(Some(&open), Some(&open));
    check(
        &policy,
        &[
            ("write_file", write("../outside.txt"), Rule::ZoneEscape),
            ("write_file", write("/x/../../outside.txt"), Rule::ZoneEscape),
            // An escape anywhere in the call beats the records, whichever argument it is.
            ("copy_file", json!({ "source": "sessions/a", "destination": "../b" }), Rule::ZoneEscape),
            ("read_file", json!({ "file_path": "../secret.txt" }), Rule::ZoneEscape),
            ("write_file", write("sessions/forged.json"), Rule::ZoneRuntimeInternal),
            ("write_file", write("/x/../Sessions/forged.json"), Rule::ZoneRuntimeInternal),
            ("read_file", json!({ "file_path": "sessions/run.root.1/log" }), Rule::ZoneRuntimeInternal),
            ("ls", json!({ "path": "sessions" }), Rule::ZoneRuntimeInternal),
            ("write_file", write("sessions-old/notes.md"), Rule::ToolAllowed),
            ("write_file", json!({ "file_path": 42, "content": "x" }), Rule::ToolPathArgument),
        ],
    );
    let escape = decide(&policy, "write_file", write("../outside.txt"));
    assert_eq!(escape.reason, "`../outside.txt` leads out of the workspace; no step writes there.");
    let read = decide(&policy, "read_file", json!({ "file_path": "../secret.txt" }));
    assert_eq!(read.reason, "`../secret.txt` leads out of the workspace; no step reads there.");
    let records = decide(&policy, "write_file", write("sessions/forged.json"));
    assert_eq!(records.reason, "`sessions/forged.json` holds the flow's own records; no step writes there.");
    assert!(!policy.shows("sessions/run.root.1/log") && !policy.shows("SESSIONS") && policy.shows("src/main.rs"));
}

#[test]
fn the_seal_key_and_the_settings_are_out_of_every_steps_reach() {
    // Whatever the scopes say: the key proves every session's log, and the settings
    // route the next run's model calls.
    let open = scope(&["**=allowed"]);
    let policy = policy(Some(&open), None);
    check(
        &policy,
        &[
            ("read_file", json!({ "file_path": ".archmax/seal.key" }), Rule::ZoneRuntimeInternal),
            ("read_file", json!({ "file_path": "src/../.ARCHMAX/seal.key" }), Rule::ZoneRuntimeInternal),
            ("write_file", write(".archmax/seal.key"), Rule::ZoneRuntimeInternal),
            ("ls", json!({ "path": ".archmax" }), Rule::ZoneRuntimeInternal),
            (
                "copy_file",
                json!({ "source": ".archmax/seal.key", "destination": "key.txt" }),
                Rule::ZoneRuntimeInternal,
            ),
            ("write_file", write("archmax.toml"), Rule::ZoneRuntimeInternal),
            ("read_file", json!({ "file_path": "archmax.toml" }), Rule::ZoneRuntimeInternal),
            ("write_file", write("docs/archmax.toml"), Rule::ToolAllowed),
            ("write_file", write(".archmaxrc"), Rule::ToolAllowed),
        ],
    );
    let key = decide(&policy, "read_file", json!({ "file_path": ".archmax/seal.key" }));
    assert_eq!(
        key.reason,
        "`.archmax/seal.key` is archmax's own (the workspace's seal key and settings); no step reads there."
    );
    assert!(!policy.shows(".archmax/seal.key") && !policy.shows("archmax.toml") && policy.shows("docs/archmax.toml"));
}

#[test]
fn the_step_tools_are_its_only_names_and_the_pathless_ones_name_no_path() {
    let closed = scope(&["**=denied"]);
    check(
        &policy(Some(&closed), None),
        &[
            ("fetch_url", json!({}), Rule::ToolUnknown),
            // `run` and `answer` name no path: a `file_path` beside their arguments is not one.
            ("run", json!({ "command": ["cargo", "test"], "file_path": "../x" }), Rule::ToolAllowed),
            ("answer", json!({ "outcome": "passed" }), Rule::ToolAllowed),
            ("ls", json!({}), Rule::ToolAllowed),
        ],
    );
    let unknown = decide(&policy(None, None), "fetch_url", json!({}));
    assert_eq!(unknown.reason, "`fetch_url` is not a tool of this step");
}

#[test]
fn unreadable_rules_are_named() {
    for (text, words) in [
        ("src/**", "has no `=`"),
        ("src/**=forbidden", "not one of"),
        ("=allowed", "empty glob"),
        ("src/**=allow", "(did you mean `allowed`?)"),
        ("src/**=partial", "(did you mean `partial-only`?)"),
        ("src/**=deny", "(did you mean `denied`?)"),
    ] {
        let error = ScopeRule::parse(text).err().map(|error| error.0).unwrap_or_default();
        assert!(error.contains(words), "{text}: {error}");
    }
    let far = ScopeRule::parse("src/**=forbidden").err().map(|error| error.0).unwrap_or_default();
    assert!(!far.contains("did you mean"), "no guess for a word close to none: {far}");
}

#[test]
fn a_step_is_told_its_scope_in_the_words_of_the_run() {
    let scope = scope(&["notes/**=allowed"]);
    assert!(scope.describe(ScopeOwner::Node).starts_with("This step's write scope, first matching rule wins"));
    assert!(scope.describe(ScopeOwner::Run).starts_with("The run's write scope"));
}
