//! Phase 2 of a decision: the declared denials a call runs into, the calling workflows'
//! workflow-wide ones first, then this workflow's `tools.forbid_always`, then the state's
//! `tools.forbid`.
//!
//! The one thing to know: a denial binds what a tool *does*, not only its name. A denial
//! of `read_file` on a path binds every argument that reads it (the [`mod@super::reveals`] table), so
//! a grep over a file `read_file` may not read is refused like the read, and listings hide
//! what such a denial covers ([`super::listed`]).

use archmax_program::program::StateProgram;
use archmax_program::tools::path_arguments;

use super::matching::{Match, Subject, entry_matches};
use super::refusal::{DenialScope, Refusal};
use super::{Policy, Rule, Verdict, state_name};

/// A declared denial a call ran into.
struct Denial<'p> {
    rule: Rule,
    display: &'p str,
    scope: DenialScope<'p>,
}

/// The declared denial a call runs into, if any: the callers' workflow-wide denials,
/// this workflow's, then this state's.
fn declared_denial<'p>(policy: &Policy<'p>, state: &'p StateProgram, subject: &Subject<'_>) -> Option<Denial<'p>> {
    let program = policy.program;
    for ancestor in policy.ancestors.iter().rev() {
        for entry in &ancestor.source.forbid_always {
            if !matches!(entry_matches(ancestor.program, entry, subject, true), Match::No) {
                return Some(Denial {
                    rule: Rule::ToolForbidden,
                    display: ancestor.program.str(entry.display),
                    scope: DenialScope::Caller(ancestor.workflow),
                });
            }
        }
    }
    for entry in &policy.workflow.forbid_always {
        if !matches!(entry_matches(program, entry, subject, true), Match::No) {
            return Some(Denial {
                rule: Rule::ToolForbidden,
                display: program.str(entry.display),
                scope: DenialScope::Workflow,
            });
        }
    }
    for entry in &state.guards.forbid {
        if !matches!(entry_matches(program, entry, subject, true), Match::No) {
            return Some(Denial {
                rule: Rule::ToolForbiddenHere,
                display: program.str(entry.display),
                scope: DenialScope::State(state_name(program, state)),
            });
        }
    }
    None
}

/// The refusal a call's declared denials give it: a denial of the tool itself, else a
/// denial of a tool that does what one of its path arguments does.
pub(super) fn denial(policy: &Policy<'_>, state: &StateProgram, subject: &Subject<'_>) -> Option<Verdict> {
    if let Some(found) = declared_denial(policy, state, subject) {
        let Denial { rule, display, scope } = found;
        return Some(Refusal::Denied { rule, tool: subject.tool, display, scope }.verdict());
    }
    for path in &subject.paths {
        let Some(canonical) = path.canonical.as_deref() else {
            continue;
        };
        for &reveal in path.reveals {
            for &through in reveal.denied_through().iter().filter(|through| **through != subject.tool) {
                let Some((argument, _)) = path_arguments(through).first() else {
                    continue;
                };
                let args = serde_json::json!({ *argument: canonical });
                let Ok(equivalent) = Subject::new(policy.program, through, &args, subject.variables, None) else {
                    continue;
                };
                if let Some(Denial { rule, display, scope }) = declared_denial(policy, state, &equivalent) {
                    let refusal = Refusal::DeniedThrough {
                        rule,
                        tool: subject.tool,
                        display,
                        scope,
                        reveal,
                        path: canonical,
                        through,
                    };
                    return Some(refusal.verdict());
                }
            }
        }
    }
    None
}
