//! Lowering: a checked workspace in, a [`Program`] out.
//!
//! Lowering runs only over a workspace without errors ([`lower`] refuses otherwise) and
//! makes every static decision once: it resolves targets to [`StateId`]s, derives each
//! state's surface and guard table ([`surface`]), renders the prompt prefix and the
//! volatile templates ([`prompt`]), publishes trigger signatures as JSON Schema
//! ([`signature`]), takes each code-state script's bytecode from what validation
//! compiled ([`script`]; lowering never compiles one again) and hashes each spec
//! ([`hash`]). Everything is visited in document order and collected in
//! vectors, so the output is deterministic.

pub mod hash;
pub mod prompt;
pub mod script;
pub mod signature;
pub mod surface;

use std::collections::HashMap;

use crate::analysis::Analysis;
use crate::check::bytecode::CompiledScript;
use crate::check::delegation;
use crate::program::{
    BudgetProgram, Callee, DecisionTemplate, JudgeProgram, MountProgram, Op, Program, ScriptId, ScriptProgram,
    SettingsProgram, SkillProgram, StateId, StateProgram, Sym, TestsProgram, TransitionProgram, TriggerProgram,
    WorkflowId, WorkflowProgram,
};
use crate::schema::ast::{CacheTtl, Settings, State, StateKind, Workflow};
use crate::syntax::reference::TemplatePart as TextPart;
use crate::workspace::Workspace;

/// The contract every artifact targets.
pub const CONTRACT: &str = crate::schema::CONTRACT;
pub use archmax_program::program::{
    DEFAULT_MAX_PTC_CALLS, DEFAULT_MAX_RESULT_CHARS, DEFAULT_MEMORY_LIMIT_BYTES, DEFAULT_TIMEOUT_MS,
};
pub const DEFAULT_CASE_TIMEOUT_MS: u64 = 120_000;

/// What lowering needs besides the workspace.
pub struct BuildInputs<'a> {
    /// The compiled-in platform prompt (Markdown, with `<!-- top-level-only -->` blocks);
    /// a workspace's `.platform/system/GRAPH_STATE.md` replaces it.
    pub platform_prompt: &'a str,
}

/// Why a workspace could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the workspace has {0} validation error(s); run `archmax validate` and fix them first")]
    Invalid(usize),
    #[error("the workspace has no workflows")]
    Empty,
    #[error("the script `{path}` of workflow `{workflow}` does not compile: {message}")]
    Script { workflow: String, path: String, message: String },
}

/// Deduplicates strings into [`Program::strings`].
#[derive(Default)]
pub struct Interner {
    strings: Vec<String>,
    index: HashMap<String, Sym>,
}

impl Interner {
    pub fn intern(&mut self, text: &str) -> Sym {
        if let Some(sym) = self.index.get(text) {
            return *sym;
        }
        let sym = Sym(self.strings.len() as u32);
        self.strings.push(text.to_string());
        self.index.insert(text.to_string(), sym);
        sym
    }

    pub fn into_strings(self) -> Vec<String> {
        self.strings
    }
}

/// Lowers the selected workflows (every workflow when `selection` is empty) and every
/// workflow they may call, so delegation resolves inside one artifact.
pub fn lower(analysis: &Analysis, selection: &[String], inputs: &BuildInputs<'_>) -> Result<Program, BuildError> {
    let included = included_workflows(analysis, selection);
    // The findings that bind what is lowered: those of the included workflows and the
    // workspace's own, never a sibling's.
    let errors = match analysis.report(&included) {
        Ok(report) => report.errors(),
        Err(_) => 0,
    };
    if errors > 0 {
        return Err(BuildError::Invalid(errors));
    }
    let units: Vec<(&Workflow, &[CompiledScript])> = analysis
        .units
        .iter()
        .filter(|unit| included.contains(&unit.slug))
        .filter_map(|unit| unit.workflow.as_ref().map(|workflow| (workflow, unit.scripts.as_slice())))
        .collect();
    let workflows: Vec<&Workflow> = units.iter().map(|(workflow, _)| *workflow).collect();
    if workflows.is_empty() {
        return Err(BuildError::Empty);
    }
    let workspace = &analysis.workspace;
    let mut interner = Interner::default();
    let ids: HashMap<&str, WorkflowId> = workflows
        .iter()
        .enumerate()
        .map(|(index, workflow)| (workflow.slug.as_str(), WorkflowId(index as u32)))
        .collect();
    let mounts = workspace
        .mounts
        .mounts
        .iter()
        .map(|mount| MountProgram {
            key: interner.intern(&mount.key),
            name: interner.intern(&mount.name),
            directory: mount.directory,
            read_only: mount.read_only,
            governed: mount.governed,
            searchable: mount.searchable,
            source: interner.intern(&mount.source),
        })
        .collect();
    let skills = workspace
        .skills
        .iter()
        .map(|skill| SkillProgram {
            slug: interner.intern(&skill.slug),
            description: interner.intern(skill.description.as_deref().unwrap_or("")),
            manifest: interner.intern(&format!("skills/{}/SKILL.md", skill.slug)),
        })
        .collect();
    let prefix = prompt::PrefixParts::new(workspace, inputs.platform_prompt);
    let mut lowered = Vec::with_capacity(workflows.len());
    for (workflow, scripts) in &units {
        let context = WorkflowContext { workspace, all: &workflows, ids: &ids, prefix: &prefix, scripts };
        lowered.push(lower_workflow(&context, workflow, &mut interner)?);
    }
    Ok(Program {
        contract: CONTRACT.to_string(),
        compiler: env!("CARGO_PKG_VERSION").to_string(),
        strings: interner.into_strings(),
        mounts,
        skills,
        workflows: lowered,
        patterns: Default::default(),
    })
}

/// The selected workflows plus everything they may call, transitively.
/// The selected workflows and every workflow they call, in the workspace's order (every
/// workflow when the selection is empty).
pub fn included_workflows(analysis: &Analysis, selection: &[String]) -> Vec<String> {
    let mut included: Vec<String> = if selection.is_empty() {
        analysis.units.iter().map(|unit| unit.slug.clone()).collect()
    } else {
        selection.to_vec()
    };
    let mut cursor = 0;
    while cursor < included.len() {
        if let Some(unit) = analysis.unit(&included[cursor]) {
            for call in delegation::calls(unit) {
                if !included.contains(&call.target) && analysis.unit(&call.target).is_some() {
                    included.push(call.target);
                }
            }
        }
        cursor += 1;
    }
    // Keep the workspace's order, whatever order the selection named them in.
    analysis.units.iter().map(|unit| unit.slug.clone()).filter(|slug| included.contains(slug)).collect()
}

/// What lowering one workflow reads besides the workflow itself.
struct WorkflowContext<'a> {
    workspace: &'a Workspace,
    /// Every workflow being lowered, for the callee signatures.
    all: &'a [&'a Workflow],
    ids: &'a HashMap<&'a str, WorkflowId>,
    prefix: &'a prompt::PrefixParts,
    /// The workflow's scripts as validation compiled them.
    scripts: &'a [CompiledScript],
}

/// Lowers one workflow: its states in document order, then its triggers, entry, settings
/// and workflow-wide grants. Strings are interned in exactly this order, so the artifact
/// is deterministic.
fn lower_workflow(
    context: &WorkflowContext<'_>,
    workflow: &Workflow,
    interner: &mut Interner,
) -> Result<WorkflowProgram, BuildError> {
    let WorkflowContext { workspace, all, ids, prefix, .. } = *context;
    let callees = callees(workflow, all, ids, interner);
    let mut tables = StateTables::default();
    let mut states = Vec::with_capacity(workflow.states.len());
    for state in &workflow.states {
        states.push(lower_state(context, workflow, state, &callees, &mut tables, interner)?);
    }
    let triggers: Vec<TriggerProgram> = workflow
        .triggers()
        .map(|(entry, trigger)| signature::lower_trigger(trigger, StateId(entry as u32), interner))
        .collect();
    let entry = workflow
        .triggers()
        .find(|(_, trigger)| trigger.id.value == "manual")
        .or_else(|| workflow.triggers().next())
        .map(|(index, _)| StateId(index as u32))
        .unwrap_or(StateId(0));
    let read_write = read_write_mounts(workflow, interner);
    Ok(WorkflowProgram {
        slug: interner.intern(&workflow.slug),
        title: workflow.title.as_ref().map(|title| interner.intern(&title.value)),
        spec_hash: hash::spec_hash(workspace, workflow),
        disabled: workflow.disabled,
        settings: lower_settings(&workflow.settings, interner),
        tests: lower_tests(workflow, interner),
        states,
        surfaces: tables.surfaces.into_vec(),
        triggers,
        entry,
        prompt_prefix: interner.intern(&prefix.render(workspace, workflow, false)),
        child_prompt_prefix: interner.intern(&prefix.render(workspace, workflow, true)),
        forbid_always: workflow
            .tools
            .forbid_always
            .iter()
            .map(|entry| surface::rule(workspace, entry, interner))
            .collect(),
        skills_forbid_always: workflow
            .skills
            .iter()
            .flat_map(|root| root.forbid_always.iter())
            .map(|slug| interner.intern(&slug.value))
            .collect(),
        mounts_forbid_always: workflow
            .mounts
            .iter()
            .flat_map(|root| root.forbid_always.iter())
            .map(|name| interner.intern(&name.value))
            .collect(),
        mounts_read_write: read_write,
        scripts: tables.scripts,
        callees,
    })
}

/// What a workflow's states share as they are lowered one by one: the scripts (each
/// compiled once, however many states run it) and the deduplicated surfaces.
#[derive(Default)]
struct StateTables {
    scripts: Vec<ScriptProgram>,
    script_ids: HashMap<String, ScriptId>,
    surfaces: surface::Surfaces,
}

impl StateTables {
    /// The id of the script at `path`, taking its bytecode from validation the first time.
    fn script(
        &mut self,
        validated: &[CompiledScript],
        workflow: &Workflow,
        path: &str,
        interner: &mut Interner,
    ) -> Result<ScriptId, BuildError> {
        if let Some(id) = self.script_ids.get(path) {
            return Ok(*id);
        }
        let compiled = script::compile(validated, workflow, path, interner)?;
        let id = ScriptId(self.scripts.len() as u32);
        self.scripts.push(compiled);
        self.script_ids.insert(path.to_string(), id);
        Ok(id)
    }
}

/// The id of the state a slug names.
fn state_id(workflow: &Workflow, slug: &str) -> Option<StateId> {
    workflow.state_index(slug).map(|index| StateId(index as u32))
}

/// Lowers one state: its script, surface and guards, transitions, ops, grants, templates
/// and the rest of its spec.
fn lower_state(
    context: &WorkflowContext<'_>,
    workflow: &Workflow,
    state: &State,
    callees: &[Callee],
    tables: &mut StateTables,
    interner: &mut Interner,
) -> Result<StateProgram, BuildError> {
    let workspace = context.workspace;
    let script = match (&state.kind, &state.script) {
        (StateKind::Code, Some(path)) => Some(tables.script(context.scripts, workflow, &path.value, interner)?),
        _ => None,
    };
    let (surface_id, guards) =
        surface::lower_state(workspace, workflow, state, callees, &mut tables.surfaces, interner);
    let transitions = state
        .transitions
        .iter()
        .filter_map(|transition| {
            let target = state_id(workflow, &transition.to.value)?;
            let target_state = &workflow.states[target.0 as usize];
            Some(TransitionProgram {
                target,
                description: transition.description.as_ref().map(|text| interner.intern(text.value.trim())),
                kind: transition.kind,
                marker: prompt::marker(transition.kind, target_state).map(|marker| interner.intern(&marker)),
            })
        })
        .collect();
    let mut ops = match state.kind {
        StateKind::Agent => vec![Op::RunAgent(surface_id)],
        StateKind::Human => vec![Op::ParkForDecision],
        StateKind::Grader => vec![Op::RunGrader(surface_id)],
        StateKind::Code => script.map(|id| vec![Op::RunCode(id, surface_id)]).unwrap_or_default(),
    };
    if state.is_terminal() && state.kind != StateKind::Human {
        ops.push(Op::Complete);
    }
    let (skill_access, skills) = surface::skill_access(workspace, workflow, state, interner);
    let mount_access = surface::mount_access(workspace, workflow, state, interner);
    let template = prompt::volatile_template(workspace, workflow, state, interner);
    let decision = (state.kind == StateKind::Human).then(|| DecisionTemplate {
        instructions: interner.intern(state.instructions.as_ref().map(|text| text.value.trim()).unwrap_or("")),
        evidence: state.evidence.iter().map(|path| interner.intern(&path.value)).collect(),
        approvers: state.approvers.iter().map(|approver| interner.intern(&approver.value)).collect(),
    });
    Ok(StateProgram {
        slug: interner.intern(&state.slug.value),
        kind: state.kind,
        title: state.title.as_ref().map(|title| interner.intern(&title.value)),
        ops,
        transitions,
        requires: state.requires.iter().map(|name| interner.intern(&name.value)).collect(),
        locks: state.locks.iter().map(|name| interner.intern(&name.value)).collect(),
        on_error: state.on_error.as_ref().and_then(|target| state_id(workflow, &target.value)),
        budget: BudgetProgram {
            timeout_ms: state.budget.timeout_ms.as_ref().map(|value| value.value),
            max_parks: state.budget.max_parks.as_ref().map(|value| value.value),
        },
        model: state
            .model
            .as_ref()
            .or(workflow.settings.model.as_ref())
            .filter(|_| state.kind != StateKind::Code)
            .map(|model| interner.intern(&model.value)),
        surface: surface_id,
        guards,
        skills,
        skill_access,
        mount_access,
        template,
        decision,
        script,
    })
}

/// The mounts some grant opens read-write, workflow-wide first, each once.
fn read_write_mounts(workflow: &Workflow, interner: &mut Interner) -> Vec<Sym> {
    let mut read_write: Vec<Sym> = Vec::new();
    let grants = workflow
        .mounts
        .iter()
        .flat_map(|root| root.allow_always.iter())
        .chain(workflow.states.iter().flat_map(|state| state.mounts.allowed().iter()));
    for grant in grants {
        if grant.access.as_ref().is_some_and(|access| access.value == crate::schema::ast::Access::ReadWrite) {
            let name = interner.intern(&grant.name.value);
            if !read_write.contains(&name) {
                read_write.push(name);
            }
        }
    }
    read_write
}

/// The workflow's settings, the runtime's defaults where it names none.
fn lower_settings(settings: &Settings, interner: &mut Interner) -> SettingsProgram {
    SettingsProgram {
        model: settings.model.as_ref().map(|model| interner.intern(&model.value)),
        timeout_ms: settings.timeout_ms.as_ref().map(|value| value.value).unwrap_or(DEFAULT_TIMEOUT_MS),
        memory_limit_bytes: settings
            .memory_limit_bytes
            .as_ref()
            .map(|value| value.value)
            .unwrap_or(DEFAULT_MEMORY_LIMIT_BYTES),
        max_ptc_calls: match &settings.max_ptc_calls {
            Some(value) => value.value,
            None => Some(DEFAULT_MAX_PTC_CALLS),
        },
        max_result_chars: settings
            .max_result_chars
            .as_ref()
            .map(|value| value.value)
            .unwrap_or(DEFAULT_MAX_RESULT_CHARS),
        prompt_cache: settings.prompt_cache.enabled,
        prompt_cache_ttl: settings.prompt_cache.ttl.map(|ttl| {
            interner.intern(match ttl {
                CacheTtl::FiveMinutes => "5m",
                CacheTtl::OneHour => "1h",
            })
        }),
    }
}

/// How `archmax test` runs the workflow's cases.
fn lower_tests(workflow: &Workflow, interner: &mut Interner) -> TestsProgram {
    TestsProgram {
        case_timeout_ms: workflow
            .tests
            .case_timeout_ms
            .as_ref()
            .map(|value| value.value)
            .unwrap_or(DEFAULT_CASE_TIMEOUT_MS),
        judge: workflow.tests.judge.as_ref().map(|judge| JudgeProgram {
            model: judge.model.as_ref().map(|model| interner.intern(&model.value)),
            temperature: judge.temperature,
            max_tokens: judge.max_tokens,
        }),
    }
}

/// Every `archmax_workflow_<slug>` the workflow may call, in first-mention order.
fn callees(
    workflow: &Workflow,
    all: &[&Workflow],
    ids: &HashMap<&str, WorkflowId>,
    interner: &mut Interner,
) -> Vec<Callee> {
    let mut callees: Vec<Callee> = Vec::new();
    let entries = workflow
        .tools
        .allow_always
        .iter()
        .flat_map(|allow| allow.value.iter())
        .chain(workflow.states.iter().flat_map(|state| state.tools.allow.iter()));
    for entry in entries {
        let Some(target) = crate::tools::delegation_target(entry.name()) else {
            continue;
        };
        let (Some(id), Some(callee)) = (ids.get(target), all.iter().find(|candidate| candidate.slug == target)) else {
            continue;
        };
        let tool = interner.intern(entry.name());
        if callees.iter().any(|existing| existing.tool == tool) {
            continue;
        }
        callees.push(signature::callee(tool, *id, callee, interner));
    }
    callees
}

/// Literal text of a template, `${{…}}` references written back as they were.
pub fn template_text(parts: &[TextPart]) -> String {
    parts
        .iter()
        .map(|part| match part {
            TextPart::Literal(text) => text.replace("${{", "$${{"),
            TextPart::Reference { path, .. } => format!("${{{{{path}}}}}"),
        })
        .collect()
}
