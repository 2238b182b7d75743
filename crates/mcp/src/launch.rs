//! Starting a stdio server's child process: finding the command, its environment, its
//! working directory, and the task that watches it.
//!
//! The one thing to know: the child's environment is built from nothing
//! (`env_clear`): a minimal base copied from the runner ([`BASE_VARIABLES`]), then the
//! variables `env_vars` names, then the `env` table. Nothing else of the runner's
//! environment (its model API key, its tokens) ever reaches a child.
//!
//! A child's stdout is read through [`LineCapped`]: one message (one line) longer than
//! [`MAX_LINE_BYTES`] ends the connection and marks the process as having sent it, so the
//! call in flight fails saying its answer was too large instead of waiting for a timeout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
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
    /// Set once the child wrote a line over [`MAX_LINE_BYTES`] (see [`LineCapped`]).
    oversized: Arc<AtomicBool>,
}

impl Process {
    /// Kills the child (no-op once it has ended).
    pub fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = stop.send(());
        }
    }

    /// Whether the connection ended because the child wrote a line over the cap.
    pub fn sent_oversized_line(&self) -> bool {
        self.oversized.load(Ordering::SeqCst)
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
) -> Result<(Process, LineCapped<ChildStdout>, ChildStdin), String> {
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
    let oversized = Arc::new(AtomicBool::new(false));
    let stdout = LineCapped::new(stdout, MAX_LINE_BYTES, Arc::clone(&oversized));
    Ok((Process { stop: Mutex::new(Some(stop)), ended, stderr, oversized }, stdout, stdin))
}

/// The most bytes one message from a stdio server may hold, its newline not counted.
/// The MCP SDK drops a longer line without a word (its own cap is the same 16 MiB), which
/// would leave the call waiting for its timeout; [`LineCapped`] ends the connection first.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024 - 1;

/// A child's stdout, read with a bound on the length of one line: the read that would
/// carry a line past `cap` bytes fails instead (and every read after it), and `oversized`
/// is set so the host can say why the connection ended.
pub struct LineCapped<R> {
    inner: R,
    cap: usize,
    /// Bytes read since the last newline.
    current_line: usize,
    oversized: Arc<AtomicBool>,
}

impl<R> LineCapped<R> {
    pub fn new(inner: R, cap: usize, oversized: Arc<AtomicBool>) -> LineCapped<R> {
        LineCapped { inner, cap, current_line: 0, oversized }
    }

    /// Counts `fresh` bytes into the current line; `false` once a line is over the cap.
    fn within_cap(&mut self, fresh: &[u8]) -> bool {
        let mut lines = fresh.split(|byte| *byte == b'\n');
        let mut length = self.current_line.saturating_add(lines.next().map_or(0, <[u8]>::len));
        for line in lines {
            if length > self.cap {
                return false;
            }
            length = line.len();
        }
        self.current_line = length;
        length <= self.cap
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCapped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let over = || std::io::Error::new(std::io::ErrorKind::InvalidData, "a message is over the line cap");
        if self.oversized.load(Ordering::SeqCst) {
            return Poll::Ready(Err(over()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(context, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = buf.filled().get(before..).unwrap_or_default();
                if self.within_cap(fresh) {
                    Poll::Ready(Ok(()))
                } else {
                    self.oversized.store(true, Ordering::SeqCst);
                    Poll::Ready(Err(over()))
                }
            }
            other => other,
        }
    }
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
    fn a_line_over_the_cap_is_caught_however_the_reads_split_it() {
        let flag = || Arc::new(AtomicBool::new(false));
        let mut capped = LineCapped::new((), 4, flag());
        assert!(capped.within_cap(b"ab"));
        assert!(capped.within_cap(b"cd\nefgh\n"));
        assert!(capped.within_cap(b"wxyz"));
        assert!(!capped.within_cap(b"!"), "five bytes with no newline between");
        let mut capped = LineCapped::new((), 4, flag());
        assert!(!capped.within_cap(b"ok\ntoo long\nok"), "a long line in the middle of one read");
    }

    #[test]
    fn a_command_with_a_slash_is_a_path_under_the_root() {
        let options = options(&[]);
        assert_eq!(resolve_command("tools/server", &options), Ok(PathBuf::from("/workspace/tools/server")));
        assert_eq!(resolve_command("/opt/server", &options), Ok(PathBuf::from("/opt/server")));
        assert!(resolve_command("no-such-command-anywhere", &options).is_err());
    }
}
