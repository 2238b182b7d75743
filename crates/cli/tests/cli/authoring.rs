//! The authoring commands: `archmax init` (each template validates with no warning and
//! its case passes under `--replay`, shown by running exactly those commands on what it
//! wrote; a directory that is not empty is refused by name; a broken tape fails its own
//! case, at its line) and `archmax completions`.

use std::fs;

use crate::support::{archmax, scratch};

const TEMPLATES: [&str; 2] = ["minimal", "support-desk"];

#[test]
fn every_template_validates_without_warning_and_its_case_passes_on_replay() {
    for template in TEMPLATES {
        let base = scratch(&format!("init-{template}"));
        fs::create_dir_all(&base).expect("scratch");
        let init = archmax(&base, &["init", "workspace", "--template", template]);
        assert_eq!(init.code, 0, "{template}: {}", init.stderr);
        let validate = archmax(&base, &["validate", "--root", "workspace"]);
        assert_eq!(validate.code, 0, "{template}: {}", validate.stderr);
        assert_eq!(validate.stdout, "valid — 0 error(s), 0 warning(s)\n", "{template}: {}", validate.stderr);
        assert_eq!(validate.stderr, "", "{template} warns");
        let test = archmax(&base, &["test", "--replay", "--root", "workspace"]);
        assert_eq!(test.code, 0, "{template}: {}", test.stderr);
        assert_eq!(test.stdout, "1 passed, 0 failed, 0 skipped\n", "{template}: {}", test.stderr);
        fs::remove_dir_all(&base).ok();
    }
}

#[test]
fn init_writes_into_an_empty_directory_but_refuses_one_with_files_by_name() {
    let base = scratch("init-refusal");
    fs::create_dir_all(base.join("empty")).expect("scratch");
    let into_empty = archmax(&base, &["init", "empty"]);
    assert_eq!(into_empty.code, 0, "{}", into_empty.stderr);
    assert!(base.join("empty/workflows/hello/workflow.yaml").is_file());

    let again = archmax(&base, &["init", "empty", "--template", "support-desk"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("`empty` is not empty"), "{}", again.stderr);
    assert!(!base.join("empty/workflows/support-desk").exists(), "nothing is written into a refused directory");

    fs::write(base.join("notes.txt"), "a file").expect("write");
    let onto_file = archmax(&base, &["init", "notes.txt"]);
    assert_eq!(onto_file.code, 1);
    assert!(onto_file.stderr.contains("`notes.txt` exists and is not a directory"), "{}", onto_file.stderr);
    assert_eq!(fs::read_to_string(base.join("notes.txt")).expect("read"), "a file");
    fs::remove_dir_all(&base).ok();
}

#[test]
fn every_shell_gets_a_completion_script_naming_the_subcommands() {
    let here = std::env::temp_dir();
    let opening = [
        ("bash", "_archmax()"),
        ("zsh", "#compdef archmax"),
        ("fish", "complete -c archmax"),
        ("powershell", "Register-ArgumentCompleter"),
    ];
    for (shell, first_words) in opening {
        let run = archmax(&here, &["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(first_words), "{shell} script lacks `{first_words}`");
        for subcommand in ["validate", "build", "run", "test", "init", "completions", "explain"] {
            assert!(run.stdout.contains(subcommand), "the {shell} script does not name `{subcommand}`");
        }
    }
    let unknown = archmax(&here, &["completions", "tcsh"]);
    assert_eq!(unknown.code, 2, "an unknown shell is a usage error");
}

#[test]
fn a_broken_tape_fails_its_own_case_at_its_line_and_the_others_still_run() {
    let base = scratch("init-broken-tape");
    fs::create_dir_all(&base).expect("scratch");
    assert_eq!(archmax(&base, &["init", "workspace"]).code, 0);
    let tests = base.join("workspace/workflows/hello/tests");
    fs::copy(tests.join("greeting.test.yaml"), tests.join("second.test.yaml")).expect("copy the case");
    let tape = fs::read_to_string(tests.join("greeting.tape.yaml")).expect("tape");
    fs::write(tests.join("second.tape.yaml"), tape.replace("  text:", "  txt:")).expect("write the tape");

    let validate = archmax(&base, &["validate", "--root", "workspace"]);
    assert_eq!(validate.code, 1);
    assert!(validate.stderr.contains("AMX0911"), "{}", validate.stderr);
    assert!(validate.stderr.contains("workflows/hello/tests/second.tape.yaml:5:3"), "{}", validate.stderr);
    assert!(validate.stderr.contains("did you mean `text`?"), "{}", validate.stderr);

    let test = archmax(&base, &["test", "--replay", "--root", "workspace"]);
    assert_eq!(test.code, 1);
    assert_eq!(test.stdout, "1 passed, 1 failed, 0 skipped\n", "{}", test.stderr);
    assert!(
        test.stderr.contains("the case's tape is invalid: workflows/hello/tests/second.tape.yaml:5:3: AMX0911"),
        "{}",
        test.stderr
    );
    fs::remove_dir_all(&base).ok();
}
