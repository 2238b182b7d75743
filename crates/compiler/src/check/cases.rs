//! What cases name: trigger ids, states, workflows, fixtures and seeded paths.

use crate::diagnostic::{Code, Diagnostic, Scope, did_you_mean, list_names};
use crate::schema::case::{Case, SeedContent, StepKind};
use crate::workspace::Workspace;
use crate::zones::{Zone, canonicalize, classify};

use super::Unit;

pub fn check(workspace: &Workspace, units: &[Unit], index: usize) -> Vec<Diagnostic> {
    let unit = &units[index];
    let mut out = Vec::new();
    let scope = Scope::Workflow(unit.slug.clone());
    let mut push = |diagnostic: Diagnostic, path: String| {
        out.push(diagnostic.with_path(path).with_scope(scope.clone()));
    };
    let Some(source) = workspace.workflow(&unit.slug) else {
        return out;
    };
    for case in &unit.cases {
        check_seeds(workspace, &source.test_files, case, &mut push);
        let Some(workflow) = &unit.workflow else {
            continue;
        };
        let slugs: Vec<&str> = workflow.states.iter().map(|state| state.slug.value.as_str()).collect();
        let triggers: Vec<&str> = workflow.triggers().map(|(_, trigger)| trigger.id.value.as_str()).collect();
        if let Some(trigger) = &case.trigger
            && !triggers.contains(&trigger.value.as_str())
        {
            push(
                Diagnostic::at(
                    Code::UnknownCaseTrigger,
                    trigger.span,
                    format!("the workflow declares no trigger `{}`", trigger.value),
                )
                .with_label("unknown trigger")
                .with_help(format!("the workflow's triggers are {}", list_names(&triggers))),
                "trigger.id".to_string(),
            );
        }
        for step in &case.steps {
            let step_path = format!("steps.{}", step.index);
            let mut state_reference = |name: &crate::source::Spanned<String>, key: &str| {
                if slugs.contains(&name.value.as_str()) {
                    return;
                }
                let diagnostic = Diagnostic::at(
                    Code::CaseUnknownState,
                    name.span,
                    format!("`{}` is not a state of `{}`", name.value, workflow.slug),
                )
                .with_label("unknown state");
                let diagnostic = match did_you_mean(&name.value, slugs.iter().copied()) {
                    Some(close) => diagnostic.with_help(format!("did you mean `{close}`?")),
                    None => diagnostic.with_help(format!("the workflow's states are {}", list_names(&slugs))),
                };
                push(diagnostic, format!("{step_path}.{key}"));
            };
            if let Some((name, key)) = step.state_reference() {
                state_reference(name, key);
            }
            match &step.kind {
                StepKind::RanWorkflow { workflow: target, .. } if workspace.workflow(&target.value).is_none() => {
                    let names: Vec<&str> = workspace.workflows.iter().map(|workflow| workflow.slug.as_str()).collect();
                    push(
                        Diagnostic::at(
                            Code::CaseUnknownWorkflow,
                            target.span,
                            format!("the workspace has no workflow `{}`", target.value),
                        )
                        .with_label("unknown workflow")
                        .with_help(format!("the workspace's workflows are {}", list_names(&names))),
                        format!("{step_path}.ranWorkflow.workflow"),
                    );
                }
                StepKind::Grade { .. } if workflow.tests.judge.is_none() => push(
                    Diagnostic::at(
                        Code::GradeWithoutJudge,
                        step.span,
                        "this case grades, but the workflow declares no `tests.judge`",
                    )
                    .with_label("no judge configured")
                    .with_help("add `tests: { judge: {} }` to workflow.yaml to judge with the configured model"),
                    format!("{step_path}.grade"),
                ),
                _ => {}
            }
        }
    }
    out
}

fn check_seeds(
    workspace: &Workspace,
    test_files: &std::collections::BTreeSet<String>,
    case: &Case,
    push: &mut impl FnMut(Diagnostic, String),
) {
    for seed in &case.workspace {
        let path = format!("workspace.{}", crate::diagnostic::path_key(&seed.path.value));
        let zone = canonicalize(&seed.path.value).map(|canonical| classify(&canonical, &workspace.mounts));
        let problem = match zone {
            Err(_) => Some("it climbs above the session root".to_string()),
            Ok(Zone::Root) => Some("it names the session root, not a file".to_string()),
            Ok(Zone::Run | Zone::Scratchpad) => None,
            Ok(zone) => Some(format!("it lies in {}", zone.describe(&workspace.mounts))),
        };
        if let Some(problem) = problem {
            push(
                Diagnostic::at(Code::UnseedablePath, seed.path.span, format!("a case cannot seed `{}`: {problem}", seed.path.value))
                    .with_label("not a session path")
                    .with_help("seed files the session itself would hold: a root-level file such as `trigger.json`, or a path under `scratchpad/`"),
                path.clone(),
            );
        }
        if let SeedContent::From(from) = &seed.content {
            let location_help = "keep fixtures under the workflow's `tests/` directory and name them relative to it, such as `fixtures/payload.json`";
            let problem = if from.value.trim().is_empty() {
                Some(("the path is empty".to_string(), location_help.to_string()))
            } else if from.value.starts_with('/') {
                Some((
                    "it is absolute; `from:` is relative to the workflow's `tests/`".to_string(),
                    location_help.to_string(),
                ))
            } else {
                match canonicalize(&from.value) {
                    Err(_) => Some(("it climbs out of `tests/`".to_string(), location_help.to_string())),
                    Ok(relative) if !test_files.contains(&relative) => Some((
                        format!("`tests/{relative}` does not exist"),
                        format!("create `tests/{relative}`, or correct the path"),
                    )),
                    Ok(_) => None,
                }
            };
            if let Some((problem, help)) = problem {
                push(
                    Diagnostic::at(
                        Code::FixtureMissing,
                        from.span,
                        format!("the fixture `{}` cannot be used: {problem}", from.value),
                    )
                    .with_label("bad fixture")
                    .with_help(help),
                    format!("{path}.from"),
                );
            }
        }
    }
}
