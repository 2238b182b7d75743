//! `ls`: the entries of one folder, as workspace paths a model can pass straight back to
//! the other tools, at most [`crate::limits::Limits::listed_entries`] of them.

use serde_json::{Value, json};

use super::arguments::Arguments;
use super::{ToolContext, ToolError, ToolSchema, shown, vfs_failure};

/// The workspace path of `name` inside `dir`.
pub(crate) fn child_path(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

pub(crate) fn ls(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("ls", args, &["path"])?;
    let dir = args.optional_path("path")?;
    let entries = ctx.workspace.list(&dir).map_err(vfs_failure)?;
    let mut lines = entries.into_iter().filter_map(|entry| {
        let path = child_path(&dir, &entry.name);
        (ctx.visible)(&path).then(|| if entry.is_dir { format!("{path}/") } else { path })
    });
    let max = ctx.limits.listed_entries;
    let shown_lines: Vec<String> = lines.by_ref().take(max).collect();
    if shown_lines.is_empty() {
        return Ok(format!("{} has no entries.", capitalized(&shown(&dir))));
    }
    let mut answer = shown_lines.join("\n");
    let more = lines.count();
    if more > 0 {
        answer.push_str(&format!(
            "\n\n(Listing stopped at {max} entries, ls's limit; {more} more are not shown. Use glob with a \
             pattern to find the ones you need.)"
        ));
    }
    Ok(answer)
}

/// Capitalizes the first letter, for a sentence that opens with a path description.
fn capitalized(text: &str) -> String {
    let mut characters = text.chars();
    match characters.next() {
        Some(first) => first.to_uppercase().chain(characters).collect(),
        None => String::new(),
    }
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    (tool == "ls").then(|| {
        ToolSchema::closed(
            "ls",
            "List one folder of the workspace. Each line is a workspace path you can pass to the other file \
             tools; folders end in `/`. Without `path` it lists the workspace root.",
            json!({
                "path": {
                    "type": "string",
                    "description": "The folder to list, relative to the workspace root, e.g. `scratchpad`. \
                                    Omit it for the root."
                }
            }),
            &[],
        )
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::tools::fixture::Fixture;
    use crate::tools::{ToolContext, run};
    use crate::vfs::{MemoryVfs, Workspace};

    #[test]
    fn the_root_shows_session_areas_and_mounts_but_not_runtime_folders() {
        let fixture = Fixture::new();
        assert_eq!(fixture.ok("ls", json!({})), "AGENTS.md\ncatalogs/\nreference/\nreports/\nscratchpad/\nskills/");
    }

    #[test]
    fn a_folder_lists_workspace_paths() {
        let fixture = Fixture::new();
        assert_eq!(fixture.ok("ls", json!({ "path": "scratchpad" })), "scratchpad/notes.md\nscratchpad/todo.txt");
        assert_eq!(fixture.ok("ls", json!({ "path": "/skills/" })), "skills/billing/\nskills/orders/");
        assert_eq!(fixture.ok("ls", json!({ "path": "catalogs" })), "catalogs/eu/");
    }

    #[test]
    fn hidden_entries_are_left_out() {
        let fixture = Fixture::new().hide("skills/billing").hide("reference");
        assert_eq!(fixture.ok("ls", json!({ "path": "skills" })), "skills/orders/");
        assert!(!fixture.ok("ls", json!({})).contains("reference"));
        let fixture = Fixture::new().hide("skills/billing").hide("skills/orders");
        assert_eq!(fixture.ok("ls", json!({ "path": "skills" })), "'skills' has no entries.");
    }

    #[test]
    fn a_crowded_folder_is_listed_up_to_the_bound() {
        let fixture = Fixture::new().limited(crate::limits::Limits { listed_entries: 1, ..Default::default() });
        assert_eq!(
            fixture.ok("ls", json!({ "path": "scratchpad" })),
            "scratchpad/notes.md\n\n(Listing stopped at 1 entries, ls's limit; 1 more are not shown. Use glob \
             with a pattern to find the ones you need.)"
        );
        assert_eq!(fixture.ok("ls", json!({ "path": "catalogs" })), "catalogs/eu/");
    }

    #[test]
    fn refusals() {
        let fixture = Fixture::new();
        assert_eq!(fixture.refused("ls", json!({ "path": "nowhere" })), "'nowhere' does not exist");
        assert_eq!(
            fixture.refused("ls", json!({ "path": "scratchpad/notes.md" })),
            "'scratchpad/notes.md' is a file, not a folder"
        );
        assert!(fixture.refused("ls", json!({ "path": "../.." })).contains("climbs above"));
        assert!(fixture.refused("ls", json!({ "path": 7 })).contains("`path` must be a string"));
        assert!(fixture.refused("ls", json!({ "dir": "x" })).contains("`dir`"));
    }

    #[test]
    fn an_empty_root_says_so() {
        let empty = Workspace { session: Arc::new(MemoryVfs::new()), mounts: vec![] };
        let visible = |_: &str| true;
        let ctx = ToolContext {
            workspace: &empty,
            visible: &visible,
            raw_text: false,
            limits: crate::limits::Limits::default(),
        };
        assert_eq!(run("ls", &json!({}), &ctx).unwrap(), "The workspace root has no entries.");
    }
}
