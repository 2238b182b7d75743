//! A key indented under the wrong parent.
//!
//! One space too many puts a state's `instructions` inside its `triggers` (where it reads
//! as a trigger id with a string value) or inside a transition (an unknown key there).
//! The schema reports what it sees; this module adds why it most likely happened. The
//! one thing to know: the hint is given only when the key is one the mapping holding the
//! misplaced one defines, so it names a fix the schema would accept. A whole state
//! indented under another state, or left at the root, is told apart by what it holds
//! ([`misplaced_states`]).

use std::collections::HashMap;

use crate::diagnostic::{Code, SpecPath};
use crate::syntax::is_slug;
use crate::syntax::yaml::{Entry, Node};

use super::reader::Reader;
use super::root::ROOT;
use super::state::STATE;

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

/// The keys that mark a mapping as a state when they are all it holds, one of them at least.
const STATE_MARKS: [&str; 6] = ["instructions", "transitions", "type", "script", "triggers", "on_error"];

/// Whether `node` reads as a state: a mapping of state keys, one of them a key only a state
/// takes in that place.
fn looks_like_state(node: &Node) -> bool {
    let Some(entries) = node.as_mapping() else {
        return false;
    };
    let keys: Vec<&str> = entries.iter().filter_map(|entry| entry.key.scalar_text()).collect();
    keys.len() == entries.len()
        && keys.iter().all(|key| STATE.known.contains(key))
        && keys.iter().any(|key| STATE_MARKS.contains(key))
}

/// States indented under the wrong parent: a key of the root, or of a state, that is a
/// slug holding what a state holds. The unknown-key error already reported for each is
/// reworded to say where the state is and how to move it; the names are returned so the
/// transitions into such a state are not reported again as unknown targets.
pub fn misplaced_states(reader: &mut Reader<'_>, root: &Node, states: Option<&Node>) -> Vec<String> {
    let mut found = Vec::new();
    let mut places: Vec<(&Entry, Option<&str>)> = Vec::new();
    if let Some(entries) = root.as_mapping() {
        places.extend(
            entries
                .iter()
                .filter(|entry| entry.key.scalar_text().is_some_and(|key| !ROOT.known.contains(&key)))
                .map(|entry| (entry, None)),
        );
    }
    for state in states.and_then(Node::as_mapping).unwrap_or(&[]) {
        let Some(parent) = state.key.scalar_text() else { continue };
        for entry in state.value.as_mapping().unwrap_or(&[]) {
            if entry.key.scalar_text().is_some_and(|key| !STATE.known.contains(&key)) {
                places.push((entry, Some(parent)));
            }
        }
    }
    for (entry, parent) in places {
        let Some(name) = entry.key.scalar_text().filter(|name| is_slug(name)) else { continue };
        if !looks_like_state(&entry.value) {
            continue;
        }
        let (message, help) = match parent {
            Some(parent) => (
                format!("`{name}` looks like a state, but it is indented under the state `{parent}`"),
                format!("line `{name}:` up with `{parent}:` so that it is a state of its own"),
            ),
            None => (
                format!("`{name}` looks like a state, but it sits at the root of the workflow"),
                format!("indent `{name}:` under `states:`, level with the other states"),
            ),
        };
        if let Some(diagnostic) = reader
            .diagnostics
            .iter_mut()
            .find(|diagnostic| diagnostic.code == Code::UnknownKey && diagnostic.span == Some(entry.key.span))
        {
            diagnostic.message = message;
            diagnostic.help = Some(help);
            diagnostic.label = Some("a state in the wrong place".to_string());
        }
        found.push(name.to_string());
    }
    found
}
