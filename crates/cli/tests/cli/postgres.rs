//! The binary on the PostgreSQL store: a park made through one process is decided
//! through another (two at once: exactly one wins), sessions are listed and shown from
//! the database, exported and imported into the filesystem store with nothing lost, and
//! a session whose process dies mid-turn is resumed by the next one without a step lost
//! or taken twice.
//!
//! Each test starts its own throwaway server (`archmax_store_postgres::test_cluster`)
//! unless `ARCHMAX_TEST_DATABASE_URL` names one; without PostgreSQL they fail, saying
//! how to get it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use archmax_store_postgres::test_cluster::TestCluster;
use serde_json::Value;

use crate::parks::WORKFLOW;
use crate::store::{CHAIN_LENGTH, state_name, walked_states};
use crate::support::repository;

/// Before the parks test's own entries: the first process writes a file in `prepare`;
/// the second reads it back in `pay`.
const WRITE_ENTRY: &str = r#"
- state: prepare
  tool_calls:
    - { name: write_file, args: { file_path: scratchpad/refund.md, content: "Refund €42.50 to ORD-3." } }
"#;
const READ_ENTRY: &str = r#"
- state: pay
  tool_calls:
    - { name: read_file, args: { file_path: scratchpad/refund.md } }
"#;

struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!("archmax-cli-pg-{label}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("a workspace");
        Scratch(root)
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.0.join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        fs::write(path, text).expect("write");
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
        command
            .args(args)
            .current_dir(&self.0)
            .env("NO_COLOR", "1")
            .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
            .env_remove("ARCHMAX_STORE")
            .env_remove("ARCHMAX_API_BASE_URL")
            .env_remove("ARCHMAX_API_KEY");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("archmax runs")
    }

    /// Runs `archmax args` with `input` on its stdin.
    fn feed(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("archmax starts");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), input).expect("feed stdin");
        child.wait_with_output().expect("archmax ends")
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// The libpq URL form of a throwaway server's key=value target, to use both forms.
fn url_form(target: &str) -> String {
    let field = |name: &str| {
        target.split_whitespace().find_map(|pair| pair.strip_prefix(&format!("{name}="))).unwrap_or_default()
    };
    if target.starts_with("postgres") {
        return target.to_string();
    }
    format!("postgresql://{}@/{}?host={}&port={}", field("user"), field("dbname"), field("host"), field("port"))
}

#[test]
fn a_park_made_through_one_process_is_decided_through_another() {
    let cluster = TestCluster::require();
    let target = cluster.database("clipark").expect("a database");
    let workspace = Scratch::new("park");
    workspace.write("workflows/refunds/workflow.yaml", WORKFLOW);
    workspace.write("park.yaml", &format!("{WRITE_ENTRY}{}", crate::parks::PARK_TAPE));
    workspace.write("pay.yaml", &format!("{READ_ENTRY}{}", crate::parks::PAY_TAPE));

    let parked = workspace.run(&[
        "run",
        "refunds",
        "Refund ORD-3, please.",
        "--session",
        "s1",
        "--tape",
        "park.yaml",
        "--store",
        &target,
    ]);
    assert_eq!(parked.status.code(), Some(0), "{}", text(&parked.stderr));
    assert!(text(&parked.stderr).contains("awaiting human decision at review"), "{}", text(&parked.stderr));
    assert!(!workspace.path().join("sessions/s1").exists(), "nothing went to the filesystem store");

    // The listing comes from the database, under ARCHMAX_STORE as under --store.
    let listed = workspace.command(&["sessions"]).env("ARCHMAX_STORE", &target).output().expect("runs");
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stdout).starts_with("s1  refunds  awaiting_decision  review  started "),
        "{}",
        text(&listed.stdout)
    );
    assert_eq!(text(&workspace.run(&["sessions"]).stdout), "", "the default store is still the workspace's folder");

    // Two processes decide the park at once: one wins, the other is refused untouched.
    let spawn = || {
        workspace
            .command(&["decide", "s1", "--to", "pay", "--comment", "Matches policy.", "--tape", "pay.yaml"])
            .env("ARCHMAX_STORE", &target)
            .env("ARCHMAX_TEST_PAUSE_AFTER_OPEN_MS", "400")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("archmax starts")
    };
    let (first, second) = (spawn(), spawn());
    let outputs = [first.wait_with_output().expect("first ends"), second.wait_with_output().expect("second ends")];
    let winners: Vec<_> = outputs.iter().filter(|output| output.status.code() == Some(0)).collect();
    let losers: Vec<_> = outputs.iter().filter(|output| output.status.code() != Some(0)).collect();
    assert_eq!(winners.len(), 1, "exactly one decision lands: {:?}", outputs.map(|output| text(&output.stderr)));
    assert_eq!(text(&winners[0].stdout).trim(), "Your refund of €42.50 is on its way.");
    let loser = text(&losers[0].stderr);
    assert_eq!(losers[0].status.code(), Some(1), "{loser}");
    assert!(
        loser.contains("is in use by another process") || loser.contains("is not parked for a decision"),
        "the refusal says why: {loser}"
    );

    // Shown through the URL form: decided once, completed in `pay`.
    let url = url_form(&target);
    let summary = json(&workspace.run(&["sessions", "s1", "--json", "--store", &url]));
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["workflowState"], "pay");
    let human = summary["trail"].as_array().expect("trail").iter().filter(|step| step["kind"] == "human").count();
    assert_eq!(human, 1, "{summary}");

    // Export from the database, import into the workspace's folder: the same session,
    // with the file the first process wrote and the second one read.
    let exported = workspace.run(&["sessions", "export", "s1", "--store", &target]);
    assert_eq!(exported.status.code(), Some(0), "{}", text(&exported.stderr));
    let export = text(&exported.stdout);
    assert!(export.contains("\"path\":\"scratchpad/refund.md\""), "{export}");
    assert!(export.contains("Refund €42.50 to ORD-3."), "the read_file result is in the transcript");
    let imported = workspace.feed(&["sessions", "import", "--store", "fs:"], &exported.stdout);
    assert_eq!(imported.status.code(), Some(0), "{}", text(&imported.stderr));
    assert!(text(&imported.stderr).contains("imported session s1"), "{}", text(&imported.stderr));
    assert_eq!(json(&workspace.run(&["sessions", "s1", "--json"])), summary, "nothing lost on the way");
    let note = fs::read_to_string(workspace.path().join("sessions/s1/scratchpad/refund.md")).expect("the file");
    assert_eq!(note, "Refund €42.50 to ORD-3.");

    // Importing it again is refused; a store that names nothing is a usage error.
    let refused = workspace.feed(&["sessions", "import"], &exported.stdout);
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("already exists"), "{}", text(&refused.stderr));
    let bad = workspace.run(&["sessions", "--store", "mysql://db"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    let repair = workspace.run(&["sessions", "s1", "--repair", "--store", &target]);
    assert_eq!(repair.status.code(), Some(1));
    assert!(text(&repair.stderr).contains("PostgreSQL store commits each step whole"), "{}", text(&repair.stderr));
}

#[test]
fn a_process_that_dies_mid_turn_is_resumed_by_another_without_loss_or_repeat() {
    let cluster = TestCluster::require();
    let target = cluster.database("clikill").expect("a database");
    // The filesystem store's kill test's chain: one state per step, the tape matched by
    // state, so a resumed process finds its place.
    let workspace = crate::store::Workspace::new("pg-kill");
    // One run, retried until the lease of the process that died ran out (half a second).
    let walk = |abort_after: Option<usize>| {
        for _ in 0..1000 {
            let mut command =
                workspace.command(&["run", "chain", "Walk on.", "--session", "k1", "--tape", "tape.yaml"]);
            command.env("ARCHMAX_STORE", &target).env("ARCHMAX_STORE_LEASE_TERM", "0.5");
            if let Some(commits) = abort_after {
                command.env("ARCHMAX_TEST_ABORT_AFTER_COMMITS", commits.to_string());
            }
            let output = command.output().expect("archmax runs");
            if !text(&output.stderr).contains("is in use by another process") {
                return output;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the session stayed busy after its process died");
    };
    let show = || json(&workspace.command(&["sessions", "k1", "--json", "--store", &target]).output().expect("runs"));

    // Each process dies (abort: no unlock, no goodbye) right after a few committed steps; its lease runs out, and the next process
    // resumes from the last committed step.
    let mut seen = 0;
    for abort_after in [2, 3, 5, 2, 4] {
        let died = walk(Some(abort_after));
        assert_eq!(died.status.code(), None, "the process was meant to die: {}", text(&died.stderr));
        let trail = walked_states(&show());
        assert!(trail.len() > seen, "the next process moved the session on ({seen} → {})", trail.len());
        seen = trail.len();
    }
    // Then SIGKILL from outside, wherever the run happens to be (the delays only spread
    // the kills over the walk; nothing is asserted about time): after each, the session
    // reads, its trail is a prefix of the chain (nothing twice) and no shorter than
    // before (nothing committed lost).
    let expected: Vec<String> = (0..CHAIN_LENGTH).map(state_name).collect();
    for delay in [120, 260, 90, 400, 200] {
        // A run on a finished session would be a new turn (and the session has read the
        // whole tape): the walk is over.
        if show()["status"] == "completed" {
            break;
        }
        let mut command = workspace.command(&["run", "chain", "Walk on.", "--session", "k1", "--tape", "tape.yaml"]);
        let mut child = command
            .env("ARCHMAX_STORE", &target)
            .env("ARCHMAX_STORE_LEASE_TERM", "0.5")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("archmax starts");
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let trail = walked_states(&show());
        assert!(expected.starts_with(&trail), "after a kill the trail is {trail:?}");
        assert!(trail.len() >= seen, "the session went back from {seen} states to {}", trail.len());
        seen = trail.len();
    }
    // Another process walks it to the end, unless a killed one already did (a further run
    // would be a new turn, and the session has read the whole tape).
    if show()["status"] != "completed" {
        let finished = walk(None);
        assert_eq!(finished.status.code(), Some(0), "{}", text(&finished.stderr));
    }
    let session = show();
    assert_eq!(session["status"], "completed", "{session}");
    assert_eq!(walked_states(&session), expected);
}

/// The commands of a golden run case (`golden/runs/<case>/case.toml`) on a fresh copy of
/// its workspace with the store `store` (`None`: the default folder): each step's exit
/// code, stdout and stderr, with the workspace's path taken out.
fn replay_case(case: &str, label: &str, store: Option<&str>) -> Vec<(Option<i32>, String, String)> {
    let repository = repository();
    let case_dir = repository.join("golden/runs").join(case);
    let parsed: toml::Value =
        toml::from_str(&fs::read_to_string(case_dir.join("case.toml")).expect("case.toml")).expect("a case");
    let workspace = Scratch::new(label);
    let base = parsed.get("base").and_then(toml::Value::as_str).expect("a case on a base workspace");
    for from in [repository.join(base), case_dir.join("workspace")] {
        let copied = Command::new("cp").arg("-a").arg(from.join(".")).arg(workspace.path()).status().expect("cp runs");
        assert!(copied.success(), "copying {}", from.display());
    }
    for generated in ["sessions", "target"] {
        let _ = fs::remove_dir_all(workspace.path().join(generated));
    }
    let real = workspace.path().canonicalize().expect("the workspace");
    let steps = parsed.get("steps").and_then(toml::Value::as_array).expect("steps");
    let outputs = steps
        .iter()
        .map(|step| {
            let args: Vec<&str> = step
                .get("args")
                .and_then(toml::Value::as_array)
                .expect("a command step")
                .iter()
                .filter_map(toml::Value::as_str)
                .collect();
            let mut command = workspace.command(&args);
            if let Some(store) = store {
                command.env("ARCHMAX_STORE", store);
            }
            let output = command.output().expect("archmax runs");
            let shown = |bytes: &[u8]| text(bytes).replace(&*real.to_string_lossy(), "<workspace>");
            (output.status.code(), shown(&output.stdout), shown(&output.stderr))
        })
        .collect();
    let on_disk = workspace.path().join("sessions").exists();
    assert_eq!(on_disk, store.is_none(), "sessions are kept only by the store named");
    outputs
}

#[test]
fn the_specs_workspace_runs_the_same_on_postgres_as_on_the_filesystem() {
    let cluster = TestCluster::require();
    // refund-desk: code states, a real sub-workflow child, a script, the human review
    // decided by a second process, the grader; order-status: a park on archmax_wait and
    // a delivery from another process.
    for case in ["specs-refund-desk", "specs-order-status"] {
        let target = cluster.database(case).expect("a database");
        let on_disk = replay_case(case, &format!("{case}-fs"), None);
        let on_postgres = replay_case(case, &format!("{case}-pg"), Some(&target));
        assert_eq!(on_disk.len(), on_postgres.len());
        for (index, (disk, postgres)) in on_disk.iter().zip(&on_postgres).enumerate() {
            assert_eq!(disk.0, Some(0), "{case} step {index} on disk: {}", disk.2);
            assert_eq!(disk, postgres, "{case} step {index} differs between the stores");
        }
    }
}

/// Runs `archmax args` in `workspace` with `variables` set, and gives its exit code and
/// stderr; a process still running after a minute (a check that let it start serving)
/// is killed and fails the test.
fn ended(workspace: &Scratch, args: &[&str], variables: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = workspace.command(args);
    command.env_remove("ARCHMAX_STORE_LEASE_TERM").stdout(Stdio::null()).stderr(Stdio::piped());
    for (name, value) in variables {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("archmax starts");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let output = child.wait_with_output().expect("archmax ends");
            panic!("`archmax {}` kept running: {}", args.join(" "), text(&output.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("archmax ends");
    (output.status.code(), text(&output.stderr))
}

#[test]
fn store_settings_serve_cannot_use_refuse_the_start_naming_them() {
    let workspace = Scratch::new("settings");
    workspace.write("workflows/refunds/workflow.yaml", WORKFLOW);
    workspace.write("tape.yaml", crate::parks::PARK_TAPE);
    let serve = ["serve", "--listen", "127.0.0.1:0", "--tape", "tape.yaml"];

    // On the filesystem store, PostgreSQL's flags mean nothing: refused, not ignored.
    let (code, stderr) = ended(&workspace, &[&serve[..], &["--lease-term", "2"]].concat(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--lease-term is only for a PostgreSQL store") && stderr.contains("drop it"), "{stderr}");
    let (code, stderr) =
        ended(&workspace, &[&serve[..], &["--store-connections", "4", "--store-behind-pooler"]].concat(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--store-connections, --store-behind-pooler are only for a PostgreSQL store"), "{stderr}");
    // The lease term's variable is fleet-wide: a filesystem store passes it by.
    let (code, stderr) = ended(&workspace, &["sessions"], &[("ARCHMAX_STORE_LEASE_TERM", "soon")]);
    assert_eq!(code, Some(0), "{stderr}");

    let cluster = TestCluster::require();
    let target = cluster.database("clisettings").expect("a database");
    // A lease term the variable gives that cannot be read is refused as the flag's is,
    // by every command that opens the store.
    for args in [&[&serve[..], &["--store", &target]].concat(), &vec!["sessions", "--store", &target]] {
        let (code, stderr) = ended(&workspace, args, &[("ARCHMAX_STORE_LEASE_TERM", "soon")]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("ARCHMAX_STORE_LEASE_TERM: `soon` is not a number of seconds"), "{stderr}");
    }
    // A listening connection that cannot be opened stops the start: the runner would
    // never hear the other runners' turns.
    let nowhere = "postgresql://archmax@127.0.0.1:1/archmax?connect_timeout=5";
    let (code, stderr) =
        ended(&workspace, &[&serve[..], &["--store", &target, "--store-listen", nowhere]].concat(), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot listen for the commits of the other runners") && stderr.contains("--store-listen"),
        "{stderr}"
    );
    assert!(!stderr.contains("is listening"), "it never served: {stderr}");
}
