//! Loading a workspace from disk.
//!
//! A workspace root holds `workflows/<slug>/` (each with `workflow.yaml`, an optional
//! `WORKFLOW.md`, `scripts/` and `tests/`), the skill registry `skills/<slug>/SKILL.md`,
//! an optional `AGENTS.md` persona and an optional `archmax.toml` host table. Loading
//! reads every file once into the [`SourceMap`], in sorted order so every later step is
//! deterministic, and reports file-level problems (unreadable, non-UTF-8, misplaced or
//! misnamed files) as diagnostics; it fails outright only when the root itself is unusable.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic, Scope, list_names};
use crate::host::{MountTable, parse_host_config};
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::{frontmatter, is_slug, yaml};

/// How deep directory walks under `scripts/` and `tests/` go.
const MAX_WALK_DEPTH: usize = 16;

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
    /// Every regular file under `tests/`, tests-relative: what `from:` may name.
    pub test_files: BTreeSet<String>,
}

/// A loaded workspace.
#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    pub sources: SourceMap,
    pub mounts: MountTable,
    pub host_file: Option<FileId>,
    pub skills: Vec<Skill>,
    pub agents: Option<FileId>,
    /// `.platform/system/GRAPH_STATE.md`: the workspace's own platform prompt.
    pub platform_prompt: Option<FileId>,
    pub workflows: Vec<WorkflowSource>,
    pub diagnostics: Vec<Diagnostic>,
    /// Files registered without text because they could not be read or decoded.
    pub unreadable: BTreeSet<FileId>,
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
    Io(std::io::Error),
}

/// Where a workspace's files come from: the disk, or memory (tests, fuzzing, benches).
/// Paths are relative to the root, `/`-separated; `""` is the root itself.
pub trait Files {
    /// The entries of a directory, sorted by name: `(name, is_directory)`.
    fn entries(&self, dir: &str) -> Vec<(String, bool)>;
    fn is_file(&self, path: &str) -> bool;
    fn is_dir(&self, path: &str) -> bool;
    /// The file's bytes, refusing files larger than `limit`.
    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError>;
    /// The path to show for a file.
    fn location(&self, path: &str) -> PathBuf;
}

/// Why a file could not be read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge(u64),
    Io(std::io::Error),
}

/// Files on disk under a root directory.
pub struct DiskFiles {
    pub root: PathBuf,
}

impl DiskFiles {
    fn full(&self, path: &str) -> PathBuf {
        if path.is_empty() { self.root.clone() } else { self.root.join(path) }
    }
}

impl Files for DiskFiles {
    fn entries(&self, dir: &str) -> Vec<(String, bool)> {
        let Ok(read) = fs::read_dir(self.full(dir)) else {
            return Vec::new();
        };
        let mut entries: Vec<(String, bool)> = read
            .filter_map(Result::ok)
            .map(|entry| {
                let is_dir = fs::metadata(entry.path()).map(|metadata| metadata.is_dir()).unwrap_or(false);
                (entry.file_name().to_string_lossy().into_owned(), is_dir)
            })
            .collect();
        entries.sort();
        entries
    }

    fn is_file(&self, path: &str) -> bool {
        self.full(path).is_file()
    }

    fn is_dir(&self, path: &str) -> bool {
        self.full(path).is_dir()
    }

    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        let full = self.full(path);
        let metadata = fs::metadata(&full).map_err(ReadError::Io)?;
        if metadata.len() > limit {
            return Err(ReadError::TooLarge(metadata.len()));
        }
        fs::read(&full).map_err(ReadError::Io)
    }

    fn location(&self, path: &str) -> PathBuf {
        self.full(path)
    }
}

/// Files held in memory, keyed by root-relative path; directories are implied.
#[derive(Default)]
pub struct MemoryFiles {
    files: BTreeMap<String, Vec<u8>>,
}

impl MemoryFiles {
    pub fn new<P: AsRef<str>, C: AsRef<[u8]>>(files: impl IntoIterator<Item = (P, C)>) -> MemoryFiles {
        MemoryFiles {
            files: files
                .into_iter()
                .map(|(path, content)| (path.as_ref().trim_matches('/').to_string(), content.as_ref().to_vec()))
                .collect(),
        }
    }
}

impl Files for MemoryFiles {
    fn entries(&self, dir: &str) -> Vec<(String, bool)> {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let mut entries: BTreeMap<String, bool> = BTreeMap::new();
        for path in self.files.keys().filter(|path| path.starts_with(&prefix)) {
            let rest = &path[prefix.len()..];
            match rest.split_once('/') {
                Some((name, _)) => {
                    entries.insert(name.to_string(), true);
                }
                None => {
                    entries.entry(rest.to_string()).or_insert(false);
                }
            }
        }
        entries.into_iter().collect()
    }

    fn is_file(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    fn is_dir(&self, path: &str) -> bool {
        path.is_empty()
            || self.files.keys().any(|file| file.starts_with(path) && file.as_bytes().get(path.len()) == Some(&b'/'))
    }

    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        match self.files.get(path) {
            Some(bytes) if bytes.len() as u64 > limit => Err(ReadError::TooLarge(bytes.len() as u64)),
            Some(bytes) => Ok(bytes.clone()),
            None => Err(ReadError::Io(std::io::Error::from(std::io::ErrorKind::NotFound))),
        }
    }

    fn location(&self, path: &str) -> PathBuf {
        PathBuf::from(path)
    }
}

fn read_text(files: &dyn Files, path: &str, limit: u64) -> Result<String, ReadProblem> {
    let bytes = files.read(path, limit).map_err(|error| match error {
        ReadError::TooLarge(size) => ReadProblem::TooLarge(size),
        ReadError::Io(error) => ReadProblem::Io(error),
    })?;
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        let line = error.as_bytes()[..offset].iter().filter(|byte| **byte == b'\n').count() + 1;
        ReadProblem::NotUtf8 { offset, line }
    })
}

fn join(dir: &str, name: &str) -> String {
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
                let diagnostic = match problem {
                    ReadProblem::NotUtf8 { offset, line } => Diagnostic::at(
                        Code::NotUtf8,
                        Span::file_start(id),
                        format!("`{name}` is not UTF-8 text: byte {offset} (line {line}) starts an invalid sequence"),
                    )
                    .with_help("save the file as UTF-8; workflow files, scripts and cases are text"),
                    ReadProblem::TooLarge(size) => Diagnostic::at(
                        Code::YamlLimit,
                        Span::file_start(id),
                        format!(
                            "`{name}` is {size} bytes, over the {} byte limit for a workspace file",
                            yaml::MAX_FILE_BYTES
                        ),
                    )
                    .with_help("keep large data out of workflow files; put it in a skill bundle's assets"),
                    ReadProblem::Io(error) => {
                        let why = match error.kind() {
                            std::io::ErrorKind::NotFound => "it does not exist (a dangling symbolic link?)".to_string(),
                            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
                            std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
                            other => format!("{other}"),
                        };
                        Diagnostic::at(
                            Code::FileRead,
                            Span::file_start(id),
                            format!("`{name}` could not be read: {why}"),
                        )
                        .with_help("make the file a readable regular file, or remove it")
                    }
                };
                self.diagnostics.push(diagnostic.with_scope(scope.clone()));
                (id, false)
            }
        }
    }

    /// Every file under `dir`, as (dir-relative path, root-relative path), sorted.
    fn walk(&self, dir: &str) -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut stack = vec![(dir.to_string(), String::new(), 0usize)];
        while let Some((current, prefix, depth)) = stack.pop() {
            if depth > MAX_WALK_DEPTH {
                continue;
            }
            for (name, is_dir) in self.files.entries(&current) {
                let relative = join(&prefix, &name);
                let path = join(&current, &name);
                if is_dir {
                    stack.push((path, relative, depth + 1));
                } else {
                    found.push((relative, path));
                }
            }
        }
        found.sort();
        found
    }
}

/// Loads the workspace at `root` from disk.
pub fn load_workspace(root: &Path) -> Result<Workspace, WorkspaceError> {
    if !root.is_dir() {
        return Err(WorkspaceError::RootMissing(root.to_path_buf()));
    }
    load_from(&DiskFiles { root: root.to_path_buf() }, root)
}

/// Loads a workspace held in memory: `(root-relative path, contents)` pairs.
pub fn load_memory<P: AsRef<str>, C: AsRef<[u8]>>(
    files: impl IntoIterator<Item = (P, C)>,
) -> Result<Workspace, WorkspaceError> {
    load_from(&MemoryFiles::new(files), Path::new("<memory>"))
}

/// Loads a workspace through any [`Files`] source.
pub fn load_from(files: &dyn Files, root: &Path) -> Result<Workspace, WorkspaceError> {
    if !files.is_dir("workflows") {
        return Err(WorkspaceError::NoWorkflowsDirectory(root.to_path_buf()));
    }
    let mut loader = Loader { files, sources: SourceMap::new(), diagnostics: Vec::new(), unreadable: BTreeSet::new() };

    let mut mounts = MountTable::default_table();
    let mut host_file = None;
    if files.is_file("archmax.toml") {
        let (file, readable) = loader.register("archmax.toml", &Scope::Workspace);
        host_file = Some(file);
        if readable {
            let (table, diagnostics) = parse_host_config(file, loader.sources.text(file));
            mounts = table;
            loader
                .diagnostics
                .extend(diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(Scope::Workspace)));
        }
    }

    let agents = files.is_file("AGENTS.md").then(|| loader.register("AGENTS.md", &Scope::Workspace).0);
    let platform_source =
        mounts.by_name(".platform").map(|mount| mount.source.clone()).unwrap_or_else(|| ".platform".to_string());
    let platform_path = join(&platform_source, "system/GRAPH_STATE.md");
    let platform_prompt = files.is_file(&platform_path).then(|| loader.register(&platform_path, &Scope::Workspace).0);

    let skills_source =
        mounts.by_name("skills").map(|mount| mount.source.clone()).unwrap_or_else(|| "skills".to_string());
    let skills = load_skills(&mut loader, &skills_source);

    let mut workflows = Vec::new();
    for (name, is_dir) in files.entries("workflows") {
        if is_dir {
            workflows.push(load_workflow_dir(&mut loader, &name));
        }
    }

    Ok(Workspace {
        root: root.to_path_buf(),
        sources: loader.sources,
        mounts,
        host_file,
        skills,
        agents,
        platform_prompt,
        workflows,
        diagnostics: loader.diagnostics,
        unreadable: loader.unreadable,
    })
}

fn load_skills(loader: &mut Loader<'_>, dir: &str) -> Vec<Skill> {
    let mut skills = Vec::new();
    for (slug, is_dir) in loader.files.entries(dir) {
        if !is_dir || slug.starts_with('.') {
            continue;
        }
        let scope = Scope::Skill(slug.clone());
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
        if !loader.files.is_file(&manifest) {
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
    if loader.files.is_file(&prose_path) {
        let (file, readable) = loader.register(&prose_path, &scope);
        source.prose = Some(file);
        if readable && loader.files.is_file(&spec_path) {
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
    if loader.files.is_file(&spec_path) {
        source.spec = Some(loader.register(&spec_path, &scope).0);
    } else {
        let single_file = source.prose.is_some_and(|file| frontmatter(loader.sources.text(file)).is_some());
        loader.diagnostics.push(
            Diagnostic::new(
                Code::MissingWorkflowFile,
                source.prose.map(Span::file_start),
                format!("`workflows/{slug}/` has no workflow.yaml"),
            )
            .with_help(if single_file {
                "the single-file WORKFLOW.md layout was removed: move its frontmatter into `workflow.yaml` and keep the prose, without fences, in WORKFLOW.md"
            } else {
                "add `workflow.yaml` with the workflow's states, or remove the directory"
            })
            .with_scope(scope.clone()),
        );
    }
    for legacy in ["tests.config.js", "tests/tests.config.js"] {
        let path = join(&dir, legacy);
        if loader.files.is_file(&path) {
            let (file, _) = loader.register(&path, &scope);
            loader.diagnostics.push(
                Diagnostic::at(Code::TestsConfigJs, Span::file_start(file), format!("`{legacy}` is no longer read"))
                    .with_help("move the suite settings into the `tests:` block of workflow.yaml (`maxConcurrency`, `caseTimeoutMs`, `judge`) and delete the file")
                    .with_scope(scope.clone()),
            );
        }
    }
    for (relative, path) in loader.walk(&join(&dir, "scripts")) {
        if relative.ends_with(".js") || relative.ends_with(".mjs") {
            let (file, _) = loader.register(&path, &scope);
            source.scripts.push((format!("scripts/{relative}"), file));
        }
    }
    for (relative, path) in loader.walk(&join(&dir, "tests")) {
        let case_id =
            relative.strip_suffix(".test.yaml").or_else(|| relative.strip_suffix(".test.yml")).map(str::to_string);
        if let Some(id) = case_id {
            let (file, _) = loader.register(&path, &scope);
            source.cases.push((id, file));
        }
        source.test_files.insert(relative);
    }
    source
}

/// The names of the workflows, for messages.
pub fn workflow_names(workspace: &Workspace) -> String {
    let names: Vec<&str> = workspace.workflows.iter().map(|workflow| workflow.slug.as_str()).collect();
    list_names(&names)
}
