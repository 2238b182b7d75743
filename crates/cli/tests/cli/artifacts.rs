//! `archmax build`, `archmax inspect`, `archmax graph` and `archmax keygen`: reproducible
//! and refused builds, damaged and tampered artifacts, signing and trust. (The recordings
//! of `inspect` and `graph` are checked by the golden harness.)

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{archmax, copy_dir, repository};

fn scratch(name: &str) -> PathBuf {
    let dir = crate::support::scratch(&format!("cli-{name}"));
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn build_specs(output: &Path) {
    let run = archmax(&repository(), &["build", "--root", "specs", "-o", &output.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with(&format!("built {} — 3 workflow(s), ", output.display())), "{}", run.stdout);
    assert!(run.stdout.contains("sha256 "), "{}", run.stdout);
}

#[test]
fn building_twice_gives_identical_bytes() {
    let dir = scratch("twice");
    let (first, second) = (dir.join("a.amx"), dir.join("b.amx"));
    build_specs(&first);
    build_specs(&second);
    assert_eq!(fs::read(&first).expect("first"), fs::read(&second).expect("second"));
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn build_refuses_an_invalid_workspace_with_its_diagnostics() {
    let case = repository().join("golden/diagnostics/AMX0301-human-edge");
    let output = scratch("refused").join("x.amx");
    let run = archmax(&case, &["build", "--root", "workspace", "-o", &output.to_string_lossy()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("AMX0301"), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was built"), "{}", run.stderr);
    assert!(!output.exists(), "a refused build writes nothing");
    fs::remove_dir_all(output.parent().expect("the scratch folder")).ok();
}

#[test]
fn inspect_refuses_damaged_files_in_one_line() {
    let dir = scratch("damaged");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    let mut bytes = fs::read(&artifact).expect("artifact");
    // The last byte is the signature block's kind; the one before it ends the payload.
    let last_of_payload = bytes.len() - 2;
    bytes[last_of_payload] ^= 0xff;
    let damaged = dir.join("damaged.amx");
    fs::write(&damaged, &bytes).expect("write");
    let truncated = dir.join("truncated.amx");
    fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let foreign = dir.join("foreign.amx");
    fs::write(&foreign, b"{\"not\": \"an artifact\"}").expect("write");
    for (file, expected) in [(&damaged, "checksum"), (&truncated, "truncated"), (&foreign, "not an archmax artifact")] {
        let run = archmax(&repository(), &["inspect", &file.to_string_lossy()]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains(expected), "{}", run.stderr);
        assert_eq!(run.stdout, "");
    }
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn inspect_filters_name_what_is_missing() {
    let dir = scratch("filters");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    let artifact_arg = artifact.to_string_lossy();
    let run = archmax(&repository(), &["inspect", &artifact_arg, "--workflow", "refund-desk", "--state", "nope"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("has no state `nope`"), "{}", run.stderr);
    let run = archmax(&repository(), &["inspect", &artifact_arg, "--state", "review"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--workflow"), "{}", run.stderr);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn graph_draws_every_edge_kind() {
    let run = archmax(&repository(), &["graph", "refund-desk", "--root", "specs"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("trigger_manual --> state_screen_request"), "{}", run.stdout);
    assert!(run.stdout.contains("trigger_email_reply --> state_screen_request"), "{}", run.stdout);
    assert!(run.stdout.contains("-->|approve|"), "{}", run.stdout);
    assert!(run.stdout.contains("-.->|on_error|"), "{}", run.stdout);
}

/// The code-state workspace of `golden/runs/code-in-front`, copied, built to `built.amx`.
fn code_state_workspace(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let workspace = dir.join("workspace");
    copy_dir(&repository().join("golden/runs/code-in-front/workspace"), &workspace);
    let built = dir.join("built.amx");
    let run = archmax(&workspace, &["build", "-o", &built.to_string_lossy()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    (workspace, built)
}

fn run_screen(workspace: &Path, session: &str, artifact: &Path, extra: &[&str]) -> crate::support::Run {
    let artifact = artifact.to_string_lossy();
    let mut args = vec![
        "run",
        "refund-intake",
        "My order arrived, I want a refund.",
        "--session",
        session,
        "--tape",
        "tape.yaml",
        "--variables",
        r#"{"order_id":"ORD-41","customer_email":"Ada@example.com"}"#,
        "--artifact",
        &artifact,
    ];
    args.extend_from_slice(extra);
    archmax(workspace, &args)
}

/// Bytecode is trusted only under a trusted signature: an unsigned artifact whose
/// bytecode was swapped for another script's (or for garbage) and re-hashed runs the
/// code state from the source it carries.
#[test]
fn tampered_bytecode_in_an_unsigned_artifact_runs_from_its_source() {
    use archmax_compiler::artifact;
    use archmax_compiler::lower::script::module_bytecode;
    let (workspace, built) = code_state_workspace("bytecode");
    let program = artifact::decode(&fs::read(&built).expect("built")).expect("decodes");
    let smuggled = module_bytecode(
        "workflows/refund-intake/scripts/screen.js",
        "export default async function ({ tools }) {\n  console.log(\"smuggled\");\n  await tools.archmax_advance({ to: \"decline\", reason: \"smuggled\" });\n}\n",
    )
    .expect("compiles");
    let garbage: Vec<u8> = (0..=255u8).rev().cycle().take(600).collect();
    for (index, hostile) in [smuggled, garbage, Vec::new()].into_iter().enumerate() {
        let mut tampered = program.clone();
        for script in tampered.workflows.iter_mut().flat_map(|workflow| workflow.scripts.iter_mut()) {
            script.bytecode = hostile.clone();
        }
        let path = workspace.join(format!("tampered-{index}.amx"));
        fs::write(&path, artifact::encode(&tampered)).expect("write");
        let run = run_screen(&workspace, &format!("t{index}"), &path, &[]);
        assert_eq!(run.code, 0, "tampering {index}: {}", run.stderr);
        assert!(run.stderr.contains("screen (manual) passed ORD-41"), "tampering {index}: {}", run.stderr);
        assert!(!run.stderr.contains("smuggled"), "tampering {index}: {}", run.stderr);
        assert!(run.stdout.contains("Thanks Ada"), "{}", run.stdout);
    }
    fs::remove_dir_all(workspace.parent().expect("scratch")).ok();
}

#[test]
fn a_rehashed_mount_source_outside_the_workspace_is_refused_before_running() {
    use archmax_compiler::artifact;
    let (workspace, built) = code_state_workspace("mount-source");
    let program = artifact::decode(&fs::read(&built).expect("built")).expect("decodes");
    for hostile in ["/", "../.."] {
        let mut tampered = program.clone();
        let skills = tampered.mounts.iter().find(|mount| tampered.str(mount.key) == "skills/").expect("skills mount");
        let source = skills.source.0 as usize;
        tampered.strings[source] = hostile.to_string();
        let path = workspace.join("tampered.amx");
        fs::write(&path, artifact::encode(&tampered)).expect("write");
        let run = run_screen(&workspace, "m1", &path, &[]);
        assert_eq!(run.code, 1, "{hostile}: {}", run.stderr);
        let refusal: Vec<&str> = run.stderr.lines().filter(|line| line.starts_with("error:")).collect();
        assert_eq!(refusal.len(), 1, "{}", run.stderr);
        assert!(refusal[0].contains("mounts table") && refusal[0].contains("`skills/`"), "{}", refusal[0]);
        assert!(!workspace.join("sessions/m1").exists(), "nothing ran");
    }
    fs::remove_dir_all(workspace.parent().expect("scratch")).ok();
}

#[test]
fn keygen_writes_a_private_key_only_it_can_read_and_never_overwrites_silently() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("keygen");
    let key = dir.join("signing.key");
    let key_arg = key.to_string_lossy().into_owned();
    let run = archmax(&dir, &["keygen", "-o", &key_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let public = run.stdout.trim().to_string();
    assert!(public.starts_with("ed25519:") && public.len() == 8 + 64, "{public}");
    let mode = fs::metadata(&key).expect("written").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let first = fs::read_to_string(&key).expect("key");
    assert!(first.contains(&public), "the file names its public key");

    let again = archmax(&dir, &["keygen", "-o", &key_arg]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    assert_eq!(fs::read_to_string(&key).expect("key"), first, "the old key is intact");

    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).expect("chmod");
    let forced = archmax(&dir, &["keygen", "-o", &key_arg, "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert_ne!(forced.stdout.trim(), public, "a new key");
    assert_eq!(fs::metadata(&key).expect("written").permissions().mode() & 0o777, 0o600);

    // The key signs a build that loads only where its public key is trusted.
    let (workspace, _) = code_state_workspace("keygen-build");
    let signed = workspace.join("signed.amx");
    let signed_arg = signed.to_string_lossy().into_owned();
    let run = archmax(&workspace, &["build", "--sign", &key_arg, "-o", &signed_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(forced.stdout.trim()), "{}", run.stdout);
    let run = run_screen(&workspace, "k1", &signed, &["--trust", forced.stdout.trim()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = run_screen(&workspace, "k2", &signed, &["--trust", &public]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not a trusted key"), "{}", run.stderr);
    fs::remove_dir_all(&dir).ok();
    fs::remove_dir_all(workspace.parent().expect("scratch")).ok();
}

#[test]
fn a_trusted_keys_variable_that_names_no_key_is_refused_not_ignored() {
    let dir = scratch("empty-trust");
    let artifact = dir.join("specs.amx");
    build_specs(&artifact);
    for empty in ["", " ", ","] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_archmax"))
            .args(["inspect", artifact.to_str().expect("utf-8 path")])
            .env("NO_COLOR", "1")
            .env("ARCHMAX_TRUSTED_KEYS", empty)
            .output()
            .expect("the archmax binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{empty:?} trusted everything: {stderr}");
        assert!(stderr.contains("ARCHMAX_TRUSTED_KEYS is set but names no key"), "{empty:?}: {stderr}");
    }
    let _ = fs::remove_dir_all(&dir);
}
