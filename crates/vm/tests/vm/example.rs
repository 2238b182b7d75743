//! `examples/embed.rs`, the example the book's embedding guide shows, run as a host would run it: an
//! artifact and a tape on disk, one turn, the events written as JSON lines. The example's
//! code is compiled into this test, so it runs without the example's binary.

use serde_json::Value;

use crate::support::compile;

#[allow(dead_code, reason = "the example's `main` is its binary's; the test calls `run`")]
#[path = "../../examples/embed.rs"]
mod embed;

const NOTES: &str = "title: Notes\ninstructions: Keep notes.\nstates:\n  write:\n    triggers:\n      manual:\n        description: Write a note.\n    instructions: Write it.\n";
const TAPE: &str = "- state: write\n  text: Noted.\n";

#[test]
fn the_embed_example_runs_a_turn_from_an_artifact_and_prints_its_events() {
    let folder = std::env::temp_dir().join(format!("archmax-embed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("a scratch folder");
    let artifact = folder.join("notes.amx");
    let tape = folder.join("tape.yaml");
    let events_path = folder.join("events.jsonl");
    std::fs::write(&artifact, archmax_program::artifact::encode(&compile(&[("workflows/notes/workflow.yaml", NOTES)])))
        .expect("the artifact is written");
    std::fs::write(&tape, TAPE).expect("the tape is written");
    let events_file = std::fs::File::create(&events_path).expect("the events file");

    let outcome = embed::run(
        artifact.to_str().expect("a UTF-8 path"),
        tape.to_str().expect("a UTF-8 path"),
        "notes",
        "Remember the milk.",
        events_file,
    );
    let written = std::fs::read_to_string(&events_path).expect("the events are read back");
    std::fs::remove_dir_all(&folder).ok();

    let outcome = outcome.expect("the example runs a turn");
    assert_eq!(outcome.state, "write", "the turn ends in `write`");
    let events: Vec<Value> =
        written.lines().map(|line| serde_json::from_str(line).expect("each line is one JSON event")).collect();
    let kinds: Vec<&str> = events.iter().filter_map(|event| event["event"].as_str()).collect();
    assert!(kinds.contains(&"state-enter"), "the events: {kinds:?}");
}
