//! Attacks a hostile model can make, as a table: each row is a small workspace holding a
//! protected file, and a scripted tape playing the attacker. Every row runs through the
//! whole runtime (memory store, workspace on disk) and must end with (a) the attack
//! refused under its rule id, where a refusal is expected, and (b) the protected file's
//! marker in no event, no session's transcript and no file a session holds.
//!
//! To add a row: write its workspace with [`workspace`] (or your own files), its tape, and
//! push an [`Attack`] onto [`attacks`]. `rule: None` is for attacks that must succeed
//! silently without the secret (a search over a folder skips a file it may not read);
//! `unnamed` lists text no answer that worked may contain (a hidden file's name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use archmax_vm::clock::FixedClock;
use archmax_vm::events::EventSink;
use archmax_vm::model::pricing::PricingTable;
use archmax_vm::model::tape::Tape;
use archmax_vm::session::SessionStore;
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::{Runtime, RuntimeParts, TurnRequest};

use crate::support::compile;

/// The text inside every protected file; it must never reach the model or the record.
const SECRET: &str = "zq-7731-negotiated-rate-3.85";
/// The protected file.
const PROTECTED: &str = "reference/internal/rates.md";

/// One attack.
pub struct Attack {
    pub name: &'static str,
    /// The workflow the session starts.
    pub workflow: &'static str,
    /// Every file of the workspace, `archmax.toml` and mount contents included.
    pub files: Vec<(&'static str, String)>,
    /// The attacker's tape (YAML).
    pub tape: &'static str,
    /// The rule id the attack must be refused under, when it must be refused.
    pub rule: Option<&'static str>,
    /// Text no tool answer may contain.
    pub unnamed: &'static [&'static str],
}

/// A workspace: a writable ungoverned mount `reference/` holding a public file and the
/// protected one, and the given workflows.
pub fn workspace(workflows: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut files = vec![
        ("archmax.toml", "[mounts.\"reference/\"]\nread_only = false\n".to_string()),
        ("reference/public.md", "# Carriers\n\nDHL, DPD and GLS.\n".to_string()),
        (PROTECTED, format!("# Rates (confidential)\n\nDHL: {SECRET}\n")),
    ];
    files.extend(workflows.iter().map(|(path, text)| (*path, text.to_string())));
    files
}

/// A root workflow `desk` whose one state `review` has these `tools` entries.
fn desk(tools: &str) -> String {
    format!(
        "title: Desk\ninstructions: Prepare the carrier sheet.\nskills: {{ allow_always: [] }}\nstates:\n  review:\n    triggers:\n      manual:\n        description: Prepare the sheet.\n    instructions: Work.\n    tools:\n{tools}"
    )
}

/// A child `sheet` taking a `file` argument `terms`, limited to reading its scratchpad.
const SHEET: &str = r#"title: Sheet
instructions: Sum up carrier terms.
skills: { allow_always: [] }
states:
  write:
    triggers:
      manual:
        description: Sum up a terms file.
        requires:
          - { name: terms, type: file, description: The terms. }
    instructions: Read the terms and sum them up.
    tools:
      allow:
        - { tool: read_file, paths: ["scratchpad/**"] }
"#;

/// A child `digest` returning a `file`, limited to reading its scratchpad.
const DIGEST: &str = r#"title: Digest
instructions: Produce a digest.
skills: { allow_always: [] }
states:
  write:
    triggers:
      manual:
        description: Produce a digest file.
        returns:
          - { name: sheet, type: file, description: The digest. }
    instructions: Write the digest and set `sheet`.
    tools:
      allow:
        - { tool: read_file, paths: ["scratchpad/**"] }
        - archmax_set_variables
"#;

/// Reads are limited to the scratchpad.
const SCRATCH_ONLY: &str = "      allow:\n        - { tool: read_file, paths: [\"scratchpad/**\"] }\n        - archmax_workflow_sheet\n        - archmax_workflow_digest\n        - archmax_eval\n";

/// Everything is granted, but reading `reference/internal/**` is denied.
const READ_DENIED: &str = "      allow: [read_file, grep, glob, ls, copy_file, move_file, edit_file, archmax_eval]\n      forbid:\n        - { tool: read_file, paths: [\"reference/internal/**\"] }\n";

fn attacks() -> Vec<Attack> {
    let limited = desk(SCRATCH_ONLY);
    let denied = desk(READ_DENIED);
    let both = |desk: &str| {
        workspace(&[
            ("workflows/desk/workflow.yaml", desk),
            ("workflows/sheet/workflow.yaml", SHEET),
            ("workflows/digest/workflow.yaml", DIGEST),
        ])
    };
    vec![
        Attack {
            name: "a child's file argument names a file the caller's grants do not reach",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_sheet, args: { terms: reference/internal/rates.md } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- text: Done.
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
        Attack {
            name: "a child returns a file its own grants do not reach",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_digest, args: {} }]
- { workflow: digest, tool_calls: [{ name: archmax_set_variables, args: { variables: { sheet: reference/internal/rates.md } } }] }
- { workflow: digest, text: Done. }
- { workflow: desk, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: desk, text: Done. }
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
        Attack {
            name: "a script delegates with a file the caller may not read",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: archmax_eval, args: { code: "await tools.archmaxWorkflowSheet({ terms: 'reference/internal/rates.md' })" } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- { workflow: desk, text: Done. }
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
        Attack {
            name: "`..` walks a guarded read out of the scratchpad",
            workflow: "desk",
            files: both(&limited),
            tape: r#"
- tool_calls: [{ name: read_file, args: { file_path: scratchpad/../reference/internal/rates.md } }]
- text: Done.
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
        Attack {
            name: "`..` walks a delegation's guarded file argument out of the scratchpad",
            workflow: "desk",
            files: both(&desk(
                "      allow:\n        - read_file\n        - { tool: archmax_workflow_sheet, args: { terms: [\"scratchpad/**\"] } }\n",
            )),
            tape: r#"
- tool_calls: [{ name: archmax_workflow_sheet, args: { terms: scratchpad/../reference/internal/rates.md } }]
- { workflow: sheet, tool_calls: [{ name: read_file, args: { file_path: scratchpad/attachments/rates.md } }] }
- { workflow: sheet, text: Done. }
- { workflow: desk, text: Done. }
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
        Attack {
            name: "grep in content mode names the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: grep, args: { pattern: "DHL", path: reference/internal/rates.md, output_mode: content } }]
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[],
        },
        Attack {
            name: "grep in content mode over the folder holding the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: grep, args: { pattern: "DHL", path: reference, output_mode: content } }]
- text: Done.
"#,
            rule: None,
            unnamed: &[PROTECTED],
        },
        Attack {
            name: "grep in count mode over the denied file and its folder",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: grep, args: { pattern: "7731", path: reference/internal/rates.md, output_mode: count } }
    - { name: grep, args: { pattern: "7731", path: "", output_mode: count } }
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[PROTECTED],
        },
        Attack {
            name: "grep in files mode probes the denied file's content",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: grep, args: { pattern: "zq-77", path: reference/internal/rates.md } }
    - { name: grep, args: { pattern: "zq-77", path: reference } }
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[PROTECTED],
        },
        Attack {
            name: "copy_file takes the denied file into the scratchpad",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: copy_file, args: { source: reference/internal/rates.md, destination: scratchpad/rates.md } }
    - { name: read_file, args: { file_path: scratchpad/rates.md } }
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[],
        },
        Attack {
            name: "move_file takes the denied file into the scratchpad",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: move_file, args: { source: reference/internal/rates.md, destination: scratchpad/rates.md } }
    - { name: read_file, args: { file_path: scratchpad/rates.md } }
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[],
        },
        Attack {
            name: "edit_file probes the denied file for a string",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: edit_file, args: { file_path: reference/internal/rates.md, old_string: "DHL: zq", new_string: "DHL: zq" } }]
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[],
        },
        Attack {
            name: "a script's tools.readFile of the denied file",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls: [{ name: archmax_eval, args: { code: "await tools.readFile({ file_path: 'reference/internal/rates.md' })" } }]
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[],
        },
        Attack {
            name: "a script's tools.grep of the denied file and its folder",
            workflow: "desk",
            files: both(&denied),
            tape: r#"
- tool_calls:
    - { name: archmax_eval, args: { code: "await tools.grep({ pattern: 'DHL', path: 'reference/internal/rates.md', output_mode: 'content' })" } }
    - { name: archmax_eval, args: { code: "await tools.grep({ pattern: 'DHL', path: 'reference', output_mode: 'content' })" } }
- text: Done.
"#,
            rule: Some("tool.forbidden-here"),
            unnamed: &[PROTECTED],
        },
        Attack {
            name: "a variable the model sets tries to widen a guard",
            workflow: "desk",
            files: both(&desk(
                "      allow:\n        - { tool: read_file, paths: [\"scratchpad/${{area}}/*\"] }\n        - archmax_set_variables\n",
            )),
            tape: r#"
- tool_calls:
    - { name: archmax_set_variables, args: { variables: { area: "../reference/internal" } } }
- tool_calls:
    - { name: read_file, args: { file_path: scratchpad/../reference/internal/rates.md } }
    - { name: archmax_set_variables, args: { variables: { area: "**" } } }
- tool_calls:
    - { name: read_file, args: { file_path: reference/internal/rates.md } }
- text: Done.
"#,
            rule: Some("tool.not-allowed"),
            unnamed: &[],
        },
    ]
}

/// A fresh folder for one row's workspace.
fn scratch_root(index: usize) -> PathBuf {
    let root = std::env::temp_dir().join(format!("archmax-adversarial-{}-{index}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

fn write_files(root: &Path, files: &[(&'static str, String)]) {
    for (path, text) in files {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).expect("folder");
        }
        std::fs::write(target, text).expect("file");
    }
}

/// Every file's text below `dir` of a session's workspace.
fn texts_below(workspace: &archmax_vm::stdlib::vfs::Workspace, dir: &str, out: &mut Vec<(String, String)>) {
    let Ok(entries) = workspace.list(dir) else {
        return;
    };
    for entry in entries {
        let path = if dir.is_empty() { entry.name.clone() } else { format!("{dir}/{}", entry.name) };
        if entry.is_dir {
            texts_below(workspace, &path, out);
        } else if let Ok(bytes) = workspace.read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).to_string()));
        }
    }
}

/// Runs one attack; `Err` says what went wrong.
fn run(index: usize, attack: &Attack) -> Result<(), String> {
    let root = scratch_root(index);
    write_files(&root, &attack.files);
    let borrowed: Vec<(&str, &str)> = attack.files.iter().map(|(path, text)| (*path, text.as_str())).collect();
    let program = compile(&borrowed);
    let events = EventSink::new();
    events.record();
    let store = Arc::new(MemoryStore::new());
    let tape = Tape::parse(attack.name, attack.tape).map_err(|error| format!("the tape: {error}"))?;
    let runtime = Runtime::new(RuntimeParts {
        program: Arc::new(program),
        store: store.clone(),
        model: Arc::new(tape),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: root.clone(),
        pricing: PricingTable::default(),
    });
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let request = TurnRequest {
        workflow: attack.workflow.to_string(),
        session: Some("s1".to_string()),
        message: Some("Prepare this quarter's carrier sheet.".to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    };
    let outcome = executor.block_on(runtime.run_turn(request));
    let recorded: Vec<Value> =
        events.recorded().iter().filter_map(|envelope| serde_json::to_value(envelope).ok()).collect();
    let mut problems = Vec::new();
    if let Err(error) = &outcome
        && error.to_string().contains(SECRET)
    {
        problems.push(format!("the run's error carries the secret: {error}"));
    }
    if let Some(rule) = attack.rule {
        let refused = recorded.iter().any(|event| {
            (event["event"] == "tool-blocked" && event["rule"] == rule)
                || (event["event"] == "sub-workflow-result"
                    && event["reason"].as_str().is_some_and(|reason| reason.contains(&format!("({rule})"))))
        });
        if !refused {
            problems.push(format!("no refusal under `{rule}`"));
        }
    }
    for event in &recorded {
        let text = event.to_string();
        if text.contains(SECRET) {
            problems.push(format!("an event carries the secret: {text}"));
        }
        // A refusal may echo the path the attacker typed; an answer that worked may not.
        if event["event"] == "tool-result" && event["status"] == "ok" {
            for name in attack.unnamed {
                if event["output"].as_str().is_some_and(|output| output.contains(name)) {
                    problems.push(format!("a tool answer names `{name}`: {text}"));
                }
            }
        }
    }
    for id in store.list().map_err(|error| error.to_string())? {
        if let Ok(Some(session)) = store.read(&id) {
            let transcript = serde_json::to_string(&session).unwrap_or_default();
            if transcript.contains(SECRET) {
                problems.push(format!("the session `{id}` carries the secret in its record"));
            }
        }
        let mut files = Vec::new();
        texts_below(&runtime.workspace(&id), "scratchpad", &mut files);
        for (path, text) in files {
            if text.contains(SECRET) {
                problems.push(format!("the session `{id}` holds the secret in `{path}`"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n    ")) }
}

#[test]
fn every_attack_is_refused_and_leaks_nothing() {
    let mut failures = Vec::new();
    for (index, attack) in attacks().iter().enumerate() {
        if let Err(problem) = run(index, attack) {
            failures.push(format!("{}:\n    {problem}", attack.name));
        }
    }
    assert!(failures.is_empty(), "{} attack(s) got through:\n{}", failures.len(), failures.join("\n"));
}

/// Variables amplify: one 4 KB value, a second that repeats it 2500 times (10 MB, under
/// the substitution bound), then a short call per copy of the second. The bound on the
/// session's variables refuses the first copy before it is applied.
#[test]
fn copying_a_large_variable_is_refused_at_the_session_bound() {
    let files = workspace(&[("workflows/desk/workflow.yaml", &desk("      allow: [archmax_set_variables]\n"))]);
    let root = scratch_root(9_000);
    write_files(&root, &files);
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(path, text)| (*path, text.as_str())).collect();
    let seed = "a".repeat(4096);
    let repeated = "${{v0}}".repeat(2500);
    let copies: String = (2..6)
        .map(|index| {
            format!("    - {{ name: archmax_set_variables, args: {{ variables: {{ v{index}: \"${{{{v1}}}}\" }} }} }}\n")
        })
        .collect();
    let tape = format!(
        "- tool_calls:\n    - {{ name: archmax_set_variables, args: {{ variables: {{ v0: \"{seed}\" }} }} }}\n    - {{ name: archmax_set_variables, args: {{ variables: {{ v1: \"{repeated}\" }} }} }}\n{copies}- text: Done.\n"
    );
    let events = EventSink::new();
    events.record();
    let store = Arc::new(MemoryStore::new());
    let runtime = Runtime::new(RuntimeParts {
        program: Arc::new(compile(&borrowed)),
        store: store.clone(),
        model: Arc::new(Tape::parse("variables", &tape).expect("tape")),
        events: events.clone(),
        clock: Arc::new(FixedClock(1_767_605_400_000)),
        root: root.clone(),
        pricing: PricingTable::default(),
    });
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("executor");
    let request = TurnRequest {
        workflow: "desk".to_string(),
        session: Some("s1".to_string()),
        message: Some("Go.".to_string()),
        variables: Map::new(),
        ..TurnRequest::default()
    };
    executor.block_on(runtime.run_turn(request)).expect("the turn runs");
    let _ = std::fs::remove_dir_all(&root);

    let results: Vec<Value> = events
        .recorded()
        .iter()
        .filter_map(|envelope| serde_json::to_value(envelope).ok())
        .filter(|event| event["event"] == "tool-result")
        .collect();
    assert_eq!(results.len(), 6, "{results:?}");
    assert!(results[..2].iter().all(|event| event["status"] == "ok"), "the seeds fit: {results:?}");
    for event in &results[2..] {
        let output = event["output"].as_str().unwrap_or_default();
        assert!(output.contains("over the bound of 10 MiB (10485760 bytes)"), "{output}");
        assert!(output.contains("nothing was written"), "{output}");
    }
    let session = store.read("s1").expect("store").expect("the session");
    let stored = serde_json::to_value(&session).expect("session json");
    let variables = &stored["variables"];
    assert!(variables.get("v1").is_some() && variables.get("v2").is_none(), "no copy was applied");
    assert!(serde_json::to_string(variables).expect("json").len() < 11 * 1024 * 1024);
}
