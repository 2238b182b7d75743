//! A workflow's graph as SVG: states in columns by their distance from an entry, the
//! current state highlighted, states the trail passed through marked.
//!
//! Styling is by class only (the page's stylesheet colours it), since the
//! Content-Security-Policy allows no inline style.

use std::collections::VecDeque;

use archmax_program::program::{Program, StateKind, WorkflowProgram};
use archmax_program::text::{cut_at_chars, first_chars};
use maud::{Markup, html};

const NODE_WIDTH: i64 = 168;
const NODE_HEIGHT: i64 = 44;
const COLUMN_GAP: i64 = 56;
const ROW_GAP: i64 = 22;
const MARGIN: i64 = 16;
/// The most characters of a state's name drawn in its box (the whole name is its title).
const LABEL_CHARS: usize = 22;

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
    match cut_at_chars(text, LABEL_CHARS) {
        Some(_) => format!("{}…", first_chars(text, LABEL_CHARS - 1)),
        None => text.to_string(),
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
                marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path.arrow d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            @for (index, state) in workflow.states.iter().enumerate() {
                @for transition in &state.transitions {
                    @let target = transition.target.0 as usize;
                    @if target < workflow.states.len() {
                        @let (x1, y1) = position(index);
                        @let (x2, y2) = position(target);
                        @if columns[target] > columns[index] {
                            path.edge d={ "M " (x1 + NODE_WIDTH) " " (y1 + NODE_HEIGHT / 2) " L " (x2) " " (y2 + NODE_HEIGHT / 2) }
                                marker-end="url(#arrow)" {}
                        } @else {
                            @let low = y1.max(y2) + NODE_HEIGHT + 26;
                            path.edge.back d={ "M " (x1 + NODE_WIDTH / 2) " " (y1 + NODE_HEIGHT) " C " (x1 + NODE_WIDTH / 2) " " (low) " "
                                (x2 + NODE_WIDTH / 2) " " (low) " " (x2 + NODE_WIDTH / 2 + 6) " " (y2 + NODE_HEIGHT) }
                                marker-end="url(#arrow)" {}
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
