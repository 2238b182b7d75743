//! `[inbox.workflows.<slug>.fields.<input>]`: the shape of an `object` input, which the
//! workflow's signature types but does not describe, so the inbox can generate a form
//! for it (a fieldset per object, one typed control per field) instead of a JSON box.
//!
//! ```toml
//! [inbox.workflows.claims.fields.claim]
//! fields = [
//!   { name = "amount", type = "number", label = "Amount (EUR)", required = true },
//!   { name = "kind", type = "string", enum = ["travel", "meal"] },
//!   { name = "tags", type = "array", items = "string" },
//!   { name = "vendor", type = "object", fields = [{ name = "name", type = "string" }] },
//! ]
//! ```
//!
//! A field's `type` is one of the signature's types but `file`; `object` nests its own
//! `fields`, at most [`MAX_DEPTH`] objects deep; `array` takes `items` (a scalar type,
//! `string` when left out). Here the table's own shape is checked (types, names,
//! repeats, depth); that `<input>` is an `object` input of the workflow is checked where
//! the programs are known (`archmax serve` at start).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use archmax_program::diagnostic::{did_you_mean, list_names};

/// How deep objects nest: the input is depth 1.
pub const MAX_DEPTH: usize = 4;
/// The most fields one object declares.
pub const MAX_FIELDS: usize = 32;
/// The most characters of a label.
const MAX_LABEL: usize = 120;

/// The keys a field takes.
const FIELD_KEYS: [&str; 7] = ["name", "type", "label", "required", "enum", "items", "fields"];
/// The types a field takes.
const TYPES: [&str; 8] = ["string", "integer", "number", "boolean", "date", "date-time", "object", "array"];
/// The types an array's items take.
const ITEM_TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "date", "date-time"];

/// An object's declared fields, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectShape {
    pub fields: Vec<FieldShape>,
}

/// One field of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldShape {
    pub name: String,
    pub kind: FieldKind,
    /// What the form's label says (the name when none).
    pub label: Option<String>,
    pub required: bool,
}

/// A field's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A string, with the choices of its `enum` (none: free text).
    String(Vec<String>),
    Integer,
    Number,
    Boolean,
    Date,
    DateTime,
    Object(ObjectShape),
    /// A list, one item per line, each of the scalar type named (`string`, ...).
    Array(String),
}

impl FieldKind {
    /// The type's name as the signature writes it.
    pub fn name(&self) -> &str {
        match self {
            FieldKind::String(_) => "string",
            FieldKind::Integer => "integer",
            FieldKind::Number => "number",
            FieldKind::Boolean => "boolean",
            FieldKind::Date => "date",
            FieldKind::DateTime => "date-time",
            FieldKind::Object(_) => "object",
            FieldKind::Array(_) => "array",
        }
    }
}

/// Refuses a value: its place, what is wrong, what to write.
pub(super) type Refuse<'a> = dyn FnMut(Range<usize>, String, String) + 'a;

/// Reads `[<where_>.fields]`: one table per object input, each with its `fields`.
pub(super) fn read(
    where_: &str,
    value: &Spanned<DeValue<'_>>,
    refuse: &mut Refuse<'_>,
) -> BTreeMap<String, ObjectShape> {
    let mut shapes = BTreeMap::new();
    let DeValue::Table(inputs) = value.get_ref() else {
        refuse(
            value.span(),
            format!("`{where_}.fields` is not a table"),
            format!("write one `[{where_}.fields.<input>]` table per object input"),
        );
        return shapes;
    };
    for (input, table) in inputs.iter() {
        let input = input.get_ref().as_ref();
        let here = format!("{where_}.fields.{input}");
        let DeValue::Table(keys) = table.get_ref() else {
            refuse(table.span(), format!("`{here}` is not a table"), format!("write `[{here}]` with `fields = [...]`"));
            continue;
        };
        if let Some(shape) = object(&here, keys, table.span(), 1, refuse) {
            shapes.insert(input.to_string(), shape);
        }
    }
    shapes
}

/// The shape of the object `keys` describes (its `fields` and nothing else).
fn object(
    here: &str,
    keys: &DeTable<'_>,
    span: Range<usize>,
    depth: usize,
    refuse: &mut Refuse<'_>,
) -> Option<ObjectShape> {
    let mut whole = true;
    for (key, _) in keys.iter() {
        if key.get_ref().as_ref() != "fields" {
            let message = format!("`{here}.{}` is not a setting", key.get_ref().as_ref());
            refuse(key.span(), message, format!("`[{here}]` takes `fields = [{{ name, type }}, ...]`"));
            whole = false;
        }
    }
    let Some(list) = keys.get("fields") else {
        refuse(
            span,
            format!("`{here}` declares no `fields`"),
            "add `fields = [{ name = \"...\", type = \"string\" }]`".into(),
        );
        return None;
    };
    fields(here, list, depth, refuse).filter(|_| whole)
}

/// An object's `fields` list, at `depth`.
fn fields(here: &str, list: &Spanned<DeValue<'_>>, depth: usize, refuse: &mut Refuse<'_>) -> Option<ObjectShape> {
    if depth > MAX_DEPTH {
        refuse(
            list.span(),
            format!("`{here}` nests objects {depth} deep; at most {MAX_DEPTH} are allowed"),
            "flatten the shape, or take the deepest part as an `array` or a JSON `object` input of its own".into(),
        );
        return None;
    }
    let DeValue::Array(items) = list.get_ref() else {
        refuse(
            list.span(),
            format!("`{here}.fields` is not a list"),
            "write `fields = [{ name = \"amount\", type = \"number\" }]`".into(),
        );
        return None;
    };
    if items.len() > MAX_FIELDS || items.is_empty() {
        refuse(
            list.span(),
            format!("`{here}.fields` holds {} fields; give 1 to {MAX_FIELDS}", items.len()),
            "declare the fields the form asks for".into(),
        );
        return None;
    }
    let mut shape = ObjectShape::default();
    let mut whole = true;
    for item in items.iter() {
        match field(here, item, depth, refuse) {
            Some(field) if shape.fields.iter().any(|known| known.name == field.name) => {
                refuse(
                    item.span(),
                    format!("`{here}` declares the field `{}` twice", field.name),
                    "give each field its own name".into(),
                );
                whole = false;
            }
            Some(field) => shape.fields.push(field),
            None => whole = false,
        }
    }
    whole.then_some(shape)
}

/// One `{ name, type, ... }` entry.
fn field(here: &str, item: &Spanned<DeValue<'_>>, depth: usize, refuse: &mut Refuse<'_>) -> Option<FieldShape> {
    let DeValue::Table(keys) = item.get_ref() else {
        refuse(
            item.span(),
            format!("a field of `{here}` is not a table"),
            "write `{ name = \"amount\", type = \"number\" }`".into(),
        );
        return None;
    };
    let text = |key: &str| match keys.get(key).map(Spanned::get_ref) {
        Some(DeValue::String(text)) => Some(text.to_string()),
        _ => None,
    };
    let Some(name) = text("name").filter(|name| is_field_name(name)) else {
        refuse(
            item.span(),
            format!("a field of `{here}` has no good `name`"),
            "name it with letters, digits, `_` or `-`, starting with a letter, such as `amount`".into(),
        );
        return None;
    };
    let path = format!("{here}.{name}");
    let mut whole = true;
    for (key, _) in keys.iter() {
        let key_name = key.get_ref().as_ref();
        if !FIELD_KEYS.contains(&key_name) {
            let help = match did_you_mean(key_name, FIELD_KEYS) {
                Some(close) => format!("did you mean `{close}`? a field takes {}", list_names(&FIELD_KEYS)),
                None => format!("a field takes {}", list_names(&FIELD_KEYS)),
            };
            refuse(key.span(), format!("`{path}.{key_name}` is not a setting"), help);
            whole = false;
        }
    }
    let ty = text("type").unwrap_or_default();
    let only_on = |key: &str, on: &str, refuse: &mut Refuse<'_>| {
        if let Some(value) = keys.get(key)
            && ty != on
        {
            refuse(
                value.span(),
                format!("`{path}.{key}` is for `type = \"{on}\"` fields"),
                format!("remove `{key}`, or make the field a {on}"),
            );
            return false;
        }
        true
    };
    whole &=
        only_on("enum", "string", refuse) & only_on("items", "array", refuse) & only_on("fields", "object", refuse);
    let kind = match ty.as_str() {
        "string" => FieldKind::String(choices(&path, keys, refuse)?),
        "integer" => FieldKind::Integer,
        "number" => FieldKind::Number,
        "boolean" => FieldKind::Boolean,
        "date" => FieldKind::Date,
        "date-time" => FieldKind::DateTime,
        "object" => FieldKind::Object(object_of(&path, keys, item.span(), depth + 1, refuse)?),
        "array" => FieldKind::Array(items(&path, keys, refuse)?),
        other => {
            let help = match did_you_mean(other, TYPES) {
                Some(close) => format!("did you mean `{close}`? a field's type is one of {}", list_names(&TYPES)),
                None => format!(
                    "a field's type is one of {} (a file is uploaded as an input of its own)",
                    list_names(&TYPES)
                ),
            };
            let at = keys.get("type").map_or(item.span(), Spanned::span);
            refuse(at, format!("`{path}` has the type `{other}`, which a field cannot have"), help);
            return None;
        }
    };
    let label = match keys.get("label") {
        None => None,
        Some(value) => match value.get_ref() {
            DeValue::String(label) if !label.trim().is_empty() && label.chars().count() <= MAX_LABEL => {
                Some(label.to_string())
            }
            _ => {
                refuse(
                    value.span(),
                    format!("`{path}.label` is not a label"),
                    format!("write a text of 1 to {MAX_LABEL} characters"),
                );
                return None;
            }
        },
    };
    let required = match keys.get("required") {
        None => false,
        Some(value) => match value.get_ref() {
            DeValue::Boolean(required) => *required,
            _ => {
                refuse(
                    value.span(),
                    format!("`{path}.required` is not true or false"),
                    "write `required = true`".into(),
                );
                return None;
            }
        },
    };
    whole.then_some(FieldShape { name, kind, label, required })
}

/// A nested object's shape, from the field's own `fields`.
fn object_of(
    path: &str,
    keys: &DeTable<'_>,
    span: Range<usize>,
    depth: usize,
    refuse: &mut Refuse<'_>,
) -> Option<ObjectShape> {
    let Some(list) = keys.get("fields") else {
        refuse(
            span,
            format!("`{path}` is an object without `fields`"),
            "add `fields = [{ name = \"...\", type = \"string\" }]`".into(),
        );
        return None;
    };
    fields(path, list, depth, refuse)
}

/// A string field's `enum`: distinct strings, or none.
fn choices(path: &str, keys: &DeTable<'_>, refuse: &mut Refuse<'_>) -> Option<Vec<String>> {
    let Some(value) = keys.get("enum") else { return Some(Vec::new()) };
    let mut choices: Vec<String> = Vec::new();
    if let DeValue::Array(items) = value.get_ref() {
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(choice) if !choices.iter().any(|known| known == choice.as_ref()) => {
                    choices.push(choice.to_string())
                }
                _ => {
                    choices.clear();
                    break;
                }
            }
        }
    }
    if choices.is_empty() {
        refuse(
            value.span(),
            format!("`{path}.enum` is not a list of distinct strings"),
            "write `enum = [\"travel\", \"meal\"]`".into(),
        );
        return None;
    }
    Some(choices)
}

/// An array field's item type.
fn items(path: &str, keys: &DeTable<'_>, refuse: &mut Refuse<'_>) -> Option<String> {
    let Some(value) = keys.get("items") else { return Some("string".to_string()) };
    match value.get_ref() {
        DeValue::String(ty) if ITEM_TYPES.contains(&ty.as_ref()) => Some(ty.to_string()),
        _ => {
            refuse(
                value.span(),
                format!("`{path}.items` is not an item type"),
                format!("an array's items are one of {}", list_names(&ITEM_TYPES)),
            );
            None
        }
    }
}

/// A field's name: a letter, then letters, digits, `_` or `-` (no dot: a control's
/// name is the field's dotted path).
fn is_field_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> (BTreeMap<String, ObjectShape>, Vec<String>) {
        let document = DeTable::parse(text).expect("TOML");
        let document = document.get_ref();
        let value = document.get("fields").expect("a fields table");
        let mut problems = Vec::new();
        let shapes =
            read("inbox.workflows.claims", value, &mut |_, message, help| problems.push(format!("{message} ({help})")));
        (shapes, problems)
    }

    #[test]
    fn a_shape_nests_objects_and_types_each_field() {
        let (shapes, problems) = read_text(
            "[fields.claim]\nfields = [\n { name = \"amount\", type = \"number\", label = \"Amount\", required = true },\n \
             { name = \"kind\", type = \"string\", enum = [\"travel\", \"meal\"] },\n { name = \"tags\", type = \"array\", items = \"date\" },\n \
             { name = \"vendor\", type = \"object\", fields = [{ name = \"name\", type = \"string\" }] },\n]\n",
        );
        assert_eq!(problems, Vec::<String>::new());
        let claim = &shapes["claim"];
        assert_eq!(claim.fields.len(), 4);
        assert_eq!((claim.fields[0].label.as_deref(), claim.fields[0].required), (Some("Amount"), true));
        assert_eq!(claim.fields[1].kind, FieldKind::String(vec!["travel".into(), "meal".into()]));
        assert_eq!(claim.fields[2].kind, FieldKind::Array("date".into()));
        let FieldKind::Object(vendor) = &claim.fields[3].kind else { panic!("an object") };
        assert_eq!(vendor.fields[0].name, "name");
    }

    #[test]
    fn every_bad_shape_is_named() {
        let nested = |depth: usize| {
            let mut inner = "{ name = \"leaf\", type = \"string\" }".to_string();
            for level in 0..depth {
                inner = format!("{{ name = \"level{level}\", type = \"object\", fields = [{inner}] }}");
            }
            format!("[fields.claim]\nfields = [{inner}]\n")
        };
        let cases = [
            (
                "[fields.claim]\nfields = [{ name = \"doc\", type = \"file\" }]\n",
                "`inbox.workflows.claims.fields.claim.doc` has the type `file`",
            ),
            ("[fields.claim]\nfields = [{ name = \"a\", type = \"strng\" }]\n", "did you mean `string`?"),
            (
                "[fields.claim]\nfields = [{ name = \"a\", type = \"string\" }, { name = \"a\", type = \"number\" }]\n",
                "declares the field `a` twice",
            ),
            ("[fields.claim]\nfields = [{ name = \"a.b\", type = \"string\" }]\n", "has no good `name`"),
            (
                "[fields.claim]\nfields = [{ name = \"a\", type = \"number\", enum = [\"x\"] }]\n",
                "`inbox.workflows.claims.fields.claim.a.enum` is for `type = \"string\"` fields",
            ),
            (
                "[fields.claim]\nfields = [{ name = \"a\", type = \"array\", items = \"object\" }]\n",
                "is not an item type",
            ),
            ("[fields.claim]\nfields = [{ name = \"a\", type = \"object\" }]\n", "is an object without `fields`"),
            (
                "[fields.claim]\nfields = [{ name = \"a\", type = \"string\", lable = \"A\" }]\n",
                "did you mean `label`?",
            ),
            (
                "[fields.claim]\nshape = 1\nfields = [{ name = \"a\", type = \"string\" }]\n",
                "`inbox.workflows.claims.fields.claim.shape` is not a setting",
            ),
            ("[fields.claim]\n", "declares no `fields`"),
            ("[fields]\nclaim = 3\n", "`inbox.workflows.claims.fields.claim` is not a table"),
        ];
        for (text, says) in cases {
            let (shapes, problems) = read_text(text);
            assert!(problems.iter().any(|problem| problem.contains(says)), "{text}: {problems:?}");
            assert!(!shapes.contains_key("claim"), "{text}: a bad shape is not kept");
        }
        let (shapes, problems) = read_text(&nested(3));
        assert!(problems.is_empty() && shapes.contains_key("claim"), "four objects deep: {problems:?}");
        let (_, problems) = read_text(&nested(4));
        assert!(problems.iter().any(|problem| problem.contains("nests objects 5 deep; at most 4")), "{problems:?}");
    }
}
