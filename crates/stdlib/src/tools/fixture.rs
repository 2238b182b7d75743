//! A workspace for the tools' tests: a session in memory, a read-only `skills/` mount, a
//! non-searchable `reference/` mount, a writable `catalogs/eu/` mount and the
//! `AGENTS.md` file mount, with a visibility rule that hides chosen prefixes.

use std::sync::Arc;

use serde_json::Value;

use super::{ToolContext, ToolError, run};
use crate::limits::Limits;
use crate::vfs::{MemoryVfs, MountPoint, Vfs, Workspace};

pub(crate) struct Fixture {
    pub workspace: Workspace,
    pub session: Arc<MemoryVfs>,
    hidden: Vec<String>,
    limits: Limits,
}

pub(crate) fn mount(key: &str, read_only: bool, searchable: bool, store: Arc<dyn Vfs>) -> MountPoint {
    MountPoint { key: key.to_string(), read_only, searchable, store }
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let session = Arc::new(MemoryVfs::with_files([
            ("scratchpad/notes.md", "first line\nsecond line\nthird line\n"),
            ("scratchpad/todo.txt", "buy milk\n"),
            ("reports/2024/q1.md", "# Q1\nrevenue up\n"),
            ("checkpoints/cp-1.json", "{}"),
            ("artifacts/graph.json", "{}"),
        ]));
        let skills = MemoryVfs::with_files([
            ("orders/SKILL.md", "---\nname: orders\n---\nLook up orders.\n"),
            ("orders/scripts/lookup.js", "export default 1;\n"),
            ("billing/SKILL.md", "---\nname: billing\n---\nRevenue rules.\n"),
        ]);
        let reference = MemoryVfs::with_files([("manual.md", "revenue handbook\n")]);
        let eu = MemoryVfs::with_files([("prices.json", "{\"revenue\": 1}\n")]);
        let workspace = Workspace {
            session: session.clone(),
            mounts: vec![
                mount("skills/", true, true, Arc::new(skills)),
                mount("reference/", true, false, Arc::new(reference)),
                mount("catalogs/eu/", false, true, Arc::new(eu)),
                mount("AGENTS.md", true, true, Arc::new(MemoryVfs::single_file("# Agents\nBe kind.\n"))),
            ],
        };
        Fixture { workspace, session, hidden: Vec::new(), limits: Limits::default() }
    }

    /// Hides every path at or below `prefix` from listings.
    pub(crate) fn hide(mut self, prefix: &str) -> Fixture {
        self.hidden.push(prefix.to_string());
        self
    }

    /// Runs every call under `limits` (small bounds keep the tests' files small).
    pub(crate) fn limited(mut self, limits: Limits) -> Fixture {
        self.limits = limits;
        self
    }

    pub(crate) fn run(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        let visible = |path: &str| {
            !self.hidden.iter().any(|prefix| {
                path == prefix || path.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with('/'))
            })
        };
        let ctx = ToolContext { workspace: &self.workspace, visible: &visible, raw_text: false, limits: self.limits };
        run(tool, &args, &ctx)
    }

    /// The answer of a call that must succeed.
    pub(crate) fn ok(&self, tool: &str, args: Value) -> String {
        match self.run(tool, args) {
            Ok(answer) => answer,
            Err(error) => panic!("{tool} failed: {error}"),
        }
    }

    /// The message of a call that must fail.
    pub(crate) fn refused(&self, tool: &str, args: Value) -> String {
        match self.run(tool, args) {
            Ok(answer) => panic!("{tool} succeeded: {answer}"),
            Err(error) => error.0,
        }
    }
}
