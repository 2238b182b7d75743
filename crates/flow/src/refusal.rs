//! A refused call of a flow step: the rule it was refused under and the sentence naming
//! what was refused.
//!
//! The rules are the kernel's registry ([`archmax_vm::kernel::Rule`]). The kernel decides
//! every call first ([`archmax_vm::kernel::decide_scoped_call`], its verdict's rule and
//! sentence made a `Refused` by [`Refused::from_verdict`]): `tool.unknown` for a name
//! that is none of the step's tools, `tool.path-argument`, `zone.escape` (a path out of
//! the workspace) and `zone.runtime-internal` (the flow's own records), then the write
//! scopes' `scope.*`. The gate refuses under `gate.*`. So a refusal carries an id
//! `archmax explain` explains, on the failed result the model reads and on the warning
//! event (`rule`) that records it.

use std::fmt;

use archmax_vm::kernel::{Rule, Verdict};

/// Every rule a flow step's call is refused under; the event schema's `rule` lists
/// exactly these.
pub const FLOW_RULES: [Rule; 12] = [
    Rule::GateWithheld,
    Rule::GateMalformed,
    Rule::GateApprover,
    Rule::GateBeforeCall,
    Rule::GateAfterCall,
    Rule::ScopeDenied,
    Rule::ScopePartialOnly,
    Rule::ScopeUnmatched,
    Rule::ZoneEscape,
    Rule::ZoneRuntimeInternal,
    Rule::ToolUnknown,
    Rule::ToolPathArgument,
];

/// One refusal: its rule and its sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub rule: Rule,
    /// What was refused and why, one sentence without its rule id.
    pub reason: String,
}

impl Refused {
    pub fn new(rule: Rule, reason: impl Into<String>) -> Refused {
        Refused { rule, reason: reason.into() }
    }

    /// The kernel's refusal, when its verdict refuses.
    pub fn from_verdict(verdict: Verdict) -> Option<Refused> {
        (!verdict.allowed).then_some(Refused { rule: verdict.rule, reason: verdict.reason })
    }

    /// The failed result the model, or the next step, reads in place of the call's.
    pub fn result(&self) -> String {
        format!("Refused: {self}")
    }
}

/// The sentence with its rule, `… [scope.denied]`.
impl fmt::Display for Refused {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} [{}]", self.reason, self.rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_with_its_rule_and_every_flow_rule_is_explained() {
        let refused = Refused::new(Rule::ScopeDenied, "the rule `x=denied` refuses writing the whole file");
        assert_eq!(refused.result(), "Refused: the rule `x=denied` refuses writing the whole file [scope.denied]");
        for rule in archmax_vm::kernel::Rule::ALL.iter().filter(|rule| rule.is_flow_gate()) {
            assert!(!rule.allows(), "{rule}");
            assert!(rule.info().explanation.contains("flow step"), "{rule}: the explanation is about flows");
            assert!(FLOW_RULES.contains(rule), "{rule} is a flow rule");
        }
    }

    #[test]
    fn the_event_schema_names_every_rule_a_flow_refuses_under() {
        let schema: serde_json::Value = serde_json::from_str(crate::events::SCHEMA).expect("the schema is JSON");
        let mut listed = Vec::new();
        find_rule_enums(&schema, &mut listed);
        let expected: Vec<String> = FLOW_RULES.iter().map(|rule| rule.to_string()).collect();
        assert_eq!(listed, [expected], "the warning's `rule` lists exactly FLOW_RULES, in order");
    }

    fn find_rule_enums(value: &serde_json::Value, found: &mut Vec<Vec<String>>) {
        match value {
            serde_json::Value::Object(object) => {
                if let Some(ids) = object.get("rule").and_then(|rule| rule.get("enum")).and_then(|ids| ids.as_array()) {
                    found.push(ids.iter().filter_map(|id| id.as_str().map(str::to_string)).collect());
                }
                object.values().for_each(|inner| find_rule_enums(inner, found));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|inner| find_rule_enums(inner, found)),
            _ => {}
        }
    }
}
