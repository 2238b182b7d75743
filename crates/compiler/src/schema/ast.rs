//! The typed, spanned tree of a contract-3 workflow and its cases.
//!
//! Parsing ([`super::parse_workflow`]) is lenient: it reports every shape problem and
//! still builds the tree from what was valid, so one typo does not hide the findings of
//! the semantic checks. Every name and value keeps the span it was read from.

use crate::slug::SlugRef;
use crate::source::{FileId, Span, Spanned};
use crate::syntax::reference::{Template, VarPath};
use crate::syntax::yaml::Node;
pub use archmax_program::kinds::{Access, StateKind, TransitionType, ValueType};

/// One workflow: `workflows/<slug>/workflow.yaml` and what sits beside it.
#[derive(Clone, Debug)]
pub struct Workflow {
    pub slug: String,
    pub file: FileId,
    pub title: Option<Spanned<String>>,
    pub instructions: Option<Spanned<String>>,
    /// Read fail-closed: `true` for anything but absent, `null` or `false`.
    pub disabled: bool,
    pub disabled_span: Option<Span>,
    pub settings: Settings,
    pub tests: TestsConfig,
    pub tools: RootTools,
    /// `None` when the workflow has no root `skills` block.
    pub skills: Option<RootGrants<Spanned<String>>>,
    /// `None` when the workflow has no root `mounts` block.
    pub mounts: Option<RootGrants<MountEntry>>,
    /// The root `metadata` value, kept verbatim and never read.
    pub metadata: Option<Node>,
    pub states: Vec<State>,
    /// The span of the `states` key, for findings about the graph as a whole.
    pub states_span: Option<Span>,
    /// `WORKFLOW.md`, when present.
    pub prose: Option<FileId>,
    /// State slug → index in `states` (the first state of a slug).
    pub state_indices: std::collections::HashMap<String, usize>,
    /// The root keys that misspelt keys most likely meant (`stats` → `states`): what is
    /// "missing" because of them is not reported again.
    pub misspelt: Vec<&'static str>,
    /// Slugs that hold a state but sit in the wrong place (under another state, or at the
    /// root): reported once where they sit, not again as unknown targets.
    pub misplaced_states: Vec<String>,
}

impl Workflow {
    pub fn state<'s>(&self, slug: impl Into<SlugRef<'s>>) -> Option<&State> {
        self.state_index(slug).map(|index| &self.states[index])
    }

    pub fn state_index<'s>(&self, slug: impl Into<SlugRef<'s>>) -> Option<usize> {
        self.state_indices.get(slug.into().as_str()).copied()
    }

    /// Rebuilds [`Workflow::state_indices`] after `states` changed.
    pub fn index_states(&mut self) {
        self.state_indices.clear();
        for (index, state) in self.states.iter().enumerate() {
            self.state_indices.entry(state.slug.value.clone()).or_insert(index);
        }
    }

    /// Every trigger, with the index of the state it enters.
    pub fn triggers(&self) -> impl Iterator<Item = (usize, &Trigger)> {
        self.states
            .iter()
            .enumerate()
            .flat_map(|(index, state)| state.triggers.iter().map(move |trigger| (index, trigger)))
    }

    pub fn manual_trigger(&self) -> Option<&Trigger> {
        self.triggers().map(|(_, trigger)| trigger).find(|trigger| trigger.id.value == "manual")
    }
}

/// `settings`.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub model: Option<Spanned<String>>,
    pub timeout_ms: Option<Spanned<u64>>,
    pub memory_limit_bytes: Option<Spanned<u64>>,
    /// `Some(None)` is an explicit `null`: unbounded.
    pub max_ptc_calls: Option<Spanned<Option<u64>>>,
    pub max_result_chars: Option<Spanned<u64>>,
    pub prompt_cache: PromptCache,
}

#[derive(Clone, Debug, Default)]
pub struct PromptCache {
    /// `None` when the workflow leaves it to the host (`ARCHMAX_PROMPT_CACHE`, else on).
    pub enabled: Option<bool>,
    /// `None` when the workflow leaves it to the host (`ARCHMAX_PROMPT_CACHE_TTL`, else 5m).
    pub ttl: Option<CacheTtl>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheTtl {
    FiveMinutes,
    OneHour,
}

/// `tests`: the case suite's configuration.
#[derive(Clone, Debug, Default)]
pub struct TestsConfig {
    pub max_concurrency: Option<Spanned<u64>>,
    pub case_timeout_ms: Option<Spanned<u64>>,
    pub judge: Option<Judge>,
}

#[derive(Clone, Debug, Default)]
pub struct Judge {
    pub span: Option<Span>,
    pub model: Option<Spanned<String>>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
}

/// The root `tools` block.
#[derive(Clone, Debug, Default)]
pub struct RootTools {
    /// `None` when `allow_always` is absent: the twelve default tools apply.
    pub allow_always: Option<Spanned<Vec<ToolEntry>>>,
    pub forbid_always: Vec<ToolEntry>,
}

/// A root `skills` or `mounts` block.
#[derive(Clone, Debug)]
pub struct RootGrants<T> {
    pub span: Span,
    pub allow_always: Vec<T>,
    pub forbid_always: Vec<Spanned<String>>,
}

/// A state's `skills` or `mounts` block.
#[derive(Clone, Debug)]
pub struct StateGrants<T> {
    /// `Some` when `allow` is written, even as `[]`.
    pub allow: Option<Spanned<Vec<T>>>,
    pub forbid: Vec<Spanned<String>>,
}

impl<T> Default for StateGrants<T> {
    fn default() -> StateGrants<T> {
        StateGrants { allow: None, forbid: Vec::new() }
    }
}

impl<T> StateGrants<T> {
    pub fn allowed(&self) -> &[T] {
        self.allow.as_ref().map(|allow| allow.value.as_slice()).unwrap_or(&[])
    }
}

/// A `mounts` grant: a name, optionally with the access this level gives.
#[derive(Clone, Debug)]
pub struct MountEntry {
    pub name: Spanned<String>,
    pub access: Option<Spanned<Access>>,
    pub span: Span,
}

/// One entry of a tools list.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    pub tool: Spanned<String>,
    /// Argument guards: each named argument must match one of its globs.
    pub args: Vec<ArgGuard>,
    /// `paths:`: globs over every declared path argument of the tool.
    pub paths: Option<Vec<Glob>>,
    pub connection: Option<Spanned<String>>,
    pub source: Option<Spanned<String>>,
    pub span: Span,
    /// The well-formed references of globs dropped for a malformed one (AMX0500), with
    /// the glob's span: still held to what guarantees them.
    pub partial_references: Vec<(String, Span)>,
}

impl ToolEntry {
    /// A bare entry: the tool with any arguments.
    pub fn is_bare(&self) -> bool {
        self.args.is_empty() && self.paths.is_none()
    }

    pub fn name(&self) -> &str {
        &self.tool.value
    }

    /// Every glob of the entry, guards and paths alike.
    pub fn globs(&self) -> impl Iterator<Item = &Glob> {
        self.args.iter().flat_map(|guard| guard.globs.iter()).chain(self.paths.iter().flatten())
    }
}

#[derive(Clone, Debug)]
pub struct ArgGuard {
    /// The argument name, or a dotted path into the arguments.
    pub argument: Spanned<String>,
    pub globs: Vec<Glob>,
}

/// A glob as written, with its `${{…}}` holes parsed.
#[derive(Clone, Debug)]
pub struct Glob {
    pub text: Spanned<String>,
    pub template: Template,
}

/// One state.
#[derive(Clone, Debug)]
pub struct State {
    pub slug: Spanned<String>,
    pub kind: StateKind,
    pub kind_span: Option<Span>,
    pub title: Option<Spanned<String>>,
    pub summary: Option<Spanned<String>>,
    pub instructions: Option<Spanned<String>>,
    pub script: Option<Spanned<String>>,
    pub triggers: Vec<Trigger>,
    pub tools: StateTools,
    pub skills: StateGrants<Spanned<String>>,
    pub mounts: StateGrants<MountEntry>,
    pub requires: Vec<Spanned<String>>,
    pub locks: Vec<Spanned<String>>,
    pub model: Option<Spanned<String>>,
    pub budget: Budget,
    pub on_error: Option<Spanned<String>>,
    pub transitions: Vec<Transition>,
    pub evidence: Vec<Spanned<String>>,
    pub approvers: Vec<Spanned<String>>,
    pub metadata: Option<Node>,
    /// The state keys that misspelt keys most likely meant (`transitons` →
    /// `transitions`): what is "missing" because of them is not reported again.
    pub misspelt: Vec<&'static str>,
}

impl State {
    pub fn is_terminal(&self) -> bool {
        self.transitions.is_empty()
    }

    /// True when the state's transitions (or `on_error`) may be missing only because a
    /// key was misspelt: its edges are unknown, not absent.
    pub fn lost_edges(&self) -> bool {
        self.misspelt.iter().any(|key| matches!(*key, "transitions" | "on_error"))
    }

    pub fn has_instructions(&self) -> bool {
        self.instructions.as_ref().is_some_and(|instructions| !instructions.value.trim().is_empty())
    }
}

/// A state's `tools` block.
#[derive(Clone, Debug, Default)]
pub struct StateTools {
    pub allow: Vec<ToolEntry>,
    pub forbid: Vec<ToolEntry>,
}

/// A state's `budget`.
#[derive(Clone, Debug, Default)]
pub struct Budget {
    pub span: Option<Span>,
    pub timeout_ms: Option<Spanned<u64>>,
    pub max_parks: Option<Spanned<u64>>,
}

#[derive(Clone, Debug)]
pub struct Transition {
    pub to: Spanned<String>,
    /// `None` when absent or blank.
    pub description: Option<Spanned<String>>,
    pub kind: TransitionType,
    pub kind_span: Option<Span>,
    pub span: Span,
}

/// A trigger declared on a state.
#[derive(Clone, Debug)]
pub struct Trigger {
    pub id: Spanned<String>,
    pub session: Option<Spanned<VarPath>>,
    pub message: Option<Spanned<MessagePath>>,
    pub connection: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub requires: Vec<SignatureEntry>,
    pub returns: Vec<SignatureEntry>,
    /// A host's own keys, kept verbatim.
    pub extra: Vec<(Spanned<String>, Node)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MessagePath {
    Path(VarPath),
    /// `message: false`: the trigger's firings carry no message.
    None,
}

/// One `requires` or `returns` entry.
#[derive(Clone, Debug)]
pub struct SignatureEntry {
    pub name: Spanned<String>,
    pub ty: Option<Spanned<ValueType>>,
    pub description: Option<Spanned<String>>,
    pub rules: Rules,
    pub span: Span,
}

/// The rules of a typed signature entry, as JSON Schema keywords.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub format: Option<Spanned<StringFormat>>,
    pub pattern: Option<Spanned<String>>,
    pub min_length: Option<Spanned<u64>>,
    pub max_length: Option<Spanned<u64>>,
    pub enumeration: Option<Spanned<Vec<String>>>,
    pub content: Option<Spanned<ContentKind>>,
    pub minimum: Option<Spanned<Bound>>,
    pub maximum: Option<Spanned<Bound>>,
    pub min_items: Option<Spanned<u64>>,
    pub max_items: Option<Spanned<u64>>,
    pub accept: Option<Spanned<Vec<String>>>,
    pub max_size: Option<Spanned<u64>>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.format.is_none()
            && self.pattern.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
            && self.enumeration.is_none()
            && self.content.is_none()
            && self.minimum.is_none()
            && self.maximum.is_none()
            && self.min_items.is_none()
            && self.max_items.is_none()
            && self.accept.is_none()
            && self.max_size.is_none()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringFormat {
    Email,
    Url,
    Phone,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    Text,
    Markdown,
    Html,
}

/// A `minimum` or `maximum`.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Number(f64),
    /// `YYYY-MM-DD`.
    Date(String),
    /// RFC 3339 with an offset.
    DateTime(String),
    /// `today`, for dates.
    Today,
    /// `now`, for date-times.
    Now,
}
