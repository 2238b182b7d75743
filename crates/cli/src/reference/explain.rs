//! One page per diagnostic code and per kernel rule, from the registries `archmax
//! explain` prints (`archmax_compiler::diagnostic::Code`, `archmax_vm::kernel::Rule`).
//!
//! A code's page ends with a real run: the smallest workspace among its diagnostic
//! goldens (`golden/diagnostics/<code>-<case>/`), and what `archmax validate` printed for
//! it, the text the golden suite checks byte for byte.
//!
//! A refusing rule's page ends the same way, from the run goldens (`golden/runs/`): the
//! rule's own case (`rule-<id with dashes>`) or else the smallest workspace whose recorded
//! events carry the refusal, each command it ran with what the terminal showed, and those
//! events. A flow step's rule (`gate.*`, `scope.*`) is shown the same way from the flow
//! goldens (`golden/flows/`), whose event lines are what the step printed. A rule no validated
//! workspace can reach says which diagnostic code stops it first ([`PREVENTED`]); a rule
//! that allows is never printed, and its page says so.

use std::fs;
use std::path::{Path, PathBuf};

use archmax_compiler::diagnostic::Code;
use archmax_vm::kernel::Rule;

use super::{Page, files_under};

/// The longest workspace file shown whole on a code's page, in lines.
const SHOWN_LINES: usize = 60;

pub fn code_pages(goldens: &Path) -> Result<Vec<Page>, String> {
    let mut index = String::from(
        "# Diagnostic codes\n\nEvery code `archmax validate`, `build` and the language server report. \
         `archmax explain <code>` prints the same text in a terminal.\n\n| Code | Name | Severity | About |\n| --- | --- | --- | --- |\n",
    );
    let mut pages = Vec::new();
    for code in Code::ALL {
        let info = code.info();
        index.push_str(&format!(
            "| [{0}]({0}.md) | `{1}` | {2} | {3} |\n",
            info.code,
            info.name,
            info.severity.as_str(),
            info.title
        ));
        let mut text = demote_title(
            info.explanation,
            &format!("*Severity:* {}. *Name:* `{}`.", info.severity.as_str(), info.name),
        );
        if let Some(example) = example(goldens, info.code)? {
            text.push_str(&example);
        }
        pages.push(Page {
            path: format!("codes/{}.md", info.code),
            title: format!("{}: {}", info.code, info.name),
            text,
        });
    }
    pages.insert(0, Page { path: "codes/index.md".to_string(), title: "Diagnostic codes".to_string(), text: index });
    Ok(pages)
}

/// Refusing rules a validated workspace never meets, with the code that refuses the
/// workspace first. The book test holds every other refusing rule to a run golden.
pub const PREVENTED: &[(&str, &str)] = &[
    ("delegation.cycle", "AMX0802"),
    ("delegation.depth-exceeded", "AMX0803"),
    ("delegation.unknown-workflow", "AMX0800"),
    ("delegation.not-delegatable", "AMX0801"),
];

/// The pages of every rule: a workflow's from the run goldens (`runs`), a flow step's
/// from the flow goldens (`flows`).
pub fn rule_pages(runs: &Path, flows: &Path) -> Result<Vec<Page>, String> {
    let mut index = String::from(
        "# Kernel rules\n\nThe kernel decides every tool call, file access and transition against these rules \
         at run time, whatever the model asks. A refusal names its rule in the `tool-blocked` event and in \
         the conversation; `archmax explain <rule>` prints the same text. A flow step's calls (`archmax flow \
         run`) are decided by the same kernel and refused under the `scope.*` rules (and `zone.escape`, \
         `zone.runtime-internal`, `tool.unknown`, `tool.path-argument`), or by its gate under the `gate.*` \
         rules, named in its `tool-refused` or `step-command` warning and in the failed result the step \
         reads.\n\n| Rule | Outcome | About |\n| --- | --- | --- |\n",
    );
    let mut pages = Vec::new();
    for rule in Rule::ALL {
        let info = rule.info();
        index.push_str(&format!("| [`{0}`]({0}.md) | {1} | {2} |\n", info.id, info.outcome.as_str(), info.title));
        let kind = if rule.is_flow_gate() { "*Flow rule* (`archmax flow run`)." } else { "*Kernel rule.*" };
        let mut text =
            demote_title(info.explanation, &format!("{kind} *Outcome:* {}. {}", info.outcome.as_str(), info.title));
        let goldens = if rule.is_flow_gate() { flows } else { runs };
        text.push_str(&rule_example(goldens, info.id, info.outcome.as_str() == "allows")?);
        pages.push(Page { path: format!("rules/{}.md", info.id), title: info.id.to_string(), text });
    }
    pages.insert(0, Page { path: "rules/index.md".to_string(), title: "Kernel rules".to_string(), text: index });
    Ok(pages)
}

/// "What archmax prints" for a rule: the smallest run golden whose events name it, or
/// why no run shows it.
fn rule_example(goldens: &Path, rule: &str, allows: bool) -> Result<String, String> {
    if allows {
        return Ok("## What archmax prints\n\nNothing of its own: a call this rule allows simply runs, and the \
                   `tool-called` event records it. Only refusals name their rule.\n"
            .to_string());
    }
    if let Some((_, code)) = PREVENTED.iter().find(|(id, _)| *id == rule) {
        return Ok(format!(
            "## What archmax prints\n\nA workspace that could meet this refusal does not validate: \
             [{code}](../codes/{code}.md) refuses it first, and `archmax run`, `serve` and `build` \
             validate before any session starts. The kernel keeps the rule for programs loaded \
             some other way.\n"
        ));
    }
    let records = |line: &str| recorded_refusal(line, rule);
    let listing = fs::read_dir(goldens).map_err(|error| format!("cannot read `{}`: {error}", goldens.display()))?;
    let own = format!("rule-{}", rule.replace('.', "-"));
    let mut cases: Vec<(bool, u64, PathBuf)> = Vec::new();
    for entry in listing.flatten() {
        let recorded = fs::read_to_string(entry.path().join("expected.txt")).unwrap_or_default();
        let named = entry.file_name().to_string_lossy() == own.as_str();
        if named || recorded.lines().any(records) {
            let size = shown_files(&entry.path().join("workspace"))
                .iter()
                .filter_map(|file| fs::metadata(file).ok())
                .map(|meta| meta.len())
                .sum();
            cases.push((!named, size, entry.path()));
        }
    }
    cases.sort();
    let Some((_, _, case)) = cases.first() else {
        return Err(format!(
            "no golden under `{}` shows a refusal by `{rule}`: add a case named `{own}` there, \
             or list the rule in `PREVENTED` with the code that stops it first",
            goldens.display()
        ));
    };
    let recorded = read(&case.join("expected.txt"))?;
    let mut text = format!("## What archmax prints\n\n{}.\n\n", description(case)?);
    text.push_str(&workspace_files(&case.join("workspace"))?);
    let mut refusals: Vec<&str> = Vec::new();
    for step in recorded.split("\n$ ").map(|step| step.strip_prefix("$ ").unwrap_or(step)) {
        let command = step.lines().next().unwrap_or_default();
        let terminal = match section(step, "--- stderr\n") {
            "" => section(step, "--- stdout\n"),
            progress => progress,
        };
        text.push_str(&format!("`{command}` shows:\n\n```text\n{terminal}\n```\n\n"));
        // A run golden records events apart; a flow golden's events are its JSON stdout.
        refusals.extend(section(step, "--- events\n").lines().filter(|line| records(line)));
        refusals.extend(section(step, "--- stdout\n").lines().filter(|line| line.starts_with('{') && records(line)));
    }
    if refusals.is_empty() {
        text.push_str(
            "No event names this rule: the refusal is the answer the model reads, which the \
             transcript shows.\n",
        );
    } else {
        text.push_str("The events that record the refusal:\n\n```json\n");
        for line in refusals {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str("```\n");
    }
    Ok(text)
}

/// Whether a recorded event line is a refusal by `rule`. Most refusals are `tool-blocked`
/// events naming their rule; a refused sub-workflow call is a failed
/// `sub-workflow-result` whose reason opens with the check's short name.
fn recorded_refusal(line: &str, rule: &str) -> bool {
    if line.contains(&format!("\"rule\":\"{rule}\"")) {
        return true;
    }
    rule.strip_prefix("delegation.").is_some_and(|check| {
        line.contains("\"event\":\"sub-workflow-result\"") && line.contains(&format!("\"reason\":\"{check}:"))
    })
}

/// The text of one `--- name` section of a recorded step, up to the next section.
/// An empty section is followed at once by the next marker.
fn section<'a>(step: &'a str, marker: &str) -> &'a str {
    let Some((_, rest)) = step.split_once(marker) else { return "" };
    if rest.starts_with("--- ") {
        return "";
    }
    rest.split("\n--- ").next().unwrap_or(rest).trim_end()
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()))
}

/// The one-line description a golden's `case.toml` gives.
fn description(case: &Path) -> Result<String, String> {
    Ok(read(&case.join("case.toml"))?
        .lines()
        .find_map(|line| line.strip_prefix("description = "))
        .map(|quoted| quoted.trim().trim_matches('"').replace("\\\"", "\"").trim_end_matches('.').to_string())
        .unwrap_or_default())
}

/// The explanation with a line of facts under its `# ` heading.
fn demote_title(explanation: &str, facts: &str) -> String {
    let mut text = String::new();
    let mut lines = explanation.lines();
    if let Some(first) = lines.next() {
        text.push_str(first);
        text.push_str("\n\n");
        text.push_str(facts);
        text.push('\n');
    }
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    if !text.ends_with("\n\n") {
        text.push('\n');
    }
    text
}

/// "What `archmax validate` prints" for the code's smallest golden, if it has one.
fn example(goldens: &Path, code: &str) -> Result<Option<String>, String> {
    let listing = fs::read_dir(goldens).map_err(|error| format!("cannot read `{}`: {error}", goldens.display()))?;
    let mut cases: Vec<(u64, PathBuf)> = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{code}-")) {
            let files = shown_files(&entry.path().join("workspace"));
            if files.is_empty() {
                continue;
            }
            let size = files.iter().filter_map(|file| fs::metadata(file).ok()).map(|meta| meta.len()).sum();
            cases.push((size, entry.path()));
        }
    }
    cases.sort();
    let Some((_, case)) = cases.first() else { return Ok(None) };
    let expected = read(&case.join("expected.human"))?;
    let stderr = expected
        .split_once("--- stderr\n")
        .map(|(_, rest)| rest.split("--- stdout").next().unwrap_or(rest))
        .unwrap_or(&expected)
        .trim_end();
    let mut text = format!("## What archmax prints\n\n{}.\n\n", description(case)?);
    text.push_str(&workspace_files(&case.join("workspace"))?);
    text.push_str(&format!("`archmax validate`:\n\n```text\n{stderr}\n```\n"));
    Ok(Some(text))
}

/// Each file of a golden's workspace in a fence, or a line saying why it is not shown.
fn workspace_files(workspace: &Path) -> Result<String, String> {
    let mut text = String::new();
    for file in shown_files(workspace) {
        let shown = file.strip_prefix(workspace).unwrap_or(&file).to_string_lossy().replace('\\', "/");
        if fs::symlink_metadata(&file).is_ok_and(|meta| meta.file_type().is_symlink()) {
            text.push_str(&format!("`{shown}` is a symbolic link, not shown.\n\n"));
            continue;
        }
        let bytes = fs::read(&file).map_err(|error| format!("cannot read `{}`: {error}", file.display()))?;
        let Ok(body) = String::from_utf8(bytes) else {
            text.push_str(&format!("`{shown}` holds bytes that are not UTF-8.\n\n"));
            continue;
        };
        if body.contains('\0') || body.lines().count() > SHOWN_LINES {
            text.push_str(&format!("`{shown}`: {} lines, not shown.\n\n", body.lines().count()));
            continue;
        }
        let fence = if shown.ends_with(".js") {
            "js"
        } else if shown.ends_with(".md") {
            "markdown"
        } else {
            "yaml"
        };
        text.push_str(&format!("`{shown}`:\n\n```{fence}\n{}\n```\n\n", body.trim_end()));
    }
    Ok(text)
}

/// The workspace's files, without the suite's `.gitkeep` placeholders.
fn shown_files(dir: &Path) -> Vec<PathBuf> {
    files_under(dir).into_iter().filter(|path| path.file_name().is_some_and(|name| name != ".gitkeep")).collect()
}

#[cfg(test)]
mod tests {
    use super::{recorded_refusal, section};

    #[test]
    fn an_empty_section_is_empty_and_a_full_one_stops_at_the_next_marker() {
        let step = "archmax run x\nexit: 0\n--- stdout\nanswer\n--- stderr\n--- events\n{\"seq\":1}\n";
        assert_eq!(section(step, "--- stdout\n"), "answer");
        assert_eq!(section(step, "--- stderr\n"), "");
        assert_eq!(section(step, "--- events\n"), "{\"seq\":1}");
        assert_eq!(section(step, "--- missing\n"), "");
    }

    #[test]
    fn a_refused_sub_workflow_call_is_recorded_by_its_checks_short_name() {
        let blocked = r#"{"event":"tool-blocked","rule":"zone.escape"}"#;
        let refused = r#"{"event":"sub-workflow-result","status":"error","reason":"missing-param: it needs 'amount'"}"#;
        assert!(recorded_refusal(blocked, "zone.escape"));
        assert!(!recorded_refusal(blocked, "zone.link"));
        assert!(recorded_refusal(refused, "delegation.missing-param"));
        assert!(!recorded_refusal(refused, "delegation.invalid-param"));
        assert!(!recorded_refusal(refused, "tool.unknown"));
    }
}
