//! What the editor session knows of the workflow language: the workspace root, the open
//! documents' texts, and the last analysis of the workspace with those texts in place.
//!
//! The one thing to know: every answer is computed from [`Workspace::analysis`], which the
//! caller brings up to date ([`Workspace::check`]) before answering a request, so spans
//! always index the texts the editor holds. A re-check analyses the whole workspace, as
//! `archmax validate` does (a workflow's checks read the sub-workflows it calls).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use archmax_compiler::Analysis;
use archmax_compiler::analyze_workspace;
use archmax_compiler::schema::ast::Workflow;
use archmax_compiler::source::FileId;
use archmax_compiler::workspace::{DiskFiles, load_from};

use crate::findings::{Diagnostic, by_file};
use crate::overlay::Overlay;

/// Why a file cannot be placed in the workspace.
#[derive(Debug, thiserror::Error)]
pub enum Unplaced {
    #[error("no directory above the file holds a `workflows/` directory")]
    NoWorkspace,
    #[error("the file lies outside the workspace root `{0}`")]
    BeyondRoot(String),
    #[error("`{0}` is neither open nor part of the workspace")]
    Unknown(String),
}

/// The workspace as an editor holds it. Paths are root-relative, `/`-separated.
#[derive(Default)]
pub struct Workspace {
    root: Option<PathBuf>,
    disk: Option<DiskFiles>,
    /// Open documents' texts by root-relative path.
    texts: BTreeMap<String, String>,
    analysis: Option<Analysis>,
    /// The workspace could not be loaded: why.
    pub problem: Option<String>,
    stale: bool,
    findings: HashMap<String, Vec<Diagnostic>>,
}

impl Workspace {
    /// A workspace at `root`, when it holds a `workflows/` directory; otherwise the first
    /// placed file chooses the root.
    pub fn new(root: Option<PathBuf>) -> Workspace {
        let mut workspace = Workspace::default();
        if let Some(root) = root.filter(|root| root.join("workflows").is_dir()) {
            workspace.set_root(root);
        }
        workspace
    }

    fn set_root(&mut self, root: PathBuf) {
        self.disk = DiskFiles::open(&root).ok();
        self.root = Some(root);
        self.stale = true;
    }

    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The root-relative path of an absolute file path, choosing the workspace (the
    /// nearest directory above holding `workflows/`) when none is chosen yet.
    pub fn place(&mut self, path: &Path) -> Result<String, Unplaced> {
        if self.root.is_none() {
            let root =
                path.ancestors().skip(1).find(|dir| dir.join("workflows").is_dir()).ok_or(Unplaced::NoWorkspace)?;
            self.set_root(root.to_path_buf());
        }
        let root = self.root.as_deref().unwrap_or(Path::new("/"));
        let beyond = || Unplaced::BeyondRoot(root.display().to_string());
        let rest = path.strip_prefix(root).map_err(|_| beyond())?;
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
                _ => return Err(beyond()),
            }
        }
        Ok(parts.join("/"))
    }

    /// Opens (or replaces) a document's text.
    pub fn open(&mut self, path: &str, text: String) {
        self.texts.insert(path.to_string(), text);
        self.stale = true;
    }

    /// The open text of a document, for edits.
    pub fn text_mut(&mut self, path: &str) -> Option<&mut String> {
        self.stale = true;
        self.texts.get_mut(path)
    }

    pub fn close(&mut self, path: &str) {
        self.texts.remove(path);
        self.stale = true;
    }

    /// Marks the workspace for a re-check (a save: the disk changed).
    pub fn touch(&mut self) {
        self.stale = true;
    }

    /// Re-checks the workspace when anything changed since the last check; false when
    /// nothing was re-checked (nothing changed, or no workspace is chosen yet).
    pub fn check(&mut self) -> bool {
        if !self.stale {
            return false;
        }
        self.stale = false;
        let (Some(root), Some(disk)) = (self.root.as_deref(), self.disk.as_ref()) else {
            return false;
        };
        let overlay = Overlay { disk, open: &self.texts };
        match load_from(&overlay, root) {
            Ok(workspace) => {
                self.problem = None;
                let analysis = analyze_workspace(workspace);
                self.findings = by_file(&analysis);
                self.analysis = Some(analysis);
            }
            Err(error) => {
                self.problem = Some(error.to_string());
                self.analysis = None;
                self.findings = HashMap::new();
            }
        }
        true
    }

    /// The findings of the last check, by root-relative path; files without findings are
    /// absent, and so is everything when the workspace could not be loaded.
    pub fn all_findings(&self) -> &HashMap<String, Vec<Diagnostic>> {
        &self.findings
    }

    /// The findings of the last check for a file.
    pub fn findings(&self, path: &str) -> &[Diagnostic] {
        self.findings.get(path).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn analysis(&self) -> Option<&Analysis> {
        self.analysis.as_ref()
    }

    /// The text of a document: the open one, or the analysed disk copy.
    pub fn text(&self, path: &str) -> Result<&str, Unplaced> {
        if let Some(text) = self.texts.get(path) {
            return Ok(text);
        }
        let file = self.file_id(path).ok_or_else(|| Unplaced::Unknown(path.to_string()))?;
        Ok(self.analysis.as_ref().map(|analysis| analysis.sources().text(file)).unwrap_or(""))
    }

    /// The analysed file at a root-relative path.
    pub fn file_id(&self, path: &str) -> Option<FileId> {
        self.analysis.as_ref()?.sources().files().find(|(_, file)| file.name == path).map(|(id, _)| id)
    }

    /// The parsed workflow whose `workflow.yaml` is at `path`.
    pub fn workflow(&self, path: &str) -> Option<&Workflow> {
        let file = self.file_id(path)?;
        self.analysis
            .as_ref()?
            .units
            .iter()
            .filter_map(|unit| unit.workflow.as_ref())
            .find(|workflow| workflow.file == file)
    }

    /// The parsed workflow a file belongs to (its spec, a script, a case).
    pub fn owning_workflow(&self, path: &str) -> Option<&Workflow> {
        let slug = path.strip_prefix("workflows/")?.split('/').next()?;
        self.analysis.as_ref()?.unit(slug)?.workflow.as_ref()
    }
}
