//! `archmax flow run` on a shared PostgreSQL store: a walk paused by one process is
//! resumed by a fresh process in another workspace that shares only the database, and
//! `archmax sessions` lists the walk's record and its attempts from there.
//!
//! Each test starts its own throwaway server (`archmax_store_postgres::test_cluster`)
//! unless `ARCHMAX_TEST_DATABASE_URL` names one; without PostgreSQL they fail, saying
//! how to get it.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use archmax_store_postgres::test_cluster::TestCluster;
use serde_json::Value;

use crate::flows::{FLOW, workspace};

fn archmax(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
        .env_remove("ARCHMAX_STORE")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY")
        .env_remove("ARCHMAX_MODEL")
        .output()
        .expect("archmax runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_walk_paused_by_one_process_is_resumed_by_another_that_shares_only_the_database() {
    let cluster = TestCluster::require();
    let target = cluster.database("flowresume").expect("a database");
    let first = workspace("flow-pg-first");
    let paused = archmax(
        &first,
        &["flow", "run", "flow.yaml", "--input", "Ship 1.4", "--tape", "tape.yaml", "--store", &target, "--json"],
    );
    assert_eq!(paused.status.code(), Some(0), "{}", text(&paused.stderr));
    let events: Vec<Value> =
        text(&paused.stdout).lines().map(|line| serde_json::from_str(line).expect("an event")).collect();
    assert_eq!(events.last().map(|event| event["event"].clone()), Some(Value::from("flow-paused")));
    let run = events[0]["run"].as_str().expect("flow-started names the run").to_string();
    assert!(!first.join("sessions").exists(), "nothing went to the workspace's folder");

    // Another workspace, another process: only the database is shared. A changed
    // document is refused there before anything runs.
    let second = workspace("flow-pg-second");
    fs::write(second.join("changed.yaml"), FLOW.replace("Review the notes.", "Review them.")).expect("a document");
    let refused = archmax(
        &second,
        &["flow", "run", "changed.yaml", "--resume", &run, "--operator", "passed", "--store", &target],
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("was made from another document"), "{}", text(&refused.stderr));
    let resumed = archmax(
        &second,
        &[
            "flow",
            "run",
            "flow.yaml",
            "--resume",
            &run[..8],
            "--operator",
            "passed",
            "--note",
            "read",
            "--allow-program",
            "sh",
            "--store",
            &target,
        ],
    );
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    let stderr = text(&resumed.stderr);
    assert!(stderr.contains("(from the record)"), "the drafted step is replayed, not run: {stderr}");
    assert!(stderr.contains("flow ■ release clean"), "{stderr}");
    assert_eq!(fs::read_to_string(second.join("publish.log")).ok().as_deref(), Some("published\n"));
    assert!(!first.join("publish.log").exists());

    // The database lists the walk's record and its attempt, with their flow run and path.
    let listed = archmax(&first, &["sessions", "--store", &target]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let rows = text(&listed.stdout);
    assert!(rows.contains(&format!("{run}  release  completed  -")), "{rows}");
    assert!(rows.contains(&format!("{run}.root.1  release  completed  -")), "{rows}");
    assert!(rows.contains(&format!("flow run={run} path=root attempt=1")), "{rows}");
    let shown = archmax(&first, &["sessions", &format!("{run}.root.1"), "--json", "--store", &target]);
    let summary: Value = serde_json::from_slice(&shown.stdout).expect("JSON");
    assert_eq!(summary["flow"]["run"], Value::from(run.as_str()));
    assert_eq!(summary["flow"]["path"], "root");
    assert_eq!(summary["flow"]["attempt"], 1);
    let transcript = archmax(&first, &["sessions", &format!("{run}.root.1"), "--transcript", "--store", &target]);
    assert!(text(&transcript.stdout).contains("→ answer"), "the attempt's conversation: {}", text(&transcript.stdout));
    // A finished walk is not resumed again, from either workspace.
    let again =
        archmax(&first, &["flow", "run", "flow.yaml", "--resume", &run, "--operator", "passed", "--store", &target]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already finished"), "{}", text(&again.stderr));
    let _ = fs::remove_dir_all(&first);
    let _ = fs::remove_dir_all(&second);
}
