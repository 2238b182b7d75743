//! What each state becomes: first a plan over all states (the checks each gains in
//! front and behind, the states that fold into others), the edges into them retargeted,
//! then each state rewritten on its own, its hooks handed to [`super::hooks`].

use std::collections::BTreeMap;

use archmax_compiler::syntax::is_slug;
use archmax_compiler::syntax::yaml::{Entry, Node};

use super::hooks::{HookedState, write_checks, write_gates};
use super::{
    Hook, Layout, Rewriter, add_trigger, entry, hooks_of, rewrite_delegation, sequence_branches, slugify, stem,
};
use crate::edit::{comments_above, node_end, yaml_string};
use crate::script::Phase;

/// What each state becomes, decided before any state is rewritten.
pub(super) struct StatePlan {
    /// A gated state → its first gate, which edges into it now enter.
    pub retarget: BTreeMap<String, String>,
    /// A trigger state that leads to one state → that state.
    pub renamed: BTreeMap<String, String>,
    /// A state → the checks written in front of it (its `before` hooks).
    pub gates: BTreeMap<String, Vec<(String, Hook)>>,
    /// A state → the checks written behind it (its `after` hooks).
    pub checks: BTreeMap<String, Vec<(String, Hook)>>,
    /// A gated state with triggers → the terminal state a veto advances to.
    pub refusals: BTreeMap<String, String>,
    /// A terminal state with `after` checks → the code state that ends the session.
    pub finishes: BTreeMap<String, String>,
}

/// What every state's rewrite reads.
pub(super) struct StateContext<'a> {
    pub lay: &'a Layout,
    pub states: &'a [Entry],
    pub plan: &'a StatePlan,
    pub tools_granted: Option<Vec<String>>,
    pub custom_kinds: Vec<String>,
    pub ceiling: Option<Vec<String>>,
}

/// Names the checks each state gains and the states that fold into others.
pub(super) fn plan_states(w: &mut Rewriter<'_>, states: &[Entry]) -> StatePlan {
    let mut retarget: BTreeMap<String, String> = BTreeMap::new();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut gates: BTreeMap<String, Vec<(String, Hook)>> = BTreeMap::new();
    let mut checks: BTreeMap<String, Vec<(String, Hook)>> = BTreeMap::new();
    let mut refusals: BTreeMap<String, String> = BTreeMap::new();
    let mut finishes: BTreeMap<String, String> = BTreeMap::new();
    for state in states {
        let Some(slug) = state.key.scalar_text() else { continue };
        let node = &state.value;
        let kind = node.get("type").and_then(Node::as_str).unwrap_or("agent");
        if !is_slug(slug) {
            w.follow_up(
                state.key.span.start as usize,
                format!("the state key `{}` is not a kebab-case slug, which contract 3 requires: rename it (and every `to:` and `on_error:` naming it) to `{}` or another slug", slug.escape_debug(), slugify(slug)),
            );
        }
        if let Some(before) = node.get("before") {
            let list = named_hooks(w, before, slug, "screen");
            if let Some((first, _)) = list.first() {
                retarget.insert(slug.to_string(), first.clone());
                if node.get("triggers").is_some() {
                    let refused = w.fresh(&format!("{slug}-refused"), slug);
                    refusals.insert(slug.to_string(), refused);
                }
                gates.insert(slug.to_string(), list);
            }
        }
        if let Some(after) = node.get("after") {
            if kind == "human" {
                w.follow_up(
                    after.span.start as usize,
                    format!("`{slug}` is a human state: a person picks its transition, so its `after` check has no place to run; put a code or grader state behind the edge that needs it"),
                );
            } else {
                let list = named_hooks(w, after, slug, "review");
                if !list.is_empty() {
                    let terminal = node.get("transitions").and_then(Node::as_sequence).is_none_or(<[Node]>::is_empty);
                    if terminal {
                        let done = w.fresh(&format!("{slug}-done"), slug);
                        finishes.insert(slug.to_string(), done);
                    }
                    checks.insert(slug.to_string(), list);
                }
            }
        }
        if kind == "trigger" {
            let targets: Vec<&str> = node
                .get("transitions")
                .and_then(Node::as_sequence)
                .unwrap_or(&[])
                .iter()
                .filter_map(|transition| transition.get("to").and_then(Node::as_str))
                .collect();
            if let [target] = targets.as_slice() {
                renamed.insert(slug.to_string(), (*target).to_string());
            }
        }
    }
    StatePlan { retarget, renamed, gates, checks, refusals, finishes }
}

/// The script and rubric hooks of a `before` or `after` list, each with the fresh name
/// of the state it becomes: a script's file stem, a rubric's `<slug>-<rubric_suffix>`.
fn named_hooks(w: &mut Rewriter<'_>, hooks: &Node, slug: &str, rubric_suffix: &str) -> Vec<(String, Hook)> {
    let mut list = Vec::new();
    for hook in hooks_of(hooks) {
        let preferred = match &hook {
            Hook::Script { path, .. } => stem(path),
            Hook::Rubric { .. } => format!("{slug}-{rubric_suffix}"),
            Hook::Other { .. } => continue,
        };
        let name = w.fresh(if preferred.is_empty() { "check" } else { &preferred }, slug);
        list.push((name, hook));
    }
    list
}

/// Every `to:` and `on_error:` into a gated state now enters its first gate.
pub(super) fn retarget_edges(w: &mut Rewriter<'_>, states: &[Entry], plan: &StatePlan) {
    let StatePlan { retarget, renamed, .. } = plan;
    for state in states {
        let node = &state.value;
        let mut targets: Vec<&Node> = node
            .get("transitions")
            .and_then(Node::as_sequence)
            .unwrap_or(&[])
            .iter()
            .filter_map(|transition| transition.get("to"))
            .collect();
        targets.extend(node.get("on_error"));
        for target in targets {
            let Some(name) = target.as_str() else { continue };
            if let Some(gate) = retarget.get(name) {
                w.edits.replace(w.scalar_range(target), gate.clone());
                w.change(
                    target.span.start as usize,
                    format!("`{name}` → `{gate}`: the check in front of `{name}` is entered first"),
                );
            } else if let Some(into) = renamed.get(name) {
                w.edits.replace(w.scalar_range(target), yaml_string(into));
                w.follow_up(target.span.start as usize, format!("this edge led into the trigger state `{name}`, which is now a trigger of `{into}`: check it still belongs here"));
            }
        }
    }
}

/// Rewrites one state: its type, removed fields, transitions and hooks, with the check
/// states written in front of and behind it.
pub(super) fn rewrite_state(w: &mut Rewriter<'_>, cx: &StateContext<'_>, index: usize, state: &Entry) {
    let text = w.text;
    let (lay, states) = (cx.lay, cx.states);
    let StatePlan { retarget, renamed, gates, checks, .. } = cx.plan;
    let Some(slug) = state.key.scalar_text() else { return };
    let node = &state.value;
    let kind = node.get("type").and_then(Node::as_str).unwrap_or("agent");
    let mut doomed: Vec<&str> = Vec::new();
    let on_error = node
        .get("on_error")
        .and_then(Node::as_str)
        .map(|target| retarget.get(target).map_or(target, String::as_str).to_string());

    // type: wait / trigger / workflow
    match kind {
        "wait" => {
            if let Some((_, type_entry)) = entry(node, "type") {
                if node.get("instructions").is_some() {
                    doomed.push("type");
                    w.follow_up(
                        type_entry.key.span.start as usize,
                        format!("`{slug}` was a `type: wait` state: make sure its instructions say to call `archmax_wait` with what it waits for"),
                    );
                } else {
                    w.replace_entry(
                        type_entry,
                        format!(
                            "instructions: {}",
                            yaml_string("Call archmax_wait with a reason naming what you are waiting for, then stop. When it arrives you continue here: pick the transition it calls for.")
                        ),
                    );
                }
                w.change(
                    type_entry.key.span.start as usize,
                    format!("`type: wait` removed: `{slug}` is an agent state that parks with `archmax_wait`"),
                );
            }
        }
        "trigger" => {
            if let Some(target) = renamed.get(slug).cloned() {
                let range = w.entry_range(states, index);
                w.edits.replace(range, "");
                w.change(
                    state.key.span.start as usize,
                    format!("the trigger state `{slug}` is now the trigger `{slug}` of `{target}`"),
                );
                add_trigger(w, lay, states, slug, node, &target, gates);
            } else {
                w.follow_up(state.key.span.start as usize, format!("the trigger state `{slug}` does not lead to exactly one state: declare its trigger under `triggers:` of the state it enters, and delete it"));
                doomed.push("type");
            }
            return;
        }
        "workflow" => doomed.push("type"),
        _ => {}
    }
    if let Some((_, workflow_entry)) = entry(node, "workflow") {
        rewrite_delegation(w, node, slug, workflow_entry, &mut doomed);
    }

    if let Some((budget_index, budget)) = entry(node, "budget")
        && let Some((_, turns)) = entry(&budget.value, "maxTurns")
    {
        let entries = node.as_mapping().unwrap_or(&[]);
        w.remove_keys(&budget.value, &["maxTurns"], Some((entries, budget_index)));
        w.change(
            turns.key.span.start as usize,
            format!("`budget.maxTurns` removed from `{slug}`: the recursion limit bounds a turn"),
        );
    }
    for key in ["max_corrections", "max_iterations"] {
        if let Some((_, removed)) = entry(node, key) {
            doomed.push(key);
            w.change(
                removed.key.span.start as usize,
                format!("`{key}` removed from `{slug}`: send-backs are counted on the trail"),
            );
        }
    }
    if let Some(ceiling) = &cx.ceiling
        && let Some(allowed) = node.get("skills").and_then(|skills| skills.get("allow")).and_then(Node::as_sequence)
    {
        for skill in allowed {
            if let Some(name) = skill.scalar_text()
                && !ceiling.iter().any(|kept| kept == name)
            {
                w.follow_up(skill.span.start as usize, format!("`{name}` was outside the root ceiling, so `{slug}` never had it: now it does; drop it if that was the point"));
            }
        }
    }

    // Transitions: `on:` removed.
    for transition in node.get("transitions").and_then(Node::as_sequence).unwrap_or(&[]) {
        let Some((_, on)) = entry(transition, "on") else { continue };
        let trigger = on.value.scalar_text().unwrap_or("?").to_string();
        if transition.get("description").is_some() {
            w.remove_keys(transition, &["on"], None);
        } else {
            w.replace_entry(
                on,
                format!("description: {}", yaml_string(&format!("The awaited `{trigger}` has arrived."))),
            );
        }
        w.change(on.key.span.start as usize, format!("transition `on: {trigger}` removed: `{slug}` parks with `archmax_wait` and picks its own transition when the delivery resumes it"));
    }

    // parallel / join
    if let Some((_, parallel)) = entry(node, "parallel") {
        sequence_branches(w, lay, states, slug, node, parallel, &mut doomed);
    }

    // Hooks.
    for (key, phase) in [("before", Phase::Before), ("after", Phase::After)] {
        let Some((_, hook_entry)) = entry(node, key) else { continue };
        doomed.push(key);
        for hook in hooks_of(&hook_entry.value) {
            if let Hook::Other { at, kind } = hook {
                let known = cx.custom_kinds.contains(&kind);
                w.follow_up(
                    at,
                    format!(
                        "the {}`{kind}` hook of `{slug}` has no contract-3 form: write its check as a code state {} `{slug}` by hand",
                        if known { "custom " } else { "" },
                        if phase == Phase::Before { "in front of" } else { "behind" }
                    ),
                );
            }
        }
    }
    let mut inserts_before = String::new();
    let mut inserts_after = String::new();
    let hooked = HookedState { state, slug, on_error: &on_error };
    if let Some(list) = gates.get(slug) {
        write_gates(w, cx, hooked, list, &mut inserts_before, &mut inserts_after);
    }
    if let Some(list) = checks.get(slug) {
        write_checks(w, cx, hooked, list, &mut inserts_after);
    }
    if !inserts_before.is_empty() {
        w.edits.insert(comments_above(text, state.key.span.start as usize), inserts_before);
    }
    if !inserts_after.is_empty() {
        let at = node_end(text, node.span.end.max(state.key.span.end) as usize);
        let lead = if at == text.len() && !text.ends_with('\n') { "\n" } else { "" };
        w.edits.insert(at, format!("{lead}{inserts_after}"));
    }
    w.remove_keys(node, &doomed, None);
}
