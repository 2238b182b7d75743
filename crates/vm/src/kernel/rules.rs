//! The registry of every rule a tool call can be decided under.
//!
//! One table defines each rule: its dotted id (`family.name`, the text `tool-blocked`
//! events and goldens record, stable once released), whether it allows or refuses, a
//! one-line title, and a long explanation kept in `crates/vm/explain/<id>.md` (what it decides,
//! why, what an author or operator can do). `archmax explain <id>` and the rule tests read
//! this table; nothing else defines a rule id.
//!
//! The one thing to know: the table holds the kernel's rules (its precedence list, in
//! order) *and* the refusals the turn makes around the kernel (a name that is no tool,
//! arguments `${{…}}` substitution refuses, a host tool's path through a link, a
//! sub-workflow dispatch check), and a flow step's: its write scopes (`scope.*`, which the
//! kernel decides for it, [`decide_scoped_call`](super::decide_scoped_call)) and its gate
//! (`gate.*`, decided by `archmax_flow`), so every refused call carries a [`Rule`]. Every
//! refusal text the kernel decides is composed in one place
//! ([`Refusal::text`](super::Refusal::text)), a flow step's included; the gate's in
//! `archmax_flow::gate`.

use std::fmt;
use std::str::FromStr;

/// Whether a rule lets a call run or turns it away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Allows,
    Refuses,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allows => "allows",
            Outcome::Refuses => "refuses",
        }
    }
}

/// Everything the registry knows about one rule.
#[derive(Debug)]
pub struct RuleInfo {
    /// `family.name`, lowercase kebab-case on both sides of the dot.
    pub id: &'static str,
    pub outcome: Outcome,
    /// One line saying what the rule decides.
    pub title: &'static str,
    /// Markdown: what the rule decides, why, and what to do about it.
    pub explanation: &'static str,
}

macro_rules! rules {
    ($( $variant:ident = $id:literal, $outcome:ident, $title:literal; )*) => {
        /// A rule a tool call is decided under. See the module docs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule { $($variant,)* }

        impl Rule {
            /// Every rule, the kernel's in precedence order first.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            pub fn info(self) -> &'static RuleInfo {
                match self {
                    $(Rule::$variant => {
                        const INFO: RuleInfo = RuleInfo {
                            id: $id,
                            outcome: Outcome::$outcome,
                            title: $title,
                            explanation: include_str!(concat!("../../explain/", $id, ".md")),
                        };
                        &INFO
                    })*
                }
            }
        }
    };
}

rules! {
    // 1. Safety, never overridable.
    ZoneGovernancePlane = "zone.governance-plane", Refuses, "A path under `workflows/`, the authoring plane no session reaches";
    ZoneEscape = "zone.escape", Refuses, "A path that climbs above the workspace root";
    ToolPathArgument = "tool.path-argument", Refuses, "A path argument that is neither a path nor a list of paths";
    ScriptSkillOnly = "script.skill-only", Refuses, "`archmax_run` on a script outside every skill bundle";
    ToolReplyOnly = "tool.reply-only", Refuses, "Any tool call in a parked session's reply-only turn";
    ToolEval = "tool.eval", Refuses, "A call to a bare `eval` tool";
    ToolUngrantable = "tool.ungrantable", Refuses, "A call to `task`, which no state may have";
    ToolNote = "tool.note", Refuses, "A call to `archmax_note`, the runtime's note channel";
    ZoneReadOnly = "zone.read-only", Refuses, "A write into a read-only mount";
    ZoneRuntimeInternal = "zone.runtime-internal", Refuses, "Any file tool on an area that belongs to the runtime";
    ZoneRuntimeManaged = "zone.runtime-managed", Refuses, "A write into an offload area the runtime keeps";
    SkillForbidden = "skill.forbidden", Refuses, "A skill bundle a denial forbids, in this state or a calling workflow";
    SkillNotAllowed = "skill.not-allowed", Refuses, "A skill bundle the state does not enable";
    MountForbidden = "mount.forbidden", Refuses, "A mount a denial forbids, in this state or a calling workflow";
    MountNotAllowed = "mount.not-allowed", Refuses, "A governed mount the state was not given";
    MountReadOnly = "mount.read-only", Refuses, "A write into a mount the state may only read";

    // 2. Declared denials.
    ToolForbidden = "tool.forbidden", Refuses, "A call a workflow-wide denial covers, this workflow's or a caller's";
    ToolForbiddenHere = "tool.forbidden-here", Refuses, "A call the state's own `tools.forbid` covers";

    // 3. Always open.
    ToolScratchpad = "tool.scratchpad", Allows, "A granted file tool inside `scratchpad/`";
    ToolOffloadRead = "tool.offload-read", Allows, "A granted read or listing of an offload area";
    ToolControl = "tool.control", Allows, "One of the state type's control tools";

    // 4. The deciding grant, and 5. everything else.
    ToolAllowed = "tool.allowed", Allows, "A call the deciding grant allows";
    ToolEssential = "tool.essential", Allows, "A host's essential tool, which no state entry narrows";
    ToolUnresolvedVariable = "tool.unresolved-variable", Refuses, "A guard reads a variable that is not set; the session fails";
    ToolNotAllowed = "tool.not-allowed", Refuses, "A call no grant of the state allows";

    // Around the kernel: the tool-call site.
    ToolUnknown = "tool.unknown", Refuses, "A call to a name that is no tool";
    ArgumentUnresolvedReference = "argument.unresolved-reference", Refuses, "A `${{…}}` reference in the arguments that does not resolve";
    ArgumentTooLarge = "argument.too-large", Refuses, "Arguments that would grow past the bound once `${{…}}` is substituted";
    ZoneLink = "zone.link", Refuses, "A host tool's path argument that passes through a link";

    // Around the kernel: the sub-workflow dispatch checks, in their order.
    DelegationDepthExceeded = "delegation.depth-exceeded", Refuses, "A sub-workflow call deeper than the chain limit";
    DelegationCycle = "delegation.cycle", Refuses, "A sub-workflow call to a workflow already running in the chain";
    DelegationUnresolvedParam = "delegation.unresolved-param", Refuses, "A sub-workflow argument whose `${{…}}` reference does not resolve";
    DelegationUnknownWorkflow = "delegation.unknown-workflow", Refuses, "A sub-workflow call to a workflow the program does not have";
    DelegationDisabled = "delegation.disabled", Refuses, "A sub-workflow call to a disabled workflow";
    DelegationNotDelegatable = "delegation.not-delegatable", Refuses, "A sub-workflow call to a workflow with no `manual` entry";
    DelegationMissingParam = "delegation.missing-param", Refuses, "A sub-workflow call that leaves a required parameter out";
    DelegationInvalidParam = "delegation.invalid-param", Refuses, "A sub-workflow argument that is not a parameter or has the wrong type";

    // A flow step's gate (`archmax flow run`), in its order: published, the approver,
    // the `before-call` hooks, (the tool), the `after-call` hooks.
    GateWithheld = "gate.withheld", Refuses, "A flow step's `run` of a program the run did not publish";
    GateMalformed = "gate.malformed", Refuses, "A flow step's `run` whose `command` is not an argv";
    GateApprover = "gate.approver", Refuses, "A flow step's call the approver did not say yes to";
    GateBeforeCall = "gate.before-call", Refuses, "A flow step's call a `before-call` hook refused";
    GateAfterCall = "gate.after-call", Refuses, "A flow step's result an `after-call` hook withheld";

    // A flow step's write scopes, decided by the kernel before the gate: the run's, then the node's.
    ScopeDenied = "scope.denied", Refuses, "A flow step's write a `denied` scope rule matches";
    ScopePartialOnly = "scope.partial-only", Refuses, "A flow step's whole-file write or removal a `partial-only` rule matches";
    ScopeUnmatched = "scope.unmatched", Refuses, "A flow step's write no rule of a write scope matches";
}

impl Rule {
    /// The id events record, such as `tool.not-allowed`.
    pub fn as_str(self) -> &'static str {
        self.info().id
    }

    /// Whether a call decided under this rule runs.
    pub fn allows(self) -> bool {
        self.info().outcome == Outcome::Allows
    }

    /// Whether a refusal under this rule fails the session in its state (a guard that
    /// cannot be evaluated): the call is refused, and the state cannot go on.
    pub fn is_terminal(self) -> bool {
        self == Rule::ToolUnresolvedVariable
    }

    /// Whether a refusal under this rule is recorded as a `tool-blocked` event. A name
    /// that is no tool is answered without one, and a refused sub-workflow dispatch is
    /// recorded by its `sub-workflow-start` and `sub-workflow-result` pair instead.
    pub(crate) fn is_recorded_as_blocked(self) -> bool {
        self != Rule::ToolUnknown && !self.is_dispatch_check() && !self.is_flow_gate()
    }

    /// Whether this is a rule of a flow step's gate or write scopes, which only
    /// `archmax flow run` decides under; it records them on its `tool-refused` and
    /// `step-command` warnings (`rule`), never as a workflow's `tool-blocked`.
    pub fn is_flow_gate(self) -> bool {
        matches!(self.family(), "gate" | "scope")
    }

    /// Whether this is one of the sub-workflow dispatch checks.
    pub fn is_dispatch_check(self) -> bool {
        self.family() == "delegation"
    }

    /// The part of the id before the dot (`tool`, `zone`, `delegation`, …).
    pub fn family(self) -> &'static str {
        self.as_str().split_once('.').map_or("", |(family, _)| family)
    }

    /// The part of the id after the dot. A dispatch check's name is the kind a
    /// `sub-workflow-result` reason opens with (`missing-param`).
    pub fn name(self) -> &'static str {
        self.as_str().split_once('.').map_or("", |(_, name)| name)
    }

    /// The rule with this id.
    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|rule| rule.as_str() == id)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// The id is not a rule's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no rule `{0}`")]
pub struct UnknownRule(pub String);

impl FromStr for Rule {
    type Err = UnknownRule;

    fn from_str(id: &str) -> Result<Rule, UnknownRule> {
        Rule::from_id(id).ok_or_else(|| UnknownRule(id.to_string()))
    }
}

/// A rule compares equal to its id, so tables of expected verdicts read as the events do.
impl PartialEq<&str> for Rule {
    fn eq(&self, id: &&str) -> bool {
        self.as_str() == *id
    }
}

impl PartialEq<Rule> for &str {
    fn eq(&self, rule: &Rule) -> bool {
        *self == rule.as_str()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn kebab(part: &str) -> bool {
        !part.is_empty()
            && !part.starts_with('-')
            && !part.ends_with('-')
            && !part.contains("--")
            && part.chars().all(|character| character.is_ascii_lowercase() || character == '-')
    }

    #[test]
    fn every_rule_has_a_well_formed_unique_id_a_title_and_an_explanation() {
        let mut seen = BTreeSet::new();
        for rule in Rule::ALL {
            let info = rule.info();
            let (family, name) = info.id.split_once('.').unwrap_or(("", ""));
            assert!(kebab(family) && kebab(name), "`{}` is not `family.name` in kebab-case", info.id);
            assert!(seen.insert(info.id), "`{}` is defined twice", info.id);
            assert!(!info.title.is_empty() && !info.title.contains('\n'), "{}: the title is one line", info.id);
            assert!(!info.title.ends_with('.'), "{}: a title is not a sentence", info.id);
            assert!(
                info.explanation.starts_with(&format!("# {}\n", info.id)),
                "{}: the explanation opens with `# {}`",
                info.id,
                info.id
            );
            for section in ["## Why", "## What to do"] {
                assert!(info.explanation.contains(section), "{}: the explanation has no `{section}`", info.id);
            }
            assert_eq!(rule.family(), family);
            assert_eq!(rule.name(), name);
        }
    }

    #[test]
    fn an_id_parses_back_to_its_rule_and_nothing_else_parses() {
        for rule in Rule::ALL {
            assert_eq!(rule.as_str().parse::<Rule>(), Ok(*rule));
            assert_eq!(rule.to_string(), rule.as_str());
            assert!(*rule == rule.as_str());
        }
        assert_eq!("tool.not-allowd".parse::<Rule>(), Err(UnknownRule("tool.not-allowd".to_string())));
        assert_eq!(
            "AMX0301".parse::<Rule>().map_err(|error| error.to_string()),
            Err("there is no rule `AMX0301`".into())
        );
    }

    #[test]
    fn only_an_unknown_name_the_dispatch_checks_and_the_flow_gate_leave_no_tool_blocked_event() {
        let unrecorded: Vec<&str> =
            Rule::ALL.iter().filter(|rule| !rule.is_recorded_as_blocked()).map(|rule| rule.as_str()).collect();
        assert_eq!(
            unrecorded,
            [
                "tool.unknown",
                "delegation.depth-exceeded",
                "delegation.cycle",
                "delegation.unresolved-param",
                "delegation.unknown-workflow",
                "delegation.disabled",
                "delegation.not-delegatable",
                "delegation.missing-param",
                "delegation.invalid-param",
                "gate.withheld",
                "gate.malformed",
                "gate.approver",
                "gate.before-call",
                "gate.after-call",
                "scope.denied",
                "scope.partial-only",
                "scope.unmatched",
            ]
        );
        let allowing: Vec<&str> = Rule::ALL.iter().filter(|rule| rule.allows()).map(|rule| rule.as_str()).collect();
        assert_eq!(
            allowing,
            ["tool.scratchpad", "tool.offload-read", "tool.control", "tool.allowed", "tool.essential"]
        );
    }
}
