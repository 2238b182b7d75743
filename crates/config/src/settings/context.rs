//! The `[context]` table of `archmax.toml`: how much of a model's context window a
//! session's prompts may use, when a long tool result goes to `large_tool_results/`
//! instead of the conversation, and how much of the conversation is kept verbatim.
//!
//! ```toml
//! [context]
//! window_tokens = 128000          # the model's window (default: from the runtime's table of models)
//! compact_at = 0.8                # compact the conversation past this share of the window
//! max_tool_result_tokens = 8000   # a longer tool result is offloaded, the model gets a preview
//! keep_recent = 20                # messages always kept verbatim
//! ```
//!
//! Every key is optional; a bad value is an `AMX0011` error naming the key and the range,
//! and the default stands for it.

use toml::de::{DeTable, DeValue};

use super::RunnerSettings;
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The keys `[context]` takes.
const KEYS: [&str; 4] = ["window_tokens", "compact_at", "max_tool_result_tokens", "keep_recent"];

/// The context budgets a host sets (each `None` or default where it sets nothing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContextSettings {
    /// The context window, in tokens; `None`: the runtime's table of models decides.
    pub window_tokens: Option<u64>,
    /// The share of the window past which the conversation is compacted.
    pub compact_at: f64,
    /// A tool result longer than this many tokens is offloaded.
    pub max_tool_result_tokens: u64,
    /// Messages at the end of the conversation always kept verbatim.
    pub keep_recent: u64,
}

impl Default for ContextSettings {
    fn default() -> ContextSettings {
        ContextSettings { window_tokens: None, compact_at: 0.8, max_tool_result_tokens: 8_000, keep_recent: 20 }
    }
}

/// Reads `[context]` of `text` into `settings`.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let document = document.get_ref();
    let Some(spanned) = document.get("context") else { return };
    let span = |range: std::ops::Range<usize>| Span::new(file, range.start, range.end);
    let whole_table = span(spanned.span());
    let DeValue::Table(table) = spanned.get_ref() else {
        diagnostics.push(
            Diagnostic::at(Code::HostConfig, whole_table, "`context` in archmax.toml is not a table")
                .with_help(format!("write a `[context]` table with any of {}", list_names(&KEYS))),
        );
        return;
    };
    let context = &mut settings.context;
    for (key, value) in table.iter() {
        let name = key.get_ref().as_ref();
        let at = span(value.span());
        let mut refuse = |message: String, help: &str| {
            diagnostics.push(Diagnostic::at(Code::HostConfig, at, message).with_help(help.to_string()));
        };
        let whole = |value: &DeValue<'_>| match value {
            DeValue::Integer(integer) => integer.to_string().replace('_', "").parse::<i64>().ok(),
            _ => None,
        };
        match name {
            "window_tokens" => match whole(value.get_ref()) {
                Some(tokens @ 1_000..=100_000_000) => context.window_tokens = Some(tokens as u64),
                _ => refuse(
                    "`context.window_tokens` is not a number of tokens from 1000 to 100000000".to_string(),
                    "give the model's context window as a whole number of tokens, such as 128000",
                ),
            },
            "compact_at" => match value.get_ref() {
                DeValue::Float(share) => match share.to_string().parse::<f64>() {
                    Ok(share) if (0.1..=0.95).contains(&share) => context.compact_at = share,
                    _ => refuse(
                        "`context.compact_at` is not a share of the window from 0.1 to 0.95".to_string(),
                        "give a fraction such as 0.8: the conversation is compacted past that share of the window",
                    ),
                },
                _ => refuse(
                    "`context.compact_at` is not a fraction".to_string(),
                    "give a fraction such as 0.8 (with its decimal point)",
                ),
            },
            "max_tool_result_tokens" => match whole(value.get_ref()) {
                Some(tokens @ 100..=10_000_000) => context.max_tool_result_tokens = tokens as u64,
                _ => refuse(
                    "`context.max_tool_result_tokens` is not a number of tokens from 100 to 10000000".to_string(),
                    "give a whole number of tokens, such as 8000: a longer tool result goes to large_tool_results/",
                ),
            },
            "keep_recent" => match whole(value.get_ref()) {
                Some(count @ 0..=10_000) => context.keep_recent = count as u64,
                _ => refuse(
                    "`context.keep_recent` is not a number of messages from 0 to 10000".to_string(),
                    "give how many of the last messages are always kept verbatim, such as 20",
                ),
            },
            other => {
                let help = match did_you_mean(other, KEYS) {
                    Some(close) => format!("did you mean `{close}`? `[context]` takes {}", list_names(&KEYS)),
                    None => format!("`[context]` takes {}", list_names(&KEYS)),
                };
                diagnostics.push(
                    Diagnostic::at(Code::HostConfig, span(key.span()), format!("`context.{other}` is not a setting"))
                        .with_help(help),
                );
            }
        }
    }
    if let Some(window) = context.window_tokens
        && context.max_tool_result_tokens >= window
    {
        diagnostics.push(
            Diagnostic::at(
                Code::HostConfig,
                whole_table,
                format!(
                    "`context.max_tool_result_tokens` ({}) is not below `context.window_tokens` ({window})",
                    context.max_tool_result_tokens
                ),
            )
            .with_help("a tool result must fit the window many times over; lower `max_tool_result_tokens`"),
        );
        context.max_tool_result_tokens = ContextSettings::default().max_tool_result_tokens.min(window / 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse_runner_settings;

    fn read(text: &str) -> (ContextSettings, Vec<String>) {
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        (settings.context, diagnostics.iter().map(|diagnostic| diagnostic.message.clone()).collect())
    }

    #[test]
    fn every_key_is_read_and_left_out_keys_keep_their_defaults() {
        let (context, problems) = read(
            "[context]\nwindow_tokens = 200_000\ncompact_at = 0.75\nmax_tool_result_tokens = 4000\nkeep_recent = 8\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            context,
            ContextSettings {
                window_tokens: Some(200_000),
                compact_at: 0.75,
                max_tool_result_tokens: 4000,
                keep_recent: 8
            }
        );
        assert_eq!(read("").0, ContextSettings::default());
        assert_eq!(
            read("[context]\nkeep_recent = 3\n").0,
            ContextSettings { keep_recent: 3, ..ContextSettings::default() }
        );
    }

    #[test]
    fn bad_values_and_unknown_keys_are_named_and_the_defaults_stand() {
        let (context, problems) =
            read("[context]\nwindow_tokens = 12\ncompact_at = 1\nmax_tool_result_tokens = \"big\"\nkeep_recnt = 4\n");
        assert_eq!(context, ContextSettings::default());
        let joined = problems.join("\n");
        for expected in [
            "`context.window_tokens` is not a number of tokens",
            "`context.compact_at` is not a fraction",
            "`context.max_tool_result_tokens` is not a number of tokens",
            "`context.keep_recnt` is not a setting",
        ] {
            assert!(joined.contains(expected), "{joined}");
        }
        let (_, problems) = read("[context]\ncompact_at = 0.99\n");
        assert!(problems[0].contains("from 0.1 to 0.95"), "{problems:?}");
        let (context, problems) = read("[context]\nwindow_tokens = 8000\nmax_tool_result_tokens = 9000\n");
        assert!(problems[0].contains("is not below"), "{problems:?}");
        assert!(context.max_tool_result_tokens < 8000);
        let (_, problems) = read("context = 3\n");
        assert!(problems[0].contains("is not a table"), "{problems:?}");
    }
}
