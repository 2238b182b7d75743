//! `archmax explain` for kernel rules: the rule's heading and long explanation, the
//! `--list` of both vocabularies, and an unknown id answered like an unknown code.

use archmax_vm::kernel::Rule;

use crate::support::{archmax, repository};

#[test]
fn a_rule_id_prints_its_title_and_explanation() {
    let run = archmax(&repository(), &["explain", "tool.not-allowed"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    let info = Rule::ToolNotAllowed.info();
    assert_eq!(
        run.stdout,
        format!("tool.not-allowed (kernel rule, refuses): {}\n\n{}", info.title, info.explanation),
        "the heading, a blank line, then the explanation as written"
    );
    let allowing = archmax(&repository(), &["explain", "tool.scratchpad"]);
    assert!(allowing.stdout.starts_with("tool.scratchpad (kernel rule, allows): "), "{}", allowing.stdout);
    let flow = archmax(&repository(), &["explain", "scope.unmatched"]);
    assert!(flow.stdout.starts_with("scope.unmatched (flow rule, refuses): "), "{}", flow.stdout);
}

#[test]
fn every_rule_can_be_explained() {
    for rule in Rule::ALL {
        let run = archmax(&repository(), &["explain", rule.as_str()]);
        assert_eq!(run.code, 0, "{rule}: {}", run.stderr);
        assert!(run.stdout.contains(&format!("# {rule}\n")), "{rule}: {}", run.stdout);
    }
}

#[test]
fn the_list_holds_every_code_then_every_rule() {
    let run = archmax(&repository(), &["explain", "--list"]);
    assert_eq!(run.code, 0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let codes = archmax_compiler::Code::ALL.len();
    assert!(lines[..codes].iter().all(|line| line.starts_with("AMX")), "codes come first");
    let rules = &lines[codes..];
    assert_eq!(rules.len(), Rule::ALL.len());
    for (line, rule) in rules.iter().zip(Rule::ALL) {
        let info = rule.info();
        let mut columns = line.split_whitespace();
        assert_eq!(columns.next(), Some(info.id), "{line}");
        assert_eq!(columns.next(), Some(info.outcome.as_str()), "{line}");
        assert!(line.ends_with(info.title), "{line}");
    }
}

#[test]
fn an_unknown_id_gets_a_suggestion_from_both_vocabularies() {
    for (typed, suggested) in [
        ("tool.not-alowed", "tool.not-allowed"),
        ("zone.escpe", "zone.escape"),
        ("AMX030", "AMX0300"),
        ("amx0531", "AMX0501"),
    ] {
        let run = archmax(&repository(), &["explain", typed]);
        assert_eq!(run.code, 1, "an unknown id fails like an unknown code: {}", run.stderr);
        assert_eq!(run.stdout, "");
        assert_eq!(
            run.stderr,
            format!("error: there is no diagnostic code or kernel rule `{typed}`; did you mean `{suggested}`?\n")
        );
    }
    for far in ["nothing-like-it", "AMX9999", "AMX7777"] {
        let run = archmax(&repository(), &["explain", far]);
        assert_eq!(run.code, 1);
        assert_eq!(
            run.stderr,
            format!(
                "error: there is no diagnostic code or kernel rule `{far}`; `archmax explain --list` lists every code and rule\n"
            ),
            "a code two digits away is another code, not a typo"
        );
    }
}
