//! The command-line contract: the example workspace, streams, formats and exit codes.

use std::fs;

use crate::support::{archmax, repository};

fn golden_case(name: &str) -> std::path::PathBuf {
    repository().join("golden/diagnostics").join(name)
}

#[test]
fn the_example_workspace_validates_clean() {
    let run = archmax(&repository(), &["validate", "--root", "specs"]);
    assert_eq!(run.stdout, "valid — 0 error(s), 0 warning(s)\n", "stderr:\n{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, 0);
}

#[test]
fn errors_exit_1_with_diagnostics_on_stderr_and_the_verdict_on_stdout() {
    let run = archmax(&golden_case("AMX0301-human-edge"), &["validate", "--root", "workspace"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "invalid — 1 error(s), 0 warning(s)\n");
    assert!(run.stderr.contains("AMX0301"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "no colour on a pipe or under NO_COLOR");
}

#[test]
fn warnings_alone_exit_0() {
    let run = archmax(&golden_case("AMX0108-missing-instructions"), &["validate", "--root", "workspace"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "valid — 0 error(s), 1 warning(s)\n");
}

#[test]
fn json_is_one_document_on_stdout_and_nothing_on_stderr() {
    let run =
        archmax(&golden_case("AMX0802-two-workflow-cycle"), &["validate", "--root", "workspace", "--format", "json"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, "");
    let document: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let workflows = document["workflows"].as_array().expect("a workflows array");
    assert_eq!(workflows.len(), 2);
    for workflow in workflows {
        assert_eq!(workflow["valid"], false);
        let diagnostic = &workflow["diagnostics"][0];
        for key in ["code", "severity", "message", "path", "file", "line", "column", "end_line", "end_column", "help"] {
            assert!(diagnostic.get(key).is_some(), "diagnostic lacks `{key}`: {diagnostic}");
        }
        assert_eq!(diagnostic["code"], "AMX0802");
        assert_eq!(diagnostic["severity"], "error");
    }
}

#[test]
fn naming_workflows_limits_the_report() {
    let run = archmax(&repository(), &["validate", "--root", "specs", "refund-desk", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let document: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    let names: Vec<&str> = document["workflows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|workflow| workflow["workflow"].as_str())
        .collect();
    assert_eq!(names, ["refund-desk"]);
}

#[test]
fn an_unknown_workflow_is_a_one_line_failure() {
    let run = archmax(&repository(), &["validate", "--root", "specs", "refund-dsk"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("did you mean `refund-desk`"), "{}", run.stderr);
}

#[test]
fn a_root_without_workflows_is_refused() {
    let dir = crate::support::scratch("empty-root");
    fs::create_dir_all(&dir).expect("temp dir");
    let run = archmax(&dir, &["validate"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no `workflows/` directory"), "{}", run.stderr);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [
        vec!["validate", "--directory", "x"],
        vec!["validate", "--format", "xml"],
        vec!["frobnicate"],
        vec!["explain", "AMX0301", "extra"],
    ] {
        let run = archmax(&repository(), &args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("--help"), "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, "");
    }
}

#[test]
fn sarif_is_sarif_2_1_0() {
    let run = archmax(&golden_case("AMX0301-human-edge"), &["validate", "--root", "workspace", "--format", "sarif"]);
    assert_eq!(run.code, 1);
    let document: serde_json::Value = serde_json::from_str(&run.stdout).expect("SARIF is JSON");
    assert_eq!(document["version"], "2.1.0");
    let run_object = &document["runs"][0];
    assert_eq!(run_object["tool"]["driver"]["name"], "archmax");
    let rules = run_object["tool"]["driver"]["rules"].as_array().expect("rules");
    assert_eq!(rules[0]["id"], "AMX0301");
    let result = &run_object["results"][0];
    assert_eq!(result["ruleId"], "AMX0301");
    assert_eq!(result["ruleIndex"], 0);
    assert_eq!(result["level"], "error");
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "workspace/workflows/orders/workflow.yaml");
    assert!(location["region"]["startLine"].as_u64().is_some_and(|line| line > 0));
    assert_eq!(
        result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
        "states.review.transitions.0.description"
    );
}

#[test]
fn github_prints_annotation_commands() {
    let run = archmax(
        &golden_case("AMX0108-missing-instructions"),
        &["validate", "--root", "workspace", "--format", "github"],
    );
    assert_eq!(run.code, 0);
    let line = run.stdout.lines().next().expect("one annotation");
    assert!(line.starts_with("::warning file=workspace/workflows/orders/workflow.yaml,line=1,col=1,"), "{line}");
    assert!(line.contains("title=AMX0108 missing-instructions::"), "{line}");
    assert!(line.contains("%0Ahelp: "), "help follows on an escaped new line: {line}");
    assert_eq!(run.stderr, "valid — 0 error(s), 1 warning(s)\n");
}

#[test]
fn explain_prints_the_long_explanation() {
    let run = archmax(&repository(), &["explain", "AMX0301"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.starts_with("AMX0301 (error): A transition needs a description"), "{}", run.stdout);
    assert!(run.stdout.contains("# AMX0301: description-required"));
    let by_name = archmax(&repository(), &["explain", "description-required"]);
    assert_eq!(by_name.stdout, run.stdout);
    let unknown = archmax(&repository(), &["explain", "AMX9999"]);
    assert_eq!(unknown.code, 1);
    assert_eq!(unknown.stderr.lines().count(), 1);
    let list = archmax(&repository(), &["explain", "--list"]);
    assert_eq!(
        list.stdout.lines().count(),
        archmax_compiler::Code::ALL.len() + archmax_vm::kernel::Rule::ALL.len(),
        "one line per code and per kernel rule"
    );
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_quietly() {
    // `archmax explain --list | head -0`: the reading end is gone before the first write.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["explain", "--list"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the archmax binary runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("the command ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "a closed pipe made archmax panic:\n{stderr}");
    assert!(stderr.is_empty(), "a closed pipe is not an error worth a word:\n{stderr}");
}

/// A model endpoint that refuses connections: each retry is shown as it is made, the final
/// error is one line, and `--timeout` is taken as the bound on each call.
#[test]
fn model_endpoint_retries_are_shown_and_the_final_error_is_one_line() {
    // A copy: the run creates the workspace's seal key, which never belongs in the repository.
    let workspace = crate::support::scratch("retries-workspace");
    crate::support::copy_dir(&repository().join("golden/runs/park-approve/workspace"), &workspace);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["run", "refund-approval", "Hello.", "--timeout", "2.5"])
        .arg("--root")
        .arg(&workspace)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_STORE", format!("fs:{}", crate::support::scratch("retries").display()))
        .env("ARCHMAX_API_BASE_URL", "http://127.0.0.1:9/v1")
        .env("ARCHMAX_API_KEY", "test")
        .env("ARCHMAX_MAX_RETRIES", "1")
        .env("ARCHMAX_MODEL", "test-model")
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let retries: Vec<&str> = stderr.lines().filter(|line| line.starts_with("retrying in ")).collect();
    assert_eq!(retries.len(), 1, "{stderr}");
    assert!(retries[0].contains(" s (attempt 2 of 2): "), "{}", retries[0]);
    let failed: Vec<&str> = stderr.lines().filter(|line| line.contains("failed in assess (turn-error)")).collect();
    assert_eq!(failed.len(), 1, "the final error is one line: {stderr}");

    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["run", "refund-approval", "Hello.", "--timeout", "0"])
        .arg("--root")
        .arg(&workspace)
        .output()
        .expect("archmax runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not a number of seconds"));
    let _ = fs::remove_dir_all(crate::support::scratch("retries"));
    let _ = fs::remove_dir_all(&workspace);
}
