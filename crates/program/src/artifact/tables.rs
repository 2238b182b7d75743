//! What the loader checks inside a decoded program before the VM may use it: every index
//! in range ([`verify`]), and every table the VM trusts as the compiler wrote it
//! ([`check`]): mount keys and sources, slugs, names, skill manifests, callee tools.
//!
//! The one thing to know: each check calls the same function the compiler used when it
//! built the table, and demands the stored value be exactly what that function produces,
//! so a re-hashed, edited artifact cannot carry a table the compiler would never write.

use super::ArtifactError;
use crate::mounts::{mount_key_path, mount_source_path};
use crate::program::{
    GuardTable, Op, Program, Rule, ScriptId, StateId, StateProgram, SurfaceId, Sym, TemplatePart, ToolKind,
    TriggerProgram, WorkflowProgram,
};
use crate::reference::is_variable_name;
use crate::slug::is_slug;
use crate::tools::delegation_target;

/// Checks every index inside a decoded program, so the VM can index without panicking.
pub fn verify(program: &Program) -> Result<(), ArtifactError> {
    let strings = Strings { count: program.strings.len() };
    for mount in &program.mounts {
        for value in [mount.key, mount.name, mount.source] {
            strings.sym(value, "a mount")?;
        }
    }
    for skill in &program.skills {
        for value in [skill.slug, skill.description, skill.manifest] {
            strings.sym(value, "a skill")?;
        }
    }
    for workflow in &program.workflows {
        verify_workflow(program, workflow, strings)?;
    }
    Ok(())
}

/// The length of the program's string table, for the indexes into it.
#[derive(Clone, Copy)]
struct Strings {
    count: usize,
}

impl Strings {
    fn sym(self, sym: Sym, what: &str) -> Result<(), ArtifactError> {
        if (sym.0 as usize) < self.count {
            Ok(())
        } else {
            Err(ArtifactError::Inconsistent(format!("{what} names string {} of {}", sym.0, self.count)))
        }
    }

    fn rule(self, rule: &Rule) -> Result<(), ArtifactError> {
        if let Some(tool) = rule.tool {
            self.sym(tool, "a rule")?;
        }
        for (argument, _) in &rule.args {
            self.sym(*argument, "a rule argument")?;
        }
        self.sym(rule.display, "a rule")
    }
}

/// The lengths of the tables one workflow's indexes point into.
struct Indexes {
    strings: Strings,
    states: usize,
    surfaces: usize,
    scripts: usize,
}

impl Indexes {
    fn state(&self, id: StateId) -> Result<(), ArtifactError> {
        within(id.0, self.states, "state")
    }

    fn surface(&self, id: SurfaceId) -> Result<(), ArtifactError> {
        within(id.0, self.surfaces, "surface")
    }

    fn script(&self, id: ScriptId) -> Result<(), ArtifactError> {
        within(id.0, self.scripts, "script")
    }
}

/// An index into a workflow's table of `count` states, surfaces or scripts.
fn within(index: u32, count: usize, table: &str) -> Result<(), ArtifactError> {
    if (index as usize) < count {
        Ok(())
    } else {
        Err(ArtifactError::Inconsistent(format!("a reference to {table} {index} of {count}")))
    }
}

/// Checks one workflow's indexes: its own fields, callees, scripts and surfaces, then
/// its triggers and its states.
fn verify_workflow(program: &Program, workflow: &WorkflowProgram, strings: Strings) -> Result<(), ArtifactError> {
    let workflows = program.workflows.len();
    let indexes = Indexes {
        strings,
        states: workflow.states.len(),
        surfaces: workflow.surfaces.len(),
        scripts: workflow.scripts.len(),
    };
    if indexes.states == 0 {
        return Err(ArtifactError::Inconsistent("a workflow without states".to_string()));
    }
    strings.sym(workflow.slug, "a workflow")?;
    for value in [workflow.prompt_prefix, workflow.child_prompt_prefix] {
        strings.sym(value, "a workflow")?;
    }
    if let Some(ttl) = workflow.settings.prompt_cache_ttl {
        strings.sym(ttl, "a workflow")?;
        if !matches!(program.str(ttl), "5m" | "1h") {
            return Err(ArtifactError::Inconsistent("a prompt cache TTL that is neither 5m nor 1h".to_string()));
        }
    }
    indexes.state(workflow.entry)?;
    for rule_entry in &workflow.forbid_always {
        strings.rule(rule_entry)?;
    }
    for value in workflow
        .skills_forbid_always
        .iter()
        .chain(&workflow.mounts_forbid_always)
        .chain(&workflow.mounts_read_write)
        .chain(workflow.title.iter())
        .chain(workflow.settings.model.iter())
    {
        strings.sym(*value, "a workflow setting")?;
    }
    for callee in &workflow.callees {
        if callee.workflow.0 as usize >= workflows {
            return Err(ArtifactError::Inconsistent(format!(
                "a callee names workflow {} of {workflows}",
                callee.workflow.0
            )));
        }
        for value in [callee.tool, callee.description, callee.parameters].iter().chain(&callee.returns) {
            strings.sym(*value, "a callee")?;
        }
    }
    for script in &workflow.scripts {
        strings.sym(script.path, "a script")?;
        strings.sym(script.source, "a script")?;
    }
    for surface in &workflow.surfaces {
        for tool in &surface.tools {
            strings.sym(tool.name, "a surface")?;
            for (argument, _) in &tool.paths {
                strings.sym(*argument, "a surface")?;
            }
            if let ToolKind::Delegation(index) = tool.kind
                && index as usize >= workflow.callees.len()
            {
                return Err(ArtifactError::Inconsistent("a delegation tool without its callee".to_string()));
            }
        }
    }
    for trigger in &workflow.triggers {
        verify_trigger(&indexes, trigger)?;
    }
    for state in &workflow.states {
        verify_state(&indexes, state)?;
    }
    Ok(())
}

/// Checks a trigger's entry state and strings, and those of its signature entries.
fn verify_trigger(indexes: &Indexes, trigger: &TriggerProgram) -> Result<(), ArtifactError> {
    let strings = indexes.strings;
    indexes.state(trigger.entry)?;
    for value in [trigger.id, trigger.schema, trigger.signature_prompt, trigger.child_signature_prompt]
        .iter()
        .chain(trigger.connection.iter())
        .chain(trigger.description.iter())
    {
        strings.sym(*value, "a trigger")?;
    }
    for entry in trigger.requires.iter().chain(&trigger.returns) {
        strings.sym(entry.name, "a signature entry")?;
        for value in entry
            .description
            .iter()
            .chain(entry.rules.format.iter())
            .chain(entry.rules.pattern.iter())
            .chain(entry.rules.content.iter())
            .chain(entry.rules.enumeration.iter().flatten())
            .chain(entry.rules.accept.iter().flatten())
        {
            strings.sym(*value, "a signature rule")?;
        }
    }
    Ok(())
}

/// Checks a state's indexes: its surface, script, ops and transitions, then its strings,
/// guard table, template and decision record.
fn verify_state(indexes: &Indexes, state: &StateProgram) -> Result<(), ArtifactError> {
    let strings = indexes.strings;
    strings.sym(state.slug, "a state")?;
    indexes.surface(state.surface)?;
    if let Some(on_error) = state.on_error {
        indexes.state(on_error)?;
    }
    if let Some(script) = state.script {
        indexes.script(script)?;
    }
    for op in &state.ops {
        match op {
            Op::RunAgent(surface) | Op::RunGrader(surface) => indexes.surface(*surface)?,
            Op::RunCode(script, surface) => {
                indexes.script(*script)?;
                indexes.surface(*surface)?;
            }
            Op::ParkForDecision | Op::Complete => {}
        }
    }
    for transition in &state.transitions {
        indexes.state(transition.target)?;
        for value in transition.description.iter().chain(transition.marker.iter()) {
            strings.sym(*value, "a transition")?;
        }
    }
    for value in state
        .requires
        .iter()
        .chain(&state.locks)
        .chain(&state.skills)
        .chain(state.title.iter())
        .chain(state.model.iter())
        .chain(state.skill_access.iter().map(|(name, _)| name))
        .chain(state.mount_access.iter().map(|(name, _)| name))
    {
        strings.sym(*value, "a state")?;
    }
    let GuardTable { forbid, controls, grants } = &state.guards;
    for rule_entry in forbid.iter().chain(grants.iter().flat_map(|grant| grant.entries.iter())) {
        strings.rule(rule_entry)?;
    }
    for value in controls.iter().chain(grants.iter().map(|grant| &grant.tool)) {
        strings.sym(*value, "a guard table")?;
    }
    for part in &state.template {
        if let TemplatePart::Text(text) = part {
            strings.sym(*text, "a template")?;
        }
    }
    if let Some(decision) = &state.decision {
        for value in std::iter::once(&decision.instructions).chain(&decision.evidence).chain(&decision.approvers) {
            strings.sym(*value, "a decision record")?;
        }
    }
    Ok(())
}

/// A refusal naming the table and the entry.
fn invalid(table: &'static str, entry: &str, problem: impl Into<String>) -> ArtifactError {
    ArtifactError::Table { table, entry: format!("`{entry}`"), problem: problem.into() }
}

/// Checks every table the VM relies on; call after [`verify`].
pub fn check(program: &Program) -> Result<(), ArtifactError> {
    check_mounts(program)?;
    check_skills(program)?;
    let mut slugs: Vec<&str> = Vec::new();
    for workflow in &program.workflows {
        let slug = program.str(workflow.slug);
        if !is_slug(slug) {
            return Err(invalid("workflows", slug, "a workflow slug is kebab-case (`^[a-z0-9]+(-[a-z0-9]+)*$`)"));
        }
        if slugs.contains(&slug) {
            return Err(invalid("workflows", slug, "the slug appears twice"));
        }
        slugs.push(slug);
        check_workflow(program, workflow)?;
    }
    Ok(())
}

fn check_mounts(program: &Program) -> Result<(), ArtifactError> {
    for mount in &program.mounts {
        let (key, name, source) = (program.str(mount.key), program.str(mount.name), program.str(mount.source));
        let bare = key.strip_suffix('/').filter(|_| mount.directory).unwrap_or(key);
        match mount_key_path(bare) {
            Ok(canonical) if canonical == bare && canonical == name && key.ends_with('/') == mount.directory => {}
            Ok(_) => return Err(invalid("mounts", key, "the key, its name and its directory flag disagree")),
            Err(_) => {
                return Err(invalid(
                    "mounts",
                    key,
                    "the key is not a relative path inside the workspace, or is reserved",
                ));
            }
        }
        if mount_source_path(source).as_deref() != Ok(source) {
            return Err(invalid(
                "mounts",
                key,
                format!(
                    "the source `{}` is not a canonical relative path inside the workspace (no `..`, no leading `/`, no NUL or backslash)",
                    source.escape_debug()
                ),
            ));
        }
    }
    Ok(())
}

fn check_skills(program: &Program) -> Result<(), ArtifactError> {
    for skill in &program.skills {
        let slug = program.str(skill.slug);
        if !is_slug(slug) {
            return Err(invalid("skills", slug, "a skill slug is kebab-case"));
        }
        if program.str(skill.manifest) != format!("skills/{slug}/SKILL.md") {
            return Err(invalid("skills", slug, "the manifest is not `skills/<slug>/SKILL.md`"));
        }
    }
    Ok(())
}

fn check_workflow(program: &Program, workflow: &crate::program::WorkflowProgram) -> Result<(), ArtifactError> {
    let slug = program.str(workflow.slug);
    for state in &workflow.states {
        let state_slug = program.str(state.slug);
        if !is_slug(state_slug) {
            return Err(invalid("states", &format!("{slug}.{state_slug}"), "a state slug is kebab-case"));
        }
        if workflow.states.iter().filter(|other| other.slug == state.slug).count() > 1 {
            return Err(invalid("states", &format!("{slug}.{state_slug}"), "the slug appears twice"));
        }
        if let Some(name) = state
            .requires
            .iter()
            .chain(&state.locks)
            .map(|name| program.str(*name))
            .find(|name| !is_variable_name(name))
        {
            return Err(invalid("states", &format!("{slug}.{state_slug}"), format!("`{name}` is not a variable name")));
        }
    }
    for trigger in &workflow.triggers {
        let id = program.str(trigger.id);
        if id.trim().is_empty() {
            return Err(invalid("triggers", slug, "a trigger has an empty id"));
        }
        if let Some(entry) =
            trigger.requires.iter().chain(&trigger.returns).find(|entry| !is_variable_name(program.str(entry.name)))
        {
            return Err(invalid(
                "triggers",
                &format!("{slug}.{id}"),
                format!("`{}` is not a variable name", program.str(entry.name)),
            ));
        }
    }
    for callee in &workflow.callees {
        let tool = program.str(callee.tool);
        let target = program.workflows.get(callee.workflow.0 as usize).map(|callee| program.str(callee.slug));
        if delegation_target(tool) != target {
            return Err(invalid("callees", tool, "the tool does not name the workflow it calls"));
        }
    }
    for script in &workflow.scripts {
        let path = program.str(script.path);
        if mount_source_path(path).as_deref() != Ok(path) {
            return Err(invalid("scripts", &format!("{slug}/{path}"), "a script path is a canonical relative path"));
        }
    }
    Ok(())
}
