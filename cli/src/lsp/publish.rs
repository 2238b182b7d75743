//! The findings of an analysis as LSP diagnostics, grouped by file.
//!
//! The one thing to know: these are the findings `archmax validate` reports (the same
//! report of every workflow, each distinct finding once), with code, severity, message,
//! the help as a `help:` paragraph, the primary label and the secondary labels as related
//! information. A finding without a span is put at the start of its workflow's
//! `workflow.yaml`.

use std::collections::HashMap;

use archmax_compiler::Analysis;
use archmax_compiler::diagnostic::{Diagnostic as Finding, Severity};
use archmax_compiler::source::{FileId, Span};
use lsp_types::{Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString, Range, Uri};
use serde_json::json;

use super::text::LineIndex;

/// Every file's diagnostics, by root-relative path; files without findings are absent.
pub fn convert(analysis: &Analysis, uri_of: &dyn Fn(&str) -> Option<Uri>) -> HashMap<String, Vec<Diagnostic>> {
    let mut files: HashMap<String, Vec<Diagnostic>> = HashMap::new();
    let Ok(report) = analysis.report(&[]) else {
        return files;
    };
    let sources = analysis.sources();
    let mut indexes: HashMap<FileId, LineIndex<'_>> = HashMap::new();
    let mut range_of = |span: Span| {
        indexes.entry(span.file).or_insert_with(|| LineIndex::new(sources.text(span.file))).span_range(span)
    };
    let mut seen = std::collections::HashSet::new();
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
            let related = related(finding, range, &name, &mut range_of, &|id| uri_of(&sources.file(id).name), uri_of);
            files.entry(name).or_default().push(diagnostic(finding, range, related));
        }
    }
    files
}

fn diagnostic(finding: &Finding, range: Range, related: Vec<DiagnosticRelatedInformation>) -> Diagnostic {
    let mut message = finding.message.clone();
    if let Some(help) = &finding.help {
        message.push_str("\n\nhelp: ");
        message.push_str(help);
    }
    Diagnostic {
        range,
        severity: Some(match finding.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(finding.code.as_str().to_string())),
        code_description: None,
        source: Some("archmax".to_string()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: (!finding.path.is_empty()).then(|| json!({ "path": finding.path, "name": finding.code.info().name })),
    }
}

fn related(
    finding: &Finding,
    range: Range,
    name: &str,
    range_of: &mut dyn FnMut(Span) -> Range,
    uri_of_file: &dyn Fn(FileId) -> Option<Uri>,
    uri_of: &dyn Fn(&str) -> Option<Uri>,
) -> Vec<DiagnosticRelatedInformation> {
    let mut related = Vec::new();
    if let (Some(label), Some(uri)) = (&finding.label, uri_of(name)) {
        related.push(DiagnosticRelatedInformation { location: Location { uri, range }, message: label.clone() });
    }
    for label in &finding.labels {
        if let Some(uri) = uri_of_file(label.span.file) {
            let location = Location { uri, range: range_of(label.span) };
            related.push(DiagnosticRelatedInformation { location, message: label.message.clone() });
        }
    }
    related
}
