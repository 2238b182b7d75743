//! `archmax build`, `archmax inspect` and `archmax graph` on the example workspace,
//! against the recordings in `golden/inspect/` and `golden/graph/`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::golden::compare_or_update;
use crate::support::{archmax, repository};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("archmax-cli-{}-{name}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn build_specs(output: &Path) {
    let run = archmax(&repository(), &["build", "--root", "specs", "-o", &output.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with(&format!("built {} — 3 workflow(s), ", output.display())), "{}", run.stdout);
    assert!(run.stdout.contains("sha256 "), "{}", run.stdout);
}

#[test]
fn building_twice_gives_identical_bytes() {
    let dir = scratch("twice");
    let (first, second) = (dir.join("a.amx"), dir.join("b.amx"));
    build_specs(&first);
    build_specs(&second);
    assert_eq!(fs::read(&first).expect("first"), fs::read(&second).expect("second"));
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn inspect_and_graph_match_their_recordings() {
    let dir = scratch("golden");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    let mut failures = Vec::new();
    let golden = repository().join("golden");
    let artifact_arg = artifact.to_string_lossy().into_owned();
    let cases: Vec<(PathBuf, Vec<&str>)> = vec![
        (golden.join("inspect/specs.txt"), vec!["inspect", &artifact_arg]),
        (golden.join("inspect/specs.json"), vec!["inspect", &artifact_arg, "--format", "json"]),
        (
            golden.join("inspect/refund-desk.review.txt"),
            vec!["inspect", &artifact_arg, "--workflow", "refund-desk", "--state", "review"],
        ),
        (golden.join("graph/specs.mmd"), vec!["graph", "--root", "specs"]),
        (golden.join("graph/specs.dot"), vec!["graph", "--root", "specs", "--format", "dot"]),
        (golden.join("graph/refund-desk.json"), vec!["graph", "refund-desk", "--root", "specs", "--format", "json"]),
    ];
    for (path, args) in cases {
        let run = archmax(&repository(), &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        // The artifact's temporary location is not part of the recording.
        let stdout = run.stdout.replace(&artifact_arg, "specs.amx");
        compare_or_update(&path, &stdout, &mut failures);
    }
    fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn build_refuses_an_invalid_workspace_with_its_diagnostics() {
    let case = repository().join("golden/diagnostics/AMX0301-human-edge");
    let output = scratch("refused").join("x.amx");
    let run = archmax(&case, &["build", "--root", "workspace", "-o", &output.to_string_lossy()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("AMX0301"), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was built"), "{}", run.stderr);
    assert!(!output.exists(), "a refused build writes nothing");
}

#[test]
fn inspect_refuses_damaged_files_in_one_line() {
    let dir = scratch("damaged");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    let mut bytes = fs::read(&artifact).expect("artifact");
    // The last byte is the signature block's kind; the one before it ends the payload.
    let last_of_payload = bytes.len() - 2;
    bytes[last_of_payload] ^= 0xff;
    let damaged = dir.join("damaged.amx");
    fs::write(&damaged, &bytes).expect("write");
    let truncated = dir.join("truncated.amx");
    fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let foreign = dir.join("foreign.amx");
    fs::write(&foreign, b"{\"not\": \"an artifact\"}").expect("write");
    for (file, expected) in [(&damaged, "checksum"), (&truncated, "truncated"), (&foreign, "not an archmax artifact")] {
        let run = archmax(&repository(), &["inspect", &file.to_string_lossy()]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains(expected), "{}", run.stderr);
        assert_eq!(run.stdout, "");
    }
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn inspect_filters_name_what_is_missing() {
    let dir = scratch("filters");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    let artifact_arg = artifact.to_string_lossy();
    let run = archmax(&repository(), &["inspect", &artifact_arg, "--workflow", "refund-desk", "--state", "nope"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("has no state `nope`"), "{}", run.stderr);
    let run = archmax(&repository(), &["inspect", &artifact_arg, "--state", "review"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--workflow"), "{}", run.stderr);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn graph_draws_every_edge_kind() {
    let run = archmax(&repository(), &["graph", "refund-desk", "--root", "specs"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("trigger_manual --> state_screen_request"), "{}", run.stdout);
    assert!(run.stdout.contains("trigger_email_reply --> state_screen_request"), "{}", run.stdout);
    assert!(run.stdout.contains("-->|approve|"), "{}", run.stdout);
    assert!(run.stdout.contains("-.->|on_error|"), "{}", run.stdout);
}
