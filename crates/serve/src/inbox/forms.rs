//! Form bodies, and the deliver form generated from a trigger's signature.
//!
//! A trigger's `requires` is published as JSON Schema (`{type: object, properties,
//! required}`); each property becomes one labelled control (text, email, URL, date,
//! number, a yes/no choice, a list for `enum`, a text area for Markdown and for objects
//! and arrays as JSON) and, when the form comes back, one typed value. The runtime
//! checks the values against the signature itself, so a value that does not hold is
//! answered with the runtime's own field problems. An object input whose fields the
//! settings declare is a fieldset instead ([`objects`]), checked field by field here.

use std::collections::BTreeMap;

use maud::{Markup, html};
use serde_json::{Map, Value};

use archmax_config::settings::ObjectShape;

use super::objects;

/// A form's body: its text pairs in order (`application/x-www-form-urlencoded`, or the
/// text parts of `multipart/form-data`), and the files a multipart form carried.
pub struct Form {
    pairs: Vec<(String, String)>,
    /// Files chosen in the form's file controls, each for the input its control names.
    pub files: crate::routes::Uploaded,
}

impl Form {
    /// An `application/x-www-form-urlencoded` body, refused (saying which field) when it
    /// is not UTF-8, or a `%` escape in it is malformed or decodes to bytes that are not
    /// UTF-8: what a person typed is taken as sent or not at all, never with pieces
    /// replaced.
    pub fn parse(body: &[u8]) -> Result<Form, String> {
        let text = std::str::from_utf8(body).map_err(|_| "the form's body is not UTF-8 text".to_string())?;
        let mut pairs = Vec::new();
        for piece in text.split('&').filter(|piece| !piece.is_empty()) {
            let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
            let name = form_decoded(name)
                .ok_or_else(|| "a field's name holds a malformed `%` escape, or one that is not UTF-8".to_string())?;
            let value = form_decoded(value)
                .ok_or_else(|| format!("the field `{name}` holds a malformed `%` escape, or one that is not UTF-8"))?;
            pairs.push((name, value));
        }
        Ok(Form { pairs, files: crate::routes::Uploaded::none() })
    }

    /// A multipart form's text fields and files.
    pub fn of_parts(pairs: Vec<(String, String)>, files: crate::routes::Uploaded) -> Form {
        Form { pairs, files }
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The first value of `name`, when it holds more than space.
    pub fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(str::trim).filter(|text| !text.is_empty()).map(str::to_string)
    }
}

/// A form's name or value decoded (`+` is a space, `%XX` a byte), when every escape is
/// two hex digits and the bytes are UTF-8.
fn form_decoded(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.bytes();
    while let Some(byte) = rest.next() {
        match byte {
            b'+' => bytes.push(b' '),
            b'%' => {
                let mut digit = || rest.next().and_then(|digit| char::from(digit).to_digit(16));
                let (high, low) = (digit()?, digit()?);
                bytes.push(u8::try_from(high * 16 + low).ok()?);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).ok()
}

/// One field of a signature's schema.
pub struct SchemaField<'a> {
    pub name: &'a str,
    pub schema: &'a Value,
    pub required: bool,
    /// What the label says instead of the name (a declared field's `label`).
    pub label: Option<&'a str>,
}

/// The fields of an object schema, in declaration order.
pub fn fields(schema: &Value) -> Vec<SchemaField<'_>> {
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, schema)| SchemaField { name, schema, required: required.contains(&name.as_str()), label: None })
        .collect()
}

fn kind(schema: &Value) -> (&str, &str) {
    (schema["type"].as_str().unwrap_or("string"), schema["format"].as_str().unwrap_or(""))
}

/// The control for one field, with its label and description; `prefix` keeps the ids of
/// several forms on one page apart.
pub fn control(prefix: &str, field: &SchemaField<'_>) -> Markup {
    control_named(&format!("{prefix}-{}", field.name), &format!("field.{}", field.name), field, None)
}

/// The control for one field with its element `id` and form `name`; `note` is one more
/// hint under the description.
pub fn control_named(id: &str, name: &str, field: &SchemaField<'_>, note: Option<Markup>) -> Markup {
    let schema = field.schema;
    let description = schema["description"].as_str();
    let hint_id = format!("{id}-hint");
    let described = description.map(|_| hint_id.as_str());
    let (ty, format) = kind(schema);
    let input_type = match (ty, format) {
        (_, "email") => "email",
        (_, "uri") => "url",
        (_, "date") => "date",
        (_, "date-time") => "datetime-local",
        ("number" | "integer", _) => "number",
        _ => "text",
    };
    let step = match ty {
        "integer" => Some("1"),
        "number" => Some("any"),
        _ => None,
    };
    let dated_bound = |key: &str| schema[key].as_str().filter(|bound| bound.len() == 10 && bound.as_bytes()[4] == b'-');
    let (min, max) = match ty {
        "number" | "integer" => {
            (schema["minimum"].as_f64().map(number_text), schema["maximum"].as_f64().map(number_text))
        }
        _ => (dated_bound("formatMinimum").map(str::to_string), dated_bound("formatMaximum").map(str::to_string)),
    };
    let long = ty == "object" || ty == "array" || schema["contentMediaType"].as_str() == Some("text/markdown");
    html! {
        div.field {
            label for=(id) {
                (field.label.unwrap_or(field.name))
                @if field.required { " " span.required { "(required)" } }
                @if ty == "object" || ty == "array" { " " span.hint { "(JSON)" } }
            }
            @if let Some(description) = description {
                p.hint id=(hint_id) { (description) }
            }
            @if let Some(note) = note { p.hint { (note) } }
            @if let Some(choices) = schema["enum"].as_array() {
                select id=(id) name=(name) required[field.required] aria-describedby=[described] {
                    @if !field.required { option value="" { "(none)" } }
                    @for choice in choices {
                        @let shown = choice.as_str().map_or_else(|| choice.to_string(), str::to_string);
                        option value=(shown) { (shown) }
                    }
                }
            } @else if ty == "boolean" {
                select id=(id) name=(name) required[field.required] aria-describedby=[described] {
                    option value="" { "(choose)" }
                    option value="true" { "yes" }
                    option value="false" { "no" }
                }
            } @else if is_file(schema) {
                input id=(id) name=(name) type="file" accept=[accept_list(schema)]
                    required[field.required] aria-describedby=[described];
            } @else if long {
                textarea id=(id) name=(name) rows="4" required[field.required] aria-describedby=[described] {}
            } @else {
                input id=(id) name=(name) type=(input_type) step=[step] min=[min] max=[max]
                    pattern=[schema["pattern"].as_str()]
                    minlength=[schema["minLength"].as_u64()] maxlength=[schema["maxLength"].as_u64()]
                    required[field.required] aria-describedby=[described];
            }
        }
    }
}

/// Whether a field takes a file (`type: file`): the form then uploads it.
pub fn is_file(schema: &Value) -> bool {
    schema["x-archmax-type"].as_str() == Some("file")
}

/// A file control's `accept`: the input's own list, as the browser's file picker takes it.
fn accept_list(schema: &Value) -> Option<String> {
    let accepted: Vec<&str> = schema["x-accept"].as_array()?.iter().filter_map(Value::as_str).collect();
    (!accepted.is_empty()).then(|| accepted.join(","))
}

fn number_text(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 { format!("{}", number as i64) } else { number.to_string() }
}

/// The typed variables of a submitted deliver form: each field's text as its schema's
/// type (a value that does not parse is passed on as text, for the runtime to refuse
/// with its own words); an empty field is left out. An object with a declared shape in
/// `shapes` is assembled from its controls ([`objects::value`]), and a field of it that
/// does not fit is a problem named by its path.
pub fn variables(
    schema: &Value,
    form: &Form,
    shapes: &BTreeMap<String, ObjectShape>,
) -> Result<Map<String, Value>, Vec<String>> {
    let mut variables = Map::new();
    let mut problems = Vec::new();
    for field in fields(schema).into_iter().filter(|field| !is_file(field.schema)) {
        if let Some(shape) = shapes.get(field.name).filter(|_| field.schema["type"].as_str() == Some("object")) {
            match objects::value(field.name, shape, form) {
                Ok(Some(value)) => {
                    variables.insert(field.name.to_string(), value);
                }
                Ok(None) => {}
                Err(mut found) => problems.append(&mut found),
            }
            continue;
        }
        let Some(text) = form.get(&format!("field.{}", field.name)) else { continue };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let (ty, format) = kind(field.schema);
        let value = match (ty, format) {
            ("integer", _) => text.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(text)),
            ("number", _) => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or_else(|| Value::from(text)),
            ("boolean", _) => match text {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => Value::from(other),
            },
            // Strict like every JSON body: text naming a key twice stays text, which the
            // signature check then refuses, never an object with one of the values dropped.
            ("object" | "array", _) => crate::strict_json::parse(text.as_bytes()).unwrap_or_else(|_| Value::from(text)),
            (_, "date-time") if !text.ends_with('Z') && !text.get(10..).unwrap_or("").contains(['+', '-']) => {
                // `datetime-local` sends `2025-03-06T10:00`: minutes, no offset; the
                // runtime takes RFC 3339, so it is read as UTC.
                let seconds = if text.len() == 16 { ":00" } else { "" };
                Value::from(format!("{text}{seconds}Z"))
            }
            _ => Value::from(text),
        };
        variables.insert(field.name.to_string(), value);
    }
    if problems.is_empty() { Ok(variables) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "amount": { "type": "number", "minimum": 0, "description": "Euros received." },
                "count": { "type": "integer" },
                "currency": { "type": "string", "enum": ["EUR", "USD"] },
                "paid_on": { "type": "string", "format": "date", "formatMaximum": "today" },
                "at": { "type": "string", "format": "date-time" },
                "confirmed": { "type": "boolean" },
                "lines": { "type": "array" },
                "note": { "type": "string" },
            },
            "required": ["amount", "currency"],
        })
    }

    #[test]
    fn a_submitted_form_becomes_typed_variables() {
        let form = Form::parse(
            b"field.amount=40.5&field.count=3&field.currency=EUR&field.paid_on=2025-03-06&field.at=2025-03-06T10%3A00\
              &field.confirmed=false&field.lines=%5B1%2C2%5D&field.note=&field.unknown=x",
        )
        .expect("a well-formed form");
        let variables = variables(&schema(), &form, &BTreeMap::new()).expect("no shapes, no problems");
        assert_eq!(
            Value::Object(variables),
            json!({
                "amount": 40.5, "count": 3, "currency": "EUR", "paid_on": "2025-03-06",
                "at": "2025-03-06T10:00:00Z", "confirmed": false, "lines": [1, 2],
            })
        );
        let loose = variables_of("field.amount=forty&field.count=2.5&field.at=x%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9y");
        assert_eq!(
            Value::Object(loose),
            json!({ "amount": "forty", "count": "2.5", "at": "xéééééyZ" }),
            "left for the runtime to refuse"
        );
    }

    fn variables_of(body: &str) -> Map<String, Value> {
        variables(&schema(), &Form::parse(body.as_bytes()).expect("a well-formed form"), &BTreeMap::new())
            .expect("no shapes, no problems")
    }

    #[test]
    fn a_form_body_is_taken_as_sent_or_refused_never_patched() {
        let form = Form::parse(b"message=Caf%C3%A9+au+lait&empty=&bare&csrf=a%2Bb").expect("well-formed");
        assert_eq!(form.get("message"), Some("Café au lait"));
        assert_eq!((form.get("empty"), form.get("bare"), form.get("csrf")), (Some(""), Some(""), Some("a+b")));
        for (body, named) in [
            (&b"message=%ff%fe"[..], Some("message")),
            (b"message=%zz%", Some("message")),
            (b"message=100%", Some("message")),
            (b"message=%4", Some("message")),
            (b"%ff=x", None),
        ] {
            let problem = Form::parse(body).err().unwrap_or_else(|| panic!("{body:?} is refused"));
            assert!(problem.contains("malformed `%` escape"), "{problem}");
            if let Some(field) = named {
                assert!(problem.contains(&format!("`{field}`")), "{problem}");
            }
        }
        let raw = Form::parse(b"message=\xff\xfe").err().expect("raw bytes that are not UTF-8 are refused");
        assert!(raw.contains("not UTF-8"), "{raw}");
    }

    #[test]
    fn each_field_gets_a_labelled_control_of_its_type() {
        let schema = schema();
        let shown: Vec<String> = fields(&schema).iter().map(|field| control("d", field).into_string()).collect();
        assert!(shown[0].contains(r#"<label for="d-amount">amount <span class="required">(required)</span>"#));
        assert!(shown[0].contains(r#"type="number" step="any" min="0""#), "{}", shown[0]);
        assert!(shown[0].contains(r#"aria-describedby="d-amount-hint""#));
        assert!(shown[2].contains("<select") && shown[2].contains(r#"<option value="USD">"#), "{}", shown[2]);
        assert!(shown[3].contains(r#"type="date""#) && !shown[3].contains("max="), "today is no date: {}", shown[3]);
        assert!(shown[5].contains(r#"<option value="false">no</option>"#));
        assert!(shown[6].contains("<textarea"));
    }
}
