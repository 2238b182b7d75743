//! Blocking work (file I/O, fsync) inside async code without stalling the executor.
//!
//! On a multi-threaded tokio runtime the closure runs under
//! [`tokio::task::block_in_place`]: the worker hands its other tasks to another thread
//! first, so sessions sharing the executor keep running while this one waits for the
//! disk. Elsewhere (a current-thread runtime, as one CLI process uses, or no runtime at
//! all) there is nothing else to keep running and the closure runs in place. Borrowed
//! data stays borrowed: unlike `spawn_blocking`, nothing has to be copied to `'static`.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work`, which may block, without holding up other tasks of a multi-threaded
/// executor.
pub fn run_blocking<T>(work: impl FnOnce() -> T) -> T {
    if on_multi_threaded_executor() { tokio::task::block_in_place(work) } else { work() }
}

/// Whether the caller runs on a multi-threaded tokio executor, whose other workers (and
/// blocking pool) can take work while this task waits.
pub fn on_multi_threaded_executor() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

#[cfg(test)]
mod tests {
    use super::run_blocking;

    #[test]
    fn runs_in_place_without_a_runtime() {
        assert_eq!(run_blocking(|| 2 + 2), 4);
    }

    #[test]
    fn runs_in_place_on_a_current_thread_runtime() {
        let executor = tokio::runtime::Builder::new_current_thread().build().expect("executor");
        assert_eq!(executor.block_on(async { run_blocking(|| "here") }), "here");
    }

    #[test]
    fn lets_other_tasks_run_on_a_multi_threaded_runtime() {
        let executor =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("executor");
        // The body runs as a task on the one worker. A task it spawns can only run while
        // the body blocks if the worker was handed over to another thread.
        let body = executor.spawn(async {
            let (sender, receiver) = std::sync::mpsc::channel();
            let other = tokio::spawn(async move { sender.send(()).expect("receiver alive") });
            let waited = run_blocking(|| receiver.recv_timeout(std::time::Duration::from_secs(30)));
            assert!(waited.is_ok(), "the other task ran while this one blocked");
            other.await.expect("the other task finished");
        });
        executor.block_on(body).expect("the body finished");
    }
}
