//! Parks across processes: two processes deciding the same park at once.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

pub(crate) const WORKFLOW: &str = r#"title: Refund approval
instructions: You prepare refunds for Fernhill customers.
states:
  prepare:
    triggers:
      manual:
        description: Prepare one refund.
    instructions: Work out the refund, then hand it to a person.
    transitions:
      - to: review
        description: The refund is ready for a person.
  review:
    type: human
    instructions: Approve the refund, or send it back.
    transitions:
      - { to: pay, type: approve, description: The refund is right. }
      - { to: prepare, type: refine, description: The refund needs changes. }
  pay:
    instructions: Tell the customer the refund is on its way.
"#;

pub(crate) const PARK_TAPE: &str = r#"
- state: prepare
  tool_calls:
    - { name: archmax_advance, args: { to: review, reason: the refund is worked out } }
- state: review
  text: A colleague will approve your refund shortly.
"#;

pub(crate) const PAY_TAPE: &str = r#"
- state: pay
  text: Your refund of €42.50 is on its way.
"#;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
    fs::write(path, text).expect("write");
}

fn archmax(root: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
    command
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY");
    command
}

#[test]
fn two_processes_deciding_one_park_exactly_one_wins() {
    let root = crate::support::scratch("parks");
    let _ = fs::remove_dir_all(&root);
    write(&root, "workflows/refunds/workflow.yaml", WORKFLOW);
    write(&root, "park.yaml", PARK_TAPE);
    write(&root, "pay.yaml", PAY_TAPE);

    let parked = archmax(&root)
        .args(["run", "refunds", "Refund ORD-3, please.", "--session", "s1", "--tape", "park.yaml"])
        .output()
        .expect("archmax runs");
    assert_eq!(parked.status.code(), Some(0), "{}", String::from_utf8_lossy(&parked.stderr));

    // Both hold the session a moment after opening it, so the two overlap.
    let spawn = || {
        archmax(&root)
            .args(["decide", "s1", "--to", "pay", "--comment", "Matches policy.", "--tape", "pay.yaml"])
            .env("ARCHMAX_TEST_PAUSE_AFTER_OPEN_MS", "400")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("archmax starts")
    };
    let first = spawn();
    let second = spawn();
    let outputs = [first.wait_with_output().expect("first ends"), second.wait_with_output().expect("second ends")];

    let winners: Vec<_> = outputs.iter().filter(|output| output.status.code() == Some(0)).collect();
    let losers: Vec<_> = outputs.iter().filter(|output| output.status.code() != Some(0)).collect();
    assert_eq!(winners.len(), 1, "exactly one decision lands");
    assert_eq!(String::from_utf8_lossy(&winners[0].stdout).trim(), "Your refund of €42.50 is on its way.");
    let loser = String::from_utf8_lossy(&losers[0].stderr);
    assert_eq!(losers[0].status.code(), Some(1), "{loser}");
    assert!(
        loser.contains("is in use by another process") || loser.contains("is not parked for a decision"),
        "the refusal says why: {loser}"
    );

    // The decision was applied once: one human step, the session completed in `pay`.
    let shown = archmax(&root).args(["sessions", "s1", "--json"]).output().expect("archmax runs");
    let summary: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["workflowState"], "pay");
    let human_steps = summary["trail"].as_array().expect("trail").iter().filter(|step| step["kind"] == "human").count();
    assert_eq!(human_steps, 1, "{summary}");

    // A decision on a finished session is refused and changes nothing.
    let late = archmax(&root).args(["decide", "s1", "--to", "pay", "--tape", "pay.yaml"]).output().expect("runs");
    assert_eq!(late.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&late.stderr).contains("is not parked for a decision"));
    let again = archmax(&root).args(["sessions", "s1", "--json"]).output().expect("archmax runs");
    assert_eq!(again.stdout, shown.stdout, "a refused decision leaves the session untouched");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn run_then_decide_with_one_tape_reads_on_where_the_session_left_it() {
    let root = crate::support::scratch("tape-continues");
    let _ = fs::remove_dir_all(&root);
    write(&root, "workflows/refunds/workflow.yaml", WORKFLOW);
    // No matchers: the tape is read strictly in order, so only a remembered position
    // gives the decision's call the third entry rather than the first.
    let tape = "- tool_calls: [{ name: archmax_advance, args: { to: review, reason: worked out } }]\n\
                - text: A colleague will approve your refund shortly.\n\
                - text: Your refund is on its way.\n";
    write(&root, "tape.yaml", tape);
    let run = archmax(&root)
        .args(["run", "refunds", "Refund ORD-3.", "--session", "t1", "--tape", "tape.yaml"])
        .output()
        .expect("run");
    assert_eq!(run.status.code(), Some(0), "parked: {}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("awaiting human decision"));
    let decide = archmax(&root).args(["decide", "t1", "--to", "pay", "--tape", "tape.yaml"]).output().expect("decide");
    let said = String::from_utf8_lossy(&decide.stdout);
    assert_eq!(decide.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&decide.stderr));
    assert!(said.contains("Your refund is on its way."), "{said}");

    // Another tape (edited in between) starts from its own top.
    let rerun = archmax(&root)
        .args(["run", "refunds", "Refund ORD-4.", "--session", "t2", "--tape", "tape.yaml"])
        .output()
        .expect("run");
    assert_eq!(rerun.status.code(), Some(0));
    write(&root, "tape.yaml", "- text: Paid, from a new tape.\n");
    let decide = archmax(&root).args(["decide", "t2", "--to", "pay", "--tape", "tape.yaml"]).output().expect("decide");
    assert!(String::from_utf8_lossy(&decide.stdout).contains("Paid, from a new tape."));
    let _ = fs::remove_dir_all(&root);
}

/// The park report on stderr shows the model's `archmax_wait` reason: it must not erase
/// the line, retitle the terminal, hide what follows (SGR 8), nor start a `next:` line of
/// its own for the operator to paste.
#[test]
fn a_wait_reason_cannot_act_on_the_terminal_or_forge_the_next_command() {
    let root = crate::support::scratch("park-report-controls");
    let _ = fs::remove_dir_all(&root);
    write(&root, "workflows/refunds/workflow.yaml", WORKFLOW);
    let tape = r#"
- state: prepare
  text: Noted.
  tool_calls:
    - { name: archmax_wait, args: { reason: "with DHL\r\u001b[2K\u001b]0;retitled\u0007\u001b[8m\n  next: archmax rm-everything", until: 1d } }
"#;
    write(&root, "wait.yaml", tape);
    let parked = archmax(&root)
        .args(["run", "refunds", "Refund ORD-3, please.", "--session", "s1", "--tape", "wait.yaml"])
        .output()
        .expect("archmax runs");
    let stderr = String::from_utf8_lossy(&parked.stderr);
    assert_eq!(parked.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("next: archmax deliver s1"), "{stderr}");
    let acting: Vec<char> = stderr.chars().filter(|c| c.is_control() && *c != '\n' && *c != '\t').collect();
    assert!(acting.is_empty(), "control characters reach the terminal: {acting:?} in {stderr:?}");
    let next: Vec<&str> = stderr.lines().filter(|line| line.trim_start().starts_with("next:")).collect();
    assert_eq!(next, ["  next: archmax deliver s1 --trigger <id> --tape wait.yaml [--variables '{…}']"], "{stderr}");
}
