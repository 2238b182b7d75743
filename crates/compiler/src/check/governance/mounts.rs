//! Mount entries: every name a workflow or state grants or forbids is in the mount
//! table, and every grant can widen what a state sees.

use archmax_config::mounts::{Mount, MountTable};

use super::*;

/// Every mount entry of the workflow and its states: known names, grants that widen
/// something, denials nothing grants around.
pub(super) fn check_mounts(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    let table = &workspace.mounts;
    let names = table.names();
    let root_allow: Vec<&MountEntry> = workflow.mounts.iter().flat_map(|root| root.allow_always.iter()).collect();
    if let Some(root) = &workflow.mounts {
        for (index, entry) in root.allow_always.iter().enumerate() {
            granted_mount(table, &names, entry, format!("mounts.allow_always.{index}"), findings);
        }
        for (index, name) in root.forbid_always.iter().enumerate() {
            if known_mount(table, &names, name, format!("mounts.forbid_always.{index}"), findings).is_none() {
                continue;
            }
            let granted = root_allow.iter().any(|entry| entry.name.value == name.value)
                || workflow
                    .states
                    .iter()
                    .any(|state| state.mounts.allowed().iter().any(|entry| entry.name.value == name.value));
            if granted {
                findings.push(
                    Diagnostic::at(
                        Code::ForbidAlwaysGranted,
                        name.span,
                        format!("`{}` is forbidden everywhere, yet an allow list grants it", name.value),
                    )
                    .with_label("the denial wins")
                    .with_help("remove the grant, or the denial if the mount should be reachable"),
                    format!("mounts.forbid_always.{index}"),
                );
            }
        }
    } else {
        let governed: Vec<&str> = table.governed().map(|mount| mount.name.as_str()).collect();
        if !governed.is_empty() {
            findings.push(
                Diagnostic::at(
                    Code::MissingMountsBlock,
                    Span::file_start(workflow.file),
                    format!(
                        "the host governs {} but this workflow has no root `mounts` block, so no state reaches them",
                        list_names(&governed)
                    ),
                )
                .with_help("grant what every state needs with `mounts: { allow_always: [...] }`, or write `mounts: { allow_always: [] }` to mean none"),
                "mounts",
            );
        }
    }
    for state in &workflow.states {
        let base = format!("states.{}.mounts", state.slug.value);
        if let Some(allow) = &state.mounts.allow {
            if allow.value.is_empty() {
                super::empty_allow(
                    "mounts",
                    "mount",
                    !root_allow.is_empty(),
                    allow.span,
                    format!("{base}.allow"),
                    findings,
                );
            }
            for (index, entry) in allow.value.iter().enumerate() {
                if granted_mount(table, &names, entry, format!("{base}.allow.{index}"), findings).is_none() {
                    continue;
                }
                if let Some(root_entry) = root_allow.iter().find(|root_entry| root_entry.name.value == entry.name.value)
                {
                    let root_access = root_entry.access.as_ref().map(|access| access.value);
                    let state_access = entry.access.as_ref().map(|access| access.value);
                    let narrows = state_access == Some(Access::Read) && root_access != Some(Access::Read);
                    let widens = state_access == Some(Access::ReadWrite) && root_access.is_none();
                    if !narrows && !widens {
                        findings.push(
                            Diagnostic::at(
                                Code::RedundantGrant,
                                entry.name.span,
                                format!(
                                    "`{}` is already granted in every state by `mounts.allow_always`",
                                    entry.name.value
                                ),
                            )
                            .with_label("already granted")
                            .with_help("remove it from the state's list, unless it changes the access"),
                            format!("{base}.allow.{index}"),
                        );
                    }
                }
                if let Some(denied) = state.mounts.forbid.iter().find(|denied| denied.value == entry.name.value) {
                    findings.push(
                        Diagnostic::at(
                            Code::AllowAndForbid,
                            entry.name.span,
                            format!("`{}` both allows and forbids `{}`", state.slug.value, entry.name.value),
                        )
                        .with_label("allowed")
                        .with_secondary(denied.span, "forbidden")
                        .with_help("the denial wins; keep one of the two"),
                        format!("{base}.allow.{index}"),
                    );
                }
            }
        }
        for (index, name) in state.mounts.forbid.iter().enumerate() {
            let Some(mount) = known_mount(table, &names, name, format!("{base}.forbid.{index}"), findings) else {
                continue;
            };
            if !mount.governed {
                continue;
            }
            let granted = root_allow.iter().any(|entry| entry.name.value == name.value)
                || state.mounts.allowed().iter().any(|entry| entry.name.value == name.value);
            if !granted {
                findings.push(
                    Diagnostic::at(
                        Code::ForbidNothing,
                        name.span,
                        format!(
                            "the governed mount `{}` is not granted in `{}`, so forbidding it changes nothing",
                            name.value, state.slug.value
                        ),
                    )
                    .with_label("denies nothing")
                    .with_help("a governed mount is reachable only where a list grants it; remove the entry"),
                    format!("{base}.forbid.{index}"),
                );
            }
        }
    }
}

/// The mount `name` names in the table, or an `UnknownMount` finding (with the closest
/// name, or the names there are) and `None`.
fn known_mount(
    table: &MountTable,
    names: &[&str],
    name: &crate::source::Spanned<String>,
    path: String,
    findings: &mut Findings<'_>,
) -> Option<Mount> {
    if let Some(mount) = table.by_name(&name.value) {
        return Some(mount.clone());
    }
    let diagnostic =
        Diagnostic::at(Code::UnknownMount, name.span, format!("the host mounts nothing named `{}`", name.value))
            .with_label("unknown mount");
    let diagnostic = match did_you_mean(&name.value, names.iter().copied()) {
        Some(close) => diagnostic.with_help(format!("did you mean `{close}`?")),
        None => diagnostic.with_help(format!(
            "the host's table mounts {}; naming a folder does not create it: declare it in archmax.toml",
            list_names(names)
        )),
    };
    findings.push(diagnostic, path);
    None
}

/// The mount a grant names, with findings for a grant that widens nothing: an ungoverned
/// mount, or `read_write` on a read-only one.
fn granted_mount(
    table: &MountTable,
    names: &[&str],
    entry: &MountEntry,
    path: String,
    findings: &mut Findings<'_>,
) -> Option<Mount> {
    let mount = known_mount(table, names, &entry.name, path.clone(), findings)?;
    if !mount.governed {
        findings.push(
            Diagnostic::at(
                Code::UngovernedMountGrant,
                entry.name.span,
                format!("`{}` is not governed, so every state sees it already", entry.name.value),
            )
            .with_label("grants nothing")
            .with_help("remove the grant; to take the mount away from a state, list it under `mounts.forbid`"),
            path.clone(),
        );
    }
    if mount.read_only
        && let Some(access) = &entry.access
        && access.value == Access::ReadWrite
    {
        findings.push(
            Diagnostic::at(
                Code::ReadWriteOnReadOnly,
                access.span,
                format!("the host serves `{}` read-only, so `read_write` opens nothing", entry.name.value),
            )
            .with_label("cannot widen the host's posture")
            .with_help(
                "ask the host to mount it writable (`read_only = false` in archmax.toml), or grant it as a bare name",
            ),
            path,
        );
    }
    Some(mount)
}
