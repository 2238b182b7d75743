//! Values across the boundary, converted in Rust.
//!
//! Nothing here calls a JavaScript method: no `JSON.stringify`, no `toJSON`, no
//! `Array.prototype` helper. A script that rewrites built-ins therefore cannot change what
//! the bridge sends or what a result reads as. Only a script's own getters and proxy
//! traps run (they are its data); they run under the evaluation's deadline, and the walk
//! checks that deadline itself between nodes.

use rquickjs::object::Property;
use rquickjs::{Array, Coerced, Ctx, Exception, Filter, Object, Type, Value};
use serde_json::{Map, Number};

use super::engine::Shared;

/// Deeper than this, a value is refused (or, for display, cut): cycles end here too.
const MAX_DEPTH: usize = 64;

/// Why a walk stopped.
#[derive(Debug)]
pub(crate) enum WalkError {
    /// The evaluation's deadline passed during the walk.
    Deadline,
    /// A JavaScript exception is pending (a getter or trap threw).
    Js(rquickjs::Error),
    /// The value cannot be sent (a `BigInt`, too deep or cyclic, too large).
    Refused(String),
}

impl From<rquickjs::Error> for WalkError {
    fn from(error: rquickjs::Error) -> Self {
        WalkError::Js(error)
    }
}

/// One walk from a JavaScript value to JSON, with a node budget.
pub(crate) struct Walk<'a> {
    shared: &'a Shared,
    nodes: usize,
    max_nodes: usize,
    /// For display: stop adding (instead of failing) once the budget is spent.
    cut: bool,
    /// Set when a display walk left something out.
    pub(crate) partial: bool,
}

impl<'a> Walk<'a> {
    /// A walk that fails past `max_nodes` nodes (tool arguments, module results).
    pub(crate) fn strict(shared: &'a Shared, max_nodes: usize) -> Self {
        Walk { shared, nodes: 0, max_nodes, cut: false, partial: false }
    }

    /// A walk that stops quietly past `max_nodes` nodes and marks itself partial (display).
    pub(crate) fn display(shared: &'a Shared, max_nodes: usize) -> Self {
        Walk { shared, nodes: 0, max_nodes, cut: true, partial: false }
    }

    /// JSON for `value` with `JSON.stringify`'s choices, minus every hook it would call:
    /// `undefined`, functions and symbols are left out of objects (`None` at the top),
    /// become `null` in arrays; non-finite numbers are `null`; only own enumerable string
    /// keys count; a `BigInt` is refused.
    pub(crate) fn json<'js>(&mut self, value: &Value<'js>) -> Result<Option<serde_json::Value>, WalkError> {
        self.node(value, 0)
    }

    fn tick(&mut self) -> Result<bool, WalkError> {
        self.nodes += 1;
        if self.nodes.is_multiple_of(1024) && self.shared.deadline_passed() {
            return Err(WalkError::Deadline);
        }
        if self.nodes > self.max_nodes {
            if self.cut {
                self.partial = true;
                return Ok(false);
            }
            return Err(WalkError::Refused(format!("the value has more than {} parts", self.max_nodes)));
        }
        Ok(true)
    }

    fn node<'js>(&mut self, value: &Value<'js>, depth: usize) -> Result<Option<serde_json::Value>, WalkError> {
        let json = match value.type_of() {
            Type::Uninitialized | Type::Undefined | Type::Symbol | Type::Function | Type::Constructor => None,
            Type::Module | Type::Unknown => None,
            Type::Null => Some(serde_json::Value::Null),
            Type::Bool => Some(serde_json::Value::Bool(value.as_bool().unwrap_or(false))),
            Type::Int => Some(serde_json::Value::from(value.as_int().unwrap_or(0))),
            Type::Float => Some(number(value.as_float().unwrap_or(f64::NAN))),
            Type::String => {
                let text = value.as_string().map(|text| text.to_string()).transpose()?.unwrap_or_default();
                Some(serde_json::Value::String(text))
            }
            Type::BigInt => return Err(WalkError::Refused("a BigInt has no JSON form".to_string())),
            Type::Array | Type::Exception | Type::Promise | Type::Proxy | Type::Object => {
                if depth >= MAX_DEPTH {
                    if self.cut {
                        self.partial = true;
                        return Ok(Some(serde_json::Value::Null));
                    }
                    return Err(WalkError::Refused(format!(
                        "the value nests deeper than {MAX_DEPTH} levels (or refers to itself)"
                    )));
                }
                let Some(object) = value.as_object() else {
                    return Ok(None);
                };
                if value.is_array() { Some(self.array(object, depth)?) } else { Some(self.object(object, depth)?) }
            }
        };
        Ok(json)
    }

    fn array<'js>(&mut self, object: &Object<'js>, depth: usize) -> Result<serde_json::Value, WalkError> {
        let length: f64 = object.get("length")?;
        let length = if length.is_finite() && length > 0.0 { length as usize } else { 0 };
        let mut items = Vec::new();
        for index in 0..length {
            if !self.tick()? {
                break;
            }
            let item: Value = object.get(index as u32)?;
            items.push(self.node(&item, depth + 1)?.unwrap_or(serde_json::Value::Null));
        }
        Ok(serde_json::Value::Array(items))
    }

    fn object<'js>(&mut self, object: &Object<'js>, depth: usize) -> Result<serde_json::Value, WalkError> {
        let mut map = Map::new();
        let keys: Vec<String> =
            object.own_keys::<String>(Filter::new().string().enum_only()).collect::<rquickjs::Result<_>>()?;
        for key in keys {
            if !self.tick()? {
                break;
            }
            let item: Value = object.get(key.as_str())?;
            if let Some(json) = self.node(&item, depth + 1)? {
                map.insert(key, json);
            }
        }
        Ok(serde_json::Value::Object(map))
    }
}

/// A JSON number for a JavaScript one: integral values as integers, non-finite as `null`.
fn number(value: f64) -> serde_json::Value {
    if !value.is_finite() {
        return serde_json::Value::Null;
    }
    if value.fract() == 0.0 && value.abs() < 9.007_199_254_740_992e15 {
        return serde_json::Value::from(value as i64);
    }
    Number::from_f64(value).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
}

/// A fresh JavaScript value for `json`. Properties are defined, never assigned, so setters
/// a script put on `Object.prototype` never see them.
pub(crate) fn to_js<'js>(ctx: &Ctx<'js>, json: &serde_json::Value) -> rquickjs::Result<Value<'js>> {
    Ok(match json {
        serde_json::Value::Null => Value::new_null(ctx.clone()),
        serde_json::Value::Bool(value) => Value::new_bool(ctx.clone(), *value),
        serde_json::Value::Number(number) => match number.as_i64() {
            Some(int) if i32::try_from(int).is_ok() => Value::new_int(ctx.clone(), int as i32),
            _ => Value::new_float(ctx.clone(), number.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(text) => rquickjs::String::from_str(ctx.clone(), text)?.into_value(),
        serde_json::Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (index, item) in items.iter().enumerate() {
                array.as_object().prop(index as u32, field(to_js(ctx, item)?))?;
            }
            array.into_value()
        }
        serde_json::Value::Object(map) => {
            let object = Object::new(ctx.clone())?;
            for (key, item) in map {
                object.prop(key.as_str(), field(to_js(ctx, item)?))?;
            }
            object.into_value()
        }
    })
}

/// An ordinary data property: writable, enumerable, configurable.
pub(crate) fn field<T>(value: T) -> Property<T> {
    Property::from(value).writable().enumerable().configurable()
}

/// How a value reads as text (a result, a console argument): strings as they are,
/// `undefined` as `undefined`, errors as `Name: message`, JSON where there is one, else
/// the value's string form. `partial` is set when a large value was cut short.
pub(crate) fn display<'js>(shared: &Shared, value: &Value<'js>, budget: usize, partial: &mut bool) -> String {
    match value.type_of() {
        Type::String => return value.as_string().and_then(|text| text.to_string().ok()).unwrap_or_default(),
        Type::Undefined | Type::Uninitialized => return "undefined".to_string(),
        Type::Symbol => {
            let description = value
                .as_symbol()
                .and_then(|symbol| symbol.description().ok())
                .and_then(|text| text.as_string().and_then(|text| text.to_string().ok()))
                .unwrap_or_default();
            return format!("Symbol({description})");
        }
        Type::Exception => {
            if let Some(error) = value.as_object().and_then(|object| Exception::from_object(object.clone())) {
                return error_text(&error);
            }
        }
        _ => {}
    }
    let mut walk = Walk::display(shared, budget.saturating_add(1));
    match walk.json(value) {
        Ok(Some(json)) => {
            *partial |= walk.partial;
            return serde_json::to_string(&json).unwrap_or_default();
        }
        Ok(None) => {}
        Err(WalkError::Deadline) => return format!("[{}]", value.type_name()),
        Err(WalkError::Js(_)) => {
            value.ctx().catch();
        }
        Err(WalkError::Refused(_)) => {}
    }
    value.get::<Coerced<String>>().map(|text| text.0).unwrap_or_else(|_| {
        value.ctx().catch();
        format!("[{}]", value.type_name())
    })
}

/// `Name: message` for an error object (`Error` alone when it has neither).
pub(crate) fn error_text(error: &Exception<'_>) -> String {
    let name = error.get::<_, Coerced<String>>("name").map(|name| name.0).unwrap_or_default();
    let message = error.message().unwrap_or_default();
    match (name.is_empty(), message.is_empty()) {
        (true, true) => "Error".to_string(),
        (true, false) => message,
        (false, true) => name,
        (false, false) => format!("{name}: {message}"),
    }
}

/// `text` cut to `max_chars` characters with a marker naming the full length.
pub(crate) fn truncate(text: String, max_chars: usize) -> (String, bool) {
    match archmax_program::text::cut_at_chars(&text, max_chars) {
        None => (text, false),
        Some(kept) => {
            let total = text.chars().count();
            (format!("{kept}\n… [truncated: {total} characters, showing the first {max_chars}]"), true)
        }
    }
}

/// Captured console lines, capped at a character budget.
#[derive(Debug, Default)]
pub(crate) struct Console {
    pub(crate) lines: Vec<String>,
    chars: usize,
    max_chars: usize,
    pub(crate) truncated: bool,
}

impl Console {
    pub(crate) fn new(max_chars: usize) -> Self {
        Console { lines: Vec::new(), chars: 0, max_chars, truncated: false }
    }

    pub(crate) fn push(&mut self, line: String) {
        if self.truncated {
            return;
        }
        let room = self.max_chars.saturating_sub(self.chars);
        let length = line.chars().count();
        if length <= room {
            self.chars += length;
            self.lines.push(line);
            return;
        }
        if room > 0 {
            self.lines.push(line.chars().take(room).collect());
        }
        self.chars = self.max_chars;
        self.truncated = true;
        self.lines.push(format!("… [console output truncated at {} characters]", self.max_chars));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("abc".to_string(), 3), ("abc".to_string(), false));
        let (cut, truncated) = truncate("abcdef".to_string(), 2);
        assert!(truncated);
        assert!(cut.starts_with("ab\n… [truncated: 6 characters"));
    }

    #[test]
    fn console_stops_at_its_budget() {
        let mut console = Console::new(5);
        console.push("abc".to_string());
        console.push("defg".to_string());
        console.push("never".to_string());
        assert_eq!(console.lines[..2], ["abc".to_string(), "de".to_string()]);
        assert!(console.truncated);
        assert_eq!(console.lines.len(), 3);
    }

    #[test]
    fn numbers_read_like_json() {
        assert_eq!(number(2.0), serde_json::json!(2));
        assert_eq!(number(0.5), serde_json::json!(0.5));
        assert_eq!(number(f64::INFINITY), serde_json::Value::Null);
    }
}
