//! What the server knows of its client: the open documents' URIs and versions, and the
//! diagnostics last published, around the language layer's [`Workspace`].
//!
//! The one thing to know: the workspace is re-checked before any request is answered (see
//! [`archmax_ide::workspace`]), and a re-check publishes only the files whose diagnostics
//! changed, an empty list for a file that has none any more.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use archmax_ide::{Unplaced, Workspace};
use lsp_types::{Diagnostic, PublishDiagnosticsParams, Uri};

use super::convert;

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

pub struct Session {
    workspace: Workspace,
    /// Open documents by root-relative path.
    documents: BTreeMap<String, Document>,
    published: HashMap<String, Vec<Diagnostic>>,
}

impl Session {
    pub fn new(root: Option<PathBuf>) -> Session {
        Session { workspace: Workspace::new(root), documents: BTreeMap::new(), published: HashMap::new() }
    }

    /// The language layer's view, for answering requests.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Why the workspace could not be loaded, if it could not.
    pub fn problem(&self) -> Option<&String> {
        self.workspace.problem.as_ref()
    }

    /// The root-relative path of a document, choosing the workspace from the first
    /// document when the client named none.
    pub fn relative(&mut self, uri: &Uri) -> Result<String, Outside> {
        let path = file_path(uri)?;
        self.workspace.place(&path).map_err(|unplaced| match unplaced {
            Unplaced::NoWorkspace => Outside::NoWorkspace(uri.as_str().to_string()),
            Unplaced::BeyondRoot(root) => Outside::BeyondRoot(uri.as_str().to_string(), root),
            Unplaced::Unknown(path) => Outside::Unknown(path),
        })
    }

    pub fn open(&mut self, uri: Uri, version: i32, text: String) -> Result<String, Outside> {
        let path = self.relative(&uri)?;
        self.workspace.open(&path, text);
        self.documents.insert(path.clone(), Document { uri, version });
        Ok(path)
    }

    /// The open text of a document, for edits.
    pub fn text_mut(&mut self, path: &str) -> Option<&mut String> {
        self.workspace.text_mut(path)
    }

    pub fn set_version(&mut self, path: &str, version: i32) {
        if let Some(document) = self.documents.get_mut(path) {
            document.version = version;
        }
    }

    pub fn close(&mut self, path: &str) {
        self.workspace.close(path);
        self.documents.remove(path);
    }

    /// Marks the workspace for a re-check (a save: the disk changed).
    pub fn touch(&mut self) {
        self.workspace.touch();
    }

    /// Re-checks the workspace when anything changed; returns the files to publish.
    pub fn check(&mut self) -> Vec<PublishDiagnosticsParams> {
        if !self.workspace.check() {
            return Vec::new();
        }
        let findings = convert::diagnostics(self.workspace.all_findings(), &|name| self.uri_of(name));
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

    /// What was last published for a file, to publish again on open.
    pub fn published(&self, path: &str) -> Option<PublishDiagnosticsParams> {
        Some(PublishDiagnosticsParams {
            uri: self.uri_of(path)?,
            diagnostics: self.published.get(path).cloned().unwrap_or_default(),
            version: self.version_of(path),
        })
    }

    /// The text of a document: the open one, or the analysed disk copy.
    pub fn text(&self, path: &str) -> Result<&str, Unplaced> {
        self.workspace.text(path)
    }

    /// The URI of a root-relative path: the client's own for open documents.
    pub fn uri_of(&self, path: &str) -> Option<Uri> {
        if let Some(document) = self.documents.get(path) {
            return Some(document.uri.clone());
        }
        let root = self.workspace.root()?;
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
