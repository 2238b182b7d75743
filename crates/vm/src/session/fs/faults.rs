//! A seam for the crash tests: every durable write step of the store passes a named
//! fault point, and a test can make the N-th point fail as if the process died there.
//!
//! The one thing to know: outside `cfg(test)` this is an empty type whose `hit` always
//! succeeds (and `torn_write` writes once), so release builds carry no hook at all.
//! Tests also read how many syncs a write made.

use std::io;

/// Where the store is in a write, counted across one writer's life.
#[derive(Debug, Default)]
pub(super) struct Faults {
    #[cfg(test)]
    pub crash_at: Option<usize>,
    #[cfg(test)]
    pub passed: usize,
    #[cfg(test)]
    pub crashed_at: Option<&'static str>,
    /// How many syncs (fsync, fdatasync) of the store's files the writer made.
    #[cfg(test)]
    pub syncs: usize,
}

impl Faults {
    /// Passes the fault point `name`; in tests, fails at the chosen point.
    #[cfg_attr(not(test), inline(always))]
    pub fn hit(&mut self, name: &'static str) -> io::Result<()> {
        #[cfg(test)]
        {
            let index = self.passed;
            self.passed += 1;
            if self.crash_at == Some(index) {
                self.crashed_at = Some(name);
                return Err(io::Error::other(format!("injected crash at `{name}`")));
            }
        }
        let _ = name;
        Ok(())
    }

    /// Counts one sync of a store file, so a test can tell what a write costs.
    #[cfg_attr(not(test), inline(always))]
    pub fn synced(&mut self) {
        #[cfg(test)]
        {
            self.syncs += 1;
        }
    }

    /// Writes `bytes` through `write` (given each part's offset in `bytes`); in tests
    /// in two halves with the fault point `name` between them, so a crash there leaves
    /// a torn write. Release builds write once.
    pub(crate) fn torn_write(
        &mut self,
        name: &'static str,
        bytes: &[u8],
        mut write: impl FnMut(usize, &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        #[cfg(test)]
        {
            let half = bytes.len() / 2;
            write(0, &bytes[..half])?;
            self.hit(name)?;
            write(half, &bytes[half..])
        }
        #[cfg(not(test))]
        {
            let _ = name;
            write(0, bytes)
        }
    }
}
