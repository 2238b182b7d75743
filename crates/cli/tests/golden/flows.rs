//! The golden flows: `archmax flow plan` and `archmax flow run`, one test per case, and
//! tests that every flow diagnostic code (`AMX10xx`) is expected by a case and every
//! event kind of the flow-event schema is printed by one.
//!
//! Each directory under `golden/flows/` holds a `workspace/` (the document, its tape,
//! hook programs and files) and a `case.toml`: `description`, `expect` (the codes a
//! refusal case exists to show), `[[steps]]` (the `archmax` arguments of each command,
//! run in a fresh copy of the workspace with a fixed clock; `exit` asserts the status,
//! `env` adds variables, and `same_stdout_as = N` asserts the step printed what step N
//! printed, which is how `--parallel` is shown equal to the sequential walk; every event
//! line a step prints is validated against the flow-event schema), `show`
//! (workspace files printed after the steps; `{run}` in a name is the first run's id) and `list` (directories whose file names
//! are printed). A `{run}` in an argument is the flow-run id the first step printed.
//! `store = "postgres"` runs every step on one fresh database of a throwaway PostgreSQL
//! server the case starts (`ARCHMAX_STORE`; `ARCHMAX_TEST_DATABASE_URL` names one instead), and a step's `workspace = "second"` runs it in a
//! second copy of the workspace, so a case shows a walk continued by another process
//! that shares only the database.
//! Flow-run ids print as `<run>`, the scratch paths as `<workspace>` and
//! `<second-workspace>`, the database as `<store>`, so the recordings are stable;
//! `UPDATE_GOLDEN=1` rewrites `expected.txt`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use archmax_compiler::Code;
use libtest_mimic::{Failed, Trial};
use serde::Deserialize;

use crate::compare::{case_folders, compare_or_update, verdict};
use crate::support::{copy_dir, repository, scratch};

const FIXED_CLOCK: &str = "2026-01-05T09:30:00Z";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    description: String,
    #[serde(default)]
    expect: Vec<String>,
    steps: Vec<Step>,
    #[serde(default)]
    show: Vec<String>,
    #[serde(default)]
    list: Vec<String>,
    /// `postgres`: every step's session store is one fresh database.
    #[serde(default)]
    store: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    args: Vec<String>,
    #[serde(default)]
    exit: Option<i32>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    same_stdout_as: Option<usize>,
    /// `second`: run in the second copy of the workspace.
    #[serde(default)]
    workspace: Option<String>,
}

fn read_case(case_dir: &Path) -> Result<Case, String> {
    let text = fs::read_to_string(case_dir.join("case.toml")).map_err(|error| format!("no case.toml: {error}"))?;
    toml::from_str(&text).map_err(|error| format!("case.toml is invalid: {error}"))
}

/// The first flow-run id (`<16 hex>-<8 hex>`) in `text`.
fn find_run_id(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex = |byte: &u8| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte);
    (0..bytes.len().saturating_sub(24)).find_map(|start| {
        let candidate = &bytes[start..start + 25];
        let boundary = start == 0 || !hex(&bytes[start - 1]);
        let shaped = candidate[..16].iter().all(hex) && candidate[16] == b'-' && candidate[17..].iter().all(hex);
        (boundary && shaped).then(|| String::from_utf8_lossy(candidate).into_owned())
    })
}

/// Where a case's steps run, each printed by a stable name.
struct Places<'a> {
    workspace: &'a Path,
    second: &'a Path,
    store: Option<&'a str>,
}

/// `text` with every flow-run id as `<run>`, the workspace paths as `<workspace>` and
/// `<second-workspace>`, and the database as `<store>`.
fn normalize(text: &str, places: &Places<'_>, runs: &mut BTreeSet<String>) -> String {
    let mut text = text.to_string();
    if let Some(store) = places.store {
        text = text.replace(store, "<store>");
    }
    for (path, name) in [(places.second, "<second-workspace>"), (places.workspace, "<workspace>")] {
        if let Ok(real) = path.canonicalize() {
            text = text.replace(&*real.to_string_lossy(), name);
        }
        text = text.replace(&*path.to_string_lossy(), name);
    }
    text = text.replace(&*repository().to_string_lossy(), "<repo>");
    while let Some(id) = find_run_id(&text) {
        runs.insert(id.clone());
        text = text.replace(&id, "<run>");
    }
    text
}

fn run_case(case_dir: &Path, scratch: &Path) -> Result<(String, Vec<String>), String> {
    let case = read_case(case_dir)?;
    if case.description.trim().is_empty() {
        return Err("describe the case".to_string());
    }
    let workspace = scratch.join("workspace");
    let _ = fs::remove_dir_all(scratch);
    let overlay = case_dir.join("workspace");
    if !overlay.is_dir() {
        return Err("a case needs a `workspace/`".to_string());
    }
    copy_dir(&overlay, &workspace);
    let second = scratch.join("second");
    copy_dir(&overlay, &second);
    // The case's own throwaway server (or `ARCHMAX_TEST_DATABASE_URL`'s), stopped, or
    // its database dropped, when the case ends.
    let cluster = match case.store.as_deref() {
        None => None,
        Some("postgres") => Some(archmax_store_postgres::test_cluster::TestCluster::start()?),
        Some(other) => return Err(format!("`store = \"{other}\"`: the one store a case may name is `postgres`")),
    };
    let store = match &cluster {
        Some(cluster) => Some(cluster.database("goldenflow")?),
        None => None,
    };
    let mut transcript = String::new();
    let mut failures = Vec::new();
    let mut printed: Vec<String> = Vec::new();
    let mut run: Option<String> = None;
    let repo = repository().to_string_lossy().into_owned();
    for (index, step) in case.steps.iter().enumerate() {
        let args: Vec<String> = step
            .args
            .iter()
            .map(|arg| arg.replace("{run}", run.as_deref().unwrap_or("{run}")).replace("{repo}", &repo))
            .collect();
        let here = match step.workspace.as_deref() {
            None => &workspace,
            Some("second") => &second,
            Some(other) => {
                return Err(format!("step {index}: `workspace = \"{other}\"`: a step runs in `second` or the first"));
            }
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
        command.env_remove("ARCHMAX_STORE");
        if let Some(store) = &store {
            command.env("ARCHMAX_STORE", store);
        }
        let output = command
            .args(&args)
            .current_dir(here)
            .env("NO_COLOR", "1")
            .env("ARCHMAX_FIXED_CLOCK", FIXED_CLOCK)
            .env_remove("ARCHMAX_API_BASE_URL")
            .env_remove("ARCHMAX_API_KEY")
            .env_remove("ARCHMAX_MODEL")
            .envs(&step.env)
            .output()
            .map_err(|error| format!("archmax did not run: {error}"))?;
        let code = output.status.code().unwrap_or(-1);
        let mut runs = BTreeSet::new();
        let places = Places { workspace: &workspace, second: &second, store: store.as_deref() };
        let stdout = normalize(&String::from_utf8_lossy(&output.stdout), &places, &mut runs);
        let stderr = normalize(&String::from_utf8_lossy(&output.stderr), &places, &mut runs);
        if run.is_none() {
            run = runs.into_iter().next();
        }
        if let Err(problem) = check_events(index, &stdout) {
            failures.push(problem);
        }
        if let Some(expected) = step.exit
            && expected != code
        {
            failures.push(format!(
                "step {index} ({}) exited {code}, expected {expected}\nstderr:\n{stderr}",
                args.join(" ")
            ));
        }
        if let Some(other) = step.same_stdout_as {
            match printed.get(other) {
                Some(earlier) if *earlier == stdout => {}
                Some(earlier) => failures.push(format!(
                    "step {index} printed other than step {other}:\n--- step {other}\n{earlier}--- step {index}\n{stdout}"
                )),
                None => failures.push(format!("step {index} compares with step {other}, which is not before it")),
            }
        }
        transcript.push_str(&format!(
            "$ archmax {}\nexit: {code}\n--- stdout\n{stdout}--- stderr\n{stderr}\n",
            archmax_program::shell::line(&step.args)
        ));
        printed.push(stdout);
    }
    let places_after = Places { workspace: &workspace, second: &second, store: store.as_deref() };
    let all: String = transcript.clone();
    for code in &case.expect {
        if !all.contains(code.as_str()) {
            failures.push(format!("expected {code} in the output"));
        }
    }
    for name in &case.list {
        let mut names: Vec<String> = fs::read_dir(workspace.join(name))
            .map(|entries| entries.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        let mut runs = BTreeSet::new();
        transcript.push_str(&format!("--- list {name}\n"));
        for entry in names {
            transcript.push_str(&format!("{}\n", normalize(&entry, &places_after, &mut runs)));
        }
    }
    for name in &case.show {
        let path = name.replace("{run}", run.as_deref().unwrap_or("{run}"));
        let text = fs::read_to_string(workspace.join(&path)).unwrap_or_else(|_| "(absent)\n".to_string());
        let mut runs = BTreeSet::new();
        transcript.push_str(&format!("--- file {name}\n{}", normalize(&text, &places_after, &mut runs)));
    }
    Ok((transcript, failures))
}

/// Every event line a step printed (a JSON object with an `event`) validates against the
/// published flow-event schema (`schemas/flow-events.schema.json`). Lines in the earlier
/// names (`--event-names snake`, `kind`) and plan documents are not events it describes.
fn check_events(step: usize, stdout: &str) -> Result<(), String> {
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    let validator = VALIDATOR
        .get_or_init(|| {
            let schema: serde_json::Value = serde_json::from_str(archmax_flow::events::SCHEMA)
                .map_err(|error| format!("the flow-event schema is not JSON: {error}"))?;
            jsonschema::draft202012::new(&schema)
                .map_err(|error| format!("the flow-event schema does not compile: {error}"))
        })
        .as_ref()?;
    let mut problems = Vec::new();
    for (number, line) in stdout.lines().enumerate() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event.get("event").is_none() {
            continue;
        }
        problems.extend(
            validator
                .iter_errors(&event)
                .map(|error| format!("line {}: {error} at `{}`: {line}", number + 1, error.instance_path())),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("step {step} printed events the flow-event schema refuses:\n{}", problems.join("\n")))
    }
}

fn check_case(name: &str, case: &Path) -> Result<(), Failed> {
    let scratch = scratch(&format!("flows-{name}"));
    let result = run_case(case, &scratch);
    let _ = fs::remove_dir_all(&scratch);
    let (transcript, mut failures) = result?;
    compare_or_update(&case.join("expected.txt"), &transcript, &mut failures);
    verdict(failures)
}

/// Every flow code (`AMX10xx`) is expected by at least one case.
fn every_flow_code_has_a_case(cases: &[std::path::PathBuf]) -> Result<(), Failed> {
    let covered: BTreeSet<String> =
        cases.iter().filter_map(|case| read_case(case).ok()).flat_map(|case| case.expect).collect();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|code| code.as_str())
        .filter(|code| code.starts_with("AMX10") && !covered.contains(*code))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(format!("no golden flow expects {missing:?}").into()) }
}

/// Every event kind the flow-event schema describes is printed (and so validated) by at
/// least one case.
fn every_flow_event_kind_has_a_case(cases: &[std::path::PathBuf]) -> Result<(), Failed> {
    let schema: serde_json::Value =
        serde_json::from_str(archmax_flow::events::SCHEMA).map_err(|error| format!("the schema: {error}"))?;
    let kinds: Vec<String> = schema["properties"]["event"]["enum"]
        .as_array()
        .map(|kinds| kinds.iter().filter_map(|kind| kind.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if kinds.is_empty() {
        return Err("the flow-event schema lists no kinds".into());
    }
    let recorded: String = cases.iter().filter_map(|case| fs::read_to_string(case.join("expected.txt")).ok()).collect();
    let missing: Vec<&String> =
        kinds.iter().filter(|kind| !recorded.contains(&format!("{{\"event\":\"{kind}\""))).collect();
    if missing.is_empty() { Ok(()) } else { Err(format!("no golden flow prints {missing:?}").into()) }
}

/// One test per case under `golden/flows/`, and the coverage tests.
pub fn trials() -> Vec<Trial> {
    let cases = match case_folders(&repository().join("golden/flows")) {
        Ok(cases) => cases,
        Err(problem) => return vec![Trial::test("flows::cases", move || Err(problem.into()))],
    };
    let folders: Vec<std::path::PathBuf> = cases.iter().map(|(_, case)| case.clone()).collect();
    let mut trials: Vec<Trial> = cases
        .into_iter()
        .map(|(name, case)| Trial::test(format!("flows::{name}"), move || check_case(&name, &case)))
        .collect();
    let all = folders.clone();
    trials.push(Trial::test("flows::every_flow_code_has_a_case", move || every_flow_code_has_a_case(&folders)));
    trials.push(Trial::test("flows::every_flow_event_kind_has_a_case", move || every_flow_event_kind_has_a_case(&all)));
    trials
}
