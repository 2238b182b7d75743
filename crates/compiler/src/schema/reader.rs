//! The strict-mapping reader every schema module uses.
//!
//! A [`Reader`] walks YAML nodes for one file and collects diagnostics: a mapping read
//! through [`Reader::fields`] reports each unknown key with a "did you mean" and each
//! removed key with what replaced it, and yields only the known ones. Typed accessors
//! report a wrong type once and return `None`, so callers simply skip what is invalid.
//! A key that belongs to the mapping one level up is hinted as indentation
//! ([`super::placement`]).

use crate::diagnostic::{Code, Diagnostic, Scope, SpecPath, did_you_mean, list_names};
use crate::source::{Span, Spanned};
use crate::syntax::yaml::{Entry, Node, NodeKind, Scalar, ScalarKind, ScalarValue, quoted};

use super::placement::Mappings;

/// The keys a mapping may hold.
pub struct Fields {
    pub known: &'static [&'static str],
    /// Keys contract 3 removed, each with what to write instead.
    pub removed: &'static [(&'static str, &'static str)],
    /// What the mapping is, for messages (`a transition`).
    pub what: &'static str,
}

/// A known key and its value, in document order.
pub struct Field<'n> {
    pub key: &'n str,
    pub key_span: Span,
    pub value: &'n Node,
}

/// Help for a key that belongs somewhere else, keyed by the mapping it was found in.
fn misplaced(what: &str, key: &str) -> Option<&'static str> {
    Some(match (what, key) {
        ("`tests.judge`", "temperature" | "maxTokens") => {
            "sampling options go under `modelOptions`: `judge: { modelOptions: { temperature: 0 } }`"
        }
        ("the root `tools` block", "allow" | "forbid") => {
            "at the root write `allow_always` and `forbid_always`; `allow` and `forbid` belong to a state's `tools`"
        }
        ("a state's `tools` block" | "a state's grant block", "allow_always" | "forbid_always") => {
            "`allow_always` and `forbid_always` are root keys; on a state write `allow` and `forbid`"
        }
        (
            "a workflow",
            "model" | "timeoutMs" | "memoryLimitBytes" | "maxPtcCalls" | "maxResultChars" | "prompt_cache",
        ) => "this is a setting: put it under `settings:`",
        ("a workflow", "maxConcurrency" | "caseTimeoutMs" | "judge") => "case-suite settings go under `tests:`",
        ("a workflow", "allow_always" | "forbid_always") => {
            "grants sit in a block: `tools: { allow_always: [...] }`, or under `skills:` or `mounts:`"
        }
        ("a state", "description") => {
            "a state has no description: `summary` labels it for people, `instructions` direct the agent, and each transition's `description` says when to take it"
        }
        ("a state", "name") => "the key under `states` is the state's slug; write a label for people as `title`",
        ("a state", "timeoutMs" | "maxParks") => "put it under `budget:`",
        ("a transition", "target" | "state" | "next" | "goto") => "name the target state in `to`",
        ("a transition", "condition" | "when" | "label" | "reason") => "say when to take the edge in `description`",
        _ => return None,
    })
}

pub struct Reader<'s> {
    pub source: &'s str,
    pub scope: Scope,
    pub diagnostics: Vec<Diagnostic>,
    /// The mappings read through [`Reader::fields`], for the misplaced-key hint.
    mappings: Mappings,
}

impl<'s> Reader<'s> {
    pub fn new(source: &'s str, scope: Scope) -> Reader<'s> {
        Reader { source, scope, diagnostics: Vec::new(), mappings: Mappings::default() }
    }

    pub fn report(&mut self, diagnostic: Diagnostic, path: &SpecPath<'_>) {
        self.diagnostics.push(diagnostic.with_path(path.render()).with_scope(self.scope.clone()));
    }

    pub fn wrong_type(&mut self, node: &Node, path: &SpecPath<'_>, expected: &str) {
        let message = if path.render().is_empty() {
            format!("expected {expected}, found {}", node.type_name())
        } else {
            format!("`{path}` must be {expected}, not {}", node.type_name())
        };
        let mut diagnostic =
            Diagnostic::at(Code::WrongType, node.span, message).with_label(format!("expected {expected}"));
        // In a mapping of free names (trigger ids, state slugs) a misplaced key reads as a
        // name with a value of the wrong kind.
        if let (Some(key), Some(mapping)) = (path.last_key(), path.parent())
            && !self.mappings.is_recorded(mapping)
            && let Some(hint) = self.mappings.misindented(mapping, key)
        {
            diagnostic = diagnostic.with_help(hint);
        }
        self.report(diagnostic, path);
    }

    /// The entries of a mapping; `null` reads as an empty mapping when `null_ok`.
    pub fn mapping<'n>(&mut self, node: &'n Node, path: &SpecPath<'_>, null_ok: bool) -> Option<&'n [Entry]> {
        match &node.kind {
            NodeKind::Mapping(entries) => Some(entries),
            _ if null_ok && node.is_null() => Some(&[]),
            _ => {
                self.wrong_type(node, path, "a mapping");
                None
            }
        }
    }

    /// The known fields of a mapping, reporting every other key.
    pub fn fields<'n>(
        &mut self,
        node: &'n Node,
        path: &SpecPath<'_>,
        fields: &Fields,
        null_ok: bool,
    ) -> Option<Vec<Field<'n>>> {
        let entries = self.mapping(node, path, null_ok)?;
        self.mappings.record(path, fields.known, fields.what);
        let mut known = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let Some(key) = entry.key.scalar_text() else {
                self.report(
                    Diagnostic::at(Code::WrongType, entry.key.span, "a mapping key must be a plain name")
                        .with_label("not a name"),
                    path,
                );
                continue;
            };
            if fields.known.contains(&key) {
                known.push(Field { key, key_span: entry.key.span, value: &entry.value });
            } else if let Some((_, instead)) = fields.removed.iter().find(|(removed, _)| *removed == key) {
                let key_path = path.key(key);
                self.report(
                    Diagnostic::at(
                        Code::RemovedKey,
                        entry.key.span,
                        format!("`{key}` was removed from {}", fields.what),
                    )
                    .with_label("removed in contract 3")
                    .with_help(*instead),
                    &key_path,
                );
            } else {
                let split = self.split_flow_value(node, entries, index);
                self.unknown_key(key, entry.key.span, path, fields, split);
            }
        }
        Some(known)
    }

    /// The known keys that the unknown keys of the mapping `node` most likely meant
    /// (`transitons` → `transitions`). A check that finds such a key "missing" would only
    /// repeat the unknown-key error it follows from, so it stays silent.
    pub fn meant_keys(node: &Node, fields: &Fields) -> Vec<&'static str> {
        let Some(entries) = node.as_mapping() else {
            return Vec::new();
        };
        entries
            .iter()
            .filter_map(|entry| entry.key.scalar_text())
            .filter(|key| !fields.known.contains(key) && !fields.removed.iter().any(|(removed, _)| removed == key))
            .filter_map(|key| did_you_mean(key, fields.known.iter().copied()))
            .collect()
    }

    /// When the entry at `index` of a `{ … }` mapping reads as a fragment of the value
    /// before it (a key with no value that holds a space, as YAML reads
    /// `description: Deny it, with a reason.`), help that says so, with the whole value
    /// quoted when the value it was cut from can be found.
    fn split_flow_value(&self, mapping: &Node, entries: &[Entry], index: usize) -> Option<String> {
        let is_fragment = |entry: &Entry| {
            entry.value.is_null() && entry.key.scalar_text().is_some_and(|key| key.trim().contains(' '))
        };
        let is_flow = self.source.as_bytes().get(mapping.span.start as usize) == Some(&b'{');
        if !is_flow || !is_fragment(&entries[index]) {
            return None;
        }
        let cause = "inside `{ … }` a comma ends a plain value, so YAML read the text after it as a key of its own";
        Some(match self.whole_flow_value(entries, index, is_fragment) {
            Some((key, text)) => {
                format!("{cause}: quote the value, `{key}: {}`", quoted(text))
            }
            None => format!("{cause}: quote the value that holds the comma"),
        })
    }

    /// The key and the source text of the plain value that the fragment at `index` was
    /// cut from: from the value before the run of fragments to the end of the run.
    fn whole_flow_value<'e>(
        &self,
        entries: &'e [Entry],
        index: usize,
        is_fragment: impl Fn(&Entry) -> bool,
    ) -> Option<(&'e str, &'s str)> {
        let owner = &entries[entries[..index].iter().rposition(|entry| !is_fragment(entry))?];
        let last = &entries[index + entries[index..].iter().take_while(|entry| is_fragment(entry)).count() - 1];
        if !matches!(owner.value.kind, NodeKind::Scalar(Scalar { style: ScalarKind::Plain, .. }))
            || owner.value.is_null()
        {
            return None;
        }
        let text = self.source.get(owner.value.span.start as usize..last.key.span.end as usize)?;
        Some((owner.key.scalar_text()?, text))
    }

    fn unknown_key(&mut self, key: &str, span: Span, path: &SpecPath<'_>, fields: &Fields, split: Option<String>) {
        let key_path = path.key(key);
        let mut diagnostic = Diagnostic::at(
            Code::UnknownKey,
            span,
            if path.render().is_empty() {
                format!("unknown key `{key}` at the root of {}", fields.what)
            } else {
                format!("unknown key `{key}` in `{path}`")
            },
        )
        .with_label("not part of the schema");
        diagnostic = if key == "<<" {
            diagnostic.with_help("YAML 1.2 has no merge keys; write the entries out in full")
        } else if let Some(hint) = split {
            diagnostic.with_help(hint)
        } else if let Some(hint) = misplaced(fields.what, key) {
            diagnostic.with_help(hint)
        } else if let Some(hint) = self.mappings.misindented(path, key) {
            diagnostic.with_help(hint)
        } else if let Some(close) = did_you_mean(key, fields.known.iter().copied()) {
            diagnostic.with_help(format!("did you mean `{close}`?"))
        } else {
            diagnostic.with_help(format!("{} takes {}", fields.what, list_names(fields.known)))
        };
        self.report(diagnostic, &key_path);
    }

    /// A string scalar.
    pub fn string(&mut self, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
        match node.as_str() {
            Some(text) => Some(Spanned::new(text.to_string(), node.span)),
            None => {
                self.wrong_type(node, path, "a string");
                None
            }
        }
    }

    /// A string that must hold something besides whitespace.
    pub fn nonempty_string(&mut self, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
        let value = self.string(node, path)?;
        if value.value.trim().is_empty() {
            self.report(
                Diagnostic::at(Code::EmptyValue, node.span, format!("`{path}` must not be empty"))
                    .with_label("empty")
                    .with_help("write a value, or remove the key"),
                path,
            );
            return None;
        }
        Some(value)
    }

    pub fn boolean(&mut self, node: &Node, path: &SpecPath<'_>) -> Option<bool> {
        match node.as_bool() {
            Some(value) => Some(value),
            None => {
                self.wrong_type(node, path, "`true` or `false`");
                None
            }
        }
    }

    /// A whole number at least `minimum`.
    pub fn integer_at_least(&mut self, node: &Node, path: &SpecPath<'_>, minimum: u64) -> Option<Spanned<u64>> {
        let value = match &node.kind {
            NodeKind::Scalar(scalar) => match scalar.value {
                ScalarValue::Integer(value) => Some(value),
                ScalarValue::Float(value) if value.fract() == 0.0 && value.abs() < 9.0e15 => Some(value as i64),
                ScalarValue::Float(_) => None,
                _ => {
                    self.wrong_type(node, path, "a whole number");
                    return None;
                }
            },
            _ => {
                self.wrong_type(node, path, "a whole number");
                return None;
            }
        };
        match value {
            Some(value) if value >= 0 && value as u64 >= minimum => Some(Spanned::new(value as u64, node.span)),
            _ => {
                let wanted = if minimum == 0 {
                    "a whole number of 0 or more".to_string()
                } else if minimum == 1 {
                    "a positive whole number".to_string()
                } else {
                    format!("a whole number of at least {minimum}")
                };
                self.report(
                    Diagnostic::at(
                        Code::InvalidValue,
                        node.span,
                        format!("`{path}` must be {wanted}, not `{}`", node.scalar_text().unwrap_or("?")),
                    )
                    .with_label(format!("expected {wanted}")),
                    path,
                );
                None
            }
        }
    }

    /// A list of strings; a single string is refused (write a list).
    pub fn string_list(&mut self, node: &Node, path: &SpecPath<'_>) -> Vec<Spanned<String>> {
        if node.is_null() {
            return Vec::new();
        }
        let Some(items) = node.as_sequence() else {
            self.wrong_type(node, path, "a list of strings");
            return Vec::new();
        };
        items.iter().enumerate().filter_map(|(index, item)| self.nonempty_string(item, &path.index(index))).collect()
    }

    pub fn invalid_value(&mut self, node: &Node, path: &SpecPath<'_>, message: String, help: String) {
        self.report(
            Diagnostic::at(Code::InvalidValue, node.span, message).with_label("not allowed here").with_help(help),
            path,
        );
    }
}
