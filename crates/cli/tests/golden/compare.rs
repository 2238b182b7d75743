//! Comparing an output with its recording, or rewriting the recording under
//! `UPDATE_GOLDEN=1`.

use std::fs;
use std::path::Path;

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|value| !value.is_empty() && value != "0")
}

/// Compares `actual` with the recording at `path` and adds a failure when they differ,
/// or rewrites the recording under `UPDATE_GOLDEN=1`.
pub fn compare_or_update(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if updating() {
        if fs::read_to_string(path).ok().as_deref() != Some(actual) {
            let written = path.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| fs::write(path, actual));
            if let Err(error) = written {
                failures.push(format!("{} could not be rewritten: {error}", path.display()));
            }
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

/// A trial's verdict from the failures it collected.
pub fn verdict(failures: Vec<String>) -> Result<(), libtest_mimic::Failed> {
    if failures.is_empty() { Ok(()) } else { Err(failures.join("\n").into()) }
}

/// The case folders under `golden/<kind>/`, sorted, by name.
pub fn case_folders(root: &Path) -> Result<Vec<(String, std::path::PathBuf)>, String> {
    let entries = fs::read_dir(root).map_err(|error| format!("{}: {error}", root.display()))?;
    let mut cases: Vec<(String, std::path::PathBuf)> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .filter_map(|path| Some((path.file_name()?.to_string_lossy().into_owned(), path)))
        .collect();
    cases.sort();
    if cases.is_empty() {
        return Err(format!("{} holds no case", root.display()));
    }
    Ok(cases)
}
