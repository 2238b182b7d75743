//! JSON Schemas (2020-12) for what authors write: `workflow.yaml`, `*.test.yaml` and
//! `archmax.toml`, for editors (`# yaml-language-server: $schema=…`) and CI linters.
//!
//! `archmax schema` prints them and `schemas/` holds the same text, kept equal by a test.
//! They describe the shape (keys, types, enums, required keys); the compiler's checks
//! stay the authority on everything else (references, governance, graph rules). The one
//! thing to know: every object the compiler reads strictly is closed here
//! (`additionalProperties: false`), and a unit test holds each closed object's
//! properties to the key table the compiler's reader uses, so the schema cannot list a
//! key the compiler refuses or miss one it reads. Trigger declarations stay open: the
//! compiler keeps a host's own keys there with a warning.
//!
//! A key the runtime fills in when it is left out carries a JSON Schema `default`, taken
//! from the constant the compiler or the configuration reader applies, so the book's
//! reference and an editor's completion show the value that really holds.

mod case;
mod config;
mod workflow;

use serde_json::{Map, Value, json};

/// The documents a schema is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    Workflow,
    Case,
    Config,
}

impl Document {
    pub const ALL: [Document; 3] = [Document::Workflow, Document::Case, Document::Config];

    /// The file name under `schemas/`.
    pub fn file_name(self) -> &'static str {
        match self {
            Document::Workflow => "workflow.schema.json",
            Document::Case => "case.schema.json",
            Document::Config => "config.schema.json",
        }
    }

    pub fn schema(self) -> Value {
        match self {
            Document::Workflow => workflow::schema(),
            Document::Case => case::schema(),
            Document::Config => config::schema(),
        }
    }

    /// The schema as the committed file holds it: pretty JSON and a final newline.
    pub fn text(self) -> String {
        let mut text = serde_json::to_string_pretty(&self.schema()).unwrap_or_else(|_| "{}".to_string());
        text.push('\n');
        text
    }
}

/// The envelope every schema shares.
fn document(id: &str, title: &str, description: &str, body: Value) -> Value {
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("urn:archmax:schemas:{id}"),
        "title": title,
        "description": description,
    });
    if let (Some(target), Value::Object(body)) = (schema.as_object_mut(), body) {
        for (key, value) in body {
            target.entry(key).or_insert(value);
        }
    }
    schema
}

/// A closed object: exactly `properties`, with `required` among them.
fn closed(description: &str, properties: &[(&str, Value)], required: &[&str]) -> Value {
    let mut object = object(description, properties, required);
    object["additionalProperties"] = Value::Bool(false);
    object
}

/// An object that also admits keys it does not list.
fn object(description: &str, properties: &[(&str, Value)], required: &[&str]) -> Value {
    let properties: Map<String, Value> =
        properties.iter().map(|(key, schema)| ((*key).to_string(), schema.clone())).collect();
    let mut object = json!({ "type": "object", "description": description, "properties": properties });
    if !required.is_empty() {
        object["required"] = json!(required);
    }
    object
}

/// `schema` with the value the runtime uses when the key is left out. The reference
/// shows it, and editors offer it.
fn defaults_to(mut schema: Value, value: Value) -> Value {
    schema["default"] = value;
    schema
}

fn text(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn nonempty(description: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "description": description })
}

fn flag(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

fn count(description: &str, minimum: u64) -> Value {
    json!({ "type": "integer", "minimum": minimum, "description": description })
}

fn one_of(description: &str, values: &[&str]) -> Value {
    json!({ "type": "string", "enum": values, "description": description })
}

fn list(description: &str, items: Value) -> Value {
    json!({ "type": "array", "description": description, "items": items })
}

fn reference(definition: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{definition}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_a_2020_12_document_with_an_id() {
        for document in Document::ALL {
            let schema = document.schema();
            assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
            assert!(schema["$id"].as_str().is_some_and(|id| id.ends_with(document.file_name())));
        }
    }
}
