//! The book (`docs/`) and the README, held to the code:
//! - the generated reference is exactly what this build generates (`archmax
//!   book-reference --check`);
//! - every command, diagnostic code, kernel rule, event kind and configuration key has a
//!   page, found independently of the generator (from `--help`, `explain --list` and the
//!   schemas);
//! - every link between the book's pages, and from the README, resolves, anchors included;
//! - every snippet the book marks `sh,runnable` runs against a copy of the example
//!   workspace;
//! - the README stays short, opens with the workflow of the tutorial's last step, which
//!   validates clean, and names the commands `.ci/run` runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use serde_json::Value;

use crate::support::{archmax, copy_dir, repository, scratch};

fn book_source() -> PathBuf {
    repository().join("docs/src")
}

#[test]
fn the_reference_is_what_this_build_generates() {
    let repo = repository();
    let repo_text = repo.to_string_lossy().into_owned();
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|value| !value.is_empty() && value != "0") {
        let write = archmax(&repo, &["book-reference", "--repository", &repo_text]);
        assert_eq!(write.code, 0, "{}", write.stderr);
    }
    let check = archmax(&repo, &["book-reference", "--check", "--repository", &repo_text]);
    assert_eq!(
        check.code, 0,
        "{}\n(rerun with UPDATE_GOLDEN=1, or `cargo run -p archmax-cli -- book-reference`, and review the diff)",
        check.stderr
    );
}

/// The subcommand paths `--help` lists under "Commands:", recursively.
fn commands(path: &mut Vec<String>, found: &mut Vec<String>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = archmax(&repository(), &args);
    assert_eq!(help.code, 0, "archmax {}: {}", args.join(" "), help.stderr);
    let Some((_, listing)) = help.stdout.split_once("Commands:\n") else { return };
    let names: Vec<String> = listing
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    for name in names {
        path.push(name);
        found.push(path.join("-"));
        commands(path, found);
        path.pop();
    }
}

#[test]
fn every_command_code_rule_event_kind_and_key_has_a_page() {
    let reference = book_source().join("reference");
    let mut missing: Vec<String> = Vec::new();
    let mut expect = |page: PathBuf| {
        if !page.is_file() {
            missing.push(page.strip_prefix(repository()).unwrap_or(&page).display().to_string());
        }
    };

    let mut found = Vec::new();
    commands(&mut Vec::new(), &mut found);
    assert!(found.len() > 20, "`archmax --help` lists its commands: {found:?}");
    assert!(found.iter().any(|name| name == "sessions-rm"), "nested commands are found: {found:?}");
    for command in &found {
        expect(reference.join(format!("cli/{command}.md")));
    }

    let list = archmax(&repository(), &["explain", "--list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let mut codes = 0;
    for line in list.stdout.lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        if name.starts_with("AMX") {
            codes += 1;
            expect(reference.join(format!("codes/{name}.md")));
        } else {
            expect(reference.join(format!("rules/{name}.md")));
        }
    }
    assert!(codes > 100, "`explain --list` lists the codes");

    let events: Value =
        serde_json::from_str(&archmax(&repository(), &["schema", "events"]).stdout).expect("events schema");
    let kinds = events["properties"]["event"]["enum"].as_array().expect("the event kinds");
    for kind in kinds {
        expect(reference.join(format!("events/{}.md", kind.as_str().expect("a kind"))));
    }

    for (schema, page) in [("config", "config.md"), ("workflow", "workflow.md"), ("case", "case.md")] {
        let document: Value =
            serde_json::from_str(&archmax(&repository(), &["schema", schema]).stdout).expect("a schema");
        let mut names = BTreeSet::new();
        property_names(&document, &mut names);
        let text = fs::read_to_string(reference.join(page)).unwrap_or_default();
        let headings: BTreeSet<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("## `")?.strip_suffix('`'))
            .filter_map(|path| path.rsplit(['.', ']']).next())
            .collect();
        for name in names {
            if !headings.contains(name.as_str()) {
                missing.push(format!("docs/src/reference/{page}: a heading for the key `{name}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "pages missing (run `cargo run -p archmax-cli -- book-reference`):\n{}",
        missing.join("\n")
    );
}

/// Every name that appears under `properties` anywhere in a schema.
fn property_names(value: &Value, names: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object {
                if key == "properties"
                    && let Value::Object(properties) = inner
                {
                    names.extend(properties.keys().cloned());
                }
                property_names(inner, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| property_names(item, names)),
        _ => {}
    }
}

/// A page's Markdown with mdBook's `{{#include FILE}}` lines replaced by the file.
fn expanded(page: &Path) -> String {
    let text = fs::read_to_string(page).unwrap_or_else(|error| panic!("{}: {error}", page.display()));
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        match line.trim().strip_prefix("{{#include ").and_then(|rest| rest.strip_suffix("}}")) {
            Some(included) => {
                let file = page.parent().expect("a folder").join(included.trim());
                out.push_str(
                    &fs::read_to_string(&file)
                        .unwrap_or_else(|error| panic!("{} includes {}: {error}", page.display(), file.display())),
                );
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    out
}

/// mdBook's id for a heading: lower case, spaces to `-`, only letters, digits, `-`, `_`.
fn heading_id(text: &str) -> String {
    text.chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch.to_ascii_lowercase())
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of a page's headings (mdBook numbers repeats `-1`, `-2`) and its links.
fn headings_and_links(markdown: &str) -> (BTreeSet<String>, Vec<String>) {
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut links = Vec::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let id = heading_id(&heading.take().unwrap_or_default());
                let count = seen.entry(id.clone()).or_default();
                ids.insert(if *count == 0 { id.clone() } else { format!("{id}-{count}") });
                *count += 1;
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&text);
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                links.push(dest_url.into_string());
            }
            _ => {}
        }
    }
    (ids, links)
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "md") {
            out.push(path);
        }
    }
}

/// `base/relative` with `.` and `..` folded, without touching the disk.
fn joined(base: &Path, relative: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for part in base.join(relative).components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_link_in_the_book_and_the_readme_resolves() {
    let source = book_source();
    let mut pages = Vec::new();
    markdown_files(&source, &mut pages);
    pages.push(repository().join("README.md"));
    let parsed: BTreeMap<PathBuf, (BTreeSet<String>, Vec<String>)> =
        pages.iter().map(|page| (joined(page, ""), headings_and_links(&expanded(page)))).collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, (_, links)) in &parsed {
        for link in links {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if file.is_empty() { page.clone() } else { joined(page.parent().expect("a folder"), file) };
            let from_book = page.starts_with(joined(&source, ""));
            if from_book && !target.starts_with(joined(&source, "")) {
                broken.push(format!("{}: `{link}` leaves docs/src, so the built book cannot serve it", page.display()));
                continue;
            }
            if !target.exists() {
                broken.push(format!("{}: `{link}`: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() {
                match parsed.get(&target) {
                    Some((ids, _)) if ids.contains(anchor) => {}
                    Some(_) => broken.push(format!("{}: `{link}`: no heading with that id", page.display())),
                    None => {
                        broken.push(format!("{}: `{link}`: an anchor into a file that is not a page", page.display()))
                    }
                }
            }
        }
    }
    assert!(checked > 300, "the pages link to each other ({checked} links)");
    assert!(broken.is_empty(), "{} broken link(s):\n{}", broken.len(), broken.join("\n"));
}

/// The fenced code blocks of a Markdown text, each with its info string.
fn fenced_blocks(markdown: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for event in Parser::new(markdown) {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                current = Some((info.into_string(), String::new()))
            }
            Event::Text(text) => {
                if let Some((_, body)) = current.as_mut() {
                    body.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(current.take()),
            _ => {}
        }
    }
    blocks
}

/// The code blocks of a page whose info string is `sh,runnable`.
fn runnable_snippets(markdown: &str) -> Vec<String> {
    fenced_blocks(markdown).into_iter().filter(|(info, _)| info == "sh,runnable").map(|(_, body)| body).collect()
}

#[test]
fn runnable_snippets_run_against_the_example_workspace() {
    let binary = Path::new(env!("CARGO_BIN_EXE_archmax"));
    let carrier = binary.with_file_name("archmax-carrier-mcp");
    assert!(
        carrier.is_file(),
        "{} is missing: the snippets use the example's carrier server; run the whole suite \
         (`cargo test --workspace`) or build it first (`cargo build -p archmax-example-carrier`)",
        carrier.display()
    );
    let mut pages = Vec::new();
    markdown_files(&book_source(), &mut pages);
    pages.sort();
    let mut ran = 0;
    for page in pages {
        for (index, snippet) in runnable_snippets(&expanded(&page)).into_iter().enumerate() {
            ran += 1;
            let folder = scratch(&format!("book-snippet-{ran}"));
            let _ = fs::remove_dir_all(&folder);
            copy_dir(&repository().join("specs"), &folder.join("specs"));
            let path = format!(
                "{}:{}",
                binary.parent().expect("a folder").display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let output = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &snippet])
                .current_dir(&folder)
                .env("PATH", path)
                .env("NO_COLOR", "1")
                .env_remove("ARCHMAX_STORE")
                .env_remove("ARCHMAX_MODEL")
                .env_remove("ARCHMAX_TRUSTED_KEYS")
                .output()
                .expect("bash runs");
            assert!(
                output.status.success(),
                "snippet {} of {} failed ({}):\n{snippet}\nstdout:\n{}\nstderr:\n{}",
                index + 1,
                page.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            let _ = fs::remove_dir_all(&folder);
        }
    }
    assert!(ran >= 1, "the book marks at least one snippet runnable");
}

#[test]
fn the_readme_is_short_and_opens_with_a_workflow_that_validates() {
    let readme = fs::read_to_string(repository().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    // 220: the client libraries' section (two short examples) took it past the old 200.
    assert!(lines <= 220, "README.md has {lines} lines; the manual belongs in the book (docs/)");
    let blocks = fenced_blocks(&readme);
    let (info, first) = blocks.first().expect("the README shows code");
    assert_eq!(info, "yaml", "the README's first block is the workflow");
    let expense = repository().join("golden/runs/tutorial-5-cases/workspace");
    let golden = fs::read_to_string(expense.join("workflows/expense/workflow.yaml")).expect("the golden workflow");
    assert_eq!(first, &golden, "the README's workflow is the tutorial's last step (golden/runs/tutorial-5-cases)");
    for kind in ["human", "code"] {
        assert!(first.contains(&format!("type: {kind}")), "the workflow shows a {kind} state");
    }
    assert!(first.contains("tool: payments__pay"), "the workflow shows a governed host tool");

    let root = scratch("book-expense");
    let _ = fs::remove_dir_all(&root);
    copy_dir(&expense, &root);
    let validate = archmax(&root, &["validate", "--root", "."]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        validate.stdout.contains("0 error(s), 0 warning(s)") || validate.stdout.starts_with("valid"),
        "{}",
        validate.stdout
    );
    assert!(
        !validate.stderr.contains("warning"),
        "the README's workflow validates without warnings:\n{}",
        validate.stderr
    );
    let _ = fs::remove_dir_all(&root);

    // The providers example is read as the runner reads it: three kinds, three routes.
    let (_, settings) = blocks.iter().find(|(info, _)| info == "toml").expect("the README's archmax.toml");
    let (read, problems) =
        archmax_config::settings::parse_runner_settings(archmax_program::source::FileId(0), settings);
    let problems: Vec<&str> = problems.iter().map(|problem| problem.message.as_str()).collect();
    assert!(problems.is_empty(), "the README's archmax.toml reads without problems: {problems:?}");
    let kinds: Vec<(&str, String)> =
        read.providers.values().map(|provider| (provider.name.as_str(), format!("{:?}", provider.kind))).collect();
    assert_eq!(
        kinds,
        [("azure", "AzureOpenAi".to_string()), ("claude", "Anthropic".to_string()), ("ollama", "OpenAi".to_string())]
    );
    let routes: Vec<(&str, &str)> =
        read.models.values().map(|route| (route.id.as_str(), route.provider.as_str())).collect();
    assert_eq!(routes, [("claude-sonnet-4-5", "claude"), ("gpt-4.1", "azure"), ("llama3.2", "ollama")]);

    let ci = fs::read_to_string(repository().join(".ci/run")).expect(".ci/run");
    let setup =
        blocks.iter().find(|(info, body)| info == "sh" && body.contains("cargo test")).expect("the set-up commands");
    for command in setup.1.lines().filter(|line| line.starts_with("cargo ") || line.starts_with("npm ")) {
        assert!(ci.lines().any(|line| line == command), ".ci/run runs the README's command exactly: {command}");
    }
}
