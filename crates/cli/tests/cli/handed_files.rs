//! `run --file`: a handed file is kept under a name the workflow can predict (the
//! matching `accept` entry, longest first, in lowercase), one that matches no entry is
//! refused before anything is written, and a run refused for any reason leaves the
//! session folder as it was. `run --session` takes the id whole: the start of another id
//! is refused naming it, never continued.

use std::collections::BTreeMap;
use std::fs;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{archmax, scratch};

const ARCHIVE: &str = r#"title: Archive check
instructions: You look at what a customer sent.
tools:
  allow_always: [read_file]
states:
  look:
    triggers:
      manual:
        description: Look at a backup and a receipt.
        requires:
          - { name: backup, type: file, accept: [.gz, .tar.gz], description: The backup. }
          - { name: receipt, type: file, accept: [.pdf], description: The receipt. }
    instructions: Say what was sent.
"#;

const NOTES: &str = r#"title: Notes
instructions: You read a note.
states:
  read:
    triggers:
      manual:
        description: Read one note.
        requires:
          - { name: note, type: file, description: The note. }
    instructions: Say what the note says.
"#;

const RECEIPTS: &str = r#"title: Receipts
instructions: You file an expense receipt.
states:
  file:
    triggers:
      manual:
        description: File one receipt.
        requires:
          - { name: receipt, type: file, accept: [.pdf], description: The receipt. }
          - { name: amount, type: integer, description: The amount in cents. }
    instructions: Say what the receipt is for.
"#;

const TAPE: &str = r#"
- { state: look, text: "A backup and a receipt." }
- { state: look, text: "A backup and a receipt, again." }
"#;

const NOTES_TAPE: &str = r#"
- { state: read, text: "The note is short." }
- { state: read, text: "The note is still short." }
"#;

fn workspace(label: &str) -> PathBuf {
    let root = scratch(label);
    let _ = fs::remove_dir_all(&root);
    for (path, text) in [
        ("workflows/archive/workflow.yaml", ARCHIVE),
        ("workflows/notes/workflow.yaml", NOTES),
        ("workflows/receipts/workflow.yaml", RECEIPTS),
        ("tape.yaml", TAPE),
        ("notes-tape.yaml", NOTES_TAPE),
        ("inbox/nightly.TAR.GZ", "tarball"),
        ("inbox/Receipt.PDF", "%PDF receipt"),
        ("inbox/receipt.docx", "not a pdf"),
        ("inbox/note.txt", "hello"),
    ] {
        let path = root.join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        fs::write(path, text).expect("write");
    }
    root
}

fn run(root: &Path, session: &str, workflow: &str, files: &[&str]) -> crate::support::Run {
    let tape = if workflow == "notes" { "notes-tape.yaml" } else { "tape.yaml" };
    let mut args = vec!["run", workflow, "Here you are.", "--session", session, "--tape", tape];
    for file in files {
        args.extend(["--file", file]);
    }
    archmax(root, &args)
}

/// `run receipts` on session `s1` with the amount given and `file` handed to the receipt.
fn file_receipt(root: &Path, file: &str) -> crate::support::Run {
    archmax(
        root,
        &[
            "run",
            "receipts",
            "File it.",
            "--session",
            "s1",
            "--variables",
            r#"{"amount":1200}"#,
            "--file",
            file,
            "--tape",
            "tape.yaml",
        ],
    )
}

fn variables(root: &Path, id: &str) -> Value {
    let shown = archmax(root, &["sessions", id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let session: Value = serde_json::from_str(&shown.stdout).expect("the session as JSON");
    session["variables"].clone()
}

/// Every file under `dir` with its length and a hash of its bytes, by path relative to it.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (usize, u64)> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = fs::read(&path).expect("readable");
                let mut hasher = DefaultHasher::new();
                bytes.hash(&mut hasher);
                files.insert(path.strip_prefix(dir).expect("inside").to_path_buf(), (bytes.len(), hasher.finish()));
            }
        }
    }
    files
}

#[test]
fn a_handed_file_is_kept_under_the_longest_accept_entry_it_ends_in_lowercased() {
    let root = workspace("handed-accept-suffix");
    let started = run(&root, "s1", "archive", &["backup=inbox/nightly.TAR.GZ", "receipt=inbox/Receipt.PDF"]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let held = variables(&root, "s1");
    assert_eq!(held["backup"]["value"], "scratchpad/inputs/backup.tar.gz", "{held}");
    assert_eq!(held["receipt"]["value"], "scratchpad/inputs/receipt.pdf", "{held}");
    let inputs = root.join("sessions/s1/scratchpad/inputs");
    assert_eq!(fs::read(inputs.join("backup.tar.gz")).expect("the backup was copied"), b"tarball");
    assert_eq!(fs::read(inputs.join("receipt.pdf")).expect("the receipt was copied"), b"%PDF receipt");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_handed_file_no_accept_entry_matches_is_refused_naming_it_and_the_list() {
    let root = workspace("handed-accept-refused");
    let refused = file_receipt(&root, "inbox/receipt.docx");
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("inbox/receipt.docx")
            && refused.stderr.contains("'receipt'")
            && refused.stderr.contains("accepts .pdf")
            && refused.stderr.contains("hand over a file ending in one of them"),
        "the refusal names the file, the list and what to do: {}",
        refused.stderr
    );
    assert!(!root.join("sessions/s1").exists(), "nothing is written for a refused file");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_run_refused_after_its_files_were_read_leaves_the_session_folder_as_it_was() {
    let root = workspace("handed-refused-run");
    let started = run(&root, "s1", "notes", &["inbox/note.txt"]);
    assert_eq!(started.code, 0, "{}", started.stderr);
    let folder = root.join("sessions/s1");
    let before = tree(&folder);
    // A session of another workflow: refused, and the receipt is not copied.
    let refused = file_receipt(&root, "inbox/Receipt.PDF");
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("belongs to workflow `notes`, not `receipts`"), "{}", refused.stderr);
    assert_eq!(tree(&folder), before, "a refused run leaves the session folder unchanged");
    // A new session missing a required input: refused, and no session folder appears.
    let refused = run(&root, "s2", "receipts", &["inbox/Receipt.PDF"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("'amount'"), "the missing input is named: {}", refused.stderr);
    assert!(!root.join("sessions/s2").exists(), "a refused start writes no session folder");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn run_session_continues_a_unique_prefix_aloud_and_new_starts_the_very_id() {
    let root = workspace("run-session-prefix-or-new");
    for id in ["invoice-1", "invoice-10", "receipt-20"] {
        let started = run(&root, id, "notes", &["inbox/note.txt"]);
        assert_eq!(started.code, 0, "{}", started.stderr);
    }
    // An exact id wins over the longer ids it starts.
    let continued = run(&root, "invoice-1", "notes", &[]);
    assert_eq!(continued.code, 0, "{}", continued.stderr);
    assert!(continued.stderr.contains("session invoice-1\n"), "{}", continued.stderr);
    assert!(!continued.stderr.contains("continuing session"), "{}", continued.stderr);
    // `receipt-2` starts one session's id: that session is continued, said aloud with
    // the way to a new `receipt-2` instead.
    let continued = run(&root, "receipt-2", "notes", &[]);
    assert_eq!(continued.code, 0, "{}", continued.stderr);
    assert!(
        continued.stderr.contains("continuing session receipt-20")
            && continued.stderr.contains("to start a new session `receipt-2` instead, add `--new`"),
        "{}",
        continued.stderr
    );
    assert!(!root.join("sessions/receipt-2").exists(), "nothing new was started");
    let before = tree(&root.join("sessions"));
    // `invoice` starts two: refused listing both, with `--new` named.
    let refused = run(&root, "invoice", "notes", &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("2 session ids: invoice-1, invoice-10") && refused.stderr.contains("`--new`"),
        "{}",
        refused.stderr
    );
    // `--new` for an id a session has: refused, before any handed file is copied.
    let refused = archmax(
        &root,
        &[
            "run",
            "notes",
            "Again.",
            "--session",
            "invoice-1",
            "--new",
            "--tape",
            "notes-tape.yaml",
            "--file",
            "inbox/note.txt",
        ],
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("session `invoice-1` exists"), "{}", refused.stderr);
    assert_eq!(tree(&root.join("sessions")), before, "no session was continued or created");
    // `--new` starts exactly the id given, though it starts two others.
    let started = archmax(
        &root,
        &[
            "run",
            "notes",
            "Here you are.",
            "--session",
            "invoice",
            "--new",
            "--tape",
            "notes-tape.yaml",
            "--file",
            "inbox/note.txt",
        ],
    );
    assert_eq!(started.code, 0, "{}", started.stderr);
    assert!(root.join("sessions/invoice").is_dir(), "{}", started.stderr);
    let _ = fs::remove_dir_all(&root);
}
