//! What a delivery or a firing from outside may write into a session: the members its
//! trigger declares, and nothing else.
//!
//! What a host hands a session at its boundary lands locked and replaces what was there,
//! so without this rule the right to fire one trigger would be the right to rewrite every
//! locked variable of the session it reaches: an `order_id` screened at the start, the
//! value a `paths:` guard reads. A trigger therefore declares what a firing of it
//! carries: the names in its `requires`, each replaced whole, and the exact leaves of its
//! `session:` and `message:` paths (what the runner reads to route the firing). A member
//! named only by a routing path (`parcel` for `session: parcel.order`) may hold nothing
//! but that path, and its leaf is merged into the value the session holds, so the rest of
//! a locked `parcel` stays as it was ([`routed_values`]). `title` is accepted, but it
//! never replaces a title the session has: a sender cannot relabel what an approver is
//! deciding. A trigger the workflow does not declare (a delivery let through with
//! `--undeclared`, or by an admin) declares nothing, so it carries nothing.
//!
//! The one thing to know: [`Runtime::deliver`](crate::Runtime::deliver) holds every delivery to this rule and
//! [`Runtime::run_firing`](crate::Runtime::run_firing) every firing from outside (a webhook), so `archmax deliver`,
//! `POST /v1/sessions/{id}/deliver` and `POST /v1/triggers/{trigger}` refuse the same
//! members in the same words. A start through [`Runtime::run_turn`](crate::Runtime::run_turn) (`archmax run`, a
//! `manual` start) still takes any seeds: its caller chooses a session's values.

use serde_json::{Map, Value};

use archmax_program::program::{Program, TriggerProgram};
use archmax_program::reference::{PathSegment, VarPath};

use crate::kernel::value_at;
use crate::runtime::{FieldProblem, InputReason, RunError};

/// Which seeds a turn takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Carry {
    /// Any seeds: a host's start (`archmax run --variables`, a `manual` start).
    AnySeeds,
    /// Only the members the fired trigger declares: a firing from outside.
    Declared,
}

/// The members a firing of `trigger` may carry, in declaration order: its `requires`,
/// then the first names of its `session:` and `message:` paths (of which a firing carries
/// only the paths' leaves, see [`routed_values`]).
pub(crate) fn declared_members<'p>(program: &'p Program, trigger: &'p TriggerProgram) -> Vec<&'p str> {
    let mut names: Vec<&str> = trigger.requires.iter().map(|entry| program.str(entry.name)).collect();
    let routing = [trigger.session.as_ref(), trigger.message.as_ref().and_then(Option::as_ref)];
    for path in routing.into_iter().flatten() {
        if !names.contains(&path.root.as_str()) {
            names.push(path.root.as_str());
        }
    }
    names
}

/// What a firing carried beyond what its trigger declares.
pub(super) struct Undeclared<'a> {
    /// What the trigger declares; `None` when the workflow does not declare the trigger.
    declared: Option<Vec<&'a str>>,
    /// The members given that it does not declare, in the order given.
    given: Vec<&'a str>,
}

impl<'a> Undeclared<'a> {
    /// The members of `variables` that `trigger` (`None`: a trigger the workflow does not
    /// declare) does not declare; `None` when there are none.
    pub(super) fn find(
        program: &'a Program,
        trigger: Option<&'a TriggerProgram>,
        variables: &'a Map<String, Value>,
    ) -> Option<Undeclared<'a>> {
        let declared = trigger.map(|trigger| declared_members(program, trigger));
        let given: Vec<&str> = variables
            .keys()
            .map(String::as_str)
            .filter(|name| *name != "title")
            .filter(|name| declared.as_ref().is_none_or(|declared| !declared.contains(name)))
            .collect();
        (!given.is_empty()).then_some(Undeclared { declared, given })
    }

    /// The refusal's clause, to follow `trigger '<id>' `, ending with a full stop.
    pub(super) fn clause(&self) -> String {
        let given = quoted(&self.given);
        match &self.declared {
            Some(declared) if declared.is_empty() => format!(
                "declares nothing for a firing to carry, and this one carries {given}; leave them out, or name them in the trigger's `requires`."
            ),
            Some(declared) => format!(
                "does not declare {given}: a firing carries only {} (the trigger's `requires` and the first names of its `session:` and `message:` paths); leave them out, or name them in the trigger's `requires`.",
                quoted(declared)
            ),
            None => format!(
                "is not declared by the workflow, so a delivery of it carries no variables, and this one carries {given}; leave them out, or declare the trigger with them in its `requires`."
            ),
        }
    }

    /// One field problem per undeclared member.
    pub(super) fn fields(&self, trigger: &str) -> Vec<FieldProblem> {
        self.given
            .iter()
            .map(|name| FieldProblem {
                field: name.to_string(),
                problem: format!(
                    "'{name}' is not declared by trigger '{trigger}'; a firing carries only what its trigger declares"
                ),
            })
            .collect()
    }
}

/// The values a firing of `trigger` writes, member by member: a name in its `requires`
/// as carried; a member named only by its `session:`/`message:` paths (`parcel` for
/// `parcel.order`) reduced to those paths' leaves and merged into what the session holds
/// (`held`), so nothing but the leaf changes. A member holding more than its paths, or a
/// held value the leaf cannot be written into, is refused before anything changes.
/// `refusing` opens the refusal ("Refusing the delivery").
pub(super) fn routed_values(
    program: &Program,
    (trigger, trigger_id): (&TriggerProgram, &str),
    refusing: &str,
    seeds: &Map<String, Value>,
    held: &Value,
) -> Result<Map<String, Value>, RunError> {
    let required: Vec<&str> = trigger.requires.iter().map(|entry| program.str(entry.name)).collect();
    let routing: Vec<&VarPath> =
        [trigger.session.as_ref(), trigger.message.as_ref().and_then(Option::as_ref)].into_iter().flatten().collect();
    let mut values = Map::new();
    let mut problems = Vec::new();
    for (name, value) in seeds {
        let paths: Vec<&[PathSegment]> =
            routing.iter().filter(|path| path.root == *name).map(|path| path.segments.as_slice()).collect();
        if required.contains(&name.as_str()) || paths.is_empty() {
            values.insert(name.clone(), value.clone());
            continue;
        }
        match leaves_only(name, &paths, value, held.get(name)) {
            Ok(written) => {
                values.insert(name.clone(), written);
            }
            Err(problem) => problems.push(FieldProblem { field: name.clone(), problem }),
        }
    }
    if problems.is_empty() {
        return Ok(values);
    }
    let reasons = problems.iter().map(|field| field.problem.as_str()).collect::<Vec<_>>().join("; ");
    Err(RunError::InvalidInput {
        message: format!(
            "{refusing}: trigger '{trigger_id}' routes by {}, so a firing carries only those leaves of the members they name: {reasons}.",
            routing.iter().map(|path| format!("`{path}`")).collect::<Vec<_>>().join(" and ")
        ),
        fields: problems,
        reason: InputReason::Fields,
    })
}

/// `carried`, the value of member `name` that only the routing `paths` (its segments
/// after `name`) declare, as the session will hold it: the paths' leaves written into
/// `held` (or `carried` itself when the session holds nothing by that name). Refused, in
/// words naming what to do, when `carried` holds anything off the paths or `held` has
/// no place for a leaf.
fn leaves_only(name: &str, paths: &[&[PathSegment]], carried: &Value, held: Option<&Value>) -> Result<Value, String> {
    if paths.iter().any(|segments| segments.is_empty()) {
        // The path is the member itself: its leaf is the whole value.
        return Ok(carried.clone());
    }
    let mut strays = Vec::new();
    stray_members(carried, paths, name, &mut strays);
    if !strays.is_empty() {
        return Err(format!(
            "'{name}' also holds {}; send only the routing path, or name '{name}' in the trigger's `requires` to let a firing replace it whole",
            strays.iter().map(|stray| format!("`{stray}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let Some(held) = held else {
        return Ok(carried.clone());
    };
    let mut written = held.clone();
    for segments in paths {
        let Some(leaf) = value_at(carried, segments) else {
            continue;
        };
        if !write_leaf(&mut written, segments, leaf.clone()) {
            return Err(format!(
                "the session's '{name}' has no place for `{}` without replacing more than that leaf; name '{name}' in the trigger's `requires` to let a firing replace it whole",
                dotted(name, segments)
            ));
        }
    }
    Ok(written)
}

/// Pushes onto `strays` the dotted path (below `at`) of every part of `value` that none of
/// `paths` leads to: a member off the paths, an array item they do not address, or a
/// scalar where a path goes on.
fn stray_members(value: &Value, paths: &[&[PathSegment]], at: &str, strays: &mut Vec<String>) {
    if paths.iter().any(|segments| segments.is_empty()) {
        return;
    }
    let mut visit = |here: String, member: &Value, addressed: &dyn Fn(&PathSegment) -> bool| {
        let tails: Vec<&[PathSegment]> = paths
            .iter()
            .filter_map(|segments| segments.split_first())
            .filter(|(first, _)| addressed(first))
            .map(|(_, tail)| tail)
            .collect();
        if tails.is_empty() {
            strays.push(here);
        } else {
            stray_members(member, &tails, &here, strays);
        }
    };
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                visit(format!("{at}.{key}"), member, &|segment| match segment {
                    PathSegment::Key(name) => name == key,
                    PathSegment::Index(index) => index.to_string() == *key,
                });
            }
        }
        Value::Array(items) => {
            let count = items.len();
            for (position, item) in items.iter().enumerate() {
                visit(
                    format!("{at}.{position}"),
                    item,
                    &|segment| matches!(segment, PathSegment::Index(index) if array_position(*index, count) == Some(position)),
                );
            }
        }
        _ => strays.push(at.to_string()),
    }
}

/// Writes `leaf` at `segments` inside `target`, making the objects on the way that do
/// not exist yet; false when a step meets a value that is not an object (or an array
/// holding the addressed item), which only replacing it could pass.
fn write_leaf(target: &mut Value, segments: &[PathSegment], leaf: Value) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        *target = leaf;
        return true;
    };
    let slot = match (first, target) {
        (PathSegment::Key(key), Value::Object(members)) => {
            members.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()))
        }
        (PathSegment::Index(index), Value::Object(members)) => {
            members.entry(index.to_string()).or_insert_with(|| Value::Object(Map::new()))
        }
        (PathSegment::Index(index), Value::Array(items)) => {
            let count = items.len();
            match array_position(*index, count).and_then(|position| items.get_mut(position)) {
                Some(item) => item,
                None => return false,
            }
        }
        _ => return false,
    };
    write_leaf(slot, rest, leaf)
}

/// The item an index (negative from the end) addresses in an array of `count` items.
fn array_position(index: i64, count: usize) -> Option<usize> {
    let position = if index < 0 { i64::try_from(count).ok()?.checked_add(index)? } else { index };
    usize::try_from(position).ok().filter(|position| *position < count)
}

/// `name.a.0.b`.
fn dotted(name: &str, segments: &[PathSegment]) -> String {
    VarPath { root: name.to_string(), segments: segments.to_vec() }.to_string()
}

/// `'a', 'b'`.
fn quoted(names: &[&str]) -> String {
    names.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(text: &str) -> Vec<PathSegment> {
        text.split('.')
            .map(|segment| match segment.parse::<i64>() {
                Ok(index) => PathSegment::Index(index),
                Err(_) => PathSegment::Key(segment.to_string()),
            })
            .collect()
    }

    #[test]
    fn a_routing_path_writes_only_its_leaf_into_the_held_object() {
        let note = path("note");
        let held = json!({ "id": "o-1", "note": "old", "lines": [1, 2] });
        let written = leaves_only("order", &[&note], &json!({ "note": "hi" }), Some(&held));
        assert_eq!(written, Ok(json!({ "id": "o-1", "note": "hi", "lines": [1, 2] })));
        // Nothing held by that name: the carried leaf is the whole value.
        assert_eq!(leaves_only("order", &[&note], &json!({ "note": "hi" }), None), Ok(json!({ "note": "hi" })));
        // A missing step on the way is made, not a reason to replace the object.
        let deep = path("thread.id");
        let written = leaves_only("order", &[&deep], &json!({ "thread": { "id": "t" } }), Some(&held));
        assert_eq!(written, Ok(json!({ "id": "o-1", "note": "old", "lines": [1, 2], "thread": { "id": "t" } })));
    }

    #[test]
    fn a_member_holding_more_than_its_routing_paths_is_refused_naming_each_stray() {
        let (note, thread) = (path("note"), path("thread.id"));
        let paths = [note.as_slice(), thread.as_slice()];
        let carried = json!({ "note": "hi", "id": "OTHER", "thread": { "id": "t", "x": 1 } });
        let refused = leaves_only("order", &paths, &carried, None).expect_err("strays are refused");
        assert!(refused.contains("`order.id`") && refused.contains("`order.thread.x`"), "{refused}");
        assert!(!refused.contains("`order.note`"), "{refused}");
        assert!(refused.contains("name 'order' in the trigger's `requires`"), "{refused}");
        // A scalar where the path goes on would replace the whole object.
        let refused = leaves_only("order", &[&note], &json!("flat"), None).expect_err("a scalar is refused");
        assert!(refused.contains("`order`"), "{refused}");
        // Both paths' leaves alone are accepted.
        assert!(leaves_only("order", &paths, &json!({ "note": "hi", "thread": { "id": "t" } }), None).is_ok());
    }

    #[test]
    fn an_array_step_takes_only_the_item_its_index_addresses() {
        let last = path("-1.conversation");
        let refused = leaves_only("threads", &[&last], &json!([{ "x": 1 }, { "conversation": "c" }]), None);
        assert!(refused.is_err_and(|problem| problem.contains("`threads.0`")));
        let held = json!([{ "conversation": "a", "kept": true }, { "conversation": "b", "kept": true }]);
        let written = leaves_only("threads", &[&last], &json!([{ "conversation": "c" }]), Some(&held));
        assert_eq!(written, Ok(json!([{ "conversation": "a", "kept": true }, { "conversation": "c", "kept": true }])));
    }

    #[test]
    fn a_held_value_with_no_place_for_the_leaf_is_refused_not_replaced() {
        let note = path("note");
        let refused = leaves_only("order", &[&note], &json!({ "note": "hi" }), Some(&json!("o-1")));
        assert!(refused.is_err_and(|problem| problem.contains("no place for `order.note`")));
        let first = path("0.id");
        let refused = leaves_only("orders", &[&first], &json!([{ "id": "x" }]), Some(&json!([])));
        assert!(refused.is_err());
    }

    #[test]
    fn a_routing_path_that_is_the_member_itself_carries_its_whole_value() {
        let bare: Vec<PathSegment> = Vec::new();
        let carried = json!({ "any": "shape" });
        assert_eq!(leaves_only("conversation_id", &[&bare], &carried, Some(&json!("old"))), Ok(carried.clone()));
    }
}
