//! The golden diagnostics: one test per case, and one that every code has a case.
//!
//! Each directory under `golden/diagnostics/` holds a `workspace/`, a `case.toml`
//! (`description`, `expect` = the codes the case exists to show, optional `args` =
//! workflow slugs for the command line, optional `tools = true` for `validate --tools`,
//! which always runs through the binary, optional `refused = true` for a command that
//! refuses before it has a report, which must still print one JSON document carrying
//! `error`) and the recorded outputs `expected.human`
//! (exit code, stderr, stdout) and `expected.json` of `archmax validate --root workspace`.
//! A case checks that each expected code is emitted and compares both outputs with the
//! recordings; under `UPDATE_GOLDEN=1` it rewrites them instead.
//!
//! The outputs are made in process, by the same library calls the command makes
//! (`analyze`, `Analysis::report`, `render::validation`), so no process is started. The
//! cases in [`THROUGH_THE_BINARY`] also run through the real `archmax`, as tests of
//! their own (`…::binary`), so the command's path stays covered against the same
//! recordings.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use archmax_compiler::Code;
use archmax_compiler::analyze;
use archmax_compiler::diagnostic::render::{self, Format, Stream};
use libtest_mimic::{Failed, Trial};
use serde::Deserialize;

use crate::compare::{case_folders, compare_or_update, verdict};
use crate::support::{archmax, repository};

/// Cases that also run through the binary: errors and a warning in human format, several
/// workflows, a selection on the command line, a file the loader refuses.
const THROUGH_THE_BINARY: [&str; 5] = [
    "AMX0301-human-edge",
    "AMX0108-missing-instructions",
    "AMX0802-two-workflow-cycle",
    "ok-args-select-workflow",
    "AMX0004-binary",
];

/// The workspace root as the command line names it, from the case directory.
const ROOT_ARG: &str = "workspace";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    description: String,
    expect: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    tools: bool,
    #[serde(default)]
    refused: bool,
    #[serde(default)]
    binary: bool,
}

/// The environment a `binary = true` case runs in, besides the process's own: one
/// provider key set, so a case can show another unset.
const ENVIRONMENT: [(&str, &str); 1] = [("ARCHMAX_GOLDEN_PROVIDER_KEY", "set-for-the-golden-cases")];

fn read_case(case: &Path) -> Result<CaseFile, String> {
    let text = fs::read_to_string(case.join("case.toml")).map_err(|error| format!("no case.toml: {error}"))?;
    toml::from_str(&text).map_err(|error| format!("case.toml is invalid: {error}"))
}

/// What one `validate` printed and returned.
struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// How a case's outputs are made.
#[derive(Clone, Copy)]
enum Route {
    InProcess,
    Binary,
    /// Through the binary, in [`ENVIRONMENT`].
    Environment,
}

/// `archmax` with [`ENVIRONMENT`], and without the default endpoint's variables.
fn archmax_in_environment(case: &Path, args: &[&str]) -> crate::support::Run {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(args)
        .current_dir(case)
        .env("NO_COLOR", "1")
        .envs(ENVIRONMENT)
        .env_remove("CLICOLOR_FORCE")
        .env_remove("ARCHMAX_TRUSTED_KEYS")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY")
        .output()
        .expect("the archmax binary runs");
    crate::support::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The human and JSON outputs of `archmax validate --root workspace ARGS…` from `case`.
fn validate(case: &Path, args: &[String], tools: bool, route: Route) -> (Output, Output) {
    if let Route::InProcess = route
        && !tools
        && let Some(outputs) = validate_in_process(&case.join(ROOT_ARG), args)
    {
        return outputs;
    }
    let mut command = vec!["validate", "--root", ROOT_ARG];
    if tools {
        command.push("--tools");
    }
    command.extend(args.iter().map(String::as_str));
    let run = |command: &[&str]| match route {
        Route::Environment => archmax_in_environment(case, command),
        _ => archmax(case, command),
    };
    let human = run(&command);
    command.extend(["--format", "json"]);
    let json = run(&command);
    let output = |run: crate::support::Run| Output { code: run.code, stdout: run.stdout, stderr: run.stderr };
    (output(human), output(json))
}

/// The outputs through the library, or `None` when the command would refuse before it
/// has a report (the workspace does not load, has no workflow, or the selection names an
/// unknown one): the binary renders those refusals.
fn validate_in_process(root: &Path, args: &[String]) -> Option<(Output, Output)> {
    let analysis = analyze(root).ok().filter(|analysis| !analysis.units.is_empty())?;
    let report = analysis.report(args).ok()?;
    let printed = |format| {
        let printout = render::validation(analysis.sources(), &report, format, ROOT_ARG, false);
        Output {
            code: i32::from(printout.exit_code),
            stdout: printout.text(Stream::Stdout),
            stderr: printout.text(Stream::Stderr),
        }
    };
    Some((printed(Format::Human), printed(Format::Json)))
}

fn run_case(case: &Path, route: Route) -> Result<(), Failed> {
    let spec = read_case(case)?;
    if spec.description.trim().is_empty() {
        return Err("describe the case in case.toml".into());
    }
    let route = if spec.binary { Route::Environment } else { route };
    let (human, json) = validate(case, &spec.args, spec.tools, route);
    if human.code != json.code {
        return Err(format!("exit {} in human format but {} in JSON", human.code, json.code).into());
    }
    if !matches!(human.code, 0 | 1) {
        return Err(format!("exit code {} ({})", human.code, human.stderr.trim()).into());
    }
    let parsed: serde_json::Value =
        serde_json::from_str(&json.stdout).map_err(|error| format!("JSON output does not parse: {error}"))?;
    let emitted: BTreeSet<&str> = parsed["workflows"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|workflow| workflow["diagnostics"].as_array().into_iter().flatten())
        .filter_map(|diagnostic| diagnostic["code"].as_str())
        .collect();
    let mut failures: Vec<String> = spec
        .expect
        .iter()
        .filter(|code| !emitted.contains(code.as_str()))
        .map(|code| format!("expected {code}, emitted {emitted:?}"))
        .collect();
    if spec.refused {
        if human.code != 1
            || !parsed["error"].is_string()
            || parsed["workflows"].as_array().is_none_or(|w| !w.is_empty())
        {
            failures.push(format!(
                "a refusal exits 1 with one document `{{\"workflows\": [], \"error\"}}`, got {}:\n{}",
                human.code, json.stdout
            ));
        }
    } else if spec.expect.is_empty() && human.code != 0 {
        failures.push(format!("a clean case must validate (exit 0), got {}:\n{}", human.code, human.stderr));
    }
    let recorded = format!("exit: {}\n--- stderr\n{}--- stdout\n{}", human.code, human.stderr, human.stdout);
    compare_or_update(&case.join("expected.human"), &recorded, &mut failures);
    compare_or_update(&case.join("expected.json"), &json.stdout, &mut failures);
    verdict(failures)
}

/// Every diagnostic code is expected by at least one case.
fn every_code_has_a_case(cases: &[std::path::PathBuf]) -> Result<(), Failed> {
    // A case whose case.toml does not read fails as its own test.
    let covered: BTreeSet<String> =
        cases.iter().filter_map(|case| read_case(case).ok()).flat_map(|spec| spec.expect).collect();
    // The flow codes (`AMX10xx`) have their own cases and coverage test (`flows.rs`).
    let missing: Vec<&str> = Code::ALL
        .iter()
        .map(|code| code.as_str())
        .filter(|code| !code.starts_with("AMX10") && !covered.contains(*code))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(format!("no golden case expects {missing:?}").into()) }
}

/// One test per case, the binary's tests, and the coverage test.
pub fn trials() -> Vec<Trial> {
    let cases = match case_folders(&repository().join("golden/diagnostics")) {
        Ok(cases) => cases,
        Err(problem) => return vec![Trial::test("diagnostics::cases", move || Err(problem.into()))],
    };
    let mut trials: Vec<Trial> = cases
        .iter()
        .map(|(name, case)| {
            let case = case.clone();
            Trial::test(format!("diagnostics::{name}"), move || run_case(&case, Route::InProcess))
        })
        .collect();
    trials.extend(THROUGH_THE_BINARY.iter().map(|name| {
        let case = repository().join("golden/diagnostics").join(name);
        Trial::test(format!("diagnostics::{name}::binary"), move || run_case(&case, Route::Binary))
    }));
    let folders: Vec<std::path::PathBuf> = cases.into_iter().map(|(_, case)| case).collect();
    trials.push(Trial::test("diagnostics::every_code_has_a_case", move || every_code_has_a_case(&folders)));
    trials
}
