//! "Did you mean" for values from a closed vocabulary: a state's `type`, a signature's
//! `type`.
//!
//! A misspelt value is found by edit distance, like a misspelt key. The one thing to
//! know: authors also write the word another schema language uses for the same thing
//! (`int`, `bool`, `datetime`, `script`), which no edit distance finds, so each
//! vocabulary carries a short table of such synonyms, consulted after the spelling.

use super::did_you_mean;

/// Words other schema languages use for a state type, and the type they mean.
pub const STATE_TYPE_SYNONYMS: &[(&str, &str)] = &[
    ("llm", "agent"),
    ("ai", "agent"),
    ("model", "agent"),
    ("assistant", "agent"),
    ("person", "human"),
    ("approval", "human"),
    ("manual", "human"),
    ("user", "human"),
    ("judge", "grader"),
    ("grade", "grader"),
    ("evaluator", "grader"),
    ("critic", "grader"),
    ("script", "code"),
    ("js", "code"),
    ("javascript", "code"),
    ("function", "code"),
];

/// Words other schema languages use for a signature type, and the type they mean.
pub const SIGNATURE_TYPE_SYNONYMS: &[(&str, &str)] = &[
    ("int", "integer"),
    ("i64", "integer"),
    ("long", "integer"),
    ("float", "number"),
    ("double", "number"),
    ("decimal", "number"),
    ("bool", "boolean"),
    ("str", "string"),
    ("text", "string"),
    ("timestamp", "date-time"),
    ("instant", "date-time"),
    ("dict", "object"),
    ("map", "object"),
    ("record", "object"),
    ("list", "array"),
    ("sequence", "array"),
];

/// The value of `known` the author most likely meant by `written`: the closest spelling,
/// else the synonym table's entry (compared without case).
pub fn meant<'k>(written: &str, known: &[&'k str], synonyms: &[(&str, &'k str)]) -> Option<&'k str> {
    did_you_mean(written, known.iter().copied()).or_else(|| {
        synonyms
            .iter()
            .find(|(synonym, _)| synonym.eq_ignore_ascii_case(written))
            .map(|(_, value)| *value)
            .filter(|value| known.contains(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE_TYPES: [&str; 4] = ["agent", "human", "grader", "code"];

    #[test]
    fn a_misspelling_is_found_before_a_synonym() {
        assert_eq!(meant("humna", &STATE_TYPES, STATE_TYPE_SYNONYMS), Some("human"));
        assert_eq!(meant("Script", &STATE_TYPES, STATE_TYPE_SYNONYMS), Some("code"));
        assert_eq!(meant("robot", &STATE_TYPES, STATE_TYPE_SYNONYMS), None);
    }

    #[test]
    fn every_synonym_names_a_known_value() {
        let signature: Vec<&str> = crate::kinds::ValueType::ALL.iter().map(|ty| ty.as_str()).collect();
        assert!(STATE_TYPE_SYNONYMS.iter().all(|(_, value)| STATE_TYPES.contains(value)));
        assert!(SIGNATURE_TYPE_SYNONYMS.iter().all(|(_, value)| signature.contains(value)));
    }
}
