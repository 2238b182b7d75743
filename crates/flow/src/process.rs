//! Running one argv with bounds: what command steps and transition hooks share.
//!
//! The one thing to know: **never a shell**. The program is `argv[0]`, found like any
//! `exec` finds it; the child gets its own process group, the named credential
//! variables are removed from its environment, and a timeout or an output past the
//! bound ends the whole group, so a grandchild cannot keep a pipe open.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a run may take and how much it may print (stdout and stderr each).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub timeout: Duration,
    pub output_bytes: usize,
}

/// A run that ended by itself.
#[derive(Debug)]
pub struct Finished {
    /// The exit status, or `None` when a signal ended it.
    pub status: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a run has no status of its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    #[error("`{program}` could not be started: {reason}")]
    Start { program: String, reason: String },
    #[error("it ran past its timeout of {0} ms and was stopped")]
    Timeout(u128),
    #[error("it printed more than {0} bytes and was stopped")]
    Oversized(usize),
}

/// How long the output of a process that ended is still awaited from pipes that a
/// process it left behind (outside its group) may hold open.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Runs `argv` in `cwd` with `stdin`, without the variables in `remove`.
pub fn run(
    argv: &[String],
    cwd: &Path,
    stdin: &[u8],
    remove: &[String],
    bounds: Bounds,
) -> Result<Finished, ProcessError> {
    let Some((program, arguments)) = argv.split_first() else {
        return Err(ProcessError::Start { program: String::new(), reason: "the argv is empty".to_string() });
    };
    let mut command = Command::new(program);
    let input = if stdin.is_empty() { Stdio::null() } else { Stdio::piped() };
    command.args(arguments).current_dir(cwd).stdin(input).stdout(Stdio::piped()).stderr(Stdio::piped());
    for name in remove {
        command.env_remove(name);
    }
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child =
        command.spawn().map_err(|error| ProcessError::Start { program: program.clone(), reason: error.to_string() })?;
    let oversized = Arc::new(AtomicBool::new(false));
    // Each pipe is read on its own thread into a shared buffer, and the thread says when
    // its pipe closed: a process that escaped the group may hold a pipe open for ever,
    // and what it wrote so far is then taken without waiting for the end.
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let oversized = Arc::clone(&oversized);
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (closed, done) = std::sync::mpsc::channel::<()>();
        let shared = Arc::clone(&kept);
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut buffer = [0u8; 8192];
                while let Ok(read) = pipe.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    let Ok(mut kept) = shared.lock() else { break };
                    if kept.len() + read > bounds.output_bytes {
                        oversized.store(true, Ordering::SeqCst);
                        break;
                    }
                    kept.extend_from_slice(&buffer[..read]);
                }
            }
            let _ = closed.send(());
        });
        (kept, done)
    };
    let collect = |(kept, done): (Arc<std::sync::Mutex<Vec<u8>>>, std::sync::mpsc::Receiver<()>), until: Instant| {
        let _ = done.recv_timeout(until.saturating_duration_since(Instant::now()));
        kept.lock().map(|kept| kept.clone()).unwrap_or_default()
    };
    let stdout = reader(child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let stderr = reader(child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    if let Some(mut pipe) = child.stdin.take() {
        let input = stdin.to_vec();
        // A child that does not read its stdin and exits closes the pipe; that is its
        // business, and must not end this process with SIGPIPE (the command line keeps
        // the default action for its own stdout), so this thread blocks the signal and
        // takes the write's error instead.
        std::thread::spawn(move || {
            block_sigpipe_in_this_thread();
            let _ = pipe.write_all(&input);
        });
    }
    let started = Instant::now();
    let stop = |child: &mut std::process::Child| {
        if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = child.kill();
        let _ = child.wait();
    };
    let status = loop {
        if oversized.load(Ordering::SeqCst) {
            stop(&mut child);
            return Err(ProcessError::Oversized(bounds.output_bytes));
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(error) => {
                stop(&mut child);
                return Err(ProcessError::Start { program: program.clone(), reason: error.to_string() });
            }
        }
        if started.elapsed() >= bounds.timeout {
            stop(&mut child);
            return Err(ProcessError::Timeout(bounds.timeout.as_millis()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The group may hold a grandchild that keeps the pipes open; it goes with the leader.
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let until = Instant::now() + PIPE_GRACE;
    let stdout = collect(stdout, until);
    let stderr = collect(stderr, until);
    if oversized.load(Ordering::SeqCst) {
        return Err(ProcessError::Oversized(bounds.output_bytes));
    }
    Ok(Finished { status: status.code(), stdout, stderr })
}

/// Blocks SIGPIPE for the calling thread only: a write to a closed pipe then fails with
/// `EPIPE`, and the signal left pending dies with the thread.
fn block_sigpipe_in_this_thread() {
    // SAFETY: `sigemptyset`, `sigaddset` and `pthread_sigmask` are given a set that lives
    // on this stack frame for the whole call, and only change this thread's signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".to_string(), "-c".to_string(), script.to_string()]
    }

    const BOUNDS: Bounds = Bounds { timeout: Duration::from_secs(60), output_bytes: 1024 };

    #[test]
    fn stdin_reaches_the_program_and_its_status_comes_back() {
        let finished = run(&sh("cat; exit 3"), Path::new("."), b"hello", &[], BOUNDS);
        let finished = finished.ok();
        assert_eq!(finished.as_ref().and_then(|finished| finished.status), Some(3));
        assert_eq!(finished.map(|finished| finished.stdout), Some(b"hello".to_vec()));
    }

    #[test]
    fn output_past_the_bound_stops_the_program() {
        let result = run(&sh("head -c 5000 /dev/zero"), Path::new("."), b"", &[], BOUNDS);
        assert_eq!(result.err(), Some(ProcessError::Oversized(1024)));
    }

    #[test]
    fn a_process_left_behind_outside_the_group_does_not_hold_the_result() {
        // `setsid` puts the sleeper in a session of its own, out of reach of the group
        // kill, with the command's stdout still open: the result is taken regardless.
        // The sleeper never ends by itself (waiting for its pipe would hang this test); it
        // writes its pid first, so the test ends it afterwards.
        let pid_file = std::env::temp_dir().join(format!("archmax-flow-left-behind-{}", std::process::id()));
        let file = pid_file.display();
        let script = format!(
            "setsid sh -c 'echo $$ > {file}; exec sleep 100000' & while [ ! -s {file} ]; do sleep 0.01; done; echo done"
        );
        let finished = run(&sh(&script), Path::new("."), b"", &[], BOUNDS);
        let pid = std::fs::read_to_string(&pid_file).ok().and_then(|text| text.trim().parse::<i32>().ok());
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let _ = std::fs::remove_file(&pid_file);
        let finished = finished.ok();
        assert_eq!(finished.as_ref().and_then(|finished| finished.status), Some(0));
        assert_eq!(finished.map(|finished| finished.stdout), Some(b"done\n".to_vec()));
    }

    #[test]
    fn a_program_that_outlives_its_timeout_is_stopped() {
        let bounds = Bounds { timeout: Duration::from_millis(50), ..BOUNDS };
        let result = run(&sh("sleep 30"), Path::new("."), b"", &[], bounds);
        assert_eq!(result.err(), Some(ProcessError::Timeout(50)));
    }

    #[test]
    fn a_program_that_leaves_its_stdin_unread_does_not_end_the_caller() {
        // More than a pipe holds, to a program that exits without reading: the write fails
        // in its own thread, with no SIGPIPE for the process.
        let input = vec![b'x'; 1 << 20];
        let finished = run(&sh("exit 0"), Path::new("."), &input, &[], BOUNDS);
        assert_eq!(finished.ok().and_then(|finished| finished.status), Some(0));
    }

    #[test]
    fn a_missing_program_is_a_start_failure() {
        let result = run(&["archmax-no-such-program".to_string()], Path::new("."), b"", &[], BOUNDS);
        assert!(matches!(result, Err(ProcessError::Start { .. })));
    }
}
