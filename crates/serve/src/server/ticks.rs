//! The clock of the server's chores (recovery, schedule, waiting notifications): one
//! period at a time, ended when the server stops accepting turns.

use tokio::sync::watch;

/// The periods of one chore's loop ([`super::Server::ticks`]).
pub(crate) struct Ticks {
    pub(super) stopping: watch::Receiver<bool>,
    pub(super) every: std::time::Duration,
}

impl Ticks {
    /// Waits one period: `true` to run the chore again, `false` once the server stops
    /// accepting turns (the wait ends early then).
    pub(crate) async fn next(&mut self) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(self.every) => {}
            _ = self.stopping.changed() => return false,
        }
        !*self.stopping.borrow()
    }
}
