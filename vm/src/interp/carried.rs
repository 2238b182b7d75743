//! What a delivery or a firing from outside may write into a session: the members its
//! trigger declares, and nothing else.
//!
//! What a host hands a session at its boundary lands locked and replaces what was there,
//! so without this rule the right to fire one trigger would be the right to rewrite every
//! locked variable of the session it reaches: an `order_id` screened at the start, the
//! value a `paths:` guard reads. A trigger therefore declares what a firing of it
//! carries: the names in its `requires`, and the first name of its `session:` and
//! `message:` paths (the members the runner reads to route the firing). `title` is
//! always accepted: it is never locked and no guard can rely on it. A trigger the
//! workflow does not declare (a delivery let through with `--undeclared`, or by an admin)
//! declares nothing, so it carries nothing.
//!
//! The one thing to know: [`Runtime::deliver`] holds every delivery to this rule and
//! [`Runtime::run_firing`] every firing from outside (a webhook), so `archmax deliver`,
//! `POST /v1/sessions/{id}/deliver` and `POST /v1/triggers/{trigger}` refuse the same
//! members in the same words. A start through [`Runtime::run_turn`] (`archmax run`, a
//! `manual` start) still takes any seeds: its caller chooses a session's values.

use serde_json::{Map, Value};

use archmax_program::program::{Program, TriggerProgram};

use crate::runtime::FieldProblem;

/// Which seeds a turn takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Carry {
    /// Any seeds: a host's start (`archmax run --variables`, a `manual` start).
    AnySeeds,
    /// Only the members the fired trigger declares: a firing from outside.
    Declared,
}

/// The members a firing of `trigger` may carry, in declaration order: its `requires`,
/// then the first names of its `session:` and `message:` paths.
pub fn declared_members<'p>(program: &'p Program, trigger: &'p TriggerProgram) -> Vec<&'p str> {
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

/// `'a', 'b'`.
fn quoted(names: &[&str]) -> String {
    names.iter().map(|name| format!("'{name}'")).collect::<Vec<_>>().join(", ")
}
