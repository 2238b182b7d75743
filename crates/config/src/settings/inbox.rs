//! The `[inbox]` table of `archmax.toml`: how the decision inbox presents each
//! workflow's sessions. The workflow YAML has no key for this (it describes the work,
//! not the queue a person reads), so it lives with the runner's other settings.
//!
//! ```toml
//! [inbox.workflows.refund-desk]
//! summary = ["order_id", "refund_amount"]    # the variables a row of the inbox shows
//! comment_required = ["escalate", "decline"] # decisions that need a comment
//!
//! [inbox.workflows.refund-desk.fields.claim]  # the form of an `object` input
//! fields = [{ name = "amount", type = "number" }]
//! ```
//!
//! `[inbox.oidc]` (sign-in with an OpenID Connect provider) is read in [`super::oidc`].
//! Without `summary` a row shows the session's first locked inputs. A decision needs a
//! comment when it leads to a state `comment_required` names, or when the transition's
//! own description asks for one (that is the inbox's reading, in `archmax-serve`). The
//! shapes of object inputs are read by `inbox_fields`. A bad value or an unknown key is
//! an `AMX0011` error naming it.

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};

use super::RunnerSettings;
use archmax_program::diagnostic::{Code, Diagnostic, did_you_mean, list_names};
use archmax_program::source::{FileId, Span};

/// The keys a `[inbox.workflows.<slug>]` table takes.
const KEYS: [&str; 3] = ["summary", "comment_required", "fields"];

/// The most names one list may hold.
const MAX_NAMES: usize = 8;

/// How the inbox presents the sessions of each workflow, by slug.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InboxSettings {
    pub workflows: BTreeMap<String, InboxWorkflow>,
    /// `[inbox.oidc]`: sign-in with an OpenID Connect provider (read in [`super::oidc`]).
    pub oidc: Option<super::oidc::OidcSettings>,
}

impl InboxSettings {
    /// The settings of `workflow` (empty when it has none).
    pub fn for_workflow(&self, workflow: &str) -> InboxWorkflow {
        self.workflows.get(workflow).cloned().unwrap_or_default()
    }
}

/// One workflow's `[inbox.workflows.<slug>]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InboxWorkflow {
    /// The variables a row of the inbox shows, in order.
    pub summary: Vec<String>,
    /// The states a decision leads to that need the decider's comment.
    pub comment_required: Vec<String>,
    /// The shapes of its `object` inputs, by input name (`[<this>.fields.<input>]`,
    /// read in `inbox_fields`).
    pub fields: BTreeMap<String, super::inbox_fields::ObjectShape>,
}

/// Reads `[inbox]` of `text` into `settings`.
pub(super) fn read(file: FileId, text: &str, settings: &mut RunnerSettings, diagnostics: &mut Vec<Diagnostic>) {
    let Ok(document) = DeTable::parse(text) else { return };
    let document = document.get_ref();
    let Some(spanned) = document.get("inbox") else { return };
    if let DeValue::Table(table) = spanned.get_ref()
        && let Some(oidc) = table.get("oidc")
    {
        settings.inbox.oidc = super::oidc::read(file, oidc, diagnostics);
    }
    let span = |range: std::ops::Range<usize>| Span::new(file, range.start, range.end);
    let mut refuse = |at: std::ops::Range<usize>, message: String, help: String| {
        diagnostics.push(Diagnostic::at(Code::HostConfig, span(at), message).with_help(help));
    };
    let DeValue::Table(table) = spanned.get_ref() else {
        refuse(
            spanned.span(),
            "`inbox` in archmax.toml is not a table".into(),
            "write `[inbox.workflows.<slug>]` tables".into(),
        );
        return;
    };
    for (key, value) in table.iter() {
        let name = key.get_ref().as_ref();
        if name == "oidc" {
            // Read before this loop.
            continue;
        }
        if name != "workflows" {
            refuse(
                key.span(),
                format!("`inbox.{name}` is not a setting"),
                "`[inbox]` takes `[inbox.workflows.<slug>]` tables and an `[inbox.oidc]` table".into(),
            );
            continue;
        }
        let DeValue::Table(workflows) = value.get_ref() else {
            refuse(
                value.span(),
                "`inbox.workflows` is not a table".into(),
                "write one `[inbox.workflows.<slug>]` table per workflow".into(),
            );
            continue;
        };
        for (slug, keys) in workflows.iter() {
            let slug_text = slug.get_ref().as_ref();
            let where_ = format!("inbox.workflows.{slug_text}");
            if !super::is_slug(slug_text) {
                refuse(
                    slug.span(),
                    format!("the inbox key `{slug_text}` is not a workflow slug"),
                    "key a workflow's inbox settings by its slug (its folder under workflows/)".into(),
                );
                continue;
            }
            let DeValue::Table(keys) = keys.get_ref() else {
                refuse(
                    keys.span(),
                    format!("`{where_}` is not a table"),
                    format!("write a `[{where_}]` table with any of {}", list_names(&KEYS)),
                );
                continue;
            };
            let mut workflow = InboxWorkflow::default();
            for (key, value) in keys.iter() {
                let key_name = key.get_ref().as_ref();
                let slot = match key_name {
                    "fields" => {
                        workflow.fields = super::inbox_fields::read(&where_, value, &mut refuse);
                        continue;
                    }
                    "summary" => &mut workflow.summary,
                    "comment_required" => &mut workflow.comment_required,
                    other => {
                        let help = match did_you_mean(other, KEYS) {
                            Some(close) => format!("did you mean `{close}`? `[{where_}]` takes {}", list_names(&KEYS)),
                            None => format!("`[{where_}]` takes {}", list_names(&KEYS)),
                        };
                        refuse(key.span(), format!("`{where_}.{other}` is not a setting"), help);
                        continue;
                    }
                };
                match names(value.get_ref()) {
                    Some(names) => *slot = names,
                    None => refuse(
                        value.span(),
                        format!("`{where_}.{key_name}` is not a list of at most {MAX_NAMES} names"),
                        match key_name {
                            "summary" => "list the variables a row shows, such as [\"order_id\", \"amount\"]".into(),
                            _ => "list the states whose decision needs a comment, such as [\"decline\"]".into(),
                        },
                    ),
                }
            }
            settings.inbox.workflows.insert(slug_text.to_string(), workflow);
        }
    }
}

/// A list of at most [`MAX_NAMES`] names (lowercase letters, digits, `_` and `-`,
/// starting with a letter), without repeats.
fn names(value: &DeValue<'_>) -> Option<Vec<String>> {
    let DeValue::Array(items) = value else { return None };
    if items.len() > MAX_NAMES {
        return None;
    }
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for item in items.iter() {
        let DeValue::String(name) = item.get_ref() else { return None };
        let well_formed = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if !well_formed || names.iter().any(|known| known == name.as_ref()) {
            return None;
        }
        names.push(name.to_string());
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> (InboxSettings, Vec<String>) {
        let mut settings = RunnerSettings::default();
        let mut diagnostics = Vec::new();
        read(FileId(0), text, &mut settings, &mut diagnostics);
        (settings.inbox, diagnostics.iter().map(|diagnostic| diagnostic.message.clone()).collect())
    }

    #[test]
    fn a_workflow_names_its_summary_and_the_decisions_that_need_a_comment() {
        let (inbox, problems) = read_text(
            "[inbox.workflows.refund-desk]\nsummary = [\"order_id\", \"refund_amount\"]\ncomment_required = [\"escalate\"]\n",
        );
        assert_eq!(problems, Vec::<String>::new());
        let desk = inbox.for_workflow("refund-desk");
        assert_eq!(desk.summary, ["order_id", "refund_amount"]);
        assert_eq!(desk.comment_required, ["escalate"]);
        assert_eq!(inbox.for_workflow("other"), InboxWorkflow::default());
    }

    #[test]
    fn every_bad_value_is_named_with_what_to_write() {
        let cases = [
            ("[inbox]\ncolour = 1\n", "`inbox.colour` is not a setting"),
            ("[inbox.workflows.desk]\nsumary = []\n", "`inbox.workflows.desk.sumary` is not a setting"),
            ("[inbox.workflows.desk]\nsummary = \"order_id\"\n", "`inbox.workflows.desk.summary` is not a list"),
            ("[inbox.workflows.desk]\nsummary = [\"Order\"]\n", "is not a list of at most 8 names"),
            ("[inbox.workflows.desk]\nsummary = [\"a\", \"a\"]\n", "is not a list of at most 8 names"),
            ("[inbox.workflows.Desk]\nsummary = []\n", "is not a workflow slug"),
            ("inbox = 3\n", "`inbox` in archmax.toml is not a table"),
        ];
        for (text, says) in cases {
            let (_, problems) = read_text(text);
            assert!(problems.iter().any(|problem| problem.contains(says)), "{text}: {problems:?}");
        }
        let (_, problems) = read_text("[inbox.workflows.desk]\nsumary = []\n");
        assert_eq!(problems.len(), 1);
    }
}
