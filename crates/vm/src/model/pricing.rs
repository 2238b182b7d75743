//! Token prices and what a model call cost.
//!
//! A [`PricingTable`] maps model ids to [`Rates`] in USD per million tokens. A price is
//! looked up in order: the ids `archmax.toml` prices (`[models."<id>"].price`), then the
//! `default` entry (from `ARCHMAX_PRICE_*`), then, when the table consults them, the
//! list prices built in for well-known ids ([`super::list_prices`]), so whatever the
//! operator wrote beats what archmax guessed. The one thing to know: an unpriced model
//! has no cost at all — [`PricingTable::cost`] answers `None`, never `0.0`, so a report
//! can tell "free" from "unknown".

use super::{ModelError, TokenUsage};

/// Prices of one model, in USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl Rates {
    /// Rates whose cache reads and writes cost as much as plain input.
    pub fn new(input: f64, output: f64) -> Rates {
        Rates { input, output, cache_read: input, cache_write: input }
    }
}

/// Model ids and their rates, plus a fallback.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PricingTable {
    pub default: Option<Rates>,
    /// Keys are model ids or fragments of them (`claude-sonnet-4`, `gpt-4o`).
    pub models: Vec<(String, Rates)>,
    /// Whether ids nothing else prices get the built-in list prices. Off in
    /// `default()`, so a table built by hand prices only what it says.
    pub list_prices: bool,
}

impl PricingTable {
    /// The `default` entry from `ARCHMAX_PRICE_INPUT`, `_OUTPUT`, `_CACHE_READ` and
    /// `_CACHE_WRITE`. None of them set means no default; once any is set, the input and
    /// output rates are required (a half-priced model would report a wrong cost). Cache
    /// rates default to the input rate.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<PricingTable, ModelError> {
        const NAMES: [&str; 4] =
            ["ARCHMAX_PRICE_INPUT", "ARCHMAX_PRICE_OUTPUT", "ARCHMAX_PRICE_CACHE_READ", "ARCHMAX_PRICE_CACHE_WRITE"];
        let mut values = [None; 4];
        for (slot, name) in values.iter_mut().zip(NAMES) {
            *slot = rate_from_env(&get, name)?;
        }
        let [input, output, cache_read, cache_write] = values;
        if values.iter().all(Option::is_none) {
            return Ok(PricingTable::default());
        }
        let (Some(input), Some(output)) = (input, output) else {
            let missing: Vec<&str> =
                NAMES[..2].iter().zip(&values[..2]).filter(|(_, v)| v.is_none()).map(|(n, _)| *n).collect();
            let verb = if missing.len() == 1 { "is" } else { "are" };
            return Err(ModelError::Configuration(format!(
                "{} {verb} not set: a price needs both ARCHMAX_PRICE_INPUT and ARCHMAX_PRICE_OUTPUT (USD per 1M \
                 tokens), or no ARCHMAX_PRICE_* variable at all",
                missing.join(" and ")
            )));
        };
        Ok(PricingTable {
            default: Some(Rates {
                input,
                output,
                cache_read: cache_read.unwrap_or(input),
                cache_write: cache_write.unwrap_or(input),
            }),
            models: Vec::new(),
            list_prices: false,
        })
    }

    /// This table consulting the built-in list prices for ids nothing else prices.
    pub fn with_list_prices(self) -> PricingTable {
        PricingTable { list_prices: true, ..self }
    }

    /// This table with `archmax.toml`'s prices (`[models."<id>"].price`) over its own:
    /// an id priced in both takes the file's. Cache rates left out cost as input.
    pub fn with_configured(
        mut self,
        prices: &std::collections::BTreeMap<String, archmax_config::settings::providers::ModelPrice>,
    ) -> PricingTable {
        for (id, price) in prices {
            let rates = Rates {
                input: price.input,
                output: price.output,
                cache_read: price.cache_read.unwrap_or(price.input),
                cache_write: price.cache_write.unwrap_or(price.input),
            };
            match self.models.iter_mut().find(|(key, _)| key == id) {
                Some((_, kept)) => *kept = rates,
                None => self.models.push((id.clone(), rates)),
            }
        }
        self
    }

    /// The rates for a model: its exact id, else the longest key contained in the id
    /// (the first such key on a tie), else the default, else (when consulted) its list
    /// price.
    pub fn lookup(&self, model: &str) -> Option<&Rates> {
        self.lookup_any(&[model])
    }

    /// The rates for a call known by several ids (the id the workflow named, then the
    /// one the provider answered with): each source is asked about every id before the
    /// next source is, so a price the operator wrote for either id wins.
    pub fn lookup_any(&self, ids: &[&str]) -> Option<&Rates> {
        ids.iter()
            .find_map(|id| self.configured(id))
            .or(self.default.as_ref())
            .or_else(|| if self.list_prices { ids.iter().find_map(|id| super::list_prices::lookup(id)) } else { None })
    }

    /// A price of `models` for `model`: its exact id, else the longest key contained in it.
    fn configured(&self, model: &str) -> Option<&Rates> {
        if let Some((_, rates)) = self.models.iter().find(|(key, _)| key == model) {
            return Some(rates);
        }
        let mut best: Option<(&str, &Rates)> = None;
        for (key, rates) in &self.models {
            if key.is_empty() || !model.contains(key.as_str()) {
                continue;
            }
            if best.is_none_or(|(longest, _)| key.len() > longest.len()) {
                best = Some((key, rates));
            }
        }
        best.map(|(_, rates)| rates)
    }

    /// What one call cost in USD, or `None` when the model has no price.
    ///
    /// `usage.input` is the total: the uncached part is what remains after the cache
    /// reads and writes (clamped at zero), each priced at its own rate.
    pub fn cost(&self, usage: &TokenUsage, model: &str) -> Option<f64> {
        self.cost_any(usage, &[model])
    }

    /// [`PricingTable::cost`] for a call known by several ids ([`PricingTable::lookup_any`]).
    pub fn cost_any(&self, usage: &TokenUsage, ids: &[&str]) -> Option<f64> {
        let rates = self.lookup_any(ids)?;
        let uncached = usage.input.saturating_sub(usage.cache_read).saturating_sub(usage.cache_write);
        let micro_usd = rates.input * uncached as f64
            + rates.cache_read * usage.cache_read as f64
            + rates.cache_write * usage.cache_write as f64
            + rates.output * usage.output as f64;
        Some(micro_usd / 1e6)
    }
}

/// One `ARCHMAX_PRICE_*` variable: unset or blank is `None`; anything but a finite,
/// non-negative number is a configuration error naming the variable.
fn rate_from_env(get: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<f64>, ModelError> {
    let Some(raw) = get(name) else { return Ok(None) };
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    match raw.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.0 => Ok(Some(rate)),
        _ => Err(ModelError::Configuration(format!(
            "{name} is `{raw}`: set it to a non-negative number of USD per 1M tokens, e.g. {name}=3"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn sonnet() -> Rates {
        Rates { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.0 }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn worked_example_costs_about_a_cent_and_a_half() {
        let table = PricingTable { default: Some(sonnet()), ..PricingTable::default() };
        let usage = TokenUsage { input: 20_369, output: 287, cache_read: 18_074, cache_write: 0 };
        let cost = table.cost(&usage, "claude-sonnet-4").unwrap_or(f64::NAN);
        assert!((cost - 0.016612).abs() < 1e-6, "cost was {cost}");
    }

    #[test]
    fn cache_writes_are_priced_at_their_own_rate_and_never_twice() {
        let rates = Rates { input: 1.0, output: 2.0, cache_read: 0.1, cache_write: 1.25 };
        let table = PricingTable { default: Some(rates), ..PricingTable::default() };
        let usage = TokenUsage { input: 1_000_000, output: 1_000_000, cache_read: 200_000, cache_write: 300_000 };
        let cost = table.cost(&usage, "m").unwrap_or(f64::NAN);
        // 0.5M uncached × 1 + 0.2M × 0.1 + 0.3M × 1.25 + 1M × 2
        assert!((cost - (0.5 + 0.02 + 0.375 + 2.0)).abs() < 1e-9, "cost was {cost}");
    }

    #[test]
    fn cached_counts_larger_than_the_input_clamp_the_uncached_part_at_zero() {
        let table = PricingTable { default: Some(Rates::new(1.0, 1.0)), ..PricingTable::default() };
        let usage = TokenUsage { input: 10, output: 0, cache_read: 8, cache_write: 8 };
        let cost = table.cost(&usage, "m").unwrap_or(f64::NAN);
        assert!((cost - 16.0 / 1e6).abs() < 1e-12, "cost was {cost}");
    }

    #[test]
    fn an_unpriced_model_has_no_cost_not_a_zero_one() {
        let table = PricingTable { models: vec![("gpt-4o".into(), Rates::new(2.5, 10.0))], ..PricingTable::default() };
        assert_eq!(table.cost(&TokenUsage { input: 5, ..TokenUsage::default() }, "llama3"), None);
        assert_eq!(PricingTable::default().cost(&TokenUsage::default(), "anything"), None);
    }

    #[test]
    fn lookup_prefers_exact_then_longest_substring_then_default() {
        let a = Rates::new(1.0, 1.0);
        let b = Rates::new(2.0, 2.0);
        let c = Rates::new(3.0, 3.0);
        let d = Rates::new(4.0, 4.0);
        let table = PricingTable {
            default: Some(d),
            models: vec![
                ("gpt-4o".into(), a),
                ("gpt-4o-mini".into(), b),
                ("openai/gpt-4o-mini-2024".into(), c),
                (String::new(), a),
            ],
            list_prices: false,
        };
        assert_eq!(table.lookup("openai/gpt-4o-mini-2024"), Some(&c));
        assert_eq!(table.lookup("openai/gpt-4o-mini-2025"), Some(&b));
        assert_eq!(table.lookup("gpt-4o-2024-08-06"), Some(&a));
        assert_eq!(table.lookup("mistral-large"), Some(&d));
        assert_eq!(PricingTable { default: None, ..table }.lookup("mistral-large"), None);
    }

    #[test]
    fn env_fills_the_default_and_cache_rates_fall_back_to_input() {
        let table = PricingTable::from_env(env(&[("ARCHMAX_PRICE_INPUT", "3"), ("ARCHMAX_PRICE_OUTPUT", " 15 ")]));
        let Ok(table) = table else { panic!("unexpected {table:?}") };
        assert_eq!(table.default, Some(Rates { input: 3.0, output: 15.0, cache_read: 3.0, cache_write: 3.0 }));

        let table = PricingTable::from_env(env(&[
            ("ARCHMAX_PRICE_INPUT", "3"),
            ("ARCHMAX_PRICE_OUTPUT", "15"),
            ("ARCHMAX_PRICE_CACHE_READ", "0.3"),
            ("ARCHMAX_PRICE_CACHE_WRITE", "3.75"),
        ]));
        let Ok(table) = table else { panic!("unexpected {table:?}") };
        assert_eq!(table.default, Some(Rates { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 }));

        let table = PricingTable::from_env(env(&[]));
        assert!(matches!(table, Ok(PricingTable { default: None, .. })), "{table:?}");
    }

    #[test]
    fn env_errors_name_the_variable() {
        for (pairs, needle) in [
            (vec![("ARCHMAX_PRICE_INPUT", "three"), ("ARCHMAX_PRICE_OUTPUT", "15")], "ARCHMAX_PRICE_INPUT"),
            (vec![("ARCHMAX_PRICE_INPUT", "3"), ("ARCHMAX_PRICE_OUTPUT", "-1")], "ARCHMAX_PRICE_OUTPUT"),
            (vec![("ARCHMAX_PRICE_INPUT", "3")], "ARCHMAX_PRICE_OUTPUT"),
            (vec![("ARCHMAX_PRICE_CACHE_READ", "0.3")], "ARCHMAX_PRICE_INPUT and ARCHMAX_PRICE_OUTPUT are not set"),
            (
                vec![("ARCHMAX_PRICE_INPUT", "3"), ("ARCHMAX_PRICE_OUTPUT", "15"), ("ARCHMAX_PRICE_CACHE_READ", "NaN")],
                "ARCHMAX_PRICE_CACHE_READ",
            ),
        ] {
            match PricingTable::from_env(env(&pairs)) {
                Err(ModelError::Configuration(message)) => assert!(message.contains(needle), "{message}"),
                other => panic!("expected a configuration error for {pairs:?}, got {other:?}"),
            }
        }
    }
}
