//! The golden runs: one test per case.
//!
//! Each directory under `golden/runs/` holds a `workspace/` (with its tapes), or names a
//! `base` workspace of the repository (`specs`) that its `workspace/` is laid over, and a
//! `case.toml` listing `[[steps]]`: the `archmax` arguments of each command, run in a
//! fresh copy of the workspace with a fixed clock (`ARCHMAX_FIXED_CLOCK`), so sessions,
//! events and outputs are reproducible. Session commands get `--events` automatically, and
//! every event they record must validate against `schemas/events.schema.json`.
//! Everything a step produced (exit code, stdout, stderr, events) is compared with
//! `expected.txt`; `UPDATE_GOLDEN=1` rewrites it. A step may set `exit` to assert its
//! code, and `env` to add variables (`ARCHMAX_IDENTITY` is `finance@fernhill.example`
//! unless a step sets it; `ARCHMAX_TEST_ABORT_AFTER_COMMITS` kills the process
//! after that many committed steps, to test resuming from another process). A step may
//! instead `write = { path = "…", from = "…" }`: it replaces the workspace file `path`
//! with the case's own file `from` (kept outside `workspace/`), so a case can change the
//! workspace between two commands. Cases run in parallel, each in its own scratch copy.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde::Deserialize;

use libtest_mimic::{Failed, Trial};

use crate::compare::{case_folders, compare_or_update, verdict};
use crate::support::{copy_dir, repository, scratch};

const FIXED_CLOCK: &str = "2026-01-05T09:30:00Z";
const DECIDER: &str = "finance@fernhill.example";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    description: String,
    /// A repository directory (such as `specs`) copied first; the case's own
    /// `workspace/`, when it has one, is laid over it (tapes, extra files).
    #[serde(default)]
    base: Option<String>,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    exit: Option<i32>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    write: Option<WriteFile>,
}

/// A step that edits the workspace instead of running a command.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFile {
    /// The workspace file to replace (or create), relative to the workspace.
    path: String,
    /// The case's file whose contents it gets, relative to the case directory.
    from: String,
}

/// Carries out a `write` step; returns its transcript line.
fn write_step(case_dir: &Path, workspace: &Path, write: &WriteFile) -> Result<String, String> {
    let plain = |path: &str| Path::new(path).components().all(|part| matches!(part, std::path::Component::Normal(_)));
    if !plain(&write.path) || !plain(&write.from) {
        return Err(format!("a write step names plain relative paths, not `{}` / `{}`", write.path, write.from));
    }
    let contents = fs::read(case_dir.join(&write.from)).map_err(|error| format!("write: `{}`: {error}", write.from))?;
    let target = workspace.join(&write.path);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|error| format!("write: `{}`: {error}", write.path))?;
    }
    fs::write(&target, contents).map_err(|error| format!("write: `{}`: {error}", write.path))?;
    Ok(format!(
        "$ write {} (from {})

",
        write.path, write.from
    ))
}

const SESSION_COMMANDS: [&str; 4] = ["run", "decide", "reply", "deliver"];

/// Runs one case; returns its transcript.
fn run_case(case_dir: &Path, scratch: &Path) -> Result<String, String> {
    let text = fs::read_to_string(case_dir.join("case.toml")).map_err(|error| format!("no case.toml: {error}"))?;
    let case: Case = toml::from_str(&text).map_err(|error| format!("case.toml is invalid: {error}"))?;
    if case.description.trim().is_empty() {
        return Err("describe the case".to_string());
    }
    let workspace = scratch.join("workspace");
    let _ = fs::remove_dir_all(scratch);
    if let Some(base) = &case.base {
        copy_dir(&repository().join(base), &workspace);
    }
    let overlay = case_dir.join("workspace");
    if overlay.is_dir() {
        copy_dir(&overlay, &workspace);
    } else if case.base.is_none() {
        return Err("a case needs a `workspace/` or a `base`".to_string());
    }
    // A case whose host config starts the MCP fixture server would run without its tools,
    // and record something else, when the fixture is not built: say so instead.
    let settings = std::fs::read_to_string(workspace.join("archmax.toml")).unwrap_or_default();
    let fixture = std::path::Path::new(env!("CARGO_BIN_EXE_archmax")).with_file_name("archmax-mcp-fixture");
    if settings.contains("archmax-mcp-fixture") && !fixture.exists() {
        return Err(format!(
            "{} is missing and the case starts it: run the whole suite (`cargo test --workspace`) or build it first (`cargo build -p archmax-mcp`)",
            fixture.display()
        ));
    }
    let mut transcript = String::new();
    for (index, step) in case.steps.iter().enumerate() {
        match (&step.write, step.args.is_empty()) {
            (Some(write), true) => {
                transcript.push_str(&write_step(case_dir, &workspace, write)?);
                continue;
            }
            (Some(_), false) => return Err(format!("step {index} has both `args` and `write`")),
            (None, true) => return Err(format!("step {index} has neither `args` nor `write`")),
            (None, false) => {}
        }
        let mut args = step.args.clone();
        let events = scratch.join(format!("events-{index}.jsonl"));
        let records_events = SESSION_COMMANDS.contains(&args.first().map(String::as_str).unwrap_or(""))
            && !args.iter().any(|arg| arg == "--events");
        if records_events {
            args.push("--events".to_string());
            args.push(events.to_string_lossy().into_owned());
        }
        let output = Command::new(env!("CARGO_BIN_EXE_archmax"))
            .args(&args)
            .current_dir(&workspace)
            .env("NO_COLOR", "1")
            .env("ARCHMAX_FIXED_CLOCK", FIXED_CLOCK)
            // Who decides, whoever runs the suite: the approver most golden workflows name.
            .env("ARCHMAX_IDENTITY", DECIDER)
            .env_remove("ARCHMAX_API_BASE_URL")
            .env_remove("ARCHMAX_API_KEY")
            .env_remove("ARCHMAX_TRUSTED_KEYS")
            .env_remove("ARCHMAX_MODEL")
            .envs(&step.env)
            .output()
            .map_err(|error| format!("archmax did not run: {error}"))?;
        let code = output.status.code().unwrap_or(-1);
        if let Some(expected) = step.exit
            && expected != code
        {
            return Err(format!(
                "step {index} ({}) exited {code}, expected {expected}\nstderr:\n{}",
                step.args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        // The header names the absolute workspace path; the scratch copy's path varies.
        let shown = |bytes: &[u8]| {
            let text = String::from_utf8_lossy(bytes).into_owned();
            match workspace.canonicalize() {
                Ok(real) => text.replace(&*real.to_string_lossy(), "<workspace>"),
                Err(_) => text,
            }
        };
        transcript.push_str(&format!("$ archmax {}\n", archmax_program::shell::line(&step.args)));
        transcript.push_str(&format!("exit: {code}\n"));
        transcript.push_str("--- stdout\n");
        transcript.push_str(&shown(&output.stdout));
        transcript.push_str("--- stderr\n");
        transcript.push_str(&shown(&output.stderr));
        if records_events {
            let recorded = fs::read_to_string(&events).unwrap_or_default();
            check_events(index, &recorded)?;
            transcript.push_str("--- events\n");
            transcript.push_str(&recorded);
        }
        transcript.push('\n');
    }
    Ok(transcript)
}

/// Every recorded event is one JSON object that validates against the published event
/// schema (`schemas/events.schema.json`), whatever the recording says otherwise.
fn check_events(step: usize, recorded: &str) -> Result<(), String> {
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    let validator = VALIDATOR
        .get_or_init(|| {
            let schema: serde_json::Value = serde_json::from_str(archmax_vm::events::SCHEMA)
                .map_err(|error| format!("the event schema is not JSON: {error}"))?;
            jsonschema::draft202012::new(&schema).map_err(|error| format!("the event schema does not compile: {error}"))
        })
        .as_ref()?;
    let mut problems = Vec::new();
    for (number, line) in recorded.lines().enumerate() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(event) => problems.extend(
                validator
                    .iter_errors(&event)
                    .map(|error| format!("line {}: {error} at `{}`: {line}", number + 1, error.instance_path())),
            ),
            Err(error) => problems.push(format!("line {}: not JSON ({error}): {line}", number + 1)),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("step {step} emitted events the event schema refuses:\n{}", problems.join("\n")))
    }
}

fn check_case(name: &str, case: &Path) -> Result<(), Failed> {
    let scratch = scratch(&format!("runs-{name}"));
    let transcript = run_case(case, &scratch);
    let _ = fs::remove_dir_all(&scratch);
    let mut failures = Vec::new();
    compare_or_update(&case.join("expected.txt"), &transcript?, &mut failures);
    verdict(failures)
}

/// One test per case under `golden/runs/`.
pub fn trials() -> Vec<Trial> {
    match case_folders(&repository().join("golden/runs")) {
        Ok(cases) => cases
            .into_iter()
            .map(|(name, case)| Trial::test(format!("runs::{name}"), move || check_case(&name, &case)))
            .collect(),
        Err(problem) => vec![Trial::test("runs::cases", move || Err(problem.into()))],
    }
}
