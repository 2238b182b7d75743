//! Skill entries: every skill a workflow or state grants or forbids is registered, and a
//! grant is not cancelled by a bare forbid.

use super::*;

/// Every skill entry of the workflow and its states.
pub(super) fn check_skills(workspace: &Workspace, workflow: &Workflow, findings: &mut Findings<'_>) {
    let known = workspace.skill_slugs();
    let check_known = |slug: &crate::source::Spanned<String>, path: String, findings: &mut Findings<'_>| {
        if workspace.skill(&slug.value).is_some() {
            return true;
        }
        let diagnostic = Diagnostic::at(
            Code::UnknownSkill,
            slug.span,
            format!("the workspace serves no skill bundle `{}`", slug.value),
        )
        .with_label("unknown bundle");
        let diagnostic = match did_you_mean(&slug.value, known.iter().copied()) {
            Some(close) => {
                diagnostic.with_help(format!("did you mean `{close}`? Bundles are the directories under `skills/`"))
            }
            None if known.is_empty() => diagnostic.with_help("the workspace has no `skills/<slug>/SKILL.md` bundles"),
            None => diagnostic.with_help(format!("the workspace serves {}", list_names(&known))),
        };
        findings.push(diagnostic, path);
        false
    };
    let root_allow: Vec<&crate::source::Spanned<String>> =
        workflow.skills.iter().flat_map(|root| root.allow_always.iter()).collect();
    if let Some(root) = &workflow.skills {
        for (index, slug) in root.allow_always.iter().enumerate() {
            check_known(slug, format!("skills.allow_always.{index}"), findings);
        }
        for (index, slug) in root.forbid_always.iter().enumerate() {
            if !check_known(slug, format!("skills.forbid_always.{index}"), findings) {
                continue;
            }
            let granted = root_allow.iter().any(|granted| granted.value == slug.value)
                || workflow
                    .states
                    .iter()
                    .any(|state| state.skills.allowed().iter().any(|granted| granted.value == slug.value));
            if granted {
                findings.push(
                    Diagnostic::at(
                        Code::ForbidAlwaysGranted,
                        slug.span,
                        format!("`{}` is forbidden everywhere, yet an allow list grants it", slug.value),
                    )
                    .with_label("the denial wins")
                    .with_help("remove the grant, or the denial if the bundle should be usable"),
                    format!("skills.forbid_always.{index}"),
                );
            }
        }
    } else if !workspace.skills.is_empty() {
        findings.push(
            Diagnostic::at(
                Code::MissingSkillsBlock,
                Span::file_start(workflow.file),
                format!(
                    "the workspace serves {} but this workflow has no root `skills` block, so only a state naming a bundle in its own `skills.allow` can use one",
                    list_names(&known)
                ),
            )
            .with_help("grant the bundles every state needs with `skills: { allow_always: [...] }`, or write `skills: { allow_always: [] }` when each state grants its own"),
            "skills",
        );
    }
    for state in &workflow.states {
        let base = format!("states.{}.skills", state.slug.value);
        if let Some(allow) = &state.skills.allow {
            if allow.value.is_empty() {
                super::empty_allow(
                    "skills",
                    "bundle",
                    !root_allow.is_empty(),
                    allow.span,
                    format!("{base}.allow"),
                    findings,
                );
            }
            for (index, slug) in allow.value.iter().enumerate() {
                if !check_known(slug, format!("{base}.allow.{index}"), findings) {
                    continue;
                }
                if root_allow.iter().any(|granted| granted.value == slug.value) {
                    findings.push(
                        Diagnostic::at(
                            Code::RedundantGrant,
                            slug.span,
                            format!("`{}` is already enabled in every state by `skills.allow_always`", slug.value),
                        )
                        .with_label("already granted")
                        .with_help("remove it from the state's list"),
                        format!("{base}.allow.{index}"),
                    );
                }
                if let Some(denied) = state.skills.forbid.iter().find(|denied| denied.value == slug.value) {
                    findings.push(
                        Diagnostic::at(
                            Code::AllowAndForbid,
                            slug.span,
                            format!("`{}` both allows and forbids `{}`", state.slug.value, slug.value),
                        )
                        .with_label("allowed")
                        .with_secondary(denied.span, "forbidden")
                        .with_help("the denial wins; keep one of the two"),
                        format!("{base}.allow.{index}"),
                    );
                }
            }
        }
        for (index, slug) in state.skills.forbid.iter().enumerate() {
            if !check_known(slug, format!("{base}.forbid.{index}"), findings) {
                continue;
            }
            let granted = root_allow.iter().any(|granted| granted.value == slug.value)
                || state.skills.allowed().iter().any(|granted| granted.value == slug.value);
            if !granted {
                findings.push(
                    Diagnostic::at(
                        Code::ForbidNothing,
                        slug.span,
                        format!(
                            "`{}` is not enabled in `{}`, so forbidding it changes nothing",
                            slug.value, state.slug.value
                        ),
                    )
                    .with_label("denies nothing")
                    .with_help("a bundle is enabled only where a list grants it; remove the entry"),
                    format!("{base}.forbid.{index}"),
                );
            }
        }
    }
}
