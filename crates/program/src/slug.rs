//! Workflow and state slugs as types: [`Slug`], an owned slug known to be well formed,
//! and [`SlugRef`], the borrowed name a lookup takes.
//!
//! The one thing to know: lookups (such as [`crate::program::Program::workflow`])
//! take `impl Into<SlugRef>`, so a caller passes
//! a [`Slug`], a `&str` or a `&String` alike; a name that is not a slug simply finds
//! nothing. Only [`Slug::parse`] promises well-formedness.

use std::fmt;

/// A kebab-case slug, `^[a-z0-9]+(-[a-z0-9]+)*$`: a workflow directory or a state key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slug(String);

/// Text that is not a slug.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a slug: use lowercase letters, digits and single hyphens, such as `refund-desk`")]
pub struct NotASlug(pub String);

impl Slug {
    pub fn parse(text: &str) -> Result<Slug, NotASlug> {
        if is_slug(text) { Ok(Slug(text.to_string())) } else { Err(NotASlug(text.to_string())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::str::FromStr for Slug {
    type Err = NotASlug;

    fn from_str(text: &str) -> Result<Slug, NotASlug> {
        Slug::parse(text)
    }
}

/// The slug a lookup is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlugRef<'a>(&'a str);

impl<'a> SlugRef<'a> {
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl<'a> From<&'a str> for SlugRef<'a> {
    fn from(text: &'a str) -> SlugRef<'a> {
        SlugRef(text)
    }
}

impl<'a> From<&'a String> for SlugRef<'a> {
    fn from(text: &'a String) -> SlugRef<'a> {
        SlugRef(text)
    }
}

impl<'a> From<&'a Slug> for SlugRef<'a> {
    fn from(slug: &'a Slug) -> SlugRef<'a> {
        SlugRef(&slug.0)
    }
}

impl PartialEq<str> for SlugRef<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

/// True for a kebab-case slug, `^[a-z0-9]+(-[a-z0-9]+)*$`: state keys, workflow and
/// skill directory names.
pub fn is_slug(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('-')
            .all(|part| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kebab_case_parses() {
        assert_eq!(Slug::parse("refund-desk").map(|slug| slug.to_string()).as_deref(), Ok("refund-desk"));
        for bad in ["", "Refund", "refund--desk", "-refund", "refund_desk", "refund desk"] {
            assert_eq!(Slug::parse(bad), Err(NotASlug(bad.to_string())), "{bad}");
        }
    }

    #[test]
    fn every_spelling_of_a_name_looks_up_the_same() {
        let owned = Slug::parse("triage").expect("a slug");
        let text = String::from("triage");
        assert_eq!(SlugRef::from(&owned), SlugRef::from("triage"));
        assert_eq!(SlugRef::from(&text), SlugRef::from("triage"));
    }
}
