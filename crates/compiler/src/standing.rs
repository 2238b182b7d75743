//! Each state's standing with skill bundles and mounts, computed in one place.
//!
//! The one thing to know: validation (`check::governance`), lowering (`lower::surface`,
//! the prompt's skills and mounts sections) and therefore the kernel all read a state's
//! standing from these functions, so what the validator warns about is exactly what the
//! runtime will refuse.
//!
//! - A skill is enabled by `state.skills.allow ∪ skills.allow_always` (the state's own
//!   grants first), minus `skills.forbid_always` and the state's `skills.forbid`, and only
//!   when the workspace serves the bundle.
//! - A mount is forbidden by `mounts.forbid_always` or the state's `mounts.forbid`; an
//!   ungoverned mount is otherwise reachable everywhere; a governed one only where a grant
//!   names it. A reachable mount is writable only when the host serves it writable and, for
//!   a governed mount, some grant of the workflow asks `read_write` and no grant that
//!   applies in the state says `read`.

use crate::program::{MountReach, Reach};
use crate::schema::ast::{Access, MountEntry, State, Workflow};
use crate::workspace::Workspace;
use archmax_config::mounts::Mount;

fn skill_forbidden(workflow: &Workflow, state: &State, slug: &str) -> bool {
    state.skills.forbid.iter().any(|denied| denied.value == slug)
        || workflow.skills.iter().flat_map(|root| root.forbid_always.iter()).any(|denied| denied.value == slug)
}

/// The skills a state enables, in prompt order: its own grants first, then the
/// workflow-wide ones, minus every forbid, keeping only bundles the workspace serves.
pub fn enabled_skills<'w>(workspace: &Workspace, workflow: &'w Workflow, state: &'w State) -> Vec<&'w str> {
    let mut enabled: Vec<&str> = Vec::new();
    let granted = state.skills.allowed().iter().chain(workflow.skills.iter().flat_map(|root| root.allow_always.iter()));
    for slug in granted {
        if !skill_forbidden(workflow, state, &slug.value)
            && !enabled.contains(&slug.value.as_str())
            && workspace.skill(&slug.value).is_some()
        {
            enabled.push(&slug.value);
        }
    }
    enabled
}

/// A state's standing with one skill slug (served or not).
pub fn skill_reach(workspace: &Workspace, workflow: &Workflow, state: &State, slug: &str) -> Reach {
    if skill_forbidden(workflow, state, slug) {
        Reach::Forbidden
    } else if enabled_skills(workspace, workflow, state).contains(&slug) {
        Reach::Enabled
    } else {
        Reach::NotAllowed
    }
}

fn root_grants(workflow: &Workflow) -> impl Iterator<Item = &MountEntry> {
    workflow.mounts.iter().flat_map(|root| root.allow_always.iter())
}

fn asks(entry: &MountEntry, wanted: Access) -> bool {
    entry.access.as_ref().is_some_and(|access| access.value == wanted)
}

/// True when some grant of the workflow, at the root or on any state, asks `read_write`
/// of the mount.
fn workflow_asks_write(workflow: &Workflow, name: &str) -> bool {
    root_grants(workflow)
        .chain(workflow.states.iter().flat_map(|other| other.mounts.allowed().iter()))
        .any(|grant| grant.name.value == name && asks(grant, Access::ReadWrite))
}

/// A state's standing with one of the host's mounts.
pub fn mount_reach(workflow: &Workflow, state: &State, mount: &Mount) -> MountReach {
    let name = mount.name.as_str();
    let forbidden = state.mounts.forbid.iter().any(|denied| denied.value == name)
        || workflow.mounts.iter().flat_map(|root| root.forbid_always.iter()).any(|denied| denied.value == name);
    if forbidden {
        return MountReach::Forbidden;
    }
    if !mount.governed {
        return MountReach::Reachable { writable: !mount.read_only };
    }
    let mut applicable =
        root_grants(workflow).chain(state.mounts.allowed().iter()).filter(|grant| grant.name.value == name).peekable();
    if applicable.peek().is_none() {
        return MountReach::NotAllowed;
    }
    let narrowed = applicable.any(|grant| asks(grant, Access::Read));
    MountReach::Reachable { writable: !mount.read_only && !narrowed && workflow_asks_write(workflow, name) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Analysis, analyze_workspace};
    use crate::workspace::load_memory;

    fn analysis(workflow: &str, toml: &str) -> Analysis {
        let mut files = vec![
            ("workflows/orders/workflow.yaml", workflow.to_string()),
            ("skills/order-data/SKILL.md", "---\nname: order-data\ndescription: Orders.\n---\nRead me.\n".to_string()),
            ("reference/policies.md", "# Policies\n".to_string()),
        ];
        if !toml.is_empty() {
            files.push(("archmax.toml", toml.to_string()));
        }
        analyze_workspace(load_memory(files).expect("the test workspace loads"))
    }

    fn workflow(analysis: &Analysis) -> &Workflow {
        analysis.units.iter().find_map(|unit| unit.workflow.as_ref()).expect("the test workflow parses")
    }

    const WORKFLOW: &str = r#"instructions: Be brief.
skills:
  allow_always: [order-data, ghost]
states:
  work:
    triggers:
      manual:
    instructions: Work.
    mounts: { forbid: [reference] }
    skills: { forbid: [order-data] }
  read:
    instructions: Read.
"#;

    #[test]
    fn a_bundle_the_workspace_does_not_serve_is_never_enabled() {
        let analysis = analysis(WORKFLOW, "");
        let (workspace, workflow) = (&analysis.workspace, workflow(&analysis));
        let read = &workflow.states[1];
        assert_eq!(enabled_skills(workspace, workflow, read), vec!["order-data"]);
        assert_eq!(skill_reach(workspace, workflow, read, "ghost"), Reach::NotAllowed);
        assert_eq!(skill_reach(workspace, workflow, &workflow.states[0], "order-data"), Reach::Forbidden);
    }

    #[test]
    fn a_forbid_takes_an_ungoverned_mount_away() {
        let analysis = analysis(WORKFLOW, "[mounts.\"reference/\"]\nread_only = false\n");
        let workflow = workflow(&analysis);
        let mount = analysis.workspace.mounts.by_name("reference").expect("the test table mounts reference");
        assert_eq!(mount_reach(workflow, &workflow.states[0], mount), MountReach::Forbidden);
        assert_eq!(mount_reach(workflow, &workflow.states[1], mount), MountReach::Reachable { writable: true });
    }
}
