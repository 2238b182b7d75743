//! `archmax migrate`: contract-2 workflows rewritten to contract 3.
//!
//! The one thing to know: the rewrite edits source text through spans and never
//! re-serializes a document, so whatever it does not touch (comments, blank lines, key
//! order, quoting) is byte-identical afterwards. [`plan`] reads a workspace and returns
//! every file it would change with every change and every manual follow-up, each at a
//! file:line:column of the file as it was; [`apply`] writes that plan. A workflow with
//! nothing of contract 2 left is reported as already migrated, so a second run changes
//! nothing.
//!
//! `workflow.rs` rewrites one `workflow.yaml` (hooks become code and grader states in
//! front of or behind their state, removed keys are rewritten or reported),
//! `script.rs` ports a hook script to a code-state script, `cases.rs` follows moved
//! states into the cases, `edit.rs` holds the span edits and `diff.rs` the unified diff.

mod cases;
pub mod diff;
mod edit;
mod script;
mod workflow;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use archmax_compiler::syntax::{frontmatter, is_slug};

use workflow::{Note, Refusal, WorkflowFiles};

/// A place in a file as it was before the migration: workspace-relative path, 1-based
/// line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One change made, or one thing left for a person.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub at: Location,
    pub text: String,
}

/// One file the migration writes, creates or removes (workspace-relative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    /// `None`: the file is created.
    pub before: Option<String>,
    /// `None`: the file is removed.
    pub after: Option<String>,
}

/// What migrating one workflow does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowMigration {
    pub slug: String,
    pub changes: Vec<Finding>,
    pub follow_ups: Vec<Finding>,
    pub files: Vec<FileChange>,
}

impl WorkflowMigration {
    /// Nothing of contract 2 was found.
    pub fn is_current(&self) -> bool {
        self.files.is_empty() && self.follow_ups.is_empty()
    }
}

/// The whole plan, workflows in slug order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    pub workflows: Vec<WorkflowMigration>,
}

impl Migration {
    pub fn files(&self) -> impl Iterator<Item = &FileChange> {
        self.workflows.iter().flat_map(|workflow| &workflow.files)
    }
}

/// Why nothing could be planned.
#[derive(Debug, PartialEq, Eq)]
pub enum MigrateError {
    /// The root has no `workflows/` directory, or it holds no workflow.
    NoWorkflows { root: PathBuf },
    /// A named workflow has no directory.
    UnknownWorkflow { slug: String, known: Vec<String> },
    /// A file is not a workflow (or a case) the migration can read.
    NotAWorkflow { at: Location, reason: String },
    /// A file is not valid YAML.
    Unparseable { at: Location, message: String },
    /// `runtime.version` names a contract this migration does not know.
    UnknownContract { at: Location, version: String },
    /// A file could not be read.
    Io { path: String, message: String },
    /// A file could not be written or removed; `apply` changed nothing it had not
    /// finished before (new text is renamed into place only once every file is staged).
    Write { path: String, message: String },
    /// A path the migration reads or writes is a symbolic link (workspace-relative).
    Symlink { path: String },
    /// The plan holds two changes of one file (an inconsistent plan; nothing is written).
    Conflict { path: String },
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrateError::NoWorkflows { root } => write!(
                f,
                "`{}` holds no workflows: migrate reads `workflows/<slug>/workflow.yaml` (or a single-file WORKFLOW.md) under --root",
                root.join("workflows").display()
            ),
            MigrateError::UnknownWorkflow { slug, known } => {
                write!(f, "there is no workflow `{slug}`")?;
                if known.is_empty() { Ok(()) } else { write!(f, " (the workspace has: {})", known.join(", ")) }
            }
            MigrateError::NotAWorkflow { at, reason } => write!(f, "{at}: not a workflow: {reason}"),
            MigrateError::Unparseable { at, message } => {
                write!(f, "{at}: the YAML does not parse ({message}); fix it, then migrate again")
            }
            MigrateError::UnknownContract { at, version } => write!(
                f,
                "{at}: `runtime.version` is \"{version}\": migrate rewrites contracts \"1\" and \"2\" to \"3\" and knows no other"
            ),
            MigrateError::Io { path, message } => write!(f, "cannot read `{path}`: {message}"),
            MigrateError::Write { path, message } => write!(f, "cannot write `{path}`: {message}"),
            MigrateError::Symlink { path } => write!(
                f,
                "`{path}` is a symbolic link: migrate neither reads nor writes through links; replace it with the file or directory it points to, then migrate again"
            ),
            MigrateError::Conflict { path } => write!(
                f,
                "the plan changes `{path}` twice, so nothing was written; migrate this workflow by hand and report the case"
            ),
        }
    }
}

impl std::error::Error for MigrateError {}

fn location(file: &str, text: &str, at: usize, line_offset: usize) -> Location {
    let (line, column) = edit::line_column(text, at);
    Location { file: file.to_string(), line: line + line_offset, column }
}

fn findings(file: &str, text: &str, notes: Vec<Note>, line_offset: usize) -> Vec<Finding> {
    notes.into_iter().map(|note| Finding { at: location(file, text, note.at, line_offset), text: note.text }).collect()
}

struct Disk<'p> {
    dir: &'p Path,
    /// Workflow-relative paths the rewrite asked for that are (or lie under) a link.
    links: RefCell<BTreeSet<String>>,
}

impl Disk<'_> {
    /// `path` made of plain names only, with no link on the way (links are noted).
    fn plain(&self, path: &str) -> Option<PathBuf> {
        let plain = Path::new(path).components().all(|part| matches!(part, std::path::Component::Normal(_)));
        if !plain || path.is_empty() {
            return None;
        }
        let mut at = self.dir.to_path_buf();
        for part in Path::new(path).components() {
            at.push(part);
            match fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    self.links.borrow_mut().insert(path.to_string());
                    return None;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Some(at)
    }
}

impl WorkflowFiles for Disk<'_> {
    fn read(&self, path: &str) -> Option<String> {
        let file = self.plain(path)?;
        if !is_regular(&file) {
            return None;
        }
        fs::read_to_string(file).ok()
    }

    fn exists(&self, path: &str) -> bool {
        match self.plain(path) {
            Some(file) => fs::symlink_metadata(file).is_ok(),
            None => true,
        }
    }
}

/// A regular file, not a link to one.
fn is_regular(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Refuses `relative` (under `root`) when it, or a directory on the way to it, is a
/// symbolic link. A part that does not exist (yet) ends the check.
fn refuse_links(root: &Path, relative: &str) -> Result<(), MigrateError> {
    let mut at = root.to_path_buf();
    let mut shown: Vec<String> = Vec::new();
    for part in Path::new(relative).components() {
        at.push(part);
        shown.push(part.as_os_str().to_string_lossy().into_owned());
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(MigrateError::Symlink { path: shown.join("/") }),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// The names in the directory `relative` (none when it is not there), refusing the
/// directory or any entry of it that is a link.
fn listing(root: &Path, relative: &str) -> Result<Vec<String>, MigrateError> {
    refuse_links(root, relative)?;
    let Ok(entries) = fs::read_dir(root.join(relative)) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
            return Err(MigrateError::Symlink { path: format!("{relative}/{name}") });
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

fn read(path: &Path, shown: &str) -> Result<String, MigrateError> {
    fs::read_to_string(path).map_err(|error| MigrateError::Io { path: shown.to_string(), message: error.to_string() })
}

/// The workflow directories under `root/workflows`, sorted.
fn workflow_dirs(root: &Path) -> Result<Vec<String>, MigrateError> {
    refuse_links(root, "workflows")?;
    let dir = root.join("workflows");
    let entries = fs::read_dir(&dir).map_err(|_| MigrateError::NoWorkflows { root: root.to_path_buf() })?;
    let mut slugs: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .filter(|name| !name.starts_with('.'))
        .collect();
    slugs.sort();
    Ok(slugs)
}

/// Plans the migration of the selected workflows (all when `selection` is empty).
pub fn plan(root: &Path, selection: &[String]) -> Result<Migration, MigrateError> {
    let known = workflow_dirs(root)?;
    let chosen: Vec<String> = if selection.is_empty() {
        known.clone()
    } else {
        let mut chosen = Vec::new();
        for slug in selection {
            if !known.contains(slug) {
                return Err(MigrateError::UnknownWorkflow { slug: slug.clone(), known });
            }
            if !chosen.contains(slug) {
                chosen.push(slug.clone());
            }
        }
        chosen
    };
    if chosen.is_empty() {
        return Err(MigrateError::NoWorkflows { root: root.to_path_buf() });
    }
    let mut workflows = Vec::new();
    for slug in chosen {
        workflows.push(plan_workflow(root, &slug)?);
    }
    Ok(Migration { workflows })
}

fn plan_workflow(root: &Path, slug: &str) -> Result<WorkflowMigration, MigrateError> {
    let dir = root.join("workflows").join(slug);
    let base = format!("workflows/{slug}");
    let mut plan = Plan::default();
    let machine = read_machine(root, &dir, &base, &mut plan.follow_ups)?;
    if !is_slug(slug) {
        plan.follow_ups.push(Finding {
            at: Location { file: base.clone(), line: 1, column: 1 },
            text: format!("`{slug}` is not a kebab-case slug: rename the directory"),
        });
    }
    let config = tests_config(root, &base)?;
    // What the rewrite may read or must not overwrite: links there are refused up front.
    let hook_names = listing(root, &format!("{base}/hooks"))?;
    listing(root, &format!("{base}/scripts"))?;
    let test_names = listing(root, &format!("{base}/tests"))?;
    let disk = Disk { dir: &dir, links: RefCell::new(BTreeSet::new()) };
    let rewrite = rewrite_machine(&machine, &disk, config.as_ref().map(|(_, text)| text.as_str()))?;
    if let Some(link) = disk.links.borrow().first() {
        return Err(MigrateError::Symlink { path: format!("{base}/{link}") });
    }
    let shown = machine.shown.as_str();
    plan.changes.extend(findings(shown, &machine.source, rewrite.changes, machine.line_offset));
    plan.follow_ups.extend(findings(shown, &machine.source, rewrite.follow_ups, machine.line_offset));
    plan.machine_files(&machine, &rewrite.text);
    if rewrite.folded_tests_config
        && let Some((path, text)) = &config
    {
        plan.files.push(FileChange { path: path.clone(), before: Some(text.clone()), after: None });
    }
    plan.port_scripts(root, &base, &disk, rewrite.scripts);
    plan.retire_hooks(&base, &disk, &rewrite.ported_hooks, &hook_names);
    let moves = cases::Moves { renamed: &rewrite.renamed, refusal: rewrite.refusal.as_deref() };
    plan.rewrite_cases(&dir, &base, &test_names, &moves)?;
    plan.finish(slug)
}

/// A workflow's machine as read: its YAML, the file that YAML is shown as (with the lines
/// before it there), and what a single-file WORKFLOW.md leaves as its body.
struct Machine {
    source: String,
    shown: String,
    line_offset: usize,
    yaml_name: String,
    md_name: String,
    md_text: Option<String>,
    /// The body a single-file WORKFLOW.md keeps once its frontmatter moves out.
    single_file: Option<String>,
}

/// The machine: workflow.yaml, or the frontmatter of a single-file WORKFLOW.md.
fn read_machine(root: &Path, dir: &Path, base: &str, follow_ups: &mut Vec<Finding>) -> Result<Machine, MigrateError> {
    let yaml_name = format!("{base}/workflow.yaml");
    let md_name = format!("{base}/WORKFLOW.md");
    let yaml_path = dir.join("workflow.yaml");
    let md_path = dir.join("WORKFLOW.md");
    refuse_links(root, &yaml_name)?;
    refuse_links(root, &md_name)?;
    let md_text = if is_regular(&md_path) { Some(read(&md_path, &md_name)?) } else { None };
    let (source, shown, line_offset, single_file) = if is_regular(&yaml_path) {
        if let Some(md) = &md_text
            && frontmatter(md).is_some()
        {
            follow_ups.push(Finding {
                at: Location { file: md_name.clone(), line: 1, column: 1 },
                text: "WORKFLOW.md has frontmatter beside workflow.yaml: merge what it sets into workflow.yaml and delete the block".to_string(),
            });
        }
        (read(&yaml_path, &yaml_name)?, yaml_name.clone(), 0, None)
    } else if let Some(md) = &md_text
        && let Some(block) = frontmatter(md)
    {
        let line_offset = md[..block.offset].matches('\n').count();
        let body = md[block.body_offset..].trim_start_matches('\n').to_string();
        (block.yaml.to_string(), md_name.clone(), line_offset, Some(body))
    } else {
        return Err(MigrateError::NotAWorkflow {
            at: Location { file: base.to_string(), line: 1, column: 1 },
            reason: "the directory has no workflow.yaml (nor a WORKFLOW.md with frontmatter)".to_string(),
        });
    };
    Ok(Machine { source, shown, line_offset, yaml_name, md_name, md_text, single_file })
}

/// The workflow's `tests.config.js` (beside workflow.yaml or under tests/), its path and text.
fn tests_config(root: &Path, base: &str) -> Result<Option<(String, String)>, MigrateError> {
    let config_paths = [format!("{base}/tests.config.js"), format!("{base}/tests/tests.config.js")];
    for path in &config_paths {
        refuse_links(root, path)?;
    }
    Ok(config_paths.iter().find_map(|path| {
        let file = root.join(path);
        let text = if is_regular(&file) { fs::read_to_string(file).ok()? } else { return None };
        Some((path.clone(), text))
    }))
}

/// Rewrites the machine's YAML, a refusal placed in the file it is shown as.
fn rewrite_machine(
    machine: &Machine,
    disk: &Disk<'_>,
    config: Option<&str>,
) -> Result<workflow::Rewrite, MigrateError> {
    let refusal_at = |at: usize| location(&machine.shown, &machine.source, at, machine.line_offset);
    match workflow::rewrite(&machine.source, disk, config) {
        Ok(rewrite) => Ok(rewrite),
        Err(Refusal::Unparseable { at, message }) => Err(MigrateError::Unparseable { at: refusal_at(at), message }),
        Err(Refusal::NotAWorkflow { at, reason }) => Err(MigrateError::NotAWorkflow { at: refusal_at(at), reason }),
        Err(Refusal::UnknownContract { at, version }) => {
            Err(MigrateError::UnknownContract { at: refusal_at(at), version })
        }
    }
}

/// What the migration of one workflow collects: the file edits, the notes on what it
/// changed and the notes on what it leaves to a person.
#[derive(Default)]
struct Plan {
    files: Vec<FileChange>,
    changes: Vec<Finding>,
    follow_ups: Vec<Finding>,
}

impl Plan {
    /// The rewritten machine: a changed workflow.yaml, or a single-file WORKFLOW.md split
    /// into workflow.yaml and a plain WORKFLOW.md.
    fn machine_files(&mut self, machine: &Machine, rewritten: &str) {
        match &machine.single_file {
            Some(body) => {
                self.files.push(FileChange {
                    path: machine.yaml_name.clone(),
                    before: None,
                    after: Some(rewritten.to_string()),
                });
                self.files.push(FileChange {
                    path: machine.md_name.clone(),
                    before: machine.md_text.clone(),
                    after: Some(body.clone()),
                });
                self.changes.push(Finding {
                    at: Location { file: machine.md_name.clone(), line: 1, column: 1 },
                    text: "the single-file WORKFLOW.md is split: its frontmatter is workflow.yaml, its body a plain WORKFLOW.md".to_string(),
                });
            }
            None if rewritten != machine.source => {
                self.files.push(FileChange {
                    path: machine.yaml_name.clone(),
                    before: Some(machine.source.clone()),
                    after: Some(rewritten.to_string()),
                });
            }
            None => {}
        }
    }

    /// Ported scripts, with the notes on the hooks they came from.
    fn port_scripts(&mut self, root: &Path, base: &str, disk: &Disk<'_>, scripts: Vec<workflow::NewScript>) {
        for script in scripts {
            let path = format!("{base}/{}", script.path);
            let existing = fs::read_to_string(root.join(&path)).ok();
            if let Some(hook) = &script.from_hook {
                let hook_name = format!("{base}/{hook}");
                let hook_text = disk.read(hook).unwrap_or_default();
                self.changes.extend(findings(&hook_name, &hook_text, script.hook_changes, 0));
                self.follow_ups.extend(findings(&hook_name, &hook_text, script.hook_follow_ups, 0));
            }
            if existing.is_some() {
                self.follow_ups.push(Finding {
                    at: Location { file: path.clone(), line: 1, column: 1 },
                    text: "a script of this name already existed: it is replaced by the ported check; merge by hand if it mattered".to_string(),
                });
            }
            self.files.push(FileChange { path, before: existing, after: Some(script.text) });
        }
    }

    /// Removes the ported hook files it may, and notes the hook files left behind.
    fn retire_hooks(&mut self, base: &str, disk: &Disk<'_>, ported: &BTreeSet<String>, hook_names: &[String]) {
        // A ported hook file goes only when it is a plain file under hooks/ that nothing
        // in the plan writes (a hook elsewhere, say scripts/check.js, stays where it is).
        let written: BTreeSet<String> =
            self.files.iter().filter(|file| file.after.is_some()).map(|file| file.path.clone()).collect();
        for hook in ported {
            let path = format!("{base}/{hook}");
            let removable = hook.starts_with("hooks/")
                && disk.plain(hook).is_some_and(|file| is_regular(&file))
                && !written.contains(&path);
            if removable {
                let text = disk.read(hook).unwrap_or_default();
                self.files.push(FileChange { path: path.clone(), before: Some(text), after: None });
            } else {
                self.follow_ups.push(Finding {
                    at: Location { file: path.clone(), line: 1, column: 1 },
                    text: "this hook was ported, but the file is not under hooks/ (or is written by the migration), so it is left in place: delete it once nothing else uses it".to_string(),
                });
            }
        }
        let left: Vec<String> =
            hook_names.iter().map(|name| format!("hooks/{name}")).filter(|name| !ported.contains(name)).collect();
        for name in left {
            self.follow_ups.push(Finding {
                at: Location { file: format!("{base}/{name}"), line: 1, column: 1 },
                text:
                    "no hook uses this file, so it was not ported: move what it checks into a code state, or delete it"
                        .to_string(),
            });
        }
    }

    /// The workflow's cases, with the states they name moved as the machine moved them.
    fn rewrite_cases(
        &mut self,
        dir: &Path,
        base: &str,
        test_names: &[String],
        moves: &cases::Moves<'_>,
    ) -> Result<(), MigrateError> {
        let tests_dir = dir.join("tests");
        let case_names: Vec<&String> =
            test_names.iter().filter(|name| name.ends_with(".test.yaml") || name.ends_with(".test.yml")).collect();
        for name in case_names {
            let path = format!("{base}/tests/{name}");
            let text = read(&tests_dir.join(name), &path)?;
            let case = cases::rewrite(&text, moves)
                .map_err(|(at, message)| MigrateError::Unparseable { at: location(&path, &text, at, 0), message })?;
            self.changes.extend(findings(&path, &text, case.changes, 0));
            self.follow_ups.extend(findings(&path, &text, case.follow_ups, 0));
            if case.text != text {
                self.files.push(FileChange { path, before: Some(text), after: Some(case.text) });
            }
        }
        Ok(())
    }

    /// The plan in its order: files by path (two edits of one file conflict), notes by
    /// place, each once.
    fn finish(self, slug: &str) -> Result<WorkflowMigration, MigrateError> {
        let Plan { mut files, mut changes, mut follow_ups } = self;
        files.sort_by(|left, right| left.path.cmp(&right.path));
        if let Some(pair) = files.windows(2).find(|pair| pair[0].path == pair[1].path) {
            return Err(MigrateError::Conflict { path: pair[0].path.clone() });
        }
        let order = |finding: &Finding| (finding.at.file.clone(), finding.at.line, finding.at.column);
        changes.sort_by_key(order);
        follow_ups.sort_by_key(order);
        changes.dedup();
        follow_ups.dedup();
        if files.is_empty() {
            // Notes about a document that did not change are not changes.
            changes.clear();
        }
        Ok(WorkflowMigration { slug: slug.to_string(), changes, follow_ups, files })
    }
}

/// Writes a plan: every changed file, new scripts, removed hooks and configs (and a
/// `hooks/` directory left empty).
///
/// Nothing is written through a link, and nothing is lost when a write fails: every new
/// text is first written to a temporary file beside its target, the temporary files are
/// renamed into place only once all of them are written, and files are removed only
/// after that.
pub fn apply(root: &Path, migration: &Migration) -> Result<(), MigrateError> {
    let failed =
        |path: &str, error: std::io::Error| MigrateError::Write { path: path.to_string(), message: error.to_string() };
    let mut seen = BTreeSet::new();
    for file in migration.files() {
        if !seen.insert(file.path.as_str()) {
            return Err(MigrateError::Conflict { path: file.path.clone() });
        }
        refuse_links(root, &file.path)?;
    }

    // 1. Stage every new text beside its target.
    let mut staged: Vec<(PathBuf, PathBuf, &str)> = Vec::new();
    let mut stage = || -> Result<(), MigrateError> {
        for file in migration.files() {
            let Some(text) = &file.after else { continue };
            let target = root.join(&file.path);
            let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
                return Err(MigrateError::Write { path: file.path.clone(), message: "not a file path".to_string() });
            };
            fs::create_dir_all(parent).map_err(|error| failed(&file.path, error))?;
            let temp = parent.join(format!(".{}.archmax-migrate", name.to_string_lossy()));
            if fs::symlink_metadata(&temp).is_ok() {
                fs::remove_file(&temp).map_err(|error| failed(&file.path, error))?;
            }
            let mut out = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map_err(|error| failed(&file.path, error))?;
            staged.push((temp.clone(), target.clone(), file.path.as_str()));
            std::io::Write::write_all(&mut out, text.as_bytes()).map_err(|error| failed(&file.path, error))?;
            out.sync_all().map_err(|error| failed(&file.path, error))?;
            if let Ok(meta) = fs::symlink_metadata(&target)
                && meta.is_file()
            {
                let _ = fs::set_permissions(&temp, meta.permissions());
            }
        }
        Ok(())
    };
    let result = stage();
    if let Err(error) = result {
        for (temp, _, _) in &staged {
            let _ = fs::remove_file(temp);
        }
        return Err(error);
    }

    // 2. Rename them into place (a rename replaces the entry; it never follows a link).
    for (index, (temp, target, path)) in staged.iter().enumerate() {
        if let Err(error) = fs::rename(temp, target) {
            for (left, _, _) in &staged[index..] {
                let _ = fs::remove_file(left);
            }
            return Err(failed(path, error));
        }
    }

    // 3. Only now remove what the plan removes.
    let mut emptied: BTreeSet<PathBuf> = BTreeSet::new();
    for file in migration.files().filter(|file| file.after.is_none()) {
        let target = root.join(&file.path);
        fs::remove_file(&target).map_err(|error| MigrateError::Write {
            path: file.path.clone(),
            message: format!("removing it failed ({error}); every new text is already written"),
        })?;
        if let Some(parent) = target.parent() {
            emptied.insert(parent.to_path_buf());
        }
    }
    for dir in &emptied {
        if dir.file_name().is_some_and(|name| name == "hooks")
            && fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
        {
            let _ = fs::remove_dir(dir);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
