//! The session store through the binary: a damaged session is refused and repaired on
//! request, and a session killed at random points resumes without losing or repeating
//! a step.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// States `s00` … in a chain; each advances to the next, the last answers.
pub(crate) const CHAIN_LENGTH: usize = 120;
/// How many runs are killed before the session is left to finish.
const KILLS: usize = 20;

pub(crate) fn state_name(index: usize) -> String {
    format!("s{index:02}")
}

fn chain_workflow() -> String {
    let mut yaml = String::from("title: Chain\ninstructions: Walk the chain one state at a time.\nstates:\n");
    for index in 0..CHAIN_LENGTH {
        yaml.push_str(&format!("  {}:\n", state_name(index)));
        if index == 0 {
            yaml.push_str("    triggers:\n      manual:\n        description: Walk the chain.\n");
        }
        yaml.push_str(&format!("    instructions: Step {index} of the chain.\n"));
        if index + 1 < CHAIN_LENGTH {
            yaml.push_str(&format!(
                "    transitions:\n      - to: {}\n        description: Step {index} is done.\n",
                state_name(index + 1)
            ));
        }
    }
    yaml
}

/// One entry per state, matched by state, so a resumed process finds its place.
fn chain_tape() -> String {
    let mut yaml = String::new();
    for index in 0..CHAIN_LENGTH - 1 {
        yaml.push_str(&format!(
            "- state: {}\n  tool_calls:\n    - {{ name: archmax_advance, args: {{ to: {}, reason: step {index} done }} }}\n",
            state_name(index),
            state_name(index + 1)
        ));
    }
    yaml.push_str(&format!("- state: {}\n  text: The chain is walked.\n", state_name(CHAIN_LENGTH - 1)));
    yaml
}

/// A fresh workspace under the temp dir, removed on drop.
pub(crate) struct Workspace(PathBuf);

impl Workspace {
    pub(crate) fn new(label: &str) -> Self {
        let root = crate::support::scratch(&format!("store-{label}"));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("workflows/chain")).expect("workspace");
        fs::write(root.join("workflows/chain/workflow.yaml"), chain_workflow()).expect("workflow");
        fs::write(root.join("tape.yaml"), chain_tape()).expect("tape");
        Self(root)
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
        command
            .args(args)
            .current_dir(&self.0)
            .env("NO_COLOR", "1")
            .env_remove("ARCHMAX_API_BASE_URL")
            .env_remove("ARCHMAX_API_KEY");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("archmax runs")
    }

    fn run_chain(&self, session: &str) -> Command {
        let mut command = self.command(&["run", "chain", "Walk on.", "--session", session, "--tape", "tape.yaml"]);
        command.stdout(Stdio::null()).stderr(Stdio::null());
        command
    }

    /// The session as `sessions ID --json` shows it, or `None` before it exists.
    fn session(&self, id: &str) -> Option<Value> {
        let shown = self.run(&["sessions", id, "--json"]);
        let stderr = String::from_utf8_lossy(&shown.stderr);
        if shown.status.code() == Some(1) && stderr.contains("there is no session") {
            return None;
        }
        assert_eq!(shown.status.code(), Some(0), "sessions {id} --json failed: {stderr}");
        Some(serde_json::from_slice(&shown.stdout).expect("JSON"))
    }

    fn log(&self, id: &str) -> PathBuf {
        self.0.join("sessions").join(id).join("checkpoints/log")
    }

    /// Runs the chain on `session` and kills it as soon as its log has grown by `bytes`,
    /// wherever the process is then (mid-append, syncing, sealing, compacting); returns
    /// whether it was killed, or finished first. Watching the log rather than the clock
    /// lands every kill among commits, however fast the storage and however slow the
    /// process start.
    fn run_killed_after(&self, session: &str, bytes: u64) -> bool {
        let log = self.log(session);
        let length = || fs::metadata(&log).map_or(0, |meta| meta.len());
        let mut child = self.run_chain(session).spawn().expect("archmax starts");
        let mut baseline = length();
        loop {
            let now = length();
            // A compaction starts a new, shorter log.
            baseline = baseline.min(now);
            if now >= baseline + bytes {
                let _ = child.kill();
                break;
            }
            if child.try_wait().expect("the run is waited for").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        child.wait().expect("the run ends").code().is_none()
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The states the chain advanced through, checking the trail on the way: it opens with
/// the trigger at `s00`, every advance (`agent`) goes to the next state, and a resumed
/// run's trigger re-enters the state the session was in. So a step lost or taken twice
/// fails here.
pub(crate) fn walked_states(session: &Value) -> Vec<String> {
    let trail = session["trail"].as_array().expect("a trail");
    let mut walked: Vec<String> = Vec::new();
    for step in trail {
        let to = step["to"].as_str().expect("a target").to_string();
        match (step["kind"].as_str(), walked.last()) {
            (Some("trigger"), None) => assert_eq!(to, state_name(0), "{trail:?}"),
            (Some("trigger"), Some(current)) => {
                assert_eq!(&to, current, "a resume moved the session: {trail:?}");
                continue;
            }
            (Some("agent"), Some(current)) => {
                let next = state_name(walked.len());
                assert_eq!(to, next, "after {current} the trail went to {to}: {trail:?}");
            }
            (kind, _) => panic!("an unexpected trail step {kind:?}: {trail:?}"),
        }
        walked.push(to);
    }
    walked
}

/// A small deterministic generator (xorshift64*), so a failing run can be replayed.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1)
    }
}

#[test]
fn a_session_killed_at_random_points_resumes_without_losing_or_repeating_a_step() {
    let workspace = Workspace::new("kill");
    let expected: Vec<String> = (0..CHAIN_LENGTH).map(state_name).collect();

    let calibration = workspace.run_chain("calibration").status().expect("archmax runs");
    assert!(calibration.success());
    let calibrated = workspace.session("calibration").expect("the calibration session");
    assert_eq!(walked_states(&calibrated), expected);
    assert_eq!(calibrated["status"], "completed");
    // Each run is killed once its log has grown by up to twice an even share of a whole
    // walk's log, so the kills spread over the chain.
    let whole_log = fs::metadata(workspace.log("calibration")).expect("the calibration log").len();
    let share = (2 * whole_log / KILLS as u64).max(1);

    let mut random = Seeded(0x5EED_2026_0011_0009);
    // Kills after which the session had moved on and was not finished.
    let mut interrupted = 0;
    let mut seen = 0;
    for _ in 0..KILLS {
        // A run on a finished session would be a new turn (and the session has read the
        // whole tape): the walk is over.
        if workspace.session("k1").is_some_and(|session| session["status"] == "completed") {
            break;
        }
        let killed = workspace.run_killed_after("k1", 1 + random.below(share));
        // After every kill the session loads (never corrupt), its trail is a prefix of
        // the chain (nothing twice) and no shorter than before (nothing committed lost).
        if let Some(session) = workspace.session("k1") {
            let trail = walked_states(&session);
            assert!(expected.starts_with(&trail), "after a kill the trail is {trail:?}");
            assert!(trail.len() >= seen, "the session went back from {seen} states to {}", trail.len());
            interrupted += usize::from(killed && trail.len() > seen && trail.len() < CHAIN_LENGTH);
            seen = trail.len();
        }
    }
    assert!(interrupted > 0, "no run was killed between two commits of the walk");

    for _ in 0..CHAIN_LENGTH {
        let done = workspace.session("k1").is_some_and(|session| session["status"] == "completed");
        if done {
            break;
        }
        let status = workspace.run_chain("k1").status().expect("archmax runs");
        assert!(status.success(), "a resumed run failed: {status}");
    }
    let finished = workspace.session("k1").expect("the session");
    assert_eq!(finished["status"], "completed");
    assert_eq!(walked_states(&finished), expected);
}

/// A short session `s1` of the chain, walked to the end.
fn walked(label: &str) -> Workspace {
    let workspace = Workspace::new(label);
    assert!(workspace.run_chain("s1").status().expect("archmax runs").success());
    workspace
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_damaged_log_is_refused_everywhere_until_repaired() {
    let workspace = walked("repair");
    let log = fs::read(workspace.log("s1")).expect("log");
    fs::write(workspace.log("s1"), &log[..log.len() / 2]).expect("truncate");

    let shown = workspace.run(&["sessions", "s1", "--json"]);
    assert_eq!(shown.status.code(), Some(1));
    let message = stderr(&shown);
    assert!(message.contains("session `s1`") && message.contains("cut short"), "{message}");
    assert!(message.contains("archmax sessions s1 --repair"), "{message}");
    let resumed = workspace.run(&["run", "chain", "Again.", "--session", "s1", "--tape", "tape.yaml"]);
    assert_eq!(resumed.status.code(), Some(1));
    assert!(stderr(&resumed).contains("cut short"), "{}", stderr(&resumed));
    assert_eq!(fs::read(workspace.log("s1")).expect("log").len(), log.len() / 2, "a refused load changed the log");

    let repaired = workspace.run(&["sessions", "s1", "--repair"]);
    assert_eq!(repaired.status.code(), Some(0), "{}", stderr(&repaired));
    let report = String::from_utf8_lossy(&repaired.stdout);
    assert!(report.starts_with("repaired session `s1`: kept steps through "), "{report}");
    assert!(report.contains("dropped ") && report.contains(" steps, "), "{report}");
    let session = workspace.session("s1").expect("the repaired session loads");
    let trail = walked_states(&session);
    assert!(!trail.is_empty() && trail.len() < CHAIN_LENGTH, "{trail:?}");

    let again = workspace.run(&["sessions", "s1", "--repair"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing was changed"));
}

#[test]
fn repair_needs_a_session_id() {
    let workspace = Workspace::new("repair-usage");
    let refused = workspace.run(&["sessions", "--repair"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let missing = workspace.run(&["sessions", "nope", "--repair"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("there is no session `nope`"), "{}", stderr(&missing));
}
