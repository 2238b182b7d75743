//! The `[limits]` table of `archmax.toml`: what one session may spend on models before a
//! person has to say it may go on.
//!
//! ```toml
//! [limits]
//! max_tokens_per_turn = 200000       # input + output tokens of one turn's model calls
//! max_model_calls_per_turn = 40      # model calls in one turn
//! max_cost_per_session = 2.50        # US dollars over the session's whole life
//!
//! [limits.workflows.triage]          # a workflow's own limits, key by key over the above
//! max_cost_per_session = 0.25
//! ```
//!
//! Every key is optional and no key means no limit. A workflow's table replaces only the
//! keys it sets; `0` there lifts that limit for the workflow. A bad value or an unknown
//! key is an `AMX0011` error naming it, and the limit stays unset. How a session stops at
//! a limit and how a person lifts the stop is the runtime's business (`archmax-vm`).

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};

use super::RunnerSettings;
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The keys a `[limits]` table (and each workflow's) takes.
const KEYS: [&str; 3] = ["max_tokens_per_turn", "max_model_calls_per_turn", "max_cost_per_session"];

/// The largest `max_cost_per_session` accepted, in US dollars.
const MAX_COST: f64 = 1_000_000.0;

/// One set of limits; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetLimits {
    /// Input and output tokens of one turn's model calls (its sub-workflows' included).
    pub max_tokens_per_turn: Option<u64>,
    /// Model calls in one turn.
    pub max_model_calls_per_turn: Option<u64>,
    /// US dollars over the session's life (priced calls only).
    pub max_cost_per_session: Option<f64>,
}

impl BudgetLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.max_tokens_per_turn.is_some()
            || self.max_model_calls_per_turn.is_some()
            || self.max_cost_per_session.is_some()
    }
}

/// The host's budgets: the default limits and each workflow's overrides.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budgets {
    /// `[limits]`.
    pub default: BudgetLimits,
    /// `[limits.workflows.<slug>]`, each already laid over the default.
    pub workflows: BTreeMap<String, BudgetLimits>,
}

impl Budgets {
    /// The limits a session of `workflow` runs under.
    pub fn for_workflow(&self, workflow: &str) -> BudgetLimits {
        self.workflows.get(workflow).copied().unwrap_or(self.default)
    }
}

/// How a key of one table was set: a limit, `0` (lifted, in a workflow's table), or
/// nothing usable.
enum Setting<T> {
    Limit(T),
    Lifted,
}

/// Reads `[limits]` of `text` into `settings`.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let document = document.get_ref();
    let Some(spanned) = document.get("limits") else { return };
    let span = |range: std::ops::Range<usize>| Span::new(file, range.start, range.end);
    let DeValue::Table(table) = spanned.get_ref() else {
        diagnostics.push(
            Diagnostic::at(Code::HostConfig, span(spanned.span()), "`limits` in archmax.toml is not a table")
                .with_help(format!("write a `[limits]` table with any of {}", list_names(&KEYS))),
        );
        return;
    };
    let mut overrides = Vec::new();
    for (key, value) in table.iter() {
        let name = key.get_ref().as_ref();
        if name == "workflows" {
            match value.get_ref() {
                DeValue::Table(workflows) => overrides.extend(workflows.iter()),
                _ => diagnostics.push(
                    Diagnostic::at(Code::HostConfig, span(value.span()), "`limits.workflows` is not a table")
                        .with_help("write one `[limits.workflows.<slug>]` table per workflow"),
                ),
            }
            continue;
        }
        let mut limits = settings.limits.default;
        read_key("limits", name, key.span(), value, false, &mut limits, file, diagnostics);
        settings.limits.default = limits;
    }
    for (slug, value) in overrides {
        let slug_text = slug.get_ref().as_ref();
        let where_ = format!("limits.workflows.{slug_text}");
        let DeValue::Table(keys) = value.get_ref() else {
            diagnostics.push(
                Diagnostic::at(Code::HostConfig, span(value.span()), format!("`{where_}` is not a table"))
                    .with_help(format!("write a `[{where_}]` table with any of {}", list_names(&KEYS))),
            );
            continue;
        };
        if !super::is_slug(slug_text) {
            diagnostics.push(
                Diagnostic::at(
                    Code::HostConfig,
                    span(slug.span()),
                    format!("the limits key `{slug_text}` is not a workflow slug"),
                )
                .with_help("key a workflow's limits by its slug (its folder under workflows/)"),
            );
            continue;
        }
        let mut limits = settings.limits.default;
        for (key, value) in keys.iter() {
            read_key(&where_, key.get_ref().as_ref(), key.span(), value, true, &mut limits, file, diagnostics);
        }
        settings.limits.workflows.insert(slug_text.to_string(), limits);
    }
}

/// Reads one key of the table `table` into `limits`; `zero_lifts` in a workflow's table.
#[allow(clippy::too_many_arguments)]
fn read_key(
    table: &str,
    name: &str,
    key_span: std::ops::Range<usize>,
    value: &toml::Spanned<DeValue<'_>>,
    zero_lifts: bool,
    limits: &mut BudgetLimits,
    file: FileId,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let at = Span::new(file, value.span().start, value.span().end);
    let lift = if zero_lifts { " (or 0 to lift it for this workflow)" } else { " (leave the key out for no limit)" };
    let mut refuse = |message: String, help: String| {
        diagnostics.push(Diagnostic::at(Code::HostConfig, at, message).with_help(help));
    };
    match name {
        "max_tokens_per_turn" => match whole(value.get_ref(), 1_000, 1_000_000_000, zero_lifts) {
            Some(Setting::Limit(tokens)) => limits.max_tokens_per_turn = Some(tokens),
            Some(Setting::Lifted) => limits.max_tokens_per_turn = None,
            None => refuse(
                format!("`{table}.max_tokens_per_turn` is not a number of tokens from 1000 to 1000000000"),
                format!("give the most input and output tokens one turn's model calls may use, such as 200000{lift}"),
            ),
        },
        "max_model_calls_per_turn" => match whole(value.get_ref(), 1, 100_000, zero_lifts) {
            Some(Setting::Limit(calls)) => limits.max_model_calls_per_turn = Some(calls),
            Some(Setting::Lifted) => limits.max_model_calls_per_turn = None,
            None => refuse(
                format!("`{table}.max_model_calls_per_turn` is not a number of calls from 1 to 100000"),
                format!("give the most model calls one turn may make, such as 40{lift}"),
            ),
        },
        "max_cost_per_session" => match dollars(value.get_ref(), zero_lifts) {
            Some(Setting::Limit(cost)) => limits.max_cost_per_session = Some(cost),
            Some(Setting::Lifted) => limits.max_cost_per_session = None,
            None => refuse(
                format!("`{table}.max_cost_per_session` is not an amount of US dollars above 0 and at most 1000000"),
                format!("give the most a session may spend on priced model calls, such as 2.50{lift}"),
            ),
        },
        other => {
            let help = match did_you_mean(other, KEYS) {
                Some(close) => format!("did you mean `{close}`? `[{table}]` takes {}", list_names(&KEYS)),
                None if table == "limits" => {
                    format!("`[limits]` takes {}, besides `[limits.workflows.<slug>]` tables", list_names(&KEYS))
                }
                None => format!("`[{table}]` takes {}", list_names(&KEYS)),
            };
            diagnostics.push(
                Diagnostic::at(
                    Code::HostConfig,
                    Span::new(file, key_span.start, key_span.end),
                    format!("`{table}.{other}` is not a setting"),
                )
                .with_help(help),
            );
        }
    }
}

/// A whole number from `low` to `high` (or `0`, when `zero_lifts`).
fn whole(value: &DeValue<'_>, low: u64, high: u64, zero_lifts: bool) -> Option<Setting<u64>> {
    let DeValue::Integer(integer) = value else { return None };
    let number = integer.to_string().replace('_', "").parse::<u64>().ok()?;
    match number {
        0 if zero_lifts => Some(Setting::Lifted),
        number if (low..=high).contains(&number) => Some(Setting::Limit(number)),
        _ => None,
    }
}

/// An amount of dollars above 0 and at most [`MAX_COST`] (or `0`, when `zero_lifts`),
/// written as a whole number or with a decimal point.
fn dollars(value: &DeValue<'_>, zero_lifts: bool) -> Option<Setting<f64>> {
    let amount = match value {
        DeValue::Integer(integer) => integer.to_string().replace('_', "").parse::<f64>().ok()?,
        DeValue::Float(float) => float.to_string().replace('_', "").parse::<f64>().ok()?,
        _ => return None,
    };
    if amount == 0.0 && zero_lifts {
        return Some(Setting::Lifted);
    }
    (amount.is_finite() && amount > 0.0 && amount <= MAX_COST).then_some(Setting::Limit(amount))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse_runner_settings;

    fn read(text: &str) -> (Budgets, Vec<String>) {
        let (settings, diagnostics) = parse_runner_settings(FileId(0), text);
        (settings.limits, diagnostics.iter().map(|diagnostic| diagnostic.message.clone()).collect())
    }

    #[test]
    fn every_key_is_read_and_a_workflow_table_replaces_only_the_keys_it_sets() {
        let (budgets, problems) = read(
            "[limits]\nmax_tokens_per_turn = 200_000\nmax_model_calls_per_turn = 40\nmax_cost_per_session = 2.5\n\n\
             [limits.workflows.triage]\nmax_cost_per_session = 1\n\n[limits.workflows.batch]\nmax_model_calls_per_turn = 0\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        let default = BudgetLimits {
            max_tokens_per_turn: Some(200_000),
            max_model_calls_per_turn: Some(40),
            max_cost_per_session: Some(2.5),
        };
        assert_eq!(budgets.default, default);
        assert_eq!(budgets.for_workflow("triage"), BudgetLimits { max_cost_per_session: Some(1.0), ..default });
        assert_eq!(budgets.for_workflow("batch"), BudgetLimits { max_model_calls_per_turn: None, ..default });
        assert_eq!(budgets.for_workflow("other"), default);
        assert!(!read("").0.default.any());
    }

    #[test]
    fn bad_values_and_unknown_keys_are_named_and_no_limit_is_set_for_them() {
        let (budgets, problems) = read(
            "[limits]\nmax_tokens_per_turn = 10\nmax_model_calls_per_turn = 0\nmax_cost_per_session = -1.0\nmax_cost = 3\n\n\
             [limits.workflows.Bad_Slug]\nmax_cost_per_session = 1\n\n[limits.workflows.ok]\nmax_model_calls_per_turn = \"many\"\n",
        );
        assert!(!budgets.default.any(), "{budgets:?}");
        let joined = problems.join("\n");
        for expected in [
            "`limits.max_tokens_per_turn` is not a number of tokens from 1000",
            "`limits.max_model_calls_per_turn` is not a number of calls from 1",
            "`limits.max_cost_per_session` is not an amount of US dollars above 0",
            "`limits.max_cost` is not a setting",
            "the limits key `Bad_Slug` is not a workflow slug",
            "`limits.workflows.ok.max_model_calls_per_turn` is not a number of calls",
        ] {
            assert!(joined.contains(expected), "{joined}");
        }
        let (_, problems) = read("limits = 3\n");
        assert!(problems[0].contains("is not a table"), "{problems:?}");
        let (_, problems) = read("[limits]\nworkflows = 2\n");
        assert!(problems[0].contains("`limits.workflows` is not a table"), "{problems:?}");
    }

    #[test]
    fn an_unknown_key_close_to_a_real_one_is_suggested() {
        let (settings, diagnostics) = parse_runner_settings(FileId(0), "[limits]\nmax_tokens_per_trun = 5000\n");
        assert!(!settings.limits.default.any());
        let help = diagnostics[0].help.clone().unwrap_or_default();
        assert!(help.contains("did you mean `max_tokens_per_turn`?"), "{help}");
    }
}
