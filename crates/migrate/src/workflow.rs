//! The rewrite of one contract-2 `workflow.yaml` into contract 3.
//!
//! The one thing to know: the document is read as plain spanned YAML nodes (the
//! contract-3 schema refuses a contract-2 file by definition), every decision is made
//! over those nodes, and every change lands as an [`Edits`] entry on the original text:
//! a scalar replaced where it stands, an entry's lines deleted, a moved block copied
//! line for line, a new state inserted beside the one it replaces a hook of. Nothing is
//! re-serialized, so comments and layout outside what changed survive byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use archmax_compiler::source::FileId;
use archmax_compiler::syntax::is_slug;
use archmax_compiler::syntax::yaml::{self, Entry, Node, NodeKind};
use archmax_compiler::tools::DEFAULT_TOOLS;

use super::edit::{Edits, column, comments_above, line_end, line_start, literal_block, node_end, pad, yaml_string};
use super::script::{self, Phase, Port};

/// A finding at a byte offset of the file it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    pub at: usize,
    pub text: String,
}

/// A script the migration writes, relative to the workflow directory.
pub(crate) struct NewScript {
    pub path: String,
    pub text: String,
    /// The hook file it was ported from, with notes at offsets into that file.
    pub from_hook: Option<String>,
    pub hook_changes: Vec<Note>,
    pub hook_follow_ups: Vec<Note>,
}

/// What rewriting one document produced.
pub(crate) struct Rewrite {
    pub text: String,
    pub changes: Vec<Note>,
    pub follow_ups: Vec<Note>,
    pub scripts: Vec<NewScript>,
    /// Hook files every use of which was ported (to be removed).
    pub ported_hooks: BTreeSet<String>,
    /// States that are gone, and the state a case should name instead.
    pub renamed: BTreeMap<String, String>,
    /// The refusal state written in front of a start state, when there is exactly one.
    pub refusal: Option<String>,
    /// `tests.config.js` was folded into the `tests:` block.
    pub folded_tests_config: bool,
}

/// Why a document cannot be migrated at all.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Unparseable { at: usize, message: String },
    NotAWorkflow { at: usize, reason: String },
    UnknownContract { at: usize, version: String },
}

/// The files a workflow directory holds that the rewrite reads.
pub(crate) trait WorkflowFiles {
    /// The text of a file relative to the workflow directory, if it is there.
    fn read(&self, path: &str) -> Option<String>;

    /// Something (a file, a directory, a link) is at `path`, so nothing may be written there.
    fn exists(&self, path: &str) -> bool {
        self.read(path).is_some()
    }
}

const TRIGGER_KEYS: [&str; 6] = ["description", "session", "message", "connection", "requires", "returns"];

/// How the document lays out states, so new ones look like their neighbours.
struct Layout {
    /// Column of the state keys.
    state: usize,
    /// One level of indentation.
    step: usize,
    /// Columns from a `transitions:` key to its `- ` items.
    items: usize,
    /// States are separated by blank lines.
    blank: bool,
}

impl Layout {
    fn field(&self) -> usize {
        self.state + self.step
    }

    fn item(&self) -> usize {
        self.field() + self.items
    }

    fn transition(&self, to: &str, description: &str) -> String {
        format!(
            "{}- to: {}\n{}  description: {}\n",
            pad(self.item()),
            yaml_string(to),
            pad(self.item()),
            yaml_string(description)
        )
    }
}

/// One hook of a `before` or `after` list.
enum Hook {
    Script { path: String, at: usize, max_iterations: u64 },
    Rubric { at: usize, instructions: String, max_iterations: u64, model: Option<String> },
    Other { at: usize, kind: String },
}

/// Writes the fields of a grader state made from a rubric: its type, its instructions
/// (the rubric's criteria and how to decide) and the rubric's model, if it named one.
fn grader_fields(block: &mut String, lay: &Layout, instructions: &str, model: Option<&str>) {
    block.push_str(&format!("{}type: grader\n", pad(lay.field())));
    block.push_str(&format!(
        "{}instructions: {}",
        pad(lay.field()),
        literal_block(instructions, lay.field(), lay.field() + lay.step)
    ));
    if let Some(model) = model {
        block.push_str(&format!("{}model: {}\n", pad(lay.field()), yaml_string(model)));
    }
}

fn hooks_of(value: &Node) -> Vec<Hook> {
    let items: Vec<&Node> = match &value.kind {
        NodeKind::Sequence(items) => items.iter().collect(),
        _ => vec![value],
    };
    let mut hooks = Vec::new();
    for item in items {
        let at = item.span.start as usize;
        if let Some(path) = item.as_str() {
            hooks.push(Hook::Script { path: path.to_string(), at, max_iterations: 0 });
            continue;
        }
        let max_iterations = item.get("max_iterations").and_then(Node::as_i64).unwrap_or(0).max(0) as u64;
        if let Some(path) = item.get("script").and_then(Node::as_str) {
            hooks.push(Hook::Script { path: path.to_string(), at, max_iterations });
        } else if let Some(rubric) = item.get("rubric") {
            hooks.push(Hook::Rubric {
                at,
                instructions: rubric.get("instructions").and_then(Node::as_str).unwrap_or("").to_string(),
                max_iterations: rubric.get("max_iterations").and_then(Node::as_i64).unwrap_or(0).max(0) as u64,
                model: rubric.get("model").and_then(Node::as_str).map(str::to_string),
            });
        } else {
            let kind = item
                .as_mapping()
                .and_then(|entries| entries.first())
                .and_then(|entry| entry.key.scalar_text())
                .unwrap_or("?")
                .to_string();
            hooks.push(Hook::Other { at, kind });
        }
    }
    hooks
}

fn slugify(text: &str) -> String {
    let mut out = String::new();
    for character in text.chars() {
        if character.is_ascii_alphanumeric() {
            out.push(character.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let name = name.strip_suffix(".js").or_else(|| name.strip_suffix(".mjs")).unwrap_or(name);
    slugify(name)
}

struct Rewriter<'t> {
    text: &'t str,
    files: &'t dyn WorkflowFiles,
    edits: Edits,
    changes: Vec<Note>,
    follow_ups: Vec<Note>,
    scripts: Vec<NewScript>,
    taken: BTreeSet<String>,
}

impl<'t> Rewriter<'t> {
    fn change(&mut self, at: usize, text: impl Into<String>) {
        self.changes.push(Note { at, text: text.into() });
    }

    fn follow_up(&mut self, at: usize, text: impl Into<String>) {
        self.follow_ups.push(Note { at, text: text.into() });
    }

    fn slice(&self, range: Range<usize>) -> &'t str {
        self.text.get(range).unwrap_or("")
    }

    /// A free state slug: `preferred`, else `<state>-<preferred>`, else numbered. Both
    /// parts are slugified first (a contract-2 state key need not be a slug), and a name
    /// is free only when no state has it and no `scripts/<name>.js` is on disk.
    fn fresh(&mut self, preferred: &str, state: &str) -> String {
        let preferred = match slugify(preferred) {
            empty if empty.is_empty() => "check".to_string(),
            slug => slug,
        };
        let state = match slugify(state) {
            empty if empty.is_empty() => "state".to_string(),
            slug => slug,
        };
        let free = |w: &Self, slug: &str| {
            is_slug(slug) && !w.taken.contains(slug) && !w.files.exists(&format!("scripts/{slug}.js"))
        };
        let mut chosen = [preferred.clone(), format!("{state}-{preferred}")].into_iter().find(|slug| free(self, slug));
        // Of `taken.len() + 1` numbered names at least one is not taken; the files on
        // disk are finite too, so the bound only guards against a pathological disk.
        let bound = self.taken.len() + 1024;
        for number in 2..=bound {
            if chosen.is_some() {
                break;
            }
            let slug = format!("{state}-{preferred}-{number}");
            if free(self, &slug) {
                chosen = Some(slug);
            }
        }
        let slug = chosen.unwrap_or_else(|| format!("{state}-{preferred}-{}", bound + 1));
        self.taken.insert(slug.clone());
        slug
    }

    fn is_flow(&self, node: &Node) -> bool {
        matches!(self.text.as_bytes().get(node.span.start as usize), Some(b'{' | b'['))
    }

    /// The lines of a block entry; for an entry that opens a sequence item (`- on: x`),
    /// the text up to the next entry's key.
    fn entry_range(&self, entries: &[Entry], index: usize) -> Range<usize> {
        let entry = &entries[index];
        let start = entry.key.span.start as usize;
        let end = (entry.value.span.end.max(entry.key.span.end)) as usize;
        let first = line_start(self.text, start);
        if self.slice(first..start).trim().is_empty() {
            first..node_end(self.text, end)
        } else if let Some(next) = entries.get(index + 1) {
            start..next.key.span.start as usize
        } else {
            start..node_end(self.text, end)
        }
    }

    /// Deletes `keys` from `map`. A flow mapping is rewritten from its kept entries;
    /// when every entry goes and `owner` is given, the owner's entry goes instead.
    fn remove_keys(&mut self, map: &Node, keys: &[&str], owner: Option<(&[Entry], usize)>) {
        let Some(entries) = map.as_mapping() else { return };
        let doomed: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.key.scalar_text().is_some_and(|key| keys.contains(&key)))
            .map(|(index, _)| index)
            .collect();
        if doomed.is_empty() {
            return;
        }
        if doomed.len() == entries.len()
            && let Some((owner_entries, owner_index)) = owner
        {
            let range = self.entry_range(owner_entries, owner_index);
            self.edits.replace(range, "");
            return;
        }
        if self.is_flow(map) {
            let kept: Vec<String> = entries
                .iter()
                .enumerate()
                .filter(|(index, _)| !doomed.contains(index))
                .map(|(_, entry)| {
                    let range = entry.key.span.start as usize..entry.value.span.end as usize;
                    self.edits.within(&range).apply(self.slice(range))
                })
                .collect();
            let text = if kept.is_empty() { "{}".to_string() } else { format!("{{ {} }}", kept.join(", ")) };
            self.edits.replace(map.span.start as usize..map.span.end as usize, text);
            return;
        }
        for index in doomed {
            let range = self.entry_range(entries, index);
            self.edits.replace(range, "");
        }
    }

    /// A scalar's span without the whitespace a flow collection's parser counts into it.
    fn scalar_range(&self, node: &Node) -> Range<usize> {
        let (start, end) = (node.span.start as usize, node.span.end as usize);
        let trimmed = self.slice(start..end).trim_end().len();
        start..start + trimmed
    }

    /// Replaces an entry (key through value) where it stands.
    fn replace_entry(&mut self, entry: &Entry, text: impl Into<String>) {
        let end = self.scalar_range(&entry.value).end.max(entry.key.span.end as usize);
        self.edits.replace(entry.key.span.start as usize..end, text);
    }

    /// The lines of a block entry together with the comments directly above it.
    fn block_with_comments(&self, entry: &Entry) -> Range<usize> {
        let start = comments_above(self.text, entry.key.span.start as usize);
        start..node_end(self.text, entry.value.span.end.max(entry.key.span.end) as usize)
    }
}

fn entry<'n>(map: &'n Node, key: &str) -> Option<(usize, &'n Entry)> {
    map.as_mapping()?.iter().enumerate().find(|(_, entry)| entry.key.scalar_text() == Some(key))
}

fn layout(text: &str, states: &[Entry]) -> Layout {
    let state = states.first().map_or(2, |entry| column(text, entry.key.span.start as usize));
    let step = states
        .iter()
        .find_map(|entry| entry.value.as_mapping()?.first().map(|field| column(text, field.key.span.start as usize)))
        .filter(|field| *field > state)
        .map_or(2, |field| field - state);
    let items = states
        .iter()
        .find_map(|entry| {
            let (_, transitions) = self::entry(&entry.value, "transitions")?;
            let item = transitions.value.as_sequence()?.first()?;
            let dash = text[..item.span.start as usize].rfind('-')?;
            let key = column(text, transitions.key.span.start as usize);
            column(text, dash).checked_sub(key)
        })
        .unwrap_or(step);
    let blank = states.windows(2).any(|pair| {
        let between = text.get(pair[0].value.span.end as usize..pair[1].key.span.start as usize).unwrap_or("");
        between.split('\n').skip(1).any(|line| line.trim().is_empty())
    });
    Layout { state, step, items, blank }
}

/// Rewrites one document. `files` reads hook scripts; `tests_config` is the text of a
/// `tests.config.js` beside the workflow, if there is one.
pub(crate) fn rewrite(text: &str, files: &dyn WorkflowFiles, tests_config: Option<&str>) -> Result<Rewrite, Refusal> {
    let document = yaml::load(FileId(0), text);
    if let Some(error) = document.diagnostics.iter().find(|diagnostic| diagnostic.is_error()) {
        return Err(Refusal::Unparseable {
            at: error.span.map_or(0, |span| span.start as usize),
            message: error.message.clone(),
        });
    }
    let Some(root) = document.root else {
        return Err(Refusal::NotAWorkflow { at: 0, reason: "the file holds no YAML document".to_string() });
    };
    let Some(root_entries) = root.as_mapping() else {
        return Err(Refusal::NotAWorkflow {
            at: root.span.start as usize,
            reason: "its top level is not a mapping".to_string(),
        });
    };
    let Some((_, states_entry)) = entry(&root, "states") else {
        return Err(Refusal::NotAWorkflow { at: 0, reason: "it has no `states:`".to_string() });
    };
    let Some(states) = states_entry.value.as_mapping() else {
        return Err(Refusal::NotAWorkflow {
            at: states_entry.value.span.start as usize,
            reason: "its `states:` is not a mapping of states".to_string(),
        });
    };

    let mut w = Rewriter {
        text,
        files,
        edits: Edits::default(),
        changes: Vec::new(),
        follow_ups: Vec::new(),
        scripts: Vec::new(),
        taken: states.iter().filter_map(|state| state.key.scalar_text().map(str::to_string)).collect(),
    };
    let lay = layout(text, states);

    // runtime.version
    if let Some((_, runtime)) = entry(&root, "runtime") {
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

    // Root keys.
    let has = |key: &str| entry(&root, key).is_some();
    if let Some((_, name)) = entry(&root, "name") {
        if has("title") {
            w.remove_keys(&root, &["name"], None);
            w.follow_up(
                name.key.span.start as usize,
                "root `name:` removed beside an existing `title:`: check the title says what the name did",
            );
        } else {
            w.edits.replace(name.key.span.start as usize..name.key.span.end as usize, "title");
            w.change(name.key.span.start as usize, "root `name:` → `title:` (a label; the directory name is the slug)");
        }
    }
    if let Some((_, description)) = entry(&root, "description") {
        if has("instructions") {
            w.remove_keys(&root, &["description"], None);
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
    if let Some((_, policy)) = entry(&root, "policy") {
        w.remove_keys(&root, &["policy"], None);
        w.follow_up(
            policy.key.span.start as usize,
            "root `policy:` removed: declare what it denied as `tools.forbid_always` and `skills.forbid_always`",
        );
    }
    if let Some((_, budget)) = entry(&root, "budget") {
        w.remove_keys(&root, &["budget"], None);
        w.change(
            budget.key.span.start as usize,
            "root `budget` removed: the runtime's recursion limit (400 steps) bounds a turn",
        );
    }
    let mut custom_kinds = Vec::new();
    if let Some((_, extensions)) = entry(&root, "extensions") {
        if let Some(kinds) = extensions.value.get("hooks").and_then(Node::as_sequence) {
            custom_kinds.extend(kinds.iter().filter_map(|kind| kind.scalar_text().map(str::to_string)));
        }
        w.remove_keys(&root, &["extensions"], None);
        w.change(extensions.key.span.start as usize, "root `extensions` removed: a custom check is a code state");
    }
    let mut ceiling: Option<Vec<String>> = None;
    if let Some((skills_index, skills)) = entry(&root, "skills")
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
    let mut folded_tests_config = false;
    if let Some(config) = tests_config {
        if let Some((_, tests)) = entry(&root, "tests") {
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

    // States: what each becomes.
    let mut retarget: BTreeMap<String, String> = BTreeMap::new();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut gates: BTreeMap<String, Vec<(String, Hook)>> = BTreeMap::new();
    let mut checks: BTreeMap<String, Vec<(String, Hook)>> = BTreeMap::new();
    let mut refusals: BTreeMap<String, String> = BTreeMap::new();
    let mut finishes: BTreeMap<String, String> = BTreeMap::new();
    for state in states {
        let Some(slug) = state.key.scalar_text() else { continue };
        let node = &state.value;
        let kind = node.get("type").and_then(Node::as_str).unwrap_or("agent");
        if !is_slug(slug) {
            w.follow_up(
                state.key.span.start as usize,
                format!("the state key `{}` is not a kebab-case slug, which contract 3 requires: rename it (and every `to:` and `on_error:` naming it) to `{}` or another slug", slug.escape_debug(), slugify(slug)),
            );
        }
        if let Some(before) = node.get("before") {
            let mut list = Vec::new();
            for hook in hooks_of(before) {
                let preferred = match &hook {
                    Hook::Script { path, .. } => stem(path),
                    Hook::Rubric { .. } => format!("{slug}-screen"),
                    Hook::Other { .. } => continue,
                };
                let name = w.fresh(if preferred.is_empty() { "check" } else { &preferred }, slug);
                list.push((name, hook));
            }
            if let Some((first, _)) = list.first() {
                retarget.insert(slug.to_string(), first.clone());
                if node.get("triggers").is_some() {
                    let refused = w.fresh(&format!("{slug}-refused"), slug);
                    refusals.insert(slug.to_string(), refused);
                }
                gates.insert(slug.to_string(), list);
            }
        }
        if let Some(after) = node.get("after") {
            if kind == "human" {
                w.follow_up(
                    after.span.start as usize,
                    format!("`{slug}` is a human state: a person picks its transition, so its `after` check has no place to run; put a code or grader state behind the edge that needs it"),
                );
            } else {
                let mut list = Vec::new();
                for hook in hooks_of(after) {
                    let preferred = match &hook {
                        Hook::Script { path, .. } => stem(path),
                        Hook::Rubric { .. } => format!("{slug}-review"),
                        Hook::Other { .. } => continue,
                    };
                    let name = w.fresh(if preferred.is_empty() { "check" } else { &preferred }, slug);
                    list.push((name, hook));
                }
                if !list.is_empty() {
                    let terminal = node.get("transitions").and_then(Node::as_sequence).is_none_or(<[Node]>::is_empty);
                    if terminal {
                        let done = w.fresh(&format!("{slug}-done"), slug);
                        finishes.insert(slug.to_string(), done);
                    }
                    checks.insert(slug.to_string(), list);
                }
            }
        }
        if kind == "trigger" {
            let targets: Vec<&str> = node
                .get("transitions")
                .and_then(Node::as_sequence)
                .unwrap_or(&[])
                .iter()
                .filter_map(|transition| transition.get("to").and_then(Node::as_str))
                .collect();
            if let [target] = targets.as_slice() {
                renamed.insert(slug.to_string(), (*target).to_string());
            }
        }
    }

    // Every `to:` and `on_error:` into a gated state now enters its first gate.
    for state in states {
        let node = &state.value;
        let mut targets: Vec<&Node> = node
            .get("transitions")
            .and_then(Node::as_sequence)
            .unwrap_or(&[])
            .iter()
            .filter_map(|transition| transition.get("to"))
            .collect();
        targets.extend(node.get("on_error"));
        for target in targets {
            let Some(name) = target.as_str() else { continue };
            if let Some(gate) = retarget.get(name) {
                w.edits.replace(w.scalar_range(target), gate.clone());
                w.change(
                    target.span.start as usize,
                    format!("`{name}` → `{gate}`: the check in front of `{name}` is entered first"),
                );
            } else if let Some(into) = renamed.get(name) {
                w.edits.replace(w.scalar_range(target), yaml_string(into));
                w.follow_up(target.span.start as usize, format!("this edge led into the trigger state `{name}`, which is now a trigger of `{into}`: check it still belongs here"));
            }
        }
    }

    let tools_granted: Option<Vec<String>> =
        root.get("tools").and_then(|tools| tools.get("allow_always")).and_then(Node::as_sequence).map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    item.as_str().or_else(|| item.get("tool").and_then(Node::as_str)).map(str::to_string)
                })
                .collect()
        });

    for (index, state) in states.iter().enumerate() {
        let Some(slug) = state.key.scalar_text() else { continue };
        let node = &state.value;
        let kind = node.get("type").and_then(Node::as_str).unwrap_or("agent");
        let mut doomed: Vec<&str> = Vec::new();
        let on_error = node
            .get("on_error")
            .and_then(Node::as_str)
            .map(|target| retarget.get(target).map_or(target, String::as_str).to_string());

        // type: wait / trigger / workflow
        match kind {
            "wait" => {
                if let Some((_, type_entry)) = entry(node, "type") {
                    if node.get("instructions").is_some() {
                        doomed.push("type");
                        w.follow_up(
                            type_entry.key.span.start as usize,
                            format!("`{slug}` was a `type: wait` state: make sure its instructions say to call `archmax_wait` with what it waits for"),
                        );
                    } else {
                        w.replace_entry(
                            type_entry,
                            format!(
                                "instructions: {}",
                                yaml_string("Call archmax_wait with a reason naming what you are waiting for, then stop. When it arrives you continue here: pick the transition it calls for.")
                            ),
                        );
                    }
                    w.change(
                        type_entry.key.span.start as usize,
                        format!("`type: wait` removed: `{slug}` is an agent state that parks with `archmax_wait`"),
                    );
                }
            }
            "trigger" => {
                if let Some(target) = renamed.get(slug).cloned() {
                    let range = w.entry_range(states, index);
                    w.edits.replace(range, "");
                    w.change(
                        state.key.span.start as usize,
                        format!("the trigger state `{slug}` is now the trigger `{slug}` of `{target}`"),
                    );
                    add_trigger(&mut w, &lay, states, slug, node, &target, &gates);
                } else {
                    w.follow_up(state.key.span.start as usize, format!("the trigger state `{slug}` does not lead to exactly one state: declare its trigger under `triggers:` of the state it enters, and delete it"));
                    doomed.push("type");
                }
                continue;
            }
            "workflow" => doomed.push("type"),
            _ => {}
        }
        if let Some((_, workflow_entry)) = entry(node, "workflow") {
            rewrite_delegation(&mut w, node, slug, workflow_entry, &mut doomed);
        }

        if let Some((budget_index, budget)) = entry(node, "budget")
            && let Some((_, turns)) = entry(&budget.value, "maxTurns")
        {
            let entries = node.as_mapping().unwrap_or(&[]);
            w.remove_keys(&budget.value, &["maxTurns"], Some((entries, budget_index)));
            w.change(
                turns.key.span.start as usize,
                format!("`budget.maxTurns` removed from `{slug}`: the recursion limit bounds a turn"),
            );
        }
        for key in ["max_corrections", "max_iterations"] {
            if let Some((_, removed)) = entry(node, key) {
                doomed.push(key);
                w.change(
                    removed.key.span.start as usize,
                    format!("`{key}` removed from `{slug}`: send-backs are counted on the trail"),
                );
            }
        }
        if let Some(ceiling) = &ceiling
            && let Some(allowed) = node.get("skills").and_then(|skills| skills.get("allow")).and_then(Node::as_sequence)
        {
            for skill in allowed {
                if let Some(name) = skill.scalar_text()
                    && !ceiling.iter().any(|kept| kept == name)
                {
                    w.follow_up(skill.span.start as usize, format!("`{name}` was outside the root ceiling, so `{slug}` never had it: now it does; drop it if that was the point"));
                }
            }
        }

        // Transitions: `on:` removed.
        for transition in node.get("transitions").and_then(Node::as_sequence).unwrap_or(&[]) {
            let Some((_, on)) = entry(transition, "on") else { continue };
            let trigger = on.value.scalar_text().unwrap_or("?").to_string();
            if transition.get("description").is_some() {
                w.remove_keys(transition, &["on"], None);
            } else {
                w.replace_entry(
                    on,
                    format!("description: {}", yaml_string(&format!("The awaited `{trigger}` has arrived."))),
                );
            }
            w.change(on.key.span.start as usize, format!("transition `on: {trigger}` removed: `{slug}` parks with `archmax_wait` and picks its own transition when the delivery resumes it"));
        }

        // parallel / join
        if let Some((_, parallel)) = entry(node, "parallel") {
            sequence_branches(&mut w, &lay, states, slug, node, parallel, &mut doomed);
        }

        // Hooks.
        for (key, phase) in [("before", Phase::Before), ("after", Phase::After)] {
            let Some((_, hook_entry)) = entry(node, key) else { continue };
            doomed.push(key);
            for hook in hooks_of(&hook_entry.value) {
                if let Hook::Other { at, kind } = hook {
                    let known = custom_kinds.contains(&kind);
                    w.follow_up(
                        at,
                        format!(
                            "the {}`{kind}` hook of `{slug}` has no contract-3 form: write its check as a code state {} `{slug}` by hand",
                            if known { "custom " } else { "" },
                            if phase == Phase::Before { "in front of" } else { "behind" }
                        ),
                    );
                }
            }
        }
        let mut inserts_before = String::new();
        let mut inserts_after = String::new();
        if let Some(list) = gates.get(slug) {
            let refused = refusals.get(slug).cloned();
            for (position, (gate, hook)) in list.iter().enumerate() {
                let next = list.get(position + 1).map_or(slug.to_string(), |(name, _)| name.clone());
                let mut block = format!("{}{gate}:\n", pad(lay.state));
                let moved = if position == 0 { entry(node, "triggers").map(|(_, triggers)| triggers) } else { None };
                let description_ok = format!("The `{gate}` check passed.");
                let raise_code = format!("{slug}-refused");
                match hook {
                    Hook::Script { path, at, .. } => {
                        block.push_str(&format!(
                            "{}type: code\n{}script: scripts/{gate}.js\n",
                            pad(lay.field()),
                            pad(lay.field())
                        ));
                        let source = files.read(path);
                        let onward = [next.clone()];
                        let spec = Port {
                            phase: Phase::Before,
                            guarded: slug,
                            here: gate,
                            onward: &onward,
                            refused: refused.as_deref(),
                            raise_code: &raise_code,
                            max_iterations: 0,
                        };
                        let grants = port_script(&mut w, path, *at, source.as_deref(), &spec, gate, &tools_granted);
                        if let Some(moved) = moved {
                            let range = w.block_with_comments(moved);
                            block.push_str(w.slice(range.clone()));
                            w.edits.replace(range, "");
                        }
                        block.push_str(&grants.render(&lay));
                        w.change(*at, format!("the `before` hook {path} of `{slug}` → the code state `{gate}` in front of it (scripts/{gate}.js)"));
                    }
                    Hook::Rubric { at, instructions, model, .. } => {
                        let decide = match &refused {
                            Some(refused) => {
                                format!("- It fails: advance to `{refused}` with a reason the requester can read.")
                            }
                            None => format!("- It fails: raise `{raise_code}` with the reason."),
                        };
                        let text = format!(
                            "{}\n\nDeciding (this was the `before` rubric of `{slug}`):\n- The request passes: advance to `{next}`.\n{decide}",
                            instructions.trim_end()
                        );
                        grader_fields(&mut block, &lay, &text, model.as_deref());
                        if let Some(moved) = moved {
                            let range = w.block_with_comments(moved);
                            block.push_str(w.slice(range.clone()));
                            w.edits.replace(range, "");
                        }
                        w.change(
                            *at,
                            format!("the `before` rubric of `{slug}` → the grader state `{gate}` in front of it"),
                        );
                    }
                    Hook::Other { .. } => continue,
                }
                if let Some(on_error) = &on_error {
                    block.push_str(&format!("{}on_error: {}\n", pad(lay.field()), yaml_string(on_error)));
                }
                block.push_str(&format!("{}transitions:\n", pad(lay.field())));
                block.push_str(&lay.transition(&next, &description_ok));
                if let Some(refused) = &refused {
                    block.push_str(&lay.transition(refused, &format!("The `{gate}` check refused the request.")));
                }
                if moved.is_some() {
                    w.change(
                        state.key.span.start as usize,
                        format!("the triggers of `{slug}` moved to `{gate}`: a session starts with the check"),
                    );
                }
                inserts_before.push_str(&block);
                if lay.blank {
                    inserts_before.push('\n');
                }
            }
            if let Some(refused) = &refused {
                let mut block = if lay.blank { "\n".to_string() } else { String::new() };
                block.push_str(&format!("{}{refused}:\n", pad(lay.state)));
                let text = format!(
                    "A check in front of `{slug}` refused this request; the runtime note gives the reason. Tell the requester in one short reply that the request was rejected and why, using that reason. Do nothing else."
                );
                block.push_str(&format!(
                    "{}instructions: {}",
                    pad(lay.field()),
                    literal_block(&text, lay.field(), lay.field() + lay.step)
                ));
                inserts_after.push_str(&block);
                w.change(state.key.span.start as usize, format!("a veto before `{slug}` now advances to the terminal state `{refused}`, which tells the requester why"));
            }
        }
        if let Some(list) = checks.get(slug) {
            let transitions = entry(node, "transitions").map(|(_, transitions)| transitions);
            let originals: Vec<(String, String)> = transitions
                .and_then(|transitions| transitions.value.as_sequence())
                .unwrap_or(&[])
                .iter()
                .filter_map(|transition| {
                    let to = transition.get("to")?.as_str()?;
                    let to = retarget.get(to).map_or(to, String::as_str).to_string();
                    let description = transition.get("description").and_then(Node::as_str).unwrap_or("").to_string();
                    Some((to, description))
                })
                .collect();
            let finish = finishes.get(slug).cloned();
            let (first, _) = &list[0];
            // The state's own edge now leads into its first check.
            let lead = match (&finish, originals.as_slice()) {
                (Some(_), _) => "Your reply is written; a check reviews it before the session ends.".to_string(),
                (None, [(_, description)]) if !description.is_empty() => description.clone(),
                (None, _) => {
                    let named: Vec<String> = originals
                        .iter()
                        .map(|(to, description)| {
                            if description.is_empty() {
                                format!("`{to}`")
                            } else {
                                format!("`{to}` when {}", description.trim_end_matches('.'))
                            }
                        })
                        .collect();
                    format!("The work is done; name the next step in your reason: {}.", named.join("; "))
                }
            };
            let lead_block = format!("{}transitions:\n{}", pad(lay.field()), lay.transition(first, &lead));
            match transitions {
                Some(transitions) => {
                    let range = w.block_with_comments(transitions);
                    w.edits.replace(range, lead_block);
                }
                None => {
                    let at = node_end(text, node.span.end as usize);
                    w.edits.insert(at, lead_block);
                }
            }
            if finish.is_some() {
                w.follow_up(
                    state.key.span.start as usize,
                    format!("`{slug}` was terminal and now advances to `{first}` when its reply is written: make its instructions end with that advance"),
                );
            }
            for (position, (check, hook)) in list.iter().enumerate() {
                let last = position + 1 == list.len();
                let onward: Vec<String> = if !last {
                    vec![list[position + 1].0.clone()]
                } else if let Some(done) = &finish {
                    vec![done.clone()]
                } else {
                    originals.iter().map(|(to, _)| to.clone()).collect()
                };
                let mut block = if lay.blank { "\n".to_string() } else { String::new() };
                block.push_str(&format!("{}{check}:\n", pad(lay.state)));
                let raise_code = format!("{slug}-rejected");
                let back = format!("The `{check}` check sends the work back; the reason names what to fix.");
                match hook {
                    Hook::Script { path, at, max_iterations } => {
                        block.push_str(&format!(
                            "{}type: code\n{}script: scripts/{check}.js\n",
                            pad(lay.field()),
                            pad(lay.field())
                        ));
                        let source = files.read(path);
                        let spec = Port {
                            phase: Phase::After,
                            guarded: slug,
                            here: check,
                            onward: &onward,
                            refused: None,
                            raise_code: &raise_code,
                            max_iterations: *max_iterations,
                        };
                        let grants = port_script(&mut w, path, *at, source.as_deref(), &spec, check, &tools_granted);
                        block.push_str(&grants.render(&lay));
                        w.change(*at, format!("the `after` hook {path} of `{slug}` → the code state `{check}` behind it (scripts/{check}.js)"));
                        if *max_iterations > 0 {
                            w.change(*at, format!("`max_iterations: {max_iterations}` → at most {max_iterations} `correct` send-backs, counted on the trail by scripts/{check}.js"));
                        }
                    }
                    Hook::Rubric { at, instructions, max_iterations, model } => {
                        let pass = match onward.as_slice() {
                            [one] => format!("advance to `{one}`"),
                            _ => "advance along the transition the work calls for".to_string(),
                        };
                        let bound = if *max_iterations == 0 {
                            format!(
                                "- It could be better but is acceptable only with a fix: raise `{raise_code}` with the fix (no send-back was allowed)."
                            )
                        } else {
                            format!(
                                "- It needs a correction: advance back to `{slug}` with a reason naming each fix. Count send-backs on the trail first: when it already holds {max_iterations} step(s) with kind \"grader\" and to \"{slug}\", raise `{raise_code}` instead."
                            )
                        };
                        let text = format!(
                            "{}\n\nDeciding (this was the `after` rubric of `{slug}`; read the session with archmax_get_history, which replaces the old task payload):\n- It passes: {pass}.\n{bound}\n- It is unacceptable: raise `{raise_code}` with the reason.",
                            instructions.trim_end()
                        );
                        grader_fields(&mut block, &lay, &text, model.as_deref());
                        w.change(*at, format!("the `after` rubric of `{slug}` → the grader state `{check}` behind it"));
                        w.change(*at, format!("`max_iterations: {max_iterations}` → a send-back bound of {max_iterations} in the instructions of `{check}`, counted on the trail"));
                        if ["userRequest", "payload", "`history`", "phase"]
                            .iter()
                            .any(|word| instructions.contains(word))
                        {
                            w.follow_up(*at, format!("the criteria of `{check}` speak of the rubric's old JSON payload: reword them for a grader that reads archmax_get_history"));
                        }
                    }
                    Hook::Other { .. } => continue,
                }
                if let Some(on_error) = &on_error {
                    block.push_str(&format!("{}on_error: {}\n", pad(lay.field()), yaml_string(on_error)));
                }
                if last && finish.is_none() {
                    match transitions {
                        Some(transitions) if !w.is_flow(&transitions.value) => {
                            let range = w.block_with_comments(transitions);
                            let moved = w.edits.within(&range).apply(w.slice(range.clone()));
                            block.push_str(&moved);
                        }
                        _ => {
                            block.push_str(&format!("{}transitions:\n", pad(lay.field())));
                            for (to, description) in &originals {
                                block.push_str(&lay.transition(to, description));
                            }
                        }
                    }
                    block.push_str(&lay.transition(slug, &back));
                } else {
                    block.push_str(&format!("{}transitions:\n", pad(lay.field())));
                    block.push_str(&lay.transition(&onward[0], &format!("The `{check}` check passed.")));
                    block.push_str(&lay.transition(slug, &back));
                }
                inserts_after.push_str(&block);
                if last && transitions.is_some() && finish.is_none() {
                    w.change(
                        state.key.span.start as usize,
                        format!("the transitions of `{slug}` moved to `{check}`; `{slug}` advances into it"),
                    );
                }
            }
            if let Some(done) = &finish {
                let mut block = if lay.blank { "\n".to_string() } else { String::new() };
                block.push_str(&format!(
                    "{}{done}:\n{}type: code\n{}script: scripts/{done}.js\n",
                    pad(lay.state),
                    pad(lay.field()),
                    pad(lay.field())
                ));
                inserts_after.push_str(&block);
                w.scripts.push(NewScript {
                    path: format!("scripts/{done}.js"),
                    text: script::finish_script(slug),
                    from_hook: None,
                    hook_changes: Vec::new(),
                    hook_follow_ups: Vec::new(),
                });
                w.change(
                    state.key.span.start as usize,
                    format!(
                        "`{slug}` was terminal: the terminal code state `{done}` ends the session once its check passes"
                    ),
                );
            }
        }
        if !inserts_before.is_empty() {
            w.edits.insert(comments_above(text, state.key.span.start as usize), inserts_before);
        }
        if !inserts_after.is_empty() {
            let at = node_end(text, node.span.end.max(state.key.span.end) as usize);
            let lead = if at == text.len() && !text.ends_with('\n') { "\n" } else { "" };
            w.edits.insert(at, format!("{lead}{inserts_after}"));
        }
        w.remove_keys(node, &doomed, None);
    }

    let refusal = if refusals.len() == 1 { refusals.values().next().cloned() } else { None };
    let mut ported_hooks = BTreeSet::new();
    for script in &w.scripts {
        if let Some(hook) = &script.from_hook
            && files.read(hook).is_some()
        {
            ported_hooks.insert(hook.clone());
        }
    }
    let text = w.edits.apply(text);
    Ok(Rewrite {
        text,
        changes: w.changes,
        follow_ups: w.follow_ups,
        scripts: w.scripts,
        ported_hooks,
        renamed,
        refusal,
        folded_tests_config,
    })
}

/// What a ported script calls that its code state must grant.
#[derive(Default)]
struct Grants {
    skills: Vec<String>,
    tools: Vec<String>,
}

impl Grants {
    fn render(&self, lay: &Layout) -> String {
        let mut out = String::new();
        if !self.skills.is_empty() {
            out.push_str(&format!("{}skills: {{ allow: [{}] }}\n", pad(lay.field()), self.skills.join(", ")));
        }
        if !self.tools.is_empty() {
            out.push_str(&format!("{}tools: {{ allow: [{}] }}\n", pad(lay.field()), self.tools.join(", ")));
        }
        out
    }
}

fn port_script(
    w: &mut Rewriter<'_>,
    path: &str,
    at: usize,
    source: Option<&str>,
    spec: &Port<'_>,
    state: &str,
    tools_granted: &Option<Vec<String>>,
) -> Grants {
    let script_path = format!("scripts/{state}.js");
    let Some(source) = source else {
        w.follow_up(
            at,
            format!(
                "the hook file {path} is missing: scripts/{state}.js fails closed (it raises) until you write the check"
            ),
        );
        let code = serde_json::Value::String(spec.raise_code.to_string());
        let reason = serde_json::Value::String(format!("the check {path} was missing when this workflow was migrated"));
        let shown = script::comment_safe(path);
        w.scripts.push(NewScript {
            path: script_path,
            text: format!(
                "/**\n * Missing check\n *\n * `archmax migrate` found no {shown}, so this code state refuses every session\n * (a missing hook vetoed under contract 2 too) until the check is written.\n */\nexport default async function ({{ tools }}) {{\n  await tools.archmax_raise({{ code: {code}, reason: {reason} }});\n}}\n"
            ),
            from_hook: None,
            hook_changes: Vec::new(),
            hook_follow_ups: Vec::new(),
        });
        return Grants::default();
    };
    if !path.starts_with("hooks/") || path.contains("..") {
        w.follow_up(
            at,
            format!(
                "the hook path {path} is not under hooks/: it was ported all the same; check it is the file you meant"
            ),
        );
    }
    let ported = script::port(source, path, spec);
    let mut grants = Grants::default();
    for (_, tool) in script::called_tools(source) {
        let control = tool.starts_with("archmax_");
        let granted = match tools_granted {
            Some(list) => list.contains(&tool),
            None => DEFAULT_TOOLS.contains(&tool.as_str()),
        };
        if !control && !granted {
            grants.tools.push(tool);
        } else if control && !["archmax_get_history", "archmax_advance", "archmax_raise"].contains(&tool.as_str()) {
            w.follow_up(at, format!("{path} calls `{tool}`, which a code state's script cannot call"));
        }
    }
    grants.skills = script::named_skills(source);
    if !grants.skills.is_empty() || !grants.tools.is_empty() {
        let mut what = grants.skills.iter().map(|skill| format!("skill `{skill}`")).collect::<Vec<_>>();
        what.extend(grants.tools.iter().map(|tool| format!("tool `{tool}`")));
        w.change(
            at,
            format!("`{state}` grants {}: a hook ran on the runtime's authority, a code state's calls are held to its own lists", what.join(", ")),
        );
    }
    w.scripts.push(NewScript {
        path: script_path,
        text: ported.text,
        from_hook: Some(path.to_string()),
        hook_changes: ported.changes.into_iter().map(|(at, text)| Note { at, text }).collect(),
        hook_follow_ups: ported.follow_ups.into_iter().map(|(at, text)| Note { at, text }).collect(),
    });
    grants
}

/// Adds the trigger state `slug` as a trigger of `target`.
fn add_trigger(
    w: &mut Rewriter<'_>,
    lay: &Layout,
    states: &[Entry],
    slug: &str,
    node: &Node,
    target: &str,
    gates: &BTreeMap<String, Vec<(String, Hook)>>,
) {
    if gates.contains_key(target) {
        w.follow_up(
            node.span.start as usize,
            format!("`{target}` has a check in front of it: move the new trigger `{slug}` onto that check"),
        );
    }
    let Some(target_state) = states.iter().find(|state| state.key.scalar_text() == Some(target)) else {
        w.follow_up(node.span.start as usize, format!("`{slug}` leads to `{target}`, which is not a state"));
        return;
    };
    let mut body = String::new();
    let depth = lay.field() + 2 * lay.step;
    for field in node.as_mapping().unwrap_or(&[]) {
        let Some(key) = field.key.scalar_text() else { continue };
        if TRIGGER_KEYS.contains(&key) {
            let start = field.key.span.start as usize;
            let range = line_start(w.text, start)..node_end(w.text, field.value.span.end as usize);
            let shift = depth as isize - column(w.text, start) as isize;
            body.push_str(&super::edit::reindent(w.slice(range), shift));
        } else if !["type", "transitions", "title", "summary", "metadata"].contains(&key) {
            w.follow_up(
                field.key.span.start as usize,
                format!("`{key}` of the trigger state `{slug}` has no place on a trigger: carry it over by hand"),
            );
        }
    }
    let key = yaml_string(slug);
    let head = if body.is_empty() {
        format!("{}{key}: {{}}\n", pad(lay.field() + lay.step))
    } else {
        format!("{}{key}:\n{body}", pad(lay.field() + lay.step))
    };
    match entry(&target_state.value, "triggers") {
        Some((_, triggers))
            if triggers.value.as_mapping().is_some_and(|entries| !entries.is_empty())
                && !w.is_flow(&triggers.value) =>
        {
            let at = node_end(w.text, triggers.value.span.end as usize);
            w.edits.insert(at, head);
        }
        Some((_, triggers)) => {
            w.follow_up(
                triggers.key.span.start as usize,
                format!("add the trigger `{slug}` to these triggers by hand"),
            );
        }
        None => {
            let at = line_end(w.text, target_state.key.span.end as usize);
            w.edits.insert(at, format!("{}triggers:\n{head}", pad(lay.field())));
        }
    }
}

/// `type: workflow` with `workflow`, `params`, `for_each`, `result` → an agent state that
/// calls `archmax_workflow_<slug>`.
fn rewrite_delegation(
    w: &mut Rewriter<'_>,
    node: &Node,
    slug: &str,
    workflow_entry: &Entry,
    doomed: &mut Vec<&'static str>,
) {
    let target = workflow_entry.value.scalar_text().unwrap_or("").to_string();
    let tool = format!("archmax_workflow_{target}");
    let at = workflow_entry.key.span.start as usize;
    let params: Vec<String> = node
        .get("params")
        .and_then(Node::as_mapping)
        .unwrap_or(&[])
        .iter()
        .map(|param| {
            let value =
                w.slice(param.value.span.start as usize..param.value.span.end as usize).trim().replace('\n', " ");
            format!("{}: {value}", param.key.scalar_text().unwrap_or("?"))
        })
        .collect();
    let each = node.get("for_each").and_then(|each| each.scalar_text()).map(str::to_string);
    let result = node.get("result").and_then(|result| result.scalar_text()).map(str::to_string);
    let mut direction = match &each {
        Some(each) => format!("Call {tool} once for every entry of `{each}`, all in one message"),
        None => format!("Call {tool}"),
    };
    if !params.is_empty() {
        direction.push_str(&format!(" with {}", params.join(", ")));
    }
    direction.push('.');
    if let Some(result) = &result {
        direction.push_str(&format!(" Record what it returns as `{result}` with archmax_set_variables."));
    }
    direction.push_str(" Then move on.");
    if node.get("instructions").is_some() {
        doomed.push("workflow");
        w.follow_up(at, format!("`{slug}` delegated to `{target}` by shape: make its instructions say: {direction}"));
    } else {
        w.replace_entry(workflow_entry, format!("instructions: {}", yaml_string(&direction)));
    }
    match entry(node, "tools") {
        None => {
            let (_, type_entry) = entry(node, "type").unwrap_or((0, workflow_entry));
            if std::ptr::eq(type_entry, workflow_entry) {
                let end = node_end(w.text, node.span.end as usize);
                let indent = column(w.text, workflow_entry.key.span.start as usize);
                w.edits.insert(end, format!("{}tools: {{ allow: [{tool}] }}\n", pad(indent)));
            } else {
                w.replace_entry(type_entry, format!("tools: {{ allow: [{tool}] }}"));
                doomed.retain(|key| *key != "type");
            }
        }
        Some((_, tools)) => {
            w.follow_up(tools.key.span.start as usize, format!("add `{tool}` to the `tools.allow` of `{slug}`"));
        }
    }
    match (&result, entry(node, "result"), node.get("requires")) {
        (Some(result), Some((_, result_entry)), None) => w.replace_entry(result_entry, format!("requires: [{result}]")),
        (Some(result), Some(_), Some(requires)) => {
            doomed.push("result");
            w.follow_up(requires.span.start as usize, format!("add `{result}` to the `requires` of `{slug}`"));
        }
        _ => {}
    }
    for key in ["params", "for_each"] {
        if node.get(key).is_some() {
            doomed.push(key);
        }
    }
    w.change(at, format!("`{slug}` delegated to `{target}` by shape: it is an agent state allowed `{tool}`, and its instructions make the call"));
}

/// `parallel: [a, b]` + `join: c` → `a` then `b` then `c`.
fn sequence_branches(
    w: &mut Rewriter<'_>,
    lay: &Layout,
    states: &[Entry],
    slug: &str,
    node: &Node,
    parallel: &Entry,
    doomed: &mut Vec<&'static str>,
) {
    let branches: Vec<String> = parallel
        .value
        .as_sequence()
        .unwrap_or(&[])
        .iter()
        .filter_map(|branch| branch.scalar_text().map(str::to_string))
        .collect();
    let join = node.get("join").and_then(|join| join.scalar_text()).map(str::to_string);
    let at = parallel.key.span.start as usize;
    if branches.is_empty() {
        w.follow_up(at, format!("`parallel` of `{slug}` names no states: sequence its work by hand"));
        doomed.extend(["parallel", "join"]);
        return;
    }
    if node.get("transitions").is_some() {
        w.follow_up(
            at,
            format!("`{slug}` has transitions beside `parallel`: add an edge into `{}` by hand", branches[0]),
        );
        doomed.push("parallel");
    } else {
        let indent = column(w.text, at);
        let item = indent + lay.items;
        w.replace_entry(
            parallel,
            format!(
                "transitions:\n{}- to: {}\n{}  description: {}",
                pad(item),
                yaml_string(&branches[0]),
                pad(item),
                yaml_string("This state's work is done; its branches now run one after another.")
            ),
        );
    }
    doomed.push("join");
    let mut chain: Vec<String> = branches.clone();
    chain.extend(join.clone());
    for pair in chain.windows(2) {
        let (from, to) = (&pair[0], &pair[1]);
        let Some(state) = states.iter().find(|state| state.key.scalar_text() == Some(from.as_str())) else {
            w.follow_up(at, format!("the branch `{from}` is not a state"));
            continue;
        };
        if state.value.get("transitions").is_some() || state.value.as_mapping().is_none() || w.is_flow(&state.value) {
            w.follow_up(
                state.key.span.start as usize,
                format!("the branch `{from}` must now lead to `{to}`: add that edge by hand"),
            );
            continue;
        }
        let end = node_end(w.text, state.value.span.end as usize);
        let block = format!(
            "{}transitions:\n{}",
            pad(lay.field()),
            lay.transition(to, &format!("This branch is done; `{to}` comes next."))
        );
        w.edits.insert(end, block);
    }
    w.change(at, format!("`parallel`/`join` of `{slug}` → the sequence {}", chain.join(" → ")));
}
