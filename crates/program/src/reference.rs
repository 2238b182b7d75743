//! `${{…}}` references: the lexer and the dotted-path grammar.
//!
//! A reference names a session variable and an optional path into it:
//! `${{order_id}}`, `${{order.items.-1.sku}}`. It appears in tool-entry globs (a guard)
//! and in the text arguments a model writes. `$${{` writes the literal characters `${{`.
//! The first segment is a variable name (`^[a-z][a-z0-9_]*$`); later segments are keys or
//! canonical integers (`0`, `12`, `-1`; `-0` and `01` stay keys). The same path grammar,
//! without the braces, is used by a trigger's `session:` and `message:` paths.
//!
//! Both levels are lexed with `logos`; errors carry the byte range inside the text.

use std::fmt;
use std::ops::Range;

use logos::Logos;
use serde::{Deserialize, Serialize};

/// A dotted path over the session variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VarPath {
    pub root: String,
    pub segments: Vec<PathSegment>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathSegment {
    Key(String),
    /// An array index; negative counts from the end.
    Index(i64),
}

impl fmt::Display for VarPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.root)?;
        for segment in &self.segments {
            match segment {
                PathSegment::Key(key) => write!(formatter, ".{key}")?,
                PathSegment::Index(index) => write!(formatter, ".{index}")?,
            }
        }
        Ok(())
    }
}

/// One piece of a text that may hold references.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TemplatePart {
    Literal(String),
    Reference { path: VarPath, range: Range<usize> },
}

/// A text split into literal runs and references; escapes already unescaped.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Template {
    pub parts: Vec<TemplatePart>,
}

impl Template {
    pub fn references(&self) -> impl Iterator<Item = (&VarPath, &Range<usize>)> {
        self.parts.iter().filter_map(|part| match part {
            TemplatePart::Reference { path, range } => Some((path, range)),
            TemplatePart::Literal(_) => None,
        })
    }

    pub fn has_references(&self) -> bool {
        self.references().next().is_some()
    }

    /// The literal text when the template holds no reference.
    pub fn as_literal(&self) -> Option<String> {
        if self.has_references() {
            return None;
        }
        Some(
            self.parts
                .iter()
                .map(|part| match part {
                    TemplatePart::Literal(text) => text.as_str(),
                    TemplatePart::Reference { .. } => "",
                })
                .collect(),
        )
    }
}

/// What is wrong with a reference or a path, and where (byte range in the text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceError {
    pub range: Range<usize>,
    pub message: String,
}

#[derive(Logos, Debug, PartialEq, Eq, Clone, Copy)]
enum TextToken {
    #[token("$${{")]
    Escape,
    #[token("${{")]
    Open,
    #[regex(r"[^$]+")]
    Text,
    #[token("$")]
    Dollar,
}

#[derive(Logos, Debug, PartialEq, Eq, Clone, Copy)]
enum PathToken {
    #[token(".")]
    Dot,
    #[regex(r"-?[0-9]+")]
    Number,
    #[regex(r"[A-Za-z_][A-Za-z0-9_-]*")]
    Word,
    #[regex(r"[ \t\r\n]+")]
    Space,
}

/// Splits `text` into literal runs and references, checking every reference; the first
/// malformed one is the error.
pub fn parse_template(text: &str) -> Result<Template, ReferenceError> {
    let (template, mut errors) = scan_template(text);
    if errors.is_empty() { Ok(template) } else { Err(errors.swap_remove(0)) }
}

/// Like [`parse_template`], but reads on past a malformed reference (an unclosed `${{`
/// ends the text), so a checker can report every malformed reference and still judge the
/// well-formed ones. The template holds the well-formed references only.
pub fn scan_template(text: &str) -> (Template, Vec<ReferenceError>) {
    let mut parts: Vec<TemplatePart> = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let mut lexer = TextToken::lexer(text);
    while let Some(token) = lexer.next() {
        let range = lexer.span();
        match token {
            Ok(TextToken::Escape) => literal.push_str("${{"),
            Ok(TextToken::Text) | Ok(TextToken::Dollar) => literal.push_str(lexer.slice()),
            Ok(TextToken::Open) => {
                let rest = lexer.remainder();
                let Some(close) = rest.find("}}") else {
                    errors.push(ReferenceError {
                        range: range.start..text.len(),
                        message: "the reference is not closed with `}}`".to_string(),
                    });
                    break;
                };
                let inner_start = range.end;
                let inner = &rest[..close];
                let parsed = parse_path_at(inner, inner_start).map_err(|mut error| {
                    if error.range.is_empty() {
                        error.range = range.start..inner_start + close + 2;
                    }
                    error
                });
                lexer.bump(close + 2);
                match parsed {
                    Ok(path) => {
                        if !literal.is_empty() {
                            parts.push(TemplatePart::Literal(std::mem::take(&mut literal)));
                        }
                        parts.push(TemplatePart::Reference { path, range: range.start..inner_start + close + 2 });
                    }
                    Err(error) => errors.push(error),
                }
            }
            Err(()) => literal.push_str(lexer.slice()),
        }
    }
    if !literal.is_empty() {
        parts.push(TemplatePart::Literal(literal));
    }
    (Template { parts }, errors)
}

/// Parses a bare dotted path (`conversation_id`, `triggers.-1.conversationId`).
pub fn parse_var_path(text: &str) -> Result<VarPath, ReferenceError> {
    parse_path_at(text, 0)
}

fn parse_path_at(text: &str, base: usize) -> Result<VarPath, ReferenceError> {
    let error =
        |range: Range<usize>, message: String| ReferenceError { range: base + range.start..base + range.end, message };
    let mut segments: Vec<(String, Range<usize>, bool)> = Vec::new();
    let mut expect_segment = true;
    let mut finished = false;
    let mut lexer = PathToken::lexer(text);
    while let Some(token) = lexer.next() {
        let range = lexer.span();
        match token {
            Ok(PathToken::Space) => {
                if !segments.is_empty() && !expect_segment {
                    finished = true;
                }
            }
            Ok(PathToken::Dot) => {
                if expect_segment || finished {
                    return Err(error(range, "the path has an empty segment".to_string()));
                }
                expect_segment = true;
            }
            Ok(token @ (PathToken::Word | PathToken::Number)) => {
                if finished || !expect_segment {
                    return Err(error(range, "path segments must be separated by `.`".to_string()));
                }
                segments.push((lexer.slice().to_string(), range, token == PathToken::Number));
                expect_segment = false;
            }
            Err(()) => {
                return Err(error(range, format!("`{}` cannot appear in a variable path", lexer.slice())));
            }
        }
    }
    if segments.is_empty() {
        return Err(error(0..text.len(), "the reference names no variable".to_string()));
    }
    if expect_segment {
        return Err(error(text.len()..text.len(), "the path ends with an empty segment".to_string()));
    }
    let mut segments = segments.into_iter();
    let Some((root, root_range, _)) = segments.next() else {
        return Err(error(0..text.len(), "the reference names no variable".to_string()));
    };
    if !is_variable_name(&root) {
        return Err(error(
            root_range,
            format!(
                "`{root}` is not a variable name: names are lowercase letters, digits and `_`, starting with a letter"
            ),
        ));
    }
    Ok(VarPath {
        root,
        segments: segments
            .map(|(segment, _, numeric)| match canonical_index(&segment) {
                Some(index) if numeric => PathSegment::Index(index),
                _ => PathSegment::Key(segment),
            })
            .collect(),
    })
}

fn canonical_index(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = match digits.as_bytes() {
        [b'0'] => !text.starts_with('-'),
        [first, ..] => *first != b'0',
        [] => false,
    };
    if canonical { text.parse().ok() } else { None }
}

/// `^[a-z][a-z0-9_]*$`: the shape of every session variable name.
pub fn is_variable_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && bytes.all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(root: &str, segments: &[PathSegment]) -> VarPath {
        VarPath { root: root.to_string(), segments: segments.to_vec() }
    }

    #[test]
    fn splits_text_and_references() {
        let template = parse_template("reports/${{order_id}}/*.md").expect("valid");
        assert_eq!(
            template.parts,
            vec![
                TemplatePart::Literal("reports/".into()),
                TemplatePart::Reference { path: path("order_id", &[]), range: 8..21 },
                TemplatePart::Literal("/*.md".into()),
            ]
        );
    }

    #[test]
    fn dotted_paths_with_negative_indices() {
        let template = parse_template("${{ order.items.-1.sku }}").expect("valid");
        let (found, _) = template.references().next().expect("one reference");
        assert_eq!(
            found,
            &path("order", &[PathSegment::Key("items".into()), PathSegment::Index(-1), PathSegment::Key("sku".into())])
        );
        let odd = parse_var_path("a.-0.01").expect("valid");
        assert_eq!(odd.segments, vec![PathSegment::Key("-0".into()), PathSegment::Key("01".into())]);
    }

    #[test]
    fn escapes_are_literal() {
        let template = parse_template("$${{name}} costs $5").expect("valid");
        assert_eq!(template.as_literal().as_deref(), Some("${{name}} costs $5"));
    }

    #[test]
    fn malformed_references_are_errors() {
        for bad in
            ["${{}}", "${{ .id }}", "${{From-Email}}", "${{a..b}}", "${{a.}}", "x ${{name", "${{a b}}", "${{a.b!}}"]
        {
            assert!(parse_template(bad).is_err(), "{bad} should be refused");
        }
        let error = parse_template("to: ${{From-Email}}").expect_err("bad name");
        assert_eq!(error.range, 7..17);
    }

    #[test]
    fn variable_names() {
        assert!(is_variable_name("order_id"));
        assert!(!is_variable_name("Order"));
        assert!(!is_variable_name("_x"));
        assert!(!is_variable_name("a-b"));
        assert!(!is_variable_name(""));
    }
}
