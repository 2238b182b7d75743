//! What the command-line test binaries share: the repository, scratch folders, running
//! the built binary, copying a workspace.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch path for `label`, unique to this process (not created). It lies in memory
/// (`/dev/shm`) where the machine has it: the tests prove behaviour across process deaths,
/// never across power loss, so the page cache is all the durability they need, and an
/// fsync there costs nothing. Elsewhere it is in the temporary directory.
pub fn scratch(label: &str) -> PathBuf {
    let memory = Path::new("/dev/shm");
    let base = if memory.is_dir() && !fs::metadata(memory).is_ok_and(|meta| meta.permissions().readonly()) {
        memory.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(format!("archmax-{label}-{}", std::process::id()))
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
