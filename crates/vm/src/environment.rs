//! What an embedding program builds from its environment: the model, the clock and the pricing table.
//!
//! The one thing to know: every command (`run` and the session commands, `test`) builds
//! these through this module, so one variable means the same thing everywhere. The
//! environment is passed in as a lookup (`|name| std::env::var(name).ok()` in a binary,
//! a table in a test), never read here behind the caller's back.
//!
//! | Variable | Read by |
//! | --- | --- |
//! | `ARCHMAX_MODEL`, `ARCHMAX_API_BASE_URL`, `ARCHMAX_API_KEY`, `ARCHMAX_TEMPERATURE`, `ARCHMAX_MAX_TOKENS`, `ARCHMAX_REQUEST_TIMEOUT_MS`, `ARCHMAX_MAX_RETRIES` | [`endpoint_from_env`] ([`OpenAiConfig::from_env`]) |
//! | `ARCHMAX_PRICE_INPUT`, `ARCHMAX_PRICE_OUTPUT`, `ARCHMAX_PRICE_CACHE_READ`, `ARCHMAX_PRICE_CACHE_WRITE` | [`ClockAndPricing::from_env`] ([`PricingTable::from_env`]) and the endpoint |
//! | `ARCHMAX_FIXED_CLOCK` | [`ClockAndPricing::from_env`] ([`clock::from_env`]) |

#[cfg(feature = "frontend")]
use std::path::Path;
use std::sync::Arc;

use crate::clock::{self, Clock};
use crate::model::openai::{OpenAiAdapter, OpenAiConfig};
use crate::model::pricing::PricingTable;
#[cfg(feature = "frontend")]
use crate::model::tape::{Tape, TapeError};
use crate::model::{ModelAdapter, ModelError};

/// The variable naming the default model; the endpoint reads it, and hosts show it.
pub(crate) const MODEL_VARIABLE: &str = "ARCHMAX_MODEL";

/// The process environment as a lookup.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The default model the environment names, when it names one.
pub fn configured_model(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    get(MODEL_VARIABLE).filter(|model| !model.trim().is_empty())
}

/// Why the configured model endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// A variable is missing or malformed.
    #[error(transparent)]
    Environment(ModelError),
    /// The configuration read, but the client refused it (an unusable URL, a zero timeout).
    #[error(transparent)]
    Client(ModelError),
}

/// The OpenAI-compatible endpoint the environment configures.
pub fn endpoint_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    endpoint_with_retries(get, None)
}

/// [`endpoint_from_env`], telling `on_retry` of every retry (the CLI prints them).
pub fn endpoint_with_retries(
    get: impl Fn(&str) -> Option<String>,
    on_retry: Option<crate::model::openai::RetryObserver>,
) -> Result<Arc<dyn ModelAdapter>, EndpointError> {
    let config = OpenAiConfig::from_env(get).map_err(EndpointError::Environment)?;
    let adapter = OpenAiAdapter::new(config).map_err(EndpointError::Client)?;
    Ok(Arc::new(match on_retry {
        Some(observer) => adapter.on_retry(observer),
        None => adapter,
    }))
}

/// Why a tape file could not be replayed.
#[cfg(feature = "frontend")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TapeFileError {
    #[error("could not read the tape `{path}`: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error(transparent)]
    Invalid(#[from] TapeError),
}

/// A tape read from `path`, named `name` in its own error messages.
#[cfg(feature = "frontend")]
pub fn tape_from_file(path: &Path, name: &str) -> Result<Arc<dyn ModelAdapter>, TapeFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| TapeFileError::Unreadable { path: path.display().to_string(), error })?;
    Ok(Arc::new(Tape::parse(name, &text)?))
}

/// The clock and the pricing table a runtime or a case harness runs with.
pub struct ClockAndPricing {
    pub clock: Arc<dyn Clock>,
    pub pricing: PricingTable,
}

impl ClockAndPricing {
    /// `ARCHMAX_FIXED_CLOCK` (else the system clock) and the `ARCHMAX_PRICE_*` table.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<ClockAndPricing, String> {
        let clock = clock::from_env(&get)?;
        let pricing = PricingTable::from_env(&get).map_err(|error| error.to_string())?;
        Ok(ClockAndPricing { clock: Arc::from(clock), pricing })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
    }

    #[test]
    fn a_fixed_clock_and_prices_come_from_the_same_lookup() {
        let from_env = ClockAndPricing::from_env(table(&[
            ("ARCHMAX_FIXED_CLOCK", "2026-01-05T09:30:00Z"),
            ("ARCHMAX_PRICE_INPUT", "3"),
            ("ARCHMAX_PRICE_OUTPUT", "15"),
        ]))
        .expect("the table is well formed");
        assert_eq!(clock::rfc3339(from_env.clock.now_ms()), "2026-01-05T09:30:00Z");
        assert_eq!(from_env.pricing.lookup("any-model").map(|rates| rates.output), Some(15.0));
    }

    #[test]
    fn a_bad_variable_is_named_in_the_error() {
        let error = ClockAndPricing::from_env(table(&[("ARCHMAX_FIXED_CLOCK", "yesterday")])).err();
        assert!(error.is_some_and(|message| message.contains("ARCHMAX_FIXED_CLOCK")));
        match endpoint_from_env(table(&[("ARCHMAX_MODEL", "gpt-4o")])) {
            Err(EndpointError::Environment(error)) => assert!(error.to_string().contains("ARCHMAX_API_BASE_URL")),
            Err(other) => panic!("expected a missing variable, got {other}"),
            Ok(_) => panic!("an endpoint without a URL was accepted"),
        }
    }

    #[test]
    fn the_configured_model_ignores_blank_values() {
        assert_eq!(configured_model(table(&[("ARCHMAX_MODEL", "  ")])), None);
        assert_eq!(configured_model(table(&[("ARCHMAX_MODEL", "gpt-4o")])).as_deref(), Some("gpt-4o"));
    }
}
