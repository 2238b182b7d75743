//! Loading a workspace from disk.
//!
//! A workspace root holds `workflows/<slug>/` (each with `workflow.yaml`, an optional
//! `WORKFLOW.md`, `scripts/` and `tests/`), the skill registry `skills/<slug>/SKILL.md`,
//! an optional `AGENTS.md` persona and an optional `archmax.toml` host table. Loading
//! reads every file once into the [`SourceMap`], in sorted order so every later step is
//! deterministic, and reports file-level problems (unreadable, non-UTF-8, misplaced or
//! misnamed files) as diagnostics; it fails outright only when the root itself is unusable.
//!
//! Only regular files inside the root are read (see the `files` submodule): a named pipe,
//! socket or device anywhere under a workflow or skill directory, and a symbolic link
//! that leads outside the root, are reported as `AMX0014` naming the path, and nothing
//! of what such a link points at is read or shown. Links that stay inside the root are
//! followed like the files they point at, except that a link anywhere inside a folder
//! mount's source is warned about (`AMX0015`): sessions never follow links in mounts.
//! The links found are kept ([`Workspace::mount_links`]) so the governance check can refuse
//! a host tool's path grant over one (`AMX0713`).

mod files;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use self::files::{DiskFiles, Files, Kind, MemoryFiles, ReadError, Refusal};

use crate::diagnostic::{Code, Diagnostic, Scope, list_names};
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::{frontmatter, is_slug, yaml};
use archmax_config::mounts::{MountTable, parse_mounts};

/// How deep directory walks under a workflow or skill directory go.
const MAX_WALK_DEPTH: usize = 16;

/// The files of a workflow directory that loading registers by name, outside the walk.
const WORKFLOW_FILES: [&str; 4] = ["workflow.yaml", "WORKFLOW.md", "tests.config.js", "tests/tests.config.js"];

/// A skill bundle of the registry.
#[derive(Clone, Debug)]
pub struct Skill {
    pub slug: String,
    pub description: Option<String>,
    /// `SKILL.md`, when present.
    pub file: Option<FileId>,
}

/// The files of one workflow directory.
#[derive(Clone, Debug)]
pub struct WorkflowSource {
    pub slug: String,
    /// The workflow directory, relative to the root (`workflows/<slug>`).
    pub dir: String,
    pub spec: Option<FileId>,
    pub prose: Option<FileId>,
    /// Scripts under `scripts/`, keyed by their workflow-relative path (`scripts/a.js`).
    pub scripts: Vec<(String, FileId)>,
    /// Case files, keyed by case id (the tests-relative path without extension).
    pub cases: Vec<(String, FileId)>,
    /// Tapes under `tests/` (`<case>.tape.yaml`), keyed by their tests-relative path.
    pub tapes: Vec<(String, FileId)>,
    /// Every regular file under `tests/`, tests-relative: what `from:` may name.
    pub test_files: BTreeSet<String>,
}

/// A loaded workspace.
#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    pub sources: SourceMap,
    pub mounts: MountTable,
    pub config_file: Option<FileId>,
    pub skills: Vec<Skill>,
    pub agents: Option<FileId>,
    /// `.platform/system/GRAPH_STATE.md`: the workspace's own platform prompt.
    pub platform_prompt: Option<FileId>,
    pub workflows: Vec<WorkflowSource>,
    pub diagnostics: Vec<Diagnostic>,
    /// Files registered without text because they could not be read or decoded.
    pub unreadable: BTreeSet<FileId>,
    /// The symbolic links found inside folder mounts' sources (each warned about as
    /// AMX0015), so a workflow granting a host tool paths in such a mount is refused.
    pub mount_links: Vec<MountLink>,
}

/// A symbolic link inside a folder mount's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountLink {
    /// Where the link is, root-relative (`reference/alias`).
    pub path: String,
    /// The key of the mount whose source holds it (`reference/`).
    pub mount: String,
}

impl Workspace {
    /// True when the file's text was read (it may still be empty).
    pub fn readable(&self, file: FileId) -> bool {
        !self.unreadable.contains(&file)
    }

    pub fn workflow(&self, slug: &str) -> Option<&WorkflowSource> {
        self.workflows.iter().find(|workflow| workflow.slug == slug)
    }

    pub fn skill(&self, slug: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.slug == slug)
    }

    pub fn skill_slugs(&self) -> Vec<&str> {
        self.skills.iter().map(|skill| skill.slug.as_str()).collect()
    }
}

/// Why a workspace could not be loaded at all.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("the workspace root `{0}` does not exist or is not a directory")]
    RootMissing(PathBuf),
    #[error("`{0}` has no `workflows/` directory; a workspace keeps each workflow in `workflows/<slug>/workflow.yaml`")]
    NoWorkflowsDirectory(PathBuf),
}

enum ReadProblem {
    NotUtf8 { offset: usize, line: usize },
    TooLarge(u64),
    Refused(Refusal),
    Io(std::io::Error),
}

fn read_text(files: &dyn Files, path: &str, limit: u64) -> Result<String, ReadProblem> {
    let bytes = files.read(path, limit).map_err(|error| match error {
        ReadError::TooLarge(size) => ReadProblem::TooLarge(size),
        ReadError::Refused(refusal) => ReadProblem::Refused(refusal),
        ReadError::Io(error) => ReadProblem::Io(error),
    })?;
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        let line = error.as_bytes()[..offset].iter().filter(|byte| **byte == b'\n').count() + 1;
        ReadProblem::NotUtf8 { offset, line }
    })
}

pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

struct Loader<'f> {
    files: &'f dyn Files,
    sources: SourceMap,
    diagnostics: Vec<Diagnostic>,
    unreadable: BTreeSet<FileId>,
}

impl Loader<'_> {
    /// Registers a file, reporting why it could not be read. Returns its id either way
    /// (an unreadable file is registered empty, so findings can still name it).
    fn register(&mut self, path: &str, scope: &Scope) -> (FileId, bool) {
        let name = path.to_string();
        let location = self.files.location(path);
        match read_text(self.files, path, yaml::MAX_FILE_BYTES as u64) {
            Ok(text) => (self.sources.add(name, location, text), true),
            Err(problem) => {
                let id = self.sources.add(name.clone(), location, "");
                self.unreadable.insert(id);
                self.diagnostics.push(unreadable_file(&name, id, problem).with_scope(scope.clone()));
                (id, false)
            }
        }
    }

    /// True when something other than a directory is at `path`: a file to register,
    /// or something registering reports as refused.
    fn present(&self, path: &str) -> bool {
        matches!(self.files.kind(path), Some(Kind::File | Kind::Refused(_)))
    }

    /// Everything under `dir` but directories, as (dir-relative path, root-relative
    /// path, kind), sorted. A refused entry is listed, never descended into.
    fn walk(&self, dir: &str) -> Vec<(String, String, Kind)> {
        let mut found = Vec::new();
        let mut stack = vec![(dir.to_string(), String::new(), 0usize)];
        while let Some((current, prefix, depth)) = stack.pop() {
            if depth > MAX_WALK_DEPTH {
                continue;
            }
            for (name, kind) in self.files.entries(&current) {
                let relative = join(&prefix, &name);
                let path = join(&current, &name);
                if kind == Kind::Directory {
                    stack.push((path, relative, depth + 1));
                } else {
                    found.push((relative, path, kind));
                }
            }
        }
        found.sort_by(|left, right| left.0.cmp(&right.0));
        found
    }

    /// Reports every refused entry under `dir` (a named pipe, a link leaving the root)
    /// except the ones at `handled`, dir-relative paths registered elsewhere.
    fn report_refused(&mut self, dir: &str, handled: &[&str], scope: &Scope) {
        for (relative, path, kind) in self.walk(dir) {
            if matches!(kind, Kind::Refused(_)) && !handled.contains(&relative.as_str()) {
                self.register(&path, scope);
            }
        }
    }
}

/// The diagnostic for a file that could not be read.
fn unreadable_file(name: &str, id: FileId, problem: ReadProblem) -> Diagnostic {
    match problem {
        ReadProblem::NotUtf8 { offset, line } => Diagnostic::at(
            Code::NotUtf8,
            Span::file_start(id),
            format!("`{name}` is not UTF-8 text: byte {offset} (line {line}) starts an invalid sequence"),
        )
        .with_help("save the file as UTF-8; workflow files, scripts and cases are text"),
        ReadProblem::TooLarge(size) => Diagnostic::at(
            Code::YamlLimit,
            Span::file_start(id),
            format!("`{name}` is {size} bytes, over the {} byte limit for a workspace file", yaml::MAX_FILE_BYTES),
        )
        .with_help("keep large data out of workflow files; put it in a skill bundle's assets"),
        ReadProblem::Refused(Refusal::LeavesRoot) => Diagnostic::at(
            Code::FileRead,
            Span::file_start(id),
            format!("`{name}` is a symbolic link that leads outside the workspace, so it was not read"),
        )
        .with_help("put the file itself in the workspace, or point the link at a file inside the workspace root"),
        ReadProblem::Refused(Refusal::NotRegular(what)) => Diagnostic::at(
            Code::FileRead,
            Span::file_start(id),
            format!("`{name}` is {what}, not a regular file, so it was not read"),
        )
        .with_help("keep only regular files and directories in a workspace: replace it with a file, or remove it"),
        ReadProblem::Io(error) => {
            let why = match error.kind() {
                std::io::ErrorKind::NotFound => "it does not exist (a dangling symbolic link?)".to_string(),
                std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
                std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
                other => format!("{other}"),
            };
            Diagnostic::at(Code::FileRead, Span::file_start(id), format!("`{name}` could not be read: {why}"))
                .with_help("make the file a readable regular file, or remove it")
        }
    }
}

/// Loads the workspace at `root` from disk.
pub fn load_workspace(root: &Path) -> Result<Workspace, WorkspaceError> {
    let files = DiskFiles::open(root).map_err(|_| WorkspaceError::RootMissing(root.to_path_buf()))?;
    load_from(&files, root)
}

/// Loads a workspace held in memory: `(root-relative path, contents)` pairs.
pub fn load_memory<P: AsRef<str>, C: AsRef<[u8]>>(
    files: impl IntoIterator<Item = (P, C)>,
) -> Result<Workspace, WorkspaceError> {
    load_from(&MemoryFiles::new(files), Path::new("<memory>"))
}

/// Loads a workspace through any [`Files`] source.
pub fn load_from(files: &dyn Files, root: &Path) -> Result<Workspace, WorkspaceError> {
    if files.kind("workflows") != Some(Kind::Directory) {
        return Err(WorkspaceError::NoWorkflowsDirectory(root.to_path_buf()));
    }
    let mut loader = Loader { files, sources: SourceMap::new(), diagnostics: Vec::new(), unreadable: BTreeSet::new() };

    let mut mounts = MountTable::default_table();
    let mut config_file = None;
    if loader.present("archmax.toml") {
        let (file, readable) = loader.register("archmax.toml", &Scope::Workspace);
        config_file = Some(file);
        if readable {
            let (table, diagnostics) = parse_mounts(file, loader.sources.text(file));
            mounts = table;
            loader
                .diagnostics
                .extend(diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(Scope::Workspace)));
        }
    }

    let agents = loader.present("AGENTS.md").then(|| loader.register("AGENTS.md", &Scope::Workspace).0);
    let platform_source =
        mounts.by_name(".platform").map(|mount| mount.source.clone()).unwrap_or_else(|| ".platform".to_string());
    let refused_sources = report_refused_mount_sources(&mut loader, &mounts);
    let mount_links = warn_links_in_mounts(&mut loader, &mounts);
    let platform_path = join(&platform_source, "system/GRAPH_STATE.md");
    let platform_prompt = (!refused_sources.contains(&platform_source) && loader.present(&platform_path))
        .then(|| loader.register(&platform_path, &Scope::Workspace).0);

    let skills_source =
        mounts.by_name("skills").map(|mount| mount.source.clone()).unwrap_or_else(|| "skills".to_string());
    let skills = load_skills(&mut loader, &skills_source);

    let mut workflows = Vec::new();
    for (name, kind) in files.entries("workflows") {
        match kind {
            Kind::Directory => workflows.push(load_workflow_dir(&mut loader, &name)),
            // Not a workflow, so no workflow's report would carry it.
            Kind::Refused(_) => {
                loader.register(&join("workflows", &name), &Scope::Workspace);
            }
            Kind::File => {}
        }
    }

    Ok(Workspace {
        root: root.to_path_buf(),
        sources: loader.sources,
        mounts,
        config_file,
        skills,
        agents,
        platform_prompt,
        workflows,
        diagnostics: loader.diagnostics,
        unreadable: loader.unreadable,
        mount_links,
    })
}

/// Reports a mount whose source is itself refused (a link leading out of the workspace,
/// a named pipe): sessions would otherwise be served what lies behind it. `AGENTS.md`
/// was registered, and so reported, already. Returns the refused sources.
fn report_refused_mount_sources(loader: &mut Loader<'_>, mounts: &MountTable) -> Vec<String> {
    let mut refused = Vec::new();
    for mount in &mounts.mounts {
        if matches!(loader.files.kind(&mount.source), Some(Kind::Refused(_))) {
            if mount.source != "AGENTS.md" {
                loader.register(&mount.source, &Scope::Workspace);
            }
            refused.push(mount.source.clone());
        }
    }
    refused
}

/// Most folders one mount's link search visits.
const MAX_LINK_SEARCH_FOLDERS: usize = 10_000;

/// Warns (AMX0015) about each symbolic link inside a folder mount's source: sessions
/// never follow one, so what it points at is not there for them. Links are never
/// descended into; the search is bounded in depth and folders. Returns the links found.
fn warn_links_in_mounts(loader: &mut Loader<'_>, mounts: &MountTable) -> Vec<MountLink> {
    let mut found = Vec::new();
    for mount in mounts.mounts.iter().filter(|mount| mount.directory) {
        if loader.files.kind(&mount.source) != Some(Kind::Directory) {
            continue;
        }
        let mut pending = vec![(mount.source.clone(), 0usize)];
        let mut visited = 0usize;
        while let Some((dir, depth)) = pending.pop() {
            visited += 1;
            if visited > MAX_LINK_SEARCH_FOLDERS {
                break;
            }
            let links = loader.files.links_in(&dir);
            for (name, kind) in loader.files.entries(&dir) {
                let path = join(&dir, &name);
                if links.contains(&name) {
                    // A link leading outside is an AMX0014 error already.
                    if !matches!(kind, Kind::Refused(_)) {
                        loader.diagnostics.push(link_in_mount(&path, &mount.key));
                        found.push(MountLink { path: path.clone(), mount: mount.key.clone() });
                    }
                } else if kind == Kind::Directory && depth < MAX_WALK_DEPTH {
                    pending.push((path, depth + 1));
                }
            }
        }
    }
    found
}

fn link_in_mount(path: &str, key: &str) -> Diagnostic {
    Diagnostic::new(
        Code::LinkInMount,
        None,
        format!("`{path}` is a symbolic link inside the source of the mount `{key}`; sessions never follow it"),
    )
    .with_help("replace the link with the file or folder itself (a copy), or remove it; a link in a mount could otherwise name a path its denials forbid")
    .with_scope(Scope::Workspace)
}

fn load_skills(loader: &mut Loader<'_>, dir: &str) -> Vec<Skill> {
    let mut skills = Vec::new();
    for (slug, kind) in loader.files.entries(dir) {
        if matches!(kind, Kind::Refused(_)) {
            loader.register(&join(dir, &slug), &Scope::Skill(slug.clone()));
        }
        if kind != Kind::Directory || slug.starts_with('.') {
            continue;
        }
        let scope = Scope::Skill(slug.clone());
        loader.report_refused(&join(dir, &slug), &["SKILL.md"], &scope);
        let manifest = join(&join(dir, &slug), "SKILL.md");
        if !is_slug(&slug) {
            loader.diagnostics.push(
                Diagnostic::new(
                    Code::SkillManifest,
                    None,
                    format!("the skill directory `skills/{slug}` is not a kebab-case slug"),
                )
                .with_help("rename the directory to lowercase words joined by hyphens, such as `order-data`; its name is the slug lists use")
                .with_scope(scope.clone()),
            );
        }
        if !loader.present(&manifest) {
            loader.diagnostics.push(
                Diagnostic::new(
                    Code::SkillManifest,
                    None,
                    format!("`skills/{slug}/` has no SKILL.md, so it is not a skill bundle"),
                )
                .with_help(format!(
                    "add `skills/{slug}/SKILL.md` opening with `---`, `name: {slug}`, `description: …`, `---`"
                ))
                .with_scope(scope),
            );
            skills.push(Skill { slug, description: None, file: None });
            continue;
        }
        let (file, readable) = loader.register(&manifest, &scope);
        let mut skill = Skill { slug: slug.clone(), description: None, file: Some(file) };
        if readable {
            let text = loader.sources.text(file).to_string();
            read_skill_manifest(loader, &mut skill, file, &text, &scope);
        }
        skills.push(skill);
    }
    skills
}

/// A file directly in `dir` that was most likely meant as its `workflow.yaml`: another
/// spelling of the name (`workflow.yml`, `Workflow.yaml`), which is never read.
fn misnamed_workflow_file(files: &dyn Files, dir: &str) -> Option<String> {
    files.entries(dir).into_iter().map(|(name, _)| name).find(|name| {
        let lower = name.to_ascii_lowercase();
        name != "workflow.yaml" && (lower == "workflow.yaml" || lower == "workflow.yml")
    })
}

fn read_skill_manifest(loader: &mut Loader<'_>, skill: &mut Skill, file: FileId, text: &str, scope: &Scope) {
    let name = loader.sources.file(file).name.clone();
    let Some(block) = frontmatter(text) else {
        loader.diagnostics.push(
            Diagnostic::at(Code::SkillManifest, Span::file_start(file), format!("`{name}` has no frontmatter block"))
                .with_help(format!(
                    "open the file with `---`, `name: {}`, `description: <when to use it>`, `---`",
                    skill.slug
                ))
                .with_scope(scope.clone()),
        );
        return;
    };
    let document = yaml::load_fragment(file, block.yaml, block.offset);
    let found_problems = !document.diagnostics.is_empty();
    loader.diagnostics.extend(document.diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(scope.clone())));
    let Some(root) = document.root.filter(|root| root.as_mapping().is_some()) else {
        if !found_problems {
            loader.diagnostics.push(
                Diagnostic::at(
                    Code::SkillManifest,
                    Span::new(file, block.block.start, block.block.end),
                    format!("the frontmatter of `{name}` is not a mapping"),
                )
                .with_help("write `name:` and `description:` keys between the `---` fences")
                .with_scope(scope.clone()),
            );
        }
        return;
    };
    match root.get("name").map(|node| (node, node.as_str())) {
        Some((node, Some(declared))) => {
            if declared != skill.slug {
                loader.diagnostics.push(
                    Diagnostic::at(
                        Code::SkillNameMismatch,
                        node.span,
                        format!("SKILL.md names the bundle `{declared}`, but its directory is `{}`", skill.slug),
                    )
                    .with_label("differs from the directory")
                    .with_help(format!(
                        "lists name a bundle by its directory: write `name: {}`, or rename the directory",
                        skill.slug
                    ))
                    .with_scope(scope.clone()),
                );
            }
        }
        Some((node, None)) => loader.diagnostics.push(
            Diagnostic::at(Code::SkillManifest, node.span, "the skill's `name` must be a string")
                .with_help(format!("write `name: {}`", skill.slug))
                .with_scope(scope.clone()),
        ),
        None => loader.diagnostics.push(
            Diagnostic::at(
                Code::SkillManifest,
                Span::new(file, block.block.start, block.block.end),
                format!("the frontmatter of `{name}` has no `name`"),
            )
            .with_help(format!("add `name: {}`", skill.slug))
            .with_scope(scope.clone()),
        ),
    }
    match root.get("description").map(|node| (node, node.as_str())) {
        Some((_, Some(description))) if !description.trim().is_empty() => {
            skill.description = Some(description.trim().to_string());
        }
        Some((node, _)) => loader.diagnostics.push(
            Diagnostic::at(Code::SkillManifest, node.span, "the skill's `description` must be non-empty text")
                .with_help("say when to use the bundle: the description is what the agent is shown")
                .with_scope(scope.clone()),
        ),
        None => loader.diagnostics.push(
            Diagnostic::at(
                Code::SkillManifest,
                Span::new(file, block.block.start, block.block.end),
                format!("the frontmatter of `{name}` has no `description`"),
            )
            .with_help("add `description:` saying when to use the bundle; the agent is shown it")
            .with_scope(scope.clone()),
        ),
    }
}

fn load_workflow_dir(loader: &mut Loader<'_>, slug: &str) -> WorkflowSource {
    let scope = Scope::Workflow(slug.to_string());
    let dir = format!("workflows/{slug}");
    let spec_path = join(&dir, "workflow.yaml");
    let prose_path = join(&dir, "WORKFLOW.md");
    let mut source = WorkflowSource {
        slug: slug.to_string(),
        dir: dir.clone(),
        spec: None,
        prose: None,
        scripts: Vec::new(),
        cases: Vec::new(),
        tapes: Vec::new(),
        test_files: BTreeSet::new(),
    };
    if !is_slug(slug) {
        loader.diagnostics.push(
            Diagnostic::new(
                Code::WorkflowSlug,
                None,
                format!("the workflow directory `workflows/{slug}` is not a kebab-case slug"),
            )
            .with_help("rename the directory to lowercase words joined by hyphens, such as `order-lookup`: the name is the workflow's identity")
            .with_scope(scope.clone()),
        );
    }
    if loader.present(&prose_path) {
        let (file, readable) = loader.register(&prose_path, &scope);
        source.prose = Some(file);
        if readable && loader.present(&spec_path) {
            let text = loader.sources.text(file).to_string();
            if let Some(block) = frontmatter(&text) {
                loader.diagnostics.push(
                    Diagnostic::at(
                        Code::WorkflowMdFrontmatter,
                        Span::new(file, block.block.start, block.block.end),
                        "WORKFLOW.md opens with a frontmatter block beside workflow.yaml",
                    )
                    .with_label("frontmatter")
                    .with_help(
                        "workflow.yaml is the only machine spec: move any keys into it and delete the `---` block",
                    )
                    .with_scope(scope.clone()),
                );
            }
        }
    }
    if loader.present(&spec_path) {
        source.spec = Some(loader.register(&spec_path, &scope).0);
    } else {
        let single_file = source.prose.is_some_and(|file| frontmatter(loader.sources.text(file)).is_some());
        let misnamed = misnamed_workflow_file(loader.files, &dir);
        let help = match &misnamed {
            Some(name) => format!("only `workflow.yaml` is read: rename `{name}` to `workflow.yaml`"),
            None if single_file => "the single-file WORKFLOW.md layout was removed: move its frontmatter into `workflow.yaml` and keep the prose, without fences, in WORKFLOW.md".to_string(),
            None => "add `workflow.yaml` with the workflow's states, or remove the directory".to_string(),
        };
        let message = match &misnamed {
            Some(name) => format!("`workflows/{slug}/` has no workflow.yaml, only `{name}`"),
            None => format!("`workflows/{slug}/` has no workflow.yaml"),
        };
        loader.diagnostics.push(
            Diagnostic::new(Code::MissingWorkflowFile, source.prose.map(Span::file_start), message)
                .with_help(help)
                .with_scope(scope.clone()),
        );
    }
    for legacy in ["tests.config.js", "tests/tests.config.js"] {
        let path = join(&dir, legacy);
        if loader.present(&path) {
            let (file, _) = loader.register(&path, &scope);
            loader.diagnostics.push(
                Diagnostic::at(Code::TestsConfigJs, Span::file_start(file), format!("`{legacy}` is no longer read"))
                    .with_help("move the suite settings into the `tests:` block of workflow.yaml (`maxConcurrency`, `caseTimeoutMs`, `judge`) and delete the file")
                    .with_scope(scope.clone()),
            );
        }
    }
    for (relative, path, kind) in loader.walk(&dir) {
        if let Some(script) = relative.strip_prefix("scripts/") {
            if script.ends_with(".js") || script.ends_with(".mjs") {
                let (file, _) = loader.register(&path, &scope);
                source.scripts.push((relative.clone(), file));
                continue;
            }
        } else if let Some(test) = relative.strip_prefix("tests/") {
            let case_id = test.strip_suffix(".test.yaml").or_else(|| test.strip_suffix(".test.yml"));
            if let Some(id) = case_id {
                let (file, _) = loader.register(&path, &scope);
                source.cases.push((id.to_string(), file));
            } else if kind == Kind::File && (test.ends_with(".tape.yaml") || test.ends_with(".tape.yml")) {
                let (file, _) = loader.register(&path, &scope);
                source.tapes.push((test.to_string(), file));
            }
            if kind == Kind::File || case_id.is_some() {
                source.test_files.insert(test.to_string());
            }
            if case_id.is_some() {
                continue;
            }
        }
        let handled = WORKFLOW_FILES.contains(&relative.as_str());
        if matches!(kind, Kind::Refused(_)) && !handled {
            loader.register(&path, &scope);
        }
    }
    source
}

/// The names of the workflows, for messages.
pub fn workflow_names(workspace: &Workspace) -> String {
    let names: Vec<&str> = workspace.workflows.iter().map(|workflow| workflow.slug.as_str()).collect();
    list_names(&names)
}

#[cfg(test)]
mod tests;
