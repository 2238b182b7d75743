//! The runtime's tool vocabulary, as data: the twelve default tools, each state type's
//! control tools and the tools it never has, and how each built-in tool uses its path
//! arguments. The validator probes entries against these tables; the lowering step bakes
//! them into each state's surface; the runtime's tools implement them.

use serde::{Deserialize, Serialize};

use crate::kinds::StateKind;

/// Every tool the runtime itself defines: the built-in file tools, `write_todos`, the
/// sandbox tools, the control tools and the note channel. The tables below are lists of
/// these; code that acts on a tool matches on this enum, never on its spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    Ls,
    ReadFile,
    WriteFile,
    EditFile,
    Glob,
    Grep,
    CopyFile,
    MoveFile,
    RemoveFile,
    WriteTodos,
    Eval,
    Run,
    Advance,
    Reset,
    Wait,
    Raise,
    GetVariables,
    SetVariables,
    GetHistory,
    Note,
}

impl Tool {
    pub const ALL: [Tool; 20] = [
        Tool::Ls,
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::EditFile,
        Tool::Glob,
        Tool::Grep,
        Tool::CopyFile,
        Tool::MoveFile,
        Tool::RemoveFile,
        Tool::WriteTodos,
        Tool::Eval,
        Tool::Run,
        Tool::Advance,
        Tool::Reset,
        Tool::Wait,
        Tool::Raise,
        Tool::GetVariables,
        Tool::SetVariables,
        Tool::GetHistory,
        Tool::Note,
    ];

    /// The name a model calls it by.
    pub const fn name(self) -> &'static str {
        match self {
            Tool::Ls => "ls",
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::EditFile => "edit_file",
            Tool::Glob => "glob",
            Tool::Grep => "grep",
            Tool::CopyFile => "copy_file",
            Tool::MoveFile => "move_file",
            Tool::RemoveFile => "remove_file",
            Tool::WriteTodos => "write_todos",
            Tool::Eval => "archmax_eval",
            Tool::Run => "archmax_run",
            Tool::Advance => "archmax_advance",
            Tool::Reset => "archmax_reset",
            Tool::Wait => "archmax_wait",
            Tool::Raise => "archmax_raise",
            Tool::GetVariables => "archmax_get_variables",
            Tool::SetVariables => "archmax_set_variables",
            Tool::GetHistory => "archmax_get_history",
            Tool::Note => "archmax_note",
        }
    }

    /// The runtime's tool of that name, if it is one (host and delegation tools are not).
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// The sandbox tools, which run a script.
    pub fn is_script(self) -> bool {
        matches!(self, Tool::Eval | Tool::Run)
    }

    /// The control tools that move or park a session.
    pub fn moves_session(self) -> bool {
        matches!(self, Tool::Advance | Tool::Reset | Tool::Wait | Tool::Raise)
    }
}

const fn names<const N: usize>(tools: [Tool; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut index = 0;
    while index < N {
        names[index] = tools[index].name();
        index += 1;
    }
    names
}

/// `N` tools of [`Tool::ALL`] from `START`. Its order puts the file tools first, then
/// the rest of the default grant (the sandbox tools last), then the controls.
const fn run<const START: usize, const N: usize>() -> [Tool; N] {
    let mut tools = [Tool::Ls; N];
    let mut index = 0;
    while index < N {
        tools[index] = Tool::ALL[START + index];
        index += 1;
    }
    tools
}

/// The workflow-wide grant when `tools.allow_always` is absent: the file tools,
/// `write_todos` and the two sandbox tools.
pub const DEFAULT_TOOLS: [&str; 12] = names(run::<0, 12>());

/// The default tools that work on files (the scratchpad is open to these).
pub const FILE_TOOLS: [&str; 9] = names(run::<0, 9>());

/// Control tools of agent and human states, in registration order.
pub const AGENT_CONTROLS: [&str; 6] =
    names([Tool::Advance, Tool::Reset, Tool::Wait, Tool::Raise, Tool::GetVariables, Tool::SetVariables]);

/// Control tools of grader and code states.
pub const AUTOMATED_CONTROLS: [&str; 5] =
    names([Tool::Advance, Tool::Raise, Tool::GetVariables, Tool::SetVariables, Tool::GetHistory]);

/// Tools a grader or code state never has, whatever grants them.
pub const AUTOMATED_WITHHELD: [&str; 5] = names([Tool::WriteTodos, Tool::Eval, Tool::Run, Tool::Wait, Tool::Reset]);

/// Every `archmax_` name the runtime defines (besides `archmax_workflow_<slug>`), the
/// note channel excepted.
pub const RUNTIME_TOOLS: [&str; 9] = names(runtime_tools());

/// The controls first, then the sandbox tools: the order diagnostics list them in.
const fn runtime_tools() -> [Tool; 9] {
    let controls = run::<12, 7>();
    let mut tools = [Tool::Eval; 9];
    let mut index = 0;
    while index < 7 {
        tools[index] = controls[index];
        index += 1;
    }
    tools[8] = Tool::Run;
    tools
}

/// The prefix of a delegation tool.
pub const DELEGATION_PREFIX: &str = "archmax_workflow_";

/// The name of the synthetic runtime-note tool, which nothing may call.
pub const NOTE_TOOL: &str = Tool::Note.name();

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

    /// Every way a tool may use a path argument, in the order they are listed to people.
    pub const ALL: [PathAccess; 6] = [
        PathAccess::Read,
        PathAccess::List,
        PathAccess::Search,
        PathAccess::Write,
        PathAccess::Remove,
        PathAccess::Execute,
    ];

    /// The access spelled `text` (`read`, `list`, …), as `archmax.toml` and a schema's
    /// `x-archmax-path` write it.
    pub fn parse(text: &str) -> Option<PathAccess> {
        PathAccess::ALL.into_iter().find(|access| access.as_str() == text)
    }

    /// Every spelling [`PathAccess::parse`] accepts.
    pub fn spellings() -> Vec<&'static str> {
        PathAccess::ALL.iter().map(|access| access.as_str()).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_found_by_its_name_and_names_are_unique() {
        for tool in Tool::ALL {
            assert_eq!(Tool::from_name(tool.name()), Some(tool));
        }
        let mut names: Vec<&str> = Tool::ALL.iter().map(|tool| tool.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Tool::ALL.len());
        assert_eq!(Tool::from_name("archmax_workflow_refunds"), None);
        assert_eq!(Tool::from_name("lookup_order"), None);
    }

    #[test]
    fn the_tables_are_lists_of_runtime_tools() {
        for name in DEFAULT_TOOLS.iter().chain(&AGENT_CONTROLS).chain(&AUTOMATED_CONTROLS).chain(&RUNTIME_TOOLS) {
            assert!(Tool::from_name(name).is_some(), "{name}");
        }
        assert!(RUNTIME_TOOLS.iter().all(|name| name.starts_with("archmax_")));
        assert_eq!(NOTE_TOOL, "archmax_note");
        // The grants the spec names, in its order; FILE_TOOLS is the file-handling part.
        let default = "ls read_file write_file edit_file glob grep copy_file move_file remove_file write_todos archmax_eval archmax_run";
        assert_eq!(DEFAULT_TOOLS.join(" "), default);
        assert_eq!(FILE_TOOLS, DEFAULT_TOOLS[..9]);
        let mut runtime: Vec<&str> =
            Tool::ALL.iter().map(|tool| tool.name()).filter(|name| name.starts_with("archmax_")).collect();
        runtime.retain(|name| *name != NOTE_TOOL);
        let mut listed = RUNTIME_TOOLS.to_vec();
        listed.sort_unstable();
        runtime.sort_unstable();
        assert_eq!(listed, runtime, "every archmax_ tool but the note");
        assert_eq!(RUNTIME_TOOLS[0], "archmax_advance", "controls first");
        assert_eq!(&RUNTIME_TOOLS[7..], ["archmax_eval", "archmax_run"]);
    }
}
