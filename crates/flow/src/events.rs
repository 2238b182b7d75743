//! Flow events: the one record of a walk. Under `--json` each is one JSON object per
//! line named as workflow events are: the kind in `event` (kebab-case), every field
//! camelCase (`stepKind`, `inputTokens`); [`EventNames::Snake`] writes the names of
//! earlier releases (`kind`, `step_kind`) for readers not yet moved. [`SCHEMA`] (the
//! committed `schemas/flow-events.schema.json`) describes every kind. On stderr
//! [`FlowEvent::line`] renders each in one line (`flow ▸ …`, `step ✓ …`, `retreat ↺ …`).
//! A step's own loop events (tool calls, the gate's `approval` and `hook-ran` answers,
//! warnings) come between its `step-started` and `step-finished`; a call's refusal is
//! warned about between its `tool-requested` and `tool-completed`.
//!
//! The one thing to know: an event replayed by `--resume` (a step or hook the record
//! already holds) carries `"replayed": true` and is never run again.

use serde::Serialize;
use serde_json::{Map, Value};

/// The JSON Schema (2020-12) of one flow event line, as [`FlowEvent::json`] writes it.
pub const SCHEMA: &str = include_str!("../../../schemas/flow-events.schema.json");

/// How an event line names its kind and fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventNames {
    /// `event` and camelCase fields, as workflow events are named.
    #[default]
    Camel,
    /// `kind` and snake_case fields: the names before workflow events' were adopted,
    /// kept for one release.
    Snake,
}

fn not(flag: &bool) -> bool {
    !*flag
}

/// Every event a walk emits.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum FlowEvent {
    FlowStarted {
        flow: String,
        run: String,
        steps: usize,
        #[serde(skip_serializing_if = "not")]
        resumed: bool,
    },
    GroupEntered {
        path: String,
        layers: Vec<Vec<String>>,
        attempt: u32,
        of: u32,
    },
    LayerReady {
        path: String,
        layer: usize,
        nodes: Vec<String>,
    },
    StepStarted {
        path: String,
        step_kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        attempt: u32,
        #[serde(skip_serializing_if = "not")]
        replayed: bool,
    },
    StepFinished {
        path: String,
        outcome: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        gives: Map<String, Value>,
        #[serde(skip_serializing_if = "not")]
        replayed: bool,
    },
    NodeSkipped {
        path: String,
        because: String,
    },
    GroupRepeating {
        path: String,
        attempt: u32,
        of: u32,
        reason: String,
    },
    HandoffIncomplete {
        path: String,
        missing: Vec<String>,
    },
    GroupLeft {
        path: String,
        failed: bool,
        gave: Map<String, Value>,
        attempts: u32,
        exhausted: bool,
    },
    TransitionRefused {
        path: String,
        moment: String,
        attempt: u32,
        reason: String,
    },
    FlowFinished {
        flow: String,
        run: String,
        ran: usize,
        failed: usize,
        skipped: usize,
        retreats: usize,
        clean: bool,
    },
    FlowPaused {
        flow: String,
        run: String,
        path: String,
        reason: String,
        reached: usize,
        failed: usize,
        skipped: usize,
        retreats: usize,
        /// The command line that records the operator's verdict and continues the walk.
        #[serde(skip_serializing_if = "Option::is_none")]
        resume: Option<String>,
    },
    /// One hook answered: `transition` (with `moment` and `attempt`), `before-call` and
    /// `after-call` (with `tool` and `attempt`; `path` is the step's), `stop` (`path` is
    /// the root's). `reason` is a call or stop hook's refusal (a transition's is in
    /// `transition-refused`).
    HookRan {
        point: String,
        path: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        moment: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        verdict: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "not")]
        replayed: bool,
    },
    /// The approver answered a call that needs approval: `by` is `program` (`--approve`)
    /// or `terminal` (the prompt), `verdict` is `yes` or `no`.
    Approval {
        step: String,
        name: String,
        by: String,
        verdict: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Session {
        id: String,
        scope: String,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        turns: u32,
        input_tokens: u64,
        output_tokens: u64,
        cost_microunits: u64,
    },
    ToolRequested {
        step: String,
        name: String,
        args: Value,
    },
    ToolCompleted {
        step: String,
        name: String,
        status: String,
        content: String,
    },
    Warning {
        step: String,
        code: String,
        message: String,
        /// The rule a refused call was refused under (`gate.*`, `scope.*`, `zone.*`,
        /// `tool.unknown`: `archmax explain` explains it); absent for a warning that
        /// refuses no call.
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
}

impl FlowEvent {
    /// The event as one JSON line (without the newline), named as workflow events are.
    pub fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    /// The event as one JSON line named as `names` says. Only the event's own fields
    /// are renamed: what a step gave or a tool was asked keeps its names.
    pub fn json_named(&self, names: EventNames) -> String {
        match (names, serde_json::to_value(self)) {
            (EventNames::Camel, _) | (_, Err(_)) => self.json(),
            (EventNames::Snake, Ok(Value::Object(fields))) => {
                let mut renamed = Map::new();
                for (name, value) in fields {
                    let name = if name == "event" { "kind".to_string() } else { snake_case(&name) };
                    renamed.insert(name, value);
                }
                Value::Object(renamed).to_string()
            }
            (EventNames::Snake, Ok(other)) => other.to_string(),
        }
    }

    /// The event's stderr line, when it has one.
    pub fn line(&self) -> Option<String> {
        Some(match self {
            FlowEvent::FlowStarted { flow, run, steps, resumed } => {
                let verb = if *resumed { "resumed" } else { "started" };
                format!("flow ▸ {flow} {verb} ({steps} steps, run {run})")
            }
            FlowEvent::GroupEntered { path, attempt, of, .. } => format!("flow ▸ {path} (attempt {attempt} of {of})"),
            FlowEvent::StepFinished { path, outcome, reason, note, replayed, .. } => {
                let mark = if outcome == "passed" { "✓" } else { "✗" };
                let why = reason.as_ref().or(note.as_ref().filter(|_| outcome != "passed"));
                let why = why.map(|why| format!(": {why}")).unwrap_or_default();
                let replayed = if *replayed { " (from the record)" } else { "" };
                format!("step {mark} {path}{why}{replayed}")
            }
            FlowEvent::NodeSkipped { path, because } => format!("skip · {path} ({because})"),
            FlowEvent::GroupRepeating { path, attempt, of, reason } => {
                format!("retreat ↺ {path} ({attempt} of {of}): {reason}")
            }
            FlowEvent::HandoffIncomplete { path, missing } => {
                format!("handoff ✗ {path}: did not hand over {}", missing.join(", "))
            }
            FlowEvent::GroupLeft { path, failed, attempts, exhausted, .. } => {
                let how = match (failed, exhausted) {
                    (false, _) => "clean",
                    (true, true) => "failed, exhausted",
                    (true, false) => "failed",
                };
                format!("flow ◂ {path} {how} after {attempts} attempt{}", if *attempts == 1 { "" } else { "s" })
            }
            FlowEvent::TransitionRefused { path, moment, attempt, reason } => {
                format!("refused ⊘ {path} at {moment} (attempt {attempt}): {reason}")
            }
            FlowEvent::FlowFinished { flow, ran, failed, skipped, retreats, clean, .. } => format!(
                "flow ■ {flow} {}: ran {ran}, failed {failed}, skipped {skipped}, retreats {retreats}",
                if *clean { "clean" } else { "not clean" }
            ),
            FlowEvent::FlowPaused { path, reason, resume, .. } => match resume {
                Some(command) => format!(
                    "pause ‖ {path}: {reason}\n  to continue, record the verdict (`--operator failed` to refuse, \
                     `--note TEXT` says why):\n  {command}"
                ),
                None => format!("pause ‖ {path}: {reason}\n  (no record was kept, so this walk cannot be resumed)"),
            },
            FlowEvent::HookRan { point, path, moment, tool, verdict, reason, replayed, .. } => {
                let replayed = if *replayed { " (from the record)" } else { "" };
                let at = moment.as_ref().or(tool.as_ref()).map(|at| format!(" {at}")).unwrap_or_default();
                let why = reason.as_ref().map(|why| format!(" ({why})")).unwrap_or_default();
                format!("hook · {point} {path}{at}: {verdict}{why}{replayed}")
            }
            FlowEvent::Approval { step, name, by, verdict, reason, .. } => {
                let why = reason.as_ref().map(|why| format!(" ({why})")).unwrap_or_default();
                format!("approve · {step} {name}: {verdict} by the {by}{why}")
            }
            FlowEvent::ToolRequested { name, args, .. } => format!("  call {name} {}", args_preview(args)),
            FlowEvent::ToolCompleted { name, status, content, .. } if status != "ok" => {
                // Why, on the line: its first line, clipped (the JSON event has it whole).
                let first = archmax_program::text::first_line(content);
                let why = if first.is_empty() {
                    String::new()
                } else {
                    format!(": {}", archmax_program::text::cut_with_ellipsis(first, 160))
                };
                format!("  call {name} failed{why}")
            }
            FlowEvent::Warning { step, code, message, rule } => {
                let rule = rule.as_ref().map(|rule| format!(" [{rule}]")).unwrap_or_default();
                format!("warning [{code}] {step}: {message}{rule}")
            }
            FlowEvent::LayerReady { .. }
            | FlowEvent::StepStarted { .. }
            | FlowEvent::Session { .. }
            | FlowEvent::ToolCompleted { .. } => return None,
        })
    }
}

/// `inputTokens` → `input_tokens`.
fn snake_case(name: &str) -> String {
    let mut snake = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

/// The first plain argument of a call, for the one-line rendering.
fn args_preview(args: &Value) -> String {
    let Some(object) = args.as_object() else { return String::new() };
    object
        .iter()
        .find_map(|(key, value)| match value {
            Value::String(text) => Some(format!("{key}={}", archmax_program::text::first_chars(text, 60))),
            Value::Array(items) => {
                Some(format!("{key}=[{}]", items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")))
            }
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_says_why_on_its_line() {
        let failed = |content: &str| FlowEvent::ToolCompleted {
            step: "root.a".to_string(),
            name: "write_file".to_string(),
            status: "error".to_string(),
            content: content.to_string(),
        };
        let line = failed("Error: write_file has no argument 'path'; it takes 'file_path', 'content'\nmore").line();
        assert_eq!(
            line.as_deref(),
            Some("  call write_file failed: Error: write_file has no argument 'path'; it takes 'file_path', 'content'")
        );
        assert_eq!(failed("").line().as_deref(), Some("  call write_file failed"));
        let long = failed(&"x".repeat(500)).line().unwrap_or_default();
        assert!(long.ends_with('…') && long.chars().count() < 200, "{long}");
    }

    #[test]
    fn snake_names_rename_the_event_and_its_fields_but_not_what_a_step_gave() {
        let mut gives = Map::new();
        gives.insert("specificationId".to_string(), Value::from("s-1"));
        let event = FlowEvent::StepStarted {
            path: "root.a".to_string(),
            step_kind: "llm".to_string(),
            state: None,
            attempt: 1,
            replayed: false,
        };
        assert_eq!(event.json(), r#"{"event":"step-started","path":"root.a","stepKind":"llm","attempt":1}"#);
        assert_eq!(
            event.json_named(EventNames::Snake),
            r#"{"kind":"step-started","path":"root.a","step_kind":"llm","attempt":1}"#
        );
        let left = FlowEvent::GroupLeft {
            path: "root".to_string(),
            failed: false,
            gave: gives,
            attempts: 1,
            exhausted: false,
        };
        assert_eq!(
            left.json_named(EventNames::Snake),
            r#"{"kind":"group-left","path":"root","failed":false,"gave":{"specificationId":"s-1"},"attempts":1,"exhausted":false}"#
        );
    }
}
