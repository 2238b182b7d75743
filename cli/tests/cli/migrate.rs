//! `archmax migrate` from the command line: `--dry-run`, `--diff`, the layout it keeps,
//! and the messages bad input gets. The full migration of a workspace is the golden
//! harness's `golden/migrate/` case.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{archmax, copy_dir, repository, scratch};

fn support_workspace(label: &str) -> PathBuf {
    let dir = scratch(label);
    let _ = fs::remove_dir_all(&dir);
    copy_dir(&repository().join("golden/migrate/support-v2/workspace"), &dir);
    dir
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in fs::read_dir(&next).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.clone(), fs::read(&path).expect("readable")));
            }
        }
    }
    out.sort();
    out
}

fn write(dir: &Path, path: &str, text: &str) {
    let target = dir.join(path);
    fs::create_dir_all(target.parent().expect("a parent")).expect("dirs");
    fs::write(target, text).expect("written");
}

#[test]
fn dry_run_reports_every_change_and_writes_nothing() {
    let dir = support_workspace("migrate-dry-run");
    let before = snapshot(&dir);
    let run = archmax(&dir, &["migrate", "--dry-run"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(snapshot(&dir), before, "a dry run changes no file");
    assert!(
        run.stdout.contains("workflows/order-desk/workflow.yaml:14:12: changed: `runtime.version` \"2\" → \"3\""),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("  would create workflows/order-desk/scripts/check-requester.js\n"), "{}", run.stdout);
    assert!(run.stdout.contains("  would remove workflows/order-desk/hooks/check-requester.js\n"), "{}", run.stdout);
    assert!(run.stdout.contains("follow-up: root `policy:` removed"), "{}", run.stdout);
    assert!(run.stdout.contains("(dry run: nothing written)"), "{}", run.stdout);
    // The same plan, written, matches what the dry run announced.
    let written = archmax(&dir, &["migrate"]);
    let announced: String = written
        .stdout
        .lines()
        .map(|line| {
            let line = line.replacen("  rewrote ", "  would rewrite ", 1).replacen("  created ", "  would create ", 1);
            let line = line.replacen("  removed workflows/", "  would remove workflows/", 1);
            format!("{}\n", line.replace(" files written", " files (dry run: nothing written)"))
        })
        .collect();
    assert_eq!(announced, run.stdout);
}

#[test]
fn diff_prints_a_unified_diff_of_each_file() {
    let dir = support_workspace("migrate-diff");
    let run = archmax(&dir, &["migrate", "order-desk", "--diff", "--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("--- a/workflows/order-desk/workflow.yaml\n+++ b/workflows/order-desk/workflow.yaml\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("\n-  version: \"2\"\n+  version: \"3\"\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("--- /dev/null\n+++ b/workflows/order-desk/scripts/check-refund.js\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("--- a/workflows/order-desk/hooks/check-refund.js\n+++ /dev/null\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("workflows/enrich-order/"), "only the named workflow is migrated");
}

#[test]
fn comments_and_layout_outside_the_rewrite_survive() {
    let dir = support_workspace("migrate-layout");
    let input = fs::read_to_string(dir.join("workflows/order-desk/workflow.yaml")).expect("input");
    let run = archmax(&dir, &["migrate"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let output = fs::read_to_string(dir.join("workflows/order-desk/workflow.yaml")).expect("output");
    // Every comment line survives byte for byte, in its order, but for the one inside
    // the `after` rubric, which is deleted with the hook it annotated.
    let inside_removed_hook = "          # `correct` may send the reply back twice before it is a veto.";
    assert!(input.contains(inside_removed_hook) && !output.contains(inside_removed_hook));
    let mut rest = output.lines();
    for comment in input.lines().filter(|line| line.trim_start().starts_with('#') && *line != inside_removed_hook) {
        assert!(rest.any(|line| line == comment), "`{comment}` is kept in order");
    }
    // Whole untouched states come out byte-identical.
    for block in [
        "  refund-review:\n    title: Review refund decision\n    type: human\n    evidence: [scratchpad/refund.json]\n",
        "      - { to: refund-closed, type: approve, description: The decision is right; close the case. }\n",
        "  escalation:\n    instructions: Tell the customer a colleague will take the case over.\n",
        "    budget:\n      timeoutMs: 120000\n",
    ] {
        assert!(input.contains(block) || block.starts_with("    budget"), "the block is in the input");
        assert!(output.contains(block), "`{block}` survives:\n{output}");
    }
}

#[test]
fn bad_input_gets_a_clear_message() {
    let dir = scratch("migrate-bad");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("dir");

    let none = archmax(&dir, &["migrate"]);
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("holds no workflows"), "{}", none.stderr);

    write(&dir, "workflows/notes/README.md", "# not a workflow\n");
    let not_workflow = archmax(&dir, &["migrate"]);
    assert_eq!(not_workflow.code, 1);
    assert!(
        not_workflow.stderr.contains("workflows/notes:1:1: not a workflow: the directory has no workflow.yaml"),
        "{}",
        not_workflow.stderr
    );
    fs::remove_dir_all(dir.join("workflows/notes")).expect("removed");

    write(&dir, "workflows/broken/workflow.yaml", "title: Broken\nstates:\n  a: [unclosed\n");
    let broken = archmax(&dir, &["migrate", "broken"]);
    assert_eq!(broken.code, 1);
    assert!(broken.stderr.contains("workflows/broken/workflow.yaml:"), "{}", broken.stderr);
    assert!(broken.stderr.contains("the YAML does not parse"), "{}", broken.stderr);
    assert!(!broken.stderr.contains("panicked"), "{}", broken.stderr);

    write(&dir, "workflows/listing/workflow.yaml", "- one\n- two\n");
    let listing = archmax(&dir, &["migrate", "listing"]);
    assert_eq!(listing.code, 1);
    assert!(listing.stderr.contains("not a workflow: its top level is not a mapping"), "{}", listing.stderr);

    write(&dir, "workflows/future/workflow.yaml", "runtime: { version: \"7\" }\nstates:\n  a: { instructions: x }\n");
    let future = archmax(&dir, &["migrate", "future"]);
    assert_eq!(future.code, 1);
    assert!(
        future.stderr.contains("workflows/future/workflow.yaml:1:21: `runtime.version` is \"7\""),
        "{}",
        future.stderr
    );

    let current = "title: Current\nruntime: { engine: archmax-harness, version: \"3\" }\nstates:\n  a:\n    triggers: { manual: {} }\n    instructions: Answer.\n";
    write(&dir, "workflows/current/workflow.yaml", current);
    let already = archmax(&dir, &["migrate", "current"]);
    assert_eq!(already.code, 0, "{}", already.stderr);
    assert_eq!(
        already.stdout,
        "current: already contract 3, nothing to change\nnothing to migrate: every selected workflow is already contract 3\n"
    );
    assert_eq!(fs::read_to_string(dir.join("workflows/current/workflow.yaml")).expect("kept"), current);

    let unknown = archmax(&dir, &["migrate", "nope"]);
    assert_eq!(unknown.code, 1);
    assert!(unknown.stderr.contains("there is no workflow `nope`"), "{}", unknown.stderr);
}
