//! The program a session is pinned to, as the store keeps it (`_specs/<hash>.json`).
//!
//! A session records the spec hash of its *workflow* (not of the whole artifact), so an
//! edit to an unrelated workflow of the same workspace never strands it. The store keeps
//! a small summary of each workflow spec a session ran under: its states in order, each
//! with its slug, type and a digest of everything the lowered state holds. The one thing
//! to know: the summary exists to *explain* a change (states added, removed, changed, the
//! session's own state gone), never to run the old program; the hash alone decides
//! whether a session may resume.

use serde::{Deserialize, Serialize};

/// The longest spec hash the store accepts as a file name (a SHA-256 is 64).
const MAX_HASH_CHARS: usize = 128;

/// One workflow spec as sessions are pinned to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedSpec {
    pub workflow: String,
    pub spec_hash: String,
    pub states: Vec<PinnedState>,
}

/// One state of a pinned spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedState {
    pub slug: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// SHA-256 (hex) of the lowered state with every name resolved.
    pub digest: String,
}

/// What became of the session's own state in the new program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateFate {
    /// It is declared as before.
    Kept,
    /// It is declared, with a different body.
    Changed,
    /// The new program does not declare it.
    Gone,
}

/// What differs between a pinned spec and the current one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecChanges {
    /// `false` when the store no longer holds the pinned spec, so states can't be compared.
    pub known: bool,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    /// The session's current state and its fate, when it has one.
    pub position: Option<(String, StateFate)>,
}

/// Whether `hash` can name a stored spec: lowercase hex, at most 128 characters.
pub fn is_spec_hash(hash: &str) -> bool {
    !hash.is_empty()
        && hash.len() <= MAX_HASH_CHARS
        && hash.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

impl PinnedSpec {
    pub fn state(&self, slug: &str) -> Option<&PinnedState> {
        self.states.iter().find(|state| state.slug == slug)
    }
}

impl SpecChanges {
    /// Compares `pinned` (when the store still holds it) with `current`, for a session at
    /// `position`.
    pub fn between(pinned: Option<&PinnedSpec>, current: &PinnedSpec, position: Option<&str>) -> SpecChanges {
        let fate = |slug: &str| match (pinned.and_then(|spec| spec.state(slug)), current.state(slug)) {
            (_, None) => StateFate::Gone,
            (Some(before), Some(now)) if before == now => StateFate::Kept,
            (None, Some(_)) if pinned.is_none() => StateFate::Kept,
            _ => StateFate::Changed,
        };
        let position = position.map(|slug| (slug.to_string(), fate(slug)));
        let Some(pinned) = pinned else {
            return SpecChanges { known: false, added: vec![], removed: vec![], changed: vec![], position };
        };
        let slugs = |spec: &PinnedSpec, other: &PinnedSpec| -> Vec<String> {
            spec.states.iter().filter(|state| other.state(&state.slug).is_none()).map(|s| s.slug.clone()).collect()
        };
        let changed = current
            .states
            .iter()
            .filter(|now| pinned.state(&now.slug).is_some_and(|before| before != *now))
            .map(|state| state.slug.clone())
            .collect();
        SpecChanges { known: true, added: slugs(current, pinned), removed: slugs(pinned, current), changed, position }
    }

    /// The session's current state, when the new program no longer declares it.
    pub fn missing_position(&self) -> Option<&str> {
        match &self.position {
            Some((slug, StateFate::Gone)) => Some(slug),
            _ => None,
        }
    }
}

fn quoted(slugs: &[String]) -> String {
    slugs.iter().map(|slug| format!("'{slug}'")).collect::<Vec<_>>().join(", ")
}

impl std::fmt::Display for SpecChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.known {
            parts.push("the store no longer holds the pinned spec, so the states cannot be compared".to_string());
        }
        for (label, slugs) in [("added", &self.added), ("removed", &self.removed), ("changed", &self.changed)] {
            if !slugs.is_empty() {
                parts.push(format!("states {label}: {}", quoted(slugs)));
            }
        }
        if self.known && parts.is_empty() {
            parts.push("no state changed (a workflow-wide setting did)".to_string());
        }
        match &self.position {
            Some((slug, StateFate::Gone)) => parts.push(format!("the session's state '{slug}' is gone")),
            Some((slug, StateFate::Changed)) => parts.push(format!("the session's state '{slug}' changed")),
            Some((slug, StateFate::Kept)) if self.known => {
                parts.push(format!("the session's state '{slug}' is unchanged"))
            }
            _ => {}
        }
        write!(f, "{}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hash: &str, states: &[(&str, &str)]) -> PinnedSpec {
        PinnedSpec {
            workflow: "w".into(),
            spec_hash: hash.into(),
            states: states
                .iter()
                .map(|(slug, digest)| PinnedState {
                    slug: slug.to_string(),
                    kind: "agent".into(),
                    digest: digest.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn changes_name_added_removed_and_changed_states_and_the_sessions_fate() {
        let before = spec("aa", &[("intake", "1"), ("review", "2"), ("done", "3")]);
        let after = spec("bb", &[("intake", "1"), ("done", "4"), ("audit", "5")]);
        let changes = SpecChanges::between(Some(&before), &after, Some("review"));
        assert_eq!(changes.added, ["audit"]);
        assert_eq!(changes.removed, ["review"]);
        assert_eq!(changes.changed, ["done"]);
        assert_eq!(changes.missing_position(), Some("review"));
        assert_eq!(
            changes.to_string(),
            "states added: 'audit'; states removed: 'review'; states changed: 'done'; the session's state 'review' is gone"
        );
        let at_done = SpecChanges::between(Some(&before), &after, Some("done"));
        assert_eq!(at_done.position, Some(("done".to_string(), StateFate::Changed)));
        assert_eq!(at_done.missing_position(), None);
    }

    #[test]
    fn a_lost_pinned_spec_still_tells_whether_the_state_exists() {
        let after = spec("bb", &[("intake", "1")]);
        let gone = SpecChanges::between(None, &after, Some("review"));
        assert!(!gone.known);
        assert_eq!(gone.missing_position(), Some("review"));
        assert!(gone.to_string().starts_with("the store no longer holds the pinned spec"));
        assert_eq!(SpecChanges::between(None, &after, Some("intake")).missing_position(), None);
    }

    #[test]
    fn only_lowercase_hex_names_a_stored_spec() {
        assert!(is_spec_hash("0123456789abcdef"));
        for bad in ["", "../x", "ABC", "a/b", "a.json", &"a".repeat(129)] {
            assert!(!is_spec_hash(bad), "{bad}");
        }
    }
}
