//! List prices of well-known models, for ids nothing the operator wrote prices.
//!
//! USD per million tokens, as OpenAI and Anthropic publish them for their own APIs
//! (standard tier, no batch discount) when this table was last revised (2025). Prices
//! change and contracts differ: a `[models."<id>"].price` in `archmax.toml`, or the
//! `ARCHMAX_PRICE_*` variables, always win over this table (see [`super::pricing`]).
//!
//! The one thing to know: an id matches an entry only when it *is* that model, give or
//! take what providers and proxies add around the name: a `vendor/` prefix
//! (`openai/gpt-4.1`) and a dated or numbered snapshot suffix (`gpt-4.1-2025-04-14`,
//! `claude-sonnet-4-20250514`). So `gpt-4.1-mini` is never priced as `gpt-4.1`, and an
//! unknown id that merely contains a known one (`my-o3-finetune`) stays unpriced rather
//! than priced wrong. Of several entries that match, the longest wins.
//!
//! OpenAI bills no cache writes, so its cache-write rate is the input rate (a write is
//! billed as the input it is); Anthropic's is its 5-minute cache write (1.25× input).

use super::pricing::Rates;

/// `(id, input, output, cache read, cache write)`.
const LIST: &[(&str, f64, f64, f64, f64)] = &[
    // OpenAI
    ("gpt-5", 1.25, 10.0, 0.125, 1.25),
    ("gpt-5-mini", 0.25, 2.0, 0.025, 0.25),
    ("gpt-5-nano", 0.05, 0.40, 0.005, 0.05),
    ("gpt-4.1", 2.0, 8.0, 0.50, 2.0),
    ("gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40),
    ("gpt-4.1-nano", 0.10, 0.40, 0.025, 0.10),
    ("gpt-4o", 2.50, 10.0, 1.25, 2.50),
    ("gpt-4o-mini", 0.15, 0.60, 0.075, 0.15),
    ("o3", 2.0, 8.0, 0.50, 2.0),
    ("o3-mini", 1.10, 4.40, 0.55, 1.10),
    ("o4-mini", 1.10, 4.40, 0.275, 1.10),
    // Anthropic
    ("claude-opus-4-5", 5.0, 25.0, 0.50, 6.25),
    ("claude-opus-4-1", 15.0, 75.0, 1.50, 18.75),
    ("claude-opus-4", 15.0, 75.0, 1.50, 18.75),
    ("claude-sonnet-4-5", 3.0, 15.0, 0.30, 3.75),
    ("claude-sonnet-4", 3.0, 15.0, 0.30, 3.75),
    ("claude-3-7-sonnet", 3.0, 15.0, 0.30, 3.75),
    ("claude-haiku-4-5", 1.0, 5.0, 0.10, 1.25),
    ("claude-3-5-haiku", 0.80, 4.0, 0.08, 1.0),
];

/// The list price of `model`, when it is one of the models above.
pub(crate) fn lookup(model: &str) -> Option<&'static Rates> {
    static RATES: std::sync::OnceLock<Vec<(&'static str, Rates)>> = std::sync::OnceLock::new();
    let rates = RATES.get_or_init(|| {
        LIST.iter()
            .map(|&(id, input, output, cache_read, cache_write)| (id, Rates { input, output, cache_read, cache_write }))
            .collect()
    });
    let name = model.trim().rsplit('/').next().unwrap_or_default().to_ascii_lowercase();
    rates.iter().filter(|(id, _)| is_snapshot_of(&name, id)).max_by_key(|(id, _)| id.len()).map(|(_, rates)| rates)
}

/// Whether `name` is `id` itself or a snapshot of it: `id`, a `-`, then a digit
/// (`-2025-04-14`, `-20250514`, `-001`), or `id` and `-latest`.
fn is_snapshot_of(name: &str, id: &str) -> bool {
    let Some(rest) = name.strip_prefix(id) else { return false };
    match rest.strip_prefix('-') {
        None => rest.is_empty(),
        Some(suffix) => suffix == "latest" || suffix.starts_with(|character: char| character.is_ascii_digit()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(model: &str) -> Option<f64> {
        lookup(model).map(|rates| rates.input)
    }

    #[test]
    fn a_model_and_its_snapshots_are_priced_and_nothing_that_merely_contains_it() {
        assert_eq!(input("gpt-4.1"), Some(2.0));
        assert_eq!(input("gpt-4.1-2025-04-14"), Some(2.0));
        assert_eq!(input("openai/gpt-4.1"), Some(2.0));
        assert_eq!(input("GPT-4.1"), Some(2.0), "case is not a different model");
        assert_eq!(input("gpt-4.1-mini"), Some(0.40), "a sibling is not its snapshot");
        assert_eq!(input("gpt-4.1-mini-2025-04-14"), Some(0.40));
        assert_eq!(input("claude-sonnet-4-20250514"), Some(3.0));
        assert_eq!(input("claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(input("claude-opus-4-5"), Some(5.0), "the longest entry wins over claude-opus-4");
        assert_eq!(input("claude-3-5-haiku-latest"), Some(0.80));
        for unknown in ["my-o3-finetune", "o3x", "gpt-4.1-custom", "llama3.2", "fernhill-small", "", "/"] {
            assert_eq!(input(unknown), None, "{unknown} is not a listed model");
        }
    }

    #[test]
    fn every_entry_is_sane() {
        for &(id, input, output, cache_read, cache_write) in LIST {
            assert!(!id.is_empty() && id == id.to_ascii_lowercase(), "{id}");
            assert!(input > 0.0 && output >= input, "{id}: output is never cheaper than input");
            assert!(cache_read <= input && cache_write >= input, "{id}: cache reads are cheaper, writes not");
            assert_eq!(lookup(id).map(|rates| rates.output), Some(output), "{id} finds itself");
        }
    }
}
