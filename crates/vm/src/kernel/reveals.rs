//! What each path argument of a built-in tool does to the file it names: the one table
//! from which the kernel derives both its decisions and listing redaction.
//!
//! The one thing to know: a tool that can tell a model anything about a file's bytes
//! (its text, a line count, whether a pattern or an `old_string` occurs, a copy
//! elsewhere) *reads* it, and a declared denial of `read_file` on that file binds it
//! exactly as it binds `read_file`. Likewise a denial of `ls` or `glob` hides names from
//! every tool that answers with names, and a denial of `write_file` binds every tool
//! that changes a file's bytes or takes it away (`move_file`'s source, `remove_file`).

/// One way a tool argument exposes or changes what a path holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reveal {
    /// The file's bytes reach the caller, whole or in part (a match, a count, a copy).
    Content,
    /// The names of files and folders reach the caller.
    Names,
    /// The file's bytes change.
    Writes,
}

impl Reveal {
    /// The tools whose declared denial of a path binds every argument that reveals this.
    pub(crate) fn denied_through(self) -> &'static [&'static str] {
        match self {
            Reveal::Content => &["read_file"],
            Reveal::Names => &["ls", "glob"],
            Reveal::Writes => &["write_file"],
        }
    }

    /// The verb the model reads in a refusal.
    pub fn verb(self) -> &'static str {
        match self {
            Reveal::Content => "read",
            Reveal::Names => "list",
            Reveal::Writes => "write",
        }
    }
}

/// The table: tool, argument, what the argument reveals or changes.
const TABLE: &[(&str, &str, &[Reveal])] = &[
    ("read_file", "file_path", &[Reveal::Content]),
    // A search reads every file it looks through, in every mode: even a bare list of
    // matching files answers "does this pattern occur", one bit of content at a time.
    ("grep", "path", &[Reveal::Content, Reveal::Names]),
    ("glob", "path", &[Reveal::Names]),
    ("ls", "path", &[Reveal::Names]),
    ("copy_file", "source", &[Reveal::Content]),
    ("copy_file", "destination", &[Reveal::Writes]),
    // A move takes the file away from where it was: its source is changed as surely as
    // its destination.
    ("move_file", "source", &[Reveal::Content, Reveal::Writes]),
    ("move_file", "destination", &[Reveal::Writes]),
    ("write_file", "file_path", &[Reveal::Writes]),
    // Whether `old_string` occurs, and how often, is an answer about the content.
    ("edit_file", "file_path", &[Reveal::Content, Reveal::Writes]),
    // Removing a file changes it for good; a denial of writing it forbids that too.
    ("remove_file", "file_path", &[Reveal::Writes]),
    // Running a bundle's script executes it; its text never reaches the caller.
    ("archmax_run", "file_path", &[]),
];

/// What `argument` of `tool` reveals or changes. A host tool's `file_path` reads.
pub(crate) fn reveals(tool: &str, argument: &str) -> &'static [Reveal] {
    if let Some((_, _, found)) = TABLE.iter().find(|(name, arg, _)| *name == tool && *arg == argument) {
        return found;
    }
    if TABLE.iter().any(|(name, _, _)| *name == tool) || tool.starts_with("archmax_") {
        return &[];
    }
    if argument == "file_path" { &[Reveal::Content] } else { &[] }
}

#[cfg(test)]
mod tests {
    use archmax_program::tools::{FILE_TOOLS, path_arguments};

    use super::*;

    #[test]
    fn every_path_argument_of_a_file_tool_has_a_row() {
        for tool in FILE_TOOLS.iter().chain(["archmax_run"].iter()) {
            for (argument, _) in path_arguments(tool) {
                assert!(
                    TABLE.iter().any(|(name, arg, _)| name == tool && arg == argument),
                    "{tool}.{argument} has no row"
                );
            }
        }
    }

    #[test]
    fn every_way_of_reading_is_bound_by_a_read_denial() {
        for (tool, argument) in
            [("read_file", "file_path"), ("grep", "path"), ("copy_file", "source"), ("move_file", "source")]
        {
            assert!(reveals(tool, argument).contains(&Reveal::Content), "{tool}.{argument}");
        }
        assert!(reveals("edit_file", "file_path").contains(&Reveal::Content));
        assert!(reveals("crm_lookup", "file_path").contains(&Reveal::Content));
        assert!(reveals("ls", "path") == [Reveal::Names]);
        assert!(reveals("archmax_workflow_x", "file_path").is_empty());
    }

    #[test]
    fn taking_a_file_away_is_writing_it() {
        assert!(reveals("move_file", "source").contains(&Reveal::Writes));
        assert!(reveals("remove_file", "file_path").contains(&Reveal::Writes));
    }
}
