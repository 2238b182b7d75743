//! The runtime's tool vocabulary, as data: the twelve default tools, each state type's
//! control tools and the tools it never has, and how each built-in tool uses its path
//! arguments. The validator probes entries against these tables; the lowering step bakes
//! them into each state's surface; the runtime's tools implement them.

use serde::{Deserialize, Serialize};

use crate::schema::ast::StateKind;

/// The workflow-wide grant when `tools.allow_always` is absent.
pub const DEFAULT_TOOLS: [&str; 12] = [
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "copy_file",
    "move_file",
    "remove_file",
    "write_todos",
    "archmax_eval",
    "archmax_run",
];

/// The default tools that work on files (the scratchpad is open to these).
pub const FILE_TOOLS: [&str; 9] =
    ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "copy_file", "move_file", "remove_file"];

/// Control tools of agent and human states, in registration order.
pub const AGENT_CONTROLS: [&str; 6] = [
    "archmax_advance",
    "archmax_reset",
    "archmax_wait",
    "archmax_raise",
    "archmax_get_variables",
    "archmax_set_variables",
];

/// Control tools of grader and code states.
pub const AUTOMATED_CONTROLS: [&str; 5] =
    ["archmax_advance", "archmax_raise", "archmax_get_variables", "archmax_set_variables", "archmax_get_history"];

/// Tools a grader or code state never has, whatever grants them.
pub const AUTOMATED_WITHHELD: [&str; 5] =
    ["write_todos", "archmax_eval", "archmax_run", "archmax_wait", "archmax_reset"];

/// Every `archmax_` name the runtime defines (besides `archmax_workflow_<slug>`).
pub const RUNTIME_TOOLS: [&str; 9] = [
    "archmax_advance",
    "archmax_reset",
    "archmax_wait",
    "archmax_raise",
    "archmax_get_variables",
    "archmax_set_variables",
    "archmax_get_history",
    "archmax_eval",
    "archmax_run",
];

/// The prefix of a delegation tool.
pub const DELEGATION_PREFIX: &str = "archmax_workflow_";

/// The name of the synthetic runtime-note tool, which nothing may call.
pub const NOTE_TOOL: &str = "archmax_note";

/// Deep Agents' subagent dispatch: never grantable.
pub const UNGRANTABLE_TOOL: &str = "task";

/// The control tools a state type always has.
pub fn controls(kind: StateKind) -> &'static [&'static str] {
    match kind {
        StateKind::Agent | StateKind::Human => &AGENT_CONTROLS,
        StateKind::Grader | StateKind::Code => &AUTOMATED_CONTROLS,
    }
}

/// True when the state type never has `tool`.
pub fn withheld(kind: StateKind, tool: &str) -> bool {
    kind.is_automated() && AUTOMATED_WITHHELD.contains(&tool)
}

pub fn is_default_tool(tool: &str) -> bool {
    DEFAULT_TOOLS.contains(&tool)
}

/// The workflow slug a delegation tool names.
pub fn delegation_target(tool: &str) -> Option<&str> {
    tool.strip_prefix(DELEGATION_PREFIX).filter(|slug| !slug.is_empty())
}

/// How a tool uses one of its path arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathAccess {
    Read,
    List,
    Search,
    Write,
    Remove,
    Execute,
}

impl PathAccess {
    pub fn writes(self) -> bool {
        matches!(self, PathAccess::Write | PathAccess::Remove)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PathAccess::Read => "read",
            PathAccess::List => "list",
            PathAccess::Search => "search",
            PathAccess::Write => "write",
            PathAccess::Remove => "remove",
            PathAccess::Execute => "execute",
        }
    }
}

/// The path arguments of a tool and how it uses each. Host tools default to one
/// `file_path` read argument.
pub fn path_arguments(tool: &str) -> &'static [(&'static str, PathAccess)] {
    match tool {
        "read_file" => &[("file_path", PathAccess::Read)],
        "write_file" | "edit_file" => &[("file_path", PathAccess::Write)],
        "ls" => &[("path", PathAccess::List)],
        "glob" | "grep" => &[("path", PathAccess::Search)],
        "archmax_run" => &[("file_path", PathAccess::Execute)],
        "copy_file" => &[("source", PathAccess::Read), ("destination", PathAccess::Write)],
        "move_file" => &[("source", PathAccess::Remove), ("destination", PathAccess::Write)],
        "remove_file" => &[("file_path", PathAccess::Remove)],
        _ if tool.starts_with("archmax_") => &[],
        _ => &[("file_path", PathAccess::Read)],
    }
}

/// The unprefixed spelling authors sometimes write for a runtime tool.
pub fn unprefixed_runtime_tool(tool: &str) -> Option<&'static str> {
    RUNTIME_TOOLS.iter().copied().find(|runtime| runtime.strip_prefix("archmax_") == Some(tool))
}
