//! `archmax book-reference [--check]` (hidden): writes the book's reference part,
//! `docs/src/reference/`, from the code, and its entries in `docs/src/SUMMARY.md`.
//!
//! Every page comes from a registry the binary already has, so the book cannot fall
//! behind a new command, flag, code, rule, key or event:
//! - the command line from the `clap` definition ([`commands`]);
//! - diagnostic codes and kernel rules from the `explain` registries, each code with a
//!   real run from its diagnostic goldens and each refusing rule with one from the run
//!   goldens ([`explain`]);
//! - the workflow language, cases and `archmax.toml` from the authoring schemas, and the
//!   events from the events schema ([`documents`]);
//! - the HTTP API from the server's OpenAPI document ([`api`]).
//!
//! `--check` writes nothing and fails, naming each file, when the checked-in pages differ
//! from what the code makes; the test suite runs it (`crates/cli/tests/cli/book.rs`).
//! The reference directory is owned by this command: a file there that it does not make
//! is stale and is removed (or, with `--check`, reported).

mod api;
mod commands;
mod documents;
mod explain;
mod schema;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Command;

use crate::output::failure;

/// The lines of `SUMMARY.md` between which the reference's entries are written.
const BEGIN: &str = "<!-- reference: written by `archmax book-reference`; do not edit by hand -->";
const END: &str = "<!-- reference: end -->";

/// One generated page: its path under `docs/src/reference/`, its title in the table of
/// contents, and its Markdown.
pub struct Page {
    pub path: String,
    pub title: String,
    pub text: String,
}

pub fn run(command: Command, repository: &Path, check: bool) -> ExitCode {
    match generate(command, repository) {
        Ok(book) => apply(&book, repository, check),
        Err(error) => failure(error),
    }
}

/// What the reference should hold: its pages by path, and the new `SUMMARY.md`.
struct Book {
    pages: BTreeMap<String, String>,
    summary: String,
}

fn generate(command: Command, repository: &Path) -> Result<Book, String> {
    let mut sections: Vec<(&str, Vec<Page>)> = vec![
        ("The command line", commands::pages(command)),
        ("Documents", documents::authoring_pages()?),
        ("Events", documents::event_pages()?),
        ("HTTP API", vec![api::page()]),
        ("Diagnostic codes", explain::code_pages(&repository.join("golden/diagnostics"))?),
        ("Kernel rules", explain::rule_pages(&repository.join("golden/runs"), &repository.join("golden/flows"))?),
    ];
    let mut index = String::from(
        "# Reference\n\nThese pages are generated from archmax itself (`archmax book-reference`), and the \
         test suite fails when they fall behind the code.\n\n",
    );
    let mut entries = String::from("- [Reference](reference/index.md)\n");
    for (_, pages) in &sections {
        for (position, page) in pages.iter().enumerate() {
            let nested = position > 0 && pages[0].path.ends_with("index.md");
            let indent = if nested { "    " } else { "  " };
            entries.push_str(&format!("{indent}- [{}](reference/{})\n", page.title, page.path));
            if !nested {
                index.push_str(&format!("- [{}]({})\n", page.title, page.path));
            }
        }
    }
    let mut pages = BTreeMap::new();
    pages.insert("index.md".to_string(), index);
    for (_, section) in sections.iter_mut() {
        for page in section.drain(..) {
            if pages.insert(page.path.clone(), label_fences(&page.text)).is_some() {
                return Err(format!("two reference pages would be written to `{}`", page.path));
            }
        }
    }
    let summary_path = repository.join("docs/src/SUMMARY.md");
    let summary = fs::read_to_string(&summary_path)
        .map_err(|error| format!("cannot read `{}`: {error}", summary_path.display()))?;
    let begin = summary.find(BEGIN);
    let end = begin.and_then(|begin| summary[begin..].find(END).map(|offset| begin + offset));
    let (Some(begin), Some(end)) = (begin, end) else {
        return Err(format!(
            "`{}` lacks the lines `{BEGIN}` and `{END}` that mark where the reference goes",
            summary_path.display()
        ));
    };
    let summary = format!("{}{BEGIN}\n{entries}{}", &summary[..begin], &summary[end..]);
    Ok(Book { pages, summary })
}

/// Fences with no language become `text`: `mdbook test` would compile them as Rust.
fn label_fences(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut open = false;
    for line in markdown.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            if !open && trimmed.trim_end() == "```" {
                out.push_str(&line.replacen("```", "```text", 1));
            } else {
                out.push_str(line);
            }
            open = !open;
        } else {
            out.push_str(line);
        }
    }
    out
}

fn apply(book: &Book, repository: &Path, check: bool) -> ExitCode {
    let directory = repository.join("docs/src/reference");
    let mut differing: Vec<String> = Vec::new();
    for (path, text) in &book.pages {
        let file = directory.join(path);
        if let Some(link) = linked(repository, &file) {
            return failure(format!(
                "`{}` is a symbolic link; the reference holds only the files this command writes: remove the link and run it again",
                link.display()
            ));
        }
        if fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
            differing.push(format!("docs/src/reference/{path}"));
            if !check {
                if let Some(parent) = file.parent()
                    && let Err(error) = fs::create_dir_all(parent)
                {
                    return failure(format!("cannot make `{}`: {error}", parent.display()));
                }
                if let Err(error) = fs::write(&file, text) {
                    return failure(format!("cannot write `{}`: {error}", file.display()));
                }
            }
        }
    }
    for stale in files_under(&directory) {
        let relative = stale.strip_prefix(&directory).unwrap_or(&stale).to_string_lossy().replace('\\', "/");
        if !book.pages.contains_key(&relative) {
            differing.push(format!("docs/src/reference/{relative} (not made by this build)"));
            if !check && let Err(error) = fs::remove_file(&stale) {
                return failure(format!("cannot remove `{}`: {error}", stale.display()));
            }
        }
    }
    let summary = repository.join("docs/src/SUMMARY.md");
    if fs::read_to_string(&summary).ok().as_deref() != Some(book.summary.as_str()) {
        differing.push("docs/src/SUMMARY.md".to_string());
        if !check && let Err(error) = fs::write(&summary, &book.summary) {
            return failure(format!("cannot write `{}`: {error}", summary.display()));
        }
    }
    if check && !differing.is_empty() {
        return failure(format!(
            "the book's reference is behind the code: {} file(s) differ ({}); run `cargo run -p archmax-cli -- book-reference` and commit the result",
            differing.len(),
            differing.join(", ")
        ));
    }
    if !check {
        println!("{} reference file(s) written, {} page(s) in all", differing.len(), book.pages.len());
    }
    ExitCode::SUCCESS
}

/// The first symbolic link on the way from the repository's `docs/` to `file`, if any:
/// writing through one could change a file outside the book.
fn linked(repository: &Path, file: &Path) -> Option<PathBuf> {
    let docs = repository.join("docs");
    let relative = file.strip_prefix(&docs).ok()?;
    let mut path = docs;
    for part in relative.components() {
        path.push(part);
        if fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return Some(path);
        }
    }
    None
}

/// Every file under `dir`, sorted; a symbolic link is listed as a file and never
/// followed (removing it removes the link, not what it points at).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = fs::read_dir(&next) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::label_fences;

    #[test]
    fn only_opening_fences_without_a_language_are_labelled() {
        let text = "a\n```\nx\n```\n```yaml\ny\n```\n";
        assert_eq!(label_fences(text), "a\n```text\nx\n```\n```yaml\ny\n```\n");
    }
}
