//! `archmax inspect`: a readable disassembly of an artifact.
//!
//! [`view`] turns a [`Program`] into JSON with every interned string resolved (the
//! `--format json` output); [`text`] prints the same tables for people: per workflow its
//! settings, triggers with their schemas, prompts, scripts and callees, and per state its
//! ops, transitions, variables, budget, model, skills and mounts, surface, guard table and
//! volatile template. Filters select one workflow and one state.

use serde_json::{Value, json};

use crate::glob::{Glob, Segment, Token};
use crate::program::{
    BoundProgram, GrantTier, MountReach, Op, Program, Reach, Rule, SignatureEntry, StateProgram, TemplatePart,
    ToolKind, TriggerProgram, WorkflowProgram,
};

/// Which parts of the program to show.
#[derive(Default)]
pub struct Filter<'a> {
    pub workflow: Option<&'a str>,
    pub state: Option<&'a str>,
}

/// Why a filter selects nothing.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("the artifact has no workflow `{0}` (it has {1})")]
    Workflow(String, String),
    #[error("the workflow `{0}` has no state `{1}` (it has {2})")]
    State(String, String, String),
}

fn names<'p>(program: &'p Program, items: impl Iterator<Item = crate::program::Sym>) -> String {
    let names: Vec<&'p str> = items.map(|sym| program.str(sym)).collect();
    crate::diagnostic::list_names(&names)
}

/// Checks a filter against the program.
pub fn check_filter(program: &Program, filter: &Filter<'_>) -> Result<(), FilterError> {
    let Some(slug) = filter.workflow else {
        return Ok(());
    };
    let Some((_, workflow)) = program.workflow(slug) else {
        return Err(FilterError::Workflow(slug.to_string(), names(program, program.workflows.iter().map(|w| w.slug))));
    };
    if let Some(state) = filter.state
        && !workflow.states.iter().any(|candidate| program.str(candidate.slug) == state)
    {
        return Err(FilterError::State(
            slug.to_string(),
            state.to_string(),
            names(program, workflow.states.iter().map(|state| state.slug)),
        ));
    }
    Ok(())
}

/// A glob written back as text.
pub fn glob_text(glob: &Glob) -> String {
    let alternatives: Vec<String> = glob
        .alternatives
        .iter()
        .map(|pattern| {
            pattern
                .segments
                .iter()
                .map(|segment| match segment {
                    Segment::Globstar => "**".to_string(),
                    Segment::Tokens(tokens) => tokens
                        .iter()
                        .map(|token| match token {
                            Token::Literal(text) => text.clone(),
                            Token::Star => "*".to_string(),
                            Token::Any => "?".to_string(),
                            Token::Class { negated, ranges } => {
                                let body: String = ranges
                                    .iter()
                                    .map(
                                        |(low, high)| {
                                            if low == high { low.to_string() } else { format!("{low}-{high}") }
                                        },
                                    )
                                    .collect();
                                format!("[{}{body}]", if *negated { "!" } else { "" })
                            }
                            Token::Hole(path) => format!("${{{{{path}}}}}"),
                        })
                        .collect(),
                })
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    if alternatives.len() == 1 { alternatives[0].clone() } else { format!("{{{}}}", alternatives.join(",")) }
}

fn rule_json(program: &Program, rule: &Rule) -> Value {
    json!({
        "tool": rule.tool.map(|tool| program.str(tool)).unwrap_or("*"),
        "args": rule.args.iter().map(|(argument, globs)| json!({
            "argument": program.str(*argument),
            "globs": globs.iter().map(glob_text).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "paths": rule.paths.as_ref().map(|paths| paths.iter().map(glob_text).collect::<Vec<_>>()),
        "written": program.str(rule.display),
    })
}

fn bound_json(bound: &BoundProgram) -> Value {
    match bound {
        BoundProgram::Number(value) => json!(value),
        BoundProgram::Date(day) => json!({ "day": day }),
        BoundProgram::DateTime(seconds) => json!({ "epoch_seconds": seconds }),
        BoundProgram::Today => json!("today"),
        BoundProgram::Now => json!("now"),
    }
}

fn entry_json(program: &Program, entry: &SignatureEntry) -> Value {
    let rules = &entry.rules;
    let mut value = json!({
        "name": program.str(entry.name),
        "type": entry.ty.map(|ty| ty.as_str()),
        "description": entry.description.map(|text| program.str(text)),
    });
    let mut rule_values = serde_json::Map::new();
    let strings = [("format", rules.format), ("pattern", rules.pattern), ("content", rules.content)];
    for (key, sym) in strings {
        if let Some(sym) = sym {
            rule_values.insert(key.into(), json!(program.str(sym)));
        }
    }
    let counts = [
        ("minLength", rules.min_length),
        ("maxLength", rules.max_length),
        ("minItems", rules.min_items),
        ("maxItems", rules.max_items),
        ("maxSize", rules.max_size),
    ];
    for (key, count) in counts {
        if let Some(count) = count {
            rule_values.insert(key.into(), json!(count));
        }
    }
    if let Some(values) = &rules.enumeration {
        rule_values.insert("enum".into(), json!(values.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>()));
    }
    if let Some(values) = &rules.accept {
        rule_values.insert("accept".into(), json!(values.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>()));
    }
    if let Some(bound) = &rules.minimum {
        rule_values.insert("minimum".into(), bound_json(bound));
    }
    if let Some(bound) = &rules.maximum {
        rule_values.insert("maximum".into(), bound_json(bound));
    }
    value["rules"] = Value::Object(rule_values);
    value
}

fn trigger_json(program: &Program, workflow: &WorkflowProgram, trigger: &TriggerProgram) -> Value {
    json!({
        "id": program.str(trigger.id),
        "entry": program.str(workflow.state(trigger.entry).slug),
        "session": trigger.session.as_ref().map(|path| path.to_string()),
        "message": trigger.message.as_ref().map(|message| match message {
            Some(path) => json!(path.to_string()),
            None => json!(false),
        }),
        "connection": trigger.connection.map(|sym| program.str(sym)),
        "description": trigger.description.map(|sym| program.str(sym)),
        "requires": trigger.requires.iter().map(|entry| entry_json(program, entry)).collect::<Vec<_>>(),
        "returns": trigger.returns.iter().map(|entry| entry_json(program, entry)).collect::<Vec<_>>(),
        "schema": serde_json::from_str::<Value>(program.str(trigger.schema)).unwrap_or(Value::Null),
    })
}

fn op_text(program: &Program, workflow: &WorkflowProgram, op: &Op) -> String {
    match op {
        Op::RunAgent(surface) => format!("run-agent surface#{}", surface.0),
        Op::ParkForDecision => "park-for-decision".to_string(),
        Op::RunCode(script, surface) => {
            format!("run-code {} surface#{}", program.str(workflow.script(*script).path), surface.0)
        }
        Op::RunGrader(surface) => format!("run-grader surface#{}", surface.0),
        Op::Complete => "complete (check returns)".to_string(),
    }
}

fn template_json(program: &Program, part: &TemplatePart) -> Value {
    match part {
        TemplatePart::Text(text) => json!({ "text": program.str(*text) }),
        TemplatePart::Clock => json!({ "hole": "clock" }),
        TemplatePart::Reentry => json!({ "hole": "reentry" }),
        TemplatePart::Variables => json!({ "hole": "variables" }),
        TemplatePart::Constraints => json!({ "hole": "constraints" }),
        TemplatePart::Signature => json!({ "hole": "signature" }),
    }
}

fn reach_text(reach: Reach) -> &'static str {
    match reach {
        Reach::Enabled => "enabled",
        Reach::Forbidden => "forbidden",
        Reach::NotAllowed => "not-allowed",
    }
}

fn mount_reach_text(reach: MountReach) -> &'static str {
    match reach {
        MountReach::Reachable { writable: true } => "read-write",
        MountReach::Reachable { writable: false } => "read-only",
        MountReach::Forbidden => "forbidden",
        MountReach::NotAllowed => "not-allowed",
    }
}

fn state_json(program: &Program, workflow: &WorkflowProgram, state: &StateProgram) -> Value {
    json!({
        "state": program.str(state.slug),
        "type": state.kind.as_str(),
        "title": state.title.map(|sym| program.str(sym)),
        "ops": state.ops.iter().map(|op| op_text(program, workflow, op)).collect::<Vec<_>>(),
        "transitions": state.transitions.iter().map(|transition| json!({
            "to": program.str(workflow.state(transition.target).slug),
            "type": transition.kind.as_str(),
            "marker": transition.marker.map(|sym| program.str(sym)),
            "description": transition.description.map(|sym| program.str(sym)),
        })).collect::<Vec<_>>(),
        "requires": state.requires.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
        "locks": state.locks.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
        "on_error": state.on_error.map(|target| program.str(workflow.state(target).slug)),
        "budget": { "timeoutMs": state.budget.timeout_ms, "maxParks": state.budget.max_parks },
        "model": state.model.map(|sym| program.str(sym)),
        "skills": state.skill_access.iter().map(|(name, reach)| json!({ "skill": program.str(*name), "reach": reach_text(*reach) })).collect::<Vec<_>>(),
        "mounts": state.mount_access.iter().map(|(name, reach)| json!({ "mount": program.str(*name), "reach": mount_reach_text(*reach) })).collect::<Vec<_>>(),
        "surface": state.surface.0,
        "guards": {
            "forbid": state.guards.forbid.iter().map(|rule| rule_json(program, rule)).collect::<Vec<_>>(),
            "controls": state.guards.controls.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
            "grants": state.guards.grants.iter().map(|grant| json!({
                "tool": program.str(grant.tool),
                "tier": match grant.tier { GrantTier::State => "state", GrantTier::Workflow => "workflow", GrantTier::Default => "default" },
                "entries": grant.entries.iter().map(|rule| rule_json(program, rule)).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        },
        "template": state.template.iter().map(|part| template_json(program, part)).collect::<Vec<_>>(),
        "decision": state.decision.as_ref().map(|decision| json!({
            "instructions": program.str(decision.instructions),
            "evidence": decision.evidence.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
            "approvers": decision.approvers.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
        })),
    })
}

fn tool_kind_text(kind: ToolKind) -> String {
    match kind {
        ToolKind::Control => "control".to_string(),
        ToolKind::Builtin => "builtin".to_string(),
        ToolKind::Delegation(index) => format!("delegation callee#{index}"),
        ToolKind::Host => "host".to_string(),
    }
}

/// The whole program (or the filtered part) as JSON with strings resolved.
pub fn view(program: &Program, filter: &Filter<'_>) -> Value {
    let workflows: Vec<Value> = program
        .workflows
        .iter()
        .filter(|workflow| filter.workflow.is_none_or(|slug| program.str(workflow.slug) == slug))
        .map(|workflow| {
            let settings = &workflow.settings;
            json!({
                "workflow": program.str(workflow.slug),
                "title": workflow.title.map(|sym| program.str(sym)),
                "spec_hash": workflow.spec_hash,
                "disabled": workflow.disabled,
                "entry": program.str(workflow.state(workflow.entry).slug),
                "settings": {
                    "model": settings.model.map(|sym| program.str(sym)),
                    "timeoutMs": settings.timeout_ms,
                    "memoryLimitBytes": settings.memory_limit_bytes,
                    "maxPtcCalls": settings.max_ptc_calls,
                    "maxResultChars": settings.max_result_chars,
                    "prompt_cache": {
                        "enabled": settings.prompt_cache,
                        "ttl": settings.prompt_cache_ttl.map(|sym| program.str(sym)),
                    },
                },
                "tests": {
                    "caseTimeoutMs": workflow.tests.case_timeout_ms,
                    "judge": workflow.tests.judge.as_ref().map(|judge| json!({
                        "model": judge.model.map(|sym| program.str(sym)),
                        "temperature": judge.temperature,
                        "maxTokens": judge.max_tokens,
                    })),
                },
                "triggers": workflow.triggers.iter().map(|trigger| trigger_json(program, workflow, trigger)).collect::<Vec<_>>(),
                "forbid_always": workflow.forbid_always.iter().map(|rule| rule_json(program, rule)).collect::<Vec<_>>(),
                "skills_forbid_always": workflow.skills_forbid_always.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
                "mounts_forbid_always": workflow.mounts_forbid_always.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
                "mounts_read_write": workflow.mounts_read_write.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
                "surfaces": workflow.surfaces.iter().map(|surface| surface.tools.iter().map(|tool| json!({
                    "tool": program.str(tool.name),
                    "kind": tool_kind_text(tool.kind),
                    "paths": tool.paths.iter().map(|(argument, access)| format!("{}:{}", program.str(*argument), access.as_str())).collect::<Vec<_>>(),
                })).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "states": workflow.states.iter()
                    .filter(|state| filter.state.is_none_or(|slug| program.str(state.slug) == slug))
                    .map(|state| state_json(program, workflow, state)).collect::<Vec<_>>(),
                "scripts": workflow.scripts.iter().map(|script| json!({
                    "path": program.str(script.path),
                    "source_bytes": program.str(script.source).len(),
                    "bytecode_bytes": script.bytecode.len(),
                })).collect::<Vec<_>>(),
                "callees": workflow.callees.iter().map(|callee| json!({
                    "tool": program.str(callee.tool),
                    "workflow": program.workflows.get(callee.workflow.0 as usize).map(|target| program.str(target.slug)),
                    "description": program.str(callee.description),
                    "parameters": serde_json::from_str::<Value>(program.str(callee.parameters)).unwrap_or(Value::Null),
                    "returns": callee.returns.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "prompt_prefix": program.str(workflow.prompt_prefix),
                "child_prompt_prefix_bytes": program.str(workflow.child_prompt_prefix).len(),
            })
        })
        .collect();
    json!({
        "contract": program.contract,
        "compiler": program.compiler,
        "strings": program.strings.len(),
        "mounts": program.mounts.iter().map(|mount| json!({
            "key": program.str(mount.key),
            "name": program.str(mount.name),
            "read_only": mount.read_only,
            "governed": mount.governed,
            "searchable": mount.searchable,
            "source": program.str(mount.source),
        })).collect::<Vec<_>>(),
        "skills": program.skills.iter().map(|skill| json!({
            "skill": program.str(skill.slug),
            "description": program.str(skill.description),
            "manifest": program.str(skill.manifest),
        })).collect::<Vec<_>>(),
        "workflows": workflows,
    })
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|line| if line.is_empty() { prefix.trim_end().to_string() } else { format!("{prefix}{line}") })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rule_line(program: &Program, rule: &Rule) -> String {
    let mut parts = vec![rule.tool.map(|tool| program.str(tool)).unwrap_or("*").to_string()];
    for (argument, globs) in &rule.args {
        parts.push(format!(
            "{}∈[{}]",
            program.str(*argument),
            globs.iter().map(glob_text).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(paths) = &rule.paths {
        parts.push(format!("paths∈[{}]", paths.iter().map(glob_text).collect::<Vec<_>>().join(", ")));
    }
    parts.join(" ")
}

/// The human-readable disassembly.
pub fn text(program: &Program, filter: &Filter<'_>, header: &str) -> String {
    let mut out = String::new();
    out.push_str(header);
    workspace_text(program, &mut out);
    for workflow in &program.workflows {
        if filter.workflow.is_some_and(|slug| program.str(workflow.slug) != slug) {
            continue;
        }
        workflow_header_text(program, workflow, &mut out);
        triggers_text(program, workflow, &mut out);
        surfaces_text(program, workflow, &mut out);
        for state in &workflow.states {
            if filter.state.is_some_and(|slug| program.str(state.slug) != slug) {
                continue;
            }
            state_header_text(program, workflow, state, &mut out);
            state_access_text(program, state, &mut out);
            template_text(program, state, &mut out);
        }
        if filter.state.is_none() {
            workflow_tables_text(program, workflow, &mut out);
        }
    }
    out
}

/// The artifact's header lines and its mount and skill tables.
fn workspace_text(program: &Program, out: &mut String) {
    out.push_str(&format!(
        "contract {} · compiler {} · {} interned strings\n",
        program.contract,
        program.compiler,
        program.strings.len()
    ));
    out.push_str("\nmounts:\n");
    for mount in &program.mounts {
        out.push_str(&format!(
            "  {:<16} name={} {}{}{} source={}\n",
            program.str(mount.key),
            program.str(mount.name),
            if mount.read_only { "read-only" } else { "read-write" },
            if mount.governed { " governed" } else { "" },
            if mount.searchable { "" } else { " browse-only" },
            program.str(mount.source)
        ));
    }
    out.push_str("\nskills:\n");
    for skill in &program.skills {
        out.push_str(&format!("  {:<16} {}\n", program.str(skill.slug), program.str(skill.description)));
    }
}

/// A workflow's header, settings and workflow-wide denials.
fn workflow_header_text(program: &Program, workflow: &WorkflowProgram, out: &mut String) {
    let settings = &workflow.settings;
    out.push_str(&format!(
        "\n== workflow {}{} ==\n",
        program.str(workflow.slug),
        workflow.title.map(|title| format!(" ({})", program.str(title))).unwrap_or_default()
    ));
    out.push_str(&format!("spec hash   {}\n", workflow.spec_hash));
    out.push_str(&format!("disabled    {}\n", workflow.disabled));
    out.push_str(&format!("entry       {}\n", program.str(workflow.state(workflow.entry).slug)));
    out.push_str(&format!(
        "settings    model={} timeoutMs={} memoryLimitBytes={} maxPtcCalls={} maxResultChars={} prompt_cache={}/{}\n",
        settings.model.map(|sym| program.str(sym)).unwrap_or("(host default)"),
        settings.timeout_ms,
        settings.memory_limit_bytes,
        settings.max_ptc_calls.map(|calls| calls.to_string()).unwrap_or_else(|| "unbounded".to_string()),
        settings.max_result_chars,
        match settings.prompt_cache {
            Some(true) => "on",
            Some(false) => "off",
            None => "(host default)",
        },
        settings.prompt_cache_ttl.map(|sym| program.str(sym)).unwrap_or("(host default)")
    ));
    out.push_str(&format!(
        "tests       caseTimeoutMs={} judge={}\n",
        workflow.tests.case_timeout_ms,
        match &workflow.tests.judge {
            Some(judge) =>
                judge.model.map(|sym| program.str(sym).to_string()).unwrap_or_else(|| "(env model)".to_string()),
            None => "none".to_string(),
        }
    ));
    if !workflow.forbid_always.is_empty() {
        out.push_str("forbid_always\n");
        for rule in &workflow.forbid_always {
            out.push_str(&format!("  {}\n", rule_line(program, rule)));
        }
    }
}

/// Each trigger: its entry, session and message paths, signature and schema.
fn triggers_text(program: &Program, workflow: &WorkflowProgram, out: &mut String) {
    out.push_str("\ntriggers:\n");
    for trigger in &workflow.triggers {
        out.push_str(&format!("  {} → {}", program.str(trigger.id), program.str(workflow.state(trigger.entry).slug)));
        if let Some(session) = &trigger.session {
            out.push_str(&format!(" session={session}"));
        }
        match &trigger.message {
            Some(Some(path)) => out.push_str(&format!(" message={path}")),
            Some(None) => out.push_str(" message=false"),
            None => {}
        }
        if let Some(connection) = trigger.connection {
            out.push_str(&format!(" connection={}", program.str(connection)));
        }
        out.push('\n');
        for (label, entries) in [("requires", &trigger.requires), ("returns", &trigger.returns)] {
            for entry in entries.iter() {
                out.push_str(&format!("    {label} {}\n", entry_json(program, entry)));
            }
        }
        out.push_str(&format!("    schema {}\n", program.str(trigger.schema)));
    }
}

/// The deduplicated tool surfaces, by index.
fn surfaces_text(program: &Program, workflow: &WorkflowProgram, out: &mut String) {
    out.push_str("\nsurfaces:\n");
    for (index, surface) in workflow.surfaces.iter().enumerate() {
        let tools: Vec<String> = surface
            .tools
            .iter()
            .map(|tool| match tool.kind {
                ToolKind::Builtin | ToolKind::Control => program.str(tool.name).to_string(),
                other => format!("{} ({})", program.str(tool.name), tool_kind_text(other)),
            })
            .collect();
        out.push_str(&format!("  #{index}: {}\n", tools.join(", ")));
    }
}

/// A state's kind, ops, transitions, bounds and model.
fn state_header_text(program: &Program, workflow: &WorkflowProgram, state: &StateProgram, out: &mut String) {
    out.push_str(&format!("\nstate {} [{}]\n", program.str(state.slug), state.kind.as_str()));
    let ops: Vec<String> = state.ops.iter().map(|op| op_text(program, workflow, op)).collect();
    out.push_str(&format!("  ops         {}\n", ops.join("; ")));
    for transition in &state.transitions {
        out.push_str(&format!(
            "  → {}{}{}{}\n",
            program.str(workflow.state(transition.target).slug),
            if transition.kind == crate::program::TransitionType::None {
                String::new()
            } else {
                format!(" [{}]", transition.kind.as_str())
            },
            transition.marker.map(|marker| format!(" ({})", program.str(marker))).unwrap_or_default(),
            transition.description.map(|text| format!(" — {}", program.str(text))).unwrap_or_default(),
        ));
    }
    if let Some(target) = state.on_error {
        out.push_str(&format!("  on_error    {}\n", program.str(workflow.state(target).slug)));
    }
    if !state.requires.is_empty() {
        out.push_str(&format!(
            "  requires    {}\n",
            state.requires.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", ")
        ));
    }
    if !state.locks.is_empty() {
        out.push_str(&format!(
            "  locks       {}\n",
            state.locks.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", ")
        ));
    }
    if state.budget.timeout_ms.is_some() || state.budget.max_parks.is_some() {
        out.push_str(&format!(
            "  budget      timeoutMs={} maxParks={}\n",
            state.budget.timeout_ms.map(|value| value.to_string()).unwrap_or_else(|| "-".to_string()),
            state.budget.max_parks.map(|value| value.to_string()).unwrap_or_else(|| "-".to_string())
        ));
    }
    if let Some(model) = state.model {
        out.push_str(&format!("  model       {}\n", program.str(model)));
    }
}

/// What a state may reach: skills, mounts, its surface, controls, forbids, grants and
/// its decision record.
fn state_access_text(program: &Program, state: &StateProgram, out: &mut String) {
    let skills: Vec<String> = state
        .skill_access
        .iter()
        .map(|(name, reach)| format!("{}={}", program.str(*name), reach_text(*reach)))
        .collect();
    if !skills.is_empty() {
        out.push_str(&format!("  skills      {}\n", skills.join(" ")));
    }
    let mounts: Vec<String> = state
        .mount_access
        .iter()
        .map(|(name, reach)| format!("{}={}", program.str(*name), mount_reach_text(*reach)))
        .collect();
    out.push_str(&format!("  mounts      {}\n", mounts.join(" ")));
    out.push_str(&format!("  surface     #{}\n", state.surface.0));
    out.push_str(&format!(
        "  controls    {}\n",
        state.guards.controls.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", ")
    ));
    for rule in &state.guards.forbid {
        out.push_str(&format!("  forbid      {}\n", rule_line(program, rule)));
    }
    for grant in &state.guards.grants {
        let tier = match grant.tier {
            GrantTier::State => "state",
            GrantTier::Workflow => "workflow",
            GrantTier::Default => "default",
        };
        if grant.entries.is_empty() {
            out.push_str(&format!("  grant       {} ({tier}, any arguments)\n", program.str(grant.tool)));
        } else {
            for rule in &grant.entries {
                out.push_str(&format!("  grant       {} ({tier})\n", rule_line(program, rule)));
            }
        }
    }
    if let Some(decision) = &state.decision {
        out.push_str(&format!(
            "  decision    evidence=[{}] approvers=[{}]\n",
            decision.evidence.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", "),
            decision.approvers.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", ")
        ));
    }
}

/// A state's volatile template, holes shown by name.
fn template_text(program: &Program, state: &StateProgram, out: &mut String) {
    out.push_str("  template\n");
    for part in &state.template {
        match part {
            TemplatePart::Text(text) => {
                out.push_str(&format!("{}\n", indent(program.str(*text).trim_matches('\n'), "    │ ")))
            }
            TemplatePart::Clock => out.push_str("    ⟨clock⟩\n"),
            TemplatePart::Reentry => out.push_str("    ⟨re-entry directive⟩\n"),
            TemplatePart::Variables => out.push_str("    ⟨variables set⟩\n"),
            TemplatePart::Constraints => out.push_str("    ⟨enforced constraints⟩\n"),
            TemplatePart::Signature => out.push_str("    ⟨trigger signature⟩\n"),
        }
    }
}

/// A workflow's scripts, callees and rendered prompt prefix.
fn workflow_tables_text(program: &Program, workflow: &WorkflowProgram, out: &mut String) {
    out.push_str("\nscripts:\n");
    for script in &workflow.scripts {
        out.push_str(&format!(
            "  {} source={} bytes bytecode={} bytes\n",
            program.str(script.path),
            program.str(script.source).len(),
            script.bytecode.len()
        ));
    }
    out.push_str("\ncallees:\n");
    for callee in &workflow.callees {
        out.push_str(&format!(
            "  {} → {} returns [{}]\n    {}\n    parameters {}\n",
            program.str(callee.tool),
            program.workflows.get(callee.workflow.0 as usize).map(|target| program.str(target.slug)).unwrap_or("?"),
            callee.returns.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>().join(", "),
            program.str(callee.description),
            program.str(callee.parameters)
        ));
    }
    out.push_str(&format!(
        "\nprompt prefix ({} bytes; child variant {} bytes):\n{}\n",
        program.str(workflow.prompt_prefix).len(),
        program.str(workflow.child_prompt_prefix).len(),
        indent(program.str(workflow.prompt_prefix).trim_end(), "  │ ")
    ));
}
