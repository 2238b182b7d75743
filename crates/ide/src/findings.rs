//! The findings of an analysis as editor diagnostics, grouped by file.
//!
//! The one thing to know: these are the findings `archmax validate` reports (the same
//! report of every workflow, each distinct finding once), with code, severity, message,
//! the help as a `help:` paragraph, the primary label and the secondary labels as related
//! places. A finding without a span is put at the start of its workflow's `workflow.yaml`.

use std::collections::{HashMap, HashSet};

use archmax_compiler::diagnostic::{Diagnostic as Finding, Severity};
use archmax_compiler::source::{FileId, Span};
use archmax_compiler::{Analysis, Code};
use serde_json::{Value, json};

use crate::text::{LineIndex, Range};

/// One finding placed in its file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub range: Range,
    pub severity: Severity,
    pub code: Code,
    /// The message, then the help as a `help:` paragraph.
    pub message: String,
    /// The primary label (at `range`, in the same file), then the secondary labels.
    pub related: Vec<Related>,
    /// The finding's key path and its code's name, when it has a path.
    pub data: Option<Value>,
}

/// A labelled place a finding points at, in a root-relative file.
#[derive(Clone, Debug, PartialEq)]
pub struct Related {
    pub path: String,
    pub range: Range,
    pub message: String,
}

/// Every file's diagnostics, by root-relative path; files without findings are absent.
pub fn by_file(analysis: &Analysis) -> HashMap<String, Vec<Diagnostic>> {
    let mut files: HashMap<String, Vec<Diagnostic>> = HashMap::new();
    let Ok(report) = analysis.report(&[]) else {
        return files;
    };
    let sources = analysis.sources();
    let mut indexes: HashMap<FileId, LineIndex<'_>> = HashMap::new();
    let mut range_of = |span: Span| {
        indexes.entry(span.file).or_insert_with(|| LineIndex::new(sources.text(span.file))).span_range(span)
    };
    let mut seen = HashSet::new();
    for workflow in &report.workflows {
        let spec = analysis.workspace.workflow(&workflow.slug).and_then(|source| source.spec);
        for finding in &workflow.diagnostics {
            let Some(file) = finding.span.map(|span| span.file).or(spec) else {
                continue;
            };
            if !seen.insert((file, finding.code, finding.span, finding.message.clone())) {
                continue;
            }
            let name = sources.file(file).name.clone();
            let range = finding.span.map(&mut range_of).unwrap_or_default();
            let mut related = Vec::new();
            if let Some(label) = &finding.label {
                related.push(Related { path: name.clone(), range, message: label.clone() });
            }
            for label in &finding.labels {
                let path = sources.file(label.span.file).name.clone();
                related.push(Related { path, range: range_of(label.span), message: label.message.clone() });
            }
            files.entry(name).or_default().push(diagnostic(finding, range, related));
        }
    }
    files
}

fn diagnostic(finding: &Finding, range: Range, related: Vec<Related>) -> Diagnostic {
    let mut message = finding.message.clone();
    if let Some(help) = &finding.help {
        message.push_str("\n\nhelp: ");
        message.push_str(help);
    }
    Diagnostic {
        range,
        severity: finding.severity,
        code: finding.code,
        message,
        related,
        data: (!finding.path.is_empty()).then(|| json!({ "path": finding.path, "name": finding.code.info().name })),
    }
}
