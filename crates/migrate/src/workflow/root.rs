//! The document's top level: `runtime.version`, the root keys contract 3 renamed or
//! dropped, and a `tests.config.js` folded into a `tests:` block. These edits come
//! first; what they learn (custom hook kinds, the old skills ceiling, the tools granted
//! everywhere) is handed to the state rewrite.

use archmax_compiler::syntax::yaml::{Entry, Node};

use super::{Layout, Refusal, Rewriter, entry};
use crate::edit::{comments_above, pad};

/// What the root keys tell the rewrite of each state.
pub(super) struct RootFacts {
    /// The hook kinds `extensions.hooks` declared.
    pub custom_kinds: Vec<String>,
    /// The root `skills.allow` ceiling, when there was one.
    pub ceiling: Option<Vec<String>>,
}

/// `runtime.version` "1" or "2" → "3"; any other version refuses the document.
pub(super) fn rewrite_runtime_version(w: &mut Rewriter<'_>, root: &Node) -> Result<(), Refusal> {
    if let Some((_, runtime)) = entry(root, "runtime") {
        match runtime.value.get("version") {
            Some(version) => {
                let written = version.scalar_text().unwrap_or("").trim().to_string();
                match written.as_str() {
                    "1" | "2" => {
                        w.edits.replace(w.scalar_range(version), "\"3\"");
                        w.change(version.span.start as usize, format!("`runtime.version` \"{written}\" → \"3\""));
                    }
                    "3" => {}
                    _ => return Err(Refusal::UnknownContract { at: version.span.start as usize, version: written }),
                }
            }
            None if runtime.value.as_mapping().is_none_or(|entries| entries.is_empty()) => {
                w.follow_up(runtime.key.span.start as usize, "`runtime` is not a `{ engine, version }` mapping: write `{ engine: archmax-harness, version: \"3\" }` or delete it");
            }
            None => {}
        }
    }
    Ok(())
}

/// The root keys: `name` → `title`, `description` → `instructions`, and `policy`,
/// `budget`, `extensions` and the `skills.allow` ceiling removed.
pub(super) fn rewrite_root_keys(w: &mut Rewriter<'_>, root: &Node, root_entries: &[Entry]) -> RootFacts {
    let has = |key: &str| entry(root, key).is_some();
    if let Some((_, name)) = entry(root, "name") {
        if has("title") {
            w.remove_keys(root, &["name"], None);
            w.follow_up(
                name.key.span.start as usize,
                "root `name:` removed beside an existing `title:`: check the title says what the name did",
            );
        } else {
            w.edits.replace(name.key.span.start as usize..name.key.span.end as usize, "title");
            w.change(name.key.span.start as usize, "root `name:` → `title:` (a label; the directory name is the slug)");
        }
    }
    if let Some((_, description)) = entry(root, "description") {
        if has("instructions") {
            w.remove_keys(root, &["description"], None);
            w.follow_up(
                description.key.span.start as usize,
                "root `description:` removed beside existing `instructions:`: fold what it said into the instructions, as direction for the agent",
            );
        } else {
            w.edits.replace(description.key.span.start as usize..description.key.span.end as usize, "instructions");
            w.change(description.key.span.start as usize, "root `description:` → `instructions:`");
            w.follow_up(
                description.key.span.start as usize,
                "the old `description:` now is the session's instructions: reread it as direction for the agent",
            );
        }
    }
    if let Some((_, policy)) = entry(root, "policy") {
        w.remove_keys(root, &["policy"], None);
        w.follow_up(
            policy.key.span.start as usize,
            "root `policy:` removed: declare what it denied as `tools.forbid_always` and `skills.forbid_always`",
        );
    }
    if let Some((_, budget)) = entry(root, "budget") {
        w.remove_keys(root, &["budget"], None);
        w.change(
            budget.key.span.start as usize,
            "root `budget` removed: the runtime's recursion limit (400 steps) bounds a turn",
        );
    }
    let mut custom_kinds = Vec::new();
    if let Some((_, extensions)) = entry(root, "extensions") {
        if let Some(kinds) = extensions.value.get("hooks").and_then(Node::as_sequence) {
            custom_kinds.extend(kinds.iter().filter_map(|kind| kind.scalar_text().map(str::to_string)));
        }
        w.remove_keys(root, &["extensions"], None);
        w.change(extensions.key.span.start as usize, "root `extensions` removed: a custom check is a code state");
    }
    let mut ceiling: Option<Vec<String>> = None;
    if let Some((skills_index, skills)) = entry(root, "skills")
        && let Some((_, allow)) = entry(&skills.value, "allow")
    {
        ceiling = Some(
            allow
                .value
                .as_sequence()
                .unwrap_or(&[])
                .iter()
                .filter_map(|slug| slug.scalar_text().map(str::to_string))
                .collect(),
        );
        w.remove_keys(&skills.value, &["allow"], Some((root_entries, skills_index)));
        w.change(
            allow.key.span.start as usize,
            "root `skills.allow` (a ceiling) removed: the states' own `skills.allow` lists grant, as they did under it",
        );
    }
    RootFacts { custom_kinds, ceiling }
}

/// A `tests.config.js` beside the workflow folded into a new `tests:` block (or a
/// follow-up when the document has one already); whether it was folded.
pub(super) fn fold_tests_config(
    w: &mut Rewriter<'_>,
    root: &Node,
    tests_config: Option<&str>,
    states_entry: &Entry,
    lay: &Layout,
) -> bool {
    let text = w.text;
    let mut folded_tests_config = false;
    if let Some(config) = tests_config {
        if let Some((_, tests)) = entry(root, "tests") {
            w.follow_up(
                tests.key.span.start as usize,
                "`tests.config.js` sits beside a `tests:` block: merge what it sets into the block and delete the file",
            );
        } else {
            let mut lines = Vec::new();
            let mut unknown = Vec::new();
            let pattern = regex::Regex::new(r"\b([A-Za-z_]+)\s*:\s*([0-9]+|\{\s*\})").ok();
            for capture in pattern.iter().flat_map(|pattern| pattern.captures_iter(config)) {
                let (Some(key), Some(value)) = (capture.get(1), capture.get(2)) else { continue };
                match key.as_str() {
                    "maxConcurrency" | "caseTimeoutMs" | "judge" => lines.push(format!(
                        "{}{}: {}\n",
                        pad(lay.step),
                        key.as_str(),
                        value.as_str().split_whitespace().collect::<String>()
                    )),
                    other => unknown.push(other.to_string()),
                }
            }
            let at = comments_above(text, states_entry.key.span.start as usize);
            if lines.is_empty() {
                lines.push(format!("{}maxConcurrency: 1\n", pad(lay.step)));
            }
            let block = format!("tests:\n{}{}", lines.concat(), if lay.blank { "\n" } else { "" });
            w.edits.insert(at, block);
            w.change(at, "`tests.config.js` folded into a `tests:` block (the file is removed)");
            if !unknown.is_empty() {
                w.follow_up(
                    at,
                    format!("`tests.config.js` also set {}: the `tests:` block has no such keys", unknown.join(", ")),
                );
            }
            folded_tests_config = true;
        }
    }
    folded_tests_config
}

/// The tools the root's `tools.allow_always` grants everywhere, when it lists them.
pub(super) fn tools_granted(root: &Node) -> Option<Vec<String>> {
    root.get("tools").and_then(|tools| tools.get("allow_always")).and_then(Node::as_sequence).map(|items| {
        items
            .iter()
            .filter_map(|item| item.as_str().or_else(|| item.get("tool").and_then(Node::as_str)).map(str::to_string))
            .collect()
    })
}
