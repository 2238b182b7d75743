//! `[notify.<name>]` and `[serve]` of `archmax.toml`: outgoing webhooks the runner calls
//! when a session parks or fails, or a decision waits longer than a threshold, and the
//! public address their links to a session's page start with.
//!
//! ```toml
//! [serve]
//! public_url = "https://archmax.example.com"   # where people reach this runner's inbox
//!
//! [notify.ops]                                   # a slug: metrics and logs name it
//! url = "https://hooks.example.com/archmax"      # or url_env = "OPS_HOOK_URL"
//! secret_env = "OPS_HOOK_SECRET"                 # the HMAC-SHA256 key's variable
//! on = ["parked", "failed", "waiting"]           # default: ["parked", "failed"]
//! waiting_after = "30m"                          # "waiting": a decision pending this long
//! workflows = ["refunds"]                        # default: every workflow
//! preset = "slack"                               # default "archmax": the runner's JSON
//! timeout_ms = 10000                             # each attempt (default 10000)
//! max_attempts = 5                               # with backoff between (default 5)
//! ```
//!
//! The one thing to know: like a connection's secret, a notifier's key is only ever named
//! by its variable; a URL that carries a token of its own (a Slack incoming webhook's does)
//! belongs in a variable too (`url_env`), so the file stays fit to commit. A URL written in
//! the file must be `http://` or `https://`, name a host and carry no credentials. Every
//! problem is an `AMX0011` diagnostic naming the key and the fix; the notifier is then
//! left out (the runner refuses to start on the same errors).

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{RunnerSettings, is_slug, is_variable_name};
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The keys a `[notify.<name>]` table takes.
const KEYS: [&str; 9] =
    ["url", "url_env", "secret_env", "on", "waiting_after", "workflows", "preset", "timeout_ms", "max_attempts"];
/// The keys `[serve]` takes.
const SERVE_KEYS: [&str; 1] = ["public_url"];

/// How long a decision waits before a `waiting` notification, by default: 30 minutes.
pub const DEFAULT_WAITING_AFTER_MS: u64 = 30 * 60 * 1000;
/// The shortest and longest `waiting_after`: a second and a week.
const WAITING_AFTER_RANGE_MS: (u64, u64) = (1000, 7 * 24 * 3600 * 1000);
/// How long one delivery attempt may take by default, in milliseconds.
pub const DEFAULT_NOTIFY_TIMEOUT_MS: u64 = 10_000;
/// The range of `timeout_ms`.
pub const NOTIFY_TIMEOUT_RANGE_MS: (u64, u64) = (100, 60_000);
/// How many attempts a delivery gets by default.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The range of `max_attempts`.
pub const MAX_ATTEMPTS_RANGE: (u32, u32) = (1, 10);

/// What a notifier is called for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotifyEvent {
    /// A session parked: it waits for a decision or for input.
    Parked,
    /// A session failed.
    Failed,
    /// A decision has been pending longer than `waiting_after` (once per park).
    Waiting,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 3] = [NotifyEvent::Parked, NotifyEvent::Failed, NotifyEvent::Waiting];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Parked => "parked",
            NotifyEvent::Failed => "failed",
            NotifyEvent::Waiting => "waiting",
        }
    }

    fn parse(text: &str) -> Option<NotifyEvent> {
        NotifyEvent::ALL.into_iter().find(|event| event.as_str() == text)
    }
}

/// The body a notifier sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotifyPreset {
    /// archmax's own JSON: the event, the session, its workflow, state and reason, the
    /// page link and the time.
    #[default]
    Archmax,
    /// What a Slack incoming webhook accepts: `text`, and `blocks` with the same words.
    Slack,
}

impl NotifyPreset {
    pub const NAMES: [&str; 2] = ["archmax", "slack"];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyPreset::Archmax => "archmax",
            NotifyPreset::Slack => "slack",
        }
    }
}

/// Where a notifier sends to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotifyTarget {
    /// Written in the file, checked there.
    Url(String),
    /// Read from this variable at start (and checked then).
    UrlEnv(String),
}

/// One `[notify.<name>]` table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notifier {
    /// The table's name, a slug.
    pub name: String,
    pub target: NotifyTarget,
    /// The variable holding the HMAC-SHA256 key; required unless the preset is `slack`.
    pub secret_env: Option<String>,
    /// What it is called for, sorted, never empty.
    pub on: Vec<NotifyEvent>,
    /// How long a decision waits before the `waiting` notification, in milliseconds.
    pub waiting_after_ms: u64,
    /// Only these workflows' sessions; empty for every workflow.
    pub workflows: Vec<String>,
    pub preset: NotifyPreset,
    /// The bound on each attempt, in milliseconds.
    pub timeout_ms: u64,
    pub max_attempts: u32,
}

impl Notifier {
    /// Whether this notifier is called for `event` of a session of `workflow`.
    pub fn wants(&self, event: NotifyEvent, workflow: &str) -> bool {
        self.on.contains(&event) && (self.workflows.is_empty() || self.workflows.iter().any(|w| w == workflow))
    }
}

/// Why `url` cannot be called: not `http://` or `https://`, no host, or credentials in it.
pub fn http_url_problem(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    let rest = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://"));
    let authority = rest.and_then(|rest| rest.split(['/', '?', '#']).next()).unwrap_or("");
    if rest.is_none() {
        Some("is not an http:// or https:// URL")
    } else if authority.is_empty() {
        Some("names no host")
    } else if authority.contains('@') {
        Some("carries credentials")
    } else if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("holds a space or a control character")
    } else {
        None
    }
}

/// Reads `[notify.<name>]` and `[serve]` of `text` into `settings`.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let document = document.get_ref();
    let mut reader = Reader { file, diagnostics };
    if let Some(serve) = document.get("serve") {
        settings.public_url = reader.serve(serve);
    }
    let Some(spanned) = document.get("notify") else { return };
    let DeValue::Table(table) = spanned.get_ref() else {
        reader.error(
            spanned.span(),
            "`notify` in archmax.toml is not a table".into(),
            "write one `[notify.<name>]` table per notifier".into(),
        );
        return;
    };
    for (name, value) in table.iter() {
        let name_text = name.get_ref().as_ref();
        if !is_slug(name_text) {
            reader.error(
                name.span(),
                format!("the notifier name `{name_text}` is not a slug"),
                "name notifiers with lowercase letters, digits and single hyphens, such as `ops-slack`".into(),
            );
            continue;
        }
        let DeValue::Table(keys) = value.get_ref() else {
            reader.error(
                value.span(),
                format!("`notify.{name_text}` is not a table"),
                format!("write a `[notify.{name_text}]` table with {}", list_names(&KEYS)),
            );
            continue;
        };
        if let Some(notifier) = reader.notifier(name_text, value.span(), keys) {
            settings.notify.insert(name_text.to_string(), notifier);
        }
    }
}

struct Reader<'d> {
    file: FileId,
    diagnostics: &'d mut Vec<Diagnostic>,
}

/// What a notifier table sets, before the keys are judged together.
#[derive(Default)]
struct Declared {
    url: Option<String>,
    url_env: Option<String>,
    secret_env: Option<String>,
    on: Option<Vec<NotifyEvent>>,
    waiting_after_ms: Option<u64>,
    workflows: Vec<String>,
    preset: NotifyPreset,
    timeout_ms: Option<u64>,
    max_attempts: Option<u32>,
}

impl Reader<'_> {
    fn error(&mut self, range: std::ops::Range<usize>, message: String, help: String) {
        let span = Span::new(self.file, range.start, range.end);
        self.diagnostics.push(Diagnostic::at(Code::HostConfig, span, message).with_help(help));
    }

    /// `[serve]`: the public URL, when it is one.
    fn serve(&mut self, spanned: &Spanned<DeValue<'_>>) -> Option<String> {
        let DeValue::Table(table) = spanned.get_ref() else {
            self.error(
                spanned.span(),
                "`serve` in archmax.toml is not a table".into(),
                "write a `[serve]` table with `public_url`".into(),
            );
            return None;
        };
        let mut public_url = None;
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "public_url" => {
                    let problem = match value.get_ref() {
                        DeValue::String(url) => match http_url_problem(url) {
                            None if url.contains(['?', '#']) => Some("holds a query or a fragment"),
                            None => {
                                public_url = Some(url.trim_end_matches('/').to_string());
                                None
                            }
                            problem => problem,
                        },
                        _ => Some("is not a string"),
                    };
                    if let Some(problem) = problem {
                        self.error(
                            value.span(),
                            format!("`serve.public_url` {problem}"),
                            "give the address people open this runner's inbox at, such as https://archmax.example.com"
                                .into(),
                        );
                    }
                }
                other => self.unknown_key(key.span(), "serve", other, &SERVE_KEYS),
            }
        }
        public_url
    }

    fn unknown_key(&mut self, range: std::ops::Range<usize>, table: &str, key: &str, keys: &[&str]) {
        let help = match did_you_mean(key, keys.iter().copied()) {
            Some(close) => format!("did you mean `{close}`? `[{table}]` takes {}", list_names(keys)),
            None => format!("`[{table}]` takes {}", list_names(keys)),
        };
        self.error(range, format!("`{table}.{key}` is not a setting"), help);
    }

    /// One notifier table; `None` (with the diagnostics) when any key is wrong.
    fn notifier(
        &mut self,
        name: &str,
        whole: std::ops::Range<usize>,
        keys: &toml::map::Map<Spanned<std::borrow::Cow<'_, str>>, Spanned<DeValue<'_>>>,
    ) -> Option<Notifier> {
        let before = self.diagnostics.len();
        let mut declared = Declared::default();
        for (key, value) in keys.iter() {
            self.key(name, key.get_ref().as_ref(), key.span(), value, &mut declared);
        }
        if self.diagnostics.len() > before {
            // A wrong key is named alone: what the table lacks follows from it.
            return None;
        }
        let table = format!("notify.{name}");
        let target = match (declared.url, declared.url_env) {
            (Some(url), None) => Some(NotifyTarget::Url(url)),
            (None, Some(variable)) => Some(NotifyTarget::UrlEnv(variable)),
            (Some(_), Some(_)) => {
                self.error(
                    whole.clone(),
                    format!("`{table}` sets both `url` and `url_env`"),
                    "keep one: `url_env` when the URL carries a token of its own".into(),
                );
                None
            }
            (None, None) => {
                self.error(
                    whole.clone(),
                    format!("`{table}` names no `url`"),
                    "set `url` to the http(s) address to call, or `url_env` to the variable holding it".into(),
                );
                None
            }
        };
        if declared.secret_env.is_none() && declared.preset != NotifyPreset::Slack {
            self.error(
                whole.clone(),
                format!("`{table}` names no `secret_env`"),
                "set `secret_env` to the variable holding the key its requests are signed with (HMAC-SHA256); the key itself never goes in the file".into(),
            );
        }
        let on = declared.on.unwrap_or_else(|| vec![NotifyEvent::Parked, NotifyEvent::Failed]);
        if declared.waiting_after_ms.is_some() && !on.contains(&NotifyEvent::Waiting) {
            self.error(
                whole,
                format!("`{table}` sets `waiting_after` but its `on` has no \"waiting\""),
                "add \"waiting\" to `on`, or drop `waiting_after`".into(),
            );
        }
        if self.diagnostics.len() > before {
            return None;
        }
        Some(Notifier {
            name: name.to_string(),
            target: target?,
            secret_env: declared.secret_env,
            on,
            waiting_after_ms: declared.waiting_after_ms.unwrap_or(DEFAULT_WAITING_AFTER_MS),
            workflows: declared.workflows,
            preset: declared.preset,
            timeout_ms: declared.timeout_ms.unwrap_or(DEFAULT_NOTIFY_TIMEOUT_MS),
            max_attempts: declared.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        })
    }

    /// One key of `[notify.<name>]` into `declared`, or its diagnostic.
    fn key(
        &mut self,
        name: &str,
        key: &str,
        key_span: std::ops::Range<usize>,
        value: &Spanned<DeValue<'_>>,
        declared: &mut Declared,
    ) {
        let at = value.span();
        let table = format!("notify.{name}");
        let text = match value.get_ref() {
            DeValue::String(text) => Some(text.as_ref()),
            _ => None,
        };
        match key {
            "url" => match text.map(|url| (url, http_url_problem(url))) {
                Some((url, None)) => declared.url = Some(url.to_string()),
                found => self.error(
                    at,
                    format!("`{table}.url` {}", found.and_then(|(_, problem)| problem).unwrap_or("is not a string")),
                    "give an http(s) URL without credentials, such as https://hooks.example.com/archmax; a URL carrying a token goes in a variable named by `url_env`".into(),
                ),
            },
            "url_env" | "secret_env" => match text.filter(|variable| is_variable_name(variable)) {
                Some(variable) if key == "url_env" => declared.url_env = Some(variable.to_string()),
                Some(variable) => declared.secret_env = Some(variable.to_string()),
                None => self.error(
                    at,
                    format!("`{table}.{key}` is not an environment variable name"),
                    "write the variable's name (letters, digits and `_`), such as OPS_HOOK_SECRET; the value itself never goes in the file".into(),
                ),
            },
            "on" => {
                if let Some(events) = self.events(&table, value) {
                    declared.on = Some(events);
                }
            }
            "waiting_after" => match text.and_then(duration_ms).filter(|ms| (WAITING_AFTER_RANGE_MS.0..=WAITING_AFTER_RANGE_MS.1).contains(ms)) {
                Some(ms) => declared.waiting_after_ms = Some(ms),
                None => self.error(
                    at,
                    format!("`{table}.waiting_after` is not a duration from 1s to 7d"),
                    "write a whole number and a unit (s, m, h or d), such as \"30m\"".into(),
                ),
            },
            "workflows" => match strings(value).filter(|slugs| !slugs.is_empty() && slugs.iter().all(|slug| is_slug(slug))) {
                Some(slugs) => declared.workflows = slugs,
                None => self.error(
                    at,
                    format!("`{table}.workflows` is not a list of workflow slugs"),
                    "list the slugs of the workflows to notify for, such as workflows = [\"refunds\"], or leave the key out for every workflow".into(),
                ),
            },
            "preset" => match text {
                Some("archmax") => declared.preset = NotifyPreset::Archmax,
                Some("slack") => declared.preset = NotifyPreset::Slack,
                _ => self.error(
                    at,
                    format!("`{table}.preset` is not a preset"),
                    "use `archmax` or `slack` (the body a Slack incoming webhook takes)".into(),
                ),
            },
            "timeout_ms" => match whole(value.get_ref(), NOTIFY_TIMEOUT_RANGE_MS) {
                Some(ms) => declared.timeout_ms = Some(ms),
                None => self.error(
                    at,
                    format!("`{table}.timeout_ms` is not a number of milliseconds from 100 to 60000"),
                    "give how long one attempt may take, such as 10000".into(),
                ),
            },
            "max_attempts" => match whole(value.get_ref(), (MAX_ATTEMPTS_RANGE.0.into(), MAX_ATTEMPTS_RANGE.1.into())) {
                Some(attempts) => declared.max_attempts = Some(attempts as u32),
                None => self.error(
                    at,
                    format!("`{table}.max_attempts` is not a number from 1 to 10"),
                    "give how many times a delivery is tried in all, such as 5".into(),
                ),
            },
            other => self.unknown_key(key_span, &table, other, &KEYS),
        }
    }

    /// A non-empty list of known events, sorted; anything else is reported here (an
    /// unknown event by name, with a suggestion).
    fn events(&mut self, table: &str, value: &Spanned<DeValue<'_>>) -> Option<Vec<NotifyEvent>> {
        let known = NotifyEvent::ALL.map(NotifyEvent::as_str);
        let Some(names) = strings(value).filter(|names| !names.is_empty()) else {
            self.error(
                value.span(),
                format!("`{table}.on` is not a list of events"),
                format!("list one or more of {}, such as on = [\"parked\", \"failed\"]", list_names(&known)),
            );
            return None;
        };
        let mut events = Vec::new();
        for name in names {
            let Some(event) = NotifyEvent::parse(&name) else {
                let help = match did_you_mean(&name, known) {
                    Some(close) => format!("did you mean \"{close}\"? `on` lists {}", list_names(&known)),
                    None => format!("`on` lists {}", list_names(&known)),
                };
                self.error(value.span(), format!("`{table}.on` names \"{name}\", which is not an event"), help);
                return None;
            };
            events.push(event);
        }
        events.sort();
        events.dedup();
        Some(events)
    }
}

/// A list of strings; `None` when it is not one.
fn strings(value: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
    let DeValue::Array(items) = value.get_ref() else { return None };
    items
        .iter()
        .map(|item| match item.get_ref() {
            DeValue::String(text) => Some(text.to_string()),
            _ => None,
        })
        .collect()
}

/// A whole number within `range`.
fn whole(value: &DeValue<'_>, range: (u64, u64)) -> Option<u64> {
    let DeValue::Integer(integer) = value else { return None };
    let number = integer.to_string().replace('_', "").parse::<u64>().ok()?;
    (range.0..=range.1).contains(&number).then_some(number)
}

/// `"30m"`: a whole number and a unit (`s`, `m`, `h`, `d`), in milliseconds.
pub fn duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let unit_at = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(unit_at);
    let number: u64 = number.parse().ok()?;
    let unit_ms: u64 = match unit {
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit_ms)
}

#[cfg(test)]
#[path = "notify_tests.rs"]
mod tests;
