//! Secrets and hostile text through the binary: key files of every kind are refused when
//! any user may write them or when they are not regular files, and secret ones when any
//! user may read them or write their folder; the session seal key is
//! created on first use; model and tool text reaches the terminal without a single
//! control sequence; a sealed session rewritten without the key is refused.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Run, archmax, scratch};

/// Two states: `talk` advances to `done` with a reason, `done` answers.
const WORKFLOW: &str = "title: Echo\ninstructions: Answer.\nstates:\n  talk:\n    triggers:\n      manual:\n        description: Start.\n    instructions: Move on.\n    transitions:\n      - to: done\n        description: Talked.\n  done:\n    instructions: Answer.\n";

/// Model text full of escape sequences: an OSC that retitles the terminal (ended by BEL),
/// a CSI that clears the screen, a carriage return, 8-bit CSI.
const HOSTILE_TAPE: &str = r#"- state: talk
  tool_calls:
    - { name: archmax_advance, args: { to: done, reason: "moving\e]0;pwned\a\e[2J on" } }
- state: done
  text: "Done.\e]0;pwned\a\e[2J\rhidden\u009b31m red"
"#;

fn workspace(label: &str) -> PathBuf {
    let root = scratch(&format!("secrets-{label}"));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("workflows/echo")).expect("workspace");
    fs::write(root.join("workflows/echo/workflow.yaml"), WORKFLOW).expect("workflow");
    fs::write(root.join("tape.yaml"), HOSTILE_TAPE).expect("tape");
    root
}

fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs `archmax` with a hang guard: a key file that blocks its reader would otherwise
/// stall the test forever. `None` when the guard had to stop it.
fn archmax_guarded(cwd: &Path, args: &[&str]) -> Option<Run> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("ARCHMAX_SEAL_KEY")
        .env_remove("ARCHMAX_SEAL_KEY_FILE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("archmax starts");
    let started = Instant::now();
    while child.try_wait().expect("waited for").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    Some(Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Asserts the command was refused over `file`, naming it and `needle`.
fn assert_refused_over(run: Option<Run>, file: &Path, needle: &str, what: &str) {
    let run = run.unwrap_or_else(|| panic!("{what}: archmax hung on {}", file.display()));
    assert_ne!(run.code, 0, "{what} was accepted: {}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(&file.display().to_string()), "{what}: {}", run.stderr);
    assert!(run.stderr.contains(needle), "{what} should say {needle:?}: {}", run.stderr);
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo");
}

fn world_writable(path: &Path) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o666)).expect("chmod");
}

#[test]
fn key_files_any_user_may_write_or_that_are_not_regular_files_are_refused() {
    let root = workspace("key-files");
    // The signing key of `build --sign`.
    let key = root.join("signing.key");
    let made = archmax(&root, &["keygen", "-o", &arg(&key)]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let public = made.stdout.trim().to_string();
    world_writable(&key);
    let out = arg(&root.join("signed.amx"));
    let build = |key: &Path| archmax_guarded(&root, &["build", "--sign", &arg(key), "-o", &out]);
    assert_refused_over(build(&key), &key, "chmod", "a world-writable signing key");
    let fifo = root.join("signing.fifo");
    mkfifo(&fifo);
    assert_refused_over(build(&fifo), &fifo, "not a regular file", "a FIFO as the signing key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).expect("chmod");
    let built = build(&key).expect("no hang");
    assert_eq!(built.code, 0, "{}", built.stderr);

    // A `--trust FILE`.
    let trusted = root.join("trusted.pub");
    fs::write(&trusted, format!("{public}\n")).expect("trusted key");
    world_writable(&trusted);
    let inspect = |trust: &Path| archmax_guarded(&root, &["inspect", &out, "--trust", &arg(trust)]);
    assert_refused_over(inspect(&trusted), &trusted, "chmod", "a world-writable trusted-key file");
    let trust_fifo = root.join("trusted.fifo");
    mkfifo(&trust_fifo);
    assert_refused_over(inspect(&trust_fifo), &trust_fifo, "not a regular file", "a FIFO as a trusted-key file");

    // The session seal key: created private on first use, refused once anyone may write it.
    let run = |root: &Path| archmax_guarded(root, &["run", "echo", "Hello.", "--tape", "tape.yaml"]);
    let first = run(&root).expect("no hang");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let seal_key = root.join(".archmax/seal.key");
    assert_eq!(fs::metadata(&seal_key).expect("created").permissions().mode() & 0o777, 0o600);
    world_writable(&seal_key);
    assert_refused_over(run(&root), Path::new(".archmax/seal.key"), "chmod", "a world-writable seal key file");
    fs::remove_file(&seal_key).expect("remove");
    mkfifo(&seal_key);
    assert_refused_over(
        run(&root),
        Path::new(".archmax/seal.key"),
        "not a regular file",
        "a FIFO as the seal key file",
    );
    fs::remove_file(&seal_key).expect("remove");
    std::os::unix::fs::symlink(root.join("signing.key"), &seal_key).expect("symlink");
    assert_refused_over(run(&root), Path::new(".archmax/seal.key"), "symbolic link", "a link as the seal key file");
    fs::remove_file(&seal_key).expect("remove");

    // `serve --tokens FILE`: refused at start, before it listens.
    let tokens = root.join("tokens.toml");
    fs::write(
        &tokens,
        format!("[[tokens]]\nidentity = \"ops\"\nscopes = [\"admin\"]\nsha256 = \"{}\"\n", "ab".repeat(32)),
    )
    .expect("tokens");
    world_writable(&tokens);
    let serve = |tokens: &Path| {
        archmax_guarded(&root, &["serve", "--listen", "127.0.0.1:0", "--tokens", &arg(tokens), "--tape", "tape.yaml"])
    };
    assert_refused_over(serve(&tokens), &tokens, "chmod", "a world-writable tokens file");
    let tokens_fifo = root.join("tokens.fifo");
    mkfifo(&tokens_fifo);
    assert_refused_over(serve(&tokens_fifo), &tokens_fifo, "not a regular file", "a FIFO as the tokens file");
    let _ = fs::remove_dir_all(&root);
}

fn world_readable(path: &Path) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod");
}

#[test]
fn secret_files_any_user_may_read_or_in_a_folder_any_user_may_write_are_refused() {
    let root = workspace("readable-secrets");
    // The signing key of `build --sign`; the list of public keys may stay readable.
    let key = root.join("signing.key");
    let made = archmax(&root, &["keygen", "-o", &arg(&key)]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let public = made.stdout.trim().to_string();
    world_readable(&key);
    let out = arg(&root.join("signed.amx"));
    let build = |key: &Path| archmax_guarded(&root, &["build", "--sign", &arg(key), "-o", &out]);
    assert_refused_over(build(&key), &key, "chmod o-r", "a world-readable signing key");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).expect("chmod");
    let built = build(&key).expect("no hang");
    assert_eq!(built.code, 0, "{}", built.stderr);
    let trusted = root.join("trusted.pub");
    fs::write(&trusted, format!("{public}\n")).expect("trusted key");
    world_readable(&trusted);
    let inspected = archmax_guarded(&root, &["inspect", &out, "--trust", &arg(&trusted)]).expect("no hang");
    assert_eq!(inspected.code, 0, "a readable list of public keys is fine: {}", inspected.stderr);

    // The session seal key: readable by all, or in a folder anyone may write.
    let run = |root: &Path| archmax_guarded(root, &["run", "echo", "Hello.", "--tape", "tape.yaml"]);
    let first = run(&root).expect("no hang");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let seal_key = root.join(".archmax/seal.key");
    world_readable(&seal_key);
    assert_refused_over(run(&root), Path::new(".archmax/seal.key"), "chmod o-r", "a world-readable seal key file");
    fs::set_permissions(&seal_key, fs::Permissions::from_mode(0o600)).expect("chmod");
    let folder = root.join(".archmax");
    fs::set_permissions(&folder, fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_refused_over(run(&root), Path::new(".archmax"), "chmod o-w", "a seal key in a folder anyone may write");
    fs::set_permissions(&folder, fs::Permissions::from_mode(0o700)).expect("chmod");
    let again = run(&root).expect("no hang");
    assert_eq!(again.code, 0, "a private key in a private folder is read: {}", again.stderr);

    // `serve --tokens FILE`: refused at start, before it listens.
    let tokens = root.join("tokens.toml");
    fs::write(
        &tokens,
        format!("[[tokens]]\nidentity = \"ops\"\nscopes = [\"admin\"]\nsha256 = \"{}\"\n", "ab".repeat(32)),
    )
    .expect("tokens");
    world_readable(&tokens);
    let served =
        archmax_guarded(&root, &["serve", "--listen", "127.0.0.1:0", "--tokens", &arg(&tokens), "--tape", "tape.yaml"]);
    assert_refused_over(served, &tokens, "chmod o-r", "a world-readable tokens file");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_tape_whose_model_text_holds_escape_sequences_prints_no_escape_byte() {
    let root = workspace("escapes");
    let run = archmax(&root, &["run", "echo", "Hello.", "--session", "s1", "--tape", "tape.yaml"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The state flow on stderr: the advance's reason and the model's text, made inert.
    assert!(run.stderr.contains("pwned"), "the flow shows the text: {}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}') && !run.stderr.contains('\u{7}'), "{:?}", run.stderr);
    assert!(!run.stderr.contains('\r') && !run.stderr.contains('\u{9b}'), "{:?}", run.stderr);
    for args in [&["sessions", "s1"][..], &["sessions", "s1", "--transcript"][..], &["sessions"][..]] {
        let shown = archmax(&root, args);
        assert_eq!(shown.code, 0, "{args:?}: {}", shown.stderr);
        let printed = format!("{}{}", shown.stdout, shown.stderr);
        assert!(!printed.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{args:?}: {printed:?}");
    }
    let transcript = archmax(&root, &["sessions", "s1", "--transcript"]).stdout;
    assert!(transcript.contains("Done.\u{FFFD}]0;pwned\u{FFFD}\u{FFFD}[2J\u{FFFD}hidden"), "{transcript:?}");

    // `archmax flow run`: a step's note and a call's arguments, as the model gave them.
    fs::write(
        root.join("flow.yaml"),
        "id: hostile\nroot:\n  id: root\n  nodes:\n    - id: judge\n      run: { prompt: Judge the change. }\n",
    )
    .expect("flow");
    fs::write(
        root.join("flow-tape.yaml"),
        "- state: root.judge\n  tool_calls: [{ name: answer, args: { outcome: failed, note: \"bad\\e]0;pwned\\a\\e[2J\" } }]\n",
    )
    .expect("flow tape");
    let flow = archmax(&root, &["flow", "run", "flow.yaml", "--input", "Check", "--tape", "flow-tape.yaml"]);
    assert!(flow.stderr.contains("pwned"), "the flow output shows the note: {}", flow.stderr);
    assert!(!flow.stderr.contains('\u{1b}') && !flow.stderr.contains('\u{7}'), "{:?}", flow.stderr);
    let _ = fs::remove_dir_all(&root);
}

/// CRC-32/IEEE, as the store frames its bytes (bitwise: a test needs no speed).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn le_u32(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes")) as usize
}

/// Edits the step log of `session` as a local forger without the key would: `from` becomes
/// `to` (same length) inside the record that holds it, the record's checksums recomputed,
/// and the seal's newest slot given the new log digest and a recomputed CRC. Returns
/// whether the text was found.
fn forge_step(session: &Path, from: &str, to: &str) -> bool {
    use sha2::{Digest, Sha256};
    assert_eq!(from.len(), to.len());
    let log_path = session.join("checkpoints/log");
    let seal_path = session.join("checkpoints/seal");
    let mut log = fs::read(&log_path).expect("log");
    let mut offset = 28;
    let mut found = false;
    while offset + 12 <= log.len() {
        let len = le_u32(&log, offset);
        let payload = offset + 12..offset + 12 + len;
        if let Some(at) = log[payload.clone()].windows(from.len()).position(|window| window == from.as_bytes()) {
            let start = payload.start + at;
            log[start..start + from.len()].copy_from_slice(to.as_bytes());
            let crc = crc32(&log[payload.clone()]).to_le_bytes();
            log[offset + 4..offset + 8].copy_from_slice(&crc);
            let header_crc = crc32(&log[offset..offset + 8]).to_le_bytes();
            log[offset + 8..offset + 12].copy_from_slice(&header_crc);
            found = true;
        }
        offset = payload.end;
    }
    fs::write(&log_path, &log).expect("log");
    // The seal: both slots take the forged digest, each with its CRC recomputed where its
    // format keeps it (after the fields in the unkeyed slot, after key id and MAC in the
    // keyed one, whose MAC the forger cannot recompute).
    let mut seal = fs::read(&seal_path).expect("seal");
    for slot in [0usize, 512] {
        if seal[slot..slot + 8] == [0; 8] {
            continue;
        }
        let log_len = u64::from_le_bytes(seal[slot + 24..slot + 32].try_into().expect("eight bytes")) as usize;
        let digest = Sha256::digest(&log[..log_len.min(log.len())]);
        seal[slot + 32..slot + 64].copy_from_slice(&digest);
        let covered = if &seal[slot..slot + 8] == b"AMXSEAL2" { 96 } else { 136 };
        let crc = crc32(&seal[slot..slot + covered]).to_le_bytes();
        seal[slot + covered..slot + covered + 4].copy_from_slice(&crc);
    }
    fs::write(&seal_path, &seal).expect("seal");
    found
}

#[test]
fn a_step_forged_in_the_log_with_its_seal_recomputed_is_refused_as_tampered() {
    let root = workspace("forged");
    let run = archmax(&root, &["run", "echo", "Approve invoice 7.", "--session", "s1", "--tape", "tape.yaml"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(forge_step(&root.join("sessions/s1"), "invoice 7", "invoice 9"), "the step holds the prompt");
    for args in [
        &["sessions", "s1", "--transcript"][..],
        &["run", "echo", "More.", "--session", "s1", "--tape", "tape.yaml"][..],
    ] {
        let shown = archmax(&root, args);
        assert_eq!(shown.code, 1, "{args:?} accepted a forged step: {}{}", shown.stdout, shown.stderr);
        assert!(shown.stderr.contains("session `s1`"), "{args:?}: {}", shown.stderr);
        assert!(shown.stderr.contains("MAC"), "{args:?}: {}", shown.stderr);
        assert!(!shown.stdout.contains("invoice 9"), "{args:?}: {}", shown.stdout);
    }
    let _ = fs::remove_dir_all(&root);
}

/// Every path under `dir` with its bytes (folders as `None`), sorted.
fn tree(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = fs::read_dir(&path) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                found.push((path.clone(), None));
                stack.push(path);
            } else {
                found.push((path.clone(), fs::read(&path).ok()));
            }
        }
    }
    found.sort();
    found
}

/// Runs `sessions import` with `export` on stdin.
fn import(root: &Path, export: &str) -> Run {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_archmax"))
        .args(["sessions", "import"])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("archmax starts");
    child.stdin.take().expect("stdin").write_all(export.as_bytes()).expect("the export is written");
    let output = child.wait_with_output().expect("output");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn a_failed_sessions_import_leaves_the_sessions_folder_as_it_was() {
    let root = workspace("import");
    let run = archmax(&root, &["run", "echo", "Hello.", "--session", "s1", "--tape", "tape.yaml"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let exported = archmax(&root, &["sessions", "export", "s1"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    // The same session under new ids, with files whose second one cannot be written
    // (its folder is the first file): the import fails after it made the session's folder.
    let lines: Vec<&str> = exported.stdout.lines().filter(|line| !line.contains("\"record\":\"end\"")).collect();
    let file = |path: &str| format!("{{\"record\":\"file\",\"path\":\"{path}\",\"base64\":\"eA==\"}}");
    for id in ["s2", "tenant/s3"] {
        let mut export: Vec<String> = lines
            .iter()
            .filter(|line| !line.contains("\"record\":\"file\""))
            .map(|line| line.replace("\"id\":\"s1\"", &format!("\"id\":\"{id}\"")))
            .collect();
        export.push(file("scratchpad/a"));
        export.push(file("scratchpad/a/b"));
        export.push("{\"record\":\"end\",\"files\":2}".to_string());
        let before = tree(&root.join("sessions"));
        let refused = import(&root, &(export.join("\n") + "\n"));
        assert_eq!(refused.code, 1, "{id}: {}{}", refused.stdout, refused.stderr);
        assert_eq!(tree(&root.join("sessions")), before, "{id}: the failed import left files or folders behind");
    }
    let _ = fs::remove_dir_all(&root);
}
