//! The governance kernel: one pure function deciding every tool call.
//!
//! [`decide`] reads only precomputed tables (the state's guard table, its skill and mount
//! standing, the workflow's and its ancestors' denials, the host's mount table) and the
//! session's variables, and returns a [`Verdict`] naming the deciding [`Rule`]. The first
//! rule that applies wins, and each phase below is a function of its own:
//!
//! 1. Safety, never overridable (`safety`): the authoring plane
//!    (`zone.governance-plane`), paths that climb out (`zone.escape`), malformed path
//!    arguments (`tool.path-argument`), `archmax_run` outside skill bundles
//!    (`script.skill-only`), reply-only turns (`tool.reply-only`), bare `eval`
//!    (`tool.eval`), `task` (`tool.ungrantable`), the runtime's note channel (`tool.note`),
//!    then per path (`zone_safety`): writes into read-only mounts (`zone.read-only`),
//!    runtime areas (`zone.runtime-internal`), writes into offload areas
//!    (`zone.runtime-managed`), skill bundles the state does not enable
//!    (`skill.forbidden`, `skill.not-allowed`), and mounts it does not have
//!    (`mount.forbidden`, `mount.not-allowed`, `mount.read-only`).
//! 2. Declared denials (`denial`): those inherited from calling workflows, then
//!    `tools.forbid_always` (`tool.forbidden`), then the state's `tools.forbid`
//!    (`tool.forbidden-here`).
//! 3. What is always open (`always_open`): the scratchpad for granted file tools
//!    (`tool.scratchpad`), reads of the offload areas (`tool.offload-read`), the state
//!    type's controls (`tool.control`).
//! 4. The deciding grant (`deciding_grant`): the state's own entries when it names the
//!    tool, else the workflow-wide grant (`tool.allowed`); a guard that cannot resolve
//!    fails the session (`tool.unresolved-variable`, terminal).
//! 5. The host's essential tools, where no state entry names them (`tool.essential`).
//! 6. Everything else (`not_granted`): `tool.not-allowed`.
//!
//! Every rule id, with its title and long explanation, is in one table (`rules.rs`); every
//! refusal text is composed in one place ([`Refusal::text`]), the refusals the turn makes
//! around the kernel included (`tool.unknown`, `argument.*`, `delegation.*`).
//!
//! Path arguments are canonicalized before matching, a sub-workflow's `file` parameters
//! and a host tool's declared path arguments ([`Call::declared_paths`]) included; `*` never crosses `/`; a variable's value matches literally, so it can never
//! widen a guard. What each path argument reveals comes from one table ([`mod@reveals`]): a
//! denial of `read_file` binds every argument that reads (grep, copy and move sources,
//! edit_file), a denial of `ls`/`glob` every one that lists, a denial of `write_file`
//! every one that writes, in decisions and in listing redaction alike. A file crosses a
//! sub-workflow boundary only when the sending state may read it ([`may_read`]): the
//! whole decision above for a `read_file` of that path, grants and guards included.
//!
//! ## A flow step's calls
//!
//! A flow step (`archmax flow run`) has no compiled state: it acts in the operator's
//! folder with the run's tools, under write scopes. [`decide_scoped_call`] decides each
//! of its calls (a model step's file tools, `run` and `answer`, a command step's `run`)
//! before the flow's gate asks anyone, in this order, the first that decides winning:
//!
//! 1. The step's tools: a name that is none of them (`tool.unknown`).
//! 2. Safety, the same phase-1 code as above over the flow's `Ground`: path arguments
//!    canonicalized (`tool.path-argument`), paths that climb out (`zone.escape`), then
//!    the runtime's own area, for a flow the folder holding its records, reads included
//!    (`zone.runtime-internal`).
//! 3. The write scopes ([`mod@scopes`]): each path the call writes, asked of the run's
//!    scope, then the node's (`scope.denied`, `scope.partial-only`, `scope.unmatched`).
//! 4. Everything else runs (`tool.allowed`: the run's tools are the step's grant).
//!
//! Its refusals are put in the flow's words ([`Voice::FlowStep`]).

mod denial;
mod matching;
mod refusal;
mod reveals;
mod rules;
pub mod scopes;

pub use matching::resolve_reference;
pub(crate) use matching::value_at;
pub(crate) use refusal::{Offered, bare_reason};
pub use refusal::{Refusal, Voice};
pub(crate) use reveals::{Reveal, reveals};
pub use rules::{Outcome, Rule, RuleInfo, UnknownRule};
pub use scopes::{ScopeAccess, ScopeError, ScopeOwner, ScopeRule, ScopeStack, WriteKind, WriteScope};

use serde_json::Value;

use archmax_config::mounts::MountTable;
use archmax_program::program::{Grant, MountReach, Program, Reach, StateProgram, Sym, WorkflowProgram};
use archmax_program::tools::{FILE_TOOLS, NOTE_TOOL, PathAccess, UNGRANTABLE_TOOL, path_arguments};
use archmax_program::zones::{Zone, classify};

use denial::denial;
use matching::{Match, PathArgument, Subject, entry_matches, file_parameters, path_values};

/// Who is calling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The session's model (the agent, or a grader).
    Model,
    /// A script's `tools.*` call (code state, `archmax_eval`, `archmax_run`).
    Script,
}

/// A calling workflow's workflow-wide denials, which bind its children.
#[derive(Clone, Debug)]
pub struct Inherited<'p> {
    pub workflow: &'p str,
    pub program: &'p Program,
    pub source: &'p WorkflowProgram,
}

/// Everything a decision reads besides the call itself.
pub struct Policy<'p> {
    pub program: &'p Program,
    pub workflow: &'p WorkflowProgram,
    pub mounts: &'p MountTable,
    /// Callers, nearest last.
    pub ancestors: &'p [Inherited<'p>],
    /// The host's essential tools (`tool.essential`), on where no state entry names them.
    pub essential: &'p [String],
}

/// One tool call to decide.
pub struct Call<'c> {
    pub state: &'c StateProgram,
    pub tool: &'c str,
    pub args: &'c Value,
    pub origin: Origin,
    pub reply_only: bool,
    /// The session's variables, for `${{…}}` guards.
    pub variables: &'c Value,
    /// A host tool's path arguments, as its host declares them (in place of the
    /// built-in table's, whose default for an unknown tool is `file_path`, read).
    pub declared_paths: Option<&'c [(String, PathAccess)]>,
}

/// The kernel's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The deciding rule; events record its id.
    pub rule: Rule,
    /// Why, in the words the model reads when refused ([`Refusal::text`]).
    pub reason: String,
    /// The session cannot continue in this state (a guard that cannot resolve).
    pub terminal: bool,
}

impl Verdict {
    fn allow(rule: Rule) -> Verdict {
        Verdict { allowed: true, rule, reason: String::new(), terminal: false }
    }
}

/// The workspace a call acts in, as phase 1 classifies the paths it names.
#[derive(Clone, Copy, Debug)]
enum Ground<'p> {
    /// A workflow session's folder: its reserved roots and the host's mounts ([`classify`]).
    Session(&'p MountTable),
    /// A flow's workspace, the operator's folder: the folder holding the flow's records
    /// (its session store, when that lies inside) and archmax's own files there
    /// ([`FLOW_RESERVED`]) are the runtime's; every other path is the run's.
    Flow { records: Option<&'p str> },
}

/// What a flow step may neither read nor write in any workspace: the workspace's seal key
/// folder (`.archmax/`, whose key proves every session's log) and `archmax.toml` (which
/// routes the next run's model calls, and so its prompts and keys).
pub const FLOW_RESERVED: [&str; 2] = [".archmax", "archmax.toml"];

impl Ground<'_> {
    fn zone(self, canonical: &str) -> Zone {
        match self {
            Ground::Session(mounts) => classify(canonical, mounts),
            Ground::Flow { records: Some(records) } if within(canonical, records) => Zone::RuntimeInternal,
            Ground::Flow { .. } if is_flow_reserved(canonical) => Zone::RuntimeInternal,
            Ground::Flow { .. } if canonical.is_empty() => Zone::Root,
            Ground::Flow { .. } => Zone::Run,
        }
    }
}

/// Whether a canonical path lies in one of [`FLOW_RESERVED`], as the flow's ground
/// classifies it.
fn is_flow_reserved(canonical: &str) -> bool {
    FLOW_RESERVED.iter().any(|reserved| within(canonical, reserved))
}

/// Whether the canonical `path` is `folder` or lies below it, compared without regard to
/// ASCII case (on a case-insensitive file system `Sessions/` is the same folder).
fn within(path: &str, folder: &str) -> bool {
    let folder = folder.trim_matches('/');
    !folder.is_empty()
        && path.get(..folder.len()).is_some_and(|head| head.eq_ignore_ascii_case(folder))
        && matches!(path.as_bytes().get(folder.len()), None | Some(b'/'))
}

/// Phase 1's first bound, which every caller keeps: the canonical path a path argument
/// names, or the `zone.escape` refusal when it climbs above the workspace root.
fn landing(path: &PathArgument) -> Result<&str, Refusal<'_>> {
    path.canonical.as_deref().ok_or(Refusal::Escape { written: &path.written, access: path.access })
}

/// Phase 1's bound on the runtime's own areas, which every caller keeps: any file tool on
/// a path in one is refused, reads included (`zone.runtime-internal`).
fn runtime_owned<'a>(zone: Zone, path: &PathArgument, canonical: &'a str) -> Option<Refusal<'a>> {
    (zone == Zone::RuntimeInternal).then_some(Refusal::RuntimeInternal { path: canonical, access: path.access })
}

fn state_name<'p>(program: &'p Program, state: &StateProgram) -> &'p str {
    program.str(state.slug)
}

/// The skill bundle a canonical path lies in: `skills/<slug>/…`.
fn bundle_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("skills/")?;
    let slug = rest.split('/').next()?;
    (!slug.is_empty()).then_some(slug)
}

fn standing<T: Copy>(program: &Program, table: &[(Sym, T)], name: &str) -> Option<T> {
    table.iter().find(|(sym, _)| program.str(*sym) == name).map(|(_, value)| *value)
}

/// The whole decision for this state reading `path` with `read_file`: what a file must
/// pass to cross a sub-workflow boundary (a `file` argument, a `file` return). `Err` is
/// the refusal, with its deciding rule.
pub fn may_read(policy: &Policy<'_>, state: &StateProgram, path: &str, variables: &Value) -> Result<(), Verdict> {
    let args = serde_json::json!({ "file_path": path });
    let call = Call {
        state,
        tool: "read_file",
        args: &args,
        origin: Origin::Model,
        reply_only: false,
        variables,
        declared_paths: None,
    };
    let verdict = decide(policy, &call);
    if verdict.allowed { Ok(()) } else { Err(verdict) }
}

/// Whether a listing tool (`ls`, `glob`, `grep`) may show `canonical`: the state reaches
/// it, and no declared denial covers what the tool does with it (so `{ tool: "*", paths:
/// [...] }` hides what it denies from listings, and `grep` never searches a file a denial
/// of `read_file` covers).
pub fn listed(policy: &Policy<'_>, state: &StateProgram, tool: &str, canonical: &str, variables: &Value) -> bool {
    if !visible(policy, state, canonical) {
        return false;
    }
    let Some((argument, _)) = path_arguments(tool).first() else {
        return true;
    };
    let args = serde_json::json!({ *argument: canonical });
    match Subject::new(policy.program, tool, &args, variables, None) {
        Ok(subject) => denial(policy, state, &subject).is_none(),
        Err(_) => false,
    }
}

/// Decides one call. A sub-workflow call the grants allow is refused still when one of
/// its `file` arguments names a file this state may not read ([`may_read`]).
pub fn decide(policy: &Policy<'_>, call: &Call<'_>) -> Verdict {
    let verdict = decide_tool(policy, call);
    if !verdict.allowed {
        return verdict;
    }
    for name in file_parameters(policy.program, call.tool) {
        let Some(Value::String(path)) = call.args.get(name) else {
            continue;
        };
        if let Err(refusal) = may_read(policy, call.state, path, call.variables) {
            return Refusal::FileArgument { name, tool: call.tool, path, refusal: &refusal }.verdict();
        }
    }
    verdict
}

/// Decides one call on its own grants and denials: the phases of the module doc, in
/// order, the first that decides winning.
fn decide_tool(policy: &Policy<'_>, call: &Call<'_>) -> Verdict {
    let subject = match Subject::new(policy.program, call.tool, call.args, call.variables, call.declared_paths) {
        Ok(subject) => subject,
        Err(problem) => return Refusal::PathArgument { tool: call.tool, problem: &problem }.verdict(),
    };
    if let Some(refusal) = safety(policy, call, &subject) {
        return refusal;
    }
    if let Some(refusal) = denial(policy, call.state, &subject) {
        return refusal;
    }
    let grant = call.state.guards.grants.iter().find(|grant| policy.program.str(grant.tool) == call.tool);
    if let Some(open) = always_open(policy, call.state, &subject, grant.is_some()) {
        return open;
    }
    match grant {
        Some(grant) => deciding_grant(policy.program, call.state, &subject, grant),
        None if policy.essential.iter().any(|tool| tool == call.tool) => Verdict::allow(Rule::ToolEssential),
        None => not_granted(policy, call.state, &subject),
    }
}

/// Phase 1: what no list can override. The call's own shape first (where its paths
/// point, which tool it is, whether the turn may call tools at all), then where each
/// path falls ([`zone_safety`]).
fn safety(policy: &Policy<'_>, call: &Call<'_>, subject: &Subject<'_>) -> Option<Verdict> {
    let program = policy.program;
    let paths = &subject.paths;
    for path in paths {
        let canonical = match landing(path) {
            Ok(canonical) => canonical,
            Err(escape) => return Some(escape.verdict()),
        };
        if canonical.split('/').next() == Some("workflows") {
            return Some(Refusal::GovernancePlane { path: canonical }.verdict());
        }
    }
    let tool = call.tool;
    if tool == "archmax_run" {
        let inside_bundle = paths.iter().all(|path| {
            path.canonical
                .as_deref()
                .and_then(bundle_of)
                .is_some_and(|slug| program.skills.iter().any(|skill| program.str(skill.slug) == slug))
        });
        if paths.is_empty() || !inside_bundle {
            return Some(Refusal::SkillOnly.verdict());
        }
    }
    let refusal = if call.reply_only {
        Refusal::ReplyOnly
    } else if tool == "eval" {
        Refusal::Eval
    } else if tool == UNGRANTABLE_TOOL {
        Refusal::Ungrantable
    } else if tool == NOTE_TOOL {
        Refusal::Note
    } else {
        return paths.iter().find_map(|path| zone_safety(policy, call.state, path));
    };
    Some(refusal.verdict())
}

/// Phase 1, per path: the runtime's own areas, read-only mounts, and the skill bundles and
/// mounts the state does not have.
fn zone_safety(policy: &Policy<'_>, state: &StateProgram, path: &PathArgument) -> Option<Verdict> {
    let canonical = path.canonical.as_deref()?;
    let writes = path.access.writes();
    let zone = Ground::Session(policy.mounts).zone(canonical);
    if let Some(refusal) = runtime_owned(zone, path, canonical) {
        return Some(refusal.verdict());
    }
    let refusal = match zone {
        Zone::Offload if writes => Refusal::RuntimeManaged { path: canonical },
        Zone::Mount(index) => {
            let mount = &policy.mounts.mounts[index];
            if writes && mount.read_only {
                Refusal::ReadOnlyZone { path: canonical, mount: &mount.key }
            } else if let Some(refusal) = bundle_of(canonical)
                .filter(|_| mount.name == "skills")
                .and_then(|skill| skill_standing(policy, state, skill))
            {
                refusal
            } else {
                mount_standing(policy, state, canonical, &mount.name, writes)?
            }
        }
        _ => return None,
    };
    Some(refusal.verdict())
}

/// The calling workflow whose workflow-wide denial list (`denials` of its program) names
/// `name`, if one does.
fn denied_above<'p>(policy: &Policy<'p>, denials: fn(&WorkflowProgram) -> &[Sym], name: &str) -> Option<&'p str> {
    policy
        .ancestors
        .iter()
        .find(|ancestor| denials(ancestor.source).iter().any(|denied| ancestor.program.str(*denied) == name))
        .map(|ancestor| ancestor.workflow)
}

/// Why the state may not reach the skill bundle `skill`, if it may not.
fn skill_standing<'p>(policy: &Policy<'p>, state: &'p StateProgram, skill: &'p str) -> Option<Refusal<'p>> {
    let program = policy.program;
    if let Some(workflow) = denied_above(policy, |workflow| &workflow.skills_forbid_always, skill) {
        return Some(Refusal::SkillDeniedAbove { skill, workflow });
    }
    let here = state_name(program, state);
    match standing(program, &state.skill_access, skill) {
        Some(Reach::Enabled) => None,
        Some(Reach::Forbidden) => Some(Refusal::SkillForbidden { skill, state: here }),
        _ => {
            let enabled = state.skills.iter().map(|sym| program.str(*sym)).collect();
            Some(Refusal::SkillNotAllowed { skill, state: here, enabled })
        }
    }
}

/// Why the state may not reach (or, when `writes`, write) the mount `mount`, if it may not.
fn mount_standing<'p>(
    policy: &Policy<'p>,
    state: &'p StateProgram,
    canonical: &'p str,
    mount: &'p str,
    writes: bool,
) -> Option<Refusal<'p>> {
    let program = policy.program;
    if let Some(workflow) = denied_above(policy, |workflow| &workflow.mounts_forbid_always, mount) {
        return Some(Refusal::MountDeniedAbove { mount, workflow });
    }
    let here = state_name(program, state);
    match standing(program, &state.mount_access, mount) {
        Some(MountReach::Forbidden) => Some(Refusal::MountForbidden { mount, state: here }),
        Some(MountReach::NotAllowed) | None => Some(Refusal::MountNotAllowed { path: canonical, mount, state: here }),
        Some(MountReach::Reachable { writable: false }) if writes => {
            Some(Refusal::MountReadOnly { mount, state: here })
        }
        Some(MountReach::Reachable { .. }) => None,
    }
}

/// Phase 3: what is open to every state. A granted file tool inside `scratchpad/`, a
/// granted read or listing of an offload area, the state type's own controls.
fn always_open(policy: &Policy<'_>, state: &StateProgram, subject: &Subject<'_>, granted: bool) -> Option<Verdict> {
    let paths = &subject.paths;
    if granted && FILE_TOOLS.contains(&subject.tool) && !paths.is_empty() {
        let in_scratchpad = paths.iter().all(|path| {
            path.canonical
                .as_deref()
                .is_some_and(|canonical| canonical == "scratchpad" || canonical.starts_with("scratchpad/"))
                && matches!(path.access, PathAccess::Read | PathAccess::List | PathAccess::Write | PathAccess::Remove)
        });
        if in_scratchpad {
            return Some(Verdict::allow(Rule::ToolScratchpad));
        }
    }
    // Only the runtime's own file tools: a host tool's other arguments are its grant's to
    // decide, whatever its path arguments name.
    if granted
        && FILE_TOOLS.contains(&subject.tool)
        && !paths.is_empty()
        && paths.iter().all(|path| {
            matches!(path.access, PathAccess::Read | PathAccess::List)
                && path
                    .canonical
                    .as_deref()
                    .is_some_and(|canonical| classify(canonical, policy.mounts) == Zone::Offload)
        })
    {
        return Some(Verdict::allow(Rule::ToolOffloadRead));
    }
    if state.guards.controls.iter().any(|control| policy.program.str(*control) == subject.tool) {
        return Some(Verdict::allow(Rule::ToolControl));
    }
    None
}

/// Phase 4: the grant that names the tool decides. Any entry that matches allows; a guard
/// naming a variable that is not set fails the session; otherwise the entries are what
/// the state allows instead.
fn deciding_grant(program: &Program, state: &StateProgram, subject: &Subject<'_>, grant: &Grant) -> Verdict {
    if grant.entries.is_empty() {
        return Verdict::allow(Rule::ToolAllowed);
    }
    let mut unresolved = None;
    for entry in &grant.entries {
        match entry_matches(program, entry, subject, false) {
            Match::Yes => return Verdict::allow(Rule::ToolAllowed),
            Match::No => {}
            Match::Unresolved(path) => unresolved = Some(path),
        }
    }
    let here = state_name(program, state);
    if let Some(reference) = &unresolved {
        return Refusal::UnresolvedVariable { tool: subject.tool, state: here, reference }.verdict();
    }
    let entries = grant.entries.iter().map(|entry| program.str(entry.display)).collect();
    Refusal::NotAllowed {
        tool: subject.tool,
        target: subject.paths.first().map(|path| path.written.as_str()),
        state: here,
        offered: Offered::Entries { entries, variables: subject.variables },
        terminal_state: state.is_terminal(),
    }
    .verdict()
}

/// Phase 5: a tool the state does not grant, refused with the tools it has.
fn not_granted(policy: &Policy<'_>, state: &StateProgram, subject: &Subject<'_>) -> Verdict {
    let program = policy.program;
    let tools = policy.workflow.surface(state.surface).tools.iter().map(|entry| program.str(entry.name)).collect();
    Refusal::NotAllowed {
        tool: subject.tool,
        target: subject.paths.first().map(|path| path.written.as_str()),
        state: state_name(program, state),
        offered: Offered::Tools(tools),
        terminal_state: state.is_terminal(),
    }
    .verdict()
}

/// What a flow step's calls are decided against ([`decide_scoped_call`]): the run's
/// tools, the folder of the flow's own records, and the write scopes the step runs under.
#[derive(Clone, Copy, Debug)]
pub struct ScopedPolicy<'p> {
    /// The built-in file tools the step is offered; their path arguments are the
    /// built-in table's.
    pub file_tools: &'p [&'p str],
    /// The step's other tools, which name no path (`run`, `answer`).
    pub other_tools: &'p [&'p str],
    /// The workspace-relative folder holding the flow's records (its session store), when
    /// it lies inside the workspace.
    pub records: Option<&'p str>,
    /// The run's scope, then the node's.
    pub scopes: ScopeStack<'p>,
}

impl ScopedPolicy<'_> {
    fn ground(&self) -> Ground<'_> {
        Ground::Flow { records: self.records }
    }

    /// Whether a listing (`ls`, `glob`, `grep`) may show, or search, a canonical path:
    /// not when it lies in the flow's records, which no step reads.
    pub fn shows(&self, canonical: &str) -> bool {
        self.ground().zone(canonical) != Zone::RuntimeInternal
    }
}

/// One call of a flow step.
#[derive(Clone, Copy, Debug)]
pub struct ScopedCall<'c> {
    pub tool: &'c str,
    pub args: &'c Value,
}

/// Decides one call of a flow step: the phases of "A flow step's calls" in the module
/// doc, in order, the first that decides winning. A refusal's text is in the flow's
/// words ([`Voice::FlowStep`]).
pub fn decide_scoped_call(policy: &ScopedPolicy<'_>, call: &ScopedCall<'_>) -> Verdict {
    let voice = Voice::FlowStep;
    let declared: Option<&[(String, PathAccess)]> = if policy.file_tools.contains(&call.tool) {
        None
    } else if policy.other_tools.contains(&call.tool) {
        Some(&[])
    } else {
        return Refusal::NotAStepTool { tool: call.tool }.verdict_in(voice);
    };
    let paths = match path_values(call.tool, declared, call.args) {
        Ok(paths) => paths,
        Err(problem) => return Refusal::PathArgument { tool: call.tool, problem: &problem }.verdict_in(voice),
    };
    if let Some(refusal) = scoped_safety(policy.ground(), &paths) {
        return refusal.verdict_in(voice);
    }
    for path in &paths {
        if let (Some(canonical), Some(kind)) = (path.canonical.as_deref(), WriteKind::of(call.tool, path.access))
            && let Some(refusal) = policy.scopes.refusal(canonical, kind)
        {
            return refusal.verdict_in(voice);
        }
    }
    Verdict::allow(Rule::ToolAllowed)
}

/// Phase 2 of a flow step's call: phase 1's bounds over the flow's ground, every path's
/// escape first, then where each lands.
fn scoped_safety<'a>(ground: Ground<'_>, paths: &'a [PathArgument]) -> Option<Refusal<'a>> {
    let mut landed = Vec::with_capacity(paths.len());
    for path in paths {
        match landing(path) {
            Ok(canonical) => landed.push((path, canonical)),
            Err(escape) => return Some(escape),
        }
    }
    landed.into_iter().find_map(|(path, canonical)| runtime_owned(ground.zone(canonical), path, canonical))
}

/// Whether a listing may show a canonical path in this state: not inside a skill bundle
/// or a mount the state does not have, and not in the runtime's own areas.
pub fn visible(policy: &Policy<'_>, state: &StateProgram, canonical: &str) -> bool {
    let program = policy.program;
    match Ground::Session(policy.mounts).zone(canonical) {
        Zone::RuntimeInternal | Zone::GovernancePlane => false,
        Zone::Mount(index) => {
            let mount = &policy.mounts.mounts[index];
            if let Some(slug) = bundle_of(canonical).filter(|_| mount.name == "skills") {
                let denied = denied_above(policy, |workflow| &workflow.skills_forbid_always, slug).is_some();
                if denied || standing(program, &state.skill_access, slug) != Some(Reach::Enabled) {
                    return false;
                }
            }
            matches!(standing(program, &state.mount_access, &mount.name), Some(MountReach::Reachable { .. }))
        }
        _ => true,
    }
}
