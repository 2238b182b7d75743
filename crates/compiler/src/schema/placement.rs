//! A key indented under the wrong parent.
//!
//! One space too many puts a state's `instructions` inside its `triggers` (where it reads
//! as a trigger id with a string value) or inside a transition (an unknown key there).
//! The schema reports what it sees; this module adds why it most likely happened. The
//! one thing to know: the hint is given only when the key is one the mapping holding the
//! misplaced one defines, so it names a fix the schema would accept.

use std::collections::HashMap;

use crate::diagnostic::SpecPath;

/// The known keys of each mapping read so far, by its rendered path: a mapping is read
/// before its children, so a child's problem always finds its ancestors here.
#[derive(Default)]
pub struct Mappings {
    known: HashMap<String, (&'static [&'static str], &'static str)>,
}

impl Mappings {
    pub fn record(&mut self, path: &SpecPath<'_>, known: &'static [&'static str], what: &'static str) {
        self.known.insert(path.render(), (known, what));
    }

    pub fn is_recorded(&self, path: &SpecPath<'_>) -> bool {
        self.known.contains_key(&path.render())
    }

    /// The hint for `key`, found in the mapping at `mapping`, when the mapping holding
    /// that one (above any list) defines `key`.
    pub fn misindented(&self, mapping: &SpecPath<'_>, key: &str) -> Option<String> {
        let mut under = mapping;
        while under.is_index() {
            under = under.parent()?;
        }
        let under_key = under.last_key()?;
        let holder = under.parent()?;
        let (known, what) = self.known.get(&holder.render())?;
        if !known.contains(&key) {
            return None;
        }
        let owner = if holder.render().is_empty() { what.to_string() } else { format!("`{holder}`") };
        Some(format!(
            "`{key}` is a key of {owner}, but it is indented under `{under_key}`: line it up with `{under_key}`"
        ))
    }
}
