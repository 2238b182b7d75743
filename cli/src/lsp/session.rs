//! What the server knows: the workspace root, the open documents, and the last analysis
//! of the workspace with their texts in place.
//!
//! The one thing to know: every answer is computed from [`Session::analysis`], which is
//! brought up to date (re-checked) before any request is answered, so spans always index
//! the texts the editor holds. A re-check analyses the whole workspace, as `archmax
//! validate` does (a workflow's checks read the sub-workflows it calls), and publishes only
//! the files whose findings changed, an empty list for a file that has none any more.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use archmax_compiler::Analysis;
use archmax_compiler::analyze_workspace;
use archmax_compiler::schema::ast::Workflow;
use archmax_compiler::source::FileId;
use archmax_compiler::workspace::{DiskFiles, load_from};
use lsp_types::{Diagnostic, PublishDiagnosticsParams, Uri};

use super::overlay::Overlay;
use super::publish::convert;

/// Why a document cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum Outside {
    #[error("`{0}` is not a file URI")]
    NotAFile(String),
    #[error("`{0}` lies outside the workspace (no `workflows/` directory above it)")]
    NoWorkspace(String),
    #[error("`{0}` lies outside the workspace root `{1}`")]
    BeyondRoot(String, String),
    #[error("`{0}` is neither open nor part of the workspace")]
    Unknown(String),
}

/// An open document.
pub struct Document {
    pub uri: Uri,
    pub version: i32,
}

#[derive(Default)]
pub struct Session {
    root: Option<PathBuf>,
    disk: Option<DiskFiles>,
    /// Open documents' texts by root-relative path.
    texts: BTreeMap<String, String>,
    documents: BTreeMap<String, Document>,
    analysis: Option<Analysis>,
    /// The workspace could not be loaded: why.
    pub problem: Option<String>,
    stale: bool,
    published: HashMap<String, Vec<Diagnostic>>,
}

impl Session {
    pub fn new(root: Option<PathBuf>) -> Session {
        let mut session = Session::default();
        if let Some(root) = root.filter(|root| root.join("workflows").is_dir()) {
            session.set_root(root);
        }
        session
    }

    fn set_root(&mut self, root: PathBuf) {
        self.disk = DiskFiles::open(&root).ok();
        self.root = Some(root);
        self.stale = true;
    }

    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The root-relative path of a document, choosing the workspace from the first
    /// document when the client named none.
    pub fn relative(&mut self, uri: &Uri) -> Result<String, Outside> {
        let path = file_path(uri)?;
        if self.root.is_none() {
            let root = path
                .ancestors()
                .skip(1)
                .find(|dir| dir.join("workflows").is_dir())
                .ok_or_else(|| Outside::NoWorkspace(uri.as_str().to_string()))?;
            self.set_root(root.to_path_buf());
        }
        let root = self.root.as_deref().unwrap_or(Path::new("/"));
        let rest = path
            .strip_prefix(root)
            .map_err(|_| Outside::BeyondRoot(uri.as_str().to_string(), root.display().to_string()))?;
        let mut parts = Vec::new();
        for component in rest.components() {
            match component {
                Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
                _ => return Err(Outside::BeyondRoot(uri.as_str().to_string(), root.display().to_string())),
            }
        }
        Ok(parts.join("/"))
    }

    pub fn open(&mut self, uri: Uri, version: i32, text: String) -> Result<String, Outside> {
        let path = self.relative(&uri)?;
        self.texts.insert(path.clone(), text);
        self.documents.insert(path.clone(), Document { uri, version });
        self.stale = true;
        Ok(path)
    }

    /// The open text of a document, for edits.
    pub fn text_mut(&mut self, path: &str) -> Option<&mut String> {
        self.stale = true;
        self.texts.get_mut(path)
    }

    pub fn set_version(&mut self, path: &str, version: i32) {
        if let Some(document) = self.documents.get_mut(path) {
            document.version = version;
        }
    }

    pub fn close(&mut self, path: &str) {
        self.texts.remove(path);
        self.documents.remove(path);
        self.stale = true;
    }

    /// Marks the workspace for a re-check (a save: the disk changed).
    pub fn touch(&mut self) {
        self.stale = true;
    }

    /// Re-checks the workspace when anything changed; returns the files to publish.
    pub fn check(&mut self) -> Vec<PublishDiagnosticsParams> {
        if !self.stale {
            return Vec::new();
        }
        self.stale = false;
        let (Some(root), Some(disk)) = (self.root.as_deref(), self.disk.as_ref()) else {
            return Vec::new();
        };
        let overlay = Overlay { disk, open: &self.texts };
        let findings = match load_from(&overlay, root) {
            Ok(workspace) => {
                self.problem = None;
                let analysis = analyze_workspace(workspace);
                let findings = convert(&analysis, &|name| self.uri_of(name));
                self.analysis = Some(analysis);
                findings
            }
            Err(error) => {
                self.problem = Some(error.to_string());
                self.analysis = None;
                HashMap::new()
            }
        };
        let mut changed: Vec<String> =
            self.published.keys().filter(|name| !findings.contains_key(*name)).cloned().collect();
        changed.extend(
            findings
                .iter()
                .filter(|(name, list)| self.published.get(*name) != Some(list))
                .map(|(name, _)| name.clone()),
        );
        changed.sort();
        let publish = changed
            .into_iter()
            .filter_map(|name| {
                let diagnostics = findings.get(&name).cloned().unwrap_or_default();
                Some(PublishDiagnosticsParams {
                    uri: self.uri_of(&name)?,
                    diagnostics,
                    version: self.version_of(&name),
                })
            })
            .collect();
        self.published = findings;
        publish
    }

    /// The findings last published for a file.
    pub fn findings(&self, path: &str) -> &[Diagnostic] {
        self.published.get(path).map(Vec::as_slice).unwrap_or(&[])
    }

    /// What was last published for a file, to publish again on open.
    pub fn published(&self, path: &str) -> Option<PublishDiagnosticsParams> {
        Some(PublishDiagnosticsParams {
            uri: self.uri_of(path)?,
            diagnostics: self.published.get(path).cloned().unwrap_or_default(),
            version: self.version_of(path),
        })
    }

    pub fn analysis(&self) -> Option<&Analysis> {
        self.analysis.as_ref()
    }

    /// The text of a document: the open one, or the analysed disk copy.
    pub fn text(&self, path: &str) -> Result<&str, Outside> {
        if let Some(text) = self.texts.get(path) {
            return Ok(text);
        }
        let file = self.file_id(path).ok_or_else(|| Outside::Unknown(path.to_string()))?;
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

    /// The URI of a root-relative path: the client's own for open documents.
    pub fn uri_of(&self, path: &str) -> Option<Uri> {
        if let Some(document) = self.documents.get(path) {
            return Some(document.uri.clone());
        }
        let root = self.root.as_deref()?;
        file_uri(&root.join(path))
    }

    fn version_of(&self, path: &str) -> Option<i32> {
        self.documents.get(path).map(|document| document.version)
    }
}

/// The file system path a `file:` URI names.
pub fn file_path(uri: &Uri) -> Result<PathBuf, Outside> {
    url::Url::parse(uri.as_str())
        .ok()
        .filter(|url| url.scheme() == "file")
        .and_then(|url| url.to_file_path().ok())
        .ok_or_else(|| Outside::NotAFile(uri.as_str().to_string()))
}

/// The `file:` URI of an absolute path.
pub fn file_uri(path: &Path) -> Option<Uri> {
    let url = url::Url::from_file_path(path).ok()?;
    Uri::from_str(url.as_str()).ok()
}
