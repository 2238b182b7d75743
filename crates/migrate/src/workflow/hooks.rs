//! A state's `before` and `after` hooks as states of their own: a script becomes a code
//! state running the ported script, a rubric a grader state, written in front of the
//! state (gates, entered first) or behind it (checks, which may send the work back).

use archmax_compiler::syntax::yaml::{Entry, Node};
use archmax_compiler::tools::DEFAULT_TOOLS;

use super::states::{StateContext, StatePlan};
use super::{Hook, Layout, NewScript, Note, Rewriter, entry, grader_fields};
use crate::edit::{literal_block, node_end, pad, yaml_string};
use crate::script::{self, Phase, Port};

/// The state whose hooks become states: its entry, its slug and its `on_error` target.
#[derive(Clone, Copy)]
pub(super) struct HookedState<'s> {
    pub state: &'s Entry,
    pub slug: &'s str,
    pub on_error: &'s Option<String>,
}

/// The gates in front of `slug` (its `before` hooks, in order, the first taking over the
/// state's triggers), and the terminal state a veto advances to.
pub(super) fn write_gates(
    w: &mut Rewriter<'_>,
    cx: &StateContext<'_>,
    hooked: HookedState<'_>,
    list: &[(String, Hook)],
    inserts_before: &mut String,
    inserts_after: &mut String,
) {
    let HookedState { state, slug, on_error } = hooked;
    let lay = cx.lay;
    let node = &state.value;
    let tools_granted = &cx.tools_granted;
    let refused = cx.plan.refusals.get(slug).cloned();
    for (position, (gate, hook)) in list.iter().enumerate() {
        let next = list.get(position + 1).map_or(slug.to_string(), |(name, _)| name.clone());
        let mut block = format!("{}{gate}:\n", pad(lay.state));
        let moved = if position == 0 { entry(node, "triggers").map(|(_, triggers)| triggers) } else { None };
        let description_ok = format!("The `{gate}` check passed.");
        let raise_code = format!("{slug}-refused");
        match hook {
            Hook::Script { path, at, .. } => {
                block.push_str(&format!(
                    "{}type: code\n{}script: scripts/{gate}.js\n",
                    pad(lay.field()),
                    pad(lay.field())
                ));
                let source = w.files.read(path);
                let onward = [next.clone()];
                let spec = Port {
                    phase: Phase::Before,
                    guarded: slug,
                    here: gate,
                    onward: &onward,
                    refused: refused.as_deref(),
                    raise_code: &raise_code,
                    max_iterations: 0,
                };
                let grants = port_script(w, path, *at, source.as_deref(), &spec, gate, tools_granted);
                if let Some(moved) = moved {
                    let range = w.block_with_comments(moved);
                    block.push_str(w.slice(range.clone()));
                    w.edits.replace(range, "");
                }
                block.push_str(&grants.render(lay));
                w.change(*at, format!("the `before` hook {path} of `{slug}` → the code state `{gate}` in front of it (scripts/{gate}.js)"));
            }
            Hook::Rubric { at, instructions, model, .. } => {
                let decide = match &refused {
                    Some(refused) => {
                        format!("- It fails: advance to `{refused}` with a reason the requester can read.")
                    }
                    None => format!("- It fails: raise `{raise_code}` with the reason."),
                };
                let text = format!(
                    "{}\n\nDeciding (this was the `before` rubric of `{slug}`):\n- The request passes: advance to `{next}`.\n{decide}",
                    instructions.trim_end()
                );
                grader_fields(&mut block, lay, &text, model.as_deref());
                if let Some(moved) = moved {
                    let range = w.block_with_comments(moved);
                    block.push_str(w.slice(range.clone()));
                    w.edits.replace(range, "");
                }
                w.change(*at, format!("the `before` rubric of `{slug}` → the grader state `{gate}` in front of it"));
            }
            Hook::Other { .. } => continue,
        }
        if let Some(on_error) = &on_error {
            block.push_str(&format!("{}on_error: {}\n", pad(lay.field()), yaml_string(on_error)));
        }
        block.push_str(&format!("{}transitions:\n", pad(lay.field())));
        block.push_str(&lay.transition(&next, &description_ok));
        if let Some(refused) = &refused {
            block.push_str(&lay.transition(refused, &format!("The `{gate}` check refused the request.")));
        }
        if moved.is_some() {
            w.change(
                state.key.span.start as usize,
                format!("the triggers of `{slug}` moved to `{gate}`: a session starts with the check"),
            );
        }
        inserts_before.push_str(&block);
        if lay.blank {
            inserts_before.push('\n');
        }
    }
    if let Some(refused) = &refused {
        let mut block = if lay.blank { "\n".to_string() } else { String::new() };
        block.push_str(&format!("{}{refused}:\n", pad(lay.state)));
        let text = format!(
            "A check in front of `{slug}` refused this request; the runtime note gives the reason. Tell the requester in one short reply that the request was rejected and why, using that reason. Do nothing else."
        );
        block.push_str(&format!(
            "{}instructions: {}",
            pad(lay.field()),
            literal_block(&text, lay.field(), lay.field() + lay.step)
        ));
        inserts_after.push_str(&block);
        w.change(
            state.key.span.start as usize,
            format!(
                "a veto before `{slug}` now advances to the terminal state `{refused}`, which tells the requester why"
            ),
        );
    }
}

/// The checks behind `slug` (its `after` hooks, in order): the state's own edge now leads
/// into the first, the last takes over its transitions, and a terminal state gains a
/// code state that ends the session once the checks pass.
pub(super) fn write_checks(
    w: &mut Rewriter<'_>,
    cx: &StateContext<'_>,
    hooked: HookedState<'_>,
    list: &[(String, Hook)],
    inserts_after: &mut String,
) {
    let HookedState { state, slug, on_error } = hooked;
    let lay = cx.lay;
    let tools_granted = &cx.tools_granted;
    let (transitions, originals, finish) = lead_into_checks(w, cx, state, slug, list);
    for (position, (check, hook)) in list.iter().enumerate() {
        let last = position + 1 == list.len();
        let onward: Vec<String> = if !last {
            vec![list[position + 1].0.clone()]
        } else if let Some(done) = &finish {
            vec![done.clone()]
        } else {
            originals.iter().map(|(to, _)| to.clone()).collect()
        };
        let mut block = if lay.blank { "\n".to_string() } else { String::new() };
        block.push_str(&format!("{}{check}:\n", pad(lay.state)));
        let raise_code = format!("{slug}-rejected");
        let back = format!("The `{check}` check sends the work back; the reason names what to fix.");
        match hook {
            Hook::Script { path, at, max_iterations } => {
                block.push_str(&format!(
                    "{}type: code\n{}script: scripts/{check}.js\n",
                    pad(lay.field()),
                    pad(lay.field())
                ));
                let source = w.files.read(path);
                let spec = Port {
                    phase: Phase::After,
                    guarded: slug,
                    here: check,
                    onward: &onward,
                    refused: None,
                    raise_code: &raise_code,
                    max_iterations: *max_iterations,
                };
                let grants = port_script(w, path, *at, source.as_deref(), &spec, check, tools_granted);
                block.push_str(&grants.render(lay));
                w.change(
                    *at,
                    format!(
                        "the `after` hook {path} of `{slug}` → the code state `{check}` behind it (scripts/{check}.js)"
                    ),
                );
                if *max_iterations > 0 {
                    w.change(*at, format!("`max_iterations: {max_iterations}` → at most {max_iterations} `correct` send-backs, counted on the trail by scripts/{check}.js"));
                }
            }
            Hook::Rubric { at, instructions, max_iterations, model } => {
                let pass = match onward.as_slice() {
                    [one] => format!("advance to `{one}`"),
                    _ => "advance along the transition the work calls for".to_string(),
                };
                let bound = if *max_iterations == 0 {
                    format!(
                        "- It could be better but is acceptable only with a fix: raise `{raise_code}` with the fix (no send-back was allowed)."
                    )
                } else {
                    format!(
                        "- It needs a correction: advance back to `{slug}` with a reason naming each fix. Count send-backs on the trail first: when it already holds {max_iterations} step(s) with kind \"grader\" and to \"{slug}\", raise `{raise_code}` instead."
                    )
                };
                let text = format!(
                    "{}\n\nDeciding (this was the `after` rubric of `{slug}`; read the session with archmax_get_history, which replaces the old task payload):\n- It passes: {pass}.\n{bound}\n- It is unacceptable: raise `{raise_code}` with the reason.",
                    instructions.trim_end()
                );
                grader_fields(&mut block, lay, &text, model.as_deref());
                w.change(*at, format!("the `after` rubric of `{slug}` → the grader state `{check}` behind it"));
                w.change(*at, format!("`max_iterations: {max_iterations}` → a send-back bound of {max_iterations} in the instructions of `{check}`, counted on the trail"));
                if ["userRequest", "payload", "`history`", "phase"].iter().any(|word| instructions.contains(word)) {
                    w.follow_up(*at, format!("the criteria of `{check}` speak of the rubric's old JSON payload: reword them for a grader that reads archmax_get_history"));
                }
            }
            Hook::Other { .. } => continue,
        }
        if let Some(on_error) = &on_error {
            block.push_str(&format!("{}on_error: {}\n", pad(lay.field()), yaml_string(on_error)));
        }
        if last && finish.is_none() {
            match transitions {
                Some(transitions) if !w.is_flow(&transitions.value) => {
                    let range = w.block_with_comments(transitions);
                    let moved = w.edits.within(&range).apply(w.slice(range.clone()));
                    block.push_str(&moved);
                }
                _ => {
                    block.push_str(&format!("{}transitions:\n", pad(lay.field())));
                    for (to, description) in &originals {
                        block.push_str(&lay.transition(to, description));
                    }
                }
            }
            block.push_str(&lay.transition(slug, &back));
        } else {
            block.push_str(&format!("{}transitions:\n", pad(lay.field())));
            block.push_str(&lay.transition(&onward[0], &format!("The `{check}` check passed.")));
            block.push_str(&lay.transition(slug, &back));
        }
        inserts_after.push_str(&block);
        if last && transitions.is_some() && finish.is_none() {
            w.change(
                state.key.span.start as usize,
                format!("the transitions of `{slug}` moved to `{check}`; `{slug}` advances into it"),
            );
        }
    }
    if let Some(done) = &finish {
        let mut block = if lay.blank { "\n".to_string() } else { String::new() };
        block.push_str(&format!(
            "{}{done}:\n{}type: code\n{}script: scripts/{done}.js\n",
            pad(lay.state),
            pad(lay.field()),
            pad(lay.field())
        ));
        inserts_after.push_str(&block);
        w.scripts.push(NewScript {
            path: format!("scripts/{done}.js"),
            text: script::finish_script(slug),
            from_hook: None,
            hook_changes: Vec::new(),
            hook_follow_ups: Vec::new(),
        });
        w.change(
            state.key.span.start as usize,
            format!("`{slug}` was terminal: the terminal code state `{done}` ends the session once its check passes"),
        );
    }
}

/// The state's own transitions replaced by one edge into its first check; what they
/// were (their targets retargeted, with descriptions), and the finishing state's name
/// when the state was terminal.
fn lead_into_checks<'n>(
    w: &mut Rewriter<'_>,
    cx: &StateContext<'_>,
    state: &'n Entry,
    slug: &str,
    list: &[(String, Hook)],
) -> (Option<&'n Entry>, Vec<(String, String)>, Option<String>) {
    let text = w.text;
    let lay = cx.lay;
    let node = &state.value;
    let StatePlan { retarget, finishes, .. } = cx.plan;
    let transitions = entry(node, "transitions").map(|(_, transitions)| transitions);
    let originals: Vec<(String, String)> = transitions
        .and_then(|transitions| transitions.value.as_sequence())
        .unwrap_or(&[])
        .iter()
        .filter_map(|transition| {
            let to = transition.get("to")?.as_str()?;
            let to = retarget.get(to).map_or(to, String::as_str).to_string();
            let description = transition.get("description").and_then(Node::as_str).unwrap_or("").to_string();
            Some((to, description))
        })
        .collect();
    let finish = finishes.get(slug).cloned();
    let (first, _) = &list[0];
    // The state's own edge now leads into its first check.
    let lead = match (&finish, originals.as_slice()) {
        (Some(_), _) => "Your reply is written; a check reviews it before the session ends.".to_string(),
        (None, [(_, description)]) if !description.is_empty() => description.clone(),
        (None, _) => {
            let named: Vec<String> = originals
                .iter()
                .map(|(to, description)| {
                    if description.is_empty() {
                        format!("`{to}`")
                    } else {
                        format!("`{to}` when {}", description.trim_end_matches('.'))
                    }
                })
                .collect();
            format!("The work is done; name the next step in your reason: {}.", named.join("; "))
        }
    };
    let lead_block = format!("{}transitions:\n{}", pad(lay.field()), lay.transition(first, &lead));
    match transitions {
        Some(transitions) => {
            let range = w.block_with_comments(transitions);
            w.edits.replace(range, lead_block);
        }
        None => {
            let at = node_end(text, node.span.end as usize);
            w.edits.insert(at, lead_block);
        }
    }
    if finish.is_some() {
        w.follow_up(
            state.key.span.start as usize,
            format!("`{slug}` was terminal and now advances to `{first}` when its reply is written: make its instructions end with that advance"),
        );
    }
    (transitions, originals, finish)
}

/// What a ported script calls that its code state must grant.
#[derive(Default)]
struct Grants {
    skills: Vec<String>,
    tools: Vec<String>,
}

impl Grants {
    fn render(&self, lay: &Layout) -> String {
        let mut out = String::new();
        if !self.skills.is_empty() {
            out.push_str(&format!("{}skills: {{ allow: [{}] }}\n", pad(lay.field()), self.skills.join(", ")));
        }
        if !self.tools.is_empty() {
            out.push_str(&format!("{}tools: {{ allow: [{}] }}\n", pad(lay.field()), self.tools.join(", ")));
        }
        out
    }
}

fn port_script(
    w: &mut Rewriter<'_>,
    path: &str,
    at: usize,
    source: Option<&str>,
    spec: &Port<'_>,
    state: &str,
    tools_granted: &Option<Vec<String>>,
) -> Grants {
    let script_path = format!("scripts/{state}.js");
    let Some(source) = source else {
        w.follow_up(
            at,
            format!(
                "the hook file {path} is missing: scripts/{state}.js fails closed (it raises) until you write the check"
            ),
        );
        let code = serde_json::Value::String(spec.raise_code.to_string());
        let reason = serde_json::Value::String(format!("the check {path} was missing when this workflow was migrated"));
        let shown = script::comment_safe(path);
        w.scripts.push(NewScript {
            path: script_path,
            text: format!(
                "/**\n * Missing check\n *\n * `archmax migrate` found no {shown}, so this code state refuses every session\n * (a missing hook vetoed under contract 2 too) until the check is written.\n */\nexport default async function ({{ tools }}) {{\n  await tools.archmax_raise({{ code: {code}, reason: {reason} }});\n}}\n"
            ),
            from_hook: None,
            hook_changes: Vec::new(),
            hook_follow_ups: Vec::new(),
        });
        return Grants::default();
    };
    if !path.starts_with("hooks/") || path.contains("..") {
        w.follow_up(
            at,
            format!(
                "the hook path {path} is not under hooks/: it was ported all the same; check it is the file you meant"
            ),
        );
    }
    let ported = script::port(source, path, spec);
    let mut grants = Grants::default();
    for (_, tool) in script::called_tools(source) {
        let control = tool.starts_with("archmax_");
        let granted = match tools_granted {
            Some(list) => list.contains(&tool),
            None => DEFAULT_TOOLS.contains(&tool.as_str()),
        };
        if !control && !granted {
            grants.tools.push(tool);
        } else if control && !["archmax_get_history", "archmax_advance", "archmax_raise"].contains(&tool.as_str()) {
            w.follow_up(at, format!("{path} calls `{tool}`, which a code state's script cannot call"));
        }
    }
    grants.skills = script::named_skills(source);
    if !grants.skills.is_empty() || !grants.tools.is_empty() {
        let mut what = grants.skills.iter().map(|skill| format!("skill `{skill}`")).collect::<Vec<_>>();
        what.extend(grants.tools.iter().map(|tool| format!("tool `{tool}`")));
        w.change(
            at,
            format!("`{state}` grants {}: a hook ran on the runtime's authority, a code state's calls are held to its own lists", what.join(", ")),
        );
    }
    w.scripts.push(NewScript {
        path: script_path,
        text: ported.text,
        from_hook: Some(path.to_string()),
        hook_changes: ported.changes.into_iter().map(|(at, text)| Note { at, text }).collect(),
        hook_follow_ups: ported.follow_ups.into_iter().map(|(at, text)| Note { at, text }).collect(),
    });
    grants
}
