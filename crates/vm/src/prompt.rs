//! Rendering the prompt of one model call from the artifact's templates.
//!
//! The static prefix was rendered at build time; here only the volatile block is filled:
//! the clock, the re-entry directive, the variables set (names only), the enforced
//! argument constraints with their `${{…}}` references resolved, and the signature of
//! the trigger that started the turn. Tool definitions are built once per surface.

use serde_json::{Value, json};

use archmax_program::program::{
    Program, StateProgram, Surface, TemplatePart, ToolKind, TriggerProgram, WorkflowProgram,
};
use archmax_stdlib::tools::schema;

use crate::kernel::resolve_reference;
use crate::model::ToolDefinition;
use archmax_program::inspect::glob_text as inspect_glob;

/// What the volatile block needs from the session.
pub(crate) struct VolatileInputs<'a> {
    pub now_ms: u64,
    pub variables: &'a Value,
    pub trigger: Option<&'a TriggerProgram>,
    pub child: bool,
    /// A terminal state re-entered by a new turn that must reset first.
    pub reentry: bool,
}

/// Renders a state's volatile block.
pub fn volatile(program: &Program, state: &StateProgram, inputs: &VolatileInputs<'_>) -> String {
    let mut out = String::with_capacity(1024);
    for part in &state.template {
        match part {
            TemplatePart::Text(text) => out.push_str(program.str(*text)),
            TemplatePart::Clock => out.push_str(&crate::clock::clock_line(inputs.now_ms)),
            TemplatePart::Reentry => {
                if inputs.reentry {
                    out.push_str(
                        "\n\nThis session already finished in this state. If this is a new message, call `archmax_reset` before you answer or do anything else; do not answer from here.",
                    );
                }
            }
            TemplatePart::Variables => {
                let names: Vec<&String> =
                    inputs.variables.as_object().map(|map| map.keys().collect()).unwrap_or_default();
                if names.is_empty() {
                    out.push_str("\n\nSession variables: none set yet.");
                } else {
                    let mut names: Vec<&str> = names.iter().map(|name| name.as_str()).collect();
                    names.sort_unstable();
                    out.push_str(&format!(
                        "\n\nSession variables set: {}. Read one with `archmax_get_variables`.",
                        names.join(", ")
                    ));
                }
            }
            TemplatePart::Constraints => {
                let lines = constraints(program, state, inputs.variables);
                if !lines.is_empty() {
                    out.push_str("\n\nEnforced argument constraints (a call with other values is refused):\n");
                    out.push_str(&lines.join("\n"));
                }
            }
            TemplatePart::Signature => {
                if let Some(trigger) = inputs.trigger {
                    let text = program.str(if inputs.child {
                        trigger.child_signature_prompt
                    } else {
                        trigger.signature_prompt
                    });
                    if !text.is_empty() {
                        out.push_str("\n\n");
                        out.push_str(text);
                    }
                }
            }
        }
    }
    out
}

/// One line per guarded grant, with references shown resolved (or named unresolved).
fn constraints(program: &Program, state: &StateProgram, variables: &Value) -> Vec<String> {
    let render = |glob: &archmax_program::glob::Glob| {
        let mut text = inspect_glob(glob);
        for path in glob.holes() {
            let reference = format!("${{{{{path}}}}}");
            let shown = match resolve_reference(path, variables) {
                Some(value) => value,
                None => format!("{reference} (not set yet)"),
            };
            text = text.replace(&reference, &shown);
        }
        text
    };
    let mut lines = Vec::new();
    for grant in &state.guards.grants {
        for rule in &grant.entries {
            let mut parts = Vec::new();
            for (argument, globs) in &rule.args {
                let options: Vec<String> = globs.iter().map(render).collect();
                parts.push(format!("`{}` matching {}", program.str(*argument), options.join(" or ")));
            }
            if let Some(paths) = &rule.paths {
                let options: Vec<String> = paths.iter().map(render).collect();
                parts.push(format!("paths matching {}", options.join(" or ")));
            }
            if !parts.is_empty() {
                lines.push(format!("- `{}`: {}", program.str(grant.tool), parts.join("; ")));
            }
        }
    }
    lines
}

/// The tool definitions of a surface, in order.
/// How a host tool no host describes is shown: by name, taking any arguments.
pub(crate) fn host_tool_definition(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: format!("`{name}`, a tool the host provides."),
        parameters: json!({ "type": "object", "additionalProperties": true }),
    }
}

pub fn tool_definitions(program: &Program, workflow: &WorkflowProgram, surface: &Surface) -> Vec<ToolDefinition> {
    surface
        .tools
        .iter()
        .map(|tool| {
            let name = program.str(tool.name);
            match tool.kind {
                ToolKind::Delegation(index) => {
                    let callee = &workflow.callees[index as usize];
                    ToolDefinition {
                        name: name.to_string(),
                        description: program.str(callee.description).to_string(),
                        parameters: serde_json::from_str(program.str(callee.parameters))
                            .unwrap_or_else(|_| json!({ "type": "object" })),
                    }
                }
                _ => match schema(name) {
                    Some(schema) => ToolDefinition {
                        name: schema.name,
                        description: schema.description,
                        parameters: schema.parameters,
                    },
                    None => host_tool_definition(name),
                },
            }
        })
        .collect()
}
