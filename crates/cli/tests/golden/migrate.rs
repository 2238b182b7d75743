//! The golden migrations: one test per case under `golden/migrate/`.
//!
//! A case holds `workspace/` (a contract-2 workspace), `expected/` (the workspace as
//! `archmax migrate` leaves it, every file), `report.txt` (what the command printed) and
//! `tapes/` (tapes written for the migrated states, laid over the migrated workspace in
//! the same layout). The trial migrates a scratch copy and compares the tree and the
//! report, then proves the result: `archmax validate` has no error, `archmax test
//! --replay` passes every migrated case on those tapes, and a second `archmax migrate`
//! says there is nothing to change and changes no file. `UPDATE_GOLDEN=1` rewrites
//! `expected/` and `report.txt`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use libtest_mimic::{Failed, Trial};

use crate::compare::{case_folders, compare_or_update, verdict};
use crate::support::{archmax, copy_dir, repository, scratch};

/// Every file under `dir`, by path relative to it.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let (Ok(relative), Ok(bytes)) = (path.strip_prefix(root), fs::read(&path)) {
                out.insert(relative.to_string_lossy().into_owned(), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|value| !value.is_empty() && value != "0")
}

fn run_case(case_dir: &Path, scratch: &Path) -> Result<(), Failed> {
    let workspace = scratch.join("workspace");
    let _ = fs::remove_dir_all(scratch);
    copy_dir(&case_dir.join("workspace"), &workspace);
    let root = workspace.to_string_lossy().into_owned();
    let mut failures = Vec::new();

    let first = archmax(scratch, &["migrate", "--root", &root]);
    let report = format!(
        "exit {}\n{}{}",
        first.code,
        first.stdout.replace(&root, "<root>"),
        first.stderr.replace(&root, "<root>")
    );
    compare_or_update(&case_dir.join("report.txt"), &report, &mut failures);

    let migrated = tree(&workspace);
    let expected_dir = case_dir.join("expected");
    if updating() {
        let _ = fs::remove_dir_all(&expected_dir);
        copy_dir(&workspace, &expected_dir);
    } else {
        let expected = tree(&expected_dir);
        for path in expected.keys().chain(migrated.keys()).collect::<std::collections::BTreeSet<_>>() {
            let wanted = expected.get(path).map(|bytes| String::from_utf8_lossy(bytes).into_owned());
            let actual = migrated.get(path).map(|bytes| String::from_utf8_lossy(bytes).into_owned());
            if wanted != actual {
                failures.push(format!(
                    "{path} differs from expected/ (rerun with UPDATE_GOLDEN=1 and review the diff)\n{}",
                    archmax_migrate::diff::unified(path, wanted.as_deref(), actual.as_deref())
                ));
            }
        }
    }
    if !failures.is_empty() {
        return verdict(failures);
    }

    // The result is a contract-3 workspace that validates and passes its cases.
    let tapes = case_dir.join("tapes");
    if tapes.is_dir() {
        copy_dir(&tapes, &workspace);
    }
    let validate = archmax(scratch, &["validate", "--root", &root]);
    if validate.code != 0 || validate.stderr.contains("error") && !validate.stderr.contains("0 error(s)") {
        failures.push(format!(
            "archmax validate on the migrated workspace failed:\n{}{}",
            validate.stdout, validate.stderr
        ));
    }
    let before_tests = tree(&workspace.join("workflows"));
    let mut workflows: Vec<String> = fs::read_dir(workspace.join("workflows"))
        .map(|entries| entries.flatten().filter_map(|entry| entry.file_name().to_str().map(str::to_string)).collect())
        .unwrap_or_default();
    workflows.sort();
    let mut cases = 0;
    for workflow in &workflows {
        if !workspace.join("workflows").join(workflow).join("tests").is_dir() {
            continue;
        }
        let test = archmax(scratch, &["test", workflow, "--replay", "--json", "--root", &root]);
        let summary: serde_json::Value = serde_json::from_str(&test.stdout).unwrap_or_default();
        cases += summary["results"].as_array().map_or(0, Vec::len);
        if test.code != 0 {
            failures.push(format!(
                "archmax test {workflow} --replay failed on the migrated cases:\n{}{}",
                test.stdout, test.stderr
            ));
        }
    }
    if cases == 0 {
        failures.push("no migrated case ran".to_string());
    }

    // Idempotence: a second run finds nothing and writes nothing.
    let second = archmax(scratch, &["migrate", "--root", &root]);
    if second.code != 0 || !second.stdout.contains("nothing to migrate") {
        failures.push(format!("a second migrate should find nothing to do:\n{}{}", second.stdout, second.stderr));
    }
    if tree(&workspace.join("workflows")) != before_tests {
        failures.push("a second migrate changed files".to_string());
    }
    verdict(failures)
}

pub fn trials() -> Vec<Trial> {
    let root = repository().join("golden/migrate");
    match case_folders(&root) {
        Ok(cases) => cases
            .into_iter()
            .map(|(name, dir)| {
                let label = format!("migrate-{name}");
                Trial::test(format!("migrate::{name}"), move || run_case(&dir, &scratch(&label)))
            })
            .collect(),
        Err(error) => vec![Trial::test("migrate::cases", move || Err(error.clone().into()))],
    }
}
