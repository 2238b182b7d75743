//! The steps of a case: actions (`send`, `decide`, `deliver`) and assertions, each a
//! single-key mapping, read one kind per function.
//!
//! The one thing to know: an assertion is bound to the nearest action above it, so an
//! assertion before any action is a finding of its own (`AMX0903`); every other
//! malformed step is `AMX0900`.

use crate::diagnostic::{Code, Diagnostic, SpecPath, list_names};
use crate::syntax::reference::parse_var_path;
use crate::syntax::yaml::{Node, NodeKind};

use super::super::reader::{Fields, Reader};
use super::{
    ParkChannel, Step, StepKind, SubWorkflowStatus, ToolMatch, TrailKind, matcher, regex_text, tokens, variables,
};

const ACTIONS: [&str; 3] = ["send", "decide", "deliver"];

pub(crate) const STEP_KEYS: Fields = Fields {
    known: &[
        "send",
        "decide",
        "deliver",
        "succeeded",
        "parked",
        "raised",
        "reachedState",
        "noTraversal",
        "triggerArrival",
        "trail",
        "variables",
        "reply",
        "calledTool",
        "notCalledTool",
        "blockedTool",
        "usedNoTools",
        "ranWorkflow",
        "grade",
    ],
    removed: &[
        ("judge", "write the judged assertion as `grade: { closedQA: <criterion>, atLeast: <0..1> }`"),
        ("expect", "assertions are steps themselves: list each one as its own step"),
    ],
    what: "a step",
};

/// The `steps` list.
pub(super) fn steps(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Vec<Step> {
    if node.is_null() {
        return Vec::new();
    }
    let Some(items) = node.as_sequence() else {
        reader.wrong_type(node, path, "a list of steps");
        return Vec::new();
    };
    let mut steps = Vec::with_capacity(items.len());
    let mut seen_action = false;
    for (index, item) in items.iter().enumerate() {
        let step_path = path.index(index);
        let Some(entries) = item.as_mapping() else {
            reader.report(
                Diagnostic::at(
                    Code::CaseSchema,
                    item.span,
                    format!("a step is a single-key mapping, not {}", item.type_name()),
                )
                .with_label("not a step")
                .with_help(format!(
                    "write an action ({}) or an assertion, such as `- succeeded: true`",
                    list_names(&ACTIONS)
                )),
                &step_path,
            );
            continue;
        };
        if entries.len() != 1 {
            reader.report(
                Diagnostic::at(
                    Code::CaseSchema,
                    item.span,
                    format!("a step holds exactly one action or assertion, but this one has {}", entries.len()),
                )
                .with_label("one key per step")
                .with_help("split it into one step per key, each on its own `- ` line"),
                &step_path,
            );
            continue;
        }
        let Some(fields) = reader.fields(item, &step_path, &STEP_KEYS, false) else {
            continue;
        };
        let Some(field) = fields.into_iter().next() else {
            continue;
        };
        let key_path = step_path.key(field.key);
        let is_action = ACTIONS.contains(&field.key);
        if !is_action && !seen_action {
            reader.report(
                Diagnostic::at(
                    Code::AssertionBeforeAction,
                    field.key_span,
                    format!("`{}` asserts before any action has run", field.key),
                )
                .with_label("nothing to assert against yet")
                .with_help(
                    "an assertion checks the nearest action above it: put a `send`, `decide` or `deliver` first",
                ),
                &key_path,
            );
        }
        seen_action |= is_action;
        if let Some(kind) = step_kind(reader, field.key, field.value, &key_path) {
            steps.push(Step { index, span: item.span, kind });
        }
    }
    steps
}

fn require_true(reader: &mut Reader<'_>, key: &str, node: &Node, path: &SpecPath<'_>) -> bool {
    if node.as_bool() == Some(true) {
        return true;
    }
    reader.report(
        Diagnostic::at(Code::CaseSchema, node.span, format!("`{key}` takes only `true`"))
            .with_label("expected `true`")
            .with_help(format!("write `- {key}: true`; there is no negative form, so assert what did happen instead")),
        path,
    );
    false
}

fn step_fields<'n>(
    reader: &mut Reader<'_>,
    node: &'n Node,
    path: &SpecPath<'_>,
    known: &'static [&'static str],
    what: &'static str,
) -> Option<Vec<(&'n str, &'n Node)>> {
    let fields = Fields { known, removed: &[], what };
    reader
        .fields(node, path, &fields, false)
        .map(|fields| fields.into_iter().map(|field| (field.key, field.value)).collect())
}

/// `value`, or a finding that the step needs `key` (unless the key is there and its value
/// was already reported).
fn required<T>(
    reader: &mut Reader<'_>,
    node: &Node,
    path: &SpecPath<'_>,
    value: Option<T>,
    key: &str,
    example: &str,
) -> Option<T> {
    if value.is_none() && node.get(key).is_none() {
        missing(reader, node, path, key, example);
    }
    value
}

fn missing(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>, key: &str, example: &str) {
    reader.report(
        Diagnostic::at(Code::CaseSchema, node.span, format!("this step needs `{key}`"))
            .with_label(format!("no `{key}`"))
            .with_help(format!("write {example}")),
        path,
    );
}

fn tool_match(reader: &mut Reader<'_>, key: &str, node: &Node, path: &SpecPath<'_>) -> Option<ToolMatch> {
    let fields = step_fields(reader, node, path, &["name", "input"], "a tool assertion")?;
    let mut name = None;
    let mut input = None;
    for (field, value) in fields {
        match field {
            "name" => name = reader.nonempty_string(value, &path.key("name")),
            "input" => {
                let is_mapping = reader.mapping(value, &path.key("input"), false).is_some();
                input = if is_mapping { Some(matcher(reader, value, &path.key("input"))?) } else { None };
            }
            _ => {}
        }
    }
    let name = required(reader, node, path, name, "name", &format!("`{key}: {{ name: <tool>, input: {{ … }} }}`"))?;
    Some(ToolMatch { name, input })
}

/// One step's kind from its key and value; `None` (with a finding) when malformed.
fn step_kind(reader: &mut Reader<'_>, key: &str, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    match key {
        "send" => reader.nonempty_string(node, path).map(|text| StepKind::Send(text.value)),
        "decide" => decide(reader, node, path),
        "deliver" => deliver(reader, node, path),
        "succeeded" => require_true(reader, key, node, path).then_some(StepKind::Succeeded),
        "noTraversal" => require_true(reader, key, node, path).then_some(StepKind::NoTraversal),
        "usedNoTools" => require_true(reader, key, node, path).then_some(StepKind::UsedNoTools),
        "parked" => parked(reader, node, path),
        "raised" => raised(reader, node, path),
        "reachedState" => reader.nonempty_string(node, path).map(StepKind::ReachedState),
        "triggerArrival" => reader.nonempty_string(node, path).map(|id| StepKind::TriggerArrival(id.value)),
        "trail" => trail(reader, node, path),
        "variables" => variables_step(reader, node, path),
        "reply" => reply(reader, node, path),
        "calledTool" => tool_match(reader, key, node, path).map(StepKind::CalledTool),
        "notCalledTool" => tool_match(reader, key, node, path).map(StepKind::NotCalledTool),
        "blockedTool" => tool_match(reader, key, node, path).map(StepKind::BlockedTool),
        "ranWorkflow" => ran_workflow(reader, node, path),
        "grade" => grade(reader, node, path),
        _ => None,
    }
}

/// `decide: { to, comment? }`: a person's decision on a parked session.
fn decide(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["to", "comment"], "`decide`")?;
    let mut to = None;
    let mut comment = None;
    for (field, value) in fields {
        match field {
            "to" => to = reader.nonempty_string(value, &path.key("to")),
            "comment" => comment = reader.string(value, &path.key("comment")).map(|text| text.value),
            _ => {}
        }
    }
    let to = required(reader, node, path, to, "to", "`decide: { to: <state>, comment: … }`")?;
    Some(StepKind::Decide { to, comment })
}

/// `deliver: { trigger, variables? }`: a trigger delivered to a parked session.
fn deliver(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["trigger", "variables"], "`deliver`")?;
    let mut trigger = None;
    let mut delivered = Vec::new();
    for (field, value) in fields {
        match field {
            "trigger" => trigger = reader.nonempty_string(value, &path.key("trigger")),
            "variables" => delivered = variables(reader, value, &path.key("variables")),
            _ => {}
        }
    }
    let trigger = required(reader, node, path, trigger, "trigger", "`deliver: { trigger: <id>, variables: { … } }`")?;
    Some(StepKind::Deliver { trigger: trigger.value, variables: delivered })
}

/// `parked: true | decision | input | { channel?, state? }`.
fn parked(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    match &node.kind {
        NodeKind::Mapping(_) => {
            let fields = step_fields(reader, node, path, &["channel", "state"], "`parked`")?;
            let mut channel = None;
            let mut state = None;
            for (field, value) in fields {
                match field {
                    "channel" => channel = Some(park_channel(reader, value, &path.key("channel"))?),
                    "state" => state = reader.nonempty_string(value, &path.key("state")),
                    _ => {}
                }
            }
            Some(StepKind::Parked { channel, state })
        }
        _ if node.as_bool() == Some(true) => Some(StepKind::Parked { channel: None, state: None }),
        _ => park_channel(reader, node, path).map(|channel| StepKind::Parked { channel: Some(channel), state: None }),
    }
}

/// `raised: true | <code> | { code?, reason? }`.
fn raised(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    match &node.kind {
        NodeKind::Mapping(_) => {
            let fields = step_fields(reader, node, path, &["code", "reason"], "`raised`")?;
            let mut code = None;
            let mut reason = None;
            for (field, value) in fields {
                match field {
                    "code" => code = reader.nonempty_string(value, &path.key("code")).map(|code| code.value),
                    "reason" => {
                        let text = reader.nonempty_string(value, &path.key("reason"))?;
                        reason = Some(regex_text(reader, &text.value, value, &path.key("reason"))?);
                    }
                    _ => {}
                }
            }
            Some(StepKind::Raised { code, reason })
        }
        _ if node.as_bool() == Some(true) => Some(StepKind::Raised { code: None, reason: None }),
        _ => match node.as_str() {
            Some(code) if !code.trim().is_empty() => {
                Some(StepKind::Raised { code: Some(code.to_string()), reason: None })
            }
            _ => {
                reader.report(
                    Diagnostic::at(Code::CaseSchema, node.span, "`raised` takes `true`, a code, or `{ code, reason }`")
                        .with_label("not a raise expectation"),
                    path,
                );
                None
            }
        },
    }
}

/// `trail: { to?, kind?, reason?, count }`: how many trail steps match (at least one filter).
fn trail(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["to", "kind", "reason", "count"], "`trail`")?;
    let mut to = None;
    let mut kind = None;
    let mut reason = None;
    let mut count = None;
    for (field, value) in fields {
        let field_path = path.key(field);
        match field {
            "to" => to = reader.nonempty_string(value, &field_path),
            "kind" => match TrailKind::ALL.iter().find(|(name, _)| Some(*name) == value.scalar_text()) {
                Some((_, found)) => kind = Some(*found),
                None => {
                    let names: Vec<&str> = TrailKind::ALL.iter().map(|(name, _)| *name).collect();
                    reader.report(
                        Diagnostic::at(
                            Code::CaseSchema,
                            value.span,
                            format!("`{}` is not a trail kind", value.scalar_text().unwrap_or("this value")),
                        )
                        .with_label("unknown kind")
                        .with_help(format!("a trail step's kind is {}", list_names(&names))),
                        &field_path,
                    );
                    return None;
                }
            },
            "reason" => {
                let text = reader.nonempty_string(value, &field_path)?;
                reason = Some(regex_text(reader, &text.value, value, &field_path)?);
            }
            "count" => count = reader.integer_at_least(value, &field_path, 0).map(|count| count.value),
            _ => {}
        }
    }
    let count = required(reader, node, path, count, "count", "`trail: { to: <state>, count: 1 }`")?;
    if to.is_none() && kind.is_none() && reason.is_none() {
        reader.report(
            Diagnostic::at(Code::CaseSchema, node.span, "`trail` needs at least one of `to`, `kind` or `reason`")
                .with_label("matches nothing in particular")
                .with_help("say which steps to count, such as `trail: { to: review, count: 2 }`"),
            path,
        );
        return None;
    }
    Some(StepKind::Trail { to, kind, reason, count })
}

/// `variables: { expect, path?, locked? }`.
fn variables_step(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["expect", "path", "locked"], "`variables`")?;
    let mut expect = None;
    let mut paths = Vec::new();
    let mut locked = Vec::new();
    for (field, value) in fields {
        let field_path = path.key(field);
        match field {
            "expect" => {
                let entries = reader.mapping(value, &field_path, false)?;
                expect = Some(
                    entries
                        .iter()
                        .map(|entry| (entry.key.scalar_text().unwrap_or("").to_string(), entry.value.to_json()))
                        .collect::<Vec<_>>(),
                );
            }
            "path" => {
                for entry in reader.mapping(value, &field_path, false)? {
                    let name = entry.key.scalar_text().unwrap_or("").to_string();
                    let text = reader.nonempty_string(&entry.value, &field_path.key(&name))?;
                    let full = format!("{name}.{}", text.value);
                    match parse_var_path(&full) {
                        Ok(parsed) => paths.push((name, parsed)),
                        Err(error) => {
                            reader.report(
                                Diagnostic::at(
                                    Code::CaseSchema,
                                    entry.value.span,
                                    format!("`{}` is not a dotted path: {}", text.value, error.message),
                                )
                                .with_label("malformed path")
                                .with_help("write keys and indices separated by dots, such as `items.-1.sku`"),
                                &field_path.key(&name),
                            );
                            return None;
                        }
                    }
                }
            }
            "locked" => {
                for entry in reader.mapping(value, &field_path, false)? {
                    let name = entry.key.scalar_text().unwrap_or("").to_string();
                    let flag = reader.boolean(&entry.value, &field_path.key(&name))?;
                    locked.push((name, flag));
                }
            }
            _ => {}
        }
    }
    let expect = required(reader, node, path, expect, "expect", "`variables: { expect: { <name>: <value> } }`")?;
    Some(StepKind::Variables { expect, path: paths, locked })
}

/// `reply: { includes?, excludes? }` (at least one).
fn reply(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["includes", "excludes"], "`reply`")?;
    let mut includes = Vec::new();
    let mut excludes = Vec::new();
    for (field, value) in &fields {
        match *field {
            "includes" => includes = tokens(reader, value, &path.key("includes")),
            "excludes" => excludes = tokens(reader, value, &path.key("excludes")),
            _ => {}
        }
    }
    if fields.is_empty() {
        reader.report(
            Diagnostic::at(Code::CaseSchema, node.span, "`reply` needs `includes` or `excludes`")
                .with_help("write `reply: { includes: [\"ORD-1003\"] }`"),
            path,
        );
        return None;
    }
    Some(StepKind::Reply { includes, excludes })
}

/// `ranWorkflow: { workflow, status?, count? }`.
fn ran_workflow(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["workflow", "status", "count"], "`ranWorkflow`")?;
    let mut workflow = None;
    let mut status = SubWorkflowStatus::Ok;
    let mut count = None;
    for (field, value) in fields {
        let field_path = path.key(field);
        match field {
            "workflow" => workflow = reader.nonempty_string(value, &field_path),
            "status" => {
                status = match value.scalar_text() {
                    Some("ok") => SubWorkflowStatus::Ok,
                    Some("error") => SubWorkflowStatus::Error,
                    Some("parked") => SubWorkflowStatus::Parked,
                    other => {
                        reader.report(
                            Diagnostic::at(
                                Code::CaseSchema,
                                value.span,
                                format!("`{}` is not a sub-workflow status", other.unwrap_or("this value")),
                            )
                            .with_label("unknown status")
                            .with_help("a sub-workflow run's status is `ok`, `error` or `parked`"),
                            &field_path,
                        );
                        return None;
                    }
                }
            }
            "count" => count = Some(reader.integer_at_least(value, &field_path, 0)?.value),
            _ => {}
        }
    }
    let workflow = required(reader, node, path, workflow, "workflow", "`ranWorkflow: { workflow: <slug> }`")?;
    Some(StepKind::RanWorkflow { workflow, status, count })
}

/// `grade: { closedQA, atLeast }` with a bar between 0 and 1.
fn grade(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<StepKind> {
    let fields = step_fields(reader, node, path, &["closedQA", "atLeast"], "`grade`")?;
    let mut criterion = None;
    let mut at_least = None;
    for (field, value) in fields {
        let field_path = path.key(field);
        match field {
            "closedQA" => criterion = reader.nonempty_string(value, &field_path).map(|text| text.value),
            "atLeast" => match value.as_f64() {
                Some(bar) if (0.0..=1.0).contains(&bar) => at_least = Some(bar),
                Some(_) => {
                    reader.report(
                        Diagnostic::at(Code::CaseSchema, value.span, "`atLeast` must be between 0 and 1")
                            .with_label("out of range")
                            .with_help("scores run from 0 to 1; write a bar such as `0.7`"),
                        &field_path,
                    );
                    return None;
                }
                None => {
                    reader.wrong_type(value, &field_path, "a number between 0 and 1");
                    return None;
                }
            },
            _ => {}
        }
    }
    match (criterion, at_least) {
        (Some(criterion), Some(at_least)) => Some(StepKind::Grade { criterion, at_least }),
        (criterion, _) => {
            let key = if criterion.is_none() { "closedQA" } else { "atLeast" };
            if node.get(key).is_none() {
                missing(reader, node, path, key, "`grade: { closedQA: <criterion>, atLeast: 0.7 }`");
            }
            None
        }
    }
}

fn park_channel(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<ParkChannel> {
    match node.scalar_text() {
        Some("decision") => Some(ParkChannel::Decision),
        Some("input") => Some(ParkChannel::Input),
        other => {
            reader.report(
                Diagnostic::at(
                    Code::CaseSchema,
                    node.span,
                    format!("`{}` is not a park expectation", other.unwrap_or("this value")),
                )
                .with_label("not a channel")
                .with_help(
                    "write `parked: true`, `parked: decision`, `parked: input`, or `parked: { channel, state }`",
                ),
                path,
            );
            None
        }
    }
}
