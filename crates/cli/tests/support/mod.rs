//! What the command-line test binaries share: the repository, scratch folders, running
//! the built binary, copying a workspace.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The repository root.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch path for `label`, unique to this process (not created). It lies in memory
/// (`/dev/shm`) where the machine has it: the tests prove behaviour across process deaths,
/// never across power loss, so the page cache is all the durability they need, and an
/// fsync there costs nothing. Elsewhere it is in the temporary directory.
///
/// The name carries the process id and the instant this process first asked for a
/// scratch path. The id alone is not enough: ids are reused, and a folder a dead test
/// process left under the same name (with its sessions in it) once turned a fresh
/// replay into the continuation of an old session. The first call also removes what
/// processes that have ended left behind under this naming.
pub fn scratch(label: &str) -> PathBuf {
    static STAMP: OnceLock<String> = OnceLock::new();
    let memory = Path::new("/dev/shm");
    let base = if memory.is_dir() && !fs::metadata(memory).is_ok_and(|meta| meta.permissions().readonly()) {
        memory.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let stamp = STAMP.get_or_init(|| {
        sweep_leftovers(&base);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64);
        format!("{nanos:016x}")
    });
    base.join(format!("archmax-{label}-{}-{stamp}", std::process::id()))
}

/// Removes the scratch folders in `base` made more than a day ago by a process that has
/// ended (where `/proc` tells). The age guards a folder whose process runs in another
/// process namespace sharing this `/dev/shm`, which `/proc` here cannot see.
fn sweep_leftovers(base: &Path) {
    const DAY_NANOS: u64 = 24 * 60 * 60 * 1_000_000_000;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64);
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let mut fields = name.rsplitn(3, '-');
        let (Some(stamp), Some(pid), Some(rest)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let ours = rest.starts_with("archmax-")
            && stamp.len() == 16
            && stamp.bytes().all(|byte| byte.is_ascii_hexdigit())
            && !pid.is_empty()
            && pid.bytes().all(|byte| byte.is_ascii_digit());
        let old = u64::from_str_radix(stamp, 16).is_ok_and(|made| now.saturating_sub(made) > DAY_NANOS);
        if ours && old && !proc.join(pid).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// What one invocation printed and returned.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `archmax` with `args` from `cwd`, colour off.
pub fn archmax(cwd: &Path, args: &[&str]) -> Run {
    outcome(archmax_command(cwd, args))
}

/// `archmax` with `args` from `cwd`, colour off, for a test to add to before it runs.
pub fn archmax_command(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_archmax"));
    command
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("ARCHMAX_TRUSTED_KEYS");
    command
}

/// Runs `command` to its end.
pub fn outcome(mut command: Command) -> Run {
    let output = command.output().expect("the archmax binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Copies the workspace at `from` to `to`, leaving out build outputs and sessions.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("scratch workspace");
    for entry in fs::read_dir(from).expect("workspace is readable").flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        // Build outputs, sessions and the runtime's own folder (its seal key) of a base
        // workspace are not inputs.
        if path.is_dir() && ["target", "sessions", ".archmax"].iter().any(|name| entry.file_name() == *name) {
            continue;
        }
        // A case's symbolic links are part of its input: copied as links, never followed.
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            let link = fs::read_link(&path).expect("read the link");
            std::os::unix::fs::symlink(link, &target).expect("copy the link");
        } else if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copy");
            // Git keeps no mode stricter than 0644, and the runner refuses a key file other
            // users may read: a committed test key gets the 0600 its owner would give it.
            if path.extension().is_some_and(|extension| extension == "key") {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).expect("chmod 600");
            }
        }
    }
}

#[test]
fn scratch_paths_differ_across_processes_and_a_dead_processs_old_leftovers_are_swept() {
    let here = scratch("sweep");
    assert_eq!(here, scratch("sweep"), "one process, one label: one path");
    let name = here.file_name().and_then(|name| name.to_str()).expect("a name").to_string();
    assert!(name.starts_with(&format!("archmax-sweep-{}-", std::process::id())), "{name}");

    let base = here.with_file_name(format!("archmax-sweep-base-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    // No process has an id above the kernel's largest (4194304).
    let dead = 4_194_999u32;
    let two_days_ago = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 - 2 * 86_400_000_000_000;
    let leftover = base.join(format!("archmax-runs-x-{dead}-{two_days_ago:016x}"));
    let recent = base.join(format!("archmax-runs-x-{dead}-{:016x}", two_days_ago + 86_400_000_000_000 * 3 / 2));
    let alive = base.join(format!("archmax-runs-x-{}-{two_days_ago:016x}", std::process::id()));
    let foreign = base.join(format!("someone-else-{dead}-{two_days_ago:016x}"));
    for folder in [&leftover, &recent, &alive, &foreign] {
        fs::create_dir_all(folder.join("sessions")).unwrap();
    }
    sweep_leftovers(&base);
    assert!(!leftover.exists(), "an ended process's day-old folder is removed");
    for kept in [&recent, &alive, &foreign] {
        assert!(kept.exists(), "{} is kept", kept.display());
    }
    fs::remove_dir_all(&base).unwrap();
}
