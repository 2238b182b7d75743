//! The front end's one entry point: load a workspace, parse every workflow and case,
//! run every check, and hand out per-workflow reports.
//!
//! Every workflow of the workspace is analyzed even when only some are selected,
//! because sub-workflow checks read their targets; a [`Report`] then keeps the selected
//! workflows, each with its own findings plus the workspace-level findings that affect it.

use std::path::Path;

use crate::check::{Unit, check_workspace};
use crate::diagnostic::{Code, Diagnostic, Scope};
use crate::schema::case::parse_case;
use crate::schema::parse_workflow;
use crate::source::{FileId, SourceMap, Span};
use crate::syntax::yaml;
use crate::workspace::{Workspace, WorkspaceError, load_workspace};

/// A fully analyzed workspace.
#[derive(Debug)]
pub struct Analysis {
    pub workspace: Workspace,
    pub units: Vec<Unit>,
}

/// Findings for one workflow.
#[derive(Debug)]
pub struct WorkflowReport {
    pub slug: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl WorkflowReport {
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count()
    }

    pub fn warnings(&self) -> usize {
        self.diagnostics.len() - self.errors()
    }

    pub fn is_valid(&self) -> bool {
        self.errors() == 0
    }
}

/// The findings for the selected workflows.
#[derive(Debug)]
pub struct Report {
    pub workflows: Vec<WorkflowReport>,
}

impl Report {
    /// Every distinct diagnostic, in report order: a workspace-level finding listed under
    /// several workflows appears once.
    pub fn distinct(&self) -> Vec<&Diagnostic> {
        let mut keys = std::collections::HashSet::new();
        let mut seen: Vec<&Diagnostic> = Vec::new();
        for workflow in &self.workflows {
            for diagnostic in &workflow.diagnostics {
                let key = (diagnostic.code, diagnostic.span, &diagnostic.message, &diagnostic.path);
                if keys.insert(key) {
                    seen.push(diagnostic);
                }
            }
        }
        seen
    }

    pub fn errors(&self) -> usize {
        self.distinct().iter().filter(|diagnostic| diagnostic.is_error()).count()
    }

    pub fn warnings(&self) -> usize {
        self.distinct().len() - self.errors()
    }

    pub fn is_valid(&self) -> bool {
        self.errors() == 0
    }
}

/// A workflow named on the command line that the workspace does not have.
#[derive(Debug, thiserror::Error)]
#[error("the workspace has no workflow `{name}`{hint}")]
pub struct UnknownWorkflow {
    pub name: String,
    pub hint: String,
}

/// Loads and checks the workspace at `root`.
pub fn analyze(root: &Path) -> Result<Analysis, WorkspaceError> {
    Ok(analyze_workspace(load_workspace(root)?))
}

/// Checks an already loaded workspace (from disk or from memory).
pub fn analyze_workspace(workspace: Workspace) -> Analysis {
    let mut units: Vec<Unit> = workspace.workflows.iter().map(|source| parse_unit(&workspace, source)).collect();
    check_workspace(&workspace, &mut units);
    Analysis { workspace, units }
}

fn parse_unit(workspace: &Workspace, source: &crate::workspace::WorkflowSource) -> Unit {
    let mut diagnostics = Vec::new();
    let mut workflow = None;
    if let Some(file) = source.spec {
        let text = workspace.sources.text(file);
        if workspace.readable(file)
            && let Some(root) = load_document(file, text, &source.slug, &mut diagnostics, "workflow.yaml")
        {
            let (parsed, found) = parse_workflow(&source.slug, file, text, &root, source.prose);
            diagnostics.extend(found);
            workflow = Some(parsed);
        }
    }
    let mut cases = Vec::new();
    for (id, file) in &source.cases {
        if !workspace.readable(*file) {
            continue;
        }
        let text = workspace.sources.text(*file);
        if let Some(root) = load_document(*file, text, &source.slug, &mut diagnostics, "a case file") {
            let (case, found) = parse_case(id, *file, text, &root, &source.slug);
            diagnostics.extend(found);
            cases.extend(case);
        }
    }
    let mut tapes = Vec::new();
    for (_, file) in &source.tapes {
        if workspace.readable(*file) {
            let (tape, found) = crate::schema::tape::check_tape(*file, workspace.sources.text(*file), &source.slug);
            diagnostics.extend(found);
            tapes.push(tape);
        }
    }
    Unit { slug: source.slug.clone(), workflow, cases, tapes, diagnostics, scripts: Vec::new() }
}

/// Loads a YAML file that must be a mapping; reports why it is not.
fn load_document(
    file: FileId,
    text: &str,
    slug: &str,
    diagnostics: &mut Vec<Diagnostic>,
    what: &str,
) -> Option<yaml::Node> {
    let scope = Scope::Workflow(slug.to_string());
    let document = yaml::load(file, text);
    diagnostics.extend(document.diagnostics.into_iter().map(|diagnostic| diagnostic.with_scope(scope.clone())));
    let root = match document.root {
        Some(root) => root,
        None if document.empty => {
            diagnostics.push(
                Diagnostic::at(Code::NotAMapping, Span::file_start(file), format!("{what} is empty"))
                    .with_help(if what == "workflow.yaml" {
                        "write the workflow as a mapping with `instructions` and `states`"
                    } else {
                        "write the case as a mapping with `title`, `description` and `steps`"
                    })
                    .with_scope(scope),
            );
            return None;
        }
        None => return None,
    };
    if root.as_mapping().is_none() {
        diagnostics.push(
            Diagnostic::at(Code::NotAMapping, root.span, format!("{what} must be a mapping, not {}", root.type_name()))
                .with_label("expected a mapping of keys")
                .with_help(if what == "workflow.yaml" {
                    "write top-level keys such as `title:`, `instructions:` and `states:`"
                } else {
                    "write top-level keys such as `title:`, `description:` and `steps:`"
                })
                .with_scope(scope),
        );
        return None;
    }
    Some(root)
}

impl Analysis {
    pub fn sources(&self) -> &SourceMap {
        &self.workspace.sources
    }

    pub fn unit(&self, slug: &str) -> Option<&Unit> {
        self.units.iter().find(|unit| unit.slug == slug)
    }

    /// The report for `selection` (every workflow when empty).
    pub fn report(&self, selection: &[String]) -> Result<Report, UnknownWorkflow> {
        let names: Vec<&str> = self.units.iter().map(|unit| unit.slug.as_str()).collect();
        for name in selection {
            if !names.contains(&name.as_str()) {
                let hint = match crate::diagnostic::did_you_mean(name, names.iter().copied()) {
                    Some(close) => format!("; did you mean `{close}`?"),
                    None => format!(" (it has {})", crate::diagnostic::list_names(&names)),
                };
                return Err(UnknownWorkflow { name: name.clone(), hint });
            }
        }
        let workflows = self
            .units
            .iter()
            .filter(|unit| selection.is_empty() || selection.contains(&unit.slug))
            .map(|unit| {
                let mut diagnostics: Vec<Diagnostic> = unit.diagnostics.clone();
                for diagnostic in &self.workspace.diagnostics {
                    let applies = match &diagnostic.scope {
                        Scope::Workflow(slug) => *slug == unit.slug,
                        Scope::Workspace => true,
                        Scope::Skill(slug) => {
                            self.names_skill(slug).is_none_or(|users| users.contains(&unit.slug.as_str()))
                        }
                    };
                    if applies {
                        diagnostics.push(diagnostic.clone());
                    }
                }
                self.sort(&unit.slug, &mut diagnostics);
                WorkflowReport { slug: unit.slug.clone(), diagnostics }
            })
            .collect();
        Ok(Report { workflows })
    }

    /// The model ids the workflows name, each where it is written: `settings.model`, each
    /// state's `model`, the case judge's `tests.judge.model`.
    pub fn model_uses(&self) -> Vec<archmax_config::settings::providers::ModelUse> {
        let mut uses = Vec::new();
        for workflow in self.units.iter().filter_map(|unit| unit.workflow.as_ref()) {
            let named = std::iter::once(&workflow.settings.model)
                .chain(workflow.states.iter().map(|state| &state.model))
                .chain(workflow.tests.judge.iter().map(|judge| &judge.model))
                .flatten();
            uses.extend(named.map(|model| archmax_config::settings::providers::ModelUse {
                id: model.value.trim().to_string(),
                span: model.span,
                workflow: workflow.slug.clone(),
            }));
        }
        uses
    }

    /// Adds findings made outside the analysis (against the environment) to `report`:
    /// each under the workflows its scope names, in the report's order.
    pub fn add_findings(&self, report: &mut Report, found: &[Diagnostic]) {
        for workflow in &mut report.workflows {
            let before = workflow.diagnostics.len();
            workflow.diagnostics.extend(
                found
                    .iter()
                    .filter(|diagnostic| match &diagnostic.scope {
                        Scope::Workflow(slug) => *slug == workflow.slug,
                        _ => true,
                    })
                    .cloned(),
            );
            if workflow.diagnostics.len() != before {
                self.sort(&workflow.slug, &mut workflow.diagnostics);
            }
        }
    }

    /// The workflows whose skills lists name `slug`; `None` when none does.
    fn names_skill(&self, slug: &str) -> Option<Vec<&str>> {
        let users: Vec<&str> = self
            .units
            .iter()
            .filter(|unit| {
                unit.workflow.as_ref().is_some_and(|workflow| {
                    let root = workflow
                        .skills
                        .iter()
                        .flat_map(|root| root.allow_always.iter().chain(root.forbid_always.iter()));
                    let states = workflow
                        .states
                        .iter()
                        .flat_map(|state| state.skills.allowed().iter().chain(state.skills.forbid.iter()));
                    root.chain(states).any(|named| named.value == slug)
                })
            })
            .map(|unit| unit.slug.as_str())
            .collect();
        (!users.is_empty()).then_some(users)
    }

    /// Orders findings: the workflow's own spec first, then its other files, then the
    /// workspace's; by position within a file.
    fn sort(&self, slug: &str, diagnostics: &mut [Diagnostic]) {
        let spec = self.workspace.workflow(slug).and_then(|source| source.spec);
        let prefix = format!("workflows/{slug}/");
        let sources = &self.workspace.sources;
        diagnostics.sort_by_cached_key(|diagnostic| {
            let (rank, name, start) = match diagnostic.span {
                Some(span) => {
                    let name = sources.file(span.file).name.clone();
                    let rank = if Some(span.file) == spec {
                        0
                    } else if name.starts_with(&prefix) {
                        1
                    } else {
                        2
                    };
                    (rank, name, span.start)
                }
                None => (3, String::new(), 0),
            };
            (rank, name, start, diagnostic.code, diagnostic.message.clone())
        });
    }
}
