//! Reading a tool call's JSON arguments into typed values.
//!
//! Every built-in tool declares which arguments it takes; anything else is refused, so a
//! misspelled or aliased path argument can never slip past the governance kernel, which
//! reads only the declared names. `null` counts as absent for optional arguments.

use serde_json::{Map, Value};

use super::ToolError;

/// A call's arguments, checked against the names the tool accepts.
pub(crate) struct Arguments<'a> {
    values: &'a Map<String, Value>,
}

/// The JSON type of a value, in words, for "must be X, not Y" messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Arguments<'a> {
    /// Checks that `args` is an object naming only `accepted` arguments.
    pub(crate) fn parse(tool: &str, args: &'a Value, accepted: &[&str]) -> Result<Arguments<'a>, ToolError> {
        let values = match args {
            Value::Object(values) => values,
            Value::Null => return Ok(Arguments { values: empty_map() }),
            other => {
                return Err(ToolError(format!(
                    "{tool} takes its arguments as a JSON object, not {}",
                    type_name(other)
                )));
            }
        };
        if let Some(unknown) = values.keys().find(|name| !accepted.contains(&name.as_str())) {
            let expected = accepted.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
            return Err(ToolError(format!("{tool} has no argument `{unknown}`; it takes {expected}")));
        }
        Ok(Arguments { values })
    }

    fn present(&self, name: &str) -> Option<&'a Value> {
        self.values.get(name).filter(|value| !value.is_null())
    }

    pub(crate) fn required(&self, name: &str) -> Result<&'a Value, ToolError> {
        self.present(name).ok_or_else(|| ToolError(format!("the argument `{name}` is required")))
    }

    pub(crate) fn required_string(&self, name: &str) -> Result<&'a str, ToolError> {
        let value = self.required(name)?;
        value.as_str().ok_or_else(|| mistyped(name, "a string", value))
    }

    pub(crate) fn optional_string(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.present(name) {
            None => Ok(None),
            Some(value) => value.as_str().map(Some).ok_or_else(|| mistyped(name, "a string", value)),
        }
    }

    /// An optional boolean; absent is `false`.
    pub(crate) fn flag(&self, name: &str) -> Result<bool, ToolError> {
        match self.present(name) {
            None => Ok(false),
            Some(value) => value.as_bool().ok_or_else(|| mistyped(name, "true or false", value)),
        }
    }

    /// An optional whole number of zero or more.
    pub(crate) fn optional_count(&self, name: &str) -> Result<Option<usize>, ToolError> {
        let Some(value) = self.present(name) else { return Ok(None) };
        let whole = value.as_u64().or_else(|| {
            value.as_f64().filter(|number| number.fract() == 0.0 && *number >= 0.0 && *number <= u32::MAX as f64).map(
                // The filter bounds the number, so the conversion is exact.
                |number| number as u64,
            )
        });
        whole
            .and_then(|count| usize::try_from(count).ok())
            .map(Some)
            .ok_or_else(|| mistyped(name, "a whole number of zero or more", value))
    }

    /// A required workspace path, canonical.
    pub(crate) fn required_path(&self, name: &str) -> Result<String, ToolError> {
        canonical_path(name, self.required_string(name)?)
    }

    /// An optional workspace path, canonical; absent is the root (`""`).
    pub(crate) fn optional_path(&self, name: &str) -> Result<String, ToolError> {
        match self.optional_string(name)? {
            Some(raw) => canonical_path(name, raw),
            None => Ok(String::new()),
        }
    }
}

fn empty_map() -> &'static Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

fn mistyped(name: &str, expected: &str, value: &Value) -> ToolError {
    ToolError(format!("the argument `{name}` must be {expected}, not {}", type_name(value)))
}

/// The canonical form of a path argument; climbing above the root is refused.
pub(crate) fn canonical_path(name: &str, raw: &str) -> Result<String, ToolError> {
    archmax_program::zones::canonicalize(raw)
        .map_err(|_| ToolError(format!("`{name}` '{raw}' climbs above the workspace root; use a path inside it")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_arguments_are_refused_by_name() {
        let args = json!({ "path": "a.md" });
        let error = Arguments::parse("read_file", &args, &["file_path", "offset"]).err().unwrap();
        assert!(error.0.contains("`path`"), "{error}");
        assert!(error.0.contains("`file_path`"), "{error}");
    }

    #[test]
    fn arguments_must_be_an_object() {
        let error = Arguments::parse("ls", &json!([1]), &["path"]).err().unwrap();
        assert!(error.0.contains("JSON object"), "{error}");
        assert!(Arguments::parse("ls", &Value::Null, &["path"]).is_ok());
    }

    #[test]
    fn missing_and_mistyped_arguments_name_themselves() {
        let args = json!({ "file_path": 3, "offset": "two", "replace_all": "yes", "limit": -1 });
        let parsed = Arguments::parse("t", &args, &["file_path", "offset", "replace_all", "limit", "content"]).unwrap();
        assert_eq!(parsed.required_string("content").unwrap_err().0, "the argument `content` is required");
        assert!(parsed.required_string("file_path").unwrap_err().0.contains("`file_path` must be a string"));
        assert!(parsed.optional_count("offset").unwrap_err().0.contains("`offset`"));
        assert!(parsed.optional_count("limit").unwrap_err().0.contains("`limit`"));
        assert!(parsed.flag("replace_all").unwrap_err().0.contains("`replace_all`"));
    }

    #[test]
    fn null_is_absent_and_whole_floats_count() {
        let args = json!({ "path": null, "offset": 3.0, "limit": 2.5 });
        let parsed = Arguments::parse("t", &args, &["path", "offset", "limit"]).unwrap();
        assert_eq!(parsed.optional_path("path").unwrap(), "");
        assert_eq!(parsed.optional_count("offset").unwrap(), Some(3));
        assert!(parsed.optional_count("limit").is_err());
        assert!(!parsed.flag("path").unwrap());
    }

    #[test]
    fn paths_are_canonical_and_never_climb() {
        let args = json!({ "file_path": "/scratchpad/./a//b/../c.md", "bad": "scratchpad/../../etc" });
        let parsed = Arguments::parse("t", &args, &["file_path", "bad"]).unwrap();
        assert_eq!(parsed.required_path("file_path").unwrap(), "scratchpad/a/c.md");
        assert!(parsed.required_path("bad").unwrap_err().0.contains("climbs above"));
    }
}
