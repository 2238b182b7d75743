//! The protocol's types from the language layer's (`archmax-ide`) and back: positions and
//! ranges, diagnostics, completions, hovers, locations, symbols and rename edits.
//!
//! The one thing to know: the language layer names files by root-relative path; a path
//! becomes a URI here through the session ([`Session::uri_of`]: the client's own URI for an
//! open document), and a place that has no URI is left out, as the protocol cannot name it.

use std::collections::HashMap;

use archmax_compiler::diagnostic::Severity;
use archmax_ide as ide;
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionList, CompletionTextEdit, Diagnostic, DiagnosticRelatedInformation,
    DiagnosticSeverity, DocumentSymbol, Documentation, Hover, HoverContents, Location, MarkupContent, MarkupKind,
    NumberOrString, Position, Range, SymbolKind, TextEdit, Uri, WorkspaceEdit,
};

use super::session::{Session, file_uri};

pub fn position(position: ide::Position) -> Position {
    Position { line: position.line, character: position.character }
}

pub fn ide_position(position: Position) -> ide::Position {
    ide::Position { line: position.line, character: position.character }
}

pub fn range(range: ide::Range) -> Range {
    Range { start: position(range.start), end: position(range.end) }
}

/// A finding as a protocol diagnostic; its related places without a URI are left out.
pub fn diagnostic(finding: &ide::Diagnostic, uri_of: &dyn Fn(&str) -> Option<Uri>) -> Diagnostic {
    let related: Vec<DiagnosticRelatedInformation> = finding
        .related
        .iter()
        .filter_map(|place| {
            let location = Location { uri: uri_of(&place.path)?, range: range(place.range) };
            Some(DiagnosticRelatedInformation { location, message: place.message.clone() })
        })
        .collect();
    Diagnostic {
        range: range(finding.range),
        severity: Some(match finding.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(finding.code.as_str().to_string())),
        code_description: None,
        source: Some("archmax".to_string()),
        message: finding.message.clone(),
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: finding.data.clone(),
    }
}

/// Every file's diagnostics, by root-relative path.
pub fn diagnostics(
    findings: &HashMap<String, Vec<ide::Diagnostic>>,
    uri_of: &dyn Fn(&str) -> Option<Uri>,
) -> HashMap<String, Vec<Diagnostic>> {
    findings
        .iter()
        .map(|(path, list)| (path.clone(), list.iter().map(|finding| diagnostic(finding, uri_of)).collect()))
        .collect()
}

pub fn completions(items: Vec<ide::CompletionItem>) -> CompletionList {
    let items = items
        .into_iter()
        .map(|item| CompletionItem {
            kind: Some(match item.kind {
                ide::CompletionKind::Variable => CompletionItemKind::VARIABLE,
                ide::CompletionKind::EnumMember => CompletionItemKind::ENUM_MEMBER,
                ide::CompletionKind::Property => CompletionItemKind::PROPERTY,
                ide::CompletionKind::Function => CompletionItemKind::FUNCTION,
                ide::CompletionKind::Module => CompletionItemKind::MODULE,
                ide::CompletionKind::Folder => CompletionItemKind::FOLDER,
            }),
            documentation: item.documentation.map(Documentation::String),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit {
                range: range(item.range),
                new_text: item.label.clone(),
            })),
            label: item.label,
            ..CompletionItem::default()
        })
        .collect();
    CompletionList { is_incomplete: false, items }
}

pub fn hover(hover: ide::Hover) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: hover.markdown }),
        range: Some(range(hover.range)),
    }
}

pub fn location(session: &Session, location: ide::Location) -> Option<Location> {
    let uri = match &location.place {
        ide::Place::Document(path) => session.uri_of(path)?,
        ide::Place::Disk(path) => file_uri(path)?,
    };
    Some(Location { uri, range: range(location.range) })
}

#[allow(deprecated)]
pub fn symbol(symbol: ide::Symbol) -> DocumentSymbol {
    let children: Vec<DocumentSymbol> = symbol.children.into_iter().map(self::symbol).collect();
    DocumentSymbol {
        name: symbol.name,
        detail: symbol.detail,
        kind: match symbol.kind {
            ide::SymbolKind::State => SymbolKind::CLASS,
            ide::SymbolKind::Trigger => SymbolKind::EVENT,
        },
        tags: None,
        deprecated: None,
        range: range(symbol.range),
        selection_range: range(symbol.selection_range),
        children: (!children.is_empty()).then_some(children),
    }
}

/// A rename's edits by URI; the renamed workflow's own file must have one.
// `WorkspaceEdit::changes` is keyed by `Uri`, whose cached parse is the "interior
// mutability" clippy sees; nothing here mutates a key.
#[allow(clippy::mutable_key_type)]
pub fn rename(
    session: &Session,
    files: Vec<(String, Vec<ide::TextEdit>)>,
) -> Result<WorkspaceEdit, ide::RenameRefused> {
    let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    for (number, (path, edits)) in files.into_iter().enumerate() {
        let Some(uri) = session.uri_of(&path) else {
            if number == 0 {
                return Err(ide::RenameRefused::NotAWorkflow);
            }
            continue;
        };
        let edits = edits.into_iter().map(|edit| TextEdit { range: range(edit.range), new_text: edit.new_text });
        changes.entry(uri).or_default().extend(edits);
    }
    Ok(WorkspaceEdit { changes: Some(changes), ..WorkspaceEdit::default() })
}
