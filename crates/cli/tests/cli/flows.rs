//! `archmax flow run` for the operator: the resume command a pause prints runs as it is
//! printed, a resume past the last model step needs no model configured, and a flow-run
//! id may be given by its start. (The walks themselves are the golden flows'.)

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use archmax_flow::record::{Header, Record};
use archmax_vm::session::SessionStore;
use archmax_vm::session::fs::{FsStore, SealKeys};

use crate::support::{Run, archmax_command, outcome, scratch};

/// A document with a model step, then a person's review, then a command.
pub(crate) const FLOW: &str = "id: release
root:
  id: root
  nodes:
    - id: draft
      run: { prompt: Draft the release notes. }
    - id: review
      needs: [draft]
      run: { kind: operator, prompt: Review the notes. }
    - id: publish
      needs: [review]
      run: { kind: command, command: [sh, -c, \"echo published >> publish.log\"] }
";

const TAPE: &str = "- state: root.draft
  tool_calls: [{ name: answer, args: { outcome: passed, note: drafted } }]
";

pub(crate) fn workspace(label: &str) -> PathBuf {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).expect("scratch workspace");
    fs::write(root.join("flow.yaml"), FLOW).expect("the document");
    fs::write(root.join("tape.yaml"), TAPE).expect("the tape");
    root
}

/// Runs `archmax` from `cwd` with no model configured in the environment.
fn archmax(cwd: &Path, args: &[&str]) -> Run {
    let mut command = archmax_command(cwd, args);
    for variable in ["ARCHMAX_API_BASE_URL", "ARCHMAX_API_KEY", "ARCHMAX_MODEL"] {
        command.env_remove(variable);
    }
    outcome(command)
}

/// Walks the document up to its pause; returns the stderr and the flow-run id.
fn pause(root: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["flow", "run", "--flow", "flow.yaml", "--input", "Ship 1.4, carefully", "--tape", "tape.yaml"];
    args.extend(extra);
    let run = archmax(root, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run
        .stderr
        .lines()
        .find_map(|line| line.split("run ").nth(1)?.strip_suffix(')').map(str::to_string))
        .expect("flow-started names the run");
    (run.stderr, id)
}

#[test]
fn the_pause_prints_a_resume_command_that_runs_as_printed() {
    let root = workspace("flow-resume-command");
    let (stderr, id) = pause(&root, &["--allow-program", "sh", "--session-dir", "my sessions", "--max-attempts", "2"]);
    assert!(stderr.contains("pause ‖ root.review: Review the notes."), "{stderr}");
    // `sessions` reads the same folder by the same flag; the workspace's own store is empty.
    let listed = archmax(&root, &["sessions", "--session-dir", "my sessions", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains(&id), "the paused run's record is listed: {}", listed.stdout);
    let elsewhere = archmax(&root, &["sessions", "--json"]);
    assert!(!elsewhere.stdout.contains(&id), "{}", elsewhere.stdout);
    let both = archmax(&root, &["sessions", "--session-dir", "my sessions", "--store", "fs:"]);
    assert_eq!(both.code, 2, "--session-dir and --store name one store twice: {}", both.stderr);
    for (folder, words) in [("", "the folder is empty"), ("my sessions ", "ends in white space")] {
        // A refused flag is a usage error (2), and for a flow a refusal before it starts (1).
        for (command, code) in [
            (&["sessions", "--session-dir", folder][..], 2),
            (&["flow", "run", "flow.yaml", "--input", "x", "--session-dir", folder][..], 1),
        ] {
            let refused = archmax(&root, command);
            assert_eq!(refused.code, code, "{command:?}: {}", refused.stderr);
            assert!(refused.stderr.contains(words), "{command:?}: {}", refused.stderr);
        }
    }
    let command = stderr.lines().find_map(|line| line.strip_prefix("  archmax ")).expect("the resume command");
    assert_eq!(
        command,
        format!(
            "flow run --flow flow.yaml --tape tape.yaml --allow-program sh --session-dir 'my sessions' \
             --max-attempts 2 --resume {id} --operator passed"
        )
    );
    // Pasted into a shell with `archmax` on the PATH, it finishes the walk.
    let folder = Path::new(env!("CARGO_BIN_EXE_archmax")).parent().expect("the binary's folder");
    let path = format!("{}:{}", folder.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new("sh")
        .args(["-c", &format!("archmax {command}")])
        .current_dir(&root)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY")
        .env_remove("ARCHMAX_MODEL")
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("flow ■ release clean"), "{stderr}");
    assert_eq!(fs::read_to_string(root.join("publish.log")).ok().as_deref(), Some("published\n"));
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_resume_past_the_last_model_step_needs_no_model_and_takes_the_start_of_an_id() {
    let root = workspace("flow-resume-no-model");
    let (_, id) = pause(&root, &["--allow-program", "sh"]);
    // No tape and no endpoint: nothing left to run asks a model.
    let prefix = &id[..6];
    let run = archmax(
        &root,
        &["flow", "run", "--flow", "flow.yaml", "--resume", prefix, "--operator", "passed", "--allow-program", "sh"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains(&format!("resumed (3 steps, run {id})")), "{}", run.stderr);
    assert_eq!(fs::read_to_string(root.join("publish.log")).ok().as_deref(), Some("published\n"));
    // A fresh walk of the same document still has a model step to run, and is refused.
    let run = archmax(&root, &["flow", "run", "--flow", "flow.yaml", "--input", "again"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("the model is not configured"), "{}", run.stderr);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn an_ambiguous_or_unknown_start_of_an_id_is_refused_with_the_candidates() {
    let root = workspace("flow-resume-prefix");
    // Three walks' records in the workspace's store, where `flow run` files them.
    let keys = SealKeys::for_workspace(&root).expect("the workspace's seal key");
    let store: Arc<dyn SessionStore> = Arc::new(FsStore::new(root.join("sessions"), keys));
    let executor = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    for run in ["abc0000000000000-00000001", "abc0000000000000-00000002", "def0000000000000-00000001"] {
        let header = Header {
            flow: "release".into(),
            run: run.into(),
            digest: "d".into(),
            input: "i".into(),
            max_attempts: None,
        };
        executor.block_on(Record::create(store.clone(), &header, 1)).map(drop).expect("a record");
    }
    let resume = |id: &str| {
        archmax(
            &root,
            &["flow", "run", "--flow", "flow.yaml", "--resume", id, "--operator", "passed", "--tape", "tape.yaml"],
        )
    };
    let run = resume("abc");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "error: `abc` is the start of 2 flow-run ids: `abc0000000000000-00000001` and \
         `abc0000000000000-00000002`; give more of the id\n"
    );
    let run = resume("0ff");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("no flow run `0ff` is recorded in the session store"), "{}", run.stderr);
    let _ = fs::remove_dir_all(&root);
}

/// The old layout's record of a walk of [`FLOW`] paused at the review, its draft done.
fn old_record(run: &str) -> String {
    use sha2::Digest;
    let digest = archmax_compiler::lower::hash::hex(&sha2::Sha256::digest(FLOW.as_bytes()));
    format!(
        "{{\"header\":{{\"flow\":\"release\",\"run\":\"{run}\",\"digest\":\"{digest}\",\"input\":\"Ship 1.4\",\
         \"max_attempts\":null}}}}\n\
         {{\"step\":{{\"key\":\"root.1.draft\",\"step\":{{\"outcome\":\"passed\",\"note\":\"drafted\",\"reason\":null,\
         \"gives\":{{}},\"messages\":[],\"spend\":{{\"turns\":1,\"input_tokens\":0,\"output_tokens\":0,\
         \"cost_microunits\":0}},\"tape\":null}}}}}}\n\
         {{\"paused\":{{\"key\":\"root.1.review\"}}}}\n"
    )
}

#[test]
fn an_old_layout_walk_is_imported_on_first_use_then_resumed_and_listed() {
    let root = workspace("flow-old-layout");
    let run = "abc0000000000000-00000001";
    fs::create_dir_all(root.join(".archmax-flows")).expect("the old folder");
    fs::write(root.join(".archmax-flows").join(format!("{run}.flow.jsonl")), old_record(run)).expect("the record");
    // No tape and no endpoint: the draft is the record's, not the model's.
    let resumed = archmax(
        &root,
        &["flow", "run", "flow.yaml", "--resume", "abc", "--operator", "passed", "--allow-program", "sh"],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed.stderr.starts_with(
            "imported 1 walk record(s) and 0 section session(s) from `.archmax-flows` into the session store"
        ),
        "{}",
        resumed.stderr
    );
    assert!(resumed.stderr.contains("step ✓ root.draft (from the record)"), "{}", resumed.stderr);
    assert_eq!(fs::read_to_string(root.join("publish.log")).ok().as_deref(), Some("published\n"));
    assert!(!root.join(".archmax-flows").exists());
    assert!(root.join(".archmax-flows.imported").join(format!("{run}.flow.jsonl")).exists(), "the old files stay");
    let listed = archmax(&root, &["sessions"]);
    assert!(listed.stdout.contains(&format!("{run}  release  completed  -")), "{}", listed.stdout);
    assert!(listed.stdout.contains(&format!("flow run={run} record")), "{}", listed.stdout);
    assert!(listed.stdout.contains(&format!("{run}.root.1  release  completed")), "{}", listed.stdout);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_damaged_old_record_is_refused_saying_how_to_finish_it_and_nothing_moves() {
    let root = workspace("flow-old-damaged");
    let run = "abc0000000000000-00000001";
    let file = root.join(".archmax-flows").join(format!("{run}.flow.jsonl"));
    fs::create_dir_all(root.join(".archmax-flows")).expect("the old folder");
    fs::write(&file, old_record(run).replace("{\"step\":{\"key\"", "{\"stpe\":{\"key\"")).expect("damaged");
    let refused = archmax(&root, &["flow", "run", "flow.yaml", "--input", "again", "--tape", "tape.yaml"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.starts_with(&format!(
            "error: `.archmax-flows/{run}.flow.jsonl` cannot be imported into the session store: line 2 is not a \
             line of a flow record"
        )),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(
            "finish its walks with an archmax built from commit a127c9e or earlier (`archmax flow run FLOW --resume \
             RUN --session-dir .archmax-flows`), or move the folder away"
        ),
        "{}",
        refused.stderr
    );
    assert!(file.exists(), "the old folder is as it was");
    assert_eq!(archmax(&root, &["sessions"]).stdout, "", "nothing was filed");
    let _ = fs::remove_dir_all(&root);
}

/// Runs `archmax` in a pseudo-terminal (`script` from util-linux), typing `typed` on it:
/// what a person at a terminal sees and answers. Returns the status and the terminal's
/// text (stdout and stderr together, as a terminal shows them).
fn at_a_terminal(cwd: &Path, args: &[&str], typed: &str) -> (Option<i32>, String) {
    use std::io::Write;
    let line = std::iter::once(env!("CARGO_BIN_EXE_archmax"))
        .chain(args.iter().copied())
        .map(|word| format!("'{}'", word.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("ARCHMAX_API_BASE_URL")
        .env_remove("ARCHMAX_API_KEY")
        .env_remove("ARCHMAX_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs");
    child.stdin.take().expect("stdin").write_all(typed.as_bytes()).expect("typed");
    let output = child.wait_with_output().expect("the terminal session ends");
    (output.status.code(), String::from_utf8_lossy(&output.stdout).replace('\r', ""))
}

#[test]
fn at_a_terminal_the_operator_is_asked_before_a_write_and_only_yes_lets_it_through() {
    let root = workspace("flow-terminal-approver");
    fs::write(
        root.join("notes.yaml"),
        "id: notes\nroot:\n  id: root\n  nodes:\n    - id: write\n      run: { prompt: Write the notes. }\n",
    )
    .expect("the document");
    fs::write(
        root.join("notes-tape.yaml"),
        "- state: root.write\n  tool_calls:\n    - { name: write_file, args: { file_path: NOTES.md, content: \"1.4\" } }\n\
         - state: root.write\n  tool_calls: [{ name: answer, args: { outcome: passed } }]\n",
    )
    .expect("the tape");
    let walk =
        ["flow", "run", "--flow", "notes.yaml", "--input", "Ship 1.4", "--tape", "notes-tape.yaml", "--no-session"];
    let (code, shown) = at_a_terminal(&root, &walk, "n\n");
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("archmax flow: step root.write asks to call `write_file`"), "{shown}");
    assert!(shown.contains("file_path: \"NOTES.md\"") && shown.contains("Allow it? [y/N]"), "{shown}");
    assert!(shown.contains("the operator said no at the prompt [gate.approver]"), "{shown}");
    assert!(!root.join("NOTES.md").exists(), "a no writes nothing");
    let (code, shown) = at_a_terminal(&root, &walk, "y\n");
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(fs::read_to_string(root.join("NOTES.md")).ok().as_deref(), Some("1.4"), "{shown}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_hook_or_approver_program_that_cannot_be_found_refuses_the_walk_before_it_starts() {
    let root = workspace("flow-missing-programs");
    // The program is looked for beside the hooks file, not in the workspace where a step
    // could have written it.
    fs::create_dir_all(root.join("conf")).expect("a folder");
    fs::write(
        root.join("conf/hooks.json"),
        r#"{"version": 1, "hooks": [{"on": "before-call", "command": ["./policy.sh"]}]}"#,
    )
    .expect("the hooks file");
    fs::write(root.join("policy.sh"), "#!/bin/sh\nexit 0\n").expect("a decoy in the workspace");
    let walk = |extra: &[&str]| {
        let mut args =
            vec!["flow", "run", "--flow", "flow.yaml", "--input", "Ship", "--tape", "tape.yaml", "--no-session"];
        args.extend(extra);
        archmax(&root, &args)
    };
    let hooks = walk(&["--hooks", "conf/hooks.json"]);
    assert_eq!(hooks.code, 1, "{}", hooks.stderr);
    assert!(hooks.stderr.contains("the `before-call` hook's program"), "{}", hooks.stderr);
    assert!(hooks.stderr.contains("conf/policy.sh` is not a file"), "{}", hooks.stderr);
    let approver = walk(&["--approve", "no-such-approver-on-path"]);
    assert_eq!(approver.code, 1, "{}", approver.stderr);
    assert!(approver.stderr.contains("`no-such-approver-on-path` is not found on PATH"), "{}", approver.stderr);
    let _ = fs::remove_dir_all(&root);
}
