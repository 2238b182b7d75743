//! Which arguments of a server's tool name workspace paths, and how the tool uses each.
//!
//! The one thing to know: the kernel governs exactly the arguments this returns, so the
//! derivation errs towards governing. In order:
//! 1. every property of the input schema carrying `"x-archmax-path"` (`"read"`, `"list"`,
//!    `"search"`, `"write"`, `"remove"` or `"execute"`);
//! 2. for properties the schema does not mark, the server table's `path_arguments` entry
//!    for the tool;
//! 3. when neither names any argument, a property named `file_path`, read.
//!
//! A mark with any other value makes the whole tool unusable (it is skipped with a
//! catalog problem): a path the author meant to govern is never silently ungoverned.
//! The marks are removed from the schema the model is shown.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use archmax_program::tools::PathAccess;

/// The schema keyword that marks a path argument.
pub const PATH_KEYWORD: &str = "x-archmax-path";

/// A tool's path arguments and the schema to show the model (marks removed). `Err`
/// names the property whose mark is not a known access.
pub fn derive(
    schema: &Map<String, Value>,
    configured: Option<&BTreeMap<String, PathAccess>>,
) -> Result<(Vec<(String, PathAccess)>, Value), String> {
    let mut shown = schema.clone();
    let mut paths = Vec::new();
    if let Some(Value::Object(properties)) = shown.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            let Value::Object(property) = property else { continue };
            let Some(mark) = property.remove(PATH_KEYWORD) else { continue };
            match mark.as_str().and_then(PathAccess::parse) {
                Some(access) => paths.push((name.clone(), access)),
                None => {
                    let accepted = PathAccess::spellings();
                    return Err(format!(
                        "its argument `{name}` has `{PATH_KEYWORD}: {mark}`, which is not one of {}",
                        accepted.join(", ")
                    ));
                }
            }
        }
    }
    for (argument, access) in configured.into_iter().flatten() {
        if !paths.iter().any(|(name, _)| name == argument) {
            paths.push((argument.clone(), *access));
        }
    }
    // A mark anywhere below the top level (a nested object, an array's items) names an
    // argument the kernel cannot find in a call: the tool is refused, never shown with a
    // path argument nobody governs.
    if let Some(Value::Object(properties)) = shown.get("properties") {
        for (name, property) in properties {
            if marked_below(property) {
                return Err(format!(
                    "its argument `{name}` holds `{PATH_KEYWORD}` below the top level; only top-level arguments can be path arguments"
                ));
            }
        }
    }
    let has_file_path =
        schema.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key("file_path"));
    if paths.is_empty() && has_file_path {
        paths.push(("file_path".to_string(), PathAccess::Read));
    }
    Ok((paths, Value::Object(shown)))
}

/// Whether `value` holds a path mark anywhere inside it.
fn marked_below(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, inner)| key == PATH_KEYWORD || marked_below(inner)),
        Value::Array(items) => items.iter().any(marked_below),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_mark_below_the_top_level_refuses_the_tool() {
        let nested = object(json!({"type": "object", "properties": {
            "opts": {"type": "object", "properties": {"dest": {"type": "string", "x-archmax-path": "write"}}}
        }}));
        let refused = derive(&nested, None).expect_err("a nested mark is refused");
        assert!(refused.contains("`opts`") && refused.contains("below the top level"), "{refused}");
        let items = object(json!({"type": "object", "properties": {
            "files": {"type": "array", "items": {"type": "string", "x-archmax-path": "read"}}
        }}));
        assert!(derive(&items, None).is_err());
    }

    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn schema_marks_then_configuration_then_file_path() {
        let marked = object(json!({"type": "object", "properties": {
            "destination": {"type": "string", "x-archmax-path": "write"},
            "source": {"type": "string"},
            "file_path": {"type": "string"}
        }}));
        let configured: BTreeMap<String, PathAccess> =
            [("source".to_string(), PathAccess::Remove), ("destination".to_string(), PathAccess::Read)].into();
        let owned = |paths: &[(&str, PathAccess)]| -> Vec<(String, PathAccess)> {
            paths.iter().map(|(name, access)| (name.to_string(), *access)).collect()
        };
        // The schema's mark wins over the table for the same argument; the table adds the rest.
        let (paths, _) = derive(&marked, Some(&configured)).unwrap_or_default();
        assert_eq!(paths, owned(&[("destination", PathAccess::Write), ("source", PathAccess::Remove)]));
        let (paths, _) = derive(&marked, None).unwrap_or_default();
        assert_eq!(paths, owned(&[("destination", PathAccess::Write)]));
        let plain = object(json!({"type": "object", "properties": {"file_path": {"type": "string"}}}));
        assert_eq!(
            derive(&plain, None),
            Ok((vec![("file_path".to_string(), PathAccess::Read)], Value::Object(plain.clone())))
        );
        let only_table: BTreeMap<String, PathAccess> = [("dir".to_string(), PathAccess::List)].into();
        assert_eq!(
            derive(&plain, Some(&only_table)).map(|(paths, _)| paths),
            Ok(vec![("dir".to_string(), PathAccess::List)])
        );
        let none = object(json!({"type": "object", "properties": {"text": {"type": "string"}}}));
        assert_eq!(derive(&none, None).map(|(paths, _)| paths), Ok(vec![]));
    }

    #[test]
    fn marks_are_removed_from_the_schema_the_model_sees() {
        let marked =
            object(json!({"type": "object", "properties": {"to": {"type": "string", "x-archmax-path": "execute"}}}));
        let (paths, shown) = derive(&marked, None).unwrap_or_default();
        assert_eq!(paths, vec![("to".to_string(), PathAccess::Execute)]);
        assert_eq!(shown, json!({"type": "object", "properties": {"to": {"type": "string"}}}));
    }

    #[test]
    fn an_unknown_mark_refuses_the_tool() {
        for mark in [json!("delete"), json!(true), json!(["read"])] {
            let schema = object(json!({"type": "object", "properties": {"to": {"x-archmax-path": mark}}}));
            let error = derive(&schema, None).err().unwrap_or_default();
            assert!(
                error.contains("argument `to`") && error.contains("read, list, search, write, remove, execute"),
                "{error}"
            );
        }
    }
}
