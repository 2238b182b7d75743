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

fn fresh_workspace(label: &str) -> PathBuf {
    let dir = scratch(label);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("dir");
    dir
}

const HOOKED: &str = "runtime: { engine: archmax-harness, version: \"2\" }\nstates:\n  start:\n    triggers: { manual: {} }\n    instructions: Go.\n    before: [hooks/check.js]\n    transitions:\n      - to: end\n        description: Done.\n  end:\n    instructions: End.\n";

const CHECK: &str = "export default async () => ok();\n";

#[test]
fn a_hook_outside_hooks_is_ported_and_never_removed() {
    let dir = fresh_workspace("migrate-outside-hooks");
    let yaml = "runtime: { engine: archmax-harness, version: \"2\" }\nstates:\n  start:\n    triggers: { manual: {} }\n    instructions: Go.\n    before: [scripts/check.js]\n    after: [workflow.yaml]\n";
    write(&dir, "workflows/w/workflow.yaml", yaml);
    write(&dir, "workflows/w/scripts/check.js", CHECK);
    let run = archmax(&dir, &["migrate"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("removed workflows/w/scripts/check.js"), "{}", run.stdout);
    assert!(!run.stdout.contains("removed workflows/w/workflow.yaml"), "{}", run.stdout);
    assert_eq!(fs::read_to_string(dir.join("workflows/w/scripts/check.js")).expect("the hook stays"), CHECK);
    let migrated = fs::read_to_string(dir.join("workflows/w/workflow.yaml")).expect("the workflow stays");
    assert!(migrated.contains("version: \"3\""), "{migrated}");
    // The gate got a script of its own, beside the file it was ported from.
    assert!(migrated.contains("script: scripts/start-check.js"), "{migrated}");
    assert!(dir.join("workflows/w/scripts/start-check.js").is_file());
    assert!(
        run.stdout.contains(
            "workflows/w/scripts/check.js:1:1: follow-up: this hook was ported, but the file is not under hooks/"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("workflows/w/workflow.yaml:1:1: follow-up: this hook was ported"), "{}", run.stdout);
}

#[test]
fn an_existing_script_is_kept_and_the_port_gets_another_name() {
    let dir = fresh_workspace("migrate-existing-script");
    write(&dir, "workflows/w/workflow.yaml", HOOKED);
    write(&dir, "workflows/w/hooks/check.js", CHECK);
    write(&dir, "workflows/w/scripts/check.js", "// someone's own script\n");
    let run = archmax(&dir, &["migrate"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        fs::read_to_string(dir.join("workflows/w/scripts/check.js")).expect("kept"),
        "// someone's own script\n"
    );
    assert!(run.stdout.contains("  created workflows/w/scripts/start-check.js\n"), "{}", run.stdout);
    assert!(run.stdout.contains("  removed workflows/w/hooks/check.js\n"), "{}", run.stdout);
    let migrated = fs::read_to_string(dir.join("workflows/w/workflow.yaml")).expect("written");
    assert!(migrated.contains("  start-check:\n    type: code\n    script: scripts/start-check.js\n"), "{migrated}");
}

#[test]
fn a_failed_write_changes_nothing_and_names_the_path() {
    let dir = fresh_workspace("migrate-failed-write");
    write(&dir, "workflows/w/workflow.yaml", HOOKED);
    write(&dir, "workflows/w/hooks/check.js", CHECK);
    // `scripts` is a file, so no script can be created under it.
    write(&dir, "workflows/w/scripts", "not a directory\n");
    let before = snapshot(&dir);
    let run = archmax(&dir, &["migrate"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("cannot write `workflows/w/scripts/check.js`"), "{}", run.stderr);
    assert_eq!(snapshot(&dir), before, "the hook, the workflow and everything else are as they were");
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_refused_and_never_written_through() {
    use std::os::unix::fs::symlink;
    let dir = fresh_workspace("migrate-links");
    let outside = fresh_workspace("migrate-links-outside");
    write(&outside, "elsewhere.yaml", HOOKED);
    write(&outside, "hooks/check.js", CHECK);

    fs::create_dir_all(dir.join("workflows/linked")).expect("dir");
    symlink(outside.join("elsewhere.yaml"), dir.join("workflows/linked/workflow.yaml")).expect("link");
    let run = archmax(&dir, &["migrate", "linked"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "`workflows/linked/workflow.yaml` is a symbolic link: migrate neither reads nor writes through links"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(fs::read_to_string(outside.join("elsewhere.yaml")).expect("the target"), HOOKED);

    // A linked hooks/ directory, and a linked hook file inside a real one.
    write(&dir, "workflows/hooks-dir/workflow.yaml", HOOKED);
    symlink(outside.join("hooks"), dir.join("workflows/hooks-dir/hooks")).expect("link");
    let run = archmax(&dir, &["migrate", "hooks-dir"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("`workflows/hooks-dir/hooks` is a symbolic link"), "{}", run.stderr);
    write(&dir, "workflows/hook-file/workflow.yaml", HOOKED);
    fs::create_dir_all(dir.join("workflows/hook-file/hooks")).expect("dir");
    symlink(outside.join("hooks/check.js"), dir.join("workflows/hook-file/hooks/check.js")).expect("link");
    let run = archmax(&dir, &["migrate", "hook-file"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("`workflows/hook-file/hooks/check.js` is a symbolic link"), "{}", run.stderr);
    assert_eq!(fs::read_to_string(outside.join("hooks/check.js")).expect("the target"), CHECK);
    assert_eq!(fs::read_to_string(dir.join("workflows/hook-file/workflow.yaml")).expect("kept"), HOOKED);

    // A linked scripts/ directory would have the port written outside the workspace.
    write(&dir, "workflows/scripts-dir/workflow.yaml", HOOKED);
    write(&dir, "workflows/scripts-dir/hooks/check.js", CHECK);
    fs::create_dir_all(outside.join("scripts")).expect("dir");
    symlink(outside.join("scripts"), dir.join("workflows/scripts-dir/scripts")).expect("link");
    let run = archmax(&dir, &["migrate", "scripts-dir"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("`workflows/scripts-dir/scripts` is a symbolic link"), "{}", run.stderr);
    assert_eq!(fs::read_dir(outside.join("scripts")).expect("dir").count(), 0, "nothing written through the link");
}
