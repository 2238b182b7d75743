use std::io::Cursor;

use super::*;

fn gate(approver: Approver, before: &[&str], after: &[&str], allow: &[&str]) -> CallGate {
    let hook = |script: &&str| Hook {
        argv: vec!["sh".into(), "-c".into(), (*script).into()],
        timeout: crate::hooks::HOOK_TIMEOUT,
    };
    CallGate {
        flow: "f".into(),
        run: "r".into(),
        allow_program: allow.iter().map(|program| program.to_string()).collect(),
        approver,
        before_call: before.iter().map(hook).collect(),
        after_call: after.iter().map(hook).collect(),
        workspace_root: PathBuf::from("."),
        credential_variables: vec!["GATE_TEST_SECRET".into()],
    }
}

fn call(tool: &str, args: Value) -> GateCall {
    GateCall { path: "root.s".into(), attempt: 2, tool: tool.into(), args }
}

fn approver(script: &str) -> Approver {
    Approver::Program { argv: vec!["sh".into(), "-c".into(), script.into()], timeout: APPROVER_TIMEOUT }
}

#[test]
fn the_gate_admits_a_name_from_path_and_a_path_only_as_written() {
    let allowed = ["cargo".to_string(), "./scripts/check.sh".to_string()];
    let gate = Gate { allow_program: &allowed };
    assert!(gate.admit("cargo").is_ok());
    assert!(gate.admit("./scripts/check.sh").is_ok());
    for smuggled in ["./tools/cargo", "/tmp/x/cargo", "../../cargo", "scripts/check.sh"] {
        let refusal = gate.admit(smuggled).expect_err(smuggled);
        assert!(refusal.contains(&format!("`{smuggled}` is not published")), "{refusal}");
    }
    assert!(gate.admit("make").is_err_and(|refusal| refusal.contains("--allow-program make")));
}

#[test]
fn run_and_writes_need_approval_and_reads_do_not() {
    assert!(needs_approval("run", &json!({"command": ["ls"]})));
    assert!(needs_approval("write_file", &json!({"file_path": "a", "content": ""})));
    assert!(needs_approval("move_file", &json!({"source": "a", "destination": "b"})));
    assert!(!needs_approval("read_file", &json!({"file_path": "a"})));
    assert!(!needs_approval("list_directory", &json!({})));
}

#[test]
fn a_withheld_call_is_refused_before_anything_is_asked() {
    // The approver would say yes and record that it was asked; it is never reached.
    let gate = gate(approver("touch asked; exit 0"), &["exit 0"], &[], &["ls"]);
    let mut events = Vec::new();
    let refusal = gate.before(&call("run", json!({"command": ["rm", "-rf", "x"]})), &mut events).unwrap_err();
    assert!(refusal.reason.contains("--allow-program rm") && refusal.rule == Rule::GateWithheld, "{refusal}");
    let shell = gate.before(&call("run", json!({"command": "ls -l"})), &mut events).unwrap_err();
    assert!(shell.reason.contains("list of strings") && shell.rule == Rule::GateMalformed, "{shell}");
    assert!(events.is_empty(), "{events:?}");
    assert!(!Path::new("asked").exists());
}

#[test]
fn the_approver_reads_the_call_and_its_no_is_a_refusal_with_its_reason() {
    let script = r#"read -r line; case "$line" in *'"ask":"approval"'*'"tool":"run"'*) ;; *) exit 9;; esac
        case "$line" in *'"attempt":2'*) echo '{"reason":"not on a friday"}'; exit 2;; esac; exit 0"#;
    let gate = gate(approver(script), &[], &[], &["ls"]);
    let mut events = Vec::new();
    let refusal = gate.before(&call("run", json!({"command": ["ls"]})), &mut events).unwrap_err();
    assert_eq!(refusal, Refused::new(Rule::GateApprover, "the approver said no to `run`: not on a friday"));
    let FlowEvent::Approval { by, verdict, status, reason, .. } = &events[0] else { panic!("{events:?}") };
    assert_eq!((by.as_str(), verdict.as_str(), *status), ("program", "no", Some(2)));
    assert_eq!(reason.as_deref(), Some("not on a friday"));
    // A read needs no approval: the same approver is not asked.
    let mut events = Vec::new();
    assert!(gate.before(&call("read_file", json!({"file_path": "a"})), &mut events).is_ok());
    assert!(events.is_empty());
}

#[test]
fn an_approver_that_cannot_answer_is_a_no() {
    for script in ["exit 1", "kill -9 $$"] {
        let gate = gate(approver(script), &[], &[], &[]);
        let mut events = Vec::new();
        let refusal = gate.before(&call("write_file", json!({"file_path": "a", "content": "x"})), &mut events);
        assert!(refusal.is_err_and(|refusal| refusal.reason.contains("the approver")), "{script}");
    }
    let missing = Approver::Program { argv: vec!["./no-such-approver".into()], timeout: APPROVER_TIMEOUT };
    let gate = gate(missing, &[], &[], &[]);
    let refusal = gate.before(&call("write_file", json!({"file_path": "a"})), &mut Vec::new()).unwrap_err();
    assert!(refusal.reason.contains("could not be started") && refusal.rule == Rule::GateApprover, "{refusal}");
}

#[test]
fn before_call_hooks_are_asked_in_order_after_the_approver_and_the_first_refusal_wins() {
    let gate = gate(
        approver("exit 0"),
        &[r#"grep -q '"hook":"before-call"' && exit 0; exit 5"#, "echo blocked >&2; exit 2", "exit 0"],
        &[],
        &[],
    );
    let mut events = Vec::new();
    let refusal = gate.before(&call("write_file", json!({"file_path": "a"})), &mut events).unwrap_err();
    assert_eq!(refusal, Refused::new(Rule::GateBeforeCall, "a before-call hook refused `write_file`: blocked"));
    let kinds: Vec<String> = events.iter().map(|event| event.json()).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(kinds[0].contains(r#""event":"approval""#), "{kinds:?}");
    assert!(
        kinds[1]
            .contains(r#""point":"before-call","path":"root.s","tool":"write_file","attempt":2,"verdict":"proceed""#)
    );
    assert!(kinds[2].contains(r#""verdict":"refuse","status":2,"reason":"blocked""#), "{kinds:?}");
}

#[test]
fn after_call_hooks_see_the_outcome_and_may_withhold_it() {
    let hook = r#"read -r line; case "$line" in *'"status":"error"'*'"result":"exit status 3'*) echo '{"reason":"leaks"}'; exit 2;; esac; exit 0"#;
    let gate = gate(Approver::Unattended, &[], &[hook], &[]);
    let asked = call("read_file", json!({"file_path": "a"}));
    let mut events = Vec::new();
    assert!(gate.after(&asked, "ok", "exit status 0", &mut events).is_ok());
    let refusal = gate.after(&asked, "error", "exit status 3\n", &mut events).unwrap_err();
    assert_eq!(
        refusal,
        Refused::new(Rule::GateAfterCall, "an after-call hook withheld the result of `read_file`: leaks")
    );
    assert_eq!(events.len(), 2);
}

#[test]
fn the_prompt_takes_only_yes_for_an_answer() {
    let answer = |typed: &str| {
        let mut shown = Vec::new();
        let yes = prompt("Allow it?", &mut Cursor::new(typed.as_bytes().to_vec()), &mut shown);
        assert_eq!(String::from_utf8_lossy(&shown), "Allow it? [y/N] ");
        yes
    };
    assert!(answer("y\n") && answer("YES\n") && answer(" yes \n"));
    assert!(!answer("\n") && !answer("n\n") && !answer("yess\n") && !answer(""));
}

#[test]
fn the_terminal_question_shows_arguments_as_json() {
    let asked = call("run", json!({"command": ["echo", "\u{1b}[2Jgone"]}));
    let question = question(&asked);
    assert!(!question.contains('\u{1b}') && question.contains("\\u001b[2Jgone"), "{question}");
    assert!(question.contains("root.s") && question.contains("`run`"));
}

#[test]
fn the_terminal_question_never_hides_what_the_call_acts_on() {
    // A long content must not push the path written out of sight (JSON sorts `content`
    // before `file_path`), nor a long argv hide its last words.
    let write = call("write_file", json!({"content": "x".repeat(2000), "file_path": ".git/hooks/pre-commit"}));
    let asked = question(&write);
    assert!(asked.contains(".git/hooks/pre-commit"), "{asked}");
    assert!(asked.contains("more characters not shown"), "a cut is said: {asked}");
    let padding = "y".repeat(600);
    let run = call("run", json!({"command": ["sh", "-c", format!("echo {padding}"), "--then-rm-rf-home"]}));
    let asked = question(&run);
    assert!(asked.contains("--then-rm-rf-home"), "{asked}");
}
