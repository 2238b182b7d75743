//! Host tool names: `<collection>__<tool>`, and which of them a model may be shown.
//!
//! The one thing to know: a full name must be a valid model function name
//! (`^[A-Za-z0-9_-]{1,64}$`); a server's tool whose full name is not is skipped with a
//! catalog problem, never renamed, so the name the model calls is always the name the
//! author grants.

/// The separator between a collection and a tool's own name.
pub const SEPARATOR: &str = "__";

/// The longest function name model providers accept.
const MAX_FUNCTION_NAME: usize = 64;

/// The name the model calls a server's tool by.
pub fn full_name(collection: &str, tool: &str) -> String {
    format!("{collection}{SEPARATOR}{tool}")
}

/// Whether `name` can be a model function name: 1 to 64 ASCII letters, digits, `_`, `-`.
pub fn is_function_name(name: &str) -> bool {
    (1..=MAX_FUNCTION_NAME).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// The tool's own name when `name` is `<collection>__<tool>`.
pub fn tool_of<'a>(name: &'a str, collection: &str) -> Option<&'a str> {
    name.strip_prefix(collection)?.strip_prefix(SEPARATOR).filter(|tool| !tool.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_are_ascii_words_of_at_most_64_characters() {
        let longest = "a".repeat(64);
        let too_long = "a".repeat(65);
        let table: &[(&str, bool)] = &[
            ("crm__lookup", true),
            ("crm__get-sum", true),
            ("A_1-b", true),
            (&longest, true),
            (&too_long, false),
            ("", false),
            ("crm__look up", false),
            ("crm__look.up", false),
            ("crm__lookup/2", false),
            ("crm__café", false),
        ];
        for (name, valid) in table {
            assert_eq!(is_function_name(name), *valid, "{name}");
        }
    }

    #[test]
    fn a_tool_belongs_to_a_collection_only_after_the_separator() {
        assert_eq!(tool_of("crm__lookup", "crm"), Some("lookup"));
        assert_eq!(tool_of("crm__a__b", "crm"), Some("a__b"));
        assert_eq!(tool_of("crm__", "crm"), None);
        assert_eq!(tool_of("crmx__lookup", "crm"), None);
        assert_eq!(tool_of("crm_lookup", "crm"), None);
        assert_eq!(full_name("crm", "lookup"), "crm__lookup");
    }
}
