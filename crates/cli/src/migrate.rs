//! `archmax migrate [WORKFLOW…] [--root DIR] [--dry-run] [--diff]`: contract-2 workflows
//! rewritten to contract 3.
//!
//! The rewrite is `archmax_compiler::migrate`; this file only renders its plan. The one
//! thing to know: every change and every manual follow-up is printed at the
//! file:line:column of the file as it was before the run, so the report can be read
//! against the old text (or the `--diff`), and a run that finds nothing of contract 2
//! says so and writes nothing.

use std::path::Path;
use std::process::ExitCode;

use archmax_migrate::{self as migrate, diff};

use crate::output::failure;

pub fn run(root: &Path, selection: &[String], dry_run: bool, show_diff: bool) -> ExitCode {
    let plan = match migrate::plan(root, selection) {
        Ok(plan) => plan,
        Err(error) => return failure(error),
    };
    if show_diff {
        for file in plan.files() {
            print!("{}", diff::unified(&file.path, file.before.as_deref(), file.after.as_deref()));
        }
    }
    let (mut changes, mut follow_ups, mut files) = (0, 0, 0);
    for workflow in &plan.workflows {
        if workflow.is_current() {
            println!("{}: already contract 3, nothing to change", workflow.slug);
            continue;
        }
        println!("{}:", workflow.slug);
        for change in &workflow.changes {
            println!("  {}: changed: {}", change.at, change.text);
        }
        for follow_up in &workflow.follow_ups {
            println!("  {}: follow-up: {}", follow_up.at, follow_up.text);
        }
        for file in &workflow.files {
            let verb = match (&file.before, &file.after, dry_run) {
                (None, _, false) => "created",
                (None, _, true) => "would create",
                (_, None, false) => "removed",
                (_, None, true) => "would remove",
                (_, _, false) => "rewrote",
                (_, _, true) => "would rewrite",
            };
            println!("  {verb} {}", file.path);
        }
        changes += workflow.changes.len();
        follow_ups += workflow.follow_ups.len();
        files += workflow.files.len();
    }
    if files == 0 && follow_ups == 0 {
        println!("nothing to migrate: every selected workflow is already contract 3");
        return ExitCode::SUCCESS;
    }
    if !dry_run && let Err(error) = migrate::apply(root, &plan) {
        return failure(error);
    }
    let plural = |count: usize, word: &str| format!("{count} {word}{}", if count == 1 { "" } else { "s" });
    println!(
        "{}, {}, {}{}",
        plural(changes, "change"),
        plural(follow_ups, "manual follow-up"),
        plural(files, "file"),
        if dry_run { " (dry run: nothing written)" } else { " written" }
    );
    if follow_ups > 0 {
        println!("then run `archmax validate` and settle each follow-up by hand");
    }
    ExitCode::SUCCESS
}
