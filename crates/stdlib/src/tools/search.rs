//! `glob` and `grep`: finding files by name pattern and by content.
//!
//! Both search below a folder (the root by default), skip mounts the host made
//! unsearchable unless the search is addressed inside one, and drop every path the
//! active state may not see; `grep` asks before opening a file, so a file the state may
//! not read is never searched, in any output mode. Answers list workspace paths, sorted,
//! at most [`Limits::listed_entries`] lines; `grep` reads files up to the per-file bound
//! and stops at its bound of bytes read per call, and says so in its answer.

use archmax_program::glob::Glob;
use regex::Regex;
use serde_json::{Value, json};

use super::arguments::Arguments;
use super::content::{Content, binary_type_by_name, classify};
use super::reading::clipped_line;
use super::walk::{MAX_VISITED_ENTRIES, files_below};
use super::{ToolContext, ToolError, ToolSchema, shown, vfs_failure};
use crate::limits::{Limits, bound_in_words};
use crate::vfs::{VfsError, last_segment};

/// What a search looks through.
enum Scope {
    /// The files below a folder, and whether the walk was cut short.
    Folder { files: Vec<String>, cut_short: bool },
    /// One file, named directly.
    File(String),
}

/// The scope a `path` argument names.
fn scope(ctx: &ToolContext, base: &str) -> Result<Scope, ToolError> {
    let entry = ctx
        .workspace
        .stat(base)
        .map_err(vfs_failure)?
        .ok_or_else(|| ToolError(format!("{} does not exist", shown(base))))?;
    if !entry.is_dir {
        return Ok(Scope::File(base.to_string()));
    }
    let walk = files_below(ctx.workspace, base).map_err(vfs_failure)?;
    Ok(Scope::Folder { files: walk.files, cut_short: walk.cut_short })
}

fn compile_glob(argument: &str, text: &str, limits: &Limits) -> Result<Glob, ToolError> {
    let length = text.chars().count();
    if length > limits.glob_pattern_chars {
        return Err(ToolError(format!(
            "the argument `{argument}` is {length} characters long, over the bound of {} characters for a glob; \
             use a shorter pattern",
            limits.glob_pattern_chars
        )));
    }
    Glob::literal_text(text)
        .map_err(|error| ToolError(format!("the argument `{argument}` is not a usable glob: {}", error.0)))
}

fn glob_matches(glob: &Glob, value: &str) -> bool {
    // A glob compiled from plain text has no `${{…}}` holes, so nothing is left unresolved.
    glob.matches(value, &|_| None).unwrap_or(false)
}

/// `path` relative to `base` (a folder that contains it).
fn relative_to<'p>(base: &str, path: &'p str) -> &'p str {
    if base.is_empty() { path } else { path.strip_prefix(base).map_or(path, |rest| rest.trim_start_matches('/')) }
}

/// Answer lines, capped, with notes on anything left out.
struct Answer {
    lines: Vec<String>,
    max_lines: usize,
    capped: bool,
    /// Why some files went unsearched, one sentence each.
    notes: Vec<String>,
}

impl Answer {
    fn new(limits: &Limits) -> Answer {
        Answer { lines: Vec::new(), max_lines: limits.listed_entries, capped: false, notes: Vec::new() }
    }

    /// Adds a line; false once the cap is reached.
    fn push(&mut self, line: String) -> bool {
        if self.lines.len() >= self.max_lines {
            self.capped = true;
            return false;
        }
        self.lines.push(line);
        true
    }

    fn finish(self, cut_short: bool, nothing: String) -> String {
        if self.lines.is_empty() && !cut_short && self.notes.is_empty() {
            return nothing;
        }
        let mut text = if self.lines.is_empty() { nothing } else { self.lines.join("\n") };
        if self.capped {
            text.push_str(&format!(
                "\n\n(Output stopped at {} lines; narrow the pattern, `path` or `glob` to see the rest.)",
                self.max_lines
            ));
        }
        for note in &self.notes {
            text.push_str(&format!("\n\n({note})"));
        }
        if cut_short {
            text.push_str(&format!(
                "\n\n(The search stopped after {MAX_VISITED_ENTRIES} entries or at great depth; \
                 search a smaller folder to cover the rest.)"
            ));
        }
        text
    }
}

pub(crate) fn glob(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("glob", args, &["pattern", "path"])?;
    let pattern = args.required_string("pattern")?;
    let base = args.optional_path("path")?;
    let relative_pattern = pattern.trim_start_matches('/');
    if relative_pattern.is_empty() {
        return Err(ToolError("the argument `pattern` is empty; give a glob such as `**/*.md`".to_string()));
    }
    let matcher = compile_glob("pattern", relative_pattern, &ctx.limits)?;
    let (files, cut_short) = match scope(ctx, &base)? {
        Scope::Folder { files, cut_short } => (files, cut_short),
        Scope::File(_) => {
            return Err(ToolError(format!("'{base}' is a file; glob searches a folder, so pass the folder as `path`")));
        }
    };
    let mut answer = Answer::new(&ctx.limits);
    for file in files {
        if (ctx.visible)(&file) && glob_matches(&matcher, relative_to(&base, &file)) && !answer.push(file) {
            break;
        }
    }
    Ok(answer.finish(cut_short, format!("No files match '{pattern}' in {}.", shown(&base))))
}

/// How `grep` reports what it found.
#[derive(Clone, Copy)]
enum OutputMode {
    FilesWithMatches,
    Content,
    Count,
}

impl OutputMode {
    fn parse(text: Option<&str>) -> Result<OutputMode, ToolError> {
        match text {
            None | Some("files_with_matches") => Ok(OutputMode::FilesWithMatches),
            Some("content") => Ok(OutputMode::Content),
            Some("count") => Ok(OutputMode::Count),
            Some(other) => Err(ToolError(format!(
                "the argument `output_mode` is '{other}'; use files_with_matches, content or count"
            ))),
        }
    }
}

pub(crate) fn grep(args: &Value, ctx: &ToolContext) -> Result<String, ToolError> {
    let args = Arguments::parse("grep", args, &["pattern", "path", "glob", "output_mode"])?;
    let pattern = args.required_string("pattern")?;
    let base = args.optional_path("path")?;
    let mode = OutputMode::parse(args.optional_string("output_mode")?)?;
    let filter = args
        .optional_string("glob")?
        .map(|text| compile_glob("glob", text.trim_start_matches('/'), &ctx.limits))
        .transpose()?;
    let filter_by_path = args.optional_string("glob")?.is_some_and(|text| text.trim_start_matches('/').contains('/'));
    let regex = Regex::new(pattern)
        .map_err(|error| ToolError(format!("the argument `pattern` is not a valid regular expression: {error}")))?;

    let (files, cut_short, folder) = match scope(ctx, &base)? {
        Scope::Folder { files, cut_short } => (files, cut_short, base.as_str()),
        Scope::File(file) => (vec![file], false, base.rsplit_once('/').map_or("", |(parent, _)| parent)),
    };
    let mut answer = Answer::new(&ctx.limits);
    let mut reads = BoundedReads::new(&ctx.limits);
    'files: for file in files {
        if !(ctx.visible)(&file) || binary_type_by_name(&file).is_some() {
            continue;
        }
        if let Some(filter) = &filter {
            let subject = if filter_by_path { relative_to(folder, &file) } else { last_segment(&file) };
            if !glob_matches(filter, subject) {
                continue;
            }
        }
        let bytes = match reads.read(ctx, &file) {
            Read::Bytes(bytes) => bytes,
            Read::Skipped => continue,
            Read::OutOfBudget => break,
        };
        let Content::Text(text) = classify(&file, bytes) else { continue };
        match mode {
            OutputMode::FilesWithMatches => {
                if text.lines().any(|line| regex.is_match(line)) && !answer.push(file) {
                    break;
                }
            }
            OutputMode::Count => {
                let count = text.lines().filter(|line| regex.is_match(line)).count();
                if count > 0 && !answer.push(format!("{file}:{count}")) {
                    break;
                }
            }
            OutputMode::Content => {
                for (index, line) in text.lines().enumerate() {
                    if regex.is_match(line) && !answer.push(format!("{file}:{}:{}", index + 1, clipped_line(line))) {
                        break 'files;
                    }
                }
            }
        }
    }
    answer.notes.extend(reads.notes());
    Ok(answer.finish(cut_short, format!("No matches for '{pattern}' in {}.", shown(&base))))
}

/// What one bounded read of `grep` gave.
enum Read {
    Bytes(Vec<u8>),
    /// Nothing to search here: over the per-file bound, removed, or refused.
    Skipped,
    /// The call's bound of bytes read is spent; the search stops.
    OutOfBudget,
}

/// `grep`'s reads, under the per-file bound and the per-call bound of bytes read.
struct BoundedReads {
    per_file: u64,
    budget: u64,
    read: u64,
    oversized: usize,
    stopped: bool,
}

impl BoundedReads {
    fn new(limits: &Limits) -> BoundedReads {
        BoundedReads {
            per_file: limits.file_bytes,
            budget: limits.grep_scanned_bytes,
            read: 0,
            oversized: 0,
            stopped: false,
        }
    }

    fn read(&mut self, ctx: &ToolContext, file: &str) -> Read {
        let remaining = self.budget.saturating_sub(self.read);
        match ctx.workspace.read_limited(file, self.per_file.min(remaining)) {
            Ok(bytes) => {
                self.read = self.read.saturating_add(bytes.len() as u64);
                Read::Bytes(bytes)
            }
            Err(VfsError::TooLarge { size, .. }) if size > self.per_file => {
                self.oversized += 1;
                Read::Skipped
            }
            Err(VfsError::TooLarge { .. }) => {
                self.stopped = true;
                Read::OutOfBudget
            }
            // A file that cannot be read now (removed, refused) has nothing to report.
            Err(_) => Read::Skipped,
        }
    }

    /// What the answer must say about files left unsearched.
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.oversized > 0 {
            let files = if self.oversized == 1 { "file was" } else { "files were" };
            notes.push(format!(
                "{} {files} not searched: over grep's limit of {} per file.",
                self.oversized,
                bound_in_words(self.per_file)
            ));
        }
        if self.stopped {
            notes.push(format!(
                "The search stopped after reading {} bytes, grep's limit of {} per call; narrow `path` or \
                 `glob` to search the rest.",
                self.read,
                bound_in_words(self.budget)
            ));
        }
        notes
    }
}

pub(crate) fn schema(tool: &str) -> Option<ToolSchema> {
    match tool {
        "glob" => Some(ToolSchema::closed(
            "glob",
            "Find files whose path matches a glob pattern. The pattern is matched against each file's path \
             relative to `path` (the workspace root by default): `*` and `?` stay within one folder level, `**` \
             spans any number of levels, `[abc]` matches one listed character and `{a,b}` either alternative. \
             Answers one workspace path per line, sorted.",
            json!({
                "pattern": {
                    "type": "string",
                    "description": "The glob, e.g. `**/*.md` or `reports/*/summary.txt`."
                },
                "path": {
                    "type": "string",
                    "description": "The folder to search, relative to the workspace root. Defaults to the root."
                }
            }),
            &["pattern"],
        )),
        "grep" => Some(ToolSchema::closed(
            "grep",
            "Search the text of files for a regular expression (Rust regex syntax; `(?i)` ignores case). Binary \
             files are skipped. By default it answers the paths of the files that match; `output_mode` `content` \
             answers each matching line as `path:line:text`, and `count` answers `path:number` per file.",
            json!({
                "pattern": {
                    "type": "string",
                    "description": "The regular expression to look for; it is matched line by line."
                },
                "path": {
                    "type": "string",
                    "description": "A folder (searched throughout) or a single file, relative to the workspace \
                                    root. Defaults to the root."
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files matching this glob: a pattern without `/` (e.g. `*.md`) is \
                                    matched against file names, one with `/` against paths relative to `path`."
                },
                "output_mode": {
                    "type": "string",
                    "enum": ["files_with_matches", "content", "count"],
                    "description": "What to answer. Defaults to files_with_matches."
                }
            }),
            &["pattern"],
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::limits::Limits;
    use crate::tools::fixture::Fixture;
    use crate::vfs::Vfs;

    #[test]
    fn glob_matches_paths_relative_to_the_folder() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("glob", json!({ "pattern": "**/*.md" })),
            "AGENTS.md\nreports/2024/q1.md\nscratchpad/notes.md\nskills/billing/SKILL.md\nskills/orders/SKILL.md"
        );
        assert_eq!(fixture.ok("glob", json!({ "pattern": "*.md", "path": "scratchpad" })), "scratchpad/notes.md");
        assert_eq!(
            fixture.ok("glob", json!({ "pattern": "/scratchpad/*.{md,txt}" })),
            "scratchpad/notes.md\nscratchpad/todo.txt"
        );
        assert_eq!(fixture.ok("glob", json!({ "pattern": "*.md" })), "AGENTS.md");
    }

    #[test]
    fn glob_skips_unsearchable_mounts_unless_addressed_inside() {
        let fixture = Fixture::new();
        assert!(!fixture.ok("glob", json!({ "pattern": "**" })).contains("reference/"));
        assert_eq!(fixture.ok("glob", json!({ "pattern": "**", "path": "reference" })), "reference/manual.md");
        assert_eq!(
            fixture.ok("glob", json!({ "pattern": "reference/**" })),
            "No files match 'reference/**' in the workspace root."
        );
    }

    #[test]
    fn glob_leaves_out_hidden_paths() {
        let fixture = Fixture::new().hide("skills/billing").hide("AGENTS.md");
        let answer = fixture.ok("glob", json!({ "pattern": "**/*.md" }));
        assert_eq!(answer, "reports/2024/q1.md\nscratchpad/notes.md\nskills/orders/SKILL.md");
    }

    #[test]
    fn glob_refusals() {
        let fixture = Fixture::new();
        assert_eq!(fixture.refused("glob", json!({})), "the argument `pattern` is required");
        assert!(fixture.refused("glob", json!({ "pattern": "/" })).contains("`pattern` is empty"));
        assert_eq!(fixture.refused("glob", json!({ "pattern": "*", "path": "none" })), "'none' does not exist");
        assert!(
            fixture.refused("glob", json!({ "pattern": "*", "path": "scratchpad/notes.md" })).contains("is a file")
        );
        assert!(fixture.refused("glob", json!({ "pattern": "*", "path": "../x" })).contains("climbs above"));
        let braces: String = (0..8).map(|_| "{a,b}").collect();
        assert!(fixture.refused("glob", json!({ "pattern": braces })).contains("not a usable glob"));
    }

    #[test]
    fn glob_patterns_over_the_bound_are_refused_naming_it() {
        let fixture = Fixture::new();
        let long = format!("{}x", "**/".repeat(400));
        let refusal = fixture.refused("glob", json!({ "pattern": long }));
        assert!(refusal.contains("`pattern` is 1201 characters long, over the bound of 1000"), "{refusal}");
        let refusal = fixture.refused("grep", json!({ "pattern": "x", "glob": long }));
        assert!(refusal.contains("`glob` is 1201 characters long"), "{refusal}");
        assert_eq!(
            fixture.ok("glob", json!({ "pattern": format!("{}q1.md", "**/".repeat(300)) })),
            "reports/2024/q1.md"
        );
    }

    #[test]
    fn grep_lists_matching_files_by_default() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "(?i)revenue" })),
            "catalogs/eu/prices.json\nreports/2024/q1.md\nskills/billing/SKILL.md"
        );
        assert_eq!(fixture.ok("grep", json!({ "pattern": "revenue", "path": "reference" })), "reference/manual.md");
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "line$", "path": "scratchpad/notes.md" })),
            "scratchpad/notes.md"
        );
    }

    #[test]
    fn grep_output_modes() {
        let fixture = Fixture::new();
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "d line", "output_mode": "content" })),
            "scratchpad/notes.md:2:second line\nscratchpad/notes.md:3:third line"
        );
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "line", "path": "scratchpad", "output_mode": "count" })),
            "scratchpad/notes.md:3"
        );
        assert!(
            fixture
                .refused("grep", json!({ "pattern": "x", "output_mode": "lines" }))
                .contains("files_with_matches, content or count")
        );
    }

    #[test]
    fn grep_filters_by_glob_on_names_or_paths() {
        let fixture = Fixture::new();
        assert_eq!(fixture.ok("grep", json!({ "pattern": "i", "glob": "*.txt" })), "scratchpad/todo.txt");
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "name", "glob": "skills/orders/**" })),
            "skills/orders/SKILL.md"
        );
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "name", "path": "skills", "glob": "orders/*" })),
            "skills/orders/SKILL.md"
        );
    }

    #[test]
    fn grep_skips_binaries_hidden_paths_and_unsearchable_mounts() {
        let fixture = Fixture::new().hide("skills/billing");
        fixture.session.write("scratchpad/blob.dat", b"revenue\0").unwrap();
        fixture.session.write("scratchpad/photo.png", b"revenue").unwrap();
        assert_eq!(fixture.ok("grep", json!({ "pattern": "revenue" })), "catalogs/eu/prices.json\nreports/2024/q1.md");
        assert_eq!(
            fixture.ok("grep", json!({ "pattern": "nothing at all" })),
            "No matches for 'nothing at all' in the workspace root."
        );
    }

    #[test]
    fn grep_caps_its_output() {
        let fixture = Fixture::new();
        let many: String = (0..1500).map(|line| format!("hit {line}\n")).collect();
        fixture.session.write("scratchpad/many.txt", many.as_bytes()).unwrap();
        let answer = fixture.ok("grep", json!({ "pattern": "hit", "output_mode": "content" }));
        assert_eq!(answer.lines().filter(|line| line.starts_with("scratchpad/many.txt:")).count(), 1000);
        assert!(
            answer.ends_with("(Output stopped at 1000 lines; narrow the pattern, `path` or `glob` to see the rest.)")
        );
        let files = fixture.ok("grep", json!({ "pattern": "hit" }));
        assert_eq!(files, "scratchpad/many.txt");
    }

    fn many_big_files(fixture: &Fixture) {
        for index in 0..8 {
            let text = format!("needle {index}\n{}", "hay\n".repeat(249));
            fixture.session.write(&format!("scratchpad/big/{index}.txt"), text.as_bytes()).unwrap();
        }
    }

    #[test]
    fn grep_stops_at_its_bound_of_bytes_read_and_says_so() {
        // Eight files of 1005 bytes each; the call may read 3000 bytes.
        let limits = Limits { grep_scanned_bytes: 3_000, ..Limits::default() };
        let fixture = Fixture::new().limited(limits);
        many_big_files(&fixture);
        let answer = fixture.ok("grep", json!({ "pattern": "needle", "path": "scratchpad/big" }));
        assert_eq!(
            answer,
            "scratchpad/big/0.txt\nscratchpad/big/1.txt\n\n(The search stopped after reading 2010 bytes, grep's \
             limit of 3000 bytes per call; narrow `path` or `glob` to search the rest.)"
        );
        let narrowed = fixture.ok("grep", json!({ "pattern": "needle", "path": "scratchpad/big", "glob": "7.txt" }));
        assert_eq!(narrowed, "scratchpad/big/7.txt");
    }

    #[test]
    fn grep_skips_files_over_the_bound_and_counts_them() {
        let limits = Limits { file_bytes: 1_000, ..Limits::default() };
        let fixture = Fixture::new().limited(limits);
        many_big_files(&fixture);
        fixture.session.write("scratchpad/big/small.txt", b"needle\n").unwrap();
        let answer =
            fixture.ok("grep", json!({ "pattern": "needle", "path": "scratchpad/big", "output_mode": "count" }));
        assert_eq!(
            answer,
            "scratchpad/big/small.txt:1\n\n(8 files were not searched: over grep's limit of 1000 bytes per file.)"
        );
        let none = fixture.ok("grep", json!({ "pattern": "absent", "path": "scratchpad/big" }));
        assert!(none.starts_with("No matches for 'absent' in 'scratchpad/big'.\n\n(8 files"), "{none}");
    }

    #[test]
    fn grep_and_glob_list_at_most_the_bound_of_entries() {
        let fixture = Fixture::new().limited(Limits { listed_entries: 3, ..Limits::default() });
        many_big_files(&fixture);
        let files = fixture.ok("grep", json!({ "pattern": "needle", "path": "scratchpad/big" }));
        assert_eq!(files.lines().take_while(|line| !line.is_empty()).count(), 3);
        assert!(files.ends_with("(Output stopped at 3 lines; narrow the pattern, `path` or `glob` to see the rest.)"));
        let names = fixture.ok("glob", json!({ "pattern": "**", "path": "scratchpad/big" }));
        assert!(
            names.starts_with(
                "scratchpad/big/0.txt\nscratchpad/big/1.txt\nscratchpad/big/2.txt\n\n(Output stopped at 3"
            )
        );
    }

    #[test]
    fn grep_refusals() {
        let fixture = Fixture::new();
        assert!(fixture.refused("grep", json!({ "pattern": "(" })).contains("not a valid regular expression"));
        assert_eq!(fixture.refused("grep", json!({ "pattern": "x", "path": "none" })), "'none' does not exist");
        assert_eq!(fixture.refused("grep", json!({ "glob": "*" })), "the argument `pattern` is required");
        assert!(fixture.refused("grep", json!({ "pattern": "x", "glob": 3 })).contains("`glob` must be a string"));
    }
}
