//! The control tools the runtime serves itself: `archmax_advance`, `archmax_reset`,
//! `archmax_wait`, `archmax_raise`, `archmax_get_variables`, `archmax_set_variables`.
//!
//! A refusal leaves the session where it was and tells the model why, so it can correct
//! itself; only an accepted call changes the session.

use serde_json::{Value, json};

use archmax_program::program::{StateId, StateKind};
use archmax_program::zones::canonicalize;

use crate::events::Event;
use crate::session::TrailKind;
use crate::session::{Exit, ParkPhase, PendingInput, Status, ToolCall, Variable};

use super::Turn;
use super::calls::Answer;
use super::start::{validate_title, validate_variable_name};

/// Most evidence paths one advance may attach.
pub(crate) const MAX_EVIDENCE: usize = 20;
/// Longest raise code.
pub(crate) const MAX_RAISE_CODE: usize = 64;

fn text_argument<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text),
        Some(Value::String(_)) => Err(format!("`{name}` must not be empty")),
        Some(_) => Err(format!("`{name}` must be a string")),
        None => Err(format!("`{name}` is missing")),
    }
}

/// `until`: a positive duration (`30m`, `2h`, `1d`, `45s`, `500ms`) or an ISO instant.
/// An instant without an offset (`2026-03-01 09:00`) is read as UTC: the runtime has no
/// time zone of its own, and the clock line the model reads is in UTC too. A past
/// instant is due at once.
pub fn resume_at(until: &str, now_ms: u64) -> Option<u64> {
    let trimmed = until.trim();
    let digits: String = trimmed.chars().take_while(char::is_ascii_digit).collect();
    if !digits.is_empty() {
        let unit = &trimmed[digits.len()..];
        let factor: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => 0,
        };
        if factor > 0 {
            let amount: u64 = digits.parse().ok()?;
            return (amount > 0).then(|| now_ms.saturating_add(amount.saturating_mul(factor)));
        }
    }
    // Instants are ASCII; anything else is not one (and byte slicing below stays safe).
    if !trimmed.is_ascii() || trimmed.len() < 10 {
        return None;
    }
    let normalized = if trimmed.len() >= 11 && trimmed.as_bytes()[10] == b' ' {
        format!("{}T{}", &trimmed[..10], &trimmed[11..])
    } else {
        trimmed.to_string()
    };
    let with_seconds = {
        // YYYY-MM-DDTHH:MM (no seconds) is accepted too.
        let bytes = normalized.as_bytes();
        if bytes.len() >= 16 && (bytes.len() == 16 || !bytes[16].is_ascii_digit() && bytes[16] != b':') {
            format!("{}:00{}", &normalized[..16], &normalized[16..])
        } else {
            normalized
        }
    };
    let with_offset =
        if with_seconds.ends_with('Z') || with_seconds.ends_with('z') || with_seconds[10..].contains(['+', '-']) {
            with_seconds
        } else {
            format!("{with_seconds}Z")
        };
    let (seconds, nanos) = archmax_program::values::parse_date_time(&with_offset)?;
    let at = seconds.max(0) as u64 * 1000 + u64::from(nanos / 1_000_000);
    Some(at.max(now_ms))
}

/// `archmax_raise`'s `code` (one line, at most 64 characters) and `reason`.
pub(super) fn raise_arguments(args: &Value) -> Result<(String, String), String> {
    let code = text_argument(args, "code")?.trim().to_string();
    if code.chars().count() > MAX_RAISE_CODE || code.contains('\n') {
        return Err(format!("`code` must be one line of at most {MAX_RAISE_CODE} characters"));
    }
    let reason = text_argument(args, "reason")?.to_string();
    Ok((code, reason))
}

impl Turn<'_> {
    /// A `file` value names a file that is there, within its `maxSize`.
    pub(super) fn check_file_value(
        &self,
        entry: &archmax_program::program::SignatureEntry,
        value: &Value,
    ) -> Result<(), String> {
        if entry.ty != Some(archmax_program::program::ValueType::File) {
            return Ok(());
        }
        let name = self.program().str(entry.name);
        let Value::String(path) = value else {
            return Ok(());
        };
        let canonical =
            canonicalize(path).map_err(|_| format!("'{name}': '{path}' climbs above the workspace root"))?;
        let found = self.workspace.stat(&canonical).map_err(|error| format!("'{name}': {error}"))?;
        match found {
            None => Err(format!("'{name}' names '{path}', and there is nothing there; write the file first")),
            Some(found) if found.is_dir => Err(format!("'{name}' names the folder '{path}', not a file")),
            Some(found) => match entry.rules.max_size {
                Some(limit) if found.size > limit => {
                    Err(format!("'{name}': '{path}' is {} bytes, over its maxSize of {limit}", found.size))
                }
                _ => Ok(()),
            },
        }
    }
}

/// An accepted advance, not yet taken.
pub(super) struct Advance {
    pub target: StateId,
    pub to: String,
    pub reason: String,
    pub attached: Vec<String>,
}

impl Turn<'_> {
    /// Checks an advance from the current state, in the spec's order: the arguments, the
    /// evidence (only into a human state, at most 20 paths the agent can read), the
    /// state's `requires`, then the edge. `Err` is the refusal; nothing moved.
    pub(super) fn check_advance(&self, args: &Value) -> Result<Advance, String> {
        let id = self.position_id();
        let here = self.slug(id).to_string();
        let to = text_argument(args, "to")?.to_string();
        let reason = text_argument(args, "reason")?.to_string();
        let state = self.state(id);
        let program = self.program();
        let edge = state.transitions.iter().find(|transition| self.slug(transition.target) == to);
        let mut attached = Vec::new();
        if let Some(evidence) = args.get("evidence").filter(|evidence| !evidence.is_null()) {
            let into_human = edge.is_some_and(|transition| self.state(transition.target).kind == StateKind::Human);
            if !into_human {
                return Err(format!("evidence can be attached only to a human decision, and '{to}' is not one here"));
            }
            let Value::Array(items) = evidence else {
                return Err("`evidence` must be a list of paths".to_string());
            };
            let variables = self.session.variable_values();
            if items.len() > MAX_EVIDENCE {
                return Err(format!("at most {MAX_EVIDENCE} evidence paths may be attached, not {}", items.len()));
            }
            for item in items {
                let Value::String(path) = item else {
                    return Err("`evidence` must be a list of paths".to_string());
                };
                // Readable by this agent: the kernel's whole decision for a `read_file` of
                // the path, so evidence never shows an approver what the agent may not read.
                let Some(canonical) = canonicalize(path).ok().filter(|canonical| !canonical.is_empty()) else {
                    return Err(format!("'{path}' is not a path the agent can read"));
                };
                if let Err(verdict) = crate::kernel::may_read(&self.policy(), state, &canonical, &variables) {
                    return Err(format!(
                        "'{path}' is not a file the agent may read ({}): {}",
                        verdict.rule,
                        crate::kernel::bare_reason(&verdict)
                    ));
                }
                if !attached.contains(&canonical) {
                    attached.push(canonical);
                }
            }
        }
        let missing: Vec<&str> = state
            .requires
            .iter()
            .map(|name| program.str(*name))
            .filter(|name| !self.session.variables.contains_key(*name))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "'{here}' requires {} to be set before leaving; set {} with archmax_set_variables",
                missing.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(", "),
                if missing.len() == 1 { "it" } else { "them" }
            ));
        }
        let Some(transition) = edge else {
            let edges: Vec<&str> = state.transitions.iter().map(|transition| self.slug(transition.target)).collect();
            return Err(if edges.is_empty() {
                format!("'{here}' is terminal and has no transitions")
            } else {
                format!("'{here}' has no transition to '{to}'; the valid targets are {}", edges.join(", "))
            });
        };
        Ok(Advance { target: transition.target, to, reason, attached })
    }

    pub(super) fn advance(&mut self, call: &ToolCall, args: &Value, advanced: &mut Option<String>) -> Answer {
        let refuse = |reason: String| Answer::refused(format!("archmax_advance rejected: {reason}"));
        if let Some(landed) = advanced.as_ref() {
            return refuse(format!(
                "this message already moved the session to '{landed}'; take one transition per message"
            ));
        }
        let Advance { target, to, reason, attached } = match self.check_advance(args) {
            Ok(advance) => advance,
            Err(problem) => return refuse(problem),
        };
        let here = self.slug(self.position_id()).to_string();
        self.emit(Event::Advance {
            from: here,
            to: to.clone(),
            reason: Some(reason.clone()),
            call_id: Some(call.id.clone()),
        });
        self.move_to(target);
        self.push_trail(&to, TrailKind::Agent, Some(reason));
        self.session.head.rejected = None;
        self.session.head.failed_delegations.clear();
        *advanced = Some(to.clone());
        if self.state(target).kind == StateKind::Human {
            self.enter_human(target, attached);
        }
        Answer::ok(format!("Advanced to state '{to}'. You may now use the tools allowed in this state."))
    }

    pub(super) fn reset(&mut self, _call: &ToolCall, args: &Value) -> Answer {
        let reason = match text_argument(args, "reason") {
            Ok(reason) => reason.to_string(),
            Err(problem) => return Answer::error(format!("archmax_reset rejected: {problem}")),
        };
        let entry_slug = self.session.head.entry_state.clone();
        let target = entry_slug
            .as_deref()
            .and_then(|slug| self.state_id_of(slug))
            .or_else(|| self.trigger.map(|trigger| trigger.entry));
        let target = target.unwrap_or(self.workflow.entry);
        let to = self.slug(target).to_string();
        self.move_to(target);
        self.push_trail(&to, TrailKind::Reset, Some(reason));
        self.session.head.rejected = None;
        self.session.head.failed_delegations.clear();
        // The agent's own locks are released; the host's seeds stay locked.
        for name in std::mem::take(&mut self.session.head.agent_locks) {
            if let Some(variable) = self.session.variables.get(&name).cloned() {
                self.set_variable(&name, Variable { value: variable.value, locked: false });
            }
        }
        self.park_if_human(target);
        Answer::ok(format!(
            "Reset to the entry state '{to}'. The transcript, files and variables are kept (your own locks are released); start this state's work again."
        ))
    }

    pub(super) fn wait(&mut self, call: &ToolCall, args: &Value) -> Answer {
        let refuse = |reason: String| Answer::error(format!("archmax_wait rejected: {reason}"));
        let reason = match text_argument(args, "reason") {
            Ok(reason) => reason.to_string(),
            Err(problem) => return refuse(problem),
        };
        let now = self.now();
        let resume = match args.get("until") {
            None | Some(Value::Null) => None,
            Some(Value::String(until)) => match resume_at(until, now) {
                Some(at) => Some(crate::clock::rfc3339(at)),
                None => {
                    return refuse(format!(
                        "`until` must be a duration such as `30m`, `2h` or `1d`, or an ISO instant such as `2026-03-01T09:00:00Z`, not `{until}`"
                    ));
                }
            },
            Some(_) => return refuse("`until` must be a string".to_string()),
        };
        let id = self.position_id();
        let state = self.state(id);
        let here = self.slug(id).to_string();
        let parks = self.session.head.park_counts.get(&here).copied().unwrap_or(0);
        if let Some(bound) = state.budget.max_parks
            && parks >= bound
        {
            let failure = format!("state '{here}' exceeded its park budget (maxParks: {bound})");
            self.session.head.rejected = Some(failure.clone());
            return Answer::error(format!("archmax_wait rejected: {failure}"));
        }
        let spoke = self.ledger.since_open(&self.session.messages).iter().any(
            |message| matches!(message, crate::session::Message::Assistant { text, .. } if !text.trim().is_empty()),
        );
        self.session.head.park_counts.insert(here.clone(), parks + 1);
        self.session.head.pending_input = Some(PendingInput {
            state: here.clone(),
            reason: reason.clone(),
            parked_at: crate::clock::rfc3339(now),
            resume_at: resume.clone(),
            child: None,
        });
        self.session.head.status = Status::AwaitingInput;
        self.session.head.rejected = None;
        self.session.head.failed_delegations.clear();
        self.session.head.park_phase = Some(if spoke { ParkPhase::Suspend } else { ParkPhase::Closing });
        self.emit(Event::Parked {
            state: here.clone(),
            awaiting: "input".to_string(),
            reason: Some(reason),
            resume_at: resume.clone(),
            call_id: Some(call.id.clone()),
        });
        let due = resume
            .map(|at| format!(" It is due to resume at {at}, though nothing is scheduled here: the host delivers."))
            .unwrap_or_default();
        Answer::ok(format!(
            "Waiting in '{here}'.{due} Stop working now; the session resumes in this state when something arrives."
        ))
    }

    pub(super) fn raise(&mut self, call: &ToolCall, args: &Value, alone: bool) -> Answer {
        let refuse = |reason: String| Answer::error(format!("archmax_raise rejected: {reason}"));
        if !alone {
            return refuse("call archmax_raise alone in its message, with no other tool call beside it".to_string());
        }
        let (code, reason) = match raise_arguments(args) {
            Ok(arguments) => arguments,
            Err(problem) => return refuse(problem),
        };
        let here = self.session.head.position.clone().unwrap_or_default();
        self.session.head.exit =
            Some(Exit { code: code.clone(), reason: reason.clone(), state: here.clone(), raised: true });
        self.session.head.status = Status::Failed;
        self.session.head.rejected = None;
        self.session.head.failed_delegations.clear();
        self.emit(Event::Raised {
            state: here.clone(),
            code: code.clone(),
            reason: reason.clone(),
            call_id: Some(call.id.clone()),
        });
        self.emit(Event::StateLeave { state: here, next: None });
        Answer::ok(format!("The session has ended with the failure `{code}`."))
    }

    pub(super) fn get_variables(&mut self, args: &Value) -> Answer {
        let name = args.get("name").and_then(Value::as_str).map(str::trim).filter(|name| !name.is_empty());
        let path = args.get("path").and_then(Value::as_str).map(str::trim).filter(|path| !path.is_empty());
        let pretty = |value: &Value| serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        let Some(name) = name else {
            let all: serde_json::Map<String, Value> = self
                .session
                .variables
                .iter()
                .map(|(name, variable)| (name.clone(), json!({ "value": variable.value, "locked": variable.locked })))
                .collect();
            return Answer::ok(pretty(&Value::Object(all)));
        };
        let Some(variable) = self.session.variables.get(name) else {
            let set: Vec<&str> = self.session.variables.keys().map(String::as_str).collect();
            return Answer::error(format!(
                "Error: no variable '{name}' is set (set: {})",
                if set.is_empty() { "none yet".to_string() } else { set.join(", ") }
            ));
        };
        match path {
            None => Answer::ok(pretty(&json!({ "value": variable.value, "locked": variable.locked }))),
            Some(path) => {
                let full = format!("{name}.{path}");
                let resolved = archmax_program::reference::parse_var_path(&full)
                    .ok()
                    .and_then(|parsed| crate::kernel::value_at(&variable.value, &parsed.segments));
                match resolved {
                    Some(value) => Answer::ok(pretty(&json!({ "value": value }))),
                    None => Answer::error(format!("Error: `{path}` does not resolve inside '{name}'")),
                }
            }
        }
    }

    /// `archmax_set_variables`, written as state `id` (the state the model was shown when
    /// it made the call: an advance earlier in the same message does not hand the write
    /// to the state it moved to).
    pub(super) fn set_variables(&mut self, id: StateId, call: &ToolCall, args: &Value) -> Answer {
        let refuse =
            |reason: String| Answer::error(format!("archmax_set_variables rejected: {reason}; nothing was written"));
        let Some(Value::Object(values)) = args.get("variables") else {
            return refuse("`variables` must be an object of name → value".to_string());
        };
        if values.is_empty() {
            return refuse("`variables` names no variable".to_string());
        }
        let lock = match args.get("lock") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => return refuse("`lock` must be true or false".to_string()),
        };
        let here = self.slug(id).to_string();
        let program = self.program();
        let today = crate::values::Today::at(self.now());
        let mut writes: Vec<(String, Variable)> = Vec::with_capacity(values.len());
        for (name, value) in values {
            if let Err(problem) = validate_variable_name(name) {
                return refuse(problem);
            }
            if name == "trigger" {
                return refuse("'trigger' is set by the runtime and cannot be written".to_string());
            }
            if let Some(existing) = self.session.variables.get(name)
                && existing.locked
            {
                return refuse(format!("'{name}' is locked (its value is {})", existing.value));
            }
            let owner = self
                .workflow
                .states
                .iter()
                .find(|state| state.locks.iter().any(|locked| program.str(*locked) == name))
                .map(|state| program.str(state.slug));
            if let Some(owner) = owner {
                if owner != here {
                    return refuse(format!("'{name}' is owned by state '{owner}'; only that state may write it"));
                }
                if lock {
                    return refuse(format!(
                        "'{name}' is owned by this state already; `lock: true` is not accepted for it"
                    ));
                }
            }
            if name == "title" {
                if lock {
                    return refuse("'title' is never locked".to_string());
                }
                match validate_title(value) {
                    Ok(title) => writes.push((name.clone(), Variable { value: Value::String(title), locked: false })),
                    Err(problem) => return refuse(problem),
                }
                continue;
            }
            if let Some(trigger) = self.trigger
                && let Some(entry) = trigger.returns.iter().find(|entry| program.str(entry.name) == name)
            {
                if let Err(problem) = crate::values::check(program, entry, value, &today) {
                    return refuse(problem);
                }
                if let Err(problem) = self.check_file_value(entry, value) {
                    return refuse(problem);
                }
            }
            writes.push((name.clone(), Variable { value: value.clone(), locked: lock }));
        }
        if let Err(problem) = self.check_variable_bytes(&writes) {
            return refuse(problem);
        }
        let names: Vec<String> = writes.iter().map(|(name, _)| name.clone()).collect();
        for (name, variable) in writes {
            if variable.locked && !self.session.head.agent_locks.contains(&name) {
                self.session.head.agent_locks.push(name.clone());
            }
            if name == "title" {
                let title = variable.value.as_str().unwrap_or_default().to_string();
                self.emit(Event::TitleSet { title, state: Some(here.clone()), call_id: Some(call.id.clone()) });
            }
            self.set_variable(&name, variable);
        }
        self.emit(Event::VariablesSet {
            state: Some(here),
            names: names.clone(),
            locked: lock,
            call_id: Some(call.id.clone()),
        });
        Answer::ok(format!("Set {}{}.", names.join(", "), if lock { " (locked)" } else { "" }))
    }
}

impl Turn<'_> {
    /// Refuses writes that would take the session's variables past the bound on their
    /// total size, measured before anything is applied; a variable being replaced counts
    /// at its new size only.
    pub(super) fn check_variable_bytes(&self, writes: &[(String, Variable)]) -> Result<(), String> {
        check_variable_total(&self.session.variables, writes, self.runtime.limits().variable_bytes)
    }
}

/// Refuses `writes` over `existing` when the variables would pass `limit` bytes in total
/// (a replaced variable counts at its new size only).
pub(super) fn check_variable_total(
    existing: &std::collections::BTreeMap<String, Variable>,
    writes: &[(String, Variable)],
    limit: u64,
) -> Result<(), String> {
    let kept = existing
        .iter()
        .filter(|(name, _)| !writes.iter().any(|(written, _)| written == *name))
        .map(|(name, variable)| variable_size(name, &variable.value));
    let written = writes.iter().map(|(name, variable)| variable_size(name, &variable.value));
    let total = kept.chain(written).fold(0u64, u64::saturating_add);
    if total > limit {
        return Err(format!(
            "the session's variables would hold {total} bytes, over the bound of {} on their total size; \
             keep large content in a scratchpad file and store its path instead",
            archmax_stdlib::limits::bound_in_words(limit)
        ));
    }
    Ok(())
}

/// A variable's size as the bound counts it: its name plus its value as JSON, counted
/// without building the JSON text.
fn variable_size(name: &str, value: &Value) -> u64 {
    let mut counter = ByteCounter(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut counter, value);
    (name.len() as u64).saturating_add(counter.0)
}

/// A writer that keeps only the number of bytes written to it.
struct ByteCounter(u64);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(bytes.len() as u64);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::resume_at;

    #[test]
    fn until_durations_and_instants() {
        assert_eq!(resume_at("30m", 1_000), Some(1_000 + 1_800_000));
        assert_eq!(resume_at("1d", 0), Some(86_400_000));
        assert_eq!(resume_at("0m", 0), None);
        assert_eq!(resume_at("soon", 0), None);
        assert_eq!(resume_at("1d é", 0), None);
        assert_eq!(resume_at("2026-01-05T09:3é", 0), None);
        assert_eq!(resume_at("", 0), None);
        assert_eq!(resume_at("1970-01-02T00:00:00Z", 0), Some(86_400_000));
        assert_eq!(resume_at("1970-01-02 00:00", 0), Some(86_400_000));
        // A past instant is due now.
        assert_eq!(resume_at("1970-01-01T00:00:01Z", 5_000), Some(5_000));
    }
}
