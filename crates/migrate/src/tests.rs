//! Unit tests of the rewrite over in-memory documents.

use std::collections::BTreeMap;

use super::diff::unified;
use super::workflow::{WorkflowFiles, rewrite};

struct Files(BTreeMap<&'static str, &'static str>);

impl WorkflowFiles for Files {
    fn read(&self, path: &str) -> Option<String> {
        self.0.get(path).map(|text| text.to_string())
    }
}

const DOC: &str = "# Intake desk: a contract-2 workflow.
name: Intake
runtime:   { engine: archmax-harness, version: \"2\" }   # pinned

# Settings stay as they are.
settings:
  timeoutMs: 15000

states:
  # The entry.
  intake:
    triggers:
      manual: {}
    instructions: >-
      Read the request and advance.
    before:
      - script: hooks/known.js
    budget:
      maxTurns: 12     # gone
      timeoutMs: 60000 # stays
    transitions:
      - to: answer
        description: The request is read.   # why

  answer:
    instructions: Answer it.
";

const HOOK: &str = "/** Known requester. */\nexport default async function hook({ messages }) {\n  return messages.length ? ok() : veto(\"empty\");\n}\n";

fn files() -> Files {
    Files(BTreeMap::from([("hooks/known.js", HOOK)]))
}

#[test]
fn comments_and_layout_outside_the_edits_are_byte_identical() {
    let done = rewrite(DOC, &files(), None).expect("it migrates");
    // The lines the rewrite touches: two rewritten in place, two moved (the entry's
    // triggers go to the new check), three deleted.
    let touched = [
        "name: Intake",
        "runtime:   { engine: archmax-harness, version: \"2\" }   # pinned",
        "    triggers:",
        "      manual: {}",
        "    before:",
        "      - script: hooks/known.js",
        "      maxTurns: 12     # gone",
    ];
    // Every other line, comments and blank lines included, comes out byte-identical and
    // in its order.
    let mut output = done.text.lines();
    for line in DOC.lines().filter(|line| !touched.contains(line)) {
        assert!(output.any(|candidate| candidate == line), "`{line}` is kept in order:\n{}", done.text);
    }
    for gone in &touched[4..] {
        assert!(!done.text.lines().any(|line| line == *gone), "`{gone}` is deleted:\n{}", done.text);
    }
    // The in-place rewrites change only the scalar they touch.
    assert!(done.text.contains("\ntitle: Intake\n"));
    assert!(
        done.text.contains("\nruntime:   { engine: archmax-harness, version: \"3\" }   # pinned\n"),
        "{}",
        done.text
    );
    assert!(done.text.contains("    triggers:\n      manual: {}\n"));
    let diff = unified("workflow.yaml", Some(DOC), Some(&done.text));
    let removed = diff.lines().filter(|line| line.starts_with('-') && !line.starts_with("---")).count();
    assert!(removed <= touched.len() + 2, "the diff removes little:\n{diff}");
}

#[test]
fn a_before_hook_becomes_a_code_state_that_takes_the_entry() {
    let done = rewrite(DOC, &files(), None).expect("it migrates");
    let gate = done.text.find("  known:\n").expect("the gate state");
    let intake = done.text.find("  intake:\n").expect("the guarded state");
    assert!(gate < intake, "the gate sits in front:\n{}", done.text);
    let gate_block = &done.text[gate..intake];
    assert!(
        gate_block.contains("    type: code\n    script: scripts/known.js\n    triggers:\n      manual: {}\n"),
        "{gate_block}"
    );
    assert!(gate_block.contains("      - to: intake\n"));
    assert!(gate_block.contains("      - to: intake-refused\n"));
    assert!(done.text.contains("  intake-refused:\n    instructions: |-\n"));
    assert_eq!(done.refusal.as_deref(), Some("intake-refused"));
    let script = &done.scripts[0];
    assert_eq!(script.path, "scripts/known.js");
    assert!(
        script.text.starts_with("/** Known requester. */\nconst contract2Hook = async function hook({ messages }) {")
    );
    assert!(script.text.contains("const ONWARD = [\"intake\"];\nconst REFUSED = \"intake-refused\";"));
    assert!(script.text.contains("tools.archmax_get_history()"));
    assert!(done.ported_hooks.contains("hooks/known.js"));
}

#[test]
fn running_on_its_own_output_changes_nothing() {
    let done = rewrite(DOC, &files(), None).expect("it migrates");
    let again = rewrite(&done.text, &Files(BTreeMap::new()), None).expect("it reads its own output");
    assert_eq!(again.text, done.text);
    assert!(again.changes.is_empty() && again.follow_ups.is_empty() && again.scripts.is_empty());
}

#[test]
fn bad_documents_are_refused_with_a_reason() {
    use super::workflow::Refusal;
    let empty = Files(BTreeMap::new());
    assert!(matches!(rewrite("states: [unclosed\n", &empty, None), Err(Refusal::Unparseable { .. })));
    assert!(matches!(rewrite("- a\n- b\n", &empty, None), Err(Refusal::NotAWorkflow { .. })));
    assert!(matches!(rewrite("title: x\n", &empty, None), Err(Refusal::NotAWorkflow { .. })));
    assert!(matches!(
        rewrite("runtime: { version: \"9\" }\nstates: { a: {} }\n", &empty, None),
        Err(Refusal::UnknownContract { .. })
    ));
}

const MIDDLE: &str = "states:
  start:
    triggers: { manual: {} }
    instructions: Take the order.
    transitions:
      - to: pay
        description: The order is taken.
  pay:
    instructions: Charge the card.
    before:
      - rubric:
          instructions: The order names an amount.
    after:
      - script: hooks/charged.js
        max_iterations: 3
    transitions:
      - to: receipt
        description: The card is charged.
      - to: declined
        description: The card is declined.
  receipt:
    instructions: Send the receipt.
  declined:
    instructions: Say the card was declined.
";

#[test]
fn a_check_away_from_the_start_raises_and_one_behind_picks_the_named_edge() {
    let files = Files(BTreeMap::from([("hooks/charged.js", "export default async () => ok();\n")]));
    let done = rewrite(MIDDLE, &files, None).expect("it migrates");
    // In front of a state that is no start: a grader whose refusal is a raise, and no
    // refusal state.
    assert_eq!(done.refusal, None);
    assert!(done.text.contains("  pay-screen:\n    type: grader\n"), "{}", done.text);
    assert!(done.text.contains("- It fails: raise `pay-refused` with the reason."), "{}", done.text);
    assert!(
        done.text.contains("      - to: pay-screen\n        description: The order is taken.\n"),
        "the edge into `pay` enters its check:\n{}",
        done.text
    );
    // Behind it: a code state with the state's two transitions and a send-back; the
    // state's own edge asks the agent to name the next step.
    assert!(done.text.contains("      - to: charged\n        description: \"The work is done; name the next step in your reason: `receipt` when The card is charged; `declined` when The card is declined.\"\n"), "{}", done.text);
    let charged = done.text.find("  charged:\n").expect("the check");
    let block = &done.text[charged..];
    assert!(
        block.contains("      - to: receipt\n")
            && block.contains("      - to: declined\n")
            && block.contains("      - to: pay\n"),
        "{block}"
    );
    let script = done.scripts.iter().find(|script| script.path == "scripts/charged.js").expect("ported");
    assert!(
        script.text.contains("const ONWARD = [\"receipt\", \"declined\"];\nconst MAX_SEND_BACKS = 3;"),
        "{}",
        script.text
    );
    assert!(script.text.starts_with("const contract2Hook = async () => ok();\n"));
    assert!(done.changes.iter().any(|note| note.text.contains("`max_iterations: 3` → at most 3 `correct` send-backs")));
}

fn parse(text: &str) -> archmax_compiler::syntax::yaml::Node {
    let document = archmax_compiler::syntax::yaml::load(archmax_compiler::source::FileId(0), text);
    assert!(!document.diagnostics.iter().any(|diagnostic| diagnostic.is_error()), "the output parses:\n{text}");
    document.root.expect("a document")
}

const NOT_A_SLUG: &str = "states:
  check_order:
    triggers: { manual: {} }
    instructions: Check the order.
    before:
      - script: hooks/check.js
    after:
      - script: hooks/check.js
    transitions:
      - to: done
        description: Checked.
  done:
    instructions: Done.
";

#[test]
fn a_state_key_that_is_no_slug_gets_slug_names_and_a_follow_up() {
    let files = Files(BTreeMap::from([("hooks/check.js", "export default async () => ok();\n")]));
    let done = rewrite(NOT_A_SLUG, &files, None).expect("it migrates");
    let states = parse(&done.text);
    let states = states.get("states").and_then(|states| states.as_mapping()).expect("states");
    let names: Vec<&str> = states.iter().filter_map(|state| state.key.scalar_text()).collect();
    // The before gate takes the hook's own name, the after check a name built from the
    // slugified state key; the refusal state too.
    for name in ["check", "check-order-check", "check-order-refused"] {
        assert!(names.contains(&name), "`{name}` is a state: {names:?}\n{}", done.text);
    }
    for name in &names {
        assert!(*name == "check_order" || archmax_compiler::syntax::is_slug(name), "`{name}` is a slug");
    }
    assert!(
        done.follow_ups
            .iter()
            .any(|note| note.text.contains("`check_order` is not a kebab-case slug")
                && note.text.contains("`check-order`")),
        "{:?}",
        done.follow_ups
    );
    let paths: Vec<&str> = done.scripts.iter().map(|script| script.path.as_str()).collect();
    assert_eq!(paths, ["scripts/check.js", "scripts/check-order-check.js"]);
}

#[test]
fn a_state_key_with_nothing_to_slugify_still_gets_a_name() {
    let doc = "states:\n  \"__\":\n    instructions: x\n    before: [hooks/a.js]\n    after: [hooks/a.js]\n";
    let files = Files(BTreeMap::from([("hooks/a.js", "export default async () => ok();\n")]));
    let done = rewrite(doc, &files, None).expect("it migrates");
    let paths: Vec<&str> = done.scripts.iter().map(|script| script.path.as_str()).collect();
    assert_eq!(paths, ["scripts/a.js", "scripts/state-a.js", "scripts/done.js"], "{}", done.text);
}

#[test]
fn an_existing_script_is_never_chosen_for_a_new_one() {
    let disk = Files(BTreeMap::from([("hooks/known.js", HOOK), ("scripts/known.js", "// mine\n")]));
    let done = rewrite(DOC, &disk, None).expect("it migrates");
    let paths: Vec<&str> = done.scripts.iter().map(|script| script.path.as_str()).collect();
    assert_eq!(paths, ["scripts/intake-known.js"], "{}", done.text);
    assert!(done.text.contains("  intake-known:\n    type: code\n    script: scripts/intake-known.js\n"));
}

#[test]
fn scalars_written_into_the_yaml_are_quoted_when_plain_would_change_them() {
    let doc = "states:
  a:
    triggers: { manual: {} }
    instructions: A.
    on_error: \"yes\"
    after:
      - rubric: { instructions: Fine., max_iterations: 1 }
    transitions: [{ to: \"1\", description: One. }, { to: \"b: c\", description: Two. }]
  \"1\":
    instructions: One.
  \"b: c\":
    instructions: Two.
  \"yes\":
    instructions: Errors.
";
    let done = rewrite(doc, &Files(BTreeMap::new()), None).expect("it migrates");
    assert!(done.text.contains("    on_error: \"yes\"\n"), "{}", done.text);
    assert!(done.text.contains("      - to: \"1\"\n"), "{}", done.text);
    assert!(done.text.contains("      - to: \"b: c\"\n"), "{}", done.text);
    let root = parse(&done.text);
    let review = root.get("states").and_then(|states| states.get("a-review")).expect("the check");
    let targets: Vec<&str> = review
        .get("transitions")
        .and_then(|transitions| transitions.as_sequence())
        .expect("transitions")
        .iter()
        .filter_map(|transition| transition.get("to").and_then(|to| to.as_str()))
        .collect();
    assert_eq!(targets, ["1", "b: c", "a"]);
    assert_eq!(review.get("on_error").and_then(|value| value.as_str()), Some("yes"));
}

#[test]
fn rubric_instructions_that_start_indented_keep_their_indentation() {
    let doc = "states:
  a:
    triggers: { manual: {} }
    instructions: A.
    after:
      - rubric:
          instructions: \"  1. indented first line\\n2. next\"
";
    let done = rewrite(doc, &Files(BTreeMap::new()), None).expect("it migrates");
    assert!(
        done.text.contains("    instructions: |2-\n        1. indented first line\n      2. next\n"),
        "{}",
        done.text
    );
    let root = parse(&done.text);
    let text = root
        .get("states")
        .and_then(|states| states.get("a-review"))
        .and_then(|review| review.get("instructions"))
        .and_then(|value| value.as_str())
        .expect("instructions");
    assert!(text.starts_with("  1. indented first line\n2. next\n\nDeciding"), "{text:?}");
}

#[test]
fn a_state_key_with_a_line_break_stays_inside_the_script_comments() {
    let doc = "states:\n  \"a\\nb\":\n    instructions: x\n    after: [hooks/a.js]\n";
    let files = Files(BTreeMap::from([("hooks/a.js", "export default async () => ok();\n")]));
    let done = rewrite(doc, &files, None).expect("it migrates");
    let finish = done.scripts.iter().find(|script| script.from_hook.is_none()).expect("the finish script");
    let ported = done.scripts.iter().find(|script| script.from_hook.is_some()).expect("the port");
    for script in [finish, ported] {
        for line in script.text.lines() {
            assert!(line != "b`" && !line.starts_with("b` "), "a line broken out of a comment:\n{}", script.text);
        }
    }
    assert!(ported.text.contains("hook of `a\\nb`. Under contract 3"), "{}", ported.text);
    assert!(ported.text.contains("const GUARDED = \"a\\nb\";"), "{}", ported.text);
    assert!(finish.text.contains(" * Finish `a\\nb`\n"), "{}", finish.text);
}

#[test]
fn a_plan_that_changes_one_path_twice_is_refused_before_anything_is_written() {
    use super::{FileChange, MigrateError, Migration, WorkflowMigration, apply};
    let dir = std::env::temp_dir().join(format!("archmax-migrate-conflict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("workflows/w")).expect("dir");
    std::fs::write(dir.join("workflows/w/a.js"), "old\n").expect("written");
    let file = |path: &str, after: Option<&str>| FileChange {
        path: path.to_string(),
        before: Some("old\n".to_string()),
        after: after.map(str::to_string),
    };
    let plan = Migration {
        workflows: vec![WorkflowMigration {
            slug: "w".to_string(),
            changes: Vec::new(),
            follow_ups: Vec::new(),
            files: vec![
                file("workflows/w/b.js", Some("new\n")),
                file("workflows/w/a.js", Some("new\n")),
                file("workflows/w/a.js", None),
            ],
        }],
    };
    assert_eq!(apply(&dir, &plan), Err(MigrateError::Conflict { path: "workflows/w/a.js".to_string() }));
    assert_eq!(std::fs::read_to_string(dir.join("workflows/w/a.js")).expect("kept"), "old\n");
    assert!(!dir.join("workflows/w/b.js").exists(), "nothing was written");
    let _ = std::fs::remove_dir_all(&dir);
}
