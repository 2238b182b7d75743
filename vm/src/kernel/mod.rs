//! The governance kernel: one pure function deciding every tool call.
//!
//! [`decide`] reads only precomputed tables (the state's guard table, its skill and mount
//! standing, the workflow's and its ancestors' denials, the host's mount table) and the
//! session's variables, and returns a [`Verdict`]. The first rule that applies wins:
//!
//! 1. Safety, never overridable: the authoring plane (`zone.governance-plane`), paths
//!    that climb out (`zone.escape`), malformed path arguments (`tool.path-argument`),
//!    `archmax_run` outside skill bundles (`script.skill-only`), reply-only turns
//!    (`tool.reply-only`), bare `eval` (`tool.eval`), `task` (`tool.ungrantable`),
//!    the runtime's note channel (`tool.note`), writes into read-only mounts
//!    (`zone.read-only`), runtime areas (`zone.runtime-internal`), writes into offload
//!    areas (`zone.runtime-managed`), skill bundles the state does not enable
//!    (`skill.forbidden`, `skill.not-allowed`), and mounts it does not have
//!    (`mount.forbidden`, `mount.not-allowed`, `mount.read-only`).
//! 2. Denials inherited from calling workflows, then `tools.forbid_always`
//!    (`tool.forbidden`), then the state's `tools.forbid` (`tool.forbidden-here`).
//! 3. What is always open: the scratchpad for granted file tools (`tool.scratchpad`),
//!    reads of the offload areas (`tool.offload-read`), the state type's controls
//!    (`tool.control`).
//! 4. The deciding grant: the state's own entries when it names the tool, else the
//!    workflow-wide grant (`tool.allowed`); a guard that cannot resolve fails the session
//!    (`tool.unresolved-variable`, terminal).
//! 5. Everything else: `tool.not-allowed`.
//!
//! Path arguments are canonicalized before matching, a sub-workflow's `file` parameters
//! included; `*` never crosses `/`; a variable's value matches literally, so it can never
//! widen a guard. What each path argument reveals comes from one table ([`reveals`]): a
//! denial of `read_file` binds every argument that reads (grep, copy and move sources,
//! edit_file), a denial of `ls`/`glob` every one that lists, a denial of `write_file`
//! every one that writes, in decisions and in listing redaction alike. A file crosses a
//! sub-workflow boundary only when the sending state may read it ([`may_read`]): the
//! whole decision above for a `read_file` of that path, grants and guards included.

mod reveals;

pub use reveals::{Reveal, reveals};

use serde_json::Value;

use archmax_compiler::glob::Glob;
use archmax_compiler::host::MountTable;
use archmax_compiler::program::{MountReach, Program, Reach, Rule, StateProgram, Sym, ValueType, WorkflowProgram};
use archmax_compiler::syntax::reference::VarPath;
use archmax_compiler::tools::{FILE_TOOLS, NOTE_TOOL, PathAccess, UNGRANTABLE_TOOL, delegation_target, path_arguments};
use archmax_compiler::zones::{Zone, canonicalize, classify};

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
}

/// The kernel's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub rule: &'static str,
    /// Why, in the words the model reads when refused.
    pub reason: String,
    /// The session cannot continue in this state (a guard that cannot resolve).
    pub terminal: bool,
}

impl Verdict {
    fn allow(rule: &'static str) -> Verdict {
        Verdict { allowed: true, rule, reason: String::new(), terminal: false }
    }

    fn block(rule: &'static str, reason: impl Into<String>) -> Verdict {
        Verdict { allowed: false, rule, reason: reason.into(), terminal: false }
    }
}

/// A path argument of the call, canonicalized.
#[derive(Clone, Debug)]
struct PathArgument {
    /// The tool's own name for the argument (not the alias the call used).
    name: &'static str,
    access: PathAccess,
    /// The canonical path, or `None` when it climbs out of the root.
    canonical: Option<String>,
    written: String,
}

/// The argument names a tool's path argument also answers to.
fn aliases(name: &'static str) -> &'static [&'static str] {
    match name {
        "file_path" => &["file_path", "path"],
        "path" => &["path", "file_path"],
        other => match other {
            "source" => &["source"],
            "destination" => &["destination"],
            _ => &[],
        },
    }
}

/// Extracts the call's path arguments; `Err` names a malformed one.
fn path_values(tool: &str, args: &Value) -> Result<Vec<PathArgument>, String> {
    let mut found = Vec::new();
    for (name, access) in path_arguments(tool) {
        let value = aliases(name).iter().find_map(|alias| args.get(alias));
        let written: Vec<String> = match value {
            None | Some(Value::Null) => {
                // Listing and searching default to the root.
                if matches!(access, PathAccess::List | PathAccess::Search) { vec![String::new()] } else { Vec::new() }
            }
            Some(Value::String(text)) => vec![text.clone()],
            Some(Value::Array(items)) => {
                let mut texts = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(text) => texts.push(text.clone()),
                        _ => return Err(format!("`{name}` must be a path or a list of paths")),
                    }
                }
                texts
            }
            Some(_) => return Err(format!("`{name}` must be a path or a list of paths")),
        };
        for written in written {
            found.push(PathArgument { name, access: *access, canonical: canonicalize(&written).ok(), written });
        }
    }
    Ok(found)
}

/// The value `segments` address inside `value`: own properties only, array indices
/// counted from the end when negative.
pub fn value_at<'v>(
    value: &'v Value,
    segments: &[archmax_compiler::syntax::reference::PathSegment],
) -> Option<&'v Value> {
    use archmax_compiler::syntax::reference::PathSegment;
    let mut cursor = value;
    for segment in segments {
        cursor = match (segment, cursor) {
            (PathSegment::Key(key), Value::Object(map)) => map.get(key)?,
            (PathSegment::Index(index), Value::Array(items)) => {
                let position = if *index < 0 { items.len() as i64 + index } else { *index };
                items.get(usize::try_from(position).ok()?)?
            }
            (PathSegment::Index(index), Value::Object(map)) => map.get(&index.to_string())?,
            _ => return None,
        };
    }
    Some(cursor)
}

/// Resolves a `${{…}}` path over the variables to the text a glob hole matches: own
/// properties only, canonical indices (negative from the end), and a scalar at the end.
pub fn resolve_reference(path: &VarPath, variables: &Value) -> Option<String> {
    let value = value_at(variables.get(&path.root)?, &path.segments)?;
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// How one rule matched a call.
enum Match {
    Yes,
    No,
    /// A guard named a variable that does not resolve.
    Unresolved(VarPath),
}

fn glob_matches(globs: &[Glob], value: &str, variables: &Value) -> Match {
    let mut unresolved = None;
    for glob in globs {
        match glob.matches(value, &|path| resolve_reference(path, variables)) {
            Ok(true) => return Match::Yes,
            Ok(false) => {}
            Err(missing) => unresolved = Some(missing.0),
        }
    }
    match unresolved {
        Some(path) => Match::Unresolved(path),
        None => Match::No,
    }
}

/// The text an argument is matched as: a path canonicalized, anything else as written.
fn argument_text(value: &Value, is_path: bool) -> Option<String> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Null => String::new(),
        _ => return None,
    };
    if is_path { canonicalize(&text).ok() } else { Some(text) }
}

/// Looks a dotted argument name up in the arguments.
fn argument<'a>(args: &'a Value, dotted: &str) -> Option<&'a Value> {
    let mut value = args;
    for segment in dotted.split('.') {
        value = match value {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// A call as the rules see it: the tool, its arguments, its path arguments canonicalized,
/// and every argument name that holds a path (aliases and `file` parameters included).
struct Subject<'a> {
    tool: &'a str,
    args: &'a Value,
    paths: Vec<PathArgument>,
    path_names: Vec<&'a str>,
    variables: &'a Value,
}

impl<'a> Subject<'a> {
    fn new(program: &'a Program, tool: &'a str, args: &'a Value, variables: &'a Value) -> Result<Subject<'a>, String> {
        let paths = path_values(tool, args)?;
        Ok(Subject { tool, args, paths, path_names: path_argument_names(program, tool), variables })
    }
}

/// The names of every argument of `tool` that holds a path: a built-in's path arguments
/// with their aliases, a sub-workflow's `file` parameters.
fn path_argument_names<'p>(program: &'p Program, tool: &str) -> Vec<&'p str> {
    let mut names: Vec<&'p str> =
        path_arguments(tool).iter().flat_map(|(name, _)| aliases(name).iter().copied()).collect();
    names.extend(file_parameters(program, tool));
    names
}

/// The `file` parameters of a sub-workflow tool's target (its `manual` entry).
fn file_parameters<'p>(program: &'p Program, tool: &str) -> Vec<&'p str> {
    let Some((_, target)) = delegation_target(tool).and_then(|slug| program.workflow(slug)) else {
        return Vec::new();
    };
    target
        .triggers
        .iter()
        .filter(|trigger| program.str(trigger.id) == "manual")
        .flat_map(|trigger| trigger.requires.iter())
        .filter(|entry| entry.ty == Some(ValueType::File))
        .map(|entry| program.str(entry.name))
        .collect()
}

/// Matches one entry against a call. An allow entry needs every guard and every path to
/// match; a forbid entry (`any_path`) denies when any path matches.
fn rule_matches(program: &Program, rule: &Rule, subject: &Subject<'_>, any_path: bool) -> Match {
    if let Some(name) = rule.tool
        && program.str(name) != subject.tool
    {
        return Match::No;
    }
    for (argument_name, globs) in &rule.args {
        let name = program.str(*argument_name);
        let is_path = subject.path_names.contains(&name);
        let values: Vec<&Value> = match argument(subject.args, name) {
            Some(Value::Array(items)) if is_path => items.iter().collect(),
            Some(value) => vec![value],
            None => return Match::No,
        };
        for value in values {
            let Some(text) = argument_text(value, is_path) else {
                // A path that climbs out matches no allow entry, and every denial.
                return if any_path && is_path { Match::Yes } else { Match::No };
            };
            match glob_matches(globs, &text, subject.variables) {
                Match::Yes => {}
                other => return other,
            }
        }
    }
    if let Some(globs) = &rule.paths {
        if subject.paths.is_empty() {
            return Match::No;
        }
        let mut any = false;
        for path in &subject.paths {
            let Some(canonical) = &path.canonical else {
                return Match::No;
            };
            match glob_matches(globs, canonical, subject.variables) {
                Match::Yes => any = true,
                Match::No if !any_path => return Match::No,
                Match::No => {}
                unresolved @ Match::Unresolved(_) => return unresolved,
            }
        }
        if !any {
            return Match::No;
        }
    }
    Match::Yes
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
    let call = Call { state, tool: "read_file", args: &args, origin: Origin::Model, reply_only: false, variables };
    let verdict = decide(policy, &call);
    if verdict.allowed { Ok(()) } else { Err(verdict) }
}

/// A refusal's reason without the `[workflow] BLOCKED: ` opener, to quote inside another.
pub fn bare_reason(verdict: &Verdict) -> &str {
    verdict
        .reason
        .strip_prefix("[workflow] BLOCKED: ")
        .or_else(|| verdict.reason.strip_prefix("[workflow] FAILED: "))
        .unwrap_or(&verdict.reason)
}

/// Where a declared denial was made.
enum DenialScope<'p> {
    Caller(&'p str),
    Workflow,
    State(&'p str),
}

/// A declared denial a call ran into.
struct Denial<'p> {
    rule: &'static str,
    display: &'p str,
    scope: DenialScope<'p>,
}

impl Denial<'_> {
    /// The refusal of a call the denial names.
    fn direct(&self, tool: &str) -> Verdict {
        let display = self.display;
        let reason = match self.scope {
            DenialScope::Caller(workflow) => {
                format!("[workflow] BLOCKED: '{tool}' is denied by `{display}` of the calling workflow `{workflow}`.")
            }
            DenialScope::Workflow => format!("[workflow] BLOCKED: '{tool}' is denied in every state by `{display}`."),
            DenialScope::State(here) => {
                format!("[workflow] BLOCKED: '{tool}' is denied in state '{here}' by `{display}`.")
            }
        };
        Verdict::block(self.rule, reason)
    }

    /// The refusal of a call that would do to `path` what a denial of `through` forbids.
    fn derived(&self, tool: &str, reveal: Reveal, path: &str, through: &str) -> Verdict {
        let display = self.display;
        let verb = reveal.verb();
        let denied = match self.scope {
            DenialScope::Caller(workflow) => format!("`{display}` of the calling workflow `{workflow}` denies"),
            DenialScope::Workflow => format!("`{display}` denies in every state"),
            DenialScope::State(here) => format!("`{display}` denies in state '{here}'"),
        };
        Verdict::block(
            self.rule,
            format!(
                "[workflow] BLOCKED: '{tool}' would {verb} '{path}', which {denied}; a denial of '{through}' binds every tool that can {verb} a file."
            ),
        )
    }
}

/// The declared denial a call runs into, if any: the callers' workflow-wide denials,
/// this workflow's, then this state's.
fn declared_denial<'p>(policy: &Policy<'p>, state: &'p StateProgram, subject: &Subject<'_>) -> Option<Denial<'p>> {
    let program = policy.program;
    for ancestor in policy.ancestors.iter().rev() {
        for rule in &ancestor.source.forbid_always {
            if !matches!(rule_matches(ancestor.program, rule, subject, true), Match::No) {
                return Some(Denial {
                    rule: "tool.forbidden",
                    display: ancestor.program.str(rule.display),
                    scope: DenialScope::Caller(ancestor.workflow),
                });
            }
        }
    }
    for rule in &policy.workflow.forbid_always {
        if !matches!(rule_matches(program, rule, subject, true), Match::No) {
            return Some(Denial {
                rule: "tool.forbidden",
                display: program.str(rule.display),
                scope: DenialScope::Workflow,
            });
        }
    }
    for rule in &state.guards.forbid {
        if !matches!(rule_matches(program, rule, subject, true), Match::No) {
            return Some(Denial {
                rule: "tool.forbidden-here",
                display: program.str(rule.display),
                scope: DenialScope::State(state_name(program, state)),
            });
        }
    }
    None
}

/// The refusal a call's declared denials give it: a denial of the tool itself, else a
/// denial of a tool that does what one of its path arguments does (the [`reveals`]
/// table: a grep over a file `read_file` may not read is refused like the read).
fn denial(policy: &Policy<'_>, state: &StateProgram, subject: &Subject<'_>) -> Option<Verdict> {
    if let Some(found) = declared_denial(policy, state, subject) {
        return Some(found.direct(subject.tool));
    }
    for path in &subject.paths {
        let Some(canonical) = path.canonical.as_deref() else {
            continue;
        };
        for &reveal in reveals(subject.tool, path.name) {
            for &through in reveal.denied_through().iter().filter(|through| **through != subject.tool) {
                let Some((argument, _)) = path_arguments(through).first() else {
                    continue;
                };
                let args = serde_json::json!({ *argument: canonical });
                let Ok(equivalent) = Subject::new(policy.program, through, &args, subject.variables) else {
                    continue;
                };
                if let Some(found) = declared_denial(policy, state, &equivalent) {
                    return Some(found.derived(subject.tool, reveal, canonical, through));
                }
            }
        }
    }
    None
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
    match Subject::new(policy.program, tool, &args, variables) {
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
            return Verdict {
                allowed: false,
                rule: refusal.rule,
                reason: format!(
                    "[workflow] BLOCKED: the file argument '{name}' of '{}' names '{path}', which this state may not read: {}",
                    call.tool,
                    bare_reason(&refusal)
                ),
                terminal: refusal.terminal,
            };
        }
    }
    verdict
}

/// Decides one call on its own grants and denials.
fn decide_tool(policy: &Policy<'_>, call: &Call<'_>) -> Verdict {
    let program = policy.program;
    let state = call.state;
    let here = state_name(program, state);
    let tool = call.tool;
    let subject = match Subject::new(program, tool, call.args, call.variables) {
        Ok(subject) => subject,
        Err(problem) => {
            return Verdict::block("tool.path-argument", format!("[workflow] BLOCKED: '{tool}': {problem}."));
        }
    };
    let paths = &subject.paths;

    // 1. Safety.
    for path in paths {
        let Some(canonical) = &path.canonical else {
            return Verdict::block(
                "zone.escape",
                format!(
                    "[workflow] BLOCKED: '{}' climbs above the workspace root. Work inside `scratchpad/`.",
                    path.written
                ),
            );
        };
        if canonical.split('/').next() == Some("workflows") {
            return Verdict::block(
                "zone.governance-plane",
                format!(
                    "[workflow] BLOCKED: '{canonical}' is under `workflows/`, which no session can reach. Work inside `scratchpad/`."
                ),
            );
        }
    }
    if tool == "archmax_run" {
        let inside_bundle = paths.iter().all(|path| {
            path.canonical
                .as_deref()
                .and_then(bundle_of)
                .is_some_and(|slug| program.skills.iter().any(|skill| program.str(skill.slug) == slug))
        });
        if paths.is_empty() || !inside_bundle {
            return Verdict::block(
                "script.skill-only",
                "[workflow] BLOCKED: 'archmax_run' runs only scripts inside a skill bundle (`skills/<slug>/…`).",
            );
        }
    }
    if call.reply_only {
        return Verdict::block(
            "tool.reply-only",
            "[workflow] BLOCKED: this session is parked; this turn may only answer in text, and no tool runs.",
        );
    }
    if tool == "eval" {
        return Verdict::block(
            "tool.eval",
            "[workflow] BLOCKED: there is no 'eval' tool; run code with 'archmax_eval'.",
        );
    }
    if tool == UNGRANTABLE_TOOL {
        return Verdict::block(
            "tool.ungrantable",
            "[workflow] BLOCKED: 'task' is not available in any state; delegate with an `archmax_workflow_<slug>` tool.",
        );
    }
    if tool == NOTE_TOOL {
        return Verdict::block(
            "tool.note",
            "[workflow] BLOCKED: 'archmax_note' is the runtime's note channel; nothing may call it.",
        );
    }
    for path in paths {
        let Some(canonical) = path.canonical.as_deref() else {
            continue;
        };
        let writes = path.access.writes();
        match classify(canonical, policy.mounts) {
            Zone::RuntimeInternal => {
                return Verdict::block(
                    "zone.runtime-internal",
                    format!("[workflow] BLOCKED: '{canonical}' belongs to the runtime. Work inside `scratchpad/`."),
                );
            }
            Zone::Offload if writes => {
                return Verdict::block(
                    "zone.runtime-managed",
                    format!(
                        "[workflow] BLOCKED: '{canonical}' is kept by the runtime and is read-only. Write inside `scratchpad/`."
                    ),
                );
            }
            Zone::Mount(index) => {
                let mount = &policy.mounts.mounts[index];
                if writes && mount.read_only {
                    return Verdict::block(
                        "zone.read-only",
                        format!(
                            "[workflow] BLOCKED: '{canonical}' is in the read-only mount `{}`. Write inside `scratchpad/`.",
                            mount.key
                        ),
                    );
                }
                if let Some(slug) = bundle_of(canonical).filter(|_| mount.name == "skills") {
                    let inherited = policy.ancestors.iter().find(|ancestor| {
                        ancestor.source.skills_forbid_always.iter().any(|denied| ancestor.program.str(*denied) == slug)
                    });
                    if let Some(ancestor) = inherited {
                        return Verdict::block(
                            "skill.forbidden",
                            format!(
                                "[workflow] BLOCKED: the skill `{slug}` is denied by the calling workflow `{}`. Work inside `scratchpad/`.",
                                ancestor.workflow
                            ),
                        );
                    }
                    match standing(program, &state.skill_access, slug) {
                        Some(Reach::Enabled) => {}
                        Some(Reach::Forbidden) => {
                            return Verdict::block(
                                "skill.forbidden",
                                format!(
                                    "[workflow] BLOCKED: the skill `{slug}` is forbidden in state '{here}'; a denial beats every grant. Work inside `scratchpad/`."
                                ),
                            );
                        }
                        _ => {
                            let enabled: Vec<&str> = state.skills.iter().map(|sym| program.str(*sym)).collect();
                            return Verdict::block(
                                "skill.not-allowed",
                                format!(
                                    "[workflow] BLOCKED: the skill `{slug}` is not enabled in state '{here}' (enabled: {}). Work inside `scratchpad/`.",
                                    if enabled.is_empty() { "none".to_string() } else { enabled.join(", ") }
                                ),
                            );
                        }
                    }
                }
                let inherited = policy.ancestors.iter().find(|ancestor| {
                    ancestor
                        .source
                        .mounts_forbid_always
                        .iter()
                        .any(|denied| ancestor.program.str(*denied) == mount.name)
                });
                if let Some(ancestor) = inherited {
                    return Verdict::block(
                        "mount.forbidden",
                        format!(
                            "[workflow] BLOCKED: the mount `{}` is denied by the calling workflow `{}`. Work inside `scratchpad/`.",
                            mount.name, ancestor.workflow
                        ),
                    );
                }
                match standing(program, &state.mount_access, &mount.name) {
                    Some(MountReach::Forbidden) => {
                        return Verdict::block(
                            "mount.forbidden",
                            format!(
                                "[workflow] BLOCKED: the mount `{}` is forbidden in state '{here}'. Work inside `scratchpad/`.",
                                mount.name
                            ),
                        );
                    }
                    Some(MountReach::NotAllowed) | None => {
                        return Verdict::block(
                            "mount.not-allowed",
                            format!(
                                "[workflow] BLOCKED: '{canonical}' exists, but state '{here}' was not given the mount `{}`. Work inside `scratchpad/`.",
                                mount.name
                            ),
                        );
                    }
                    Some(MountReach::Reachable { writable: false }) if writes => {
                        return Verdict::block(
                            "mount.read-only",
                            format!(
                                "[workflow] BLOCKED: state '{here}' may read the mount `{}` but not write it. Write inside `scratchpad/`.",
                                mount.name
                            ),
                        );
                    }
                    Some(MountReach::Reachable { .. }) => {}
                }
            }
            _ => {}
        }
    }

    // 2. Declared denials: the callers', this workflow's, this state's.
    if let Some(refusal) = denial(policy, state, &subject) {
        return refusal;
    }

    // 3. Always open.
    let grant = state.guards.grants.iter().find(|grant| program.str(grant.tool) == tool);
    if grant.is_some() && FILE_TOOLS.contains(&tool) && !paths.is_empty() {
        let in_scratchpad = paths.iter().all(|path| {
            path.canonical
                .as_deref()
                .is_some_and(|canonical| canonical == "scratchpad" || canonical.starts_with("scratchpad/"))
                && matches!(path.access, PathAccess::Read | PathAccess::List | PathAccess::Write | PathAccess::Remove)
        });
        if in_scratchpad {
            return Verdict::allow("tool.scratchpad");
        }
    }
    if grant.is_some()
        && !paths.is_empty()
        && paths.iter().all(|path| {
            matches!(path.access, PathAccess::Read | PathAccess::List)
                && path
                    .canonical
                    .as_deref()
                    .is_some_and(|canonical| classify(canonical, policy.mounts) == Zone::Offload)
        })
    {
        return Verdict::allow("tool.offload-read");
    }
    if state.guards.controls.iter().any(|control| program.str(*control) == tool) {
        return Verdict::allow("tool.control");
    }

    // 4. The deciding grant.
    if let Some(grant) = grant {
        if grant.entries.is_empty() {
            return Verdict::allow("tool.allowed");
        }
        let mut unresolved = None;
        for rule in &grant.entries {
            match rule_matches(program, rule, &subject, false) {
                Match::Yes => return Verdict::allow("tool.allowed"),
                Match::No => {}
                Match::Unresolved(path) => unresolved = Some(path),
            }
        }
        if let Some(path) = unresolved {
            return Verdict {
                allowed: false,
                rule: "tool.unresolved-variable",
                reason: format!(
                    "[workflow] FAILED: the guard on '{tool}' in state '{here}' reads `${{{{{path}}}}}`, which is not set; the guard cannot be evaluated."
                ),
                terminal: true,
            };
        }
        let allowed: Vec<&str> = grant.entries.iter().map(|rule| program.str(rule.display)).collect();
        let target = paths.first().map(|path| format!(" on '{}'", path.written)).unwrap_or_default();
        return Verdict::block(
            "tool.not-allowed",
            format!(
                "[workflow] BLOCKED: '{tool}'{target} is not allowed in state '{here}'. Allowed here: {}.{}",
                allowed.join("; "),
                hint(state)
            ),
        );
    }

    // 5. Everything else.
    let target = paths.first().map(|path| format!(" on '{}'", path.written)).unwrap_or_default();
    let surface: Vec<&str> =
        policy.workflow.surface(state.surface).tools.iter().map(|entry| program.str(entry.name)).collect();
    Verdict::block(
        "tool.not-allowed",
        format!(
            "[workflow] BLOCKED: '{tool}'{target} is not allowed in state '{here}'. Tools here: {}.{}",
            if surface.is_empty() { "none".to_string() } else { surface.join(", ") },
            hint(state)
        ),
    )
}

fn hint(state: &StateProgram) -> &'static str {
    if state.is_terminal() {
        " This state is terminal: finish the work with the tools it has."
    } else {
        " Use this state's tools, or finish its work and advance."
    }
}

/// Whether a listing may show a canonical path in this state: not inside a skill bundle
/// or a mount the state does not have, and not in the runtime's own areas.
pub fn visible(policy: &Policy<'_>, state: &StateProgram, canonical: &str) -> bool {
    let program = policy.program;
    match classify(canonical, policy.mounts) {
        Zone::RuntimeInternal | Zone::GovernancePlane => false,
        Zone::Mount(index) => {
            let mount = &policy.mounts.mounts[index];
            if let Some(slug) = bundle_of(canonical).filter(|_| mount.name == "skills") {
                let denied_above = policy.ancestors.iter().any(|ancestor| {
                    ancestor.source.skills_forbid_always.iter().any(|denied| ancestor.program.str(*denied) == slug)
                });
                if denied_above || standing(program, &state.skill_access, slug) != Some(Reach::Enabled) {
                    return false;
                }
            }
            matches!(standing(program, &state.mount_access, &mount.name), Some(MountReach::Reachable { .. }))
        }
        _ => true,
    }
}
