//! The HTTP API page, read from the OpenAPI document `archmax serve` answers at
//! `GET /v1/openapi.json` (`archmax_serve::openapi::document`): every operation with its
//! scope, parameters, body and answers, then every body type's keys.

use serde_json::Value;

use super::Page;
use super::schema::{keys_in, type_of};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

pub fn page() -> Page {
    let document = archmax_serve::openapi::document();
    let mut text = String::from("# The HTTP API\n\n");
    if let Some(description) = document.pointer("/info/description").and_then(Value::as_str) {
        text.push_str(description.trim());
        text.push_str("\n\n");
    }
    text.push_str(
        "A running server answers `GET /v1/openapi.json` with the OpenAPI 3.1 document this page is made \
         from; generate a client from it. Operations that name a scope need a bearer token that holds it.\n\n",
    );
    for (path, item) in document.get("paths").and_then(Value::as_object).into_iter().flatten() {
        for method in METHODS {
            let Some(operation) = item.get(method) else { continue };
            text.push_str(&operation_section(&document, method, path, operation));
        }
    }
    text.push_str("## Body types\n\n");
    let components = document.pointer("/components/schemas").and_then(Value::as_object);
    for (name, schema) in components.into_iter().flatten() {
        if name.starts_with("Event") {
            continue;
        }
        text.push_str(&format!("### `{name}`\n\n"));
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            text.push_str(description.trim());
            text.push_str("\n\n");
        }
        let keys = keys_in(&document, schema);
        if keys.is_empty() {
            text.push_str(&format!("*Type:* {}\n\n", type_of(&document, schema, 0)));
        }
        for key in keys {
            text.push_str(&format!("- `{}` ({}){}", key.path, key.kind, if key.required { ", required" } else { "" }));
            if !key.description.is_empty() {
                text.push_str(&format!(": {}", one_line(&key.description)));
            }
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str("The event stream's `data` lines are [events](events/index.md).\n");
    Page { path: "http-api.md".to_string(), title: "HTTP API".to_string(), text }
}

fn operation_section(document: &Value, method: &str, path: &str, operation: &Value) -> String {
    let mut text = format!("## `{} {path}`\n\n", method.to_uppercase());
    for key in ["summary", "description"] {
        if let Some(line) = operation.get(key).and_then(Value::as_str) {
            text.push_str(line.trim());
            text.push_str("\n\n");
        }
    }
    let scopes: Vec<String> = operation
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|requirement| requirement.get("bearer"))
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
        .map(|scope| format!("`{scope}`"))
        .collect();
    if scopes.is_empty() {
        text.push_str("*Scope:* none (no token needed).\n\n");
    } else {
        text.push_str(&format!("*Scope:* {}.\n\n", scopes.join(", ")));
    }
    let parameters: Vec<&Value> = operation.get("parameters").and_then(Value::as_array).into_iter().flatten().collect();
    if !parameters.is_empty() {
        text.push_str("Parameters:\n\n");
        for parameter in parameters {
            let name = parameter.get("name").and_then(Value::as_str).unwrap_or("?");
            let place = parameter.get("in").and_then(Value::as_str).unwrap_or("?");
            let kind = parameter.get("schema").map(|schema| type_of(document, schema, 0)).unwrap_or_default();
            let required =
                if parameter.get("required").and_then(Value::as_bool) == Some(true) { ", required" } else { "" };
            text.push_str(&format!("- `{name}` (in {place}, {kind}{required})"));
            if let Some(description) = parameter.get("description").and_then(Value::as_str) {
                text.push_str(&format!(": {}", one_line(description)));
            }
            text.push('\n');
        }
        text.push('\n');
    }
    if let Some(content) = operation.pointer("/requestBody/content").and_then(Value::as_object) {
        for (media, body) in content {
            text.push_str(&format!("Body (`{media}`): {}.\n\n", body_name(document, body)));
        }
    }
    text.push_str("Answers:\n\n");
    for (status, answer) in operation.get("responses").and_then(Value::as_object).into_iter().flatten() {
        let description = answer.get("description").and_then(Value::as_str).unwrap_or_default();
        let bodies: Vec<String> = answer
            .get("content")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(media, body)| format!("`{media}` {}", body_name(document, body)))
            .collect();
        let bodies = if bodies.is_empty() { String::new() } else { format!(" ({})", bodies.join("; ")) };
        text.push_str(&format!("- **{status}**{bodies}: {}\n", one_line(description)));
    }
    text.push('\n');
    text
}

/// The body's component name as a link to its section, or its type.
fn body_name(document: &Value, body: &Value) -> String {
    let Some(schema) = body.get("schema") else { return "any".to_string() };
    match schema.get("$ref").and_then(Value::as_str).and_then(|target| target.rsplit('/').next()) {
        Some(name) if name.starts_with("Event") => format!("[`{name}`](events/index.md)"),
        Some(name) => format!("[`{name}`](#{})", name.to_lowercase()),
        None => type_of(document, schema, 0),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
