//! Starting a stdio server's child process: finding the command, its environment, its
//! working directory, and the task that watches it.
//!
//! The one thing to know: the child's environment is built from nothing
//! (`env_clear`): a minimal base copied from the runner ([`BASE_VARIABLES`]), then the
//! variables `env_vars` names, then the `env` table. Nothing else of the runner's
//! environment (its model API key, its tokens) ever reaches a child.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};

use crate::HostOptions;
use crate::redact::StderrTail;

/// Copied from the runner into every stdio child when set there.
pub const BASE_VARIABLES: [&str; 7] = ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"];

/// What one stdio server is started with, as its table says.
pub struct Launch<'a> {
    pub server: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub env_vars: &'a [String],
    pub cwd: Option<&'a str>,
}

/// A running child: its stderr tail, how it ended, and the way to stop it. Dropping it
/// kills the child.
pub struct Process {
    stop: Mutex<Option<oneshot::Sender<()>>>,
    ended: watch::Receiver<Option<String>>,
    pub stderr: StderrTail,
}

impl Process {
    /// Kills the child (no-op once it has ended).
    pub fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = stop.send(());
        }
    }

    pub fn has_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// How the child ended (`exit status: 1`), waiting at most `wait` for it, and for its
    /// stderr to be drained.
    pub async fn ending(&self, wait: Duration) -> Option<String> {
        let mut ended = self.ended.clone();
        let status = match tokio::time::timeout(wait, ended.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => status.clone(),
            _ => None,
        };
        self.stderr.settle(wait).await;
        status
    }

    /// Stops the child and waits (bounded) until it is gone.
    pub async fn stop_and_wait(&self, wait: Duration) {
        self.stop();
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(wait, ended.wait_for(Option::is_some)).await;
    }
}

/// The environment a child starts with. `Err` names a variable `env_vars` lists that the
/// runner does not have.
pub fn environment(launch: &Launch<'_>, options: &HostOptions) -> Result<BTreeMap<String, String>, String> {
    let mut environment = BTreeMap::new();
    for name in BASE_VARIABLES {
        if let Some(value) = (options.env)(name) {
            environment.insert(name.to_string(), value);
        }
    }
    for name in launch.env_vars {
        match (options.env)(name) {
            Some(value) => environment.insert(name.clone(), value),
            None => {
                return Err(format!(
                    "the environment variable `{name}` (listed in its `env_vars`) is not set in the runner's environment"
                ));
            }
        };
    }
    for (name, value) in launch.env {
        environment.insert(name.clone(), value.clone());
    }
    Ok(environment)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// The program to run: a command with a `/` is a path (relative to the workspace root);
/// a bare name is looked up in the host's command directories, then on the runner's `PATH`.
pub fn resolve_command(command: &str, options: &HostOptions) -> Result<PathBuf, String> {
    if command.contains('/') {
        let path = Path::new(command);
        return Ok(if path.is_absolute() { path.to_path_buf() } else { options.root.join(path) });
    }
    let path_dirs: Vec<PathBuf> =
        (options.env)("PATH").map(|path| std::env::split_paths(&path).collect()).unwrap_or_default();
    options
        .command_dirs
        .iter()
        .chain(&path_dirs)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("the command `{command}` was found neither beside archmax nor on PATH"))
}

/// Spawns the child with piped stdio; `generation` is bumped when it ends, so the host's
/// catalog is rebuilt.
pub fn spawn(
    launch: &Launch<'_>,
    options: &HostOptions,
    generation: Arc<AtomicU64>,
) -> Result<(Process, ChildStdout, ChildStdin), String> {
    let program = resolve_command(launch.command, options)?;
    let environment = environment(launch, options)?;
    let cwd = match launch.cwd {
        Some(cwd) => options.root.join(cwd),
        None => options.root.clone(),
    };
    let mut command = Command::new(&program);
    command
        .args(launch.args)
        .env_clear()
        .envs(&environment)
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|error| format!("could not run `{}`: {error}", launch.command))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(format!("could not connect to the pipes of `{}`", launch.command));
    };
    let stderr = StderrTail::capture(stderr);
    let (stop, stopped) = oneshot::channel::<()>();
    let (end, ended) = watch::channel(None);
    let server = launch.server.to_string();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            // A stop request, or the process handle dropped: either way the child goes.
            _ = stopped => {
                let _ = child.start_kill();
                child.wait().await
            }
        };
        let description = match status {
            Ok(status) => status.to_string(),
            Err(error) => format!("could not be waited for: {error}"),
        };
        tracing::debug!(server = %server, status = %description, "MCP server process ended");
        let _ = end.send(Some(description));
        generation.fetch_add(1, Ordering::SeqCst);
    });
    Ok((Process { stop: Mutex::new(Some(stop)), ended, stderr }, stdout, stdin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(env: &[(&str, &str)]) -> HostOptions {
        let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        HostOptions::new("/workspace").with_env_map(env)
    }

    #[test]
    fn the_environment_is_the_base_then_env_vars_then_env() {
        let options = options(&[("PATH", "/bin"), ("HOME", "/home/a"), ("OPENAI_API_KEY", "sk"), ("CRM_TOKEN", "t")]);
        let env = BTreeMap::from([
            ("CRM_URL".to_string(), "https://crm".to_string()),
            ("HOME".to_string(), "/srv".to_string()),
        ]);
        let env_vars = vec!["CRM_TOKEN".to_string()];
        let launch = Launch { server: "crm", command: "crm", args: &[], env: &env, env_vars: &env_vars, cwd: None };
        let built = environment(&launch, &options).unwrap_or_default();
        let names: Vec<&str> = built.keys().map(String::as_str).collect();
        assert_eq!(names, ["CRM_TOKEN", "CRM_URL", "HOME", "PATH"]);
        assert_eq!(built["HOME"], "/srv");
        let missing = vec!["NOT_SET".to_string()];
        let launch = Launch { env_vars: &missing, ..launch };
        let error = environment(&launch, &options).err().unwrap_or_default();
        assert!(error.contains("`NOT_SET`"), "{error}");
    }

    #[test]
    fn a_command_with_a_slash_is_a_path_under_the_root() {
        let options = options(&[]);
        assert_eq!(resolve_command("tools/server", &options), Ok(PathBuf::from("/workspace/tools/server")));
        assert_eq!(resolve_command("/opt/server", &options), Ok(PathBuf::from("/opt/server")));
        assert!(resolve_command("no-such-command-anywhere", &options).is_err());
    }
}
