//! Governance probes: every tools, skills and mounts entry checked against the tool
//! vocabulary, the path zones, the skill registry and the host's mount table.
//!
//! An allow entry the runtime's kernel would always refuse is an error (a write into a
//! runtime area or a read-only mount, `archmax_run` outside skill bundles, a path into a
//! bundle the state does not enable, a grant a bare forbid cancels); an entry that can
//! have no effect is a warning, and so is a state's read denial that the sub-workflows
//! it may call are not bound by. A state's standing with skills and mounts comes from
//! [`crate::standing`], the same functions lowering bakes into the program the kernel
//! decides with.

use crate::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use crate::program::{MountReach, Reach};
use crate::schema::ast::{Access, Glob, MountEntry, State, ToolEntry, Workflow};
use crate::source::Span;
use crate::standing;
use crate::tools::{
    self, FILE_TOOLS, NOTE_TOOL, RUNTIME_TOOLS, UNGRANTABLE_TOOL, controls, delegation_target, path_arguments,
    unprefixed_runtime_tool, withheld,
};
use crate::workspace::Workspace;
use crate::zones::{Zone, glob_outside_skills, glob_skill, glob_within_skills, glob_zone};
use archmax_config::mounts::Mount;

use super::Findings;

mod mounts;
mod skills;

use mounts::check_mounts;
use skills::check_skills;

/// Where an entry sits.
#[derive(Clone, Copy)]
enum Place<'w> {
    AllowAlways,
    ForbidAlways,
    Allow(&'w State),
    Forbid(&'w State),
}

impl Place<'_> {
    fn is_allow(self) -> bool {
        matches!(self, Place::AllowAlways | Place::Allow(_))
    }
}

pub fn check(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    check_tools(workspace, workflow, findings);
    check_unbound_read_denials(workflow, findings);
    check_skills(workspace, workflow, findings);
    check_mounts(workspace, workflow, findings);
}

/// AMX0705: a state's `allow: []` for `what` (`skills` or `mounts`, each one a `noun`).
/// It never takes anything away, whatever the workflow grants everywhere: beside a root
/// grant that grant still applies, and without one the list is simply empty.
fn empty_allow(what: &str, noun: &str, root_grants: bool, span: Span, path: String, findings: &mut Findings<'_>) {
    let (message, help) = if root_grants {
        (
            format!("`allow: []` subtracts nothing: the workflow-wide {what} still apply here"),
            format!("to take a {noun} away in this state, list it under `{what}.forbid`"),
        )
    } else {
        (
            format!("`allow: []` subtracts nothing: a state's `allow` only adds {what}, and this one adds none"),
            format!("delete the empty list; to keep a {noun} from this state, list it under `{what}.forbid`"),
        )
    };
    findings.push(Diagnostic::at(Code::EmptyAllow, span, message).with_label("adds nothing").with_help(help), path);
}

fn entry_path(place: Place<'_>, index: usize) -> String {
    match place {
        Place::AllowAlways => format!("tools.allow_always.{index}"),
        Place::ForbidAlways => format!("tools.forbid_always.{index}"),
        Place::Allow(state) => format!("states.{}.tools.allow.{index}", state.slug.value),
        Place::Forbid(state) => format!("states.{}.tools.forbid.{index}", state.slug.value),
    }
}

fn check_tools(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    let mut places: Vec<(Place<'_>, &[ToolEntry])> = Vec::new();
    if let Some(allow) = &workflow.tools.allow_always {
        places.push((Place::AllowAlways, &allow.value));
    }
    places.push((Place::ForbidAlways, &workflow.tools.forbid_always));
    for state in &workflow.states {
        places.push((Place::Allow(state), &state.tools.allow));
        places.push((Place::Forbid(state), &state.tools.forbid));
    }
    for (place, entries) in places {
        for (index, entry) in entries.iter().enumerate() {
            let path = entry_path(place, index);
            check_tool_name(place, entry, &path, findings);
            check_entry_paths(workspace, workflow, place, entry, &path, findings);
            if place.is_allow() {
                check_grant_denied(workflow, place, entry, &path, findings);
                check_host_paths_over_links(workspace, entry, &path, findings);
            }
        }
    }
    if workflow.states.iter().any(|state| !state.is_terminal())
        && let Some((index, entry)) = workflow
            .tools
            .forbid_always
            .iter()
            .enumerate()
            .find(|(_, entry)| entry.is_bare() && entry.name() == "archmax_advance")
    {
        let moving: Vec<&str> = workflow
            .states
            .iter()
            .filter(|state| !state.is_terminal())
            .map(|state| state.slug.value.as_str())
            .collect();
        findings.push(
            Diagnostic::at(
                Code::AdvanceForbidden,
                entry.span,
                "`archmax_advance` is forbidden everywhere, but states have transitions to take",
            )
            .with_label("no state could move")
            .with_help(format!(
                "remove this entry; {} would be stuck. To stop one state moving, remove its transitions",
                list_names(&moving)
            )),
            format!("tools.forbid_always.{index}"),
        );
    }
}

fn check_tool_name(place: Place<'_>, entry: &ToolEntry, path: &str, findings: &mut Findings<'_>) {
    let name = entry.name();
    if name == UNGRANTABLE_TOOL && place.is_allow() {
        findings.push(
            Diagnostic::at(Code::UngrantableTool, entry.tool.span, "`task` cannot be granted to any state")
                .with_label("never callable")
                .with_help(
                    "judge work with a grader state (`type: grader`), and delegate with `archmax_workflow_<slug>`",
                ),
            path,
        );
        return;
    }
    if name == NOTE_TOOL {
        findings.push(
            Diagnostic::at(
                Code::ReservedPrefix,
                entry.tool.span,
                "`archmax_note` is the runtime's note channel; nothing may call it",
            )
            .with_label("reserved")
            .with_help("remove the entry: runtime notes are written by the runtime alone"),
            path,
        );
        return;
    }
    if name.starts_with("archmax_") && !RUNTIME_TOOLS.contains(&name) && delegation_target(name).is_none() {
        let diagnostic = Diagnostic::at(
            Code::ReservedPrefix,
            entry.tool.span,
            format!("`{name}` uses the `archmax_` prefix but is not a runtime tool"),
        )
        .with_label("no such runtime tool");
        let mut candidates: Vec<&str> = RUNTIME_TOOLS.to_vec();
        candidates.push("archmax_workflow_<slug>");
        let diagnostic = match did_you_mean(name, candidates.iter().copied()) {
            Some(close) => diagnostic
                .with_help(format!("did you mean `{close}`? The prefix is reserved for the runtime's own tools")),
            None => diagnostic.with_help(format!(
                "the prefix is reserved: runtime tools are {}, and `archmax_workflow_<slug>` calls a workflow",
                list_names(&RUNTIME_TOOLS)
            )),
        };
        findings.push(diagnostic, path);
        return;
    }
    if let Some(prefixed) = unprefixed_runtime_tool(name) {
        findings.push(
            Diagnostic::at(
                Code::UnprefixedControl,
                entry.tool.span,
                format!("`{name}` governs a tool that does not exist"),
            )
            .with_label("no tool has this name")
            .with_help(format!("runtime tools carry the prefix: did you mean `{prefixed}`?")),
            path,
        );
        return;
    }
    match place {
        Place::Allow(state) if withheld(state.kind, name) => {
            findings.push(
                Diagnostic::at(
                    Code::WithheldTool,
                    entry.tool.span,
                    format!("a {} state never has `{name}`", state.kind.as_str()),
                )
                .with_label("withheld from this state type")
                .with_help(format!(
                    "grader and code states never get {}; remove the entry",
                    list_names(&tools::AUTOMATED_WITHHELD)
                )),
                path,
            );
        }
        Place::Allow(state) if entry.is_bare() && controls(state.kind).contains(&name) => {
            findings.push(
                Diagnostic::at(
                    Code::InertEntry,
                    entry.tool.span,
                    format!("every {} state already has `{name}`", state.kind.as_str()),
                )
                .with_label("grants nothing")
                .with_help("remove the entry; control tools need no grant"),
                path,
            );
        }
        Place::Allow(state) if name == "archmax_get_history" => {
            findings.push(
                Diagnostic::at(
                    Code::InertEntry,
                    entry.tool.span,
                    format!(
                        "`archmax_get_history` is offered only to grader and code states, not to this {} state",
                        state.kind.as_str()
                    ),
                )
                .with_label("grants nothing")
                .with_help("remove the entry; an agent reads the session through its own transcript"),
                path,
            );
        }
        Place::AllowAlways
            if entry.is_bare() && (tools::AGENT_CONTROLS.contains(&name) || name == "archmax_get_history") =>
        {
            findings.push(
                Diagnostic::at(
                    Code::InertEntry,
                    entry.tool.span,
                    format!("`{name}` is a control tool: state types that have it need no grant"),
                )
                .with_label("grants nothing")
                .with_help("remove the entry from `allow_always`"),
                path,
            );
        }
        Place::Forbid(state) if withheld(state.kind, name) => {
            findings.push(
                Diagnostic::at(
                    Code::InertEntry,
                    entry.tool.span,
                    format!("a {} state never has `{name}`, so forbidding it changes nothing", state.kind.as_str()),
                )
                .with_label("denies nothing")
                .with_help("remove the entry"),
                path,
            );
        }
        Place::Forbid(state) if name == "archmax_advance" && state.is_terminal() => {
            findings.push(
                Diagnostic::at(
                    Code::InertEntry,
                    entry.tool.span,
                    format!("`{}` is terminal, so it never has `archmax_advance`", state.slug.value),
                )
                .with_label("denies nothing")
                .with_help("remove the entry"),
                path,
            );
        }
        _ => {}
    }
    if let Place::Allow(state) = place
        && name == "archmax_advance"
    {
        check_advance_guards(state, entry, path, findings);
    }
}

/// Each literal `to` guard of an `archmax_advance` grant names a transition the state has.
fn check_advance_guards(state: &State, entry: &ToolEntry, path: &str, findings: &mut Findings<'_>) {
    for guard in entry.args.iter().filter(|guard| guard.argument.value == "to") {
        for glob in &guard.globs {
            let Some(literal) = glob.template.as_literal() else {
                continue;
            };
            if literal.contains(['*', '?', '[', '{']) {
                continue;
            }
            if !state.transitions.iter().any(|transition| transition.to.value == literal) {
                findings.push(
                    Diagnostic::at(
                        Code::AdvanceGuardNoEdge,
                        glob.text.span,
                        format!(
                            "`{}` has no transition to `{literal}`, so this guard can never let the advance through",
                            state.slug.value
                        ),
                    )
                    .with_label("no such edge")
                    .with_help("guard only targets the state has transitions to, or add the transition"),
                    path,
                );
            }
        }
    }
}

/// The globs of an entry that apply to path arguments, with the access each argument has.
fn path_globs(entry: &ToolEntry) -> Vec<(&Glob, Vec<tools::PathAccess>)> {
    let declared = path_arguments(entry.name());
    let mut out = Vec::new();
    if let Some(paths) = &entry.paths {
        let accesses: Vec<tools::PathAccess> = declared.iter().map(|(_, access)| *access).collect();
        for glob in paths {
            out.push((glob, accesses.clone()));
        }
    }
    for guard in &entry.args {
        let argument = guard.argument.value.as_str();
        let access = declared
            .iter()
            .find(|(name, _)| {
                *name == argument
                    || (*name == "file_path" && argument == "path")
                    || (*name == "path" && argument == "file_path")
            })
            .map(|(_, access)| *access);
        if let Some(access) = access {
            for glob in &guard.globs {
                out.push((glob, vec![access]));
            }
        }
    }
    out
}

fn check_entry_paths(
    workspace: &Workspace,
    workflow: &Workflow,
    place: Place<'_>,
    entry: &ToolEntry,
    path: &str,
    findings: &mut Findings<'_>,
) {
    let mounts = &workspace.mounts;
    let globs = path_globs(entry);
    if globs.is_empty() {
        return;
    }
    let name = entry.name();
    let mut zones = Vec::with_capacity(globs.len());
    for (glob, accesses) in &globs {
        let text = glob.text.value.as_str();
        let zone = match glob_zone(text, mounts) {
            Ok(zone) => zone,
            Err(_) => {
                findings.push(
                    Diagnostic::at(
                        Code::InvalidValue,
                        glob.text.span,
                        format!("the glob `{text}` climbs above the workspace root"),
                    )
                    .with_label("escapes the workspace")
                    .with_help("write globs relative to the workspace root, without `..`"),
                    path,
                );
                zones.push(None);
                continue;
            }
        };
        zones.push(zone);
        if zone == Some(Zone::GovernancePlane) {
            findings.push(
                Diagnostic::at(
                    Code::GovernancePlane,
                    glob.text.span,
                    format!("`{text}` reaches into `workflows/`, which no session can read or write"),
                )
                .with_label("authoring plane")
                .with_help(
                    "workflow files are not part of the agent's workspace; name a session path such as `reports/**`",
                ),
                path,
            );
            continue;
        }
        if !place.is_allow() {
            continue;
        }
        let writes = accesses.iter().any(|access| access.writes());
        match zone {
            Some(Zone::RuntimeInternal | Zone::Offload) if writes => findings.push(
                Diagnostic::at(
                    Code::RuntimeZone,
                    glob.text.span,
                    format!(
                        "`{name}` would write into {}, which the runtime refuses in every state",
                        zone.map(|zone| zone.describe(mounts)).unwrap_or_default()
                    ),
                )
                .with_label("never writable")
                .with_help("write results under `scratchpad/`, or under a session path such as `reports/`"),
                path,
            ),
            Some(Zone::Mount(mount)) if writes && mounts.mounts[mount].read_only => findings.push(
                Diagnostic::at(
                    Code::ReadOnlyZone,
                    glob.text.span,
                    format!(
                        "`{name}` would write into `{}`, which the host serves read-only",
                        mounts.mounts[mount].key
                    ),
                )
                .with_label("read-only mount")
                .with_help("write under `scratchpad/`, or ask the host to mount it writable (`read_only = false`)"),
                path,
            ),
            _ => {}
        }
        if name == "archmax_run" {
            if glob_outside_skills(text) {
                findings.push(
                    Diagnostic::at(
                        Code::ScriptOutsideSkills,
                        glob.text.span,
                        format!(
                            "`archmax_run` runs only scripts inside skill bundles, and `{text}` is outside `skills/`"
                        ),
                    )
                    .with_label("never runnable")
                    .with_help("point the entry at a bundle's scripts, such as `skills/<slug>/scripts/**`"),
                    path,
                );
            } else if !glob_within_skills(text) {
                findings.push(
                    Diagnostic::at(
                        Code::InertEntry,
                        glob.text.span,
                        format!(
                            "`{text}` reaches beyond `skills/`, but `archmax_run` only ever runs skill-bundle scripts"
                        ),
                    )
                    .with_label("wider than anything that can run")
                    .with_help("confine the entry to a bundle's scripts, such as `skills/<slug>/scripts/**`"),
                    path,
                );
            }
        }
        if let Some(slug) = glob_skill(text) {
            check_skill_path(workspace, workflow, place, slug, glob.text.span, path, findings);
        } else if let Some(Zone::Mount(mount)) = zone {
            check_mount_path(workflow, place, &mounts.mounts[mount], glob, path, findings);
        }
    }
    let default_file_tool = FILE_TOOLS.contains(&name);
    if place.is_allow()
        && default_file_tool
        && !zones.is_empty()
        && zones.iter().all(|zone| *zone == Some(Zone::Scratchpad))
    {
        findings.push(
            Diagnostic::at(
                Code::ScratchpadNarrowing,
                entry.span,
                format!("this `{name}` entry only names paths in `scratchpad/`, which is open to `{name}` in every state anyway"),
            )
            .with_label("narrows nothing")
            .with_help("to govern where a result lands, name a path outside the reserved areas, such as `reports/*.json`"),
            path,
        );
    }
}

/// Whether `name` is a host tool's: neither built in, nor a runtime tool, nor a
/// sub-workflow call.
fn is_host_tool(name: &str) -> bool {
    name != "*"
        && !tools::DEFAULT_TOOLS.contains(&name)
        && !RUNTIME_TOOLS.contains(&name)
        && delegation_target(name).is_none()
        && !matches!(name, "task" | "eval")
}

/// Refuses (AMX0713) a host tool's grant whose path globs (`paths:` or any argument's
/// guard: the compiler cannot know which of a host tool's arguments are paths) lie in a
/// mount whose source holds a symbolic link. The runtime refuses every host-tool path
/// through such a link (`zone.link`), so the grant means less than it says; and the link
/// gives a denied file a second name that only the link refusal stands between.
fn check_host_paths_over_links(workspace: &Workspace, entry: &ToolEntry, path: &str, findings: &mut Findings<'_>) {
    let name = entry.name();
    if workspace.mount_links.is_empty() || !is_host_tool(name) {
        return;
    }
    let mounts = &workspace.mounts;
    let globs = entry.paths.iter().flatten().chain(entry.args.iter().flat_map(|guard| guard.globs.iter()));
    let mut reported: Vec<&str> = Vec::new();
    for glob in globs {
        let Ok(Some(Zone::Mount(index))) = glob_zone(glob.text.value.as_str(), mounts) else { continue };
        let Some(mount) = mounts.mounts.get(index) else { continue };
        let Some(link) = workspace.mount_links.iter().find(|link| link.mount == mount.key) else { continue };
        if reported.contains(&mount.key.as_str()) {
            continue;
        }
        reported.push(&mount.key);
        findings.push(
            Diagnostic::at(
                Code::HostPathsOverLink,
                glob.text.span,
                format!(
                    "`{name}` is granted paths in the mount `{}`, whose source holds the symbolic link `{}` (AMX0015)",
                    mount.key, link.path
                ),
            )
            .with_label("a host tool's path through the link is refused")
            .with_help("replace the link with the file or folder itself (a copy), or remove it; a host tool must never be handed a path through a link in a mount it may reach"),
            path,
        );
    }
}

fn place_name(place: Place<'_>) -> String {
    match place {
        Place::Allow(state) | Place::Forbid(state) => format!("the state `{}`", state.slug.value),
        _ => "no state".to_string(),
    }
}

/// A path entry inside a mount the state cannot reach (or, for a workflow-wide entry, no
/// state can reach) is dead: the kernel refuses every call it would allow.
fn check_mount_path(
    workflow: &Workflow,
    place: Place<'_>,
    mount: &Mount,
    glob: &Glob,
    path: &str,
    findings: &mut Findings<'_>,
) {
    let reach = |state: &State| standing::mount_reach(workflow, state, mount);
    let reachable = |state: &State| matches!(reach(state), MountReach::Reachable { .. });
    let (reachable, forbidden, where_) = match place {
        Place::Allow(state) => (reachable(state), reach(state) == MountReach::Forbidden, place_name(place)),
        _ => (
            workflow.states.iter().any(reachable),
            !workflow.states.is_empty() && workflow.states.iter().all(|state| reach(state) == MountReach::Forbidden),
            "every state".to_string(),
        ),
    };
    let text = glob.text.value.as_str();
    if reachable {
        return;
    }
    let diagnostic = if forbidden {
        Diagnostic::at(
            Code::MountPathNotEnabled,
            glob.text.span,
            format!("`{text}` lies in the mount `{}`, which a `mounts` forbid takes away from {where_}", mount.name),
        )
        .with_label("forbidden here")
        .with_help(format!("remove the entry, or take `{}` off the forbid list", mount.name))
    } else if mount.governed {
        Diagnostic::at(
            Code::MountPathNotEnabled,
            glob.text.span,
            format!("`{text}` lies in the governed mount `{}`, which {} does not have", mount.name, place_name(place)),
        )
        .with_label("unreachable here")
        .with_help(format!("grant the mount with `mounts: {{ allow: [{}] }}`, or remove the entry", mount.name))
    } else {
        return;
    };
    findings.push(diagnostic, path);
}

fn check_skill_path(
    workspace: &Workspace,
    workflow: &Workflow,
    place: Place<'_>,
    slug: &str,
    span: Span,
    path: &str,
    findings: &mut Findings<'_>,
) {
    let (enabled, where_) = match place {
        Place::Allow(state) => (
            standing::skill_reach(workspace, workflow, state, slug) == Reach::Enabled,
            format!("the state `{}` does not enable", state.slug.value),
        ),
        _ => (
            workflow
                .states
                .iter()
                .any(|state| standing::skill_reach(workspace, workflow, state, slug) == Reach::Enabled),
            "no state enables".to_string(),
        ),
    };
    if !enabled {
        let help = match place {
            Place::Allow(_) => format!(
                "enable the bundle with `skills: {{ allow: [{slug}] }}` on the state; an allow entry narrows inside enabled bundles, it never opens one"
            ),
            _ => format!("enable the bundle with `skills.allow_always: [{slug}]` or on the states that need it"),
        };
        findings.push(
            Diagnostic::at(
                Code::SkillPathNotEnabled,
                span,
                format!("this entry reaches into the skill bundle `{slug}`, which {where_}"),
            )
            .with_label("bundle not enabled")
            .with_help(help),
            path,
        );
    }
}

fn check_grant_denied(
    workflow: &Workflow,
    place: Place<'_>,
    entry: &ToolEntry,
    path: &str,
    findings: &mut Findings<'_>,
) {
    let name = entry.name();
    let bare_denial = |entries: &[ToolEntry]| {
        entries
            .iter()
            .find(|denial| denial.is_bare() && (denial.name() == name || denial.name() == "*"))
            .map(|denial| denial.span)
    };
    let denial =
        bare_denial(&workflow.tools.forbid_always).map(|span| (span, "`tools.forbid_always`")).or(match place {
            Place::Allow(state) => bare_denial(&state.tools.forbid).map(|span| (span, "the state's `tools.forbid`")),
            _ => None,
        });
    if let Some((span, list)) = denial {
        findings.push(
            Diagnostic::at(
                Code::GrantDenied,
                entry.tool.span,
                format!("`{name}` is granted here but denied outright by {list}"),
            )
            .with_label("can never take effect")
            .with_secondary(span, "denied here")
            .with_help("a denial beats every grant: remove one of the two, or narrow the denial with `paths:`"),
            path,
        );
    }
}

/// A denial of reading: `read_file` or every tool, with its path globs as written.
fn read_denial_globs(entry: &ToolEntry) -> Option<Vec<&str>> {
    matches!(entry.name(), "read_file" | "*")
        .then(|| entry.paths.iter().flatten().map(|glob| glob.text.value.as_str()).collect())
}

/// A state's own denial of reading binds that state only: a sub-workflow it calls runs
/// under its own grants and the caller's workflow-wide denials, so it may read (and tell)
/// what the state may not. The kernel refuses to pass such a file across; the child
/// reading it for itself is the gap this warns of.
fn check_unbound_read_denials(workflow: &Workflow, findings: &mut Findings<'_>) {
    let bound_everywhere: Vec<Vec<&str>> = workflow.tools.forbid_always.iter().filter_map(read_denial_globs).collect();
    let delegates = |entries: &[ToolEntry]| {
        entries.iter().find(|entry| delegation_target(entry.name()).is_some()).map(|entry| entry.name().to_string())
    };
    for state in &workflow.states {
        let calls = delegates(&state.tools.allow)
            .or_else(|| workflow.tools.allow_always.as_ref().and_then(|allow| delegates(&allow.value)));
        let Some(tool) = calls else {
            continue;
        };
        for (index, entry) in state.tools.forbid.iter().enumerate() {
            let Some(globs) = read_denial_globs(entry) else {
                continue;
            };
            let covered = bound_everywhere.iter().any(|always| always.is_empty() || *always == globs);
            if covered {
                continue;
            }
            findings.push(
                Diagnostic::at(
                    Code::ReadDenialUnbound,
                    entry.span,
                    format!(
                        "state '{}' denies reading here, but `{tool}` runs a sub-workflow this denial does not bind",
                        state.slug.value
                    ),
                )
                .with_label("binds this state only")
                .with_help(
                    "a child reads under its own grants and the callers' `tools.forbid_always`: move this entry to `tools.forbid_always` to bind every workflow this one calls, or drop the delegation from this state",
                ),
                format!("states.{}.tools.forbid.{index}", state.slug.value),
            );
        }
    }
}
