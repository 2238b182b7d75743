//! `examples/embed.rs`, the README's embedding snippet, run as a host would run it: an
//! artifact and a tape on disk, one turn, the events on stdout.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::compile;

const NOTES: &str = "title: Notes\ninstructions: Keep notes.\nstates:\n  write:\n    triggers:\n      manual:\n        description: Write a note.\n    instructions: Write it.\n";
const TAPE: &str = "- state: write\n  text: Noted.\n";

/// The example's binary, which `cargo test` builds beside the test binaries.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe.parent().and_then(|deps| deps.parent()).expect("the profile folder");
    profile.join("examples").join(format!("embed{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn the_embed_example_runs_a_turn_from_an_artifact_and_prints_its_events() {
    let binary = example_binary();
    assert!(binary.exists(), "`cargo test` builds the example at {}", binary.display());
    let folder = std::env::temp_dir().join(format!("archmax-embed-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a scratch folder");
    let artifact = folder.join("notes.amx");
    let tape = folder.join("tape.yaml");
    std::fs::write(&artifact, archmax_program::artifact::encode(&compile(&[("workflows/notes/workflow.yaml", NOTES)])))
        .expect("the artifact is written");
    std::fs::write(&tape, TAPE).expect("the tape is written");

    let output = Command::new(&binary)
        .arg(&artifact)
        .arg(&tape)
        .args(["notes", "Remember the milk."])
        .current_dir(&folder)
        .output()
        .expect("the example runs");
    std::fs::remove_dir_all(&folder).ok();

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the example failed: {stderr}");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON event"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|event| event["event"].as_str()).collect();
    assert!(kinds.contains(&"state-enter"), "the events: {kinds:?}");
    assert!(stderr.contains("at `write`"), "the outcome line: {stderr}");
}
