//! A seam for the crash tests: every durable write step of the store passes a named
//! fault point, and a test can make the N-th point fail as if the process died there.
//!
//! The one thing to know: outside `cfg(test)` this is an empty type whose `hit` always
//! succeeds, so release builds carry no hook at all.

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
}
