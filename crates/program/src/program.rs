//! The compiled program: what `archmax build` writes and the VM runs.
//!
//! A [`Program`] holds every workflow of a workspace with every static decision already
//! made: per-state tool surfaces in their final order, guard tables of compiled globs
//! with `${{…}}` holes, enabled skills and mounts with access, the rendered static prompt
//! prefix and each state's volatile template, trigger signatures with their JSON Schema,
//! code-state scripts as source and QuickJS bytecode, and the signatures of every
//! `archmax_workflow_<slug>` callee. Strings are interned in [`Program::strings`] and
//! named by [`Sym`]; states are a dense table indexed by [`StateId`].
//!
//! The types are plain data: no maps, only vectors in a deterministic order, so building
//! the same workspace twice gives byte-identical artifacts. The one exception is the
//! [`PatternCache`], which is never serialized.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::glob::Glob;
pub use crate::kinds::{Access, StateKind, TransitionType, ValueType};
use crate::reference::VarPath;
use crate::slug::SlugRef;
use crate::tools::PathAccess;

/// The `archmax-harness` runtime contract this program format implements.
pub const CONTRACT: &str = "3";

/// Defaults the runtime applies when `settings` leaves a bound out.
pub const DEFAULT_TIMEOUT_MS: u64 = 15_000;
pub const DEFAULT_MEMORY_LIMIT_BYTES: u64 = 64 * 1024 * 1024;
pub const DEFAULT_MAX_PTC_CALLS: u64 = 200;
pub const DEFAULT_MAX_RESULT_CHARS: u64 = 20_000;

/// An interned string: an index into [`Program::strings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sym(pub u32);

/// A state: an index into [`WorkflowProgram::states`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StateId(pub u32);

/// A workflow: an index into [`Program::workflows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkflowId(pub u32);

/// A tool surface: an index into [`WorkflowProgram::surfaces`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SurfaceId(pub u32);

/// A code-state script: an index into [`WorkflowProgram::scripts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ScriptId(pub u32);

/// A whole workspace, compiled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// The runtime contract (`"3"`).
    pub contract: String,
    /// The version of the compiler that built it.
    pub compiler: String,
    pub strings: Vec<String>,
    /// The host's mount table at build time.
    pub mounts: Vec<MountProgram>,
    /// The skill registry.
    pub skills: Vec<SkillProgram>,
    pub workflows: Vec<WorkflowProgram>,
    /// Signature `pattern` regexes compiled so far; not part of the artifact.
    #[serde(skip)]
    /// A builder sets it to `Default::default()`; it fills as values are checked.
    pub patterns: PatternCache,
}

/// Signature `pattern` regexes, each compiled the first time a value is checked against
/// it and kept beside the program, so no check compiles one again.
#[derive(Default)]
pub struct PatternCache(Mutex<HashMap<Sym, Option<regex::Regex>>>);

impl PatternCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<Sym, Option<regex::Regex>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clone for PatternCache {
    fn clone(&self) -> PatternCache {
        PatternCache(Mutex::new(self.entries().clone()))
    }
}

/// A cache says nothing about the program: any two are equal.
impl PartialEq for PatternCache {
    fn eq(&self, _: &PatternCache) -> bool {
        true
    }
}

impl fmt::Debug for PatternCache {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "PatternCache({} compiled)", self.entries().len())
    }
}

impl Program {
    /// The compiled regex of the `pattern` string `sym`; `None` when it does not compile
    /// (validation refuses such a pattern, so only a hand-made program can hold one).
    pub fn pattern(&self, sym: Sym) -> Option<regex::Regex> {
        self.patterns.entries().entry(sym).or_insert_with(|| regex::Regex::new(self.str(sym)).ok()).clone()
    }

    /// The text of an interned string.
    pub fn str(&self, sym: Sym) -> &str {
        self.strings.get(sym.0 as usize).map(String::as_str).unwrap_or("")
    }

    /// The trigger `id` that `workflow` declares.
    pub fn trigger<'p>(&'p self, workflow: &'p WorkflowProgram, id: &str) -> Option<&'p TriggerProgram> {
        workflow.triggers.iter().find(|trigger| self.str(trigger.id) == id)
    }

    /// The workflow named `slug`, with its id.
    pub fn workflow<'s>(&self, slug: impl Into<SlugRef<'s>>) -> Option<(WorkflowId, &WorkflowProgram)> {
        let slug = slug.into();
        self.workflows
            .iter()
            .enumerate()
            .find(|(_, workflow)| slug == *self.str(workflow.slug))
            .map(|(index, workflow)| (WorkflowId(index as u32), workflow))
    }

    pub fn state_count(&self) -> usize {
        self.workflows.iter().map(|workflow| workflow.states.len()).sum()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountProgram {
    /// `reference/`, `AGENTS.md`: directory keys end in `/`.
    pub key: Sym,
    pub name: Sym,
    pub directory: bool,
    pub read_only: bool,
    pub governed: bool,
    pub searchable: bool,
    /// Where the content lives, relative to the workspace root.
    pub source: Sym,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillProgram {
    pub slug: Sym,
    pub description: Sym,
    /// `skills/<slug>/SKILL.md`.
    pub manifest: Sym,
}

/// One workflow of the workspace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkflowProgram {
    pub slug: Sym,
    pub title: Option<Sym>,
    /// SHA-256 (hex) of the governing spec: every key but `metadata`, keys sorted.
    pub spec_hash: String,
    pub disabled: bool,
    pub settings: SettingsProgram,
    pub tests: TestsProgram,
    pub states: Vec<StateProgram>,
    pub surfaces: Vec<Surface>,
    pub triggers: Vec<TriggerProgram>,
    /// The state a plain turn starts in: the `manual` entry, else the first trigger's.
    pub entry: StateId,
    /// The cacheable system-prompt prefix of a top-level session.
    pub prompt_prefix: Sym,
    /// The same for a sub-workflow child (top-level-only blocks removed).
    pub child_prompt_prefix: Sym,
    /// `tools.forbid_always`: denied in every state and in every child session.
    pub forbid_always: Vec<Rule>,
    pub skills_forbid_always: Vec<Sym>,
    pub mounts_forbid_always: Vec<Sym>,
    /// Mounts some grant of this workflow asks to write (`access: read_write`).
    pub mounts_read_write: Vec<Sym>,
    pub scripts: Vec<ScriptProgram>,
    /// Every workflow this one may call, with the callee's signature.
    pub callees: Vec<Callee>,
}

impl WorkflowProgram {
    pub fn state(&self, id: StateId) -> &StateProgram {
        &self.states[id.0 as usize]
    }

    pub fn surface(&self, id: SurfaceId) -> &Surface {
        &self.surfaces[id.0 as usize]
    }

    pub fn script(&self, id: ScriptId) -> &ScriptProgram {
        &self.scripts[id.0 as usize]
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsProgram {
    pub model: Option<Sym>,
    /// Sandbox budget per evaluation (default 15000).
    pub timeout_ms: u64,
    pub memory_limit_bytes: u64,
    /// `None`: unbounded.
    pub max_ptc_calls: Option<u64>,
    pub max_result_chars: u64,
    /// `settings.prompt_cache.enabled`; `None` leaves it to the host
    /// (`ARCHMAX_PROMPT_CACHE`, else on).
    pub prompt_cache: Option<bool>,
    /// `"5m"` or `"1h"`; `None` leaves it to the host (`ARCHMAX_PROMPT_CACHE_TTL`, else 5m).
    pub prompt_cache_ttl: Option<Sym>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestsProgram {
    pub case_timeout_ms: u64,
    pub judge: Option<JudgeProgram>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgeProgram {
    pub model: Option<Sym>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
}

/// What the interpreter does when the session enters a state, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Run the agent loop over the state's surface.
    RunAgent(SurfaceId),
    /// Build the decision record and park for a person.
    ParkForDecision,
    /// Run a code state's script (its own surface for `tools.*`).
    RunCode(ScriptId, SurfaceId),
    /// Run the isolated grader over its own surface.
    RunGrader(SurfaceId),
    /// The state is terminal: complete the session and check `returns`.
    Complete,
}

/// One state, with everything the interpreter and the kernel need.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateProgram {
    pub slug: Sym,
    pub kind: StateKind,
    pub title: Option<Sym>,
    pub ops: Vec<Op>,
    pub transitions: Vec<TransitionProgram>,
    pub requires: Vec<Sym>,
    pub locks: Vec<Sym>,
    pub on_error: Option<StateId>,
    pub budget: BudgetProgram,
    /// The resolved model id: the state's, else `settings.model`; `None` defers to the host.
    pub model: Option<Sym>,
    pub surface: SurfaceId,
    pub guards: GuardTable,
    /// Skills this state enables, in prompt order.
    pub skills: Vec<Sym>,
    /// Every skill of the registry with its standing in this state.
    pub skill_access: Vec<(Sym, Reach)>,
    /// Every mount of the host table with its standing in this state.
    pub mount_access: Vec<(Sym, MountReach)>,
    /// The volatile prompt block, with holes the runtime fills per call.
    pub template: Vec<TemplatePart>,
    /// A human state's decision record (instructions, declared evidence, choices).
    pub decision: Option<DecisionTemplate>,
    pub script: Option<ScriptId>,
}

impl StateProgram {
    pub fn is_terminal(&self) -> bool {
        self.transitions.is_empty()
    }

    pub fn transition_to(&self, target: StateId) -> Option<&TransitionProgram> {
        self.transitions.iter().find(|transition| transition.target == target)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionProgram {
    pub target: StateId,
    pub description: Option<Sym>,
    pub kind: TransitionType,
    /// What the agent sees about the target: `human decision node`, `terminal`, …
    pub marker: Option<Sym>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetProgram {
    pub timeout_ms: Option<u64>,
    pub max_parks: Option<u64>,
}

/// Whether a state can reach a skill bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    Enabled,
    /// A forbid list takes it away (`skill.forbidden`).
    Forbidden,
    /// Nothing enables it (`skill.not-allowed`).
    NotAllowed,
}

/// Whether a state can reach a mount, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MountReach {
    Reachable { writable: bool },
    Forbidden,
    NotAllowed,
}

/// The tools a state is shown, in their final order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Surface {
    pub tools: Vec<SurfaceTool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SurfaceTool {
    pub name: Sym,
    pub kind: ToolKind,
    /// How the tool uses each path argument.
    pub paths: Vec<(Sym, PathAccess)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ToolKind {
    /// A runtime control (`archmax_advance`, …).
    Control,
    /// A built-in from the standard library.
    Builtin,
    /// `archmax_workflow_<slug>`: the callee at this index of [`WorkflowProgram::callees`].
    Delegation(u32),
    /// A tool the host provides.
    Host,
}

/// The rules the kernel applies in one state, each list in precedence order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardTable {
    /// The state's `tools.forbid` (`tool.forbidden-here`).
    pub forbid: Vec<Rule>,
    /// The control tools this state type always has.
    pub controls: Vec<Sym>,
    /// For each granted tool, the entries that decide it: the state's own entries when it
    /// names the tool (narrowing), else the workflow-wide grant's.
    pub grants: Vec<Grant>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    pub tool: Sym,
    pub tier: GrantTier,
    /// Any one matching entry allows; an empty list means the tool is granted bare.
    pub entries: Vec<Rule>,
    /// The connection the deciding entries name (the first that names one): for a host
    /// tool, the server that serves it when several serve its collection.
    pub connection: Option<Sym>,
}

/// Where a grant comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GrantTier {
    /// The state's `tools.allow`.
    State,
    /// `tools.allow_always`.
    Workflow,
    /// The default tools (no `allow_always` declared).
    Default,
}

/// One tools entry, compiled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// `None` for the tool `"*"`.
    pub tool: Option<Sym>,
    /// Each named argument must match one of its globs.
    pub args: Vec<(Sym, Vec<Glob>)>,
    /// Globs over every declared path argument.
    pub paths: Option<Vec<Glob>>,
    /// The entry as written, for refusal messages.
    pub display: Sym,
}

impl Rule {
    pub fn is_bare(&self) -> bool {
        self.args.is_empty() && self.paths.is_none()
    }
}

/// A piece of the volatile prompt block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TemplatePart {
    /// Rendered at build time.
    Text(Sym),
    /// `Current date and time: …`, rounded down to ten minutes.
    Clock,
    /// The directive to reset, when a terminal state is re-entered by a new turn.
    Reentry,
    /// The names of the variables set.
    Variables,
    /// The enforced argument constraints, with references resolved.
    Constraints,
    /// The signature lines of the trigger that started the turn.
    Signature,
}

/// A human state's decision record, before the runtime adds attachments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionTemplate {
    pub instructions: Sym,
    pub evidence: Vec<Sym>,
    pub approvers: Vec<Sym>,
}

/// A trigger: its id, entry, session path and signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TriggerProgram {
    pub id: Sym,
    pub entry: StateId,
    pub session: Option<VarPath>,
    /// `Some(None)`: `message: false`.
    pub message: Option<Option<VarPath>>,
    pub connection: Option<Sym>,
    /// For callers only; never shown to the session.
    pub description: Option<Sym>,
    pub requires: Vec<SignatureEntry>,
    pub returns: Vec<SignatureEntry>,
    /// JSON Schema of `requires`, as text.
    pub schema: Sym,
    /// The signature lines of the volatile block, for a top-level session and a child.
    pub signature_prompt: Sym,
    pub child_signature_prompt: Sym,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignatureEntry {
    pub name: Sym,
    pub ty: Option<ValueType>,
    pub description: Option<Sym>,
    pub rules: RulesProgram,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RulesProgram {
    /// `email`, `url` or `phone`.
    pub format: Option<Sym>,
    pub pattern: Option<Sym>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub enumeration: Option<Vec<Sym>>,
    pub content: Option<Sym>,
    pub minimum: Option<BoundProgram>,
    pub maximum: Option<BoundProgram>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub accept: Option<Vec<Sym>>,
    pub max_size: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BoundProgram {
    Number(f64),
    /// Day number since 1970-01-01.
    Date(i64),
    /// Seconds since the epoch.
    DateTime(i64),
    Today,
    Now,
}

/// A code-state script: stripped source and QuickJS module bytecode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptProgram {
    /// `scripts/check.js`.
    pub path: Sym,
    /// The source with typed `@archmax-ai/harness/*` imports blanked (line count kept).
    pub source: Sym,
    pub bytecode: Vec<u8>,
}

/// A workflow this one may call as `archmax_workflow_<slug>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callee {
    pub tool: Sym,
    pub workflow: WorkflowId,
    /// The tool description: the manual trigger's description first.
    pub description: Sym,
    /// JSON Schema of the parameters, as text.
    pub parameters: Sym,
    /// The declared returns, by name.
    pub returns: Vec<Sym>,
}
