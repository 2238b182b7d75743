//! JSON request bodies read strictly: an object that names one key twice is refused.
//!
//! serde_json keeps the last of two equal keys, and another reader of the same bytes (a
//! proxy, a validator, the webhook sender's own library) may keep the first, so one
//! body could mean two things. Every JSON body the server takes (a turn's body, an
//! upload's `request` part, a webhook's input, an inbox form's JSON field) goes through
//! [`parse`]: a first pass over serde_json's parser only checks every object's keys, and
//! the [`Value`] is then serde_json's own parse of the same bytes, so it is what the
//! server took before (raw-value markers included) whenever the check passes.
//!
//! The one thing to know: both passes are serde_json's parser, so the nesting limit,
//! number rules and error positions (`at line L column C`) are serde_json's; `"a"` and
//! `"\u0061"` are one key.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// `bytes` as JSON, refused when an object in it names a key twice.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<UniqueKeys>(bytes)?;
    serde_json::from_slice(bytes)
}

/// A JSON value whose objects each name every key once; nothing of it is kept.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<UniqueKeys, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_none<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<UniqueKeys, D::Error> {
        UniqueKeys::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<UniqueKeys, A::Error> {
        while items.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<UniqueKeys, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = entries.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{}` is given twice in one object; give it once",
                    key.escape_debug()
                )));
            }
            entries.next_value::<UniqueKeys>()?;
            keys.insert(key);
        }
        Ok(UniqueKeys)
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
        // A raw-value marker is read as serde_json reads it, not kept as a key.
        let marker = br#"{"$serde_json::private::RawValue":"[1]"}"#;
        assert_eq!(
            parse(marker).map_err(|error| error.to_string()),
            serde_json::from_slice::<Value>(marker).map_err(|error| error.to_string())
        );
        assert!(parse(br#"{"a":1,"\u0061":2}"#).is_err(), "one key, however it is escaped");
        // The same key in two objects is two keys.
        assert!(parse(br#"[{"k":1},{"k":2}]"#).is_ok());
        assert!(parse(b"{\"a\":1").is_err(), "still JSON's rules");
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(deep.as_bytes()).is_err(), "serde_json's nesting limit still holds");
    }
}
