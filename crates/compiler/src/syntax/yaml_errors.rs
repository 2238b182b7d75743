//! What a YAML scan error is blamed on.
//!
//! The parser reports where it stopped, which is often lines below the mistake: an
//! unclosed `{` is noticed at the next key, a tab at the first token after it. The one
//! thing to know: this module moves the diagnostic to the cause when the cause can be
//! named for certain (the opening bracket of a flow collection still open when a later
//! line failed, the tab character itself), and keeps the parser's position otherwise.

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{FileId, Span};

use super::yaml::quoted;

/// A scan error as the loader saw it: offsets are into `text`, which starts at `base`
/// in its file.
pub struct ScanProblem<'t> {
    pub file: FileId,
    pub text: &'t str,
    pub base: usize,
    /// Where the parser stopped.
    pub stop: usize,
    /// The parser's own words.
    pub info: &'t str,
    /// The opening bracket of the innermost flow collection still open.
    pub open_flow: Option<usize>,
}

impl ScanProblem<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, self.base + start, self.base + end)
    }

    fn line_start(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].rfind('\n').map_or(0, |newline| newline + 1)
    }

    /// The diagnostic for this problem.
    pub fn diagnostic(&self) -> Diagnostic {
        self.tab()
            .or_else(|| self.unclosed_flow())
            .or_else(|| self.colon_in_flow_value())
            .unwrap_or_else(|| self.at_stop())
    }

    /// A tab in the indentation of the line the parser stopped on (or the one before).
    fn tab(&self) -> Option<Diagnostic> {
        if !self.info.contains("tab") {
            return None;
        }
        let line = self.line_start(self.stop);
        let previous = self.line_start(line.saturating_sub(1));
        let tab = [line, previous].into_iter().find_map(|start| {
            let rest = &self.text[start..];
            let indentation = rest.find(|c: char| c != ' ' && c != '\t').unwrap_or(rest.len());
            self.text[start..start + indentation].find('\t').map(|at| start + at)
        })?;
        Some(
            Diagnostic::at(
                Code::YamlSyntax,
                self.span(tab, tab + 1),
                "invalid YAML: a tab character indents this line",
            )
            .with_label("a tab")
            .with_help("YAML indents with spaces only: replace the tab with spaces, lined up with the keys around it"),
        )
    }

    /// A `{` or `[` opened on an earlier line than the failure and never closed.
    fn unclosed_flow(&self) -> Option<Diagnostic> {
        let open = self.open_flow?;
        let bracket = char::from(*self.text.as_bytes().get(open)?);
        if self.line_start(open) == self.line_start(self.stop) {
            return None;
        }
        let (what, close) = if bracket == '{' { ("flow mapping", '}') } else { ("flow sequence", ']') };
        Some(
            Diagnostic::at(
                Code::YamlSyntax,
                self.span(open, open + 1),
                format!("invalid YAML: this `{bracket}` opens a {what} that is never closed"),
            )
            .with_label(format!("opened here, no `{close}` follows"))
            .with_secondary(self.span(self.stop, self.stop), "the parser gave up here")
            .with_help(format!(
                "close it with `{close}` where its entries end, or write the entries as an indented block without brackets"
            )),
        )
    }

    /// A second `: ` in one entry of a `{ … }` opened on the line the parser stopped on, as
    /// in `{ description: Grant it: they have days left. }`: a plain value ends at `: `,
    /// so the value most likely needs quotes (or a `,` is missing before a new key).
    fn colon_in_flow_value(&self) -> Option<Diagnostic> {
        let open = self.open_flow?;
        let line = self.line_start(self.stop);
        if self.text.as_bytes().get(open) != Some(&b'{') || self.line_start(open) != line {
            return None;
        }
        let after = self.text.get(self.stop..)?;
        if !after.starts_with(':') || !after[1..].starts_with([' ', '\t', '\n', '\r']) {
            return None;
        }
        let entry_start = self.text[open..self.stop].rfind([',', '{']).map(|at| open + at + 1)?;
        let entry = &self.text[entry_start..self.stop];
        let colon = entry.find(": ")?;
        let key = entry[..colon].trim();
        let value_start = entry_start + colon + 1;
        let value_end = after.find([',', '}', '\n']).map_or(self.text.len(), |at| self.stop + at);
        let value = self.text[value_start..value_end].trim();
        if key.is_empty() || value.is_empty() || value.starts_with(['"', '\'', '[', '{']) {
            return None;
        }
        Some(
            Diagnostic::at(Code::YamlSyntax, self.span(self.stop, self.stop + 1), format!("invalid YAML: {}", self.info))
                .with_label("a second `: ` in one entry")
                .with_help(format!(
                    "inside `{{ … }}` a plain value ends at `: `: quote the value, `{key}: {}` (or, if a new key starts here, add the `,` before it)",
                    quoted(value)
                )),
        )
    }

    /// Anything else, at the parser's position, with a hint chosen by its words.
    fn at_stop(&self) -> Diagnostic {
        let info = self.info;
        let help = if info.contains("quoted scalar") || info.contains("unexpected end of stream") {
            "a quoted string may be missing its closing quote: check the quotes on the lines above this point"
        } else if info.contains("indentation") || info.contains("mapping values are not allowed") {
            "check the indentation here: keys of one mapping line up, and `key: value` needs a space after the colon"
        } else if info.contains("flow") {
            "a `[` or `{` may be missing its closing bracket, or a `,` may be out of place"
        } else if info.contains("tab") {
            "YAML indents with spaces; replace the tab characters"
        } else {
            "the file must be YAML 1.2: check the quoting and indentation around this point"
        };
        Diagnostic::at(Code::YamlSyntax, self.span(self.stop, self.stop), format!("invalid YAML: {info}"))
            .with_label("the parser stopped here")
            .with_help(help)
    }
}
