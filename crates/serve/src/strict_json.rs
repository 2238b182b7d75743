//! JSON request bodies read strictly: an object that names one key twice is refused.
//!
//! serde_json keeps the last of two equal keys, and another reader of the same bytes (a
//! proxy, a validator, the webhook sender's own library) may keep the first, so one
//! body could mean two things. Every JSON body the server takes (a turn's body, an
//! upload's `request` part, a webhook's input) goes through [`parse`], which builds the
//! same [`Value`] serde_json would and fails at the second key instead.
//!
//! The one thing to know: the check is a [`Visitor`] over serde_json's own parser, so
//! its nesting limit, number handling and error positions (`at line L column C`) are
//! serde_json's.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `bytes` as JSON, refused when an object in it names a key twice.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(bytes).map(|Strict(value)| value)
}

/// A [`Value`] whose objects each name every key once.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Number::from_f64(value).map(Value::Number).ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Strict::deserialize(deserializer).map(|Strict(value)| value)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(items.size_hint().unwrap_or(0).min(4096));
        while let Some(Strict(value)) = items.next_element()? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{}` is given twice in one object; give it once",
                    key.escape_debug()
                )));
            }
            let Strict(value) = entries.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_parses_as_serde_json_would_unless_an_object_names_a_key_twice() {
        let text = r#"{"message":"Hi","n":[1,-2,3.5,18446744073709551615],"deep":{"a":null,"b":true},"e":"\u00e9"}"#;
        assert_eq!(parse(text.as_bytes()).expect("well-formed"), serde_json::from_str::<Value>(text).expect("json"));
        assert_eq!(parse(b"{}").expect("empty"), json!({}));
        for twice in [r#"{"message":"x","message":"y"}"#, r#"{"a":{"b":1,"b":2}}"#, r#"[{"k":1},{"k":1,"k":1}]"#] {
            let error = parse(twice.as_bytes()).expect_err(twice).to_string();
            assert!(error.contains("is given twice") && error.contains("column"), "{twice}: {error}");
        }
        // The same key in two objects is two keys.
        assert!(parse(br#"[{"k":1},{"k":2}]"#).is_ok());
        assert!(parse(b"{\"a\":1").is_err(), "still JSON's rules");
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(deep.as_bytes()).is_err(), "serde_json's nesting limit still holds");
    }
}
