//! Object inputs in the generated forms: a declared shape (`[inbox.workflows.<slug>.
//! fields.<input>]`) becomes a `<fieldset>` with one typed control per field, nested
//! fieldsets for nested objects, and the controls named by their dotted path
//! (`field.claim.vendor.name`); the submitted controls are assembled back into the
//! object here, and a value that does not fit is reported by its path (`'claim.amount'
//! must be a number`) before anything reaches the runtime.
//!
//! The one thing to know: the signature types an object but does not shape it, so the
//! runtime cannot name a wrong field inside one; this module is where the inner fields
//! are checked. An object input without a declared shape keeps the JSON text area, with
//! a hint naming the setting that would give it a form.

use std::collections::BTreeMap;

use maud::{Markup, html};
use serde_json::{Map, Value, json};

use archmax_config::settings::{FieldKind, FieldShape, InboxSettings, ObjectShape};
use archmax_program::program::Program;

use super::forms::{Form, SchemaField, control, control_named};

/// What is wrong with `inbox`'s declared object shapes against the served `programs`:
/// a shape for an input the workflow does not take, or for one that is not an `object`.
/// A workflow none of the programs serves is not checked here.
pub fn field_shape_problems(programs: &[Program], inbox: &InboxSettings) -> Vec<String> {
    let mut problems = Vec::new();
    for (slug, settings) in &inbox.workflows {
        let served = programs.iter().flat_map(|program| {
            program
                .workflows
                .iter()
                .filter(|workflow| program.str(workflow.slug) == slug)
                .map(move |workflow| (program, workflow))
        });
        let mut inputs: BTreeMap<String, String> = BTreeMap::new();
        let mut found = false;
        for (program, workflow) in served {
            found = true;
            for trigger in &workflow.triggers {
                let schema: Value = serde_json::from_str(program.str(trigger.schema)).unwrap_or_default();
                for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                    let ty = property["x-archmax-type"].as_str().or(property["type"].as_str()).unwrap_or("any");
                    inputs.entry(name.clone()).or_insert_with(|| ty.to_string());
                }
            }
        }
        if !found {
            continue;
        }
        for input in settings.fields.keys() {
            let setting = format!("archmax.toml `[inbox.workflows.{slug}.fields.{input}]`");
            match inputs.get(input).map(String::as_str) {
                Some("object") => {}
                Some(other) => problems.push(format!(
                    "{setting} shapes the input `{input}`, which is typed `{other}`: only an `object` input takes fields; remove the table or type the input `object`"
                )),
                None => {
                    let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
                    problems.push(format!(
                        "{setting} names no input of workflow `{slug}` (its triggers require {}); name one of them",
                        if known.is_empty() { "nothing".to_string() } else { archmax_program::diagnostic::list_names(&known) }
                    ));
                }
            }
        }
    }
    problems
}

/// The control of one top-level input: a fieldset when it is an object with a declared
/// shape, else the input's own control (an object's with a hint naming the setting).
pub fn input_control(
    prefix: &str,
    field: &SchemaField<'_>,
    workflow: &str,
    shapes: &BTreeMap<String, ObjectShape>,
) -> Markup {
    if field.schema["type"].as_str() != Some("object") {
        return control(prefix, field);
    }
    match shapes.get(field.name) {
        Some(shape) => {
            let description = field.schema["description"].as_str();
            fieldset(prefix, (field.name, field.name), description, (field.required, field.required), shape)
        }
        None => {
            let note = html! {
                "Write it as JSON, or declare its fields under " code { "[inbox.workflows." (workflow) ".fields." (field.name) "]" }
                " in archmax.toml for a form."
            };
            control_named(&format!("{prefix}-{}", field.name), &format!("field.{}", field.name), field, Some(note))
        }
    }
}

/// The fieldset of the object at `path` (its dotted path from the input) under
/// `legend`; `required` is whether its object must be given, and whether it must be
/// given because every object around it must (only then does the browser hold its
/// required fields: an optional object may be left out whole).
fn fieldset(
    prefix: &str,
    (path, legend): (&str, &str),
    description: Option<&str>,
    (required, enforced): (bool, bool),
    shape: &ObjectShape,
) -> Markup {
    html! {
        fieldset.object data-path=(path) {
            legend { (legend) @if required { " " span.required { "(required)" } } }
            @if let Some(description) = description { p.hint { (description) } }
            @for field in &shape.fields { (field_control(prefix, path, field, enforced)) }
        }
    }
}

fn field_control(prefix: &str, parent: &str, field: &FieldShape, enforced: bool) -> Markup {
    let held = enforced && field.required;
    let path = format!("{parent}.{}", field.name);
    let id = format!("{prefix}-{}", path.replace('.', "-"));
    let name = format!("field.{path}");
    let label = field.label.as_deref().unwrap_or(&field.name);
    match &field.kind {
        FieldKind::Object(shape) => fieldset(prefix, (&path, label), None, (field.required, held), shape),
        FieldKind::Boolean => html! {
            div.field.check {
                input id=(id) name=(name) type="checkbox" value="true";
                label for=(id) { (label) }
            }
        },
        FieldKind::Array(items) => html! {
            div.field {
                label for=(id) {
                    (label) @if field.required { " " span.required { "(required)" } }
                    " " span.hint { "(one " (items) " per line)" }
                }
                textarea id=(id) name=(name) rows="3" required[held] {}
            }
        },
        scalar => {
            let schema = scalar_schema(scalar);
            let shown = SchemaField { name: &field.name, schema: &schema, required: held, label: Some(label) };
            let optional_object = field.required && !held;
            control_named(&id, &name, &shown, optional_object.then(|| html! { "Needed when this part is filled in." }))
        }
    }
}

/// The JSON Schema of a scalar field, for the top-level inputs' controls.
fn scalar_schema(kind: &FieldKind) -> Value {
    match kind {
        FieldKind::String(choices) if !choices.is_empty() => json!({ "type": "string", "enum": choices }),
        FieldKind::Integer => json!({ "type": "integer" }),
        FieldKind::Number => json!({ "type": "number" }),
        FieldKind::Date => json!({ "type": "string", "format": "date" }),
        FieldKind::DateTime => json!({ "type": "string", "format": "date-time" }),
        _ => json!({ "type": "string" }),
    }
}

/// The object the form's controls under `path` make, `None` when none of them was
/// filled in (a checkbox left clear fills nothing), or every field problem by path.
pub fn value(path: &str, shape: &ObjectShape, form: &Form) -> Result<Option<Value>, Vec<String>> {
    let mut object = Map::new();
    let mut problems = Vec::new();
    let mut given = false;
    for field in &shape.fields {
        let here = format!("{path}.{}", field.name);
        let text = form.get(&format!("field.{here}")).map(str::trim).filter(|text| !text.is_empty());
        let value = match (&field.kind, text) {
            (FieldKind::Object(inner), _) => match value(&here, inner, form) {
                Ok(Some(value)) => {
                    given = true;
                    Some(value)
                }
                Ok(None) => None,
                Err(mut inner) => {
                    problems.append(&mut inner);
                    continue;
                }
            },
            (FieldKind::Boolean, None) => Some(Value::Bool(false)),
            (FieldKind::Boolean, Some("true")) => {
                given = true;
                Some(Value::Bool(true))
            }
            (_, None) => None,
            (kind, Some(text)) => {
                given = true;
                match typed(kind, text, &here) {
                    Ok(value) => Some(value),
                    Err(problem) => {
                        problems.push(problem);
                        continue;
                    }
                }
            }
        };
        match value {
            Some(value) => {
                object.insert(field.name.clone(), value);
            }
            None if field.required => problems.push(format!("'{here}' is required")),
            None => {}
        }
    }
    if !given {
        return Ok(None);
    }
    if problems.is_empty() { Ok(Some(Value::Object(object))) } else { Err(problems) }
}

/// `text` as a value of `kind`, or what is wrong with it.
fn typed(kind: &FieldKind, text: &str, path: &str) -> Result<Value, String> {
    match kind {
        FieldKind::Array(items) => {
            let lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
            let kind = item_kind(items);
            let mut values = Vec::new();
            for (at, line) in lines.enumerate() {
                values.push(typed(&kind, line, &format!("{path}[{}]", at + 1))?);
            }
            Ok(Value::Array(values))
        }
        FieldKind::Integer => {
            text.parse::<i64>().map(Value::from).map_err(|_| format!("'{path}' must be a whole number"))
        }
        FieldKind::Number => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("'{path}' must be a number")),
        FieldKind::Boolean => match text {
            "true" | "yes" => Ok(Value::Bool(true)),
            "false" | "no" => Ok(Value::Bool(false)),
            _ => Err(format!("'{path}' must be yes or no")),
        },
        FieldKind::Date if is_date(text) => Ok(Value::from(text)),
        FieldKind::Date => Err(format!("'{path}' must be a date (YYYY-MM-DD)")),
        FieldKind::DateTime => date_time(text).ok_or_else(|| format!("'{path}' must be a date and time")),
        FieldKind::String(choices) if !choices.is_empty() && !choices.iter().any(|choice| choice == text) => {
            Err(format!("'{path}' must be one of {}", choices.join(", ")))
        }
        _ => Ok(Value::from(text)),
    }
}

fn item_kind(items: &str) -> FieldKind {
    match items {
        "integer" => FieldKind::Integer,
        "number" => FieldKind::Number,
        "boolean" => FieldKind::Boolean,
        "date" => FieldKind::Date,
        "date-time" => FieldKind::DateTime,
        _ => FieldKind::String(Vec::new()),
    }
}

/// Whether `text` is written `YYYY-MM-DD`.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes
            .iter()
            .enumerate()
            .all(|(at, byte)| if at == 4 || at == 7 { *byte == b'-' } else { byte.is_ascii_digit() })
}

/// A `datetime-local` value (`2025-03-06T10:00`, read as UTC) or an RFC 3339 instant.
fn date_time(text: &str) -> Option<Value> {
    let (date, time) = text.split_once('T')?;
    if !is_date(date)
        || time.len() < 5
        || !time.is_char_boundary(5)
        || !time[..5].bytes().enumerate().all(|(at, byte)| if at == 2 { byte == b':' } else { byte.is_ascii_digit() })
    {
        return None;
    }
    let offset = time.ends_with('Z') || time[5..].contains(['+', '-']);
    let instant = match (offset, time.len()) {
        (true, _) => text.to_string(),
        (false, 5) => format!("{text}:00Z"),
        (false, _) => format!("{text}Z"),
    };
    // The whole value must be an instant: no trailing words, no 30 February.
    chrono::DateTime::parse_from_rfc3339(&instant).ok()?;
    Some(Value::from(instant))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> ObjectShape {
        let field =
            |name: &str, kind: FieldKind, required: bool| FieldShape { name: name.into(), kind, label: None, required };
        ObjectShape {
            fields: vec![
                field("amount", FieldKind::Number, true),
                field("kind", FieldKind::String(vec!["travel".into(), "meal".into()]), false),
                field("paid", FieldKind::Boolean, false),
                field("tags", FieldKind::Array("integer".into()), false),
                field("on", FieldKind::DateTime, false),
                field(
                    "vendor",
                    FieldKind::Object(ObjectShape { fields: vec![field("name", FieldKind::String(Vec::new()), true)] }),
                    false,
                ),
            ],
        }
    }

    #[test]
    fn the_controls_of_an_object_are_assembled_into_it() {
        let form = Form::parse(
            b"field.claim.amount=12.5&field.claim.kind=meal&field.claim.paid=true&field.claim.tags=1%0D%0A2&\
              field.claim.on=2025-03-06T10%3A00&field.claim.vendor.name=Caf%C3%A9",
        )
        .expect("a well-formed form");
        let value = value("claim", &shape(), &form).expect("it holds");
        assert_eq!(
            value,
            Some(
                json!({ "amount": 12.5, "kind": "meal", "paid": true, "tags": [1, 2], "on": "2025-03-06T10:00:00Z", "vendor": { "name": "Café" } })
            )
        );
        assert_eq!(
            super::value("claim", &shape(), &Form::parse(b"field.claim.kind=").expect("a well-formed form")),
            Ok(None),
            "nothing filled in"
        );
    }

    #[test]
    fn a_date_and_time_is_an_instant_and_nothing_else() {
        let kind = FieldKind::DateTime;
        assert_eq!(typed(&kind, "2025-03-06T10:00", "on"), Ok(json!("2025-03-06T10:00:00Z")));
        assert_eq!(typed(&kind, "2025-03-06T10:00:30", "on"), Ok(json!("2025-03-06T10:00:30Z")));
        assert_eq!(typed(&kind, "2025-03-06T10:00:00+02:00", "on"), Ok(json!("2025-03-06T10:00:00+02:00")));
        for bad in ["2025-03-06T10:00junk", "2025-03-06T10:00-x", "2025-02-30T10:00", "2025-03-06T25:00", "2025-03-06"]
        {
            assert!(typed(&kind, bad, "on").is_err(), "{bad}");
        }
    }

    #[test]
    fn a_value_that_does_not_fit_is_named_by_its_path() {
        let form = Form::parse(b"field.claim.amount=ten&field.claim.kind=taxi&field.claim.tags=1%0Atwo&field.claim.vendor.name=&field.claim.on=noon").expect("a well-formed form");
        let problems = value("claim", &shape(), &form).expect_err("nothing fits");
        assert_eq!(
            problems,
            [
                "'claim.amount' must be a number",
                "'claim.kind' must be one of travel, meal",
                "'claim.tags[2]' must be a whole number",
                "'claim.on' must be a date and time",
            ]
        );
        let problems =
            value("claim", &shape(), &Form::parse(b"field.claim.vendor.name=Acme").expect("a well-formed form"))
                .expect_err("no amount");
        assert_eq!(problems, ["'claim.amount' is required"]);
        let problems = value(
            "claim",
            &shape(),
            &Form::parse(b"field.claim.amount=1&field.claim.vendor.name=&field.claim.paid=true")
                .expect("a well-formed form"),
        )
        .expect("a vendor left out");
        assert_eq!(problems, Some(json!({ "amount": 1.0, "paid": true })));
    }

    #[test]
    fn an_object_is_a_fieldset_of_typed_controls_named_by_path() {
        let schema = json!({ "type": "object", "description": "The <claim>." });
        let field = SchemaField { name: "claim", schema: &schema, required: true, label: None };
        let shapes = BTreeMap::from([("claim".to_string(), shape())]);
        let shown = input_control("t", &field, "claims", &shapes).into_string();
        assert!(
            shown.contains("<fieldset")
                && shown.contains("<legend>claim <span class=\"required\">(required)</span></legend>"),
            "{shown}"
        );
        assert!(shown.contains("The &lt;claim&gt;."), "{shown}");
        assert!(shown.contains(r#"id="t-claim-amount" name="field.claim.amount" type="number""#), "{shown}");
        assert!(shown.contains(r#"<option value="travel">"#), "{shown}");
        assert!(shown.contains(r#"name="field.claim.paid" type="checkbox""#), "{shown}");
        assert!(
            shown.contains(r#"<legend>vendor</legend>"#) && shown.contains(r#"name="field.claim.vendor.name""#),
            "{shown}"
        );
        let bare = input_control("t", &field, "claims", &BTreeMap::new()).into_string();
        assert!(bare.contains("<textarea") && bare.contains("[inbox.workflows.claims.fields.claim]"), "{bare}");
    }
}
