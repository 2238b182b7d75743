//! The authoring schemas (`archmax schema`) read as documentation: the description of
//! the value at a key path, the keys a mapping takes, the values an enum allows.
//!
//! The one thing to know: the walk follows `$ref`, `properties`, `additionalProperties`,
//! `items` and every alternative of `oneOf`/`anyOf`, the first alternative that has the
//! step winning, so a key documented once in the schema is documented here too.

use archmax_compiler::authoring_schema::Document;
use serde_json::Value;

use crate::cursor::Segment;

/// A schema and its definitions.
pub struct SchemaDocs {
    root: Value,
}

/// The bound on `$ref` chains and nested alternatives followed.
const DEPTH: usize = 16;

impl SchemaDocs {
    pub fn new(document: Document) -> SchemaDocs {
        SchemaDocs { root: document.schema() }
    }

    /// The schema for a root-relative path, when one describes it.
    pub fn for_path(path: &str) -> Option<SchemaDocs> {
        let name = path.rsplit('/').next().unwrap_or(path);
        if path.starts_with("workflows/") && name == "workflow.yaml" {
            Some(SchemaDocs::new(Document::Workflow))
        } else if path.starts_with("workflows/") && name.ends_with(".test.yaml") {
            Some(SchemaDocs::new(Document::Case))
        } else {
            None
        }
    }

    fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        for _ in 0..DEPTH {
            let Some(target) = node.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let Some(found) = target.strip_prefix("#/").and_then(|pointer| self.root.pointer(&format!("/{pointer}")))
            else {
                break;
            };
            node = found;
        }
        node
    }

    fn alternatives<'a>(&'a self, node: &'a Value) -> impl Iterator<Item = &'a Value> {
        ["oneOf", "anyOf", "allOf"]
            .into_iter()
            .filter_map(|key| node.get(key).and_then(Value::as_array))
            .flatten()
            .map(|alternative| self.resolve(alternative))
    }

    fn step<'a>(&'a self, node: &'a Value, segment: &Segment, depth: usize) -> Option<&'a Value> {
        let node = self.resolve(node);
        let direct = match segment {
            Segment::Key(key) => node
                .get("properties")
                .and_then(|properties| properties.get(key))
                .or_else(|| node.get("additionalProperties").filter(|value| value.is_object())),
            Segment::Item => node.get("items"),
        };
        if let Some(found) = direct {
            return Some(self.resolve(found));
        }
        if depth >= DEPTH {
            return None;
        }
        self.alternatives(node).find_map(|alternative| self.step(alternative, segment, depth + 1))
    }

    /// The schema of the value at `path`; items the schema does not model are skipped
    /// over (a list where the text has a single value).
    pub fn at(&self, path: &[Segment]) -> Option<&Value> {
        let mut node = &self.root;
        for segment in path {
            node = match self.step(node, segment, 0) {
                Some(next) => next,
                None if *segment == Segment::Item => node,
                None => return None,
            };
        }
        Some(self.resolve(node))
    }

    pub fn description<'a>(&'a self, node: &'a Value) -> Option<&'a str> {
        let node = self.resolve(node);
        node.get("description")
            .and_then(Value::as_str)
            .or_else(|| self.alternatives(node).find_map(|alternative| alternative.get("description")?.as_str()))
    }

    /// The keys a mapping takes, with their descriptions, in the schema's order.
    pub fn keys<'a>(&'a self, node: &'a Value) -> Vec<(&'a str, Option<&'a str>)> {
        let node = self.resolve(node);
        let mut keys: Vec<(&str, Option<&str>)> = Vec::new();
        let own = node.get("properties").and_then(Value::as_object).into_iter();
        let alternatives = self.alternatives(node).filter_map(|alternative| alternative.get("properties")?.as_object());
        for properties in own.chain(alternatives) {
            for (key, value) in properties {
                if !keys.iter().any(|(known, _)| known == key) {
                    keys.push((key.as_str(), self.description(value)));
                }
            }
        }
        keys
    }

    /// The values an enum (or a `const` alternative) allows.
    pub fn values<'a>(&'a self, node: &'a Value) -> Vec<&'a str> {
        let node = self.resolve(node);
        let mut values: Vec<&str> =
            node.get("enum").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        values.extend(node.get("const").and_then(Value::as_str));
        for alternative in self.alternatives(node) {
            values.extend(
                alternative.get("enum").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str),
            );
            values.extend(alternative.get("const").and_then(Value::as_str));
        }
        values.dedup();
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(path: &[&str]) -> Vec<Segment> {
        path.iter().map(|key| if *key == "-" { Segment::Item } else { Segment::Key(key.to_string()) }).collect()
    }

    #[test]
    fn a_states_key_is_documented_and_a_state_lists_its_keys() {
        let docs = SchemaDocs::new(Document::Workflow);
        let state = docs.at(&keys(&["states", "review"])).map(|node| docs.keys(node)).unwrap_or_default();
        assert!(state.iter().any(|(key, _)| *key == "transitions"), "{state:?}");
        let kind = docs.at(&keys(&["states", "review", "type"]));
        assert_eq!(kind.map(|node| docs.values(node)).unwrap_or_default(), ["agent", "human", "grader", "code"]);
        let to = docs.at(&keys(&["states", "review", "transitions", "-", "to"]));
        assert!(to.and_then(|node| docs.description(node)).is_some());
    }
}
