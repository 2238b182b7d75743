//! A workflow's graph as SVG: states in columns by their distance from an entry, the
//! current state highlighted, states the trail passed through marked, every edge with an
//! arrowhead and a label (a decision's type, else the start of the transition's
//! description), and a legend beside it ([`legend`]).
//!
//! Styling is by class only (the page's stylesheet colours it), since the
//! Content-Security-Policy allows no inline style.

use std::collections::VecDeque;

use archmax_program::kinds::TransitionType;
use archmax_program::program::{Program, StateKind, TransitionProgram, WorkflowProgram};
use archmax_program::text::{cut_at_chars, first_chars};
use maud::{Markup, html};

const NODE_WIDTH: i64 = 168;
const NODE_HEIGHT: i64 = 44;
const COLUMN_GAP: i64 = 56;
const ROW_GAP: i64 = 22;
const MARGIN: i64 = 16;
/// The most characters of a state's name drawn in its box (the whole name is its title).
const LABEL_CHARS: usize = 22;
/// The most characters of an edge's label (the whole description is its title).
const EDGE_LABEL_CHARS: usize = 18;

/// Each state's column: its distance from the nearest entry (unreachable states last).
fn columns(workflow: &WorkflowProgram) -> Vec<usize> {
    let count = workflow.states.len();
    let mut column = vec![usize::MAX; count];
    let mut queue = VecDeque::new();
    let entries = std::iter::once(workflow.entry).chain(workflow.triggers.iter().map(|trigger| trigger.entry));
    for entry in entries {
        if let Some(slot) = column.get_mut(entry.0 as usize)
            && *slot == usize::MAX
        {
            *slot = 0;
            queue.push_back(entry.0 as usize);
        }
    }
    while let Some(index) = queue.pop_front() {
        for transition in &workflow.states[index].transitions {
            let target = transition.target.0 as usize;
            if target < count && column[target] == usize::MAX {
                column[target] = column[index] + 1;
                queue.push_back(target);
            }
        }
    }
    let deepest = column.iter().filter(|&&c| c != usize::MAX).max().copied().unwrap_or(0);
    column.iter().map(|&c| if c == usize::MAX { deepest + 1 } else { c }).collect()
}

fn label(text: &str) -> String {
    clipped(text, LABEL_CHARS)
}

fn clipped(text: &str, chars: usize) -> String {
    match cut_at_chars(text, chars) {
        Some(_) => format!("{}…", first_chars(text, chars - 1)),
        None => text.to_string(),
    }
}

/// An edge's label: a decision's type (`approve`, `reject`, `refine`), else the start
/// of its description; and the whole description, for its title.
fn edge_label(program: &Program, transition: &TransitionProgram) -> (String, String) {
    let description = transition.description.map(|text| program.str(text).trim().to_string()).unwrap_or_default();
    let shown = match transition.kind {
        TransitionType::None => clipped(description.trim_end_matches('.'), EDGE_LABEL_CHARS),
        kind => kind.as_str().to_string(),
    };
    (shown, description)
}

/// What the graph's marks mean, for the page beside the SVG.
pub fn legend() -> Markup {
    html! {
        ul.legend aria-label="Legend" {
            li { span.swatch.current {} "where the session is" }
            li { span.swatch.visited {} "passed through" }
            li { span.swatch.human {} "a person decides (dashed box)" }
            li { span.swatch.back {} "a way back (dashed line)" }
        }
    }
}

/// The graph of `workflow`, `current` highlighted and `visited` states marked.
pub fn svg(program: &Program, workflow: &WorkflowProgram, current: Option<&str>, visited: &[&str]) -> Markup {
    let columns = columns(workflow);
    let mut rows = vec![0i64; workflow.states.len()];
    let mut filled: Vec<i64> = Vec::new();
    for (index, &column) in columns.iter().enumerate() {
        if filled.len() <= column {
            filled.resize(column + 1, 0);
        }
        rows[index] = filled[column];
        filled[column] += 1;
    }
    let position = |index: usize| {
        let x = MARGIN + columns[index] as i64 * (NODE_WIDTH + COLUMN_GAP);
        let y = MARGIN + rows[index] * (NODE_HEIGHT + ROW_GAP);
        (x, y)
    };
    let width = 2 * MARGIN + filled.len() as i64 * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP;
    let tallest = filled.iter().copied().max().unwrap_or(1);
    // Room below the lowest row for edges that run back.
    let height = 2 * MARGIN + tallest * (NODE_HEIGHT + ROW_GAP) + 40;
    let slug_of = |index: usize| program.str(workflow.states[index].slug);
    let title = match current {
        Some(current) => format!("The workflow's states; the session is in {current}."),
        None => "The workflow's states.".to_string(),
    };
    html! {
        svg.graph xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (width) " " (height) }
            width=(width) height=(height) role="img" aria-labelledby="graph-title" {
            title id="graph-title" { (title) }
            defs {
                // Sized in the drawing's units, so every edge's head is the same size
                // whatever its stroke.
                marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse"
                    markerWidth="10" markerHeight="10" orient="auto" {
                    path.arrow d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            @for (index, state) in workflow.states.iter().enumerate() {
                @for transition in &state.transitions {
                    @let target = transition.target.0 as usize;
                    @if target < workflow.states.len() {
                        @let (x1, y1) = position(index);
                        @let (x2, y2) = position(target);
                        @let (shown, description) = edge_label(program, transition);
                        @if columns[target] > columns[index] {
                            g.transition {
                                title { (slug_of(index)) " → " (slug_of(target)) @if !description.is_empty() { ": " (description) } }
                                path.edge d={ "M " (x1 + NODE_WIDTH) " " (y1 + NODE_HEIGHT / 2) " L " (x2 - 1) " " (y2 + NODE_HEIGHT / 2) }
                                    marker-end="url(#arrow)" {}
                                @if !shown.is_empty() {
                                    text.edge-label x=((x1 + NODE_WIDTH + x2) / 2) y=((y1 + y2 + NODE_HEIGHT) / 2 - 4)
                                        text-anchor="middle" { (shown) }
                                }
                            }
                        } @else {
                            // A way back (or to itself) runs below the boxes and ends just
                            // under its target, so its head is never hidden by a box.
                            @let low = y1.max(y2) + NODE_HEIGHT + 26;
                            g.transition {
                                title { (slug_of(index)) " → " (slug_of(target)) @if !description.is_empty() { ": " (description) } }
                                path.edge.back d={ "M " (x1 + NODE_WIDTH / 2) " " (y1 + NODE_HEIGHT) " C " (x1 + NODE_WIDTH / 2) " " (low) " "
                                    (x2 + NODE_WIDTH / 2 + 6) " " (low) " " (x2 + NODE_WIDTH / 2 + 6) " " (y2 + NODE_HEIGHT + 2) }
                                    marker-end="url(#arrow)" {}
                                @if !shown.is_empty() {
                                    text.edge-label x=((x1 + x2 + NODE_WIDTH) / 2) y=(low - 4) text-anchor="middle" { (shown) }
                                }
                            }
                        }
                    }
                }
            }
            @for (index, state) in workflow.states.iter().enumerate() {
                @let slug = slug_of(index);
                @let (x, y) = position(index);
                @let is_current = current == Some(slug);
                @let human = state.kind == StateKind::Human;
                g.node.current[is_current].visited[visited.contains(&slug)].human[human] data-state=(slug) {
                    title { (slug) @if is_current { " (current)" } }
                    rect x=(x) y=(y) width=(NODE_WIDTH) height=(NODE_HEIGHT) rx="8" {}
                    text x=(x + NODE_WIDTH / 2) y=(y + NODE_HEIGHT / 2 + 5) text-anchor="middle" { (label(slug)) }
                }
            }
        }
    }
}
