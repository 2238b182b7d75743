//! Tool surfaces and guard tables, and each state's standing with skills and mounts.
//!
//! The surface is what the model is shown, in order: the workflow-wide grant (the
//! declared `allow_always`, or the twelve default tools), then tools only the state's
//! `allow` names, then the state type's controls (`archmax_advance` only where there is
//! somewhere to go); withheld tools, `task`, and tools a bare forbid denies by name are
//! left out. The guard table is what the kernel decides with: for each granted tool the
//! entries of the one tier that decides it (a state entry naming a granted tool narrows
//! it), and the state's forbid list.

use std::collections::HashMap;

use crate::glob::Glob;
use crate::program::{
    Callee, Grant, GrantTier, GuardTable, MountReach, Reach, Rule, Surface, SurfaceId, SurfaceTool, Sym, ToolKind,
};
use crate::schema::ast::{State, ToolEntry, Workflow};
use crate::standing;
use crate::tools::{DEFAULT_TOOLS, RUNTIME_TOOLS, UNGRANTABLE_TOOL, controls, path_arguments, withheld};
use crate::workspace::Workspace;

use super::Interner;

/// Deduplicated surfaces of one workflow.
#[derive(Default)]
pub struct Surfaces {
    surfaces: Vec<Surface>,
    index: HashMap<Surface, SurfaceId>,
}

impl Surfaces {
    fn add(&mut self, surface: Surface) -> SurfaceId {
        if let Some(id) = self.index.get(&surface) {
            return *id;
        }
        let id = SurfaceId(self.surfaces.len() as u32);
        self.surfaces.push(surface.clone());
        self.index.insert(surface, id);
        id
    }

    pub fn into_vec(self) -> Vec<Surface> {
        self.surfaces
    }
}

/// Compiles one tools entry.
pub fn rule(workspace: &Workspace, entry: &ToolEntry, interner: &mut Interner) -> Rule {
    let compile = |globs: &[crate::schema::ast::Glob]| -> Vec<Glob> {
        globs.iter().filter_map(|glob| Glob::compile(&glob.template).ok()).collect()
    };
    let source = workspace.sources.file(entry.span.file).slice(entry.span);
    let display = if source.is_empty() {
        entry.name().to_string()
    } else {
        source.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    Rule {
        tool: (entry.name() != "*").then(|| interner.intern(entry.name())),
        args: entry.args.iter().map(|guard| (interner.intern(&guard.argument.value), compile(&guard.globs))).collect(),
        paths: entry.paths.as_ref().map(|paths| compile(paths)),
        display: interner.intern(&display),
    }
}

fn denied_by_name(entries: &[ToolEntry], tool: &str) -> bool {
    entries.iter().any(|entry| entry.is_bare() && (entry.name() == tool || entry.name() == "*"))
}

fn tool_kind(name: &str, callees: &[Callee], interner: &mut Interner) -> ToolKind {
    if RUNTIME_TOOLS.contains(&name) && !matches!(name, "archmax_eval" | "archmax_run") {
        return ToolKind::Control;
    }
    if DEFAULT_TOOLS.contains(&name) {
        return ToolKind::Builtin;
    }
    let sym = interner.intern(name);
    match callees.iter().position(|callee| callee.tool == sym) {
        Some(index) => ToolKind::Delegation(index as u32),
        None => ToolKind::Host,
    }
}

/// The surface and guard table of one state.
pub fn lower_state(
    workspace: &Workspace,
    workflow: &Workflow,
    state: &State,
    callees: &[Callee],
    surfaces: &mut Surfaces,
    interner: &mut Interner,
) -> (SurfaceId, GuardTable) {
    // Granted tools in disclosure order, each with the tier that decides it.
    let mut order: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        if !order.iter().any(|seen| seen == name) {
            order.push(name.to_string());
        }
    };
    match &workflow.tools.allow_always {
        Some(allow) => allow.value.iter().for_each(|entry| push(entry.name())),
        None => DEFAULT_TOOLS.iter().for_each(|tool| push(tool)),
    }
    state.tools.allow.iter().for_each(|entry| push(entry.name()));
    let state_controls: Vec<&str> = controls(state.kind)
        .iter()
        .copied()
        .filter(|tool| *tool != "archmax_advance" || !state.is_terminal())
        .collect();
    let forbid_always = &workflow.tools.forbid_always;
    let mut grants = Vec::new();
    let mut tools = Vec::new();
    for name in &order {
        if name == "*"
            || name == UNGRANTABLE_TOOL
            || withheld(state.kind, name)
            || state_controls.contains(&name.as_str())
            || RUNTIME_TOOLS.contains(&name.as_str()) && !matches!(name.as_str(), "archmax_eval" | "archmax_run")
        {
            continue;
        }
        let own: Vec<&ToolEntry> = state.tools.allow.iter().filter(|entry| entry.name() == name).collect();
        let (tier, entries): (GrantTier, Vec<&ToolEntry>) = if !own.is_empty() {
            (GrantTier::State, own)
        } else if let Some(allow) = &workflow.tools.allow_always {
            (GrantTier::Workflow, allow.value.iter().filter(|entry| entry.name() == name).collect())
        } else {
            (GrantTier::Default, Vec::new())
        };
        let bare = entries.is_empty() || entries.iter().any(|entry| entry.is_bare());
        let connection = entries
            .iter()
            .find_map(|entry| entry.connection.as_ref())
            .map(|connection| interner.intern(&connection.value));
        let sym = interner.intern(name);
        grants.push(Grant {
            tool: sym,
            tier,
            connection,
            entries: if bare {
                Vec::new()
            } else {
                entries.iter().map(|entry| rule(workspace, entry, interner)).collect()
            },
        });
        if denied_by_name(forbid_always, name) || denied_by_name(&state.tools.forbid, name) {
            continue;
        }
        let kind = tool_kind(name, callees, interner);
        let paths =
            path_arguments(name).iter().map(|(argument, access)| (interner.intern(argument), *access)).collect();
        tools.push(SurfaceTool { name: sym, kind, paths });
    }
    for control in &state_controls {
        if denied_by_name(forbid_always, control) || denied_by_name(&state.tools.forbid, control) {
            continue;
        }
        tools.push(SurfaceTool { name: interner.intern(control), kind: ToolKind::Control, paths: Vec::new() });
    }
    let guards = GuardTable {
        forbid: state.tools.forbid.iter().map(|entry| rule(workspace, entry, interner)).collect(),
        controls: state_controls.iter().map(|control| interner.intern(control)).collect(),
        grants,
    };
    (surfaces.add(Surface { tools }), guards)
}

/// Every registry skill's standing in a state, and the enabled ones in prompt order.
pub fn skill_access(
    workspace: &Workspace,
    workflow: &Workflow,
    state: &State,
    interner: &mut Interner,
) -> (Vec<(Sym, Reach)>, Vec<Sym>) {
    let access = workspace
        .skills
        .iter()
        .map(|skill| (interner.intern(&skill.slug), standing::skill_reach(workspace, workflow, state, &skill.slug)))
        .collect();
    let enabled = standing::enabled_skills(workspace, workflow, state);
    (access, enabled.iter().map(|slug| interner.intern(slug)).collect())
}

/// Every mount's standing in a state (see [`standing::mount_reach`]).
pub fn mount_access(
    workspace: &Workspace,
    workflow: &Workflow,
    state: &State,
    interner: &mut Interner,
) -> Vec<(Sym, MountReach)> {
    workspace
        .mounts
        .mounts
        .iter()
        .map(|mount| (interner.intern(&mount.name), standing::mount_reach(workflow, state, mount)))
        .collect()
}
