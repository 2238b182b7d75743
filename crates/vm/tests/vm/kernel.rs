//! The governance kernel, as a table: one row per rule id and per precedence case.

use serde_json::{Value, json};

use archmax_compiler::program::{Program, StateProgram};
use archmax_compiler::{Code, Severity};
use archmax_config::mounts::MountTable;
use archmax_vm::kernel::{Call, Inherited, Origin, Policy, Rule, decide, listed, may_read};
use archmax_vm::runtime::mount_table;

use crate::support::compile;

const SPEC: &str = r#"
title: Kernel
instructions: Test every rule.
tools:
  allow_always: [ls, read_file, write_file, edit_file, glob, grep, copy_file, move_file, archmax_run, archmax_eval]
  forbid_always:
    - remove_file
    - { tool: "*", paths: ["secrets/**"] }
skills: { allow_always: [policy] }
mounts: { allow_always: [] }
states:
  work:
    triggers:
      manual:
        requires: [{ name: order_id, type: string }]
    instructions: Work.
    skills: { allow: [] }
    mounts: { allow: [{ mount: shared, access: read_write }, { mount: library, access: read }] }
    tools:
      allow:
        - { tool: write_file, paths: ["reports/${{order_id}}/*.md"] }
        - { tool: send_mail, args: { to: ["*@example.com"] } }
        - { tool: notify, args: { channel: ["${{channel}}"] } }
        - crm_lookup
        - { tool: copy_file, paths: ["reports/**"] }
        - { tool: grep, paths: ["notes/*"] }
      forbid:
        - { tool: read_file, paths: ["drafts/**"] }
        - { tool: write_file, paths: ["archive/**"] }
    transitions:
      - { to: done, description: The work is done. }
  done:
    instructions: Finish.
    skills: { forbid: [policy] }
    mounts: { forbid: [shared] }
"#;

fn program() -> Program {
    compile(&[
        ("workflows/kernel/workflow.yaml", SPEC),
        ("skills/policy/SKILL.md", "---\nname: policy\ndescription: The policy.\n---\n"),
        ("skills/other/SKILL.md", "---\nname: other\ndescription: Another bundle.\n---\n"),
        (
            "archmax.toml",
            "[mounts.\"shared/\"]\nread_only = false\ngoverned = true\n[mounts.\"library/\"]\nread_only = false\ngoverned = true\n[mounts.\"vault/\"]\ngoverned = true\n",
        ),
    ])
}

fn mounts(program: &Program) -> MountTable {
    mount_table(program)
}

fn state<'p>(program: &'p Program, slug: &str) -> &'p StateProgram {
    program.workflows[0].states.iter().find(|state| program.str(state.slug) == slug).expect("state")
}

struct Row {
    state: &'static str,
    tool: &'static str,
    args: Value,
    reply_only: bool,
    allowed: bool,
    rule: &'static str,
}

fn row(state: &'static str, tool: &'static str, args: Value, allowed: bool, rule: &'static str) -> Row {
    Row { state, tool, args, reply_only: false, allowed, rule }
}

/// The table: one row per rule id and per precedence case.
fn precedence_rows() -> Vec<Row> {
    vec![
        // Safety comes first, whatever any list says.
        row(
            "work",
            "read_file",
            json!({ "file_path": "workflows/kernel/workflow.yaml" }),
            false,
            "zone.governance-plane",
        ),
        row("work", "read_file", json!({ "file_path": "../etc/passwd" }), false, "zone.escape"),
        row("work", "read_file", json!({ "file_path": 42 }), false, "tool.path-argument"),
        row("work", "archmax_run", json!({ "file_path": "scratchpad/run.js" }), false, "script.skill-only"),
        row("work", "eval", json!({ "code": "1" }), false, "tool.eval"),
        row("work", "task", json!({}), false, "tool.ungrantable"),
        row("work", "archmax_note", json!({}), false, "tool.note"),
        row("work", "write_file", json!({ "file_path": "AGENTS.md", "content": "x" }), false, "zone.read-only"),
        row("work", "read_file", json!({ "file_path": "checkpoints/cp.json" }), false, "zone.runtime-internal"),
        row(
            "work",
            "write_file",
            json!({ "file_path": "large_tool_results/x", "content": "x" }),
            false,
            "zone.runtime-managed",
        ),
        row("work", "read_file", json!({ "file_path": "skills/other/SKILL.md" }), false, "skill.not-allowed"),
        row("done", "read_file", json!({ "file_path": "skills/policy/SKILL.md" }), false, "skill.forbidden"),
        row("work", "read_file", json!({ "file_path": "vault/a.txt" }), false, "mount.not-allowed"),
        row("done", "read_file", json!({ "file_path": "shared/a.txt" }), false, "mount.forbidden"),
        row("work", "write_file", json!({ "file_path": "library/a.txt", "content": "x" }), false, "mount.read-only"),
        // The host's essential tools are on where no entry names them; other host tools
        // need a grant.
        row("work", "crm__whoami", json!({}), true, "tool.essential"),
        row("work", "crm__purge", json!({}), false, "tool.not-allowed"),
        // An enabled skill's bundle is readable (root allow_always enables `policy`).
        row("work", "read_file", json!({ "file_path": "skills/policy/SKILL.md" }), true, "tool.allowed"),
        // A path-scoped grant needs every path argument inside it; a denial needs any one.
        row(
            "work",
            "copy_file",
            json!({ "source": "reports/ORD-7/a.md", "destination": "reports/archive/a.md" }),
            true,
            "tool.allowed",
        ),
        row(
            "work",
            "copy_file",
            json!({ "source": "reports/ORD-7/a.md", "destination": "public/a.md" }),
            false,
            "tool.not-allowed",
        ),
        row(
            "work",
            "copy_file",
            json!({ "source": "reports/a.md", "destination": "secrets/a.md" }),
            false,
            "tool.forbidden",
        ),
        // `*` never crosses `/`, and it matches dot-files.
        row("work", "grep", json!({ "pattern": "x", "path": "notes/.hidden" }), true, "tool.allowed"),
        row("work", "grep", json!({ "pattern": "x", "path": "notes/a/b" }), false, "tool.not-allowed"),
        // Canonicalized before matching: a detour through `..` lands on the denial.
        row("work", "read_file", json!({ "file_path": "reports/../secrets/key" }), false, "tool.forbidden"),
        // A denial of reading binds every tool that reads: grep (whatever its mode),
        // copy and move sources, edit_file's match; a folder above the denial is not it.
        row("work", "grep", json!({ "pattern": "x", "path": "drafts/a.md" }), false, "tool.forbidden-here"),
        row(
            "work",
            "grep",
            json!({ "pattern": "x", "path": "drafts/../drafts/a.md", "output_mode": "count" }),
            false,
            "tool.forbidden-here",
        ),
        row(
            "work",
            "copy_file",
            json!({ "source": "drafts/a.md", "destination": "reports/a.md" }),
            false,
            "tool.forbidden-here",
        ),
        row(
            "work",
            "move_file",
            json!({ "source": "drafts/a.md", "destination": "scratchpad/a.md" }),
            false,
            "tool.forbidden-here",
        ),
        row(
            "work",
            "edit_file",
            json!({ "file_path": "drafts/a.md", "old_string": "a", "new_string": "a" }),
            false,
            "tool.forbidden-here",
        ),
        row("work", "glob", json!({ "pattern": "*", "path": "drafts" }), true, "tool.allowed"),
        // A denial of writing binds every tool that writes: edit_file, copy and move
        // destinations.
        row(
            "work",
            "copy_file",
            json!({ "source": "reports/a.md", "destination": "archive/a.md" }),
            false,
            "tool.forbidden-here",
        ),
        row(
            "work",
            "move_file",
            json!({ "source": "scratchpad/a.md", "destination": "archive/../archive/a.md" }),
            false,
            "tool.forbidden-here",
        ),
        row(
            "work",
            "edit_file",
            json!({ "file_path": "archive/a.md", "old_string": "a", "new_string": "b" }),
            false,
            "tool.forbidden-here",
        ),
        // Moving a file out of a folder the state may not write changes that folder.
        row(
            "work",
            "move_file",
            json!({ "source": "archive/a.md", "destination": "scratchpad/a.md" }),
            false,
            "tool.forbidden-here",
        ),
        // Declared denials beat every grant.
        row("work", "remove_file", json!({ "file_path": "scratchpad/a" }), false, "tool.forbidden"),
        row("work", "read_file", json!({ "file_path": "secrets/.env" }), false, "tool.forbidden"),
        row("work", "read_file", json!({ "file_path": "drafts/a.md" }), false, "tool.forbidden-here"),
        // Always open: the scratchpad, for granted file tools, whatever a narrowing says.
        row(
            "work",
            "write_file",
            json!({ "file_path": "scratchpad/notes.md", "content": "x" }),
            true,
            "tool.scratchpad",
        ),
        row("work", "read_file", json!({ "file_path": "large_tool_results/r1" }), true, "tool.offload-read"),
        row("work", "archmax_advance", json!({ "to": "done", "reason": "x" }), true, "tool.control"),
        // The state's narrowing entry decides, guards resolved from the variables.
        row(
            "work",
            "write_file",
            json!({ "file_path": "reports/ORD-7/summary.md", "content": "x" }),
            true,
            "tool.allowed",
        ),
        row(
            "work",
            "write_file",
            json!({ "file_path": "reports/ORD-8/summary.md", "content": "x" }),
            false,
            "tool.not-allowed",
        ),
        row(
            "work",
            "write_file",
            json!({ "file_path": "reports/ORD-7/deep/x.md", "content": "x" }),
            false,
            "tool.not-allowed",
        ),
        row(
            "work",
            "write_file",
            json!({ "file_path": "/reports/./ORD-7/x.md", "content": "x" }),
            true,
            "tool.allowed",
        ),
        row("work", "send_mail", json!({ "to": "ana@example.com" }), true, "tool.allowed"),
        row("work", "send_mail", json!({ "to": "ana@evil.com" }), false, "tool.not-allowed"),
        row("work", "send_mail", json!({}), false, "tool.not-allowed"),
        // An unresolvable guard is terminal.
        row("work", "notify", json!({ "channel": "ops" }), false, "tool.unresolved-variable"),
        row("work", "crm_lookup", json!({ "id": 1 }), true, "tool.allowed"),
        // The workflow-wide grant applies where the state does not narrow.
        row("done", "write_file", json!({ "file_path": "reports/any.md", "content": "x" }), true, "tool.allowed"),
        row("done", "crm_lookup", json!({}), false, "tool.not-allowed"),
        row("done", "archmax_advance", json!({ "to": "work", "reason": "x" }), false, "tool.not-allowed"),
        // Governed mounts the state has.
        row(
            "work",
            "edit_file",
            json!({ "file_path": "shared/a.txt", "old_string": "a", "new_string": "b" }),
            true,
            "tool.allowed",
        ),
        row("work", "read_file", json!({ "file_path": "library/a.txt" }), true, "tool.allowed"),
    ]
}

#[test]
fn every_rule_in_precedence_order() {
    let program = program();
    let mounts = mounts(&program);
    let essential = ["crm__whoami".to_string()];
    let policy = Policy {
        program: &program,
        workflow: &program.workflows[0],
        mounts: &mounts,
        ancestors: &[],
        essential: &essential,
    };
    let variables = json!({ "order_id": "ORD-7", "trigger": "manual" });
    let rows = precedence_rows();
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let verdict = decide(
            &policy,
            &Call {
                state: state(&program, row.state),
                tool: row.tool,
                args: &row.args,
                origin: Origin::Model,
                reply_only: row.reply_only,
                variables: &variables,
                declared_paths: None,
            },
        );
        if verdict.allowed != row.allowed || verdict.rule != row.rule {
            failures.push(format!(
                "row {index}: {} {} {} → {} {} ({}), expected {} {}",
                row.state,
                row.tool,
                row.args,
                if verdict.allowed { "allow" } else { "block" },
                verdict.rule,
                verdict.reason,
                if row.allowed { "allow" } else { "block" },
                row.rule
            ));
        }
        if !verdict.allowed {
            assert!(verdict.reason.starts_with("[workflow]"), "row {index}: {}", verdict.reason);
        }
        assert_eq!(verdict.terminal, row.rule == "tool.unresolved-variable", "row {index}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn reply_only_refuses_everything_after_safety() {
    let program = program();
    let mounts = mounts(&program);
    let policy =
        Policy { program: &program, workflow: &program.workflows[0], mounts: &mounts, ancestors: &[], essential: &[] };
    let variables = json!({});
    for tool in ["read_file", "archmax_advance", "archmax_set_variables"] {
        let verdict = decide(
            &policy,
            &Call {
                state: state(&program, "work"),
                tool,
                args: &json!({ "file_path": "scratchpad/a", "to": "done", "reason": "x" }),
                origin: Origin::Model,
                reply_only: true,
                variables: &variables,
                declared_paths: None,
            },
        );
        assert_eq!(verdict.rule, "tool.reply-only", "{tool}");
    }
}

#[test]
fn a_variable_value_never_widens_a_guard() {
    let program = program();
    let mounts = mounts(&program);
    let policy =
        Policy { program: &program, workflow: &program.workflows[0], mounts: &mounts, ancestors: &[], essential: &[] };
    let variables = json!({ "order_id": "*" });
    let verdict = decide(
        &policy,
        &Call {
            state: state(&program, "work"),
            tool: "write_file",
            args: &json!({ "file_path": "reports/ORD-1/a.md", "content": "x" }),
            origin: Origin::Model,
            reply_only: false,
            variables: &variables,
            declared_paths: None,
        },
    );
    assert!(!verdict.allowed, "`*` in a variable matches only a literal `*`");
}

#[test]
fn denials_of_calling_workflows_bind_the_child() {
    let parent = compile(&[
        (
            "workflows/parent/workflow.yaml",
            "title: Parent\ninstructions: Call.\ntools:\n  forbid_always: [grep, { tool: write_file, paths: [\"out/**\"] }]\nskills:\n  forbid_always: [policy]\nmounts:\n  forbid_always: [shared]\nstates:\n  go:\n    triggers: { manual: }\n    instructions: Go.\n",
        ),
        ("skills/policy/SKILL.md", "---\nname: policy\ndescription: The policy.\n---\n"),
        ("archmax.toml", "[mounts.\"shared/\"]\nread_only = false\ngoverned = true\n"),
    ]);
    let child = program();
    let mounts = mounts(&child);
    let ancestors = [Inherited { workflow: "parent", program: &parent, source: &parent.workflows[0] }];
    let policy = Policy {
        program: &child,
        workflow: &child.workflows[0],
        mounts: &mounts,
        ancestors: &ancestors,
        essential: &[],
    };
    let variables = json!({ "order_id": "ORD-7" });
    let cases = [
        ("grep", json!({ "pattern": "x" }), "tool.forbidden"),
        ("write_file", json!({ "file_path": "out/a.md", "content": "x" }), "tool.forbidden"),
        ("read_file", json!({ "file_path": "skills/policy/SKILL.md" }), "skill.forbidden"),
        ("read_file", json!({ "file_path": "shared/a.txt" }), "mount.forbidden"),
    ];
    for (tool, args, rule) in cases {
        let verdict = decide(
            &policy,
            &Call {
                state: state(&child, "work"),
                tool,
                args: &args,
                origin: Origin::Model,
                reply_only: false,
                variables: &variables,
                declared_paths: None,
            },
        );
        assert!(!verdict.allowed, "{tool} {args}");
        assert_eq!(verdict.rule, rule, "{tool} {args}: {}", verdict.reason);
        assert!(verdict.reason.contains("parent"), "names the denying workflow: {}", verdict.reason);
    }
}

#[test]
fn listings_hide_from_grep_what_a_read_denial_covers() {
    let program = program();
    let mounts = mounts(&program);
    let policy =
        Policy { program: &program, workflow: &program.workflows[0], mounts: &mounts, ancestors: &[], essential: &[] };
    let variables = json!({ "order_id": "ORD-7" });
    let work = state(&program, "work");
    assert!(!listed(&policy, work, "grep", "drafts/a.md", &variables), "grep never searches a file it may not read");
    assert!(listed(&policy, work, "grep", "notes/a.md", &variables));
    assert!(listed(&policy, work, "ls", "drafts/a.md", &variables), "a read denial leaves names to ls");
    assert!(!listed(&policy, work, "ls", "secrets/a.md", &variables), "a denial of every tool hides names too");
}

#[test]
fn a_file_crosses_only_where_the_whole_read_decision_allows_it() {
    let program = compile(&[(
        "workflows/kernel/workflow.yaml",
        "title: Narrow\ninstructions: Pass files.\nskills: { allow_always: [] }\nstates:\n  work:\n    triggers: { manual: }\n    instructions: Work.\n    tools:\n      allow:\n        - { tool: read_file, paths: [\"scratchpad/**\", \"reports/${{order_id}}/*\"] }\n",
    )]);
    let mounts = mounts(&program);
    let policy =
        Policy { program: &program, workflow: &program.workflows[0], mounts: &mounts, ancestors: &[], essential: &[] };
    let variables = json!({ "order_id": "ORD-7" });
    let work = state(&program, "work");
    assert!(may_read(&policy, work, "scratchpad/a.md", &variables).is_ok());
    assert!(may_read(&policy, work, "reports/ORD-7/a.md", &variables).is_ok());
    let cases = [
        ("reference/rates.md", "tool.not-allowed"),
        ("scratchpad/../reference/rates.md", "tool.not-allowed"),
        ("reports/ORD-8/a.md", "tool.not-allowed"),
        ("../outside.md", "zone.escape"),
        ("checkpoints/cp.json", "zone.runtime-internal"),
    ];
    for (path, rule) in cases {
        let refusal = may_read(&policy, work, path, &variables).expect_err(path);
        assert_eq!(refusal.rule, rule, "{path}: {}", refusal.reason);
    }
    let unset = json!({});
    let refusal = may_read(&policy, work, "reports/ORD-7/a.md", &unset).expect_err("unresolvable guard");
    assert_eq!(refusal.rule, "tool.unresolved-variable");
}

/// Dispatch checks a checked program never reaches: the compiler refuses what would
/// trigger them, with the code beside each. The runtime keeps them as its own guard.
const PREVENTED_BY_THE_COMPILER: &[(&str, &str)] = &[
    ("delegation.depth-exceeded", "AMX0803"),
    ("delegation.cycle", "AMX0802"),
    ("delegation.unknown-workflow", "AMX0800"),
    ("delegation.not-delegatable", "AMX0801"),
];

/// Rules a test of the whole runtime in this suite (`refusals.rs`, `tool_host.rs`)
/// exercises, with the test.
const EXERCISED_IN_RUNTIME_TESTS: &[(&str, &str)] = &[
    ("tool.unknown", "a_name_that_is_no_tool_is_answered_with_the_state_tools_and_leaves_no_block"),
    ("zone.link", "a_host_tools_path_through_a_link_planted_in_the_session_folder_is_refused_as_zone_link"),
];

/// Every `expected.txt` of the golden runs and the golden flows, concatenated.
fn golden_runs() -> String {
    let mut text = String::new();
    // A flow's gate and scope refusals are recorded on its event lines (`"rule":…`).
    for kind in ["runs", "flows"] {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../golden").join(kind);
        let mut cases: Vec<_> = std::fs::read_dir(&root).expect("golden cases").filter_map(Result::ok).collect();
        cases.sort_by_key(|entry| entry.file_name());
        for case in cases {
            if let Ok(expected) = std::fs::read_to_string(case.path().join("expected.txt")) {
                text.push_str(&expected);
            }
        }
    }
    text
}

/// Like the diagnostic goldens, which fail when a code has no case: every rule must be
/// exercised somewhere a test checks it. A kernel rule by a row of the precedence table;
/// a refusal recorded as `tool-blocked` by a golden run recording it (a flow gate's or
/// scope's, by a golden flow's warning naming it); a dispatch check
/// by a golden run's `sub-workflow-result` naming its kind; the rest by a named runtime
/// test, or by the compiler code that keeps a checked program from reaching it.
#[test]
fn every_rule_is_exercised() {
    let rows: Vec<&str> = precedence_rows().iter().map(|row| row.rule).collect();
    let goldens = golden_runs();
    let runtime_tests = [include_str!("refusals.rs"), include_str!("tool_host.rs")].concat();
    let mut unexercised = Vec::new();
    for rule in Rule::ALL {
        let id = rule.as_str();
        let in_table = rows.contains(&id);
        let in_golden = if rule.is_dispatch_check() {
            let reason = format!("\"reason\":\"{}: ", rule.name());
            goldens.lines().any(|line| line.contains("\"event\":\"sub-workflow-result\"") && line.contains(&reason))
        } else {
            goldens.contains(&format!("\"rule\":\"{id}\""))
        };
        let in_runtime_test = EXERCISED_IN_RUNTIME_TESTS
            .iter()
            .any(|(exercised, test)| *exercised == id && runtime_tests.contains(&format!("fn {test}()")));
        let prevented = PREVENTED_BY_THE_COMPILER.iter().any(|(prevented, code)| {
            *prevented == id && Code::from_code(code).is_some_and(|code| code.info().severity == Severity::Error)
        });
        if !(in_table || in_golden || in_runtime_test || prevented) {
            unexercised.push(id);
        }
    }
    assert!(unexercised.is_empty(), "rules no test exercises: {unexercised:?}");
    for (id, _) in PREVENTED_BY_THE_COMPILER.iter().chain(EXERCISED_IN_RUNTIME_TESTS) {
        assert!(Rule::from_id(id).is_some(), "`{id}` is not a rule");
    }
}
