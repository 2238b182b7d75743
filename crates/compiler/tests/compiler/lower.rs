//! Lowering: every static decision the artifact carries, checked table by table.

use archmax_compiler::lower::{BuildInputs, lower};
use archmax_compiler::program::{GrantTier, MountReach, Op, Program, Reach, TemplatePart, ToolKind, WorkflowProgram};
use archmax_compiler::{analyze_workspace, load_memory};

fn build(files: &[(&str, &str)], selection: &[&str]) -> Program {
    let analysis = analyze_workspace(load_memory(files.iter().copied()).expect("workspace"));
    let report = analysis.report(&[]).expect("report");
    assert!(report.is_valid(), "{:#?}", report.distinct());
    let selection: Vec<String> = selection.iter().map(|slug| slug.to_string()).collect();
    lower(
        &analysis,
        &selection,
        &BuildInputs {
            platform_prompt: "Platform.\n<!-- top-level-only -->\nName it.\n<!-- /top-level-only -->\nEnd.",
        },
    )
    .expect("lowers")
}

fn workflow<'p>(program: &'p Program, slug: &str) -> &'p WorkflowProgram {
    program.workflow(slug).expect("workflow").1
}

fn surface_names(program: &Program, workflow: &WorkflowProgram, state: &str) -> Vec<String> {
    let state = workflow.states.iter().find(|candidate| program.str(candidate.slug) == state).expect("state");
    workflow.surface(state.surface).tools.iter().map(|tool| program.str(tool.name).to_string()).collect()
}

const DESK: &str = r#"
title: Desk
instructions: Be exact.
settings: { model: gpt-5-mini }
tools:
  allow_always: [ls, read_file, write_file, write_todos, archmax_eval]
  forbid_always: [{ tool: "*", paths: ["secret/**"] }]
skills: { allow_always: [policy] }
mounts: { allow_always: [{ mount: shared, access: read_write }] }
metadata: { canvas: { zoom: 2 } }
states:
  intake:
    triggers:
      manual:
        description: Handle one request.
        requires: [{ name: order_id, type: string }]
        returns: [{ name: outcome, type: string }]
    instructions: Read the request.
    tools:
      allow:
        - { tool: write_file, paths: ["reports/${{order_id}}/*.md"] }
        - crm_lookup
        - archmax_workflow_helper
      forbid: [write_todos]
    transitions:
      - to: check
        description: The request is read.
  check:
    type: code
    script: scripts/check.js
    mounts: { allow: [{ mount: shared, access: read }] }
    on_error: done
    transitions:
      - { to: review, description: The check passed. }
  review:
    type: human
    instructions: Approve the answer.
    evidence: [scratchpad/answer.md]
    transitions:
      - { to: done, type: approve, description: It is right. }
      - { to: intake, type: refine, description: It needs work. }
  done:
    model: gpt-5
    skills: { forbid: [policy] }
    instructions: Say goodbye.
"#;

const HELPER: &str = "instructions: Help.\nskills: { allow_always: [] }\nmounts: { allow_always: [] }\nstates:\n  work:\n    triggers:\n      manual:\n        requires: [{ name: order_id, type: string, pattern: \"^O-\" }]\n        returns: [{ name: facts, type: object }]\n    instructions: Find facts.\n";
const SCRIPT: &str = "/** Check. */\nexport default async function ({ tools }) {\n  await tools.archmax_advance({ to: \"review\", reason: \"ok\" });\n}\n";

fn desk() -> Program {
    build(
        &[
            ("workflows/desk/workflow.yaml", DESK),
            ("workflows/desk/scripts/check.js", SCRIPT),
            ("workflows/helper/workflow.yaml", HELPER),
            (
                "workflows/unrelated/workflow.yaml",
                "instructions: x\nskills: { allow_always: [] }\nmounts: { allow_always: [] }\nstates: { a: { triggers: { manual: }, instructions: x } }\n",
            ),
            ("skills/policy/SKILL.md", "---\nname: policy\ndescription: The refund policy\n---\nBody.\n"),
            ("archmax.toml", "[mounts.\"shared/\"]\nread_only = false\ngoverned = true\n"),
        ],
        &["desk"],
    )
}

#[test]
fn a_selection_brings_its_callees_and_nothing_else() {
    let program = desk();
    let slugs: Vec<&str> = program.workflows.iter().map(|workflow| program.str(workflow.slug)).collect();
    assert_eq!(slugs, ["desk", "helper"]);
}

#[test]
fn surfaces_list_grants_then_state_tools_then_controls() {
    let program = desk();
    let desk = workflow(&program, "desk");
    assert_eq!(
        surface_names(&program, desk, "intake"),
        [
            "ls",
            "read_file",
            "write_file",
            "archmax_eval",
            "crm_lookup",
            "archmax_workflow_helper",
            "archmax_advance",
            "archmax_reset",
            "archmax_wait",
            "archmax_raise",
            "archmax_get_variables",
            "archmax_set_variables"
        ],
        "write_todos is forbidden by name in intake"
    );
    // A code state never has write_todos or archmax_eval, and has archmax_get_history.
    assert_eq!(
        surface_names(&program, desk, "check"),
        [
            "ls",
            "read_file",
            "write_file",
            "archmax_advance",
            "archmax_raise",
            "archmax_get_variables",
            "archmax_set_variables",
            "archmax_get_history"
        ]
    );
    // A terminal state has no archmax_advance.
    assert!(!surface_names(&program, desk, "done").contains(&"archmax_advance".to_string()));
}

#[test]
fn a_state_entry_narrows_the_workflow_grant() {
    let program = desk();
    let desk = workflow(&program, "desk");
    let intake = &desk.states[0];
    let write = intake.guards.grants.iter().find(|grant| program.str(grant.tool) == "write_file").expect("write_file");
    assert_eq!(write.tier, GrantTier::State);
    assert_eq!(write.entries.len(), 1);
    let read = intake.guards.grants.iter().find(|grant| program.str(grant.tool) == "read_file").expect("read_file");
    assert_eq!(read.tier, GrantTier::Workflow);
    assert!(read.entries.is_empty(), "a bare allow_always entry grants any arguments");
    let delegation =
        desk.surface(intake.surface).tools.iter().find(|tool| program.str(tool.name) == "archmax_workflow_helper");
    assert!(matches!(delegation.map(|tool| tool.kind), Some(ToolKind::Delegation(0))));
    assert_eq!(desk.forbid_always.len(), 1);
}

#[test]
fn skills_and_mounts_carry_their_standing_per_state() {
    let program = desk();
    let desk = workflow(&program, "desk");
    let standing = |state: usize| desk.states[state].skill_access.iter().map(|(_, reach)| *reach).collect::<Vec<_>>();
    assert_eq!(standing(0), [Reach::Enabled]);
    assert_eq!(standing(3), [Reach::Forbidden]);
    let shared = |state: usize| {
        desk.states[state]
            .mount_access
            .iter()
            .find(|(name, _)| program.str(*name) == "shared")
            .map(|(_, reach)| *reach)
            .expect("shared")
    };
    assert_eq!(shared(0), MountReach::Reachable { writable: true }, "a read_write grant on a writable mount");
    assert_eq!(shared(1), MountReach::Reachable { writable: false }, "the state narrows it to read");
}

#[test]
fn ops_follow_the_state_type() {
    let program = desk();
    let desk = workflow(&program, "desk");
    assert!(matches!(desk.states[0].ops[..], [Op::RunAgent(_)]));
    assert!(matches!(desk.states[1].ops[..], [Op::RunCode(_, _)]));
    assert!(matches!(desk.states[2].ops[..], [Op::ParkForDecision]));
    assert!(matches!(desk.states[3].ops[..], [Op::RunAgent(_), Op::Complete]));
    assert_eq!(desk.states[2].decision.as_ref().map(|decision| decision.evidence.len()), Some(1));
    assert_eq!(desk.states[1].on_error.map(|id| id.0), Some(3));
}

#[test]
fn models_resolve_state_then_workflow() {
    let program = desk();
    let desk = workflow(&program, "desk");
    assert_eq!(desk.states[0].model.map(|sym| program.str(sym)), Some("gpt-5-mini"));
    assert_eq!(desk.states[3].model.map(|sym| program.str(sym)), Some("gpt-5"));
    assert_eq!(desk.states[1].model, None, "a code state makes no model call");
}

#[test]
fn templates_mark_what_each_transition_leads_to() {
    let program = desk();
    let desk = workflow(&program, "desk");
    let text = |state: usize| {
        desk.states[state]
            .template
            .iter()
            .filter_map(|part| match part {
                TemplatePart::Text(text) => Some(program.str(*text)),
                _ => None,
            })
            .collect::<String>()
    };
    assert!(text(0).contains("- to `check` (code) — The request is read."), "{}", text(0));
    assert!(text(2).contains("- to `done` (approve, terminal) — It is right."), "{}", text(2));
    assert!(text(3).contains("terminal"), "{}", text(3));
    assert!(text(0).contains("**`policy`** — The refund policy."), "{}", text(0));
    assert!(matches!(desk.states[0].template[0], TemplatePart::Clock));
}

#[test]
fn the_prompt_prefix_has_no_state_and_children_skip_top_level_blocks() {
    let program = desk();
    let desk = workflow(&program, "desk");
    let prefix = program.str(desk.prompt_prefix);
    assert!(prefix.contains("# Workflow: Desk\n\n## Instructions\n\nBe exact."));
    assert!(prefix.contains("Name it."));
    assert!(!prefix.contains("top-level-only"));
    assert!(!prefix.contains("intake"), "no state is named in the static prefix");
    assert!(!program.str(desk.child_prompt_prefix).contains("Name it."));
}

#[test]
fn signatures_publish_json_schema_and_callee_tools() {
    let program = desk();
    let desk = workflow(&program, "desk");
    let schema: serde_json::Value = serde_json::from_str(program.str(desk.triggers[0].schema)).expect("JSON");
    assert_eq!(schema["required"], serde_json::json!(["order_id"]));
    assert_eq!(schema["properties"]["order_id"]["type"], "string");
    let callee = &desk.callees[0];
    assert!(
        program.str(callee.description).starts_with("Runs the workflow `helper`"),
        "{}",
        program.str(callee.description)
    );
    let parameters: serde_json::Value = serde_json::from_str(program.str(callee.parameters)).expect("JSON");
    assert_eq!(parameters["properties"]["order_id"]["pattern"], "^O-");
    assert_eq!(callee.returns.iter().map(|sym| program.str(*sym)).collect::<Vec<_>>(), ["facts"]);
}

#[test]
fn the_spec_hash_ignores_metadata_and_key_order_but_not_content() {
    let hash = |spec: &str| {
        let program = build(&[("workflows/w/workflow.yaml", spec)], &[]);
        program.workflows[0].spec_hash.clone()
    };
    let base = "instructions: A.\nstates:\n  a: { triggers: { manual: }, instructions: B. }\n";
    let reordered = "states:\n  a: { instructions: B., triggers: { manual: } }\ninstructions: A.\nmetadata: { x: 1 }\n";
    let edited = "instructions: A!\nstates:\n  a: { triggers: { manual: }, instructions: B. }\n";
    assert_eq!(hash(base), hash(reordered));
    assert_ne!(hash(base), hash(edited));
}
