//! Phase 1 of a sub-workflow call, on the caller: the dispatch checks and the child's
//! session.
//!
//! [`Turn::prepare_delegation`] numbers the dispatch and announces it, then checks the
//! call in the order the spec gives (depth, cycle, argument resolution, an unknown or
//! disabled target, the target's `manual` entry, missing then mistyped parameters), then
//! creates the child's session, seeded only with `trigger` and the arguments. The one
//! thing to know: a refusal here ran nothing and created nothing but the dispatch's
//! number; it is answered to the caller as a blocked call it may correct.

use serde_json::{Map, Value};

use archmax_program::program::{StateId, TriggerProgram, ValueType, WorkflowId, WorkflowProgram};
use archmax_program::reference::{TemplatePart, VarPath, parse_template};
use archmax_program::tools::delegation_target;

use crate::events::Event;
use crate::kernel::{Refusal, Rule};
use crate::session::TrailKind;
use crate::session::{Head, Message, SessionState, Status, TrailStep, Variable};

use super::super::Turn;
use super::super::calls::{Answer, Caller};
use super::{MAX_DEPTH, Meta, Prepared, copy_attachment, manual};

/// Longest input value the opening message shows inline.
const OPENING_VALUE_CHARS: usize = 200;
/// Longest opening message before inputs are only named.
const OPENING_TOTAL_CHARS: usize = 1_000;

/// The value at `path` in `variables`, with its type.
fn value_at<'v>(path: &VarPath, variables: &'v Value) -> Option<&'v Value> {
    crate::kernel::value_at(variables.get(&path.root)?, &path.segments)
}

/// Resolves one argument: a whole-argument reference keeps the value's type, mixed text
/// is substituted as text. `Err` names what does not resolve.
pub(in crate::interp) fn resolve_argument(value: &Value, variables: &Value) -> Result<Value, String> {
    match value {
        Value::String(text) if text.contains("${{") => {
            let template = parse_template(text).map_err(|error| format!("`{text}` is malformed: {}", error.message))?;
            if let [TemplatePart::Reference { path, .. }] = template.parts.as_slice() {
                return value_at(path, variables)
                    .cloned()
                    .ok_or_else(|| format!("`{text}` does not resolve: `{}` is not set", path.root));
            }
            let mut out = String::with_capacity(text.len());
            for part in &template.parts {
                match part {
                    TemplatePart::Literal(literal) => out.push_str(literal),
                    TemplatePart::Reference { path, .. } => match value_at(path, variables) {
                        Some(Value::String(found)) => out.push_str(found),
                        Some(found) => out.push_str(&found.to_string()),
                        None => return Err(format!("`{text}` does not resolve: `{}` is not set", path.root)),
                    },
                }
            }
            Ok(Value::String(out))
        }
        Value::Array(items) => items.iter().map(|item| resolve_argument(item, variables)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(key, item)| resolve_argument(item, variables).map(|resolved| (key.clone(), resolved)))
            .collect::<Result<Map<String, Value>, String>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

/// The opening message of a child: its inputs, inline where short.
fn opening_message(inputs: &Map<String, Value>) -> String {
    let mut shown = Vec::new();
    let mut named = Vec::new();
    let mut total = 0;
    for (name, value) in inputs {
        let inline = match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Some(value.to_string()),
            _ => None,
        };
        match inline {
            Some(text) if text.chars().count() <= OPENING_VALUE_CHARS && total + text.len() <= OPENING_TOTAL_CHARS => {
                total += text.len();
                shown.push(format!("- {name}: {text}"));
            }
            _ => named.push(name.as_str()),
        }
    }
    let mut text = String::from("Another workflow started this session to do its work.");
    if !shown.is_empty() {
        text.push_str(" Its inputs:\n");
        text.push_str(&shown.join("\n"));
    }
    if !named.is_empty() {
        text.push_str(&format!(
            "\n{} {} also set; read {} with archmax_get_variables.",
            named.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", "),
            if named.len() == 1 { "is" } else { "are" },
            if named.len() == 1 { "it" } else { "them" }
        ));
    }
    text
}

/// What a call that passed the dispatch checks goes on with: its arguments resolved, the
/// target workflow and the target's `manual` entry.
struct Checked<'r> {
    resolved: Map<String, Value>,
    target: &'r WorkflowProgram,
    manual: &'r TriggerProgram,
}

impl<'r> Turn<'r> {
    /// Phase 1: the dispatch checks and the child's session. `Err` is a call answered at
    /// once: a refusal, or a case's mock standing in for the child.
    pub(in crate::interp) async fn prepare_delegation(
        &mut self,
        id: StateId,
        call_id: &str,
        tool: &str,
        args: &Value,
        caller: Caller,
    ) -> Result<Prepared, Answer> {
        let (mut meta, chain) = self.open_dispatch(id, call_id, tool, args).await;
        let checked = self.check_dispatch(&mut meta, &chain, args)?;
        // A case's mock stands in for the run (after every refusal: a disabled target,
        // a broken call are refused all the same).
        if let Some(mock) = self.runtime.mock_for(tool, &meta.args) {
            let result = mock.result.clone();
            return Err(self.serve_mock(&meta, checked.manual, &result, caller));
        }
        self.create_child(meta, checked, chain).await
    }

    /// Numbers the dispatch (skipping child ids a crash left taken) and announces it.
    /// Returns its record and the chain of workflows above the child.
    async fn open_dispatch(&mut self, id: StateId, call_id: &str, tool: &str, args: &Value) -> (Meta, Vec<String>) {
        let here = self.slug(id).to_string();
        let slug = delegation_target(tool).unwrap_or_default().to_string();
        self.session.head.delegations += 1;
        // A child created just before a crash outlives the counter that named it: skip
        // ids that are taken.
        while self
            .runtime
            .store()
            .read(&self.session.id.child(self.session.head.delegations))
            .await
            .ok()
            .flatten()
            .is_some()
        {
            self.session.head.delegations += 1;
        }
        let number = self.session.head.delegations;
        let depth = self.session.head.ancestors.len() + 1;
        let meta = Meta {
            dispatch_id: format!("subwf-{number}"),
            call_id: call_id.to_string(),
            slug: slug.clone(),
            target: WorkflowId(0),
            child: self.session.id.child(number),
            state: here.clone(),
            args: args.clone(),
            started: self.now(),
            span: tracing::Span::current(),
        };
        let mut chain: Vec<String> = self.session.head.ancestors.clone();
        chain.push(self.session.head.workflow.clone());
        self.emit(Event::SubWorkflowStart {
            state: here,
            workflow: slug.clone(),
            dispatch_id: meta.dispatch_id.clone(),
            depth: depth as u32,
            chain: chain.iter().cloned().chain([slug]).collect(),
            call_id: Some(call_id.to_string()),
        });
        (meta, chain)
    }

    /// A refused dispatch: its result event, and the caller's answer.
    fn refuse_dispatch(&self, meta: &Meta, rule: Rule, reason: String) -> Answer {
        self.sub_result(meta, "error", Some(format!("{}: {reason}", rule.name())), Vec::new());
        Answer::error(Refusal::Dispatch { rule, workflow: &meta.slug, reason: &reason }.text())
    }

    /// The dispatch checks, in the spec's order; `meta` learns the resolved arguments and
    /// the target as they are known.
    fn check_dispatch(&self, meta: &mut Meta, chain: &[String], args: &Value) -> Result<Checked<'r>, Answer> {
        let program = self.program();
        let slug = meta.slug.clone();
        let depth = chain.len();
        if depth > MAX_DEPTH {
            let reason = format!(
                "it would run at depth {depth}, and the limit is {MAX_DEPTH} (chain {} → {slug})",
                chain.join(" → ")
            );
            return Err(self.refuse_dispatch(meta, Rule::DelegationDepthExceeded, reason));
        }
        if chain.contains(&slug) {
            let reason = format!("'{slug}' is already running in this chain ({} → {slug})", chain.join(" → "));
            return Err(self.refuse_dispatch(meta, Rule::DelegationCycle, reason));
        }
        let resolved = self.resolve_arguments(meta, args)?;
        meta.args = Value::Object(resolved.clone());
        let Some((target_id, target)) = program.workflow(&slug) else {
            let reason = format!("the workspace has no workflow '{slug}'");
            return Err(self.refuse_dispatch(meta, Rule::DelegationUnknownWorkflow, reason));
        };
        meta.target = target_id;
        if target.disabled {
            let reason = format!("workflow '{slug}' is disabled and starts no new sessions");
            return Err(self.refuse_dispatch(meta, Rule::DelegationDisabled, reason));
        }
        let Some(manual) = manual(target, program).map(|index| &target.triggers[index]) else {
            let reason = format!("workflow '{slug}' declares no `manual` entry");
            return Err(self.refuse_dispatch(meta, Rule::DelegationNotDelegatable, reason));
        };
        self.check_parameters(meta, manual, &resolved)?;
        Ok(Checked { resolved, target, manual })
    }

    /// The call's arguments with `${{…}}` resolved against the caller's variables.
    fn resolve_arguments(&self, meta: &Meta, args: &Value) -> Result<Map<String, Value>, Answer> {
        let variables = self.session.variable_values();
        let Value::Object(raw) = args else {
            let reason = "the arguments must be an object".to_string();
            return Err(self.refuse_dispatch(meta, Rule::DelegationInvalidParam, reason));
        };
        let mut resolved = Map::new();
        for (name, value) in raw {
            match resolve_argument(value, &variables) {
                Ok(value) => {
                    resolved.insert(name.clone(), value);
                }
                Err(problem) => {
                    let reason = format!("argument '{name}': {problem}");
                    return Err(self.refuse_dispatch(meta, Rule::DelegationUnresolvedParam, reason));
                }
            }
        }
        Ok(resolved)
    }

    /// Missing parameters first, then each argument against its declared parameter.
    fn check_parameters(
        &self,
        meta: &Meta,
        manual: &TriggerProgram,
        resolved: &Map<String, Value>,
    ) -> Result<(), Answer> {
        let program = self.program();
        let missing: Vec<String> = manual
            .requires
            .iter()
            .map(|entry| program.str(entry.name))
            .filter(|name| !resolved.contains_key(*name))
            .map(|name| format!("'{name}'"))
            .collect();
        if !missing.is_empty() {
            let reason = format!("it needs {}", missing.join(", "));
            return Err(self.refuse_dispatch(meta, Rule::DelegationMissingParam, reason));
        }
        let today = crate::values::Today::at(self.now());
        for (name, value) in resolved {
            let Some(entry) = manual.requires.iter().find(|entry| program.str(entry.name) == name) else {
                let declared: Vec<&str> = manual.requires.iter().map(|entry| program.str(entry.name)).collect();
                let reason = format!("'{name}' is not a parameter (the parameters are {})", declared.join(", "));
                return Err(self.refuse_dispatch(meta, Rule::DelegationInvalidParam, reason));
            };
            if let Err(problem) = crate::values::check(program, entry, value, &today) {
                return Err(self.refuse_dispatch(meta, Rule::DelegationInvalidParam, problem));
            }
        }
        Ok(())
    }

    /// The child: seeded with the arguments only, `file` ones copied across, and created
    /// in the store. The kernel has refused every `file` argument this state may not read
    /// (its whole decision for a `read_file` of the path) before the call got here.
    async fn create_child(&mut self, meta: Meta, checked: Checked<'r>, chain: Vec<String>) -> Result<Prepared, Answer> {
        let program = self.program();
        let Checked { resolved, target, manual } = checked;
        let child_workspace = match self.runtime.workspace(&meta.child) {
            Ok(workspace) => workspace,
            Err(error) => {
                return Err(self.not_started(&meta, format!("the child session's files are unavailable: {error}")));
            }
        };
        let mut seeds = resolved.clone();
        for entry in manual.requires.iter().filter(|entry| entry.ty == Some(ValueType::File)) {
            let name = program.str(entry.name);
            let Some(Value::String(path)) = resolved.get(name) else {
                continue;
            };
            match copy_attachment(&self.workspace, path, &child_workspace, self.runtime.limits().file_bytes) {
                Ok(copy) => {
                    seeds.insert(name.to_string(), Value::String(copy));
                }
                Err(problem) => {
                    let reason = format!("the file argument '{name}': {problem}");
                    return Err(self.refuse_dispatch(&meta, Rule::DelegationInvalidParam, reason));
                }
            }
        }
        let session = self.child_session(&meta, target, manual, &seeds, chain);
        match self.runtime.store().create(&session).await {
            Ok(writer) => {
                // The child is pinned to its workflow's program like any session.
                self.runtime.keep_spec(&meta.child, target).await;
                Ok(Prepared { meta, session, writer })
            }
            Err(error) => Err(self.not_started(&meta, format!("the child session could not be created: {error}"))),
        }
    }

    /// The child's first state: at its `manual` entry, `seeds` locked (`title` excepted),
    /// `trigger` set to `manual`, one opening message.
    fn child_session(
        &self,
        meta: &Meta,
        target: &WorkflowProgram,
        manual: &TriggerProgram,
        seeds: &Map<String, Value>,
        chain: Vec<String>,
    ) -> SessionState {
        let entry_slug = self.program().str(target.state(manual.entry).slug).to_string();
        let now = self.now();
        let mut variables = std::collections::BTreeMap::new();
        for (name, value) in seeds {
            variables.insert(name.clone(), Variable { value: value.clone(), locked: name != "title" });
        }
        variables.insert("trigger".to_string(), Variable { value: Value::String("manual".to_string()), locked: true });
        SessionState {
            id: meta.child.clone(),
            seq: 0,
            head: Head {
                workflow: meta.slug.clone(),
                spec_hash: target.spec_hash.clone(),
                position: Some(entry_slug.clone()),
                entry_state: Some(entry_slug.clone()),
                trigger: Some("manual".to_string()),
                status: Status::Running,
                parent: Some(self.session.id.clone()),
                ancestors: chain,
                dispatch_id: Some(meta.dispatch_id.clone()),
                created_at: now,
                updated_at: now,
                ..Head::default()
            },
            variables,
            trail: vec![TrailStep::new(&entry_slug, TrailKind::Trigger, Some("manual".to_string()), now)],
            messages: vec![Message::User { text: opening_message(seeds), opening: Some(true) }],
        }
    }
}
