//! Context budgets: how many tokens a text takes, how large a model's window is, and the
//! host's settings for both (`archmax.toml` `[context]`).
//!
//! Token counts are exact for OpenAI-family models (the `o200k_base` encoding of
//! `tiktoken`, which the GPT-4o, GPT-4.1, GPT-5 and o-series models use) and estimated
//! for every other model as one token per four characters, rounded up — close for English
//! prose and code under the Claude, Llama, Mistral and Qwen tokenizers, and on the safe
//! (high) side for dense text. A window the host does not set comes from a table of model
//! families, else 128,000 tokens.

use std::sync::OnceLock;

pub use archmax_config::settings::ContextSettings;

/// The window assumed for a model the table does not know.
pub(crate) const DEFAULT_WINDOW_TOKENS: u64 = 128_000;

/// Context windows by model family: the first key the model id (lowercased, provider
/// prefix dropped) starts with wins, so longer keys come first.
const WINDOWS: [(&str, u64); 14] = [
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-5", 400_000),
    ("gpt-3.5", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("llama", 128_000),
    ("mistral", 128_000),
    ("qwen", 131_072),
];

/// A model id without its provider prefix (`openai/gpt-4o` → `gpt-4o`), lowercased.
fn family(model: &str) -> String {
    model.rsplit('/').next().unwrap_or(model).trim().to_ascii_lowercase()
}

/// Whether `model` counts with `o200k_base`.
pub(crate) fn is_openai_family(model: &str) -> bool {
    let family = family(model);
    ["gpt-", "chatgpt", "o1", "o3", "o4"].iter().any(|prefix| family.starts_with(prefix))
}

/// The context window of `model` in tokens: the host's setting, else the table.
pub fn window_tokens(settings: &ContextSettings, model: Option<&str>) -> u64 {
    if let Some(window) = settings.window_tokens {
        return window;
    }
    let family = model.map(family).unwrap_or_default();
    WINDOWS.iter().find(|(key, _)| family.starts_with(key)).map_or(DEFAULT_WINDOW_TOKENS, |(_, window)| *window)
}

fn encoding() -> Option<&'static tiktoken_rs::CoreBPE> {
    static ENCODING: OnceLock<Option<tiktoken_rs::CoreBPE>> = OnceLock::new();
    ENCODING.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref()
}

/// How many tokens `text` takes for `model` (`None`: an unknown model, estimated).
pub(crate) fn count_tokens(model: Option<&str>, text: &str) -> u64 {
    if model.is_some_and(is_openai_family)
        && let Some(encoding) = encoding()
    {
        return encoding.encode_ordinary(text).len() as u64;
    }
    estimate(text)
}

/// One token per four characters, rounded up.
pub fn estimate(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_count_exactly_and_the_others_are_estimated() {
        // o200k_base: "hello world" is two tokens; the estimate would say three.
        assert_eq!(count_tokens(Some("gpt-4o-mini"), "hello world"), 2);
        assert_eq!(count_tokens(Some("openai/gpt-4.1"), "hello world"), 2);
        assert_eq!(count_tokens(Some("claude-sonnet-4"), "hello world"), 3);
        assert_eq!(count_tokens(None, "hello world"), 3);
        assert_eq!(count_tokens(None, ""), 0);
        assert_eq!(estimate("ééé"), 1, "characters, not bytes");
        assert!(is_openai_family("o3-mini") && is_openai_family("ChatGPT-4o-latest"));
        assert!(!is_openai_family("claude-opus-4-1") && !is_openai_family("llama-3.1-o1-distill"));
    }

    #[test]
    fn the_window_is_the_hosts_else_the_models_family_else_the_default() {
        let none = ContextSettings::default();
        assert_eq!(window_tokens(&none, Some("gpt-4.1-mini")), 1_047_576);
        assert_eq!(window_tokens(&none, Some("gpt-4o")), 128_000);
        assert_eq!(window_tokens(&none, Some("anthropic/claude-sonnet-4")), 200_000);
        assert_eq!(window_tokens(&none, Some("some-local-model")), DEFAULT_WINDOW_TOKENS);
        assert_eq!(window_tokens(&none, None), DEFAULT_WINDOW_TOKENS);
        let set = ContextSettings { window_tokens: Some(32_000), ..none };
        assert_eq!(window_tokens(&set, Some("gpt-4.1")), 32_000);
    }
}
