//! JSON Schema (2020-12) documents rendered as key references: every key a file may hold,
//! by its dotted path, with its type, whether it is required, its default and the
//! schema's own description of it.
//!
//! The walk follows `$ref` into `$defs`, maps (`additionalProperties`) as `<name>`,
//! lists as `[]`, and the object variants of `oneOf`/`anyOf` under the same path, so a
//! key that may be written in two shapes is listed once with both types.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One documented key.
#[derive(Debug, Clone)]
pub struct Key {
    /// Dotted from the document's root: `states.<name>.transitions[].to`.
    pub path: String,
    pub kind: String,
    pub required: bool,
    pub description: String,
    /// Constraints worth a reader's eye: allowed values, pattern, bounds, default.
    pub notes: Vec<String>,
}

/// Every key of `root`, in document order, each path once.
pub fn keys(root: &Value) -> Vec<Key> {
    keys_in(root, root)
}

/// Every key under `start`, a schema inside `root` (which its `$ref`s resolve against).
pub fn keys_in(root: &Value, start: &Value) -> Vec<Key> {
    let mut walker = Walker { root, keys: Vec::new(), seen: BTreeSet::new(), stack: Vec::new() };
    walker.children_through(start, "");
    walker.keys
}

struct Walker<'a> {
    root: &'a Value,
    keys: Vec<Key>,
    seen: BTreeSet<String>,
    /// The `$ref`s being expanded, so a recursive definition stops at its second visit.
    stack: Vec<String>,
}

impl<'a> Walker<'a> {
    /// `schema` with its `$ref` followed, and the reference's name when there was one.
    fn resolve(&self, schema: &'a Value) -> (&'a Value, Option<String>) {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(target) => match target.strip_prefix("#").and_then(|pointer| self.root.pointer(pointer)) {
                Some(found) => (found, Some(target.to_string())),
                None => (schema, None),
            },
            None => (schema, None),
        }
    }

    fn key(&mut self, schema: &'a Value, path: &str, required: bool) {
        let (resolved, reference) = self.resolve(schema);
        if self.seen.insert(path.to_string()) {
            let description = description(schema).or_else(|| description(resolved)).unwrap_or_default();
            self.keys.push(Key {
                path: path.to_string(),
                kind: type_of(self.root, schema, 0),
                required,
                description,
                notes: notes(resolved),
            });
        }
        if let Some(reference) = reference {
            if self.stack.contains(&reference) {
                return;
            }
            self.stack.push(reference);
            self.children(resolved, path);
            self.stack.pop();
        } else {
            self.children(resolved, path);
        }
    }

    /// The keys under a value at `path`: its properties, a map's entries, a list's items,
    /// and those of each variant.
    fn children(&mut self, schema: &'a Value, path: &str) {
        self.object_children(schema, path);
        if let Some(items) = schema.get("items") {
            let (items, _) = self.resolve(items);
            if is_structured(self.root, items) {
                let inner = format!("{path}[]");
                self.children_through(items, &inner);
            }
        }
        for variants in ["oneOf", "anyOf", "allOf"] {
            for variant in schema.get(variants).and_then(Value::as_array).into_iter().flatten() {
                self.children_through(variant, path);
            }
        }
    }

    /// `children` of a schema reached through a possible `$ref`, guarded against cycles.
    fn children_through(&mut self, schema: &'a Value, path: &str) {
        let (resolved, reference) = self.resolve(schema);
        if let Some(reference) = &reference {
            if self.stack.contains(reference) {
                return;
            }
            self.stack.push(reference.clone());
        }
        self.children(resolved, path);
        if reference.is_some() {
            self.stack.pop();
        }
    }

    fn object_children(&mut self, schema: &'a Value, path: &str) {
        let required: BTreeSet<&str> =
            schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let inner = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                self.key(property, &inner, required.contains(name.as_str()));
            }
        }
        if let Some(entries) = schema.get("additionalProperties").filter(|value| value.is_object()) {
            let (resolved, _) = self.resolve(entries);
            if is_structured(self.root, resolved) {
                let inner = if path.is_empty() { "<name>".to_string() } else { format!("{path}.<name>") };
                self.children_through(entries, &inner);
            }
        }
    }
}

/// Whether a value of this schema has keys or items of its own worth listing.
fn is_structured(root: &Value, schema: &Value) -> bool {
    let schema = follow(root, schema);
    schema.get("properties").is_some()
        || schema.get("additionalProperties").is_some_and(Value::is_object)
        || schema.get("items").is_some_and(|items| is_structured(root, items))
        || ["oneOf", "anyOf"].iter().any(|variants| {
            schema
                .get(*variants)
                .and_then(Value::as_array)
                .is_some_and(|all| all.iter().any(|variant| is_structured(root, variant)))
        })
}

/// `schema` with one `$ref` followed.
fn follow<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|target| target.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(schema)
}

fn description(schema: &Value) -> Option<String> {
    schema.get("description").and_then(Value::as_str).map(str::to_string)
}

/// A short type: `string`, `integer`, `list of string`, `map of object`, `"a" or "b"`.
pub fn type_of(root: &Value, schema: &Value, depth: usize) -> String {
    if depth > 4 {
        return "value".to_string();
    }
    let schema = follow(root, schema);
    if let Some(constant) = schema.get("const") {
        return format!("`{constant}`");
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().map(|value| format!("`{value}`")).collect();
        return shown.join(" or ");
    }
    for variants in ["oneOf", "anyOf"] {
        if let Some(all) = schema.get(variants).and_then(Value::as_array) {
            let mut kinds: Vec<String> = Vec::new();
            for variant in all {
                let kind = type_of(root, variant, depth + 1);
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            if !kinds.is_empty() {
                return kinds.join(" or ");
            }
        }
    }
    let declared: Vec<&str> = match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let object_like = declared.contains(&"object") || schema.get("properties").is_some();
    let shown: Vec<String> = declared
        .iter()
        .map(|kind| match *kind {
            "array" => match schema.get("items") {
                Some(items) => format!("list of {}", type_of(root, items, depth + 1)),
                None => "list".to_string(),
            },
            "object" => match schema.get("additionalProperties") {
                Some(entries) if entries.is_object() && schema.get("properties").is_none() => {
                    format!("map of {}", type_of(root, entries, depth + 1))
                }
                _ => "object".to_string(),
            },
            other => other.to_string(),
        })
        .collect();
    if !shown.is_empty() {
        return shown.join(" or ");
    }
    if object_like { "object".to_string() } else { "any value".to_string() }
}

/// The constraints a reader needs beside the description.
fn notes(schema: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    let text = |key: &str| schema.get(key).map(Value::to_string);
    if let Some(default) = text("default") {
        notes.push(format!("default `{default}`"));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        notes.push(format!("matches `{pattern}`"));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        notes.push(format!("format `{format}`"));
    }
    if let Some(names) = schema.get("propertyNames").and_then(|names| names.get("pattern")).and_then(Value::as_str) {
        notes.push(format!("names match `{names}`"));
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    for (key, label) in [("minimum", "at least"), ("maximum", "at most"), ("exclusiveMinimum", "more than")] {
        if let Some(bound) = text(key) {
            notes.push(format!("{label} {bound}"));
        }
    }
    for (key, at, one, many) in [
        ("minLength", "at least", "not empty", "characters"),
        ("maxLength", "at most", "", "characters"),
        ("minItems", "at least", "at least one item", "items"),
        ("maxItems", "at most", "", "items"),
        ("minProperties", "at least", "at least one entry", "entries"),
    ] {
        match count(key) {
            Some(1) if !one.is_empty() => notes.push(one.to_string()),
            Some(bound) => notes.push(format!("{at} {bound} {many}")),
            None => {}
        }
    }
    if schema.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        notes.push("no duplicates".to_string());
    }
    notes
}

/// The keys as Markdown: a heading per key (so each has an anchor) with its type, whether
/// it is required, its constraints and its description.
pub fn render(keys: &[Key], heading: &str) -> String {
    let mut out = String::new();
    for key in keys {
        out.push_str(&format!("{heading} `{}`\n\n", key.path));
        let mut facts = vec![format!("*Type:* {}", key.kind)];
        if key.required {
            facts.push("*required*".to_string());
        }
        facts.extend(key.notes.iter().cloned());
        out.push_str(&facts.join(" · "));
        out.push_str("\n\n");
        if !key.description.is_empty() {
            out.push_str(key.description.trim());
            out.push_str("\n\n");
        }
    }
    out
}

/// The object's `properties` and `required`, for the event pages.
pub fn properties(schema: &Value) -> (Option<&Map<String, Value>>, BTreeSet<String>) {
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    (schema.get("properties").and_then(Value::as_object), required.map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_maps_lists_and_variants_are_walked_to_dotted_paths() {
        let schema = json!({
            "type": "object",
            "required": ["states"],
            "properties": {
                "states": {
                    "type": "object",
                    "description": "The states.",
                    "additionalProperties": { "$ref": "#/$defs/state" }
                },
                "mode": { "enum": ["a", "b"], "default": "a" }
            },
            "$defs": {
                "state": {
                    "type": "object",
                    "properties": {
                        "transitions": { "type": "array", "items": { "$ref": "#/$defs/edge" } },
                        "next": { "$ref": "#/$defs/state" }
                    }
                },
                "edge": {
                    "oneOf": [
                        { "type": "string" },
                        { "type": "object", "required": ["to"], "properties": { "to": { "type": "string", "description": "Where." } } }
                    ]
                }
            }
        });
        let keys = keys(&schema);
        let paths: Vec<&str> = keys.iter().map(|key| key.path.as_str()).collect();
        assert_eq!(
            paths,
            ["states", "states.<name>.transitions", "states.<name>.transitions[].to", "states.<name>.next", "mode"]
        );
        assert!(keys[0].required);
        assert_eq!(keys[0].kind, "map of object");
        assert_eq!(keys[1].kind, "list of string or object");
        assert_eq!(keys[2].description, "Where.");
        assert!(keys[2].required);
        assert_eq!(keys[4].kind, "`\"a\"` or `\"b\"`");
        assert_eq!(keys[4].notes, ["default `\"a\"`"]);
    }
}
