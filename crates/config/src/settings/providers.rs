//! `[providers.<name>]` and `[models."<id>"]` of `archmax.toml`: which endpoint serves
//! which model id. Read offline by `read`; the environment they name and the model ids
//! the workflows use are checked by [`check_routes`].
//!
//! ```toml
//! [providers.claude]
//! kind = "anthropic"                      # openai | anthropic | azure-openai
//! api_key_env = "ANTHROPIC_API_KEY"       # base_url defaults to https://api.anthropic.com
//!
//! [providers.azure]
//! kind = "azure-openai"
//! base_url = "https://acme.openai.azure.com"
//! api_key_env = "AZURE_OPENAI_KEY"
//! api_version = "2024-10-21"
//! deployments = { "gpt-4.1" = "prod-gpt41" }   # provider model name → deployment
//!
//! [models."claude-sonnet-4-5"]
//! provider = "claude"
//! [models."gpt-4.1"]
//! provider = "azure"
//! fallbacks = ["claude-sonnet-4-5"]      # tried in order when azure is rate limited or down
//! ```
//!
//! A key with `*` is a pattern (`[models."claude-*"]`): it routes every id it matches that
//! no exact key names, each sent under its own id; where several patterns match, the one
//! with the most characters besides `*` wins ([`route_for`]).
//!
//! The one thing to know: a model id no `[models]` entry routes goes to the default
//! provider, the endpoint the `ARCHMAX_API_*` variables configure, exactly as before these
//! tables existed; a file without them changes nothing. A key is only ever named by its
//! variable, never written in the file.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{RunnerSettings, is_header_name, is_variable_name};
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any chat-completions endpoint: OpenAI, vLLM, Ollama, LiteLLM, OpenRouter.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Azure OpenAI: chat completions under per-deployment URLs, an `api-key` header.
    AzureOpenAi,
}

impl ProviderKind {
    /// Every kind, as `kind = "…"` spells it.
    pub const NAMES: [&'static str; 3] = ["openai", "anthropic", "azure-openai"];

    pub fn parse(name: &str) -> Option<ProviderKind> {
        match name {
            "openai" => Some(ProviderKind::OpenAi),
            "anthropic" => Some(ProviderKind::Anthropic),
            "azure-openai" => Some(ProviderKind::AzureOpenAi),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::AzureOpenAi => "azure-openai",
        }
    }
}

/// Where Anthropic's API lives when a provider names no `base_url`.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// One `[providers.<name>]` table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    pub kind: ProviderKind,
    /// The API root (for `openai`, the part before `/chat/completions`; for Azure, the
    /// resource's address, before `/openai/deployments/…`).
    pub base_url: String,
    /// The variable holding the key; `None` for an `openai` endpoint that takes none.
    pub api_key_env: Option<String>,
    /// Sent with every request, after the protocol's own headers.
    pub headers: BTreeMap<String, String>,
    /// The bound on each attempt; `None`: the runner's default.
    pub timeout_ms: Option<u64>,
    /// Azure's `api-version` query parameter.
    pub api_version: Option<String>,
    /// Azure: the provider's model name → the deployment serving it (default: the name).
    pub deployments: BTreeMap<String, String>,
    /// The most calls this runner sends the provider at once (`max_concurrency`); more
    /// wait their turn. `None`: no bound of its own.
    pub max_concurrency: Option<u32>,
    /// Where the table is, for diagnostics found when the runner starts.
    pub span: Span,
}

/// One `[models."<id>"]` table: the model id workflows name, routed to a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRoute {
    pub id: String,
    pub provider: String,
    /// The provider's own name for the model (default: the id).
    pub name: Option<String>,
    /// Model ids tried in order when a call to this one fails with a passing condition
    /// (rate limited, overloaded, a server error, unreachable) after its retries. Each is
    /// served by its own route; their own fallbacks are not followed.
    pub fallbacks: Vec<String>,
    pub span: Span,
}

impl ModelRoute {
    /// The name the provider knows the model by.
    pub fn provider_model(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    /// Whether the id is a pattern: `*` stands for any run of characters.
    pub fn is_pattern(&self) -> bool {
        is_pattern(&self.id)
    }
}

/// Whether a `[models]` key is a pattern rather than one id.
pub fn is_pattern(id: &str) -> bool {
    id.contains('*')
}

/// Whether `pattern` (where `*` stands for any run of characters, none included) matches
/// all of `id`.
pub fn glob_matches(pattern: &str, id: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = id.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// How specific a pattern is: its characters besides `*`.
pub fn pattern_weight(pattern: &str) -> usize {
    pattern.chars().filter(|character| *character != '*').count()
}

/// The route serving `model`: the table keyed by the id itself, else the most specific
/// pattern that matches it (the most characters besides `*`; between equals, the first in
/// key order).
pub fn route_for<'a>(models: &'a BTreeMap<String, ModelRoute>, model: &str) -> Option<&'a ModelRoute> {
    if let Some(route) = models.get(model) {
        return Some(route);
    }
    let mut best: Option<&ModelRoute> = None;
    for route in models.values().filter(|route| route.is_pattern() && glob_matches(&route.id, model)) {
        if best.is_none_or(|found| pattern_weight(&route.id) > pattern_weight(&found.id)) {
            best = Some(route);
        }
    }
    best
}

/// A `[models."<id>"]` table's `price`: USD per million tokens. The cache rates are
/// `None` when left out; the runtime then charges cache reads and writes as input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

/// The keys a `price` table takes; the first two are required.
const PRICE_KEYS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];
/// The most a price may say, in USD per million tokens: a guard against a typo of
/// several zeros, far above any model's list price.
const MAX_PRICE: f64 = 100_000.0;

/// The keys a provider table takes.
const PROVIDER_KEYS: [&str; 9] = [
    "kind",
    "base_url",
    "api_key_env",
    "headers",
    "timeout_ms",
    "api_version",
    "deployments",
    "max_concurrency",
    "api_key",
];
/// The most calls `max_concurrency` may allow at once.
const MAX_CONCURRENCY: i64 = 1_024;
/// The keys a model table takes.
const MODEL_KEYS: [&str; 4] = ["provider", "name", "price", "fallbacks"];
/// The most fallbacks one model may list: each is a whole call's wait after the one before.
const MAX_FALLBACKS: usize = 8;
/// The longest a provider may be given to answer one attempt: ten minutes.
const MAX_TIMEOUT_MS: i64 = 600_000;

/// Reads `[providers]` and `[models]` of `text` into `settings`. A file that is not TOML
/// yields nothing: the mount table's reader reports it.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let document = document.get_ref();
    let mut reader = Reader { file, diagnostics };
    if let Some(providers) = document.get("providers")
        && let Some(providers) = reader.table(providers, "`providers`", "declare each as `[providers.<name>]`")
    {
        for (name, table) in providers.iter() {
            if let Some(provider) = reader.provider(name, table) {
                settings.providers.insert(provider.name.clone(), provider);
            }
        }
    }
    if let Some(models) = document.get("models")
        && let Some(models) = reader.table(models, "`models`", "declare each as `[models.\"<id>\"]`")
    {
        for (id, table) in models.iter() {
            let Some((route, price)) = reader.model(id, table, &settings.providers) else { continue };
            let id = id.get_ref().trim().to_string();
            if let Some(price) = price {
                settings.prices.insert(id, price);
            }
            if let Some(route) = route {
                settings.models.insert(route.id.clone(), route);
            }
        }
    }
}

/// A value with its span, as the parser hands it out.
type Value<'i> = Spanned<DeValue<'i>>;

struct Reader<'d> {
    file: FileId,
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl Reader<'_> {
    fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.file, range.start, range.end)
    }

    fn error(&mut self, range: Range<usize>, message: String, help: impl Into<String>) {
        let span = self.span(range);
        self.diagnostics.push(Diagnostic::at(Code::HostConfig, span, message).with_help(help));
    }

    fn table<'v, 'i>(&mut self, value: &'v Value<'i>, what: &str, help: &str) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(table) => Some(table),
            other => {
                self.error(value.span(), format!("{what} must be a table, not {}", other.type_str()), help);
                None
            }
        }
    }

    fn string(&mut self, value: &Value<'_>, what: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
            DeValue::String(_) => {
                self.error(value.span(), format!("{what} is empty"), "give it a value, or leave the key out");
                None
            }
            other => {
                self.error(value.span(), format!("{what} must be a string, not {}", other.type_str()), "quote it");
                None
            }
        }
    }

    /// A table of strings keyed by name (`headers`, `deployments`).
    fn string_table(&mut self, value: &Value<'_>, what: &str) -> Option<BTreeMap<String, String>> {
        let table = self.table(value, what, "write an inline table such as { \"x-team\" = \"support\" }")?;
        let mut found = BTreeMap::new();
        for (key, item) in table.iter() {
            let item_what = format!("`{}` in {what}", key.get_ref());
            found.insert(key.get_ref().to_string(), self.string(item, &item_what)?);
        }
        Some(found)
    }

    /// One `[providers.<name>]`, or `None` after reporting why it is left out.
    fn provider(&mut self, name: &Spanned<std::borrow::Cow<'_, str>>, value: &Value<'_>) -> Option<Provider> {
        let provider = name.get_ref().to_string();
        if !is_route_name(&provider) {
            self.error(
                name.span(),
                format!("the provider name `{provider}` is not a name"),
                "name providers with letters, digits, `-` and `_`",
            );
            return None;
        }
        let help = "write `[providers.<name>]` with `kind`, `base_url` and `api_key_env`";
        let table = self.table(value, &format!("provider `{provider}`"), help)?;
        let before = self.diagnostics.len();
        let mut kind = None;
        let (mut base_url, mut api_key_env, mut api_version, mut timeout_ms) = (None, None, None, None);
        let mut max_concurrency = None;
        let (mut headers, mut deployments) = (BTreeMap::new(), BTreeMap::new());
        for (key, item) in table.iter() {
            let at = |what: &str| format!("`{what}` of provider `{provider}`");
            match key.get_ref().as_ref() {
                "kind" => {
                    let written = self.string(item, &at("kind"))?;
                    kind = ProviderKind::parse(&written);
                    if kind.is_none() {
                        self.error(
                            item.span(),
                            format!("provider `{provider}` has the kind `{written}`"),
                            format!("set `kind` to one of {}", list_names(&ProviderKind::NAMES)),
                        );
                    }
                }
                "base_url" => base_url = self.base_url(item, &provider),
                "api_key_env" => {
                    let variable = self.string(item, &at("api_key_env"))?;
                    if is_variable_name(&variable) {
                        api_key_env = Some(variable);
                    } else {
                        self.error(
                            item.span(),
                            format!("the `api_key_env` of provider `{provider}` is not an environment variable name"),
                            "name the variable that holds the key, such as ANTHROPIC_API_KEY; the key itself never goes in the file",
                        );
                    }
                }
                "api_key" => self.error(
                    item.span(),
                    format!("provider `{provider}` writes its key into archmax.toml"),
                    "set the key in the runner's environment and name its variable in `api_key_env`, so the file can be committed",
                ),
                "headers" => headers = self.headers(item, &provider).unwrap_or_default(),
                "timeout_ms" => timeout_ms = self.timeout(item, &provider),
                "api_version" => api_version = self.string(item, &at("api_version")),
                "deployments" => deployments = self.string_table(item, &at("deployments")).unwrap_or_default(),
                "max_concurrency" => max_concurrency = self.concurrency(item, &provider),
                other => {
                    let help = match did_you_mean(other, PROVIDER_KEYS) {
                        Some(close) => format!("did you mean `{close}`? a provider takes {}", list_names(&PROVIDER_KEYS[..8])),
                        None => format!("a provider takes {}", list_names(&PROVIDER_KEYS[..8])),
                    };
                    self.error(key.span(), format!("`{other}` is not a setting of provider `{provider}`"), help);
                }
            }
        }
        let whole = value.span();
        let Some(kind) = kind else {
            if self.diagnostics.len() == before {
                self.error(
                    whole,
                    format!("provider `{provider}` names no `kind`"),
                    format!("set `kind` to one of {}", list_names(&ProviderKind::NAMES)),
                );
            }
            return None;
        };
        let base_url = match (base_url, kind) {
            (Some(url), _) => url,
            (None, ProviderKind::Anthropic) => ANTHROPIC_BASE_URL.to_string(),
            // A `base_url` written but refused is reported already.
            (None, _) if self.diagnostics.len() != before => return None,
            (None, _) => {
                self.error(
                    whole.clone(),
                    format!("provider `{provider}` names no `base_url`"),
                    "set `base_url` to the API root, such as https://api.openai.com/v1 or http://localhost:11434/v1",
                );
                return None;
            }
        };
        self.kind_rules(kind, &provider, whole.clone(), (&api_key_env, &api_version, &deployments));
        if self.diagnostics.len() != before {
            return None;
        }
        let span = self.span(whole);
        Some(Provider {
            name: provider,
            kind,
            base_url,
            api_key_env,
            headers,
            timeout_ms,
            api_version,
            deployments,
            max_concurrency,
            span,
        })
    }

    /// What one kind requires or refuses beyond the common keys.
    fn kind_rules(
        &mut self,
        kind: ProviderKind,
        provider: &str,
        whole: Range<usize>,
        (api_key_env, api_version, deployments): (&Option<String>, &Option<String>, &BTreeMap<String, String>),
    ) {
        if kind != ProviderKind::OpenAi && api_key_env.is_none() {
            self.error(
                whole.clone(),
                format!("provider `{provider}` ({}) names no `api_key_env`", kind.as_str()),
                "name the environment variable that holds the key, such as ANTHROPIC_API_KEY",
            );
        }
        match kind {
            ProviderKind::AzureOpenAi if api_version.is_none() => self.error(
                whole,
                format!("provider `{provider}` (azure-openai) names no `api_version`"),
                "set `api_version` to the Azure OpenAI API version, such as \"2024-10-21\"",
            ),
            ProviderKind::AzureOpenAi => {}
            _ if api_version.is_some() || !deployments.is_empty() => self.error(
                whole,
                format!("provider `{provider}` ({}) sets `api_version` or `deployments`", kind.as_str()),
                "only an `azure-openai` provider takes them; remove them",
            ),
            _ => {}
        }
    }

    fn base_url(&mut self, value: &Value<'_>, provider: &str) -> Option<String> {
        let url = self.string(value, &format!("`base_url` of provider `{provider}`"))?;
        match super::notify::http_url_problem(&url) {
            Some(problem) => {
                self.error(
                    value.span(),
                    format!("the `base_url` of provider `{provider}` {problem}"),
                    "give the API root as an http(s) URL without credentials, such as https://api.openai.com/v1",
                );
                None
            }
            None => Some(url),
        }
    }

    fn headers(&mut self, value: &Value<'_>, provider: &str) -> Option<BTreeMap<String, String>> {
        let headers = self.string_table(value, &format!("the `headers` of provider `{provider}`"))?;
        for name in headers.keys() {
            if !is_header_name(name) {
                self.error(
                    value.span(),
                    format!("`{name}` in the `headers` of provider `{provider}` is not an HTTP header name"),
                    "write header names such as X-Team",
                );
                return None;
            }
        }
        Some(headers)
    }

    fn timeout(&mut self, value: &Value<'_>, provider: &str) -> Option<u64> {
        let milliseconds = match value.get_ref() {
            DeValue::Integer(integer) => i64::from_str_radix(integer.as_str(), integer.radix()).ok(),
            _ => None,
        };
        match milliseconds {
            Some(milliseconds) if (1..=MAX_TIMEOUT_MS).contains(&milliseconds) => Some(milliseconds as u64),
            _ => {
                self.error(
                    value.span(),
                    format!("the `timeout_ms` of provider `{provider}` is not 1 to {MAX_TIMEOUT_MS} milliseconds"),
                    "give a whole number of milliseconds, such as 120000",
                );
                None
            }
        }
    }

    fn concurrency(&mut self, value: &Value<'_>, provider: &str) -> Option<u32> {
        let calls = match value.get_ref() {
            DeValue::Integer(integer) => i64::from_str_radix(integer.as_str(), integer.radix()).ok(),
            _ => None,
        };
        match calls {
            Some(calls) if (1..=MAX_CONCURRENCY).contains(&calls) => u32::try_from(calls).ok(),
            _ => {
                self.error(
                    value.span(),
                    format!("the `max_concurrency` of provider `{provider}` is not 1 to {MAX_CONCURRENCY} calls"),
                    "give a whole number of calls this runner may have in flight at once, such as 8",
                );
                None
            }
        }
    }

    /// One `[models."<id>"]`: its route (`None` for a table that only prices the id)
    /// and its price, or `None` after reporting why the table is left out.
    fn model(
        &mut self,
        id: &Spanned<std::borrow::Cow<'_, str>>,
        value: &Value<'_>,
        providers: &BTreeMap<String, Provider>,
    ) -> Option<(Option<ModelRoute>, Option<ModelPrice>)> {
        let model = id.get_ref().trim().to_string();
        if model.is_empty() {
            self.error(
                id.span(),
                "a `[models]` table has an empty id".to_string(),
                "key it by the model id workflows name",
            );
            return None;
        }
        let table = self.table(value, &format!("model `{model}`"), "write `[models.\"<id>\"]` with `provider`")?;
        if is_pattern(&model)
            && let Some(key) =
                table.iter().map(|(key, _)| key).find(|key| matches!(key.get_ref().as_ref(), "name" | "price"))
        {
            self.error(
                key.span(),
                format!("the pattern `{model}` takes no `{}`", key.get_ref()),
                "a pattern routes many ids, each sent and priced under its own id; give a name or a price in a table keyed by one id",
            );
            return None;
        }
        let (mut provider, mut name, mut price, mut fallbacks) = (None, None, None, None);
        for (key, item) in table.iter() {
            match key.get_ref().as_ref() {
                "provider" => {
                    provider = Some((self.string(item, &format!("`provider` of model `{model}`"))?, item.span()))
                }
                "name" => name = Some(self.string(item, &format!("`name` of model `{model}`"))?),
                "price" => price = Some(self.price(item, &model)?),
                "fallbacks" => fallbacks = Some((self.fallbacks(item, &model)?, item.span())),
                other => {
                    let close = did_you_mean(other, MODEL_KEYS)
                        .map(|close| format!("did you mean `{close}`? "))
                        .unwrap_or_default();
                    self.error(
                        key.span(),
                        format!("`{other}` is not a setting of model `{model}`"),
                        format!("{close}a model takes {}", list_names(&MODEL_KEYS)),
                    );
                    return None;
                }
            }
        }
        let Some((provider, at)) = provider else {
            if let Some((_, at)) = fallbacks {
                self.error(
                    at,
                    format!("model `{model}` lists `fallbacks` but names no `provider`"),
                    "fallbacks belong to a route: set `provider` to the `[providers.<name>]` table that serves the model first",
                );
                return None;
            }
            if name.is_some() || price.is_none() {
                self.error(
                    value.span(),
                    format!("model `{model}` names no `provider`"),
                    "set `provider` to a `[providers.<name>]` table's name (a table with only `price` prices the id wherever it is served)",
                );
                return None;
            }
            return Some((None, price));
        };
        if !providers.contains_key(&provider) {
            let declared: Vec<&str> = providers.keys().map(String::as_str).collect();
            let help = match did_you_mean(&provider, declared.iter().copied()) {
                Some(close) => format!("did you mean `{close}`? declared: {}", list_names(&declared)),
                None if declared.is_empty() => "declare it as `[providers.<name>]` with its `kind`".to_string(),
                None => format!("declare `[providers.{provider}]`, or name one of {}", list_names(&declared)),
            };
            let span = self.span(at);
            self.diagnostics.push(
                Diagnostic::at(
                    Code::UnknownProvider,
                    span,
                    format!("model `{model}` names the provider `{provider}`, which no `[providers]` table declares"),
                )
                .with_help(help),
            );
            return None;
        }
        let fallbacks = fallbacks.map(|(fallbacks, _)| fallbacks).unwrap_or_default();
        Some((Some(ModelRoute { id: model, provider, name, fallbacks, span: self.span(value.span()) }), price))
    }

    /// A model's `fallbacks`: distinct model ids other than its own, at most
    /// [`MAX_FALLBACKS`]; `None` after reporting what is wrong with the list.
    fn fallbacks(&mut self, value: &Value<'_>, model: &str) -> Option<Vec<String>> {
        let what = format!("`fallbacks` of model `{model}`");
        let DeValue::Array(items) = value.get_ref() else {
            self.error(
                value.span(),
                format!("{what} must be a list of model ids, not {}", value.get_ref().type_str()),
                "write them in the order to try, such as [\"claude-sonnet-4-5\", \"gpt-4.1-mini\"]",
            );
            return None;
        };
        if items.len() > MAX_FALLBACKS {
            self.error(
                value.span(),
                format!("{what} lists {} models; at most {MAX_FALLBACKS} are tried", items.len()),
                "keep the few models worth waiting for, best first",
            );
            return None;
        }
        let mut found: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let id = self.string(item, &format!("an entry of {what}"))?;
            if id == model {
                self.error(
                    item.span(),
                    format!("{what} lists the model itself"),
                    "a model is already tried first; list only the others to try after it",
                );
                return None;
            }
            if found.contains(&id) {
                self.error(item.span(), format!("{what} lists `{id}` twice"), "list each model once");
                return None;
            }
            found.push(id);
        }
        Some(found)
    }

    /// A model's `price` table, or `None` after reporting what is wrong with it.
    fn price(&mut self, value: &Value<'_>, model: &str) -> Option<ModelPrice> {
        let what = format!("`price` of model `{model}`");
        let table = self.table(value, &what, "write { input = 2.0, output = 8.0 } in USD per million tokens")?;
        let mut rates: [Option<f64>; 4] = [None; 4];
        for (key, item) in table.iter() {
            let Some(slot) = PRICE_KEYS.iter().position(|known| *known == key.get_ref().as_ref()) else {
                let close = did_you_mean(key.get_ref(), PRICE_KEYS)
                    .map(|close| format!("did you mean `{close}`? "))
                    .unwrap_or_default();
                self.error(
                    key.span(),
                    format!("`{}` is not a rate of {what}", key.get_ref()),
                    format!("{close}a price takes {}", list_names(&PRICE_KEYS)),
                );
                return None;
            };
            let rate = match item.get_ref() {
                DeValue::Float(number) => number.as_str().replace('_', "").parse::<f64>().ok(),
                DeValue::Integer(number) if number.radix() == 10 => {
                    number.as_str().replace('_', "").parse::<f64>().ok()
                }
                _ => None,
            };
            match rate {
                Some(rate) if rate.is_finite() && (0.0..=MAX_PRICE).contains(&rate) => rates[slot] = Some(rate),
                _ => {
                    self.error(
                        item.span(),
                        format!(
                            "`{}` of {what} must be a number of USD per million tokens from 0 to {MAX_PRICE}",
                            key.get_ref()
                        ),
                        "write it as a plain number, such as 2.5",
                    );
                    return None;
                }
            }
        }
        let [Some(input), Some(output), cache_read, cache_write] = rates else {
            let missing: Vec<&str> = PRICE_KEYS[..2]
                .iter()
                .zip(&rates[..2])
                .filter(|(_, rate)| rate.is_none())
                .map(|(key, _)| *key)
                .collect();
            self.error(
                value.span(),
                format!("{what} has no {} rate", missing.join(" or ")),
                "a price needs both `input` and `output`; `cache_read` and `cache_write` default to `input`",
            );
            return None;
        };
        Some(ModelPrice { input, output, cache_read, cache_write })
    }
}

/// Whether `name` can name a provider: letters, digits, `-` and `_`.
fn is_route_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_'))
}

/// A model id a workflow names, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelUse {
    pub id: String,
    pub span: Span,
    /// The workflow whose report the finding belongs to.
    pub workflow: String,
}

/// Checks, against an environment, what `[providers]` and `[models]` need of it: every
/// provider's key variable set (AMX0018), and every model id a workflow names served by a
/// route (a `[models]` entry, else the default endpoint `ARCHMAX_API_BASE_URL` configures;
/// AMX0019). Nothing is checked when the file declares neither table: the environment's
/// endpoint then serves every id, as it always has.
pub fn check_routes(
    settings: &RunnerSettings,
    used: &[ModelUse],
    env: impl Fn(&str) -> Option<String>,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    if settings.providers.is_empty() && settings.models.is_empty() {
        return diagnostics;
    }
    let set = |name: &str| env(name).is_some_and(|value| !value.trim().is_empty());
    for provider in settings.providers.values() {
        if let Some(variable) = provider.api_key_env.as_deref().filter(|variable| !set(variable)) {
            diagnostics.push(
                Diagnostic::at(
                    Code::ProviderKeyUnset,
                    provider.span,
                    format!("provider `{}` takes its key from {variable}, which is not set", provider.name),
                )
                .with_help(format!("set {variable} in the runner's environment (or its .env)")),
            );
        }
    }
    let default_endpoint = set(DEFAULT_ENDPOINT_VARIABLE);
    let mut reported = std::collections::BTreeSet::new();
    for model in used {
        if route_for(&settings.models, &model.id).is_some() || default_endpoint {
            continue;
        }
        if !reported.insert((model.workflow.clone(), model.id.clone(), model.span.start)) {
            continue;
        }
        let routed: Vec<&str> = settings.models.keys().map(String::as_str).collect();
        let routed = if routed.is_empty() { "none".to_string() } else { list_names(&routed) };
        diagnostics.push(
            Diagnostic::at(
                Code::UnroutedModel,
                model.span,
                format!("no route serves the model `{}`: archmax.toml routes {routed}, and {DEFAULT_ENDPOINT_VARIABLE} is not set", model.id),
            )
            .with_help(format!(
                "add `[models.\"{}\"]` with the `provider` that serves it, or set {DEFAULT_ENDPOINT_VARIABLE} for a default endpoint",
                model.id
            ))
            .with_scope(archmax_program::diagnostic::Scope::Workflow(model.workflow.clone())),
        );
    }
    for route in settings.models.values() {
        for fallback in
            route.fallbacks.iter().filter(|id| route_for(&settings.models, id).is_none() && !default_endpoint)
        {
            diagnostics.push(
                Diagnostic::at(
                    Code::UnroutedModel,
                    route.span,
                    format!(
                        "model `{}` falls back to `{fallback}`, which no route serves: {DEFAULT_ENDPOINT_VARIABLE} is not set",
                        route.id
                    ),
                )
                .with_help(format!(
                    "add `[models.\"{fallback}\"]` with the `provider` that serves it, or drop it from the fallbacks"
                )),
            );
        }
    }
    diagnostics
}

/// The variable whose endpoint serves every id no `[models]` entry routes.
pub const DEFAULT_ENDPOINT_VARIABLE: &str = "ARCHMAX_API_BASE_URL";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse_runner_settings;

    const GOOD: &str = r#"
[providers.claude]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"
timeout_ms = 60000
headers = { "x-team" = "support" }

[providers.azure]
kind = "azure-openai"
base_url = "https://acme.openai.azure.com"
api_key_env = "AZURE_OPENAI_KEY"
api_version = "2024-10-21"
deployments = { "gpt-4.1" = "prod-gpt41" }

[providers.ollama]
kind = "openai"
base_url = "http://localhost:11434/v1"

[models."claude-sonnet"]
provider = "claude"
name = "claude-sonnet-4-5"

[models."gpt-4.1"]
provider = "azure"

[models."llama3.2"]
provider = "ollama"
"#;

    fn messages(text: &str) -> Vec<(Code, String)> {
        parse_runner_settings(FileId(0), text).1.into_iter().map(|found| (found.code, found.message)).collect()
    }

    #[test]
    fn a_providers_concurrency_is_a_whole_number_of_calls() {
        let text = r#"
[providers.capped]
kind = "openai"
base_url = "http://localhost:11434/v1"
max_concurrency = 4

[providers.zero]
kind = "openai"
base_url = "http://localhost:11434/v1"
max_concurrency = 0

[providers.text]
kind = "openai"
base_url = "http://localhost:11434/v1"
max_concurrency = "4"
"#;
        let (settings, found) = parse_runner_settings(FileId(0), text);
        let found: Vec<String> = found.into_iter().map(|found| found.message).collect();
        assert_eq!(
            found,
            [
                "the `max_concurrency` of provider `text` is not 1 to 1024 calls",
                "the `max_concurrency` of provider `zero` is not 1 to 1024 calls",
            ]
        );
        assert_eq!(settings.providers.keys().collect::<Vec<_>>(), ["capped"]);
        assert_eq!(settings.providers["capped"].max_concurrency, Some(4));
    }

    #[test]
    fn prices_are_read_on_routes_and_alone_and_bad_ones_are_named() {
        let text = r#"
[providers.openai]
kind = "openai"
base_url = "https://api.openai.test/v1"

[models."drafter"]
provider = "openai"
name = "gpt-4.1-mini"
price = { input = 0.4, output = 1.6, cache_read = 0.1 }

[models."llama3.2"]
price = { input = 0, output = 0 }

[models."typo"]
price = { input = 1, ouput = 2 }

[models."half"]
price = { input = 1 }

[models."negative"]
price = { input = -1, output = 2 }

[models."text"]
price = { input = "1", output = 2 }

[models."huge"]
price = { input = 1e9, output = 2 }
"#;
        let (settings, found) = parse_runner_settings(FileId(0), text);
        let found: Vec<String> = found.into_iter().map(|found| found.message).collect();
        let expected = [
            "`ouput` is not a rate of `price` of model `typo`",
            "`price` of model `half` has no output rate",
            "`input` of `price` of model `negative` must be a number of USD per million tokens from 0 to 100000",
            "`input` of `price` of model `text` must be a number of USD per million tokens from 0 to 100000",
            "`input` of `price` of model `huge` must be a number of USD per million tokens from 0 to 100000",
        ];
        for message in expected {
            assert!(found.iter().any(|text| text == message), "missing {message:?} in {found:#?}");
        }
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        assert_eq!(settings.models.keys().collect::<Vec<_>>(), ["drafter"], "a price alone is no route");
        assert_eq!(
            settings.prices.get("drafter"),
            Some(&ModelPrice { input: 0.4, output: 1.6, cache_read: Some(0.1), cache_write: None })
        );
        assert_eq!(
            settings.prices.get("llama3.2"),
            Some(&ModelPrice { input: 0.0, output: 0.0, cache_read: None, cache_write: None }),
            "a free model is priced at zero, which is not unpriced"
        );
        assert_eq!(settings.prices.len(), 2);
    }

    #[test]
    fn providers_and_routes_are_read_with_their_defaults() {
        let (settings, diagnostics) = parse_runner_settings(FileId(0), GOOD);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let claude = &settings.providers["claude"];
        assert_eq!((claude.kind, claude.base_url.as_str()), (ProviderKind::Anthropic, ANTHROPIC_BASE_URL));
        assert_eq!((claude.timeout_ms, claude.headers["x-team"].as_str()), (Some(60_000), "support"));
        let azure = &settings.providers["azure"];
        assert_eq!(
            (azure.api_version.as_deref(), azure.deployments["gpt-4.1"].as_str()),
            (Some("2024-10-21"), "prod-gpt41")
        );
        assert_eq!(settings.providers["ollama"].api_key_env, None);
        assert_eq!(settings.models["claude-sonnet"].provider_model(), "claude-sonnet-4-5");
        assert_eq!(settings.models["gpt-4.1"].provider_model(), "gpt-4.1");
        assert_eq!(settings.models.len(), 3);
    }

    #[test]
    fn every_bad_table_is_named_and_left_out() {
        let text = r#"
[providers.nokind]
base_url = "https://x.test"

[providers.odd]
kind = "bedrock"

[providers.keyed]
kind = "openai"
base_url = "https://x.test/v1"
api_key = "sk-live-123"

[providers.azure]
kind = "azure-openai"
base_url = "https://acme.openai.azure.com"
api_key_env = "AZURE_KEY"

[providers.claude]
kind = "anthropic"

[providers.local]
kind = "openai"
base_url = "ftp://x"
timout_ms = 5

[models."gpt-4.1"]
provider = "azur"

[models."x"]
"#;
        let found = messages(text);
        let expected = [
            (Code::HostConfig, "provider `azure` (azure-openai) names no `api_version`"),
            (Code::HostConfig, "provider `claude` (anthropic) names no `api_key_env`"),
            (Code::HostConfig, "provider `keyed` writes its key into archmax.toml"),
            (Code::HostConfig, "the `base_url` of provider `local` is not an http:// or https:// URL"),
            (Code::HostConfig, "`timout_ms` is not a setting of provider `local`"),
            (Code::HostConfig, "provider `nokind` names no `kind`"),
            (Code::HostConfig, "provider `odd` has the kind `bedrock`"),
            (Code::UnknownProvider, "model `gpt-4.1` names the provider `azur`, which no `[providers]` table declares"),
            (Code::HostConfig, "model `x` names no `provider`"),
        ];
        for (code, message) in expected {
            assert!(
                found.iter().any(|(got, text)| *got == code && text == message),
                "missing {message:?} in {found:#?}"
            );
        }
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        let settings = parse_runner_settings(FileId(0), text).0;
        assert!(settings.providers.is_empty() && settings.models.is_empty());
    }

    #[test]
    fn fallbacks_are_a_short_list_of_other_ids_on_a_route() {
        let text = r#"
[providers.openai]
kind = "openai"
base_url = "https://api.openai.test/v1"

[models."gpt-4.1"]
provider = "openai"
fallbacks = ["claude-sonnet", "gpt-4.1-mini"]

[models."self"]
provider = "openai"
fallbacks = ["self"]

[models."twice"]
provider = "openai"
fallbacks = ["a", "a"]

[models."text"]
provider = "openai"
fallbacks = "a"

[models."many"]
provider = "openai"
fallbacks = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]

[models."unrouted"]
fallbacks = ["a"]
"#;
        let (settings, found) = parse_runner_settings(FileId(0), text);
        let found: Vec<String> = found.into_iter().map(|found| found.message).collect();
        let expected = [
            "`fallbacks` of model `self` lists the model itself",
            "`fallbacks` of model `twice` lists `a` twice",
            "`fallbacks` of model `text` must be a list of model ids, not string",
            "`fallbacks` of model `many` lists 9 models; at most 8 are tried",
            "model `unrouted` lists `fallbacks` but names no `provider`",
        ];
        for message in expected {
            assert!(found.iter().any(|text| text == message), "missing {message:?} in {found:#?}");
        }
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        assert_eq!(settings.models.keys().collect::<Vec<_>>(), ["gpt-4.1"]);
        assert_eq!(settings.models["gpt-4.1"].fallbacks, ["claude-sonnet", "gpt-4.1-mini"]);

        // Each fallback must be served: by a route, or by the default endpoint.
        let found: Vec<String> =
            check_routes(&settings, &[], |_| None).into_iter().map(|found| found.message).collect();
        assert_eq!(
            found,
            [
                "model `gpt-4.1` falls back to `claude-sonnet`, which no route serves: ARCHMAX_API_BASE_URL is not set",
                "model `gpt-4.1` falls back to `gpt-4.1-mini`, which no route serves: ARCHMAX_API_BASE_URL is not set",
            ]
        );
        assert!(check_routes(&settings, &[], |_| Some("https://x.test/v1".into())).is_empty());
    }

    #[test]
    fn a_pattern_routes_every_id_it_matches_that_no_exact_key_names() {
        for (pattern, id, matches) in [
            ("claude-*", "claude-sonnet-4-5", true),
            ("claude-*", "claude-", true),
            ("claude-*", "claude", false),
            ("*-mini", "gpt-4.1-mini", true),
            ("*-mini", "gpt-4.1-mini-2025", false),
            ("gpt-*-mini*", "gpt-4.1-mini-2025-04-14", true),
            ("a*b*a", "aba", true),
            ("a*b*a", "ab", false),
            ("a*a", "a", false),
            ("*", "anything/at-all", true),
            ("llama3.2", "llama3.2", true),
            ("llama3.2", "llama3.2:1b", false),
        ] {
            assert_eq!(glob_matches(pattern, id), matches, "{pattern} against {id}");
        }
        let text = r#"
[providers.claude]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"

[providers.haiku]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"

[providers.local]
kind = "openai"
base_url = "http://localhost:11434/v1"

[models."claude-*"]
provider = "claude"

[models."claude-haiku-*"]
provider = "haiku"

[models."claude-opus-4-1"]
provider = "local"

[models."*"]
provider = "local"

[models."bad-*"]
provider = "local"
name = "one-name"

[models."priced-*"]
provider = "local"
price = { input = 1, output = 2 }
"#;
        let (settings, found) = parse_runner_settings(FileId(0), text);
        let found: Vec<String> = found.into_iter().map(|found| found.message).collect();
        assert_eq!(found, ["the pattern `bad-*` takes no `name`", "the pattern `priced-*` takes no `price`"]);
        let provider = |id: &str| route_for(&settings.models, id).map(|route| route.provider.as_str());
        assert_eq!(provider("claude-sonnet-4-5"), Some("claude"));
        assert_eq!(provider("claude-haiku-4-5"), Some("haiku"), "the more specific pattern wins");
        assert_eq!(provider("claude-opus-4-1"), Some("local"), "an exact key wins over any pattern");
        assert_eq!(provider("qwen3"), Some("local"), "`*` catches the rest");
        // A pattern serves the ids a workflow names, for validate too.
        let uses = [used("claude-sonnet-4-5"), used("gpt-4.1")];
        let settings_without_catch_all = {
            let mut settings = settings.clone();
            settings.models.remove("*");
            settings
        };
        let keyed = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant".to_string());
        let found: Vec<String> =
            check_routes(&settings_without_catch_all, &uses, keyed).into_iter().map(|found| found.message).collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("no route serves the model `gpt-4.1`"), "{found:?}");
    }

    fn used(id: &str) -> ModelUse {
        ModelUse { id: id.into(), span: Span::new(FileId(1), 0, 1), workflow: "support".into() }
    }

    #[test]
    fn routes_are_judged_against_the_environment() {
        let settings = parse_runner_settings(FileId(0), GOOD).0;
        let uses = [used("claude-sonnet"), used("gpt-4.1"), used("o4-mini"), used("o4-mini")];
        let only_claude = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant".to_string());
        let found: Vec<(Code, String)> =
            check_routes(&settings, &uses, only_claude).into_iter().map(|found| (found.code, found.message)).collect();
        assert_eq!(
            found,
            [
                (Code::ProviderKeyUnset, "provider `azure` takes its key from AZURE_OPENAI_KEY, which is not set".to_string()),
                (
                    Code::UnroutedModel,
                    "no route serves the model `o4-mini`: archmax.toml routes `claude-sonnet`, `gpt-4.1` and `llama3.2`, and ARCHMAX_API_BASE_URL is not set".to_string()
                ),
            ]
        );
        // A default endpoint serves every id no entry routes.
        let everything = |_: &str| Some("set".to_string());
        assert!(check_routes(&settings, &uses, everything).is_empty());
        // Without the tables the environment's endpoint serves every id, as it always has.
        assert!(check_routes(&RunnerSettings::default(), &uses, |_| None).is_empty());
    }
}
