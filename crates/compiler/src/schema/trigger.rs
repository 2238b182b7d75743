//! Triggers declared on states, and the `requires` / `returns` signature entries.
//!
//! A declaration's own keys are `session`, `message`, `connection`, `description`,
//! `requires` and `returns`; `entry` and `name` are refused, and anything else is a
//! host's key, kept with a warning. A signature entry is a bare variable name or
//! `{ name, type?, description?, …rules }`; each rule is checked against the entry's
//! type, its value, and the entry's other rules.

use crate::diagnostic::values::{SIGNATURE_TYPE_SYNONYMS, meant};
use crate::diagnostic::{Code, Diagnostic, SpecPath, did_you_mean, list_names};
use crate::source::{Span, Spanned};
use crate::syntax::reference::{is_variable_name, parse_var_path};
use crate::syntax::yaml::{Node, NodeKind, ScalarValue};
use crate::values::{parse_byte_size, parse_date, parse_date_time};

use super::ast::{Bound, ContentKind, MessagePath, Rules, SignatureEntry, StringFormat, Trigger, ValueType};
use super::reader::Reader;
use super::state::variable_name_diagnostic;

const DECLARATION_KEYS: [&str; 6] = ["session", "message", "connection", "description", "requires", "returns"];

const ENTRY_KEYS: [&str; 15] = [
    "name",
    "type",
    "description",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "enum",
    "content",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "accept",
    "maxSize",
];

pub(super) fn parse_triggers(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Trigger> {
    let Some(entries) = reader.mapping(node, path, true) else {
        return Vec::new();
    };
    let mut triggers = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some(id) = entry.key.scalar_text() else {
            reader.wrong_type(&entry.key, path, "a trigger id");
            continue;
        };
        let trigger_path = path.key(id);
        if id.trim().is_empty() {
            reader.report(
                Diagnostic::at(Code::TriggerId, entry.key.span, "a trigger is declared under an empty id")
                    .with_label("empty id")
                    .with_help("name the trigger: `manual` for the CLI and callers, or the host's event id"),
                &trigger_path,
            );
            continue;
        }
        if id == "sub-workflow" {
            reader.report(
                Diagnostic::at(Code::TriggerId, entry.key.span, "`sub-workflow` is no longer a trigger id")
                    .with_label("retired id")
                    .with_help("a calling workflow enters through `manual`: rename this trigger `manual`"),
                &trigger_path,
            );
            continue;
        }
        let mut trigger = Trigger {
            id: Spanned::new(id.to_string(), entry.key.span),
            session: None,
            message: None,
            connection: None,
            description: None,
            requires: Vec::new(),
            returns: Vec::new(),
            extra: Vec::new(),
        };
        let declaration = &entry.value;
        if declaration.is_null() {
            triggers.push(trigger);
            continue;
        }
        let Some(keys) = declaration.as_mapping() else {
            reader.wrong_type(declaration, &trigger_path, "a mapping or nothing");
            continue;
        };
        for field in keys {
            let Some(key) = field.key.scalar_text() else {
                reader.wrong_type(&field.key, &trigger_path, "a key name");
                continue;
            };
            let key_path = trigger_path.key(key);
            let value = &field.value;
            match key {
                "session" => trigger.session = dotted_path(reader, value, &key_path, "session"),
                "message" => {
                    trigger.message = match value.as_bool() {
                        Some(false) => Some(Spanned::new(MessagePath::None, value.span)),
                        Some(true) => {
                            reader.report(
                                Diagnostic::at(Code::TriggerPath, value.span, "`message` is a dotted path or `false`, never `true`")
                                    .with_label("not a path")
                                    .with_help("name where the host puts the firing's words (`message: body`), or write `message: false`"),
                                &key_path,
                            );
                            None
                        }
                        None => dotted_path(reader, value, &key_path, "message")
                            .map(|path| Spanned::new(MessagePath::Path(path.value), path.span)),
                    }
                }
                "connection" => trigger.connection = reader.nonempty_string(value, &key_path),
                "description" => trigger.description = reader.nonempty_string(value, &key_path),
                "requires" => trigger.requires = signature(reader, value, &key_path, false),
                "returns" => trigger.returns = signature(reader, value, &key_path, true),
                "entry" | "name" => {
                    let help = if key == "entry" {
                        "remove `entry`: the state this trigger is declared on is its entry"
                    } else {
                        "remove `name`: the key the declaration sits under is the trigger's id"
                    };
                    reader.report(
                        Diagnostic::at(
                            Code::TriggerKeyRefused,
                            field.key.span,
                            format!("a trigger declaration cannot carry `{key}`"),
                        )
                        .with_label("refused")
                        .with_help(help),
                        &key_path,
                    );
                }
                other => {
                    let mut diagnostic = Diagnostic::at(
                        Code::UnknownTriggerKey,
                        field.key.span,
                        format!("the trigger `{id}` carries `{other}`, which the runtime does not read"),
                    )
                    .with_label("kept for the host");
                    diagnostic = match did_you_mean(other, DECLARATION_KEYS) {
                        Some(close) => diagnostic.with_help(format!(
                            "did you mean `{close}`? If `{other}` is your host's own key, it is kept as written"
                        )),
                        None => diagnostic.with_help(format!(
                            "the runtime reads {}; a host's own keys are kept as written",
                            list_names(&DECLARATION_KEYS)
                        )),
                    };
                    reader.report(diagnostic, &key_path);
                    trigger.extra.push((Spanned::new(other.to_string(), field.key.span), value.clone()));
                }
            }
        }
        triggers.push(trigger);
    }
    triggers
}

fn dotted_path(
    reader: &mut Reader<'_>,
    node: &Node,
    path: &SpecPath<'_>,
    key: &str,
) -> Option<Spanned<crate::syntax::reference::VarPath>> {
    let text = reader.nonempty_string(node, path)?;
    let trimmed = text.value.trim();
    if trimmed.starts_with("${{") {
        let inner = trimmed.trim_start_matches("${{").trim_end_matches("}}").trim();
        reader.report(
            Diagnostic::at(
                Code::TriggerPath,
                node.span,
                format!("`{key}` takes a bare dotted path, not a `${{{{…}}}}` reference"),
            )
            .with_label("wrapped in a reference")
            .with_help(format!("write `{key}: {inner}`")),
            path,
        );
        return None;
    }
    match parse_var_path(trimmed) {
        Ok(parsed) => Some(Spanned::new(parsed, node.span)),
        Err(error) => {
            reader.report(
                Diagnostic::at(
                    Code::TriggerPath,
                    node.span,
                    format!("`{}` is not a dotted path over the variables: {}", text.value, error.message),
                )
                .with_label("malformed path")
                .with_help("start with a variable name, then keys or indices separated by dots: `conversation_id`, `triggers.-1.thread_id`"),
                path,
            );
            None
        }
    }
}

/// A `requires` or `returns` list.
fn signature(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, returns: bool) -> Vec<SignatureEntry> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of variable names or `{ name, type }` entries");
        return Vec::new();
    };
    let mut entries: Vec<SignatureEntry> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let item_path = path.index(index);
        let Some(entry) = signature_entry(reader, item, &item_path) else {
            continue;
        };
        if let Some(first) = entries.iter().find(|seen| seen.name.value == entry.name.value) {
            reader.report(
                Diagnostic::at(
                    Code::DuplicateSignatureName,
                    entry.name.span,
                    format!("`{}` is declared twice in this list", entry.name.value),
                )
                .with_label("again here")
                .with_secondary(first.name.span, "first declared here")
                .with_help("declare each variable once; keep the typed spelling if one is typed"),
                &item_path,
            );
            continue;
        }
        if returns && matches!(entry.name.value.as_str(), "trigger" | "title" | "note") {
            let why = match entry.name.value.as_str() {
                "trigger" => "`trigger` holds the trigger id and is set by the runtime",
                "title" => "`title` is the session's label and is never returned",
                _ => "`note` is reserved for the runtime's remark on unset returns",
            };
            reader.report(
                Diagnostic::at(
                    Code::ReservedReturn,
                    entry.name.span,
                    format!("`returns` cannot declare `{}`", entry.name.value),
                )
                .with_label("reserved name")
                .with_help(format!("{why}; return the value under another name")),
                &item_path,
            );
            continue;
        }
        entries.push(entry);
    }
    entries
}

fn signature_entry(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<SignatureEntry> {
    match &node.kind {
        NodeKind::Scalar(_) if node.as_str().is_some() => {
            let name = Spanned::new(node.as_str().unwrap_or_default().to_string(), node.span);
            if !is_variable_name(&name.value) {
                reader.report(variable_name_diagnostic(&name), path);
                return None;
            }
            Some(SignatureEntry { name, ty: None, description: None, rules: Rules::default(), span: node.span })
        }
        NodeKind::Mapping(fields) => {
            let mut name = None;
            let mut ty = None;
            let mut description = None;
            let mut raw_rules: Vec<(&str, Span, &Node)> = Vec::new();
            for field in fields {
                let key = field.key.scalar_text().unwrap_or("");
                let key_path = path.key(key);
                match key {
                    "name" => {
                        if let Some(text) = reader.nonempty_string(&field.value, &key_path) {
                            if is_variable_name(&text.value) {
                                name = Some(text);
                            } else {
                                reader.report(variable_name_diagnostic(&text), &key_path);
                                return None;
                            }
                        }
                    }
                    "type" => match field.value.as_str().and_then(ValueType::parse) {
                        Some(parsed) => ty = Some(Spanned::new(parsed, field.value.span)),
                        None => {
                            let written = field.value.scalar_text().unwrap_or("this value");
                            let known: Vec<&str> = ValueType::ALL.iter().map(|ty| ty.as_str()).collect();
                            let mut diagnostic = Diagnostic::at(
                                Code::SignatureEntry,
                                field.value.span,
                                format!("`{written}` is not a signature type"),
                            )
                            .with_label("unknown type");
                            diagnostic = match meant(written, &known, SIGNATURE_TYPE_SYNONYMS) {
                                Some(close) => diagnostic.with_help(format!("did you mean `{close}`?")),
                                None => diagnostic.with_help(format!("a type is one of {}", list_names(&known))),
                            };
                            reader.report(diagnostic, &key_path);
                            return None;
                        }
                    },
                    "description" => {
                        description = match field.value.as_str() {
                            Some(text) if !text.trim().is_empty() => {
                                Some(Spanned::new(text.to_string(), field.value.span))
                            }
                            Some(_) => {
                                reader.report(
                                    Diagnostic::at(
                                        Code::SignatureEntry,
                                        field.value.span,
                                        "an entry's `description` must not be empty",
                                    )
                                    .with_label("empty")
                                    .with_help("say what the value is, or remove `description`"),
                                    &key_path,
                                );
                                None
                            }
                            None => {
                                reader.wrong_type(&field.value, &key_path, "a string");
                                None
                            }
                        }
                    }
                    rule if ENTRY_KEYS.contains(&rule) => raw_rules.push((rule, field.key.span, &field.value)),
                    other => {
                        let mut diagnostic = Diagnostic::at(
                            Code::SignatureEntry,
                            field.key.span,
                            format!("a signature entry has no key `{other}`"),
                        )
                        .with_label("unknown key");
                        diagnostic = match did_you_mean(other, ENTRY_KEYS) {
                            Some(close) => diagnostic.with_help(format!("did you mean `{close}`?")),
                            None if other == "default" || other == "optional" || other == "required" => diagnostic
                                .with_help("every entry is required and has no default: move optional inputs out of `requires`"),
                            None => diagnostic.with_help(format!("an entry takes {}", list_names(&ENTRY_KEYS))),
                        };
                        reader.report(diagnostic, &key_path);
                    }
                }
            }
            let Some(name) = name else {
                if node.get("name").is_none() {
                    reader.report(
                        Diagnostic::at(Code::MissingKey, node.span, "a signature entry needs a `name`")
                            .with_label("no `name`")
                            .with_help("write `{ name: <variable>, type: <type> }`, or the bare variable name"),
                        path,
                    );
                }
                return None;
            };
            let rules = rules(reader, &raw_rules, ty.as_ref().map(|ty| ty.value), &name, path);
            Some(SignatureEntry { name, ty, description, rules, span: node.span })
        }
        _ => {
            reader.report(
                Diagnostic::at(
                    Code::SignatureEntry,
                    node.span,
                    format!("a signature entry is a variable name or a mapping, not {}", node.type_name()),
                )
                .with_label("not an entry")
                .with_help("write a bare name (`order_id`) or `{ name: order_id, type: string }`"),
                path,
            );
            None
        }
    }
}

/// The types a rule applies to.
fn rule_types(rule: &str) -> &'static [ValueType] {
    match rule {
        "format" | "pattern" | "minLength" | "maxLength" | "enum" | "content" => &[ValueType::String],
        "minimum" | "maximum" => &[ValueType::Integer, ValueType::Number, ValueType::Date, ValueType::DateTime],
        "minItems" | "maxItems" => &[ValueType::Array],
        "accept" | "maxSize" => &[ValueType::File],
        _ => &[],
    }
}

/// An entry's rules: each checked against the entry's type and read from its value, then
/// the rules checked against each other.
fn rules(
    reader: &mut Reader<'_>,
    raw: &[(&str, Span, &Node)],
    ty: Option<ValueType>,
    name: &Spanned<String>,
    path: &SpecPath<'_>,
) -> Rules {
    let mut rules = Rules::default();
    for (rule, key_span, value) in raw {
        let rule_path = path.key(rule);
        let Some(ty) = applicable_type(reader, rule, *key_span, ty, name, &rule_path) else {
            continue;
        };
        read_rule(reader, &mut rules, rule, value, ty, &rule_path);
    }
    if let (Some(format), Some(pattern)) = (&rules.format, &rules.pattern) {
        reader.report(
            Diagnostic::at(Code::FormatWithPattern, pattern.span, "an entry cannot have both `format` and `pattern`")
                .with_label("pattern")
                .with_secondary(format.span, "format")
                .with_help("keep `format` for an email, URL or phone number, or fold the shape into one `pattern`"),
            &path.key("pattern"),
        );
    }
    check_bounds(reader, &rules, path);
    rules
}

/// The entry's type when the rule applies to it; otherwise reports the rule and gives `None`.
fn applicable_type(
    reader: &mut Reader<'_>,
    rule: &str,
    key_span: Span,
    ty: Option<ValueType>,
    name: &Spanned<String>,
    rule_path: &SpecPath<'_>,
) -> Option<ValueType> {
    let allowed = rule_types(rule);
    if let Some(ty) = ty.filter(|ty| allowed.contains(ty)) {
        return Some(ty);
    }
    let on: Vec<&str> = allowed.iter().map(|ty| ty.as_str()).collect();
    let message = match ty {
        Some(ty) => format!("`{rule}` does not apply to {} `{}` entry", article(ty.as_str()), ty.as_str()),
        None => format!("`{rule}` needs a typed entry, but `{}` has no `type`", name.value),
    };
    reader.report(
        Diagnostic::at(Code::RuleNotApplicable, key_span, message)
            .with_label("not applicable")
            .with_help(format!("`{rule}` applies to {} entries", list_names(&on))),
        rule_path,
    );
    None
}

/// Reports a value a rule cannot take.
fn invalid_rule_value(reader: &mut Reader<'_>, value: &Node, rule_path: &SpecPath<'_>, message: String, help: &str) {
    reader.report(
        Diagnostic::at(Code::InvalidRuleValue, value.span, message)
            .with_label("invalid value")
            .with_help(help.to_string()),
        rule_path,
    );
}

/// Reads one applicable rule's value into `rules`, reporting a value it cannot take.
fn read_rule(
    reader: &mut Reader<'_>,
    rules: &mut Rules,
    rule: &str,
    value: &Node,
    ty: ValueType,
    rule_path: &SpecPath<'_>,
) {
    let bad = |reader: &mut Reader<'_>, message: String, help: &str| {
        invalid_rule_value(reader, value, rule_path, message, help);
    };
    match rule {
        "format" => match value.scalar_text() {
            Some("email") => rules.format = Some(Spanned::new(StringFormat::Email, value.span)),
            Some("url") => rules.format = Some(Spanned::new(StringFormat::Url, value.span)),
            Some("phone") => rules.format = Some(Spanned::new(StringFormat::Phone, value.span)),
            other => bad(
                reader,
                format!("`{}` is not a string format", other.unwrap_or("this value")),
                "`format` is `email`, `url` or `phone`; write anything else as a `pattern`",
            ),
        },
        "content" => match value.scalar_text() {
            Some("text") => rules.content = Some(Spanned::new(ContentKind::Text, value.span)),
            Some("markdown") => rules.content = Some(Spanned::new(ContentKind::Markdown, value.span)),
            Some("html") => rules.content = Some(Spanned::new(ContentKind::Html, value.span)),
            other => bad(
                reader,
                format!("`{}` is not a content kind", other.unwrap_or("this value")),
                "`content` is `text`, `markdown` or `html`",
            ),
        },
        "pattern" => match value.as_str() {
            Some(pattern) => {
                if let Err(error) = regex::Regex::new(pattern) {
                    let detail = regex_error_summary(&error);
                    reader.report(
                        Diagnostic::at(Code::InvalidPattern, value.span, format!("the pattern does not compile: {detail}"))
                            .with_label("not an RE2 pattern")
                            .with_help("patterns run in RE2: no look-around and no backreferences; match the shape directly, anchored with `^…$`"),
                        rule_path,
                    );
                } else {
                    rules.pattern = Some(Spanned::new(pattern.to_string(), value.span));
                }
            }
            None => bad(
                reader,
                format!("`pattern` must be a string, not {}", value.type_name()),
                "quote the regular expression",
            ),
        },
        "minLength" | "maxLength" | "minItems" | "maxItems" => match value.as_i64() {
            Some(count) if count >= 0 => {
                let spanned = Some(Spanned::new(count as u64, value.span));
                match rule {
                    "minLength" => rules.min_length = spanned,
                    "maxLength" => rules.max_length = spanned,
                    "minItems" => rules.min_items = spanned,
                    _ => rules.max_items = spanned,
                }
            }
            _ => bad(reader, format!("`{rule}` must be a whole number of 0 or more"), "write a count such as `1`"),
        },
        "enum" => {
            if let Some(values) = enum_values(reader, value, rule_path) {
                rules.enumeration = Some(Spanned::new(values, value.span));
            }
        }
        "minimum" | "maximum" => {
            if let Some(bound) = bound_rule(reader, rule, value, ty, rule_path) {
                let spanned = Some(Spanned::new(bound, value.span));
                if rule == "minimum" {
                    rules.minimum = spanned;
                } else {
                    rules.maximum = spanned;
                }
            }
        }
        "accept" => {
            if let Some(extensions) = accepted_extensions(reader, value, rule_path) {
                rules.accept = Some(Spanned::new(extensions, value.span));
            }
        }
        "maxSize" => match max_size(value) {
            Some(size) => rules.max_size = Some(Spanned::new(size, value.span)),
            None => bad(
                reader,
                format!("`{}` is not a file size", value.scalar_text().unwrap_or("this value")),
                "write bytes (`2048`), or `<n>KB` / `<n>MB`",
            ),
        },
        _ => {}
    }
}

/// `enum`: a non-empty list of distinct strings; `None` after reporting each bad item.
fn enum_values(reader: &mut Reader<'_>, value: &Node, rule_path: &SpecPath<'_>) -> Option<Vec<String>> {
    let bad = |reader: &mut Reader<'_>, message: String, help: &str| {
        invalid_rule_value(reader, value, rule_path, message, help);
    };
    match value.as_sequence() {
        Some(items) if !items.is_empty() => {
            let mut values: Vec<String> = Vec::with_capacity(items.len());
            let mut valid = true;
            for item in items {
                match item.as_str() {
                    Some(text) if !values.iter().any(|seen| seen == text) => values.push(text.to_string()),
                    Some(text) => {
                        bad(reader, format!("`enum` lists `{text}` twice"), "list each allowed value once");
                        valid = false;
                    }
                    None => {
                        bad(
                            reader,
                            format!("`enum` holds {}, but its values are strings", item.type_name()),
                            "quote each value",
                        );
                        valid = false;
                    }
                }
            }
            valid.then_some(values)
        }
        _ => {
            bad(
                reader,
                "`enum` must be a non-empty list of strings".to_string(),
                "list the allowed values: `enum: [approved, denied]`",
            );
            None
        }
    }
}

/// `minimum` or `maximum`: a bound of the entry's type, or `None` after reporting it.
fn bound_rule(
    reader: &mut Reader<'_>,
    rule: &str,
    value: &Node,
    ty: ValueType,
    rule_path: &SpecPath<'_>,
) -> Option<Bound> {
    let bound = bound(value, ty);
    if bound.is_none() {
        let help = match ty {
            ValueType::Date => "write a day as `YYYY-MM-DD`, or `today`",
            ValueType::DateTime => "write an RFC 3339 instant with an offset (`2026-01-31T09:00:00Z`), or `now`",
            _ => "write a number",
        };
        invalid_rule_value(
            reader,
            value,
            rule_path,
            format!(
                "`{}` is not a valid `{rule}` for {} `{}` entry",
                value.scalar_text().unwrap_or("this value"),
                article(ty.as_str()),
                ty.as_str()
            ),
            help,
        );
    }
    bound
}

/// `accept`: one extension or a list of them, each with its dot (`.tar.gz` is one);
/// `None` after reporting
/// each bad one.
fn accepted_extensions(reader: &mut Reader<'_>, value: &Node, rule_path: &SpecPath<'_>) -> Option<Vec<String>> {
    let items: Vec<&Node> = match &value.kind {
        NodeKind::Sequence(items) => items.iter().collect(),
        _ => vec![value],
    };
    let mut extensions = Vec::with_capacity(items.len());
    let mut valid = !items.is_empty();
    for item in items {
        match item.as_str() {
            Some(extension) if is_extension(extension) => extensions.push(extension.to_string()),
            other => {
                invalid_rule_value(
                    reader,
                    value,
                    rule_path,
                    format!("`{}` is not a file extension", other.unwrap_or("this value")),
                    "write extensions with their dot, of letters, digits, `_` or `-`: `accept: [.pdf, .png, .tar.gz]`",
                );
                valid = false;
            }
        }
    }
    valid.then_some(extensions)
}

/// An `accept` entry: a dot, then one to [`MAX_EXTENSION_PARTS`] parts joined by dots
/// (`.pdf`, `.tar.gz`), each of ASCII letters, digits, `_` or `-` and at most
/// [`MAX_EXTENSION_PART_CHARS`] long: what a handed file's stored name ends in, so nothing
/// that could read as a path, a space, a control or direction character, or a name too
/// long to write.
fn is_extension(text: &str) -> bool {
    text.strip_prefix('.').is_some_and(|parts| {
        parts.split('.').count() <= MAX_EXTENSION_PARTS
            && parts.split('.').all(|part| {
                (1..=MAX_EXTENSION_PART_CHARS).contains(&part.len())
                    && part.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
            })
    })
}

const MAX_EXTENSION_PARTS: usize = 3;
const MAX_EXTENSION_PART_CHARS: usize = 16;

/// `maxSize`: a positive count of bytes, or a size such as `5 MB`.
fn max_size(value: &Node) -> Option<u64> {
    match &value.kind {
        NodeKind::Scalar(scalar) if matches!(scalar.value, ScalarValue::Integer(bytes) if bytes > 0) => {
            value.as_i64().map(|bytes| bytes as u64)
        }
        NodeKind::Scalar(scalar) if scalar.value == ScalarValue::String => {
            parse_byte_size(&scalar.text).filter(|size| *size > 0)
        }
        _ => None,
    }
}

/// `a` or `an` before a type name.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

fn regex_error_summary(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines()
        .rev()
        .find(|line| line.trim_start().starts_with("error:"))
        .map(|line| line.trim_start().trim_start_matches("error:").trim().to_string())
        .unwrap_or_else(|| text.lines().last().unwrap_or("invalid pattern").trim().to_string())
}

fn bound(node: &Node, ty: ValueType) -> Option<Bound> {
    match ty {
        ValueType::Integer | ValueType::Number => node.as_f64().filter(|value| value.is_finite()).map(Bound::Number),
        ValueType::Date => match node.as_str()? {
            "today" => Some(Bound::Today),
            text => parse_date(text).map(|_| Bound::Date(text.to_string())),
        },
        ValueType::DateTime => match node.as_str()? {
            "now" => Some(Bound::Now),
            text => parse_date_time(text).map(|_| Bound::DateTime(text.to_string())),
        },
        _ => None,
    }
}

fn check_bounds(reader: &mut Reader<'_>, rules: &Rules, path: &SpecPath<'_>) {
    let mut report = |low_name: &str, low: Span, high_name: &str, high: Span| {
        reader.report(
            Diagnostic::at(
                Code::InconsistentBounds,
                low,
                format!("`{low_name}` is greater than `{high_name}`, so no value can satisfy both"),
            )
            .with_label(low_name.to_string())
            .with_secondary(high, high_name.to_string())
            .with_help(format!("make `{low_name}` at most `{high_name}`")),
            &path.key(low_name),
        );
    };
    if let (Some(low), Some(high)) = (&rules.min_length, &rules.max_length)
        && low.value > high.value
    {
        report("minLength", low.span, "maxLength", high.span);
    }
    if let (Some(low), Some(high)) = (&rules.min_items, &rules.max_items)
        && low.value > high.value
    {
        report("minItems", low.span, "maxItems", high.span);
    }
    if let (Some(low), Some(high)) = (&rules.minimum, &rules.maximum) {
        let inverted = match (&low.value, &high.value) {
            (Bound::Number(low), Bound::Number(high)) => low > high,
            (Bound::Date(low), Bound::Date(high)) => parse_date(low) > parse_date(high),
            (Bound::DateTime(low), Bound::DateTime(high)) => parse_date_time(low) > parse_date_time(high),
            _ => false,
        };
        if inverted {
            report("minimum", low.span, "maximum", high.span);
        }
    }
}

#[cfg(test)]
mod extension_tests {
    use super::is_extension;

    #[test]
    fn an_accept_entry_is_a_short_plain_extension() {
        for good in [".pdf", ".tar.gz", ".JPG", ".x_y-z", ".a.b.c"] {
            assert!(is_extension(good), "{good}");
        }
        for bad in [
            "pdf",
            ".",
            ".tar..gz",
            "./x",
            ".a/b",
            ".a\\b",
            ".*",
            ".p df",
            ".pdf\u{202e}",
            ".a.b.c.d",
            ".abcdefghijklmnopq",
        ] {
            assert!(!is_extension(bad), "{bad:?}");
        }
    }
}
