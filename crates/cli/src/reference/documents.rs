//! The pages read from JSON Schemas: the workflow language, cases and `archmax.toml`
//! (the authoring schemas `archmax schema` prints), and one page per event kind (the
//! committed events schema every emitted event is checked against).

use archmax_compiler::authoring_schema::Document;
use serde_json::Value;

use super::Page;
use super::schema::{self, keys, render};

fn parse(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| format!("the {what} schema is not JSON: {error}"))
}

pub fn authoring_pages() -> Result<Vec<Page>, String> {
    let sources = [
        (
            Document::Workflow,
            "workflow.md",
            "The workflow language",
            "Every key of `workflows/<slug>/workflow.yaml` (runtime contract 3). `archmax schema workflow` \
             prints the JSON Schema this page is made from; point an editor's YAML support at it for \
             completion and checks while typing. `archmax validate` checks much more than the schema \
             can say: see the [diagnostic codes](codes/index.md).",
        ),
        (
            Document::Case,
            "case.md",
            "Case files",
            "Every key of a case, `workflows/<slug>/tests/**/*.test.yaml`. `archmax schema case` prints \
             the JSON Schema; `archmax test` runs the cases.",
        ),
        (
            Document::Config,
            "config.md",
            "archmax.toml",
            "Every key of the workspace's `archmax.toml`. `archmax schema config` prints the JSON Schema. \
             Environment variables named in the descriptions override or complete the file.",
        ),
    ];
    let mut pages = Vec::new();
    for (document, file, title, intro) in sources {
        let root = parse(&document.text(), title)?;
        let keys = keys(&root);
        let mut text = format!("# {title}\n\n{intro}\n\n");
        if let Some(description) = root.get("description").and_then(Value::as_str) {
            text.push_str(&format!("{description}\n\n"));
        }
        text.push_str(&format!("{} keys. Paths are dotted from the file's root; `<name>` stands for a name you choose (a state's slug, a server's name), `[]` for each item of a list.\n\n", keys.len()));
        text.push_str(&render(&keys, "##"));
        pages.push(Page { path: file.to_string(), title: title.to_string(), text });
    }
    Ok(pages)
}

/// `events/index.md` (the envelope every line has, and the kinds) and
/// `events/<kind>.md` for each kind.
pub fn event_pages() -> Result<Vec<Page>, String> {
    let root = parse(archmax_vm::events::SCHEMA, "events")?;
    let kinds: Vec<&str> = root
        .pointer("/properties/event/enum")
        .and_then(Value::as_array)
        .ok_or("the events schema lists no event kinds (`properties.event.enum`)")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut index = String::from("# Events\n\n");
    if let Some(description) = root.get("description").and_then(Value::as_str) {
        index.push_str(&format!("{description}\n\n"));
    }
    index.push_str(
        "`archmax schema events` prints the JSON Schema these pages are made from. The `serve` API's \
         event stream sends each line as the `data` of a server-sent event whose `id` numbers the \
         session's events with no gap: from 1 on a PostgreSQL store (the same on every runner of a \
         fleet); on a store one process uses, from a start taken from the clock, so that the ids of \
         a restarted server are above all those of the one before. Resume with it as \
         `Last-Event-ID`, not with `seq`.\n\n\
         ## The envelope\n\nEvery line has these keys; the kind's own keys sit beside them.\n\n",
    );
    let (envelope, required) = schema::properties(&root);
    for (name, property) in envelope.into_iter().flatten() {
        index.push_str(&field(&root, name, property, required.contains(name)));
    }
    index.push_str("## Kinds\n\n| Kind | What happened |\n| --- | --- |\n");
    let mut pages = Vec::new();
    for kind in &kinds {
        let definition = root
            .pointer(&format!("/$defs/{kind}"))
            .ok_or_else(|| format!("the events schema has no `$defs` entry for the kind `{kind}`"))?;
        let about = definition.get("description").and_then(Value::as_str).unwrap_or_default();
        index.push_str(&format!("| [`{kind}`]({kind}.md) | {} |\n", about.replace('|', "\\|")));
        let mut text = format!("# `{kind}`\n\n{about}\n\nBeside the [envelope](index.md#the-envelope):\n\n");
        let (properties, required) = schema::properties(definition);
        let mut any = false;
        for (name, property) in properties.into_iter().flatten() {
            any = true;
            text.push_str(&field(&root, name, property, required.contains(name)));
        }
        if !any {
            text.push_str("This kind carries no keys of its own.\n");
        }
        pages.push(Page { path: format!("events/{kind}.md"), title: (*kind).to_string(), text });
    }
    pages.insert(0, Page { path: "events/index.md".to_string(), title: "Events".to_string(), text: index });
    Ok(pages)
}

/// One key of an event: its heading, type, whether it is always there, and meaning.
fn field(root: &Value, name: &str, property: &Value, required: bool) -> String {
    let property_resolved = property
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|target| target.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(property);
    let mut text = format!("### `{name}`\n\n*Type:* {}", schema::type_of(root, property, 0));
    if required {
        text.push_str(" · *always present*");
    }
    text.push_str("\n\n");
    let description = property.get("description").or(property_resolved.get("description")).and_then(Value::as_str);
    if let Some(description) = description {
        text.push_str(description.trim());
        text.push_str("\n\n");
    }
    let nested = schema::keys_in(root, property_resolved);
    if !nested.is_empty() {
        for key in nested {
            let path =
                if key.path.starts_with('[') { format!("{name}{}", key.path) } else { format!("{name}.{}", key.path) };
            text.push_str(&format!("- `{path}` ({}){}", key.kind, if key.required { ", always present" } else { "" }));
            if !key.description.is_empty() {
                text.push_str(&format!(": {}", key.description.trim()));
            }
            text.push('\n');
        }
        text.push('\n');
    }
    text
}
