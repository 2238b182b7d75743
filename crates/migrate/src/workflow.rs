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

use super::edit::{Edits, column, comments_above, line_end, line_start, literal_block, node_end, pad, yaml_string};

mod hooks;
mod root;
mod states;

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
///
/// The phases run in order over the original text, each adding edits: `runtime.version`
/// and the root keys ([`root`]), what each state becomes and the edges into the states
/// that gain a check in front ([`states`]), then each state's own rewrite, with its
/// `before` and `after` hooks turned into states ([`hooks`]).
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

    root::rewrite_runtime_version(&mut w, &root)?;
    let root_facts = root::rewrite_root_keys(&mut w, &root, root_entries);
    let folded_tests_config = root::fold_tests_config(&mut w, &root, tests_config, states_entry, &lay);
    let plan = states::plan_states(&mut w, states);
    states::retarget_edges(&mut w, states, &plan);
    let context = states::StateContext {
        lay: &lay,
        states,
        plan: &plan,
        tools_granted: root::tools_granted(&root),
        custom_kinds: root_facts.custom_kinds,
        ceiling: root_facts.ceiling,
    };
    for (index, state) in states.iter().enumerate() {
        states::rewrite_state(&mut w, &context, index, state);
    }

    let refusal = if plan.refusals.len() == 1 { plan.refusals.values().next().cloned() } else { None };
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
        renamed: plan.renamed,
        refusal,
        folded_tests_config,
    })
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
