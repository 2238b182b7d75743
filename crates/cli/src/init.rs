//! `archmax init [DIR] [--template minimal|support-desk]`: a new workspace to start from.
//!
//! The templates live under `crates/cli/templates/<name>/` and are compiled into the binary, so
//! `init` needs nothing on disk. The one thing to know: each template is a workspace
//! that validates with no warning and whose case passes under `archmax test --replay`
//! (`crates/cli/tests/cli/authoring.rs` runs exactly those commands on what `init` wrote), so
//! an edit to a template must keep both true.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::output::{failure, quiet};

/// The workspaces `init` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Template {
    /// One agent state that answers, with one replayable case.
    Minimal,
    /// Triage, an answer from a skill bundle, and a human hand-off, with one case.
    SupportDesk,
}

/// A template's files: workspace-relative path and contents.
type Files = &'static [(&'static str, &'static str)];

macro_rules! template {
    ($dir:literal: $($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../templates/", $dir, "/", $path)))),*]
    };
}

const MINIMAL: Files = template!("minimal":
    ".gitignore",
    "AGENTS.md",
    "workflows/hello/workflow.yaml",
    "workflows/hello/tests/greeting.test.yaml",
    "workflows/hello/tests/greeting.tape.yaml",
);

const SUPPORT_DESK: Files = template!("support-desk":
    ".gitignore",
    "AGENTS.md",
    "skills/help-center/SKILL.md",
    "workflows/support-desk/workflow.yaml",
    "workflows/support-desk/tests/shipping-question.test.yaml",
    "workflows/support-desk/tests/shipping-question.tape.yaml",
);

impl Template {
    fn files(self) -> Files {
        match self {
            Template::Minimal => MINIMAL,
            Template::SupportDesk => SUPPORT_DESK,
        }
    }
}

/// Why `dir` cannot take a new workspace, or `None` when it is absent or an empty
/// directory.
fn refusal(dir: &Path) -> Option<String> {
    let shown = dir.display();
    match fs::read_dir(dir) {
        Ok(mut entries) => entries
            .next()
            .map(|_| format!("`{shown}` is not empty: init writes a workspace only into a new or empty directory")),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) if error.kind() == ErrorKind::NotADirectory => {
            Some(format!("`{shown}` exists and is not a directory"))
        }
        Err(error) => Some(format!("cannot read `{shown}`: {error}")),
    }
}

pub fn run(dir: &Path, template: Template) -> ExitCode {
    if let Some(reason) = refusal(dir) {
        return failure(reason);
    }
    for (path, contents) in template.files() {
        let target = dir.join(path);
        let written = target
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| fs::OpenOptions::new().write(true).create_new(true).open(&target))
            .and_then(|mut file| std::io::Write::write_all(&mut file, contents.as_bytes()));
        if let Err(error) = written {
            return failure(format!("cannot write `{}`: {error}", target.display()));
        }
        if !quiet() {
            eprintln!("  created {}", target.display());
        }
    }
    let shown = dir.display();
    println!(
        "a new workspace in {shown}: check it with `archmax validate --root {shown}`, replay its case with `archmax test --replay --root {shown}`"
    );
    ExitCode::SUCCESS
}
