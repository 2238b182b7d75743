//! Trigger signatures: the typed entries, their JSON Schema, the lines the agent is
//! shown, and the signatures of `archmax_workflow_<slug>` tools.
//!
//! The JSON Schema of a signature is `{ type: object, properties, required }` with every
//! name required, in declaration order; a typed entry maps its type and rules to JSON
//! Schema keywords (`date` → `format: date`, `url` → `format: uri`), an untyped entry
//! accepts anything.

use serde_json::{Map, Value, json};

use crate::program::{BoundProgram, Callee, RulesProgram, SignatureEntry, StateId, Sym, TriggerProgram, WorkflowId};
use crate::schema::ast::{self, Bound, ContentKind, MessagePath, StringFormat, Trigger, ValueType, Workflow};
use crate::values::{parse_date, parse_date_time};

use super::Interner;

/// E.164: a plus sign and up to fifteen digits.
pub const PHONE_PATTERN: &str = r"^\+[1-9][0-9]{1,14}$";

pub fn lower_trigger(trigger: &Trigger, entry: StateId, interner: &mut Interner) -> TriggerProgram {
    let requires: Vec<SignatureEntry> = trigger.requires.iter().map(|entry| lower_entry(entry, interner)).collect();
    let returns: Vec<SignatureEntry> = trigger.returns.iter().map(|entry| lower_entry(entry, interner)).collect();
    TriggerProgram {
        id: interner.intern(&trigger.id.value),
        entry,
        session: trigger.session.as_ref().map(|path| path.value.clone()),
        message: trigger.message.as_ref().map(|message| match &message.value {
            MessagePath::Path(path) => Some(path.clone()),
            MessagePath::None => None,
        }),
        connection: trigger.connection.as_ref().map(|connection| interner.intern(&connection.value)),
        description: trigger.description.as_ref().map(|description| interner.intern(description.value.trim())),
        schema: interner.intern(&schema_text(&trigger.requires)),
        signature_prompt: interner.intern(&signature_prompt(trigger, false)),
        child_signature_prompt: interner.intern(&signature_prompt(trigger, true)),
        requires,
        returns,
    }
}

fn lower_entry(entry: &ast::SignatureEntry, interner: &mut Interner) -> SignatureEntry {
    let rules = &entry.rules;
    let bound = |bound: &Option<crate::source::Spanned<Bound>>| {
        bound.as_ref().map(|bound| match &bound.value {
            Bound::Number(value) => BoundProgram::Number(*value),
            Bound::Date(text) => BoundProgram::Date(parse_date(text).unwrap_or(0)),
            Bound::DateTime(text) => {
                BoundProgram::DateTime(parse_date_time(text).map(|(seconds, _)| seconds).unwrap_or(0))
            }
            Bound::Today => BoundProgram::Today,
            Bound::Now => BoundProgram::Now,
        })
    };
    SignatureEntry {
        name: interner.intern(&entry.name.value),
        ty: entry.ty.as_ref().map(|ty| ty.value),
        description: entry.description.as_ref().map(|description| interner.intern(description.value.trim())),
        rules: RulesProgram {
            format: rules.format.as_ref().map(|format| interner.intern(format_name(format.value))),
            pattern: rules.pattern.as_ref().map(|pattern| interner.intern(&pattern.value)),
            min_length: rules.min_length.as_ref().map(|value| value.value),
            max_length: rules.max_length.as_ref().map(|value| value.value),
            enumeration: rules
                .enumeration
                .as_ref()
                .map(|values| values.value.iter().map(|value| interner.intern(value)).collect()),
            content: rules.content.as_ref().map(|content| interner.intern(content_name(content.value))),
            minimum: bound(&rules.minimum),
            maximum: bound(&rules.maximum),
            min_items: rules.min_items.as_ref().map(|value| value.value),
            max_items: rules.max_items.as_ref().map(|value| value.value),
            accept: rules
                .accept
                .as_ref()
                .map(|values| values.value.iter().map(|value| interner.intern(value)).collect()),
            max_size: rules.max_size.as_ref().map(|value| value.value),
        },
    }
}

fn format_name(format: StringFormat) -> &'static str {
    match format {
        StringFormat::Email => "email",
        StringFormat::Url => "url",
        StringFormat::Phone => "phone",
    }
}

fn content_name(content: ContentKind) -> &'static str {
    match content {
        ContentKind::Text => "text",
        ContentKind::Markdown => "markdown",
        ContentKind::Html => "html",
    }
}

fn bound_json(bound: &Bound) -> Value {
    match bound {
        Bound::Number(value) => json!(value),
        Bound::Date(text) | Bound::DateTime(text) => json!(text),
        Bound::Today => json!("today"),
        Bound::Now => json!("now"),
    }
}

/// The JSON Schema of one entry.
pub fn entry_schema(entry: &ast::SignatureEntry) -> Value {
    let mut schema = Map::new();
    let rules = &entry.rules;
    match entry.ty.as_ref().map(|ty| ty.value) {
        None => {}
        Some(ValueType::Date) => {
            schema.insert("type".into(), json!("string"));
            schema.insert("format".into(), json!("date"));
        }
        Some(ValueType::DateTime) => {
            schema.insert("type".into(), json!("string"));
            schema.insert("format".into(), json!("date-time"));
        }
        Some(ValueType::File) => {
            schema.insert("type".into(), json!("string"));
            schema.insert("x-archmax-type".into(), json!("file"));
        }
        Some(ty) => {
            schema.insert("type".into(), json!(ty.as_str()));
        }
    }
    if let Some(description) = &entry.description {
        schema.insert("description".into(), json!(description.value.trim()));
    }
    if let Some(format) = &rules.format {
        match format.value {
            StringFormat::Email => schema.insert("format".into(), json!("email")),
            StringFormat::Url => schema.insert("format".into(), json!("uri")),
            StringFormat::Phone => schema.insert("pattern".into(), json!(PHONE_PATTERN)),
        };
    }
    if let Some(pattern) = &rules.pattern {
        schema.insert("pattern".into(), json!(pattern.value));
    }
    let counts = [
        ("minLength", &rules.min_length),
        ("maxLength", &rules.max_length),
        ("minItems", &rules.min_items),
        ("maxItems", &rules.max_items),
    ];
    for (key, value) in counts {
        if let Some(value) = value {
            schema.insert(key.into(), json!(value.value));
        }
    }
    if let Some(values) = &rules.enumeration {
        schema.insert("enum".into(), json!(values.value));
    }
    if let Some(content) = &rules.content {
        let media = match content.value {
            ContentKind::Text => "text/plain",
            ContentKind::Markdown => "text/markdown",
            ContentKind::Html => "text/html",
        };
        schema.insert("contentMediaType".into(), json!(media));
    }
    let dated = matches!(entry.ty.as_ref().map(|ty| ty.value), Some(ValueType::Date | ValueType::DateTime));
    for (key, bound) in [("minimum", &rules.minimum), ("maximum", &rules.maximum)] {
        if let Some(bound) = bound {
            let key = if dated { format!("format{}{}", key[..1].to_uppercase(), &key[1..]) } else { key.to_string() };
            schema.insert(key, bound_json(&bound.value));
        }
    }
    if let Some(accept) = &rules.accept {
        schema.insert("x-accept".into(), json!(accept.value));
    }
    if let Some(size) = &rules.max_size {
        schema.insert("x-max-size".into(), json!(size.value));
    }
    Value::Object(schema)
}

/// The JSON Schema of a `requires` list.
pub fn schema(entries: &[ast::SignatureEntry]) -> Value {
    let mut properties = Map::new();
    for entry in entries {
        properties.insert(entry.name.value.clone(), entry_schema(entry));
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": entries.iter().map(|entry| entry.name.value.clone()).collect::<Vec<_>>(),
    })
}

fn schema_text(entries: &[ast::SignatureEntry]) -> String {
    serde_json::to_string(&schema(entries)).unwrap_or_else(|_| "{}".to_string())
}

fn entry_line(entry: &ast::SignatureEntry) -> String {
    let mut line = format!("- {}", entry.name.value);
    if let Some(ty) = &entry.ty {
        line.push_str(&format!(" ({})", ty.value.as_str()));
    }
    if let Some(description) = &entry.description {
        line.push_str(" — ");
        line.push_str(&description.value.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    line
}

/// The signature lines of the volatile block for sessions started by this trigger.
pub fn signature_prompt(trigger: &Trigger, child: bool) -> String {
    if trigger.requires.is_empty() && trigger.returns.is_empty() {
        return String::new();
    }
    let mut lines = vec!["## This session's signature".to_string()];
    if !trigger.requires.is_empty() {
        lines.push(String::new());
        lines.push("It was started with these variables (read them with `archmax_get_variables`):".to_string());
        lines.extend(trigger.requires.iter().map(entry_line));
    }
    if !trigger.returns.is_empty() {
        lines.push(String::new());
        lines.push(
            "Before it completes, set each of these with `archmax_set_variables` once its value is final:".to_string(),
        );
        lines.extend(trigger.returns.iter().map(entry_line));
        lines.push(String::new());
        lines.push(if child {
            "Anything left unset reaches the caller as null, with a note naming it; a value of the wrong type fails the call.".to_string()
        } else {
            "A session that completes without all of them, or with a value of the wrong type, is rejected.".to_string()
        });
    }
    lines.join("\n")
}

/// The signature of a callee, as the calling state's tool.
pub fn callee(tool: Sym, workflow: WorkflowId, callee: &Workflow, interner: &mut Interner) -> Callee {
    let manual = callee.manual_trigger();
    let mut description = Vec::new();
    if let Some(text) = manual.and_then(|trigger| trigger.description.as_ref()) {
        description.push(text.value.trim().to_string());
    }
    match &callee.title {
        Some(title) => {
            description.push(format!("Runs the workflow `{}` ({}) as a sub-workflow.", callee.slug, title.value.trim()))
        }
        None => description.push(format!("Runs the workflow `{}` as a sub-workflow.", callee.slug)),
    }
    let returns: Vec<&ast::SignatureEntry> = manual.map(|trigger| trigger.returns.iter().collect()).unwrap_or_default();
    if returns.is_empty() {
        description.push("It answers with its closing message.".to_string());
    } else {
        let names: Vec<String> = returns.iter().map(|entry| entry.name.value.clone()).collect();
        description.push(format!(
            "It answers with JSON `{{ \"message\": …, \"returns\": {{ {} }} }}`; record what you need with archmax_set_variables.",
            names.join(", ")
        ));
    }
    let parameters = manual.map(|trigger| schema(&trigger.requires)).unwrap_or_else(|| schema(&[]));
    Callee {
        tool,
        workflow,
        description: interner.intern(&description.join(" ")),
        parameters: interner.intern(&serde_json::to_string(&parameters).unwrap_or_else(|_| "{}".to_string())),
        returns: returns.iter().map(|entry| interner.intern(&entry.name.value)).collect(),
    }
}
