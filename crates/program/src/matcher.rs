//! Partial-match patterns over JSON values: what a case's `whenInput` and `input` and a
//! tape entry's `variables` are matched with, and the `/pattern/flags` regex tokens.
//!
//! The one thing to know: a regex is compiled once, when its case is parsed
//! ([`RegexText::compile`] yields a [`CompiledRegex`]); matching never compiles.

use serde_json::Value;

/// A partial-match pattern over JSON values.
#[derive(Clone, Debug, PartialEq)]
pub enum Matcher {
    /// Every named key must be present and match; extra keys are ignored.
    Map(Vec<(String, Matcher)>),
    /// Element-wise, with equal length.
    List(Vec<Matcher>),
    /// A `/pattern/flags` string, tested against the value's text.
    Regex(CompiledRegex),
    /// Equality, numbers by the number they are ([`same_value`]).
    Exact(Value),
}

impl Matcher {
    /// A pattern that matches the way a JSON value is read as one: objects by their
    /// keys, arrays element-wise, scalars by equality (no regex tokens).
    pub fn from_json(pattern: &Value) -> Matcher {
        match pattern {
            Value::Object(map) => {
                Matcher::Map(map.iter().map(|(key, value)| (key.clone(), Matcher::from_json(value))).collect())
            }
            Value::Array(items) => Matcher::List(items.iter().map(Matcher::from_json).collect()),
            scalar => Matcher::Exact(scalar.clone()),
        }
    }

    /// Whether `observed` matches: every declared key present and matching (recursively,
    /// extra keys ignored), lists element-wise with equal length, regexes tested against
    /// the value's text (a string as it is, anything else as JSON), anything else by
    /// [`same_value`] (`312` matches `312.0`).
    pub fn matches(&self, observed: &Value) -> bool {
        match (self, observed) {
            (Matcher::Map(entries), Value::Object(map)) => {
                entries.iter().all(|(key, inner)| map.get(key).is_some_and(|found| inner.matches(found)))
            }
            (Matcher::List(items), Value::Array(found)) => {
                items.len() == found.len() && items.iter().zip(found).all(|(inner, value)| inner.matches(value))
            }
            (Matcher::Map(_) | Matcher::List(_), _) => false,
            (Matcher::Regex(regex), Value::String(text)) => regex.is_match(text),
            (Matcher::Regex(regex), other) => regex.is_match(&other.to_string()),
            (Matcher::Exact(expected), observed) => same_value(expected, observed),
        }
    }
}

/// Deep equality of JSON values, numbers compared by the number they are: `312` equals
/// `312.0` (a YAML file writes one, a client sends the other), and integers too large for
/// a double stay exact.
pub fn same_value(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Number(left), Value::Number(right)) => same_number(left, right),
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(left, right)| same_value(left, right))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left.iter().all(|(key, value)| right.get(key).is_some_and(|other| same_value(value, other)))
        }
        _ => left == right,
    }
}

fn same_number(left: &serde_json::Number, right: &serde_json::Number) -> bool {
    match (whole(left), whole(right)) {
        (Some(left), Some(right)) => left == right,
        // At least one has a fraction (or is beyond every integer): compared as doubles.
        _ => left.as_f64() == right.as_f64(),
    }
}

/// The number as an integer when it is one exactly: an integer, or a double with no
/// fraction below 2^127 (every such double is an `i128` exactly).
fn whole(number: &serde_json::Number) -> Option<i128> {
    if let Some(value) = number.as_i64() {
        return Some(i128::from(value));
    }
    if let Some(value) = number.as_u64() {
        return Some(i128::from(value));
    }
    let value = number.as_f64()?;
    (value.fract() == 0.0 && value.abs() < 1.7e38).then_some(value as i128)
}

/// A `/pattern/flags` token as written, not yet compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegexText {
    pub pattern: String,
    pub flags: String,
}

impl RegexText {
    /// The pattern with its flags as an inline group, for the `regex` crate.
    pub fn to_regex_source(&self) -> String {
        let inline: String = self.flags.chars().filter(|flag| matches!(flag, 'i' | 'm' | 's')).collect();
        if inline.is_empty() { self.pattern.clone() } else { format!("(?{inline}){}", self.pattern) }
    }

    pub fn compile(self) -> Result<CompiledRegex, regex::Error> {
        let regex = regex::Regex::new(&self.to_regex_source())?;
        Ok(CompiledRegex { pattern: self.pattern, flags: self.flags, regex })
    }
}

/// A regex token, compiled when its case was parsed.
#[derive(Clone, Debug)]
pub struct CompiledRegex {
    pub pattern: String,
    pub flags: String,
    regex: regex::Regex,
}

impl CompiledRegex {
    pub fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

/// Two tokens are the same when they were written the same.
impl PartialEq for CompiledRegex {
    fn eq(&self, other: &CompiledRegex) -> bool {
        self.pattern == other.pattern && self.flags == other.flags
    }
}

impl Eq for CompiledRegex {}

/// A reply token: a substring, or a regex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TextMatcher {
    Substring(String),
    Regex(CompiledRegex),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn regex(pattern: &str, flags: &str) -> Matcher {
        let text = RegexText { pattern: pattern.into(), flags: flags.into() };
        Matcher::Regex(text.compile().expect("the test pattern compiles"))
    }

    #[test]
    fn numbers_match_by_the_number_they_are() {
        let pattern = Matcher::from_json(&json!({ "amount": 312.0, "lines": [1, 2.5] }));
        assert!(pattern.matches(&json!({ "amount": 312, "lines": [1.0, 2.5] })));
        assert!(!pattern.matches(&json!({ "amount": 312.5, "lines": [1, 2.5] })));
        assert!(same_value(&json!(-7), &json!(-7.0)));
        assert!(same_value(&json!(u64::MAX), &json!(u64::MAX)));
        // Two integers a double cannot tell apart are still told apart.
        assert!(!same_value(&json!(9_007_199_254_740_993_u64), &json!(9_007_199_254_740_992_u64)));
        assert!(!same_value(&json!(1), &json!("1")));
        assert!(!same_value(&json!({ "a": 1 }), &json!({ "a": 1, "b": 2 })), "deep equality is not partial");
    }

    /// `whole` must not give up on doubles below u64::MAX, or a u64
    /// near the top is compared with such a double as a double, and 2^64 (a double no
    /// u64 holds) equals u64::MAX; and equality stops being transitive.
    #[test]
    fn integers_near_u64_max_are_not_equal_to_a_different_double() {
        let two_to_the_64 = json!(18_446_744_073_709_551_616.0_f64);
        assert!(!same_value(&json!(u64::MAX), &two_to_the_64), "u64::MAX is not 2^64");
        let double = json!(1.8e19_f64);
        let (a, b) = (json!(18_000_000_000_000_000_001_u64), json!(18_000_000_000_000_000_002_u64));
        assert!(!same_value(&a, &b));
        assert!(
            !(same_value(&a, &double) && same_value(&b, &double)),
            "two different integers both equal to one double"
        );
    }

    #[test]
    fn declared_keys_must_match_and_extra_keys_are_ignored() {
        let pattern = Matcher::from_json(&json!({ "order": { "id": 7 }, "tags": ["a", "b"] }));
        assert!(pattern.matches(&json!({ "order": { "id": 7, "total": 3 }, "tags": ["a", "b"], "more": true })));
        assert!(!pattern.matches(&json!({ "order": { "id": 8 }, "tags": ["a", "b"] })));
        assert!(!pattern.matches(&json!({ "order": { "id": 7 }, "tags": ["a"] })));
        assert!(!pattern.matches(&json!({ "tags": ["a", "b"] })));
        assert!(!pattern.matches(&json!("order")));
    }

    #[test]
    fn a_regex_tests_the_text_of_any_value() {
        assert!(regex("^ord", "i").matches(&json!("ORDER-7")));
        assert!(regex("^7$", "").matches(&json!(7)));
        assert!(!regex("^ord", "").matches(&json!("ORDER-7")));
        let nested = Matcher::Map(vec![("id".into(), regex("^A-\\d+$", ""))]);
        assert!(nested.matches(&json!({ "id": "A-12" })));
        assert!(!nested.matches(&json!({ "id": "B-12" })));
    }

    #[test]
    fn scalars_match_by_equal_value_and_type() {
        assert!(Matcher::from_json(&json!(1)).matches(&json!(1)));
        assert!(Matcher::from_json(&json!(1)).matches(&json!(1.0)), "one number, however it is spelled");
        assert!(!Matcher::from_json(&json!(1)).matches(&json!(true)));
        assert!(!Matcher::from_json(&json!("1")).matches(&json!(1)));
        assert!(Matcher::from_json(&json!(null)).matches(&json!(null)));
    }
}
