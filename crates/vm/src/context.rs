//! Context budgets: how many tokens a text takes, how large a model's window is, and the
//! host's settings for both (`archmax.toml` `[context]`).
//!
//! Token counts are exact for OpenAI-family models (the `o200k_base` encoding of
//! `tiktoken`, which the GPT-4o, GPT-4.1, GPT-5 and o-series models use) and estimated
//! for every other model as one token per four characters, rounded up — close for English
//! prose and code under the Claude, Llama, Mistral and Qwen tokenizers, and on the safe
//! (high) side for dense text. A window the host does not set comes from a table of model
//! families, else 128,000 tokens.
//!
//! The estimate is then corrected by what the provider measures ([`Calibration`]): each
//! answer's `usage.input` is the prompt's real size, so after a session's first call on
//! a model the runtime judges its prompts against the window shrunk by the measured
//! ratio (raised only, at most four times), and compaction triggers where the provider's
//! counts would. OpenAI-family models need no correction and get none.

use std::sync::{Mutex, OnceLock};

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

/// The smallest prompt, estimated and measured alike, a ratio is learned from: in a short
/// prompt the provider's framing (roles, tool markup) outweighs the text.
const MIN_SAMPLE_TOKENS: u64 = 1_024;
/// The bounds of a learned ratio. The estimate is only ever raised: a provider (or a
/// proxy) that reports fewer tokens than estimated, say only the uncached part of a
/// prompt, never makes the runtime wait longer before compacting. Four times the
/// estimate is as dense as text gets (one token per character).
const MIN_SCALE: f64 = 1.0;
const MAX_SCALE: f64 = 4.0;
/// How many sessions' ratios a runtime keeps; the least recently used go first.
const MAX_CALIBRATED_SESSIONS: usize = 1_024;

/// Per session and model, how far the provider's count of a prompt (`usage.input`) was
/// above the estimate of the same prompt, learned from each answer and applied to the
/// session's later estimates. Kept per session so that one session's dense text (CJK,
/// emoji, base64) never makes another compact early; smoothed (the mean of the last
/// ratio and the one before) so one odd answer does not swing it.
pub struct Calibration {
    scales: Mutex<crate::cache::Lru<f64>>,
}

impl Default for Calibration {
    fn default() -> Calibration {
        Calibration { scales: Mutex::new(crate::cache::Lru::new(MAX_CALIBRATED_SESSIONS)) }
    }
}

impl std::fmt::Debug for Calibration {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Calibration")
    }
}

impl Calibration {
    fn key(session: &str, model: Option<&str>) -> String {
        format!("{session}\u{0}{}", model.unwrap_or_default())
    }

    /// The ratio learned for `model` (`None`: the default model) in `session`, if any.
    pub fn scale(&self, session: &str, model: Option<&str>) -> Option<f64> {
        let mut scales = self.scales.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        scales.get(&Calibration::key(session, model)).copied()
    }

    /// Learns from a call of `session` on `model` whose prompt was `estimated` at tokens
    /// before it was sent and `measured` by the provider. Counts of OpenAI-family models
    /// are exact already; a sample too small to say anything is ignored.
    pub fn learn(&self, session: &str, model: Option<&str>, estimated: u64, measured: u64) {
        if model.is_some_and(is_openai_family) || estimated < MIN_SAMPLE_TOKENS || measured < MIN_SAMPLE_TOKENS {
            return;
        }
        let ratio = (measured as f64 / estimated as f64).clamp(MIN_SCALE, MAX_SCALE);
        let key = Calibration::key(session, model);
        let mut scales = self.scales.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let smoothed = match scales.get(&key) {
            Some(before) => (before + ratio) / 2.0,
            None => ratio,
        };
        scales.insert(&key, smoothed);
    }
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
    fn a_sessions_ratio_is_learned_from_the_providers_counts_smoothed_and_raised_only() {
        let calibration = Calibration::default();
        let claude = Some("claude-sonnet-4-5");
        assert_eq!(calibration.scale("s1", claude), None, "nothing learned yet");
        calibration.learn("s1", claude, 10_000, 13_000);
        assert_eq!(calibration.scale("s1", claude), Some(1.3));
        assert_eq!(calibration.scale("s1", Some("llama3.2")), None, "per model");
        assert_eq!(calibration.scale("s2", claude), None, "per session");
        // Smoothed: the mean of the new ratio and the one before.
        calibration.learn("s1", claude, 10_000, 17_000);
        assert_eq!(calibration.scale("s1", claude), Some(1.5));
        // A provider counting fewer tokens than estimated never lowers the estimate.
        calibration.learn("s2", claude, 10_000, 2_000);
        assert_eq!(calibration.scale("s2", claude), Some(1.0));
        calibration.learn("s3", claude, 10_000, 100_000);
        assert_eq!(calibration.scale("s3", claude), Some(4.0));
        // Tiny samples and exact counters teach nothing.
        calibration.learn("s4", Some("qwen3"), 500, 2_000);
        calibration.learn("s4", Some("qwen3"), 5_000, 100);
        calibration.learn("s4", Some("gpt-4.1"), 10_000, 20_000);
        assert_eq!((calibration.scale("s4", Some("qwen3")), calibration.scale("s4", Some("gpt-4.1"))), (None, None));
        calibration.learn("s4", None, 4_000, 6_000);
        assert_eq!(calibration.scale("s4", None), Some(1.5), "the default model has its own entry");
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
