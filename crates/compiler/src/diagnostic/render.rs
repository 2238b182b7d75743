//! Renderers: one [`Report`] in, text out. Human output goes through miette's graphical
//! handler (colour is the caller's choice, so a pipe or `NO_COLOR` gets plain text);
//! `json` is one document on stdout; `sarif` is SARIF 2.1.0 for code scanning; `github`
//! is workflow annotation commands. All four are deterministic for a given report.
//!
//! [`validation`] is everything `archmax validate` prints for a report, stream by stream,
//! with its exit code: the command writes it out as it is, and the golden harness
//! compares it with the recordings without starting a process.

use std::fmt;

use std::sync::Arc;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents, NamedSource, SourceCode,
    SourceSpan, SpanContents,
};
use serde_json::{Value, json};

use super::{Code, Diagnostic, Severity};
use crate::analysis::Report;
use crate::source::{SourceMap, Span};

/// Where a diagnostic starts and ends, 1-based.
struct Position {
    file: String,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
}

fn position(sources: &SourceMap, span: Option<Span>) -> Option<Position> {
    let span = span?;
    let file = sources.file(span.file);
    let start = file.line_column(span.start);
    let end = file.line_column(span.end);
    Some(Position {
        file: file.name.clone(),
        line: start.line,
        column: start.column,
        end_line: end.line,
        end_column: end.column,
    })
}

/// The lines of a file around a diagnostic's labels, so rendering costs what the excerpt
/// costs, not what the whole file does. Spans stay absolute.
struct Excerpt {
    text: Arc<str>,
    /// Byte range of the window.
    start: usize,
    end: usize,
    /// 0-based line number of `start`.
    first_line: usize,
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        if span.offset() < self.start || span.offset() + span.len() > self.end {
            return Err(MietteError::OutOfBounds);
        }
        let window = &self.text.as_bytes()[self.start..self.end];
        let local = SourceSpan::new((span.offset() - self.start).into(), span.len());
        let inner = window.read_span(&local, context_lines_before, context_lines_after)?;
        let absolute = SourceSpan::new((inner.span().offset() + self.start).into(), inner.span().len());
        Ok(Box::new(MietteSpanContents::new(
            inner.data(),
            absolute,
            inner.line() + self.first_line,
            inner.column(),
            inner.line_count() + self.first_line,
        )))
    }
}

/// Lines of context kept around the labels of one diagnostic.
const EXCERPT_MARGIN: usize = 3;

fn excerpt(file: &crate::source::SourceFile, spans: &[Span]) -> Excerpt {
    let first = spans.iter().map(|span| file.line_column(span.start).line).min().unwrap_or(1);
    let last = spans.iter().map(|span| file.line_column(span.end).line).max().unwrap_or(1);
    let first_line = first.saturating_sub(EXCERPT_MARGIN).max(1);
    Excerpt {
        text: Arc::clone(&file.text),
        start: file.line_start(first_line),
        end: file.line_start(last + EXCERPT_MARGIN + 1),
        first_line: first_line - 1,
    }
}

/// A view of one diagnostic that miette can render.
struct View {
    message: String,
    code: &'static str,
    severity: Severity,
    help: Option<String>,
    source: Option<NamedSource<Excerpt>>,
    labels: Vec<LabeledSpan>,
}

impl fmt::Debug for View {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl fmt::Display for View {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for View {}

impl miette::Diagnostic for View {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help.as_ref().map(|help| Box::new(help) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|source| source as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.source.is_none() || self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().cloned()))
    }
}

fn view(sources: &SourceMap, diagnostic: &Diagnostic) -> View {
    let mut message = diagnostic.message.clone();
    if !diagnostic.path.is_empty() {
        message.push_str(&format!(" [{}]", diagnostic.path));
    }
    let mut help = diagnostic.help.clone();
    let mut source = None;
    let mut labels = Vec::new();
    if let Some(span) = diagnostic.span {
        {
            let file = sources.file(span.file);
            if file.text.is_empty() {
                if !message.contains(&file.name) {
                    message.push_str(&format!(" ({})", file.name));
                }
            } else {
                let mut spans = vec![span];
                spans.extend(
                    diagnostic.labels.iter().filter(|label| label.span.file == span.file).map(|label| label.span),
                );
                source = Some(NamedSource::new(file.name.clone(), excerpt(file, &spans)));
                labels.push(LabeledSpan::new_primary_with_span(
                    diagnostic.label.clone(),
                    SourceSpan::new((span.start as usize).into(), span.len()),
                ));
            }
            for label in &diagnostic.labels {
                if label.span.file == span.file && source.is_some() {
                    labels.push(LabeledSpan::new_with_span(
                        Some(label.message.clone()),
                        SourceSpan::new((label.span.start as usize).into(), label.span.len()),
                    ));
                } else if let Some(at) = position(sources, Some(label.span)) {
                    let note = format!("{}: {}:{}:{}", label.message, at.file, at.line, at.column);
                    help = Some(match help {
                        Some(help) => format!("{help}\n{note}"),
                        None => note,
                    });
                }
            }
        }
    }
    View { message, code: diagnostic.code.as_str(), severity: diagnostic.severity, help, source, labels }
}

/// Human output for every distinct diagnostic of the report.
pub fn human(sources: &SourceMap, report: &Report, color: bool) -> String {
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    // Wrap only at spaces, never inside a word: help text quotes slugs and paths
    // (`review-refund`, `@archmax-ai/harness/…`) that must survive a copy and paste.
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_links(false)
        .with_width(100)
        .with_break_words(false)
        .with_word_separator(textwrap::WordSeparator::AsciiSpace)
        .with_word_splitter(textwrap::WordSplitter::NoHyphenation)
        .without_cause_chain();
    let mut out = String::new();
    for diagnostic in report.distinct() {
        let view = view(sources, diagnostic);
        if handler.render_report(&mut out, &view).is_err() {
            out.push_str(&format!("{}: {}\n", diagnostic.code.as_str(), diagnostic.message));
        }
        out.push('\n');
    }
    out
}

/// The formats `archmax validate` prints a report in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// miette's rendering on stderr, then the verdict line on stdout.
    Human,
    /// One JSON document on stdout.
    Json,
    /// One SARIF 2.1.0 document on stdout.
    Sarif,
    /// Annotation commands on stdout, then the verdict line on stderr.
    Github,
}

/// A standard stream of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What a validation prints, in the order it prints it, and the exit code it ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Printout {
    /// Each piece of text and the stream it goes to; the order matters on a terminal
    /// where both streams meet (the verdict line comes last).
    pub writes: Vec<(Stream, String)>,
    /// 0 when the report has no error (warnings allowed), 1 when it has any.
    pub exit_code: u8,
}

impl Printout {
    /// Everything written to `stream`, in order.
    pub fn text(&self, stream: Stream) -> String {
        self.writes.iter().filter(|(to, _)| *to == stream).map(|(_, text)| text.as_str()).collect()
    }
}

/// `report` as `archmax validate` prints it in `format`. `root_prefix` is the workspace
/// root as the user named it (SARIF and GitHub locations start with it); `color` is for
/// the human rendering only.
pub fn validation(sources: &SourceMap, report: &Report, format: Format, root_prefix: &str, color: bool) -> Printout {
    let verdict_line = format!("{}\n", verdict(report));
    let writes = match format {
        Format::Human => vec![(Stream::Stderr, human(sources, report, color)), (Stream::Stdout, verdict_line)],
        Format::Json => vec![(Stream::Stdout, json(sources, report))],
        Format::Sarif => vec![(Stream::Stdout, sarif(sources, report, root_prefix))],
        Format::Github => vec![(Stream::Stdout, github(sources, report, root_prefix)), (Stream::Stderr, verdict_line)],
    };
    Printout { writes, exit_code: if report.is_valid() { 0 } else { 1 } }
}

/// What `archmax validate` prints when it refuses before it has a report (the workspace
/// does not load, has no workflow, or the selection names an unknown one): the one line
/// on stderr, and in JSON still one document on stdout, `{"workflows": [], "error": …}`,
/// so a tool reading the output always gets a document to parse. Exit code 1.
pub fn refusal(message: &str, format: Format) -> Printout {
    let mut writes = vec![(Stream::Stderr, format!("error: {message}\n"))];
    if format == Format::Json {
        let document = json!({ "workflows": [], "error": message });
        let mut text = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_string());
        text.push('\n');
        writes.push((Stream::Stdout, text));
    }
    Printout { writes, exit_code: 1 }
}

/// The verdict line: `valid — 0 error(s), 2 warning(s)`.
pub fn verdict(report: &Report) -> String {
    format!(
        "{} — {} error(s), {} warning(s)",
        if report.is_valid() { "valid" } else { "invalid" },
        report.errors(),
        report.warnings()
    )
}

fn diagnostic_json(sources: &SourceMap, diagnostic: &Diagnostic) -> Value {
    let at = position(sources, diagnostic.span);
    json!({
        "code": diagnostic.code.as_str(),
        "severity": diagnostic.severity.as_str(),
        "message": diagnostic.message,
        "path": diagnostic.path,
        "file": at.as_ref().map(|at| at.file.clone()),
        "line": at.as_ref().map(|at| at.line),
        "column": at.as_ref().map(|at| at.column),
        "end_line": at.as_ref().map(|at| at.end_line),
        "end_column": at.as_ref().map(|at| at.end_column),
        "help": diagnostic.help,
    })
}

/// `{"workflows": [{"workflow", "valid", "diagnostics": [...]}]}`.
pub fn json(sources: &SourceMap, report: &Report) -> String {
    let workflows: Vec<Value> = report
        .workflows
        .iter()
        .map(|workflow| {
            json!({
                "workflow": workflow.slug,
                "valid": workflow.is_valid(),
                "diagnostics": workflow.diagnostics.iter().map(|diagnostic| diagnostic_json(sources, diagnostic)).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut text =
        serde_json::to_string_pretty(&json!({ "workflows": workflows })).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

/// Joins a display prefix (the root as the user gave it) and a root-relative file name.
fn display_path(prefix: &str, file: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() || prefix == "." {
        file.to_string()
    } else {
        format!("{}/{file}", prefix.trim_start_matches("./"))
    }
}

/// SARIF 2.1.0, one run, with a rule entry for every code that occurs.
pub fn sarif(sources: &SourceMap, report: &Report, root_prefix: &str) -> String {
    let diagnostics = report.distinct();
    let mut codes: Vec<Code> = diagnostics.iter().map(|diagnostic| diagnostic.code).collect();
    codes.sort();
    codes.dedup();
    let rules: Vec<Value> = codes
        .iter()
        .map(|code| {
            let info = code.info();
            json!({
                "id": info.code,
                "name": info.name,
                "shortDescription": { "text": info.title },
                "fullDescription": { "text": info.title },
                "help": { "text": info.explanation, "markdown": info.explanation },
                "defaultConfiguration": { "level": info.severity.as_str() },
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|diagnostic| {
            let mut text = diagnostic.message.clone();
            if let Some(help) = &diagnostic.help {
                text.push_str(&format!("\nhelp: {help}"));
            }
            let mut result = json!({
                "ruleId": diagnostic.code.as_str(),
                "ruleIndex": codes.iter().position(|code| *code == diagnostic.code).unwrap_or(0),
                "level": diagnostic.severity.as_str(),
                "message": { "text": text },
            });
            if let Some(at) = position(sources, diagnostic.span) {
                let mut location = json!({
                    "physicalLocation": {
                        "artifactLocation": { "uri": display_path(root_prefix, &at.file) },
                        "region": {
                            "startLine": at.line,
                            "startColumn": at.column,
                            "endLine": at.end_line,
                            "endColumn": at.end_column,
                        }
                    }
                });
                if !diagnostic.path.is_empty() {
                    location["logicalLocations"] = json!([{ "fullyQualifiedName": diagnostic.path, "kind": "member" }]);
                }
                result["locations"] = json!([location]);
            }
            result
        })
        .collect();
    let document = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "archmax",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_string());
    text.push('\n');
    text
}

fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands: `::error file=…,line=…::message`.
pub fn github(sources: &SourceMap, report: &Report, root_prefix: &str) -> String {
    let mut out = String::new();
    for diagnostic in report.distinct() {
        let command = match diagnostic.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut properties = Vec::new();
        if let Some(at) = position(sources, diagnostic.span) {
            properties.push(format!("file={}", escape_property(&display_path(root_prefix, &at.file))));
            properties.push(format!("line={}", at.line));
            properties.push(format!("col={}", at.column));
            properties.push(format!("endLine={}", at.end_line));
            properties.push(format!("endColumn={}", at.end_column));
        }
        properties.push(format!(
            "title={}",
            escape_property(&format!("{} {}", diagnostic.code.as_str(), diagnostic.code.info().name))
        ));
        let mut message = diagnostic.message.clone();
        if !diagnostic.path.is_empty() {
            message.push_str(&format!(" [{}]", diagnostic.path));
        }
        if let Some(help) = &diagnostic.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        out.push_str(&format!("::{command} {}::{}\n", properties.join(","), escape_data(&message)));
    }
    out
}
