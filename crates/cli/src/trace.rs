//! The human state trace on stderr (the "state flow" the docs speak of), rendered from
//! the run's events as they happen. Not to be confused with flow documents
//! ([`crate::flow`], `archmax-flow`).
//!
//! Append-only: state changes at the margin, what happened inside a state indented under
//! it. Control calls are shown as what they do (a move, a park, a raise), never as tool
//! lines; runtime notes are not shown at all. Every text an event carries (model and
//! tool text, names, reasons) passes through [`terminal_safe`] before it is painted, so
//! the only escape sequences on the flow are its own colours.

use std::io::Write;

use crate::output::terminal_safe;

use archmax_compiler::tools::path_arguments;
use archmax_vm::events::{Envelope, Event, Listener};

/// Writes the flow to stderr.
pub struct Trace {
    color: bool,
    /// Per session: the state shown at its margin, until the session leaves it.
    current: std::collections::HashMap<String, String>,
    /// How many `~` the top-level session's own id holds (ids may contain them).
    root_tildes: Option<usize>,
    /// Inside a case: how a turn ended is a fact the case asserts on, not a verdict, so
    /// a failed turn is not painted as a failure before the case's own verdict.
    in_case: bool,
}

impl Trace {
    /// How deep under the root session `envelope`'s session runs: 0 for the root (whose
    /// `~` count is remembered from its first event), at least 1 for a sub-workflow's.
    fn depth(&mut self, envelope: &Envelope, session: &str) -> usize {
        let tildes = session.matches('~').count();
        match &envelope.sub_workflow_dispatch_id {
            None => {
                self.root_tildes.get_or_insert(tildes);
                0
            }
            Some(_) => tildes.saturating_sub(self.root_tildes.unwrap_or(0)).max(1),
        }
    }

    pub fn new(color: bool) -> Trace {
        Trace { color, current: std::collections::HashMap::new(), root_tildes: None, in_case: false }
    }

    /// The flow of a case's session (`archmax test`).
    pub fn for_case(color: bool) -> Trace {
        Trace { in_case: true, ..Trace::new(color) }
    }

    fn state_header(&self, state: &str) -> String {
        format!("{} {}", self.paint("1;36", "●"), self.paint("1", state))
    }

    fn paint(&self, code: &str, text: &str) -> String {
        let text = terminal_safe(text);
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.into_owned() }
    }
}

/// Event text as the flow may print it.
fn safe(text: &str) -> String {
    terminal_safe(text).into_owned()
}

fn first_line(text: &str, limit: usize) -> String {
    archmax_program::text::cut_with_ellipsis(archmax_program::text::first_line(&terminal_safe(text)), limit)
}

/// A runtime message without its `[workflow] FAILED:`-style marker, which the flow's icons
/// already say.
fn plain(text: &str) -> &str {
    for marker in ["[workflow] FAILED: ", "[workflow] BLOCKED: ", "[workflow] "] {
        if let Some(rest) = text.strip_prefix(marker) {
            return rest;
        }
    }
    text
}

/// Who made a call, when it was not the agent's model.
fn via(origin: &str) -> String {
    match origin {
        "model" | "" => String::new(),
        other => format!(" via {}", safe(other)),
    }
}

/// A call in one line, as its `tool-called` event's `detail` has it: a space and the
/// detail, or nothing.
fn detail(detail: Option<&str>) -> String {
    detail.map(|detail| format!(" {}", safe(detail))).unwrap_or_default()
}

impl Trace {
    /// Follows the state each session is in. A resume (a delivery, a decision, a message
    /// to a park) happens in the parked state: it is named first (the lines returned), and
    /// not named twice when the state is re-entered. `None`: the event enters the state
    /// already shown, and draws nothing.
    fn follow_state(&mut self, session: &str, event: &Event) -> Option<Vec<String>> {
        let mut lines = Vec::new();
        match event {
            Event::StateEnter { state } if self.current.get(session) == Some(state) => return None,
            Event::StateEnter { state } => {
                self.current.insert(session.to_string(), state.clone());
            }
            Event::StateLeave { .. } => {
                self.current.remove(session);
            }
            Event::Delivered { state, .. }
            | Event::Decided { state, .. }
            | Event::ParkMessage { state, .. }
            | Event::Upgraded { state, .. }
                if !self.current.contains_key(session) =>
            {
                lines.push(self.state_header(state));
                self.current.insert(session.to_string(), state.clone());
            }
            _ => {}
        }
        Some(lines)
    }
}

impl Listener for Trace {
    fn on_event(&mut self, envelope: &Envelope) {
        // A sub-workflow's events (its session id is its caller's plus `~n`) are drawn
        // indented under the calling state, one level per depth, never at the margin.
        let session = envelope.session_id.clone().unwrap_or_default();
        let depth = self.depth(envelope, &session);
        if depth > 0 && matches!(envelope.event, Event::TurnEnd { .. } | Event::Warning { .. }) {
            return;
        }
        let Some(mut lines) = self.follow_state(&session, &envelope.event) else {
            return;
        };
        let line = match &envelope.event {
            Event::StateEnter { state } if depth > 0 => Some(format!(
                "{}{}",
                self.state_header(state),
                envelope
                    .sub_workflow_dispatch_id
                    .as_ref()
                    .map(|id| self.paint("2", &format!(" ({id})")))
                    .unwrap_or_default()
            )),
            Event::StateEnter { state } => Some(self.state_header(state)),
            Event::Advance { from, to, reason, .. } if from != "__start__" => Some(format!(
                "  {} {}{}",
                self.paint("36", "→"),
                safe(to),
                reason.as_ref().map(|reason| format!(" — {}", first_line(reason, 100))).unwrap_or_default()
            )),
            Event::AgentText { text, partial, .. } => {
                let cut = if partial == &Some(true) { " (cut off at the output limit)" } else { "" };
                Some(format!("  {}{cut}", self.paint("2", &format!("“{}”", first_line(text, 100)))))
            }
            Event::ToolCalled { tool, detail: said, origin, server, .. }
                if server.is_some()
                    || !tool.starts_with("archmax_")
                    || tool == "archmax_run"
                    || tool == "archmax_eval"
                    || tool == "archmax_set_variables" =>
            {
                Some(format!("  · {}{}{}", safe(tool), detail(said.as_deref()), via(origin)))
            }
            Event::ToolResult { status, output, .. } if status == "error" => {
                Some(format!("    {} {}", self.paint("33", "!"), first_line(plain(output), 240)))
            }
            Event::ToolBlocked { tool, rule, args, .. } => {
                let paths = path_arguments(tool).iter().map(|(name, _)| *name);
                let said = archmax_vm::events::call_detail(args, paths);
                Some(format!(
                    "  {} {}{} refused ({})",
                    self.paint("33", "✖"),
                    safe(tool),
                    detail(said.as_deref()),
                    safe(rule)
                ))
            }
            Event::Parked { awaiting, reason, resume_at, .. } => Some(format!(
                "  {} awaiting {}{}{}",
                self.paint("35", "⏸"),
                if awaiting == "decision" { "a decision" } else { "input" },
                reason.as_ref().map(|reason| format!(": {}", first_line(reason, 80))).unwrap_or_default(),
                resume_at.as_ref().map(|at| format!(" (due {})", safe(at))).unwrap_or_default()
            )),
            Event::StateErrorRouted { to, reason, .. } => {
                Some(format!("  {} failed: {} → {}", self.paint("33", "⚠"), first_line(plain(reason), 240), safe(to)))
            }
            Event::Raised { code, reason, .. } => {
                Some(format!("  {} raised `{}`: {}", self.paint("31", "✖"), safe(code), first_line(reason, 100)))
            }
            Event::ParkMessage { direction, text, .. } if direction == "inbound" => Some(format!(
                "  {} {}",
                self.paint("36", "✉"),
                self.paint("2", &format!("“{}”", first_line(text, 100)))
            )),
            Event::Decided { to, .. } => Some(format!("  {} decided → {}", self.paint("36", "✓"), safe(to))),
            Event::Upgraded { from, to, .. } => {
                let short = |hash: &str| safe(&hash.chars().take(12).collect::<String>());
                Some(format!("  {} upgraded program {} → {}", self.paint("36", "↑"), short(from), short(to)))
            }
            Event::Delivered { trigger, .. } => {
                Some(format!("  {} delivered `{}`", self.paint("36", "↩"), safe(trigger)))
            }
            Event::CodeStart { script, .. } => Some(format!("  · running {}", safe(script))),
            Event::CodeOutput { line, .. } => Some(format!("    {}", self.paint("2", line))),
            Event::GraderStart { .. } => Some("  · grading".to_string()),
            Event::ContextCompacted { messages, tokens_before, tokens_after, path, trimmed, .. } => Some(format!(
                "  {} {} ({} → {} tokens; {})",
                self.paint("36", "≡"),
                compacted(*messages, *trimmed),
                crate::output::thousands(*tokens_before),
                crate::output::thousands(*tokens_after),
                safe(path)
            )),
            Event::SubWorkflowStart { workflow, dispatch_id, .. } => {
                Some(format!("  {} sub-workflow {} ({})", self.paint("36", "↳"), safe(workflow), safe(dispatch_id)))
            }
            Event::SubWorkflowResult { workflow, dispatch_id, status, reason, .. } => Some(format!(
                "  {} {} ({}): {}{}",
                self.paint("36", "↲"),
                safe(workflow),
                safe(dispatch_id),
                safe(status),
                reason.as_ref().map(|reason| format!(" — {}", first_line(reason, 160))).unwrap_or_default()
            )),
            Event::Warning { message, .. } => Some(format!("  {} {}", self.paint("33", "⚠"), safe(message))),
            Event::BudgetStopped { reason, .. } => {
                Some(format!("  {} budget: {}; the call was not made", self.paint("33", "⛔"), first_line(reason, 200)))
            }
            Event::BudgetRaised { raised_by, max_cost, lifted, .. } => Some(format!(
                "  {} budget raised{}{}{}",
                self.paint("32", "⬆"),
                raised_by.as_ref().map(|who| format!(" by {}", safe(who))).unwrap_or_default(),
                max_cost.map(|cost| format!(" · max_cost_per_session now ${cost:.2}")).unwrap_or_default(),
                if *lifted { " · the session goes on" } else { "" }
            )),
            Event::ModelFallback { model, provider, reason, fallback, .. } => Some(format!(
                "  {} {} ({}) failed: {}; trying {}",
                self.paint("33", "↪"),
                safe(model),
                safe(provider),
                first_line(reason, 160),
                safe(fallback)
            )),
            Event::TurnEnd { status, state, reason, terminal, code } => Some(match status.as_str() {
                "completed" if *terminal => format!("{} completed in {}", self.paint("32", "✔"), safe(state)),
                "completed" => {
                    format!("{} turn ended in {}; the session can continue there", self.paint("32", "✔"), safe(state))
                }
                "awaiting_decision" | "awaiting_input" => return,
                other => format!(
                    "{} {} in {}{}{}",
                    if self.in_case { self.paint("2", "·") } else { self.paint("31", "✖") },
                    safe(other),
                    safe(state),
                    code.as_ref().map(|code| format!(" ({})", safe(code))).unwrap_or_default(),
                    reason.as_ref().map(|reason| format!(": {}", first_line(reason, 200))).unwrap_or_default()
                ),
            }),
            _ => None,
        };
        let Some(line) = line else {
            return;
        };
        lines.push(line);
        if depth > 0 {
            let indent = format!("  {}", "│ ".repeat(depth));
            lines = lines.into_iter().map(|line| format!("{indent}{line}")).collect();
        }
        print_lines(lines);
    }
}

/// Writes the trace's lines to stderr, together; a closed stderr loses them silently.
fn print_lines(lines: Vec<String>) {
    let mut stderr = std::io::stderr().lock();
    for line in lines {
        let _ = writeln!(stderr, "{line}");
    }
}

/// What a compaction did to `messages` earlier messages, as the trace says it.
fn compacted(messages: u64, trimmed: bool) -> String {
    match trimmed {
        true => format!("cut {messages} earlier messages without a summary"),
        false => format!("compacted {messages} earlier messages into a summary"),
    }
}
