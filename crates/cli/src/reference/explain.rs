//! One page per diagnostic code and per kernel rule, from the registries `archmax
//! explain` prints (`archmax_compiler::diagnostic::Code`, `archmax_vm::kernel::Rule`).
//!
//! A code's page ends with a real run: the smallest workspace among its diagnostic
//! goldens (`golden/diagnostics/<code>-<case>/`), and what `archmax validate` printed for
//! it, the text the golden suite checks byte for byte.

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

pub fn rule_pages() -> Vec<Page> {
    let mut index = String::from(
        "# Kernel rules\n\nThe kernel decides every tool call, file access and transition against these rules \
         at run time, whatever the model asks. A refusal names its rule in the `tool-blocked` event and in \
         the conversation; `archmax explain <rule>` prints the same text.\n\n| Rule | Outcome | About |\n| --- | --- | --- |\n",
    );
    let mut pages = Vec::new();
    for rule in Rule::ALL {
        let info = rule.info();
        index.push_str(&format!("| [`{0}`]({0}.md) | {1} | {2} |\n", info.id, info.outcome.as_str(), info.title));
        let text = demote_title(
            info.explanation,
            &format!("*Kernel rule.* *Outcome:* {}. {}", info.outcome.as_str(), info.title),
        );
        pages.push(Page { path: format!("rules/{}.md", info.id), title: info.id.to_string(), text });
    }
    pages.insert(0, Page { path: "rules/index.md".to_string(), title: "Kernel rules".to_string(), text: index });
    pages
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
    let read =
        |path: &Path| fs::read_to_string(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()));
    let description = read(&case.join("case.toml"))?
        .lines()
        .find_map(|line| line.strip_prefix("description = "))
        .map(|quoted| quoted.trim().trim_matches('"').replace("\\\"", "\""))
        .unwrap_or_default();
    let expected = read(&case.join("expected.human"))?;
    let stderr = expected
        .split_once("--- stderr\n")
        .map(|(_, rest)| rest.split("--- stdout").next().unwrap_or(rest))
        .unwrap_or(&expected)
        .trim_end();
    let mut text = format!("## What archmax prints\n\n{description}.\n\n");
    let workspace = case.join("workspace");
    for file in shown_files(&workspace) {
        let shown = file.strip_prefix(&workspace).unwrap_or(&file).to_string_lossy().replace('\\', "/");
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
    text.push_str(&format!("`archmax validate`:\n\n```text\n{stderr}\n```\n"));
    Ok(Some(text))
}

/// The workspace's files, without the suite's `.gitkeep` placeholders.
fn shown_files(dir: &Path) -> Vec<PathBuf> {
    files_under(dir).into_iter().filter(|path| path.file_name().is_some_and(|name| name != ".gitkeep")).collect()
}
