//! States, transitions and budgets, and what each state type requires and refuses.
//!
//! | type   | requires                     | refuses                                          |
//! |--------|------------------------------|--------------------------------------------------|
//! | agent  | —                            | `script` (`evidence`, `approvers` are ignored)  |
//! | human  | `instructions`, a transition | `script`, `budget`, `locks`                      |
//! | grader | `instructions`, a transition | `script`, `evidence`, `approvers`, `maxParks`    |
//! | code   | `script`                     | `instructions`, `model`, `budget`, `evidence`, `approvers` |

use std::collections::HashMap;

use crate::diagnostic::values::{STATE_TYPE_SYNONYMS, meant};
use crate::diagnostic::{Code, Diagnostic, SpecPath};
use crate::source::{Span, Spanned};
use crate::syntax::is_slug;
use crate::syntax::reference::is_variable_name;
use crate::syntax::yaml::Node;

use super::ast::{Budget, State, StateGrants, StateKind, StateTools, Transition, TransitionType};
use super::governance::{mount_entries, name_list, skill_entries, tool_entries};
use super::reader::{Fields, Reader};
use super::root::read_model;
use super::trigger::parse_triggers;

const HOOK_HELP: &str = "hooks are gone: put a code state (`type: code`) in front of this state for a check before it, or behind it for a check after it, and a grader state (`type: grader`) behind it to judge the work";

pub(crate) const STATE: Fields = Fields {
    known: &[
        "type",
        "title",
        "summary",
        "instructions",
        "script",
        "triggers",
        "tools",
        "skills",
        "mounts",
        "requires",
        "locks",
        "model",
        "budget",
        "on_error",
        "transitions",
        "evidence",
        "approvers",
        "metadata",
    ],
    removed: &[
        ("before", HOOK_HELP),
        ("after", HOOK_HELP),
        (
            "rubric",
            "judge the work with a grader state (`type: grader`) behind this state; the criteria become its `instructions`",
        ),
        (
            "max_iterations",
            "delete it: count send-backs on the trail (in the grader's instructions or the script) and raise when there are too many",
        ),
        (
            "max_corrections",
            "delete it: count send-backs on the trail (in the grader's instructions or the script) and raise when there are too many",
        ),
        ("workflow", "call the workflow as a tool: add `archmax_workflow_<slug>` to this state's `tools.allow`"),
        (
            "params",
            "pass arguments in the `archmax_workflow_<slug>` call itself; add `requires` for what the state must record",
        ),
        (
            "for_each",
            "fan out with one `archmax_workflow_<slug>` call per item: parallel tool calls, or `Promise.all` in a script",
        ),
        (
            "result",
            "nothing captures a call's result: add `requires: [<name>]` so the agent must record it with archmax_set_variables",
        ),
        (
            "parallel",
            "a session is in one state at a time: sequence these states with ordinary transitions, and run concurrent work as sub-workflow calls",
        ),
        (
            "join",
            "a session is in one state at a time: sequence these states with ordinary transitions, and run concurrent work as sub-workflow calls",
        ),
        ("trigger", "declare entries as `triggers: { <id>: … }`"),
        ("editor", "keep an editor's data under `metadata`"),
    ],
    what: "a state",
};

pub(crate) const STATE_TOOLS: Fields =
    Fields { known: &["allow", "forbid"], removed: &[], what: "a state's `tools` block" };

pub(crate) const STATE_GRANTS: Fields =
    Fields { known: &["allow", "forbid"], removed: &[], what: "a state's grant block" };

pub(crate) const BUDGET: Fields = Fields {
    known: &["timeoutMs", "maxParks"],
    removed: &[(
        "maxTurns",
        "delete it: a turn is bounded by the runtime's recursion limit (400 steps); bound time with `budget.timeoutMs`",
    )],
    what: "`budget`",
};

pub(crate) const TRANSITION: Fields = Fields {
    known: &["to", "description", "type"],
    removed: &[(
        "on",
        "delete it: a delivered trigger resumes the parked state, which then picks its own transition; park with `archmax_wait`",
    )],
    what: "a transition",
};

pub(super) fn parse_states(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<State> {
    let Some(entries) = reader.mapping(node, path, true) else {
        return Vec::new();
    };
    let mut states = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some(slug) = entry.key.scalar_text() else {
            reader.wrong_type(&entry.key, path, "a state slug");
            continue;
        };
        let state_path = path.key(slug);
        if !is_slug(slug) {
            let message = if slug.is_empty() {
                "a state is declared under an empty key, so nothing can name it".to_string()
            } else {
                format!("the state key `{slug}` is not a kebab-case slug")
            };
            let suggestion = kebab(slug);
            reader.report(
                Diagnostic::at(Code::StateSlug, entry.key.span, message)
                    .with_label("not a slug")
                    .with_help(if suggestion.is_empty() {
                        "name states with lowercase letters and digits in hyphen-separated words, like `review-refund`".to_string()
                    } else {
                        format!(
                            "slugs are lowercase letters and digits in hyphen-separated words: write `{suggestion}`, and update every `to` and `on_error` that names it"
                        )
                    }),
                &state_path,
            );
        }
        if let Some(state) = parse_state(reader, slug, entry.key.span, &entry.value, &state_path) {
            states.push(state);
        }
    }
    states
}

/// A best-effort kebab-case spelling of a key, for help texts.
fn kebab(text: &str) -> String {
    let mut out = String::new();
    let mut previous_lower = false;
    for character in text.chars() {
        if character.is_ascii_uppercase() && previous_lower {
            out.push('-');
        }
        if character.is_ascii_alphanumeric() {
            out.push(character.to_ascii_lowercase());
            previous_lower = character.is_ascii_lowercase() || character.is_ascii_digit();
        } else {
            out.push('-');
            previous_lower = false;
        }
    }
    out.split('-').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("-")
}

/// The values a state's `type` takes.
const STATE_TYPES: [&str; 4] = ["agent", "human", "grader", "code"];

fn parse_state(reader: &mut Reader<'_>, slug: &str, key_span: Span, node: &Node, path: &SpecPath<'_>) -> Option<State> {
    let fields = reader.fields(node, path, &STATE, true)?;
    let mut kind = StateKind::Agent;
    let mut kind_span = None;
    if let Some(field) = fields.iter().find(|field| field.key == "type") {
        let type_path = path.key("type");
        kind_span = Some(field.value.span);
        match field.value.scalar_text() {
            Some("agent") => kind = StateKind::Agent,
            Some("human") => kind = StateKind::Human,
            Some("grader") => kind = StateKind::Grader,
            Some("code") => kind = StateKind::Code,
            Some(removed @ ("wait" | "trigger" | "workflow")) => {
                let help = match removed {
                    "wait" => "make this an agent state that calls `archmax_wait` once it has asked for what it needs",
                    "trigger" => "declare the trigger under `triggers:` on the state it entered",
                    _ => {
                        "make this an agent state that allows `archmax_workflow_<slug>` in `tools.allow`, with `requires` for what it records"
                    }
                };
                reader.report(
                    Diagnostic::at(
                        Code::RemovedKey,
                        field.value.span,
                        format!("the state type `{removed}` was removed"),
                    )
                    .with_label("removed in contract 3")
                    .with_help(help),
                    &type_path,
                );
            }
            Some(other) if field.value.as_str().is_some() => {
                reader.report(
                    Diagnostic::at(Code::UnknownStateType, field.value.span, format!("unknown state type `{other}`"))
                        .with_label("not a state type")
                        .with_help(match meant(other, &STATE_TYPES, STATE_TYPE_SYNONYMS) {
                            Some(close) => format!("did you mean `{close}`?"),
                            None => {
                                "a state's `type` is `agent` (the default), `human`, `grader` or `code`".to_string()
                            }
                        }),
                    &type_path,
                );
            }
            _ => reader.wrong_type(field.value, &type_path, "a state type name"),
        }
    }
    let mut state = State {
        slug: Spanned::new(slug.to_string(), key_span),
        kind,
        kind_span,
        title: None,
        summary: None,
        instructions: None,
        script: None,
        triggers: Vec::new(),
        tools: StateTools::default(),
        skills: StateGrants::default(),
        mounts: StateGrants::default(),
        requires: Vec::new(),
        locks: Vec::new(),
        model: None,
        budget: Budget::default(),
        on_error: None,
        transitions: Vec::new(),
        evidence: Vec::new(),
        approvers: Vec::new(),
        metadata: None,
        misspelt: Reader::meant_keys(node, &STATE),
    };
    let mut present: HashMap<&str, Span> = HashMap::new();
    for field in &fields {
        present.insert(field.key, field.key_span);
        let key_path = path.key(field.key);
        match field.key {
            "title" => state.title = reader.nonempty_string(field.value, &key_path),
            "summary" => state.summary = reader.string(field.value, &key_path),
            "instructions" => state.instructions = reader.nonempty_string(field.value, &key_path),
            "script" => state.script = reader.nonempty_string(field.value, &key_path),
            "triggers" => state.triggers = parse_triggers(reader, field.value, &key_path),
            "tools" => state.tools = parse_state_tools(reader, field.value, &key_path),
            "skills" => {
                if let Some(fields) = reader.fields(field.value, &key_path, &STATE_GRANTS, true) {
                    for grant in fields {
                        let grant_path = key_path.key(grant.key);
                        match grant.key {
                            "allow" => {
                                state.skills.allow = Some(Spanned::new(
                                    skill_entries(reader, Some(grant.value), &grant_path),
                                    grant.value.span,
                                ))
                            }
                            "forbid" => state.skills.forbid = skill_entries(reader, Some(grant.value), &grant_path),
                            _ => {}
                        }
                    }
                }
            }
            "mounts" => {
                if let Some(fields) = reader.fields(field.value, &key_path, &STATE_GRANTS, true) {
                    for grant in fields {
                        let grant_path = key_path.key(grant.key);
                        match grant.key {
                            "allow" => {
                                state.mounts.allow = Some(Spanned::new(
                                    mount_entries(reader, grant.value, &grant_path),
                                    grant.value.span,
                                ))
                            }
                            "forbid" => state.mounts.forbid = name_list(reader, grant.value, &grant_path, true),
                            _ => {}
                        }
                    }
                }
            }
            "requires" => state.requires = variable_names(reader, field.value, &key_path),
            "locks" => state.locks = variable_names(reader, field.value, &key_path),
            "model" => state.model = read_model(reader, field.value, &key_path),
            "budget" => state.budget = parse_budget(reader, field.value, &key_path),
            "on_error" => state.on_error = reader.nonempty_string(field.value, &key_path),
            "transitions" => state.transitions = parse_transitions(reader, field.value, &key_path),
            "evidence" => state.evidence = reader.string_list(field.value, &key_path),
            "approvers" => state.approvers = reader.string_list(field.value, &key_path),
            "metadata" => state.metadata = Some(field.value.clone()),
            _ => {}
        }
    }
    check_type_rules(reader, &state, &present, path);
    Some(state)
}

fn parse_state_tools(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> StateTools {
    let mut tools = StateTools::default();
    let Some(fields) = reader.fields(node, path, &STATE_TOOLS, true) else {
        return tools;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "allow" => tools.allow = tool_entries(reader, field.value, &key_path, false),
            "forbid" => tools.forbid = tool_entries(reader, field.value, &key_path, true),
            _ => {}
        }
    }
    tools
}

/// A list of variable names (`requires`, `locks`).
fn variable_names(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Spanned<String>> {
    let names = reader.string_list(node, path);
    let mut valid: Vec<Spanned<String>> = Vec::with_capacity(names.len());
    for (index, name) in names.into_iter().enumerate() {
        let item_path = path.index(index);
        if !is_variable_name(&name.value) {
            reader.report(variable_name_diagnostic(&name), &item_path);
            continue;
        }
        if let Some(first) = valid.iter().find(|seen| seen.value == name.value) {
            reader.report(
                Diagnostic::at(Code::DuplicateName, name.span, format!("`{}` is listed twice", name.value))
                    .with_label("again here")
                    .with_secondary(first.span, "first listed here")
                    .with_help("remove the repeated name"),
                &item_path,
            );
            continue;
        }
        valid.push(name);
    }
    valid
}

/// The diagnostic for a name that is not `^[a-z][a-z0-9_]*$`.
pub(crate) fn variable_name_diagnostic(name: &Spanned<String>) -> Diagnostic {
    let help = if name.value.contains('.') {
        "a variable name has no dots: there is no sub-path write; name the whole variable".to_string()
    } else {
        let suggestion: String = name
            .value
            .chars()
            .map(|character| if character.is_ascii_alphanumeric() { character.to_ascii_lowercase() } else { '_' })
            .collect();
        format!(
            "variable names are lowercase letters, digits and `_`, starting with a letter, such as `{}`",
            suggestion.trim_start_matches(|character: char| !character.is_ascii_lowercase())
        )
    };
    Diagnostic::at(Code::VariableName, name.span, format!("`{}` is not a valid variable name", name.value))
        .with_label("not a variable name")
        .with_help(help)
}

fn parse_budget(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Budget {
    let mut budget = Budget { span: Some(node.span), ..Budget::default() };
    let Some(fields) = reader.fields(node, path, &BUDGET, true) else {
        return budget;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "timeoutMs" => budget.timeout_ms = reader.integer_at_least(field.value, &key_path, 1),
            "maxParks" => budget.max_parks = reader.integer_at_least(field.value, &key_path, 1),
            _ => {}
        }
    }
    budget
}

fn parse_transitions(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Transition> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of transitions");
        return Vec::new();
    };
    let mut transitions = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let item_path = path.index(index);
        let Some(fields) = reader.fields(item, &item_path, &TRANSITION, false) else {
            continue;
        };
        let mut to = None;
        let mut description = None;
        let mut kind = TransitionType::None;
        let mut kind_span = None;
        for field in fields {
            let key_path = item_path.key(field.key);
            match field.key {
                "to" => to = reader.nonempty_string(field.value, &key_path),
                "description" => {
                    description = match field.value.is_null() {
                        true => None,
                        false => reader.string(field.value, &key_path).filter(|text| !text.value.trim().is_empty()),
                    };
                }
                "type" => {
                    kind_span = Some(field.value.span);
                    kind = match field.value.scalar_text() {
                        Some("none") => TransitionType::None,
                        Some("approve") => TransitionType::Approve,
                        Some("reject") => TransitionType::Reject,
                        Some("refine") => TransitionType::Refine,
                        other => {
                            reader.invalid_value(
                                field.value,
                                &key_path,
                                format!("`{}` is not a transition type", other.unwrap_or("this value")),
                                "a transition's `type` is `approve`, `reject`, `refine` or `none`".to_string(),
                            );
                            TransitionType::None
                        }
                    };
                }
                _ => {}
            }
        }
        match to {
            Some(to) => transitions.push(Transition { to, description, kind, kind_span, span: item.span }),
            None if item.get("to").is_none() => reader.report(
                Diagnostic::at(Code::MissingKey, item.span, "a transition needs a `to` naming its target state")
                    .with_label("no `to`")
                    .with_help("write `- to: <state-slug>` with a `description` saying when to take it"),
                &item_path,
            ),
            None => {}
        }
    }
    transitions
}

/// The rules that depend on the state's type, in the order their diagnostics are reported.
fn check_type_rules(reader: &mut Reader<'_>, state: &State, present: &HashMap<&str, Span>, path: &SpecPath<'_>) {
    check_refused_keys(reader, state, present, path);
    check_inert_keys(reader, state, present, path);
    check_required_keys(reader, state, present, path);
    check_human_transitions(reader, state, path);
    check_reserved_locks(reader, state, path);
}

/// Keys the state's type refuses, in document order, and a grader's `budget.maxParks`.
fn check_refused_keys(reader: &mut Reader<'_>, state: &State, present: &HashMap<&str, Span>, path: &SpecPath<'_>) {
    let kind = state.kind;
    let refused: &[&str] = match kind {
        StateKind::Agent => &["script"],
        StateKind::Human => &["script", "budget", "locks"],
        StateKind::Grader => &["script", "evidence", "approvers"],
        StateKind::Code => &["instructions", "model", "budget", "evidence", "approvers"],
    };
    let mut refused_keys: Vec<(&str, Span)> =
        refused.iter().filter_map(|key| present.get(key).map(|span| (*key, *span))).collect();
    refused_keys.sort_by_key(|(_, span)| span.start);
    for (key, span) in refused_keys {
        let help = refused_help(kind, key);
        reader.report(
            Diagnostic::at(Code::KeyRefusedOnType, span, format!("a {} state does not take `{key}`", kind.as_str()))
                .with_label(format!("refused on a {} state", kind.as_str()))
                .with_help(help),
            &path.key(key),
        );
    }
    if kind == StateKind::Grader
        && let Some(max_parks) = &state.budget.max_parks
    {
        reader.report(
            Diagnostic::at(
                Code::KeyRefusedOnType,
                max_parks.span,
                "a grader state cannot park, so it takes no `budget.maxParks`",
            )
            .with_label("refused on a grader state")
            .with_help("remove `maxParks`; bound the grader's run with `budget.timeoutMs`"),
            &path.key("budget").key("maxParks"),
        );
    }
}

/// Keys the state's type accepts but never reads.
fn check_inert_keys(reader: &mut Reader<'_>, state: &State, present: &HashMap<&str, Span>, path: &SpecPath<'_>) {
    let kind = state.kind;
    if kind == StateKind::Agent {
        for key in ["evidence", "approvers"] {
            if let Some(span) = present.get(key) {
                reader.report(
                    Diagnostic::at(
                        Code::KeyInertOnType,
                        *span,
                        format!("`{key}` is read only on human states; this agent state ignores it"),
                    )
                    .with_label("ignored here")
                    .with_help(format!(
                        "remove `{key}`, or set `type: human` if a person decides this state's transition"
                    )),
                    &path.key(key),
                );
            }
        }
    }
    // A person's decision sets no variable, and the runtime does not hold a decision to
    // the human state's `requires`: the list would promise what nothing checks.
    if kind == StateKind::Human
        && let Some(span) = present.get("requires")
    {
        reader.report(
            Diagnostic::at(
                Code::KeyInertOnType,
                *span,
                "`requires` is not checked when a person's decision moves the session out of a human state",
            )
            .with_label("ignored here")
            .with_help(
                "put `requires` on the agent state that advances into this one, so the agent must set the variables before a person is asked",
            ),
            &path.key("requires"),
        );
    }
}

/// What the state's type needs: its `instructions` or `script`, and a human's or grader's
/// transitions.
fn check_required_keys(reader: &mut Reader<'_>, state: &State, present: &HashMap<&str, Span>, path: &SpecPath<'_>) {
    let kind = state.kind;
    let required: Option<(&str, bool, &str)> = match kind {
        StateKind::Human => Some((
            "instructions",
            state.instructions.is_some(),
            "a human state shows its `instructions` to the person deciding: say what they must decide",
        )),
        StateKind::Grader => Some((
            "instructions",
            state.instructions.is_some(),
            "a grader's `instructions` are its criteria: say what passes, what goes back, and when to raise",
        )),
        StateKind::Code => Some((
            "script",
            state.script.is_some(),
            "give the code state `script: scripts/<file>.js`, the script that decides its transition",
        )),
        StateKind::Agent => None,
    };
    if let Some((key, has, help)) = required
        && !has
        && !present.contains_key(key)
        && !state.misspelt.contains(&key)
    {
        reader.report(
            Diagnostic::at(
                Code::TypeRequiresKey,
                state.slug.span,
                format!("the {} state `{}` has no `{key}`", kind.as_str(), state.slug.value),
            )
            .with_label(format!("needs `{key}`"))
            .with_help(help),
            &path.key(key),
        );
    }
    if matches!(kind, StateKind::Human | StateKind::Grader)
        && state.transitions.is_empty()
        && !present.contains_key("transitions")
        && !state.misspelt.contains(&"transitions")
    {
        reader.report(
            Diagnostic::at(
                Code::NeedsTransition,
                state.slug.span,
                format!("the {} state `{}` has no transitions", kind.as_str(), state.slug.value),
            )
            .with_label("needs a transition")
            .with_help(if kind == StateKind::Human {
                "a person picks one of the state's transitions: add at least one, each with a `description`"
            } else {
                "a grader decides by advancing along one of its transitions: add one onward and one back"
            }),
            &path.key("transitions"),
        );
    } else if matches!(kind, StateKind::Human | StateKind::Grader)
        && state.transitions.is_empty()
        && let Some(span) = present.get("transitions")
    {
        reader.report(
            Diagnostic::at(
                Code::NeedsTransition,
                *span,
                format!("the {} state `{}` has an empty transition list", kind.as_str(), state.slug.value),
            )
            .with_label("needs a transition")
            .with_help("add at least one transition, each with a `description`"),
            &path.key("transitions"),
        );
    }
}

/// A human state's transitions: none back to itself, no labelled type twice.
fn check_human_transitions(reader: &mut Reader<'_>, state: &State, path: &SpecPath<'_>) {
    if state.kind == StateKind::Human {
        let mut seen: Vec<(TransitionType, Span)> = Vec::new();
        for (index, transition) in state.transitions.iter().enumerate() {
            if transition.to.value == state.slug.value {
                reader.report(
                    Diagnostic::at(
                        Code::HumanSelfTransition,
                        transition.to.span,
                        format!("the human state `{}` has a transition to itself", state.slug.value),
                    )
                    .with_label("leads back here")
                    .with_help("a decision must move the session; send it back to the state that did the work (a `refine` edge), not to the review itself"),
                    &path.key("transitions").index(index).key("to"),
                );
            }
            if transition.kind == TransitionType::None {
                continue;
            }
            if let Some((_, first)) = seen.iter().find(|(kind, _)| *kind == transition.kind) {
                reader.report(
                    Diagnostic::at(
                        Code::HumanDuplicateType,
                        transition.kind_span.unwrap_or(transition.span),
                        format!(
                            "the human state `{}` has two `{}` transitions",
                            state.slug.value,
                            transition.kind.as_str()
                        ),
                    )
                    .with_label("second of this type")
                    .with_secondary(*first, "first one")
                    .with_help("each labelled type maps to one target: keep one, or label the other `none`"),
                    &path.key("transitions").index(index).key("type"),
                );
            } else {
                seen.push((transition.kind, transition.kind_span.unwrap_or(transition.span)));
            }
        }
    }
}

/// `trigger` and `title` are never locked by a state (a human state refuses `locks` as a whole).
fn check_reserved_locks(reader: &mut Reader<'_>, state: &State, path: &SpecPath<'_>) {
    if state.kind != StateKind::Human {
        for key in ["trigger", "title"] {
            if let Some(lock) = state.locks.iter().find(|lock| lock.value == key) {
                reader.report(
                    Diagnostic::at(Code::LockReserved, lock.span, format!("`{key}` cannot be locked by a state"))
                        .with_label("reserved variable")
                        .with_help(if key == "trigger" {
                            "`trigger` is set by the runtime and always locked; remove it from `locks`"
                        } else {
                            "`title` is the session's label and is never locked; remove it from `locks`"
                        }),
                    &path.key("locks"),
                );
            }
        }
    }
}

fn refused_help(kind: StateKind, key: &str) -> String {
    match (kind, key) {
        (StateKind::Code, "instructions") => {
            "a code state runs its script and no model reads it: put the logic in the script, or make this an agent state".to_string()
        }
        (StateKind::Code, "model") => "a code state makes no model call: remove `model`".to_string(),
        (StateKind::Code, "budget") => {
            "a code state's script is bounded by `settings.timeoutMs`: remove `budget`".to_string()
        }
        (StateKind::Code | StateKind::Grader, "evidence" | "approvers") => {
            format!("`{key}` belongs to human states: remove it, or make this a human state")
        }
        (StateKind::Human, "budget") => {
            "a human state waits for a person and makes no model run of its own: remove `budget`".to_string()
        }
        (StateKind::Human, "locks") => {
            "a person's decision sets no variables: lock them in the agent state that writes them".to_string()
        }
        (_, "script") => "only a code state (`type: code`) runs a script: add `type: code`, or remove `script`".to_string(),
        _ => format!("remove `{key}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert!(is_slug("review-refund"));
        assert!(is_slug("a1-b2"));
        assert!(!is_slug("Review"));
        assert!(!is_slug("a--b"));
        assert!(!is_slug("-a"));
        assert!(!is_slug("a_b"));
        assert!(!is_slug(""));
        assert_eq!(kebab("Review_Step"), "review-step");
        assert_eq!(kebab("reviewStep"), "review-step");
    }
}
