//! The built-in tools: `ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`,
//! `copy_file`, `move_file`, `remove_file`, `write_todos`.
//!
//! Each tool takes its JSON arguments and a [`ToolContext`], and answers with text: the
//! answer the model reads. A failure is an `Err` whose message the runtime hands back to
//! the model as an error-status tool message (`Error: …`); it is never a turn failure.
//! Paths arrive governed by the kernel and are canonicalized again here (an escape is an
//! error); listings are filtered through [`ToolContext::visible`], so a state never sees a bundle or mount
//! it does not have. Every call runs under [`ToolContext::limits`] (see [`crate::limits`]):
//! a bound exceeded is a [`ToolError`] naming it, checked before the work it bounds.
//!
//! [`run`] executes a built-in; [`schema`] describes a built-in or a control tool
//! (`archmax_advance`, …), whose behaviour the runtime implements itself. Each family of
//! tools lives in its own module with its schemas beside its code.

use serde_json::{Value, json};

use archmax_program::tools::DEFAULT_TOOLS;

use crate::limits::{Limits, bound_in_words};
use crate::vfs::{VfsError, Workspace};

mod arguments;
mod caps;
pub use caps::check_handed_files;
mod content;
mod controls;
mod editing;
mod file_operations;
mod listing;
mod reading;
mod search;
mod todos;
mod walk;

#[cfg(test)]
mod fixture;

pub use arguments::type_name;
pub use todos::{Todo, TodoStatus, parse_todos};

/// The tools [`run`] executes, in the order a model is shown them: the default tools
/// without the two that run scripts, which the runtime carries out.
pub const BUILT_IN_TOOLS: &[&str] = DEFAULT_TOOLS.split_at(10).0;

/// What a tool call runs with.
pub struct ToolContext<'a> {
    pub workspace: &'a Workspace,
    /// Whether a canonical path may appear in a listing (`ls`, `glob`, `grep`): false for
    /// paths in skill bundles or mounts the active state does not have, and for paths a
    /// declared denial covers. For `grep` it is also whether the file may be searched at
    /// all: a file the state may not read is skipped, never opened.
    pub visible: &'a dyn Fn(&str) -> bool,
    /// A script is reading: `read_file` answers the file's text as it is (scripts parse
    /// it), not the numbered lines a model is shown. `offset` and `limit` still apply.
    pub raw_text: bool,
    /// The bounds this call runs under; exceeding one is a [`ToolError`] naming it.
    pub limits: Limits,
}

/// A tool's name, description and JSON Schema of its arguments, as a model is shown it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// A tool that ran and failed: its message is answered to the model.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ToolError(pub String);

/// Runs the built-in tool `tool` with its JSON arguments.
/// Keeps `bytes` at `path` for `tool` (a host tool's binary answer, say) under the same
/// bounds a file tool's write meets: the per-file bound and the session's quota of bytes
/// and files.
pub fn keep_file(tool: &'static str, path: &str, bytes: &[u8], ctx: &ToolContext) -> Result<(), ToolError> {
    caps::check_write(ctx, &caps::Write { tool, path, bytes: bytes.len() as u64, freed: None })?;
    ctx.workspace.write(path, bytes).map_err(vfs_failure)
}

pub fn run(tool: &str, args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    match tool {
        "ls" => listing::ls(args, ctx),
        "read_file" => reading::read_file(args, ctx),
        "write_file" => editing::write_file(args, ctx),
        "edit_file" => editing::edit_file(args, ctx),
        "glob" => search::glob(args, ctx),
        "grep" => search::grep(args, ctx),
        "copy_file" => file_operations::copy_file(args, ctx),
        "move_file" => file_operations::move_file(args, ctx),
        "remove_file" => file_operations::remove_file(args, ctx),
        "write_todos" => todos::write_todos(args),
        _ if controls::is_control(tool) => {
            Err(ToolError(format!("{tool} is a control tool; the runtime carries it out, not the standard library")))
        }
        _ => Err(ToolError(format!("'{tool}' is not a built-in tool"))),
    }
}

/// The schema of a built-in tool or a control tool, as a model is shown it.
pub fn schema(tool: &str) -> Option<ToolSchema> {
    listing::schema(tool)
        .or_else(|| reading::schema(tool))
        .or_else(|| editing::schema(tool))
        .or_else(|| search::schema(tool))
        .or_else(|| file_operations::schema(tool))
        .or_else(|| todos::schema(tool))
        .or_else(|| controls::schema(tool))
}

impl ToolSchema {
    /// A schema whose arguments form an object with `properties`, the `required` ones
    /// named, and no others accepted.
    pub(crate) fn closed(name: &str, description: &str, properties: Value, required: &[&str]) -> ToolSchema {
        ToolSchema {
            name: name.to_string(),
            description: description.to_string(),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            }),
        }
    }
}

/// A path as an answer names it: quoted, or "the workspace root" for `""`.
pub(crate) fn shown(path: &str) -> String {
    if path.is_empty() { "the workspace root".to_string() } else { format!("'{path}'") }
}

/// A store failure in the words a model reads. Stores name workspace paths only, so
/// nothing here can reveal where the host keeps the files.
pub(crate) fn vfs_failure(error: VfsError) -> ToolError {
    ToolError(match error {
        VfsError::NotFound(path) => format!("{} does not exist", shown(&path)),
        VfsError::IsADirectory(path) => format!("{} is a folder, not a file", shown(&path)),
        VfsError::NotADirectory(path) => format!("{} is a file, not a folder", shown(&path)),
        VfsError::ReadOnly(path) => format!("{} is in a read-only area and cannot be changed", shown(&path)),
        VfsError::Escape(path) => format!("'{path}' leads outside the workspace"),
        VfsError::TooLarge { path, size, limit } => {
            format!("{} has {size} bytes, over this tool's limit of {}", shown(&path), bound_in_words(limit))
        }
        VfsError::Other(path, detail) => format!("{}: {detail}", shown(&path)),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::fixture::Fixture;

    #[test]
    fn the_built_ins_are_the_default_tools_that_run_no_script() {
        assert_eq!(BUILT_IN_TOOLS.len(), 10);
        assert!(BUILT_IN_TOOLS.iter().all(|tool| !tool.starts_with("archmax_")));
        assert!(
            DEFAULT_TOOLS[BUILT_IN_TOOLS.len()..].iter().all(|tool| matches!(*tool, "archmax_eval" | "archmax_run"))
        );
    }

    #[test]
    fn every_built_in_has_a_closed_schema_that_names_its_path_arguments() {
        for &tool in BUILT_IN_TOOLS {
            let schema = schema(tool).unwrap_or_else(|| panic!("{tool} has no schema"));
            assert_eq!(schema.name, tool);
            assert_eq!(schema.parameters["type"], "object");
            assert_eq!(schema.parameters["additionalProperties"], false, "{tool}");
            let path_arguments =
                if tool == "write_todos" { &[][..] } else { archmax_program::tools::path_arguments(tool) };
            for (argument, _) in path_arguments {
                assert!(schema.parameters["properties"][argument].is_object(), "{tool} lacks `{argument}`");
            }
            let properties = schema.parameters["properties"].as_object().unwrap();
            for required in schema.parameters["required"].as_array().unwrap() {
                assert!(properties.contains_key(required.as_str().unwrap()), "{tool}: {required}");
            }
        }
    }

    #[test]
    fn the_default_file_tools_are_all_built_in() {
        for tool in archmax_program::tools::FILE_TOOLS {
            assert!(BUILT_IN_TOOLS.contains(&tool), "{tool}");
        }
        assert!(schema("task").is_none());
        assert!(schema("archmax_workflow_x").is_none());
    }

    #[test]
    fn run_refuses_what_it_does_not_implement() {
        let fixture = Fixture::new();
        assert!(fixture.refused("archmax_advance", json!({})).contains("the runtime carries it out"));
        assert_eq!(fixture.refused("fetch_url", json!({})), "'fetch_url' is not a built-in tool");
    }

    #[test]
    fn failures_never_show_host_paths() {
        let scratch = std::env::temp_dir().join(format!("archmax-stdlib-tools-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        let workspace = Workspace { session: std::sync::Arc::new(crate::vfs::DiskVfs::new(&scratch)), mounts: vec![] };
        let visible = |_: &str| true;
        let ctx = ToolContext { workspace: &workspace, visible: &visible, raw_text: false, limits: Limits::default() };
        let host = scratch.to_string_lossy().to_string();
        let calls = [
            ("read_file", json!({ "file_path": "none.md" })),
            ("ls", json!({ "path": "none" })),
            ("remove_file", json!({ "file_path": "none.md" })),
            ("grep", json!({ "pattern": "x" })),
            ("copy_file", json!({ "source": "a", "destination": "b" })),
        ];
        for (tool, args) in calls {
            let answer = match run(tool, &args, &ctx) {
                Ok(answer) => answer,
                Err(error) => error.0,
            };
            assert!(!answer.contains(&host), "{tool}: {answer}");
        }
        run("write_file", &json!({ "file_path": "scratchpad/a.md", "content": "a" }), &ctx).unwrap();
        assert_eq!(run("ls", &json!({}), &ctx).unwrap(), "scratchpad/");
        let _ = std::fs::remove_dir_all(&scratch);
    }

    #[test]
    fn store_failures_read_as_sentences() {
        assert_eq!(vfs_failure(VfsError::NotFound("a".to_string())).0, "'a' does not exist");
        assert_eq!(vfs_failure(VfsError::IsADirectory(String::new())).0, "the workspace root is a folder, not a file");
        assert_eq!(
            vfs_failure(VfsError::Other("a".to_string(), "permission denied".to_string())).0,
            "'a': permission denied"
        );
    }
}
