//! Loading from disk: special files and links leaving the root are diagnostics, never
//! hangs or leaks. Tests that meet a named pipe would block forever if loading opened it
//! the ordinary way: the test finishing is the proof.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{FileType, Mode};

use super::*;

const WORKFLOW: &str =
    "instructions: Answer questions.\nstates:\n  answer:\n    triggers:\n      manual:\n    instructions: Answer.\n";
const SECRET: &str = "TOP-SECRET host credentials: hunter2";

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A scratch folder holding `workspace/` (with one valid workflow) and a secret beside it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("archmax-compiler-{label}-{}-{sequence}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(path.join("workspace/workflows/orders")).unwrap();
        fs::write(path.join("workspace/workflows/orders/workflow.yaml"), WORKFLOW).unwrap();
        fs::write(path.join("secret.yaml"), format!("{SECRET}\n: [unbalanced")).unwrap();
        fs::create_dir_all(path.join("outside")).unwrap();
        fs::write(path.join("outside/workflow.yaml"), SECRET).unwrap();
        Scratch(path)
    }

    fn root(&self) -> PathBuf {
        self.0.join("workspace")
    }

    fn put(&self, path: &str, text: &str) {
        let full = self.root().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }

    fn fifo(&self, path: &str) {
        let full = self.root().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        make_fifo(&full);
    }

    fn link(&self, path: &str, target: impl AsRef<Path>) {
        let full = self.root().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        symlink(target, full).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn make_fifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
}

/// The messages of the file-read diagnostics, sorted.
fn file_read_messages(workspace: &Workspace) -> Vec<String> {
    let mut messages: Vec<String> = workspace
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.code == Code::FileRead)
        .map(|diagnostic| diagnostic.message.clone())
        .collect();
    messages.sort();
    messages
}

#[test]
fn a_named_pipe_anywhere_under_a_workflow_or_skill_is_a_diagnostic() {
    let scratch = Scratch::new("fifo");
    scratch.fifo("workflows/orders/tests/stuck.test.yaml");
    scratch.fifo("workflows/orders/tests/fixtures/data.json");
    scratch.fifo("workflows/orders/scripts/unreferenced.txt");
    scratch.fifo("workflows/orders/scripts/hook.js");
    scratch.fifo("workflows/orders/notes.md");
    scratch.put("skills/lookup/SKILL.md", "---\nname: lookup\ndescription: Look things up.\n---\n");
    scratch.fifo("skills/lookup/assets/feed");
    scratch.fifo("workflows/stalled/workflow.yaml");
    scratch.fifo("AGENTS.md");

    let workspace = load_workspace(&scratch.root()).unwrap();
    let pipe = |path: &str| format!("`{path}` is a named pipe, not a regular file, so it was not read");
    let mut expected = vec![
        pipe("AGENTS.md"),
        pipe("skills/lookup/assets/feed"),
        pipe("workflows/orders/notes.md"),
        pipe("workflows/orders/scripts/hook.js"),
        pipe("workflows/orders/scripts/unreferenced.txt"),
        pipe("workflows/orders/tests/fixtures/data.json"),
        pipe("workflows/orders/tests/stuck.test.yaml"),
        pipe("workflows/stalled/workflow.yaml"),
    ];
    expected.sort();
    assert_eq!(file_read_messages(&workspace), expected);
    let orders = workspace.workflow("orders").unwrap();
    assert!(!orders.test_files.contains("fixtures/data.json"), "a refused file is nothing `from:` may name");
    assert_eq!(orders.cases.len(), 1, "the refused case is registered, unread, so findings can name it");
}

#[test]
fn validation_of_a_workspace_with_a_pipe_finishes_with_an_error() {
    let scratch = Scratch::new("fifo-validate");
    scratch.fifo("workflows/orders/tests/stuck.test.yaml");
    let analysis = crate::analysis::analyze(&scratch.root()).unwrap();
    let report = analysis.report(&[]).unwrap();
    let codes: Vec<Code> = report.workflows[0].diagnostics.iter().map(|diagnostic| diagnostic.code).collect();
    assert_eq!(codes, vec![Code::FileRead]);
}

#[test]
fn a_workflow_file_linked_out_of_the_workspace_is_named_and_never_read() {
    let scratch = Scratch::new("link-out");
    let secret = scratch.0.join("secret.yaml");
    scratch.link("workflows/leaky/workflow.yaml", &secret);
    scratch.link("workflows/relative/workflow.yaml", "../../../secret.yaml");
    scratch.link("workflows/orders/WORKFLOW.md", &secret);
    scratch.link("workflows/orders/scripts/steal.js", &secret);
    scratch.link("workflows/orders/tests/steal.test.yaml", &secret);
    scratch.link("workflows/orders/tests/seed.json", &secret);
    scratch.link("skills/stolen/SKILL.md", &secret);
    scratch.link("AGENTS.md", &secret);
    scratch.link("archmax.toml", &secret);

    let analysis = crate::analysis::analyze(&scratch.root()).unwrap();
    let out = |path: &str| format!("`{path}` is a symbolic link that leads outside the workspace, so it was not read");
    let mut expected = vec![
        out("AGENTS.md"),
        out("archmax.toml"),
        out("skills/stolen/SKILL.md"),
        out("workflows/leaky/workflow.yaml"),
        out("workflows/orders/WORKFLOW.md"),
        out("workflows/orders/scripts/steal.js"),
        out("workflows/orders/tests/seed.json"),
        out("workflows/orders/tests/steal.test.yaml"),
        out("workflows/relative/workflow.yaml"),
    ];
    expected.sort();
    assert_eq!(file_read_messages(&analysis.workspace), expected);

    let report = analysis.report(&[]).unwrap();
    for diagnostic in report.workflows.iter().flat_map(|workflow| &workflow.diagnostics) {
        let shown = format!("{} {:?} {:?}", diagnostic.message, diagnostic.help, diagnostic.label);
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    for (_, file) in analysis.sources().files() {
        assert!(!file.text.contains("hunter2"), "{} holds the secret", file.name);
    }
}

#[test]
fn a_directory_linked_out_of_the_workspace_is_named_and_never_walked() {
    let scratch = Scratch::new("dir-out");
    scratch.link("workflows/borrowed", scratch.0.join("outside"));
    scratch.link("workflows/orders/tests/shared", scratch.0.join("outside"));
    scratch.link("skills/borrowed", scratch.0.join("outside"));
    scratch.link(".platform", scratch.0.join("outside"));
    let analysis = crate::analysis::analyze(&scratch.root()).unwrap();
    let workspace = &analysis.workspace;
    let out = |path: &str| format!("`{path}` is a symbolic link that leads outside the workspace, so it was not read");
    let expected =
        vec![out(".platform"), out("skills/borrowed"), out("workflows/borrowed"), out("workflows/orders/tests/shared")];
    assert_eq!(file_read_messages(workspace), expected);
    assert!(workspace.workflow("borrowed").is_none());
    assert!(workspace.sources.files().all(|(_, file)| !file.text.contains("hunter2")));
    let report = analysis.report(&[]).unwrap();
    let mut reported: Vec<String> =
        report.workflows[0].diagnostics.iter().map(|diagnostic| diagnostic.message.clone()).collect();
    reported.sort();
    assert_eq!(reported, expected, "validate shows every one of them");
}

#[test]
fn a_mount_whose_source_leads_out_of_the_workspace_is_named() {
    let scratch = Scratch::new("mount-out");
    scratch.put("archmax.toml", "[mounts.\"reference/\"]\nsource = \"docs\"\n");
    scratch.link("docs", scratch.0.join("outside"));
    scratch.link("skills", scratch.0.join("outside"));
    let workspace = load_workspace(&scratch.root()).unwrap();
    let out = |path: &str| format!("`{path}` is a symbolic link that leads outside the workspace, so it was not read");
    assert_eq!(file_read_messages(&workspace), vec![out("docs"), out("skills")]);
}

#[test]
fn links_that_stay_inside_the_workspace_are_followed() {
    let scratch = Scratch::new("link-in");
    scratch.put("shared/workflow.yaml", WORKFLOW);
    scratch.put("shared/scripts/common.js", "export default 1;\n");
    scratch.link("workflows/copy/workflow.yaml", "../../shared/workflow.yaml");
    scratch.link("workflows/orders/scripts", "../../shared/scripts");
    let workspace = load_workspace(&scratch.root()).unwrap();
    assert_eq!(file_read_messages(&workspace), Vec::<String>::new());
    let copy = workspace.workflow("copy").unwrap();
    assert_eq!(workspace.sources.text(copy.spec.unwrap()), WORKFLOW);
    let orders = workspace.workflow("orders").unwrap();
    assert_eq!(orders.scripts.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), vec!["scripts/common.js"]);
}

#[test]
fn a_link_inside_a_mount_source_is_warned_about_and_never_descended() {
    let scratch = Scratch::new("mount-link");
    scratch.put("archmax.toml", "[mounts.\"reference/\"]\nsource = \"reference\"\n");
    scratch.put("reference/internal/rates.md", "rates\n");
    scratch.link("reference/alias", "internal");
    scratch.link("reference/internal/loop", "..");
    let workspace = load_workspace(&scratch.root()).unwrap();
    let warnings: Vec<String> = workspace
        .diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.code == Code::LinkInMount)
        .map(|diagnostic| diagnostic.message.clone())
        .collect();
    let link = |path: &str| {
        format!("`{path}` is a symbolic link inside the source of the mount `reference/`; sessions never follow it")
    };
    assert_eq!(warnings, vec![link("reference/alias"), link("reference/internal/loop")]);
    assert!(workspace.diagnostics.iter().filter(|d| d.code == Code::LinkInMount).all(|d| !d.is_error()));
}

#[test]
fn disk_files_judge_kinds_on_the_handle() {
    let scratch = Scratch::new("kinds");
    scratch.fifo("pipe");
    scratch.link("out", scratch.0.join("secret.yaml"));
    scratch.link("dangling", "missing");
    let files = DiskFiles::open(&scratch.root()).unwrap();
    assert_eq!(files.kind("pipe"), Some(Kind::Refused(Refusal::NotRegular("a named pipe"))));
    assert_eq!(files.kind("out"), Some(Kind::Refused(Refusal::LeavesRoot)));
    assert_eq!(files.kind("workflows"), Some(Kind::Directory));
    assert_eq!(files.kind("dangling"), None);
    assert_eq!(files.kind("../secret.yaml"), Some(Kind::Refused(Refusal::LeavesRoot)));
    assert!(matches!(files.read("pipe", 100), Err(ReadError::Refused(Refusal::NotRegular("a named pipe")))));
    assert!(matches!(files.read("out", 100), Err(ReadError::Refused(Refusal::LeavesRoot))));
    assert!(matches!(files.read("workflows/orders/workflow.yaml", 10), Err(ReadError::TooLarge(_))));
    let entries = files.entries("");
    assert_eq!(
        entries,
        vec![
            ("dangling".to_string(), Kind::File),
            ("out".to_string(), Kind::Refused(Refusal::LeavesRoot)),
            ("pipe".to_string(), Kind::Refused(Refusal::NotRegular("a named pipe"))),
            ("workflows".to_string(), Kind::Directory),
        ]
    );
    let _listener = std::os::unix::net::UnixListener::bind(scratch.root().join("socket")).unwrap();
    assert!(matches!(files.read("socket", 100), Err(ReadError::Refused(Refusal::NotRegular("a socket")))));
}
