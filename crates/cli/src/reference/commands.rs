//! The command-line reference: one page per command and subcommand, read from the same
//! `clap` definition the binary parses, so a new flag is documented the moment it exists.

use clap::{Arg, Command};

use super::Page;

/// `cli/index.md` for the root (its global options and the command list), then one page
/// per command path, `cli/<command>[-<subcommand>].md`.
pub fn pages(mut root: Command) -> Vec<Page> {
    root.build();
    let mut pages = vec![Page { path: "cli/index.md".to_string(), title: "archmax".to_string(), text: index(&root) }];
    for command in visible(&root) {
        add(command, &[], &mut pages);
    }
    pages
}

fn visible(command: &Command) -> impl Iterator<Item = &Command> {
    command.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
}

/// The page file of a command path, relative to `cli/`.
fn file_of(path: &[&str]) -> String {
    format!("{}.md", path.join("-"))
}

fn add(command: &Command, parents: &[&str], pages: &mut Vec<Page>) {
    let mut path: Vec<&str> = parents.to_vec();
    path.push(command.get_name());
    let title = format!("archmax {}", path.join(" "));
    let mut text = format!("# `{title}`\n\n");
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        text.push_str(&format!("{}\n\n", sentence(&about.to_string())));
    }
    let usage = command.clone().render_usage().to_string();
    let usage: Vec<&str> = usage.trim().trim_start_matches("Usage:").lines().map(str::trim).collect();
    text.push_str(&format!("```text\n{}\n```\n\n", usage.join("\n")));
    let subcommands: Vec<&Command> = visible(command).collect();
    if !subcommands.is_empty() {
        text.push_str("## Subcommands\n\n");
        for sub in &subcommands {
            let mut inner = path.clone();
            inner.push(sub.get_name());
            let about = sub.get_about().map(|about| about.to_string()).unwrap_or_default();
            text.push_str(&format!("- [`{}`]({}): {}\n", sub.get_name(), file_of(&inner), first_line(&about)));
        }
        text.push('\n');
    }
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        own_arguments(command).partition(|argument| argument.is_positional());
    if !positionals.is_empty() {
        text.push_str("## Arguments\n\n");
        for argument in positionals {
            text.push_str(&argument_entry(argument));
        }
    }
    if !options.is_empty() {
        text.push_str("## Options\n\n");
        for argument in options {
            text.push_str(&argument_entry(argument));
        }
    }
    text.push_str("The [global options](index.md#global-options) apply too.\n");
    pages.push(Page { path: format!("cli/{}", file_of(&path)), title, text });
    for sub in subcommands {
        add(sub, &path, pages);
    }
}

/// The arguments a command declares itself: not `--help`/`--version`, not hidden, and not
/// the root's global options, which `build` copies into every subcommand.
fn own_arguments(command: &Command) -> impl Iterator<Item = &Arg> {
    command.get_arguments().filter(|argument| {
        !argument.is_hide_set()
            && !argument.is_global_set()
            && !matches!(argument.get_id().as_str(), "help" | "version")
    })
}

fn index(root: &Command) -> String {
    let mut text = String::from("# The `archmax` command line\n\n");
    if let Some(about) = root.get_about() {
        text.push_str(&format!("{}.\n\n", about.to_string().trim().trim_end_matches('.')));
    }
    text.push_str(
        "Exit codes: 0 when the command did its job, 1 when it established a failure (an invalid \
         workflow, a failed case, an unknown name), 2 for a usage error; under `archmax flow` a \
         usage error is 1 and 2 is a walk that finished unclean.\n\n## Commands\n\n",
    );
    for command in visible(root) {
        let about = command.get_about().map(|about| about.to_string()).unwrap_or_default();
        text.push_str(&format!(
            "- [`archmax {}`]({}): {}\n",
            command.get_name(),
            file_of(&[command.get_name()]),
            first_line(&about)
        ));
    }
    text.push_str("\n## Global options\n\nEvery command takes these.\n\n");
    for argument in root.get_arguments().filter(|argument| argument.is_global_set() && !argument.is_hide_set()) {
        text.push_str(&argument_entry(argument));
    }
    text
}

/// `text` trimmed and ending in a full stop (`clap` drops a doc comment's last one).
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.ends_with(['.', '!', '?', ':', ')']) || text.ends_with("```") {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// `--name <VALUE>` (or `<NAME>` for a positional) with its help, default and values.
fn argument_entry(argument: &Arg) -> String {
    let values: Vec<String> =
        argument.get_value_names().into_iter().flatten().map(|name| format!("<{name}>")).collect();
    let takes_value = argument.get_num_args().is_some_and(|range| range.takes_values());
    let shown = if argument.is_positional() {
        let name =
            values.first().cloned().unwrap_or_else(|| format!("<{}>", argument.get_id().as_str().to_uppercase()));
        if argument.get_num_args().is_some_and(|range| range.max_values() > 1) { format!("{name}...") } else { name }
    } else {
        let mut flags = Vec::new();
        if let Some(short) = argument.get_short() {
            flags.push(format!("-{short}"));
        }
        if let Some(long) = argument.get_long() {
            flags.push(format!("--{long}"));
        }
        let mut shown = flags.join(", ");
        if takes_value {
            let value =
                values.first().cloned().unwrap_or_else(|| format!("<{}>", argument.get_id().as_str().to_uppercase()));
            shown.push(' ');
            shown.push_str(&value);
        }
        shown
    };
    entry(&shown, argument)
}

fn entry(shown: &str, argument: &Arg) -> String {
    let required = if argument.is_required_set() { " *(required)*" } else { "" };
    let mut text = format!("### `{shown}`{required}\n\n");
    let help = argument.get_long_help().or(argument.get_help()).map(|help| help.to_string()).unwrap_or_default();
    if !help.is_empty() {
        text.push_str(&sentence(&help));
        text.push_str("\n\n");
    }
    let possible: Vec<String> = argument
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| match value.get_help() {
            Some(help) => format!("- `{}`: {}", value.get_name(), sentence(&help.to_string())),
            None => format!("- `{}`", value.get_name()),
        })
        .collect();
    if !possible.is_empty() {
        text.push_str("Values:\n\n");
        text.push_str(&possible.join("\n"));
        text.push_str("\n\n");
    }
    let defaults: Vec<String> =
        argument.get_default_values().iter().map(|value| value.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && argument.get_num_args().is_none_or(|range| range.takes_values()) {
        text.push_str(&format!("Default: `{}`.\n\n", defaults.join(" ")));
    }
    text
}
