use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

/// A fresh directory under the system temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let sequence = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("archmax-stdlib-{label}-{}-{sequence}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Scratch(path)
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

fn is_link_refusal(error: &VfsError) -> bool {
    matches!(error, VfsError::Other(_, detail) if detail.contains("symbolic link"))
}

/// A session folder with a log beside its scratchpad, and a secret outside it.
struct Session {
    scratch: Scratch,
    root: PathBuf,
    store: DiskVfs,
}

impl Session {
    fn new(label: &str) -> Session {
        let scratch = Scratch::new(label);
        let root = scratch.0.join("session");
        fs::create_dir_all(root.join("checkpoints")).unwrap();
        fs::create_dir_all(root.join("scratchpad")).unwrap();
        fs::write(root.join("checkpoints/log"), b"the session's log").unwrap();
        fs::write(scratch.0.join("secret.txt"), b"host secret").unwrap();
        let store = DiskVfs::new(&root);
        Session { scratch, root, store }
    }
}

#[test]
fn writes_create_parents_and_read_back() {
    let scratch = Scratch::new("write");
    let store = DiskVfs::new(scratch.0.join("session"));
    store.write("scratchpad/deep/a.txt", b"hello").unwrap();
    assert_eq!(store.read("scratchpad/deep/a.txt").unwrap(), b"hello");
    store.write("scratchpad/deep/a.txt", b"again").unwrap();
    assert_eq!(store.read("scratchpad/deep/a.txt").unwrap(), b"again");
    assert_eq!(store.list("scratchpad/deep").unwrap(), vec![Entry::file("a.txt", 5)]);
    assert_eq!(store.stat("scratchpad").unwrap(), Some(Entry::directory("scratchpad")));
    assert_eq!(store.stat("scratchpad/deep/a.txt").unwrap(), Some(Entry::file("a.txt", 5)));
    assert_eq!(store.stat("scratchpad/none").unwrap(), None);
    assert_eq!(store.stat("scratchpad/deep/a.txt/below").unwrap(), None);
    store.remove("scratchpad/deep/a.txt").unwrap();
    assert_eq!(store.stat("scratchpad/deep/a.txt").unwrap(), None);
}

#[test]
fn no_staging_file_is_left_behind() {
    let scratch = Scratch::new("staging");
    let store = DiskVfs::new(&scratch.0);
    for round in 0..5 {
        store.write("a.txt", format!("round {round}").as_bytes()).unwrap();
    }
    assert_eq!(fs::read_dir(&scratch.0).unwrap().count(), 1);
    assert_eq!(store.list("").unwrap(), vec![Entry::file("a.txt", 7)]);
}

/// The pid of a process that has exited (and been reaped), so no live writer owns it.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn staging_files_of_a_killed_writer_are_removed_when_their_folder_is_opened() {
    let scratch = Scratch::new("stale-staging");
    let store = DiskVfs::new(&scratch.0);
    store.write("notes/a.txt", b"a").unwrap();
    store.write("other/b.txt", b"b").unwrap();
    let dead = dead_pid();
    let stale_listed = scratch.0.join(format!("notes/{STAGING_PREFIX}{dead}-0"));
    let stale_written = scratch.0.join(format!("other/{STAGING_PREFIX}{dead}-1"));
    let live = scratch.0.join(format!("notes/{STAGING_PREFIX}{}-999999", std::process::id()));
    for path in [&stale_listed, &stale_written, &live] {
        fs::write(path, b"half a write").unwrap();
    }

    assert_eq!(store.list("notes").unwrap(), vec![Entry::file("a.txt", 1)], "never listed");
    assert!(!stale_listed.exists(), "listing the folder removes an abandoned staging file");
    assert!(live.exists(), "a live writer's staging file stays");
    store.write("other/b.txt", b"bee").unwrap();
    assert!(!stale_written.exists(), "writing into the folder removes one too");
    let name = format!("notes/{STAGING_PREFIX}{}-999999", std::process::id());
    for error in [store.read(&name).unwrap_err(), store.write(&name, b"x").unwrap_err()] {
        assert!(matches!(&error, VfsError::Other(_, detail) if detail.contains("reserved")), "{error}");
    }
}

#[test]
fn refusals_name_the_store_path_only() {
    let scratch = Scratch::new("refusals");
    let store = DiskVfs::new(&scratch.0);
    store.write("dir/a.txt", b"a").unwrap();
    assert_eq!(store.read("dir"), Err(VfsError::IsADirectory("dir".to_string())));
    assert_eq!(store.read("missing.txt"), Err(VfsError::NotFound("missing.txt".to_string())));
    assert_eq!(store.write("dir", b"x"), Err(VfsError::IsADirectory("dir".to_string())));
    assert_eq!(store.write("", b"x"), Err(VfsError::IsADirectory(String::new())));
    assert_eq!(store.remove("dir"), Err(VfsError::IsADirectory("dir".to_string())));
    assert_eq!(store.remove("missing.txt"), Err(VfsError::NotFound("missing.txt".to_string())));
    assert_eq!(store.list("dir/a.txt"), Err(VfsError::NotADirectory("dir/a.txt".to_string())));
    assert!(store.write("dir/a.txt/under", b"x").is_err());
    let host = scratch.0.to_string_lossy().to_string();
    for error in [store.read("missing.txt").unwrap_err(), store.list("nope").unwrap_err()] {
        assert!(!error.to_string().contains(&host), "{error}");
    }
}

#[test]
fn climbing_and_absolute_paths_are_escapes() {
    let scratch = Scratch::new("escape");
    fs::write(scratch.0.join("secret.txt"), b"secret").unwrap();
    let store = DiskVfs::new(scratch.0.join("session"));
    store.write("a.txt", b"a").unwrap();
    assert_eq!(store.read("../secret.txt"), Err(VfsError::Escape("../secret.txt".to_string())));
    assert_eq!(store.read("a/../../secret.txt"), Err(VfsError::Escape("a/../../secret.txt".to_string())));
    let absolute = scratch.0.join("secret.txt").to_string_lossy().to_string();
    assert_eq!(store.read(&absolute), Err(VfsError::Escape(absolute.clone())));
    assert_eq!(store.write("../planted.txt", b"x"), Err(VfsError::Escape("../planted.txt".to_string())));
    assert!(!scratch.0.join("planted.txt").exists());
}

#[test]
fn a_mount_follows_no_link_even_one_that_stays_beneath_its_root() {
    let scratch = Scratch::new("symlink");
    let outside = scratch.0.join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), b"secret").unwrap();
    let root = scratch.0.join("mount");
    fs::create_dir_all(root.join("inner")).unwrap();
    fs::write(root.join("inner/ok.txt"), b"ok").unwrap();
    symlink(&outside, root.join("door")).unwrap();
    symlink(outside.join("secret.txt"), root.join("secret-link")).unwrap();
    symlink("../outside/secret.txt", root.join("relative-link")).unwrap();
    symlink("inner", root.join("shortcut")).unwrap();
    symlink(".", root.join("loop")).unwrap();
    let store = DiskVfs::mount(&root);

    for path in ["door/secret.txt", "secret-link", "relative-link", "shortcut/ok.txt", "loop/inner/ok.txt"] {
        assert!(is_link_refusal(&store.read(path).unwrap_err()), "{path}");
        assert!(is_link_refusal(&store.read_head(path, 4).unwrap_err()), "{path}");
        assert!(is_link_refusal(&store.read_limited(path, 100).unwrap_err()), "{path}");
        assert!(is_link_refusal(&store.stat(path).unwrap_err()), "{path}");
    }
    for path in ["door", "shortcut", "loop"] {
        assert!(is_link_refusal(&store.list(path).unwrap_err()), "{path}");
    }
    for path in ["door/planted.txt", "door/new/deeper.txt", "secret-link", "shortcut/new.txt", "shortcut"] {
        assert!(is_link_refusal(&store.write(path, b"x").unwrap_err()), "{path}");
    }
    for path in ["secret-link", "shortcut", "loop"] {
        assert!(is_link_refusal(&store.remove(path).unwrap_err()), "{path}");
        assert!(fs::symlink_metadata(root.join(path)).unwrap().is_symlink(), "{path} is untouched");
    }
    assert!(!outside.join("planted.txt").exists());
    assert!(!outside.join("new").exists());
    assert!(!root.join("inner/new.txt").exists());
    assert_eq!(fs::read(outside.join("secret.txt")).unwrap(), b"secret");

    // The real path still works, and no listing shows a link.
    assert_eq!(store.read("inner/ok.txt").unwrap(), b"ok");
    let names: Vec<String> = store.list("").unwrap().into_iter().map(|entry| entry.name).collect();
    assert_eq!(names, vec!["inner"], "links are not listed");
}

#[test]
fn a_hard_link_in_the_session_is_refused_for_reads_and_writes() {
    let session = Session::new("hard-link");
    fs::hard_link(session.root.join("checkpoints/log"), session.root.join("scratchpad/x")).unwrap();
    let store = &session.store;
    for error in [
        store.read("scratchpad/x").unwrap_err(),
        store.read_head("scratchpad/x", 4).unwrap_err(),
        store.read_limited("scratchpad/x", 100).unwrap_err(),
        store.write("scratchpad/x", b"overwritten").unwrap_err(),
    ] {
        assert!(
            matches!(&error, VfsError::Other(path, detail) if path == "scratchpad/x" && detail.contains("hard link")),
            "{error:?}"
        );
    }
    assert_eq!(fs::read(session.root.join("checkpoints/log")).unwrap(), b"the session's log");

    // A mount's author may keep hard links in their own tree.
    let mount = DiskVfs::mount(&session.root);
    assert_eq!(mount.read("scratchpad/x").unwrap(), b"the session's log");
}

#[test]
fn a_link_in_the_scratchpad_cannot_reach_the_sessions_log() {
    let session = Session::new("link-to-log");
    symlink("../checkpoints/log", session.root.join("scratchpad/x")).unwrap();
    let store = &session.store;

    assert!(is_link_refusal(&store.read("scratchpad/x").unwrap_err()));
    assert!(is_link_refusal(&store.read_head("scratchpad/x", 4).unwrap_err()));
    assert!(is_link_refusal(&store.read_limited("scratchpad/x", 100).unwrap_err()));
    assert!(is_link_refusal(&store.stat("scratchpad/x").unwrap_err()));
    assert!(is_link_refusal(&store.write("scratchpad/x", b"overwritten").unwrap_err()));
    assert!(is_link_refusal(&store.remove("scratchpad/x").unwrap_err()));
    assert_eq!(fs::read(session.root.join("checkpoints/log")).unwrap(), b"the session's log");
    assert!(fs::symlink_metadata(session.root.join("scratchpad/x")).unwrap().is_symlink(), "the link is untouched");
    assert_eq!(store.list("scratchpad").unwrap(), vec![], "links are not listed");
    let host = session.scratch.0.to_string_lossy().to_string();
    assert!(!store.read("scratchpad/x").unwrap_err().to_string().contains(&host));
}

#[test]
fn a_link_in_the_session_to_a_host_file_is_refused() {
    let session = Session::new("link-out");
    let secret = session.scratch.0.join("secret.txt");
    symlink(&secret, session.root.join("scratchpad/absolute")).unwrap();
    symlink("../../secret.txt", session.root.join("scratchpad/relative")).unwrap();
    for path in ["scratchpad/absolute", "scratchpad/relative"] {
        assert!(is_link_refusal(&session.store.read(path).unwrap_err()), "{path}");
        assert!(is_link_refusal(&session.store.write(path, b"pwned").unwrap_err()), "{path}");
    }
    assert_eq!(fs::read(&secret).unwrap(), b"host secret");
}

#[test]
fn a_linked_folder_in_the_session_is_refused_for_every_operation() {
    let session = Session::new("link-dir");
    symlink("../checkpoints", session.root.join("scratchpad/door")).unwrap();
    let store = &session.store;
    assert!(is_link_refusal(&store.read("scratchpad/door/log").unwrap_err()));
    assert!(is_link_refusal(&store.write("scratchpad/door/log", b"x").unwrap_err()));
    assert!(is_link_refusal(&store.write("scratchpad/door/new/deep.txt", b"x").unwrap_err()));
    assert!(is_link_refusal(&store.remove("scratchpad/door/log").unwrap_err()));
    assert!(is_link_refusal(&store.list("scratchpad/door").unwrap_err()));
    assert!(is_link_refusal(&store.stat("scratchpad/door/log").unwrap_err()));
    assert_eq!(fs::read(session.root.join("checkpoints/log")).unwrap(), b"the session's log");
    assert_eq!(fs::read_dir(session.root.join("checkpoints")).unwrap().count(), 1, "nothing created beside the log");
}

#[test]
fn a_folder_swapped_for_a_link_between_calls_is_refused() {
    let session = Session::new("swap");
    let store = &session.store;
    store.write("scratchpad/work/log", b"mine").unwrap();
    assert_eq!(store.read("scratchpad/work/log").unwrap(), b"mine");

    // Another local process swaps the folder for a link while the session runs.
    fs::rename(session.root.join("scratchpad/work"), session.root.join("scratchpad/old")).unwrap();
    symlink("../checkpoints", session.root.join("scratchpad/work")).unwrap();
    assert!(is_link_refusal(&store.read("scratchpad/work/log").unwrap_err()));
    assert!(is_link_refusal(&store.write("scratchpad/work/log", b"overwritten").unwrap_err()));
    assert_eq!(fs::read(session.root.join("checkpoints/log")).unwrap(), b"the session's log");

    // And for a link leaving the host folder altogether, in a mount too.
    fs::remove_file(session.root.join("scratchpad/work")).unwrap();
    symlink(&session.scratch.0, session.root.join("scratchpad/work")).unwrap();
    let mount = DiskVfs::mount(&session.root);
    assert!(is_link_refusal(&mount.read("scratchpad/work/secret.txt").unwrap_err()));
    assert!(is_link_refusal(&mount.write("scratchpad/work/secret.txt", b"x").unwrap_err()));
    assert_eq!(fs::read(session.scratch.0.join("secret.txt")).unwrap(), b"host secret");
}

/// A local process flips `scratchpad/work` between a real folder and a link to
/// `checkpoints/` while the session reads and writes through it: no read ever sees the
/// log and no write ever lands beside it, however the two interleave.
#[test]
fn a_folder_flipped_to_a_link_concurrently_never_reaches_the_log() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let session = Session::new("race");
    let store = session.store.clone();
    let work = session.root.join("scratchpad/work");
    let spare = session.root.join("scratchpad/spare");
    let link = session.root.join("scratchpad/link");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("log"), b"mine").unwrap();
    symlink("../checkpoints", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let (work, spare, link) = (work.clone(), spare.clone(), link.clone());
        std::thread::spawn(move || {
            // Each shape is held a while, so the session meets both often.
            let hold = || (0..64).for_each(|_| std::thread::yield_now());
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::rename(&work, &spare);
                let _ = fs::rename(&link, &work);
                hold();
                let _ = fs::rename(&work, &link);
                let _ = fs::rename(&spare, &work);
                hold();
            }
        })
    };
    for round in 0..300 {
        if let Ok(bytes) = store.read("scratchpad/work/log") {
            assert_eq!(bytes, b"mine", "round {round} read the session's log");
        }
        let _ = store.write(&format!("scratchpad/work/planted-{round}"), b"x");
        let _ = store.write("scratchpad/work/log", b"mine");
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(fs::read(session.root.join("checkpoints/log")).unwrap(), b"the session's log");
    let beside_the_log: Vec<_> = fs::read_dir(session.root.join("checkpoints")).unwrap().collect();
    assert_eq!(beside_the_log.len(), 1, "nothing was written into checkpoints/");
}

/// Each call here would block forever on the pipe if the store opened it for reading
/// the ordinary way (no writer ever comes): the test finishing is the proof.
#[test]
fn a_named_pipe_is_refused_and_never_waited_on() {
    let scratch = Scratch::new("fifo");
    let store = DiskVfs::new(&scratch.0);
    store.write("notes/a.txt", b"a").unwrap();
    make_fifo(&scratch.0.join("notes/pipe"));
    let not_regular = |error: VfsError| {
        assert!(
            matches!(&error, VfsError::Other(path, detail) if path == "notes/pipe" && detail.contains("not a regular file")),
            "{error}"
        );
    };
    not_regular(store.read("notes/pipe").unwrap_err());
    not_regular(store.read_limited("notes/pipe", 10).unwrap_err());
    not_regular(store.read_head("notes/pipe", 10).unwrap_err());
    not_regular(store.write("notes/pipe", b"x").unwrap_err());
    assert_eq!(store.list("notes").unwrap(), vec![Entry::file("a.txt", 1), Entry::file("pipe", 0)]);
    assert_eq!(store.stat("notes/pipe").unwrap(), Some(Entry::file("pipe", 0)));
    store.remove("notes/pipe").unwrap();

    let socket_path = scratch.0.join("notes/socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    assert!(matches!(store.read("notes/socket"), Err(VfsError::Other(_, detail)) if detail.contains("a socket")));
}

#[test]
fn a_file_root_that_is_a_pipe_is_refused() {
    let scratch = Scratch::new("fifo-root");
    make_fifo(&scratch.0.join("AGENTS.md"));
    let store = DiskVfs::mount(scratch.0.join("AGENTS.md"));
    assert!(matches!(store.read(""), Err(VfsError::Other(_, detail)) if detail.contains("named pipe")));
}

#[test]
fn bounded_reads_use_one_handle_and_stop_at_the_bound() {
    let scratch = Scratch::new("bounded");
    let store = DiskVfs::new(&scratch.0);
    store.write("big.txt", b"0123456789").unwrap();
    assert_eq!(store.read_limited("big.txt", 10).unwrap(), b"0123456789");
    assert_eq!(
        store.read_limited("big.txt", 9),
        Err(VfsError::TooLarge { path: "big.txt".to_string(), size: 10, limit: 9 })
    );
    assert_eq!(store.read_head("big.txt", 4).unwrap(), (b"0123".to_vec(), 10));
    assert_eq!(store.read_head("big.txt", 40).unwrap(), (b"0123456789".to_vec(), 10));
    assert_eq!(store.read_head("", 4), Err(VfsError::IsADirectory(String::new())));
    assert_eq!(store.read_limited("none", 4), Err(VfsError::NotFound("none".to_string())));
}

#[test]
fn grep_skips_a_named_pipe_and_finishes() {
    use crate::tools::{ToolContext, run};
    let scratch = Scratch::new("grep-fifo");
    let workspace = super::super::Workspace { session: std::sync::Arc::new(DiskVfs::new(&scratch.0)), mounts: vec![] };
    workspace.write("scratchpad/a.txt", b"needle\n").unwrap();
    make_fifo(&scratch.0.join("scratchpad/pipe.txt"));
    let visible = |_: &str| true;
    let ctx = ToolContext {
        workspace: &workspace,
        visible: &visible,
        raw_text: false,
        limits: crate::limits::Limits::default(),
    };
    let found = run("grep", &serde_json::json!({ "pattern": "needle" }), &ctx).unwrap();
    assert!(found.contains("scratchpad/a.txt"), "{found}");
    assert!(!found.contains("pipe.txt"), "{found}");
}

#[test]
fn a_file_root_serves_a_file_mount() {
    let scratch = Scratch::new("file-root");
    fs::write(scratch.0.join("AGENTS.md"), b"# agents").unwrap();
    let store = DiskVfs::mount(scratch.0.join("AGENTS.md"));
    assert_eq!(store.read("").unwrap(), b"# agents");
    assert_eq!(store.stat("").unwrap(), Some(Entry::file("", 8)));
    assert_eq!(store.list(""), Err(VfsError::NotADirectory(String::new())));
    store.write("", b"# changed").unwrap();
    assert_eq!(store.read("").unwrap(), b"# changed");
    assert_eq!(fs::read_dir(&scratch.0).unwrap().count(), 1);
    let missing = DiskVfs::mount(scratch.0.join("absent.md"));
    assert_eq!(missing.stat("").unwrap(), None);
    assert_eq!(missing.read(""), Err(VfsError::NotFound(String::new())));
}

#[test]
fn a_missing_root_lists_as_missing_and_is_created_on_write() {
    let scratch = Scratch::new("missing-root");
    let store = DiskVfs::new(scratch.0.join("later/session"));
    assert_eq!(store.list(""), Err(VfsError::NotFound(String::new())));
    assert_eq!(store.stat("").unwrap(), None);
    store.write("scratchpad/a.md", b"a").unwrap();
    assert_eq!(store.read("scratchpad/a.md").unwrap(), b"a");
}

#[test]
fn a_host_path_is_absolute_and_refuses_every_link_on_the_way() {
    let scratch = Scratch::new("host-path");
    let root = scratch.0.join("mount");
    fs::create_dir_all(root.join("internal")).unwrap();
    fs::write(root.join("internal/rates.md"), "secret").unwrap();
    fs::write(root.join("public.md"), "public").unwrap();
    symlink("internal", root.join("alias")).unwrap();
    symlink("internal/rates.md", root.join("rates-link.md")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    let store = DiskVfs::mount(&root);
    let public = store.host_path("public.md").unwrap();
    assert!(public.path().starts_with(format!("/proc/{}/fd/", std::process::id())), "{:?}", public.path());
    assert_eq!(fs::read_to_string(public.path()).unwrap(), "public");
    // What does not exist yet (a file a tool will write) is named below the deepest
    // part that exists, here the root.
    let deep = store.host_path("new/deep/file.md").unwrap();
    assert!(deep.path().ends_with("new/deep/file.md"), "{:?}", deep.path());
    assert_eq!(fs::canonicalize(deep.path().ancestors().nth(3).unwrap()).unwrap(), fs::canonicalize(&root).unwrap());
    for through_a_link in ["alias/rates.md", "alias", "rates-link.md", "dangling", "alias/new/file.md"] {
        assert_eq!(
            store.host_path(through_a_link).err(),
            Some(HostPathError::SymbolicLink(through_a_link.to_string())),
            "{through_a_link}"
        );
    }
    assert_eq!(store.host_path("../outside").err(), Some(HostPathError::Escape("../outside".to_string())));
    // A mount may hold hard links of its author's; a session folder may not.
    fs::hard_link(root.join("public.md"), root.join("public-again.md")).unwrap();
    assert!(store.host_path("public-again.md").is_ok());
    let session = DiskVfs::new(&root);
    assert_eq!(
        session.host_path("public-again.md").err(),
        Some(HostPathError::HardLink("public-again.md".to_string()))
    );
    // A root that does not exist yet is made absolute, so a server's own working
    // directory cannot change it.
    let relative = DiskVfs::mount("some/relative/root");
    let handed = relative.host_path("a.md").unwrap();
    assert!(handed.path().is_absolute() && handed.path().ends_with("some/relative/root/a.md"), "{handed:?}");
}

#[test]
fn a_handed_path_keeps_naming_what_was_checked_when_a_folder_on_it_is_swapped_for_a_link_afterwards() {
    let scratch = Scratch::new("host-path-swap");
    let root = scratch.0.join("store");
    let outside = scratch.0.join("outside");
    for (base, text) in [(&root, "DECIDED"), (&outside, "OUTSIDE")] {
        fs::create_dir_all(base.join("docs")).unwrap();
        fs::write(base.join("docs/file.md"), text).unwrap();
    }
    for store in [DiskVfs::mount(&root), DiskVfs::new(&root)] {
        let existing = store.host_path("docs/file.md").unwrap();
        let created = store.host_path("docs/new.md").unwrap();
        let whole = store.host_path("").unwrap();
        // Between the check and the server's open, a writer of the folder swaps `docs`
        // (and then the root itself) for links to the outside.
        fs::rename(root.join("docs"), root.join("docs-moved")).unwrap();
        symlink(outside.join("docs"), root.join("docs")).unwrap();
        let moved_root = scratch.0.join("store-moved");
        fs::rename(&root, &moved_root).unwrap();
        symlink(&outside, &root).unwrap();

        assert_eq!(fs::read_to_string(existing.path()).unwrap(), "DECIDED", "{:?}", existing.path());
        fs::write(created.path(), "written").unwrap();
        assert!(!outside.join("docs/new.md").exists(), "nothing was written outside");
        assert_eq!(fs::read_to_string(moved_root.join("docs-moved/new.md")).unwrap(), "written");
        assert!(fs::read_dir(whole.path()).unwrap().flatten().any(|entry| entry.file_name() == "docs-moved"));

        fs::remove_file(&root).unwrap();
        fs::rename(&moved_root, &root).unwrap();
        fs::remove_file(root.join("docs")).unwrap();
        fs::remove_file(root.join("docs-moved/new.md")).unwrap();
        fs::rename(root.join("docs-moved"), root.join("docs")).unwrap();
    }
}

#[test]
fn a_session_folder_that_is_itself_a_link_is_refused_for_a_host_tool() {
    let scratch = Scratch::new("host-path-root-link");
    let real = scratch.0.join("elsewhere");
    fs::create_dir_all(&real).unwrap();
    fs::write(real.join("a.md"), "a").unwrap();
    let linked = scratch.0.join("s1");
    symlink(&real, &linked).unwrap();
    assert_eq!(DiskVfs::new(&linked).host_path("a.md").err(), Some(HostPathError::SymbolicLink("a.md".to_string())));
    // A mount's source is the host's choice and may be a link.
    assert_eq!(fs::read_to_string(DiskVfs::mount(&linked).host_path("a.md").unwrap().path()).unwrap(), "a");
}
