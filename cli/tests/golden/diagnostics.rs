//! The golden diagnostics harness.
//!
//! Each directory under `golden/diagnostics/` holds a `workspace/`, a `case.toml`
//! (`description`, `expect` = the codes the case exists to show, optional `args` =
//! workflow slugs for the command line) and the recorded outputs `expected.human`
//! (exit code, stderr, stdout) and `expected.json`. The harness runs every case,
//! checks that each expected code was emitted, and compares the outputs; with
//! `UPDATE_GOLDEN=1` it rewrites the recordings instead. Every diagnostic code must be
//! expected by at least one case.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use archmax_compiler::Code;
use serde::Deserialize;

use crate::support::{archmax, repository};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    description: String,
    expect: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|value| !value.is_empty() && value != "0")
}

/// Compares `actual` with the recording at `path`, or rewrites it under `UPDATE_GOLDEN=1`.
pub fn compare_or_update(path: &Path, actual: &str, failures: &mut Vec<String>) {
    compare(path, actual, failures)
}

fn compare(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if updating() {
        if fs::read_to_string(path).ok().as_deref() != Some(actual) {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).expect("golden directory is writable");
            }
            fs::write(path, actual).expect("golden file is writable");
        }
        return;
    }
    match fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs (rerun with UPDATE_GOLDEN=1 and review the diff)\n{}",
            path.display(),
            first_difference(&expected, actual)
        )),
        Err(_) => failures.push(format!("{} is missing (run with UPDATE_GOLDEN=1)", path.display())),
    }
}

fn first_difference(expected: &str, actual: &str) -> String {
    for (line, (left, right)) in expected.lines().zip(actual.lines()).enumerate() {
        if left != right {
            return format!("  line {}:\n  - {left}\n  + {right}", line + 1);
        }
    }
    format!("  lengths differ: {} vs {} lines", expected.lines().count(), actual.lines().count())
}

#[test]
fn golden_diagnostics() {
    let root = repository().join("golden/diagnostics");
    let mut cases: Vec<_> = fs::read_dir(&root)
        .expect("golden/diagnostics exists")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no golden cases");
    let mut failures = Vec::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    for case in &cases {
        let name = case.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let spec: CaseFile = match fs::read_to_string(case.join("case.toml")).map(|text| toml::from_str(&text)) {
            Ok(Ok(spec)) => spec,
            Ok(Err(error)) => {
                failures.push(format!("{name}: case.toml is invalid: {error}"));
                continue;
            }
            Err(error) => {
                failures.push(format!("{name}: no case.toml: {error}"));
                continue;
            }
        };
        assert!(!spec.description.trim().is_empty(), "{name}: describe the case");
        covered.extend(spec.expect.iter().cloned());
        let mut args = vec!["validate", "--root", "workspace"];
        args.extend(spec.args.iter().map(String::as_str));
        let human = archmax(case, &args);
        let mut json_args = args.clone();
        json_args.extend(["--format", "json"]);
        let json = archmax(case, &json_args);
        if human.code != json.code {
            failures.push(format!("{name}: exit {} in human format but {} in JSON", human.code, json.code));
        }
        if !matches!(human.code, 0 | 1) {
            failures.push(format!("{name}: exit code {} ({})", human.code, human.stderr.trim()));
            continue;
        }
        let parsed: serde_json::Value = match serde_json::from_str(&json.stdout) {
            Ok(value) => value,
            Err(error) => {
                failures.push(format!("{name}: JSON output does not parse: {error}"));
                continue;
            }
        };
        let emitted: BTreeSet<String> = parsed["workflows"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|workflow| workflow["diagnostics"].as_array().into_iter().flatten())
            .filter_map(|diagnostic| diagnostic["code"].as_str().map(str::to_string))
            .collect();
        for code in &spec.expect {
            if !emitted.contains(code) {
                failures.push(format!("{name}: expected {code}, emitted {emitted:?}"));
            }
        }
        if spec.expect.is_empty() && human.code != 0 {
            failures
                .push(format!("{name}: a clean case must validate (exit 0), got {}:\n{}", human.code, human.stderr));
        }
        let recorded = format!("exit: {}\n--- stderr\n{}--- stdout\n{}", human.code, human.stderr, human.stdout);
        compare(&case.join("expected.human"), &recorded, &mut failures);
        compare(&case.join("expected.json"), &json.stdout, &mut failures);
    }
    let missing: Vec<&str> =
        Code::ALL.iter().map(|code| code.as_str()).filter(|code| !covered.contains(*code)).collect();
    if !missing.is_empty() {
        failures.push(format!("no golden case expects {missing:?}"));
    }
    assert!(failures.is_empty(), "{} golden failure(s):\n{}", failures.len(), failures.join("\n"));
}
