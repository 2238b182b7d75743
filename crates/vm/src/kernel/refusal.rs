//! The words a refused tool call is answered with: one function, [`Refusal::text`],
//! composes every refusal text the model reads from the rule and the call's specifics.
//!
//! The one thing to know: a refusal is built as data (a [`Refusal`] names its [`Rule`]
//! and what the text must mention) wherever the call is turned away (the kernel, the
//! tool-call site, the sub-workflow dispatcher), and becomes a [`Verdict`] with its text
//! here, so the openers (`[workflow] BLOCKED: `, `[workflow] FAILED: `) and the advice
//! each rule gives live in one file. A refusal the kernel makes for a flow step
//! ([`super::decide_scoped_call`]) is put in the flow's words ([`Voice::FlowStep`]): one
//! plain sentence, which the flow files as `Refused: … [rule]`.

use archmax_program::reference::{VarPath, scan_template};
use archmax_program::tools::PathAccess;
use serde_json::Value;

use super::scopes::{ScopeAccess, ScopeMiss, ScopeOwner, WriteKind};
use super::{Reveal, Rule, Verdict, value_at};

/// Opens the text of a refused call.
const BLOCKED: &str = "[workflow] BLOCKED: ";
/// Opens the text of a refusal that fails the session in its state.
const FAILED: &str = "[workflow] FAILED: ";

/// Whose words a refusal is put in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Voice {
    /// A workflow session's model: `[workflow] BLOCKED: …`, with what to do instead.
    Workflow,
    /// A flow step's (`archmax flow run`): one sentence naming what was refused and why.
    FlowStep,
}

/// Where a declared denial was made.
#[derive(Clone, Copy, Debug)]
pub enum DenialScope<'p> {
    /// A calling workflow's workflow-wide denial (its slug).
    Caller(&'p str),
    /// This workflow's `tools.forbid_always`.
    Workflow,
    /// The state's own `tools.forbid` (its slug).
    State(&'p str),
}

/// What the state offers instead, in a `tool.not-allowed` refusal.
#[derive(Clone, Debug)]
pub enum Offered<'a> {
    /// The state grants the tool, but only under these entries (as written), none of
    /// which the call matched; `variables` are the session's, for the values the
    /// entries' `${{…}}` references had.
    Entries { entries: Vec<&'a str>, variables: &'a Value },
    /// The state does not grant the tool; these are its tools.
    Tools(Vec<&'a str>),
}

/// One refused call: its rule and the specifics its text names.
#[derive(Debug)]
pub enum Refusal<'a> {
    PathArgument {
        tool: &'a str,
        problem: &'a str,
    },
    Escape {
        written: &'a str,
        access: PathAccess,
    },
    GovernancePlane {
        path: &'a str,
    },
    SkillOnly,
    ReplyOnly,
    Eval,
    Ungrantable,
    Note,
    RuntimeInternal {
        path: &'a str,
        access: PathAccess,
    },
    RuntimeManaged {
        path: &'a str,
    },
    ReadOnlyZone {
        path: &'a str,
        mount: &'a str,
    },
    /// A calling workflow denies the skill bundle.
    SkillDeniedAbove {
        skill: &'a str,
        workflow: &'a str,
    },
    SkillForbidden {
        skill: &'a str,
        state: &'a str,
    },
    SkillNotAllowed {
        skill: &'a str,
        state: &'a str,
        enabled: Vec<&'a str>,
    },
    /// A calling workflow denies the mount.
    MountDeniedAbove {
        mount: &'a str,
        workflow: &'a str,
    },
    MountForbidden {
        mount: &'a str,
        state: &'a str,
    },
    MountNotAllowed {
        path: &'a str,
        mount: &'a str,
        state: &'a str,
    },
    MountReadOnly {
        mount: &'a str,
        state: &'a str,
    },
    /// A declared denial (`tool.forbidden`, `tool.forbidden-here`) names the call.
    Denied {
        rule: Rule,
        tool: &'a str,
        display: &'a str,
        scope: DenialScope<'a>,
    },
    /// A declared denial of `through` covers what the call would do to `path`.
    DeniedThrough {
        rule: Rule,
        tool: &'a str,
        display: &'a str,
        scope: DenialScope<'a>,
        reveal: Reveal,
        path: &'a str,
        through: &'a str,
    },
    UnresolvedVariable {
        tool: &'a str,
        state: &'a str,
        reference: &'a VarPath,
    },
    NotAllowed {
        tool: &'a str,
        target: Option<&'a str>,
        state: &'a str,
        offered: Offered<'a>,
        terminal_state: bool,
    },
    /// A sub-workflow's `file` argument names a file the calling state may not read.
    FileArgument {
        name: &'a str,
        tool: &'a str,
        path: &'a str,
        refusal: &'a Verdict,
    },
    Unknown {
        tool: &'a str,
        state: &'a str,
        offered: Vec<&'a str>,
    },
    /// A name that is the `<action>` of several offered `<collection>__<action>` tools.
    Ambiguous {
        tool: &'a str,
        state: &'a str,
        candidates: Vec<&'a str>,
    },
    /// `${{…}}` substitution refused the arguments (`argument.*`); `problem` says why.
    NotMade {
        rule: Rule,
        problem: &'a str,
    },
    /// A host tool's path argument passes through a link (`zone.link`).
    LinkOnPath {
        tool: &'a str,
        argument: &'a str,
        path: &'a str,
        detail: &'a str,
    },
    /// A sub-workflow dispatch check (`delegation.*`) refused the call.
    Dispatch {
        rule: Rule,
        workflow: &'a str,
        reason: &'a str,
    },
    /// A flow step's call to a name that is none of the step's tools (`tool.unknown`).
    NotAStepTool {
        tool: &'a str,
    },
    /// A flow step's write a write scope refuses (`scope.*`).
    Scope {
        owner: ScopeOwner,
        path: &'a str,
        miss: ScopeMiss<'a>,
        kind: WriteKind,
    },
}

impl Refusal<'_> {
    /// The rule the call is refused under.
    pub fn rule(&self) -> Rule {
        match self {
            Refusal::PathArgument { .. } => Rule::ToolPathArgument,
            Refusal::Escape { .. } => Rule::ZoneEscape,
            Refusal::GovernancePlane { .. } => Rule::ZoneGovernancePlane,
            Refusal::SkillOnly => Rule::ScriptSkillOnly,
            Refusal::ReplyOnly => Rule::ToolReplyOnly,
            Refusal::Eval => Rule::ToolEval,
            Refusal::Ungrantable => Rule::ToolUngrantable,
            Refusal::Note => Rule::ToolNote,
            Refusal::RuntimeInternal { .. } => Rule::ZoneRuntimeInternal,
            Refusal::RuntimeManaged { .. } => Rule::ZoneRuntimeManaged,
            Refusal::ReadOnlyZone { .. } => Rule::ZoneReadOnly,
            Refusal::SkillDeniedAbove { .. } | Refusal::SkillForbidden { .. } => Rule::SkillForbidden,
            Refusal::SkillNotAllowed { .. } => Rule::SkillNotAllowed,
            Refusal::MountDeniedAbove { .. } | Refusal::MountForbidden { .. } => Rule::MountForbidden,
            Refusal::MountNotAllowed { .. } => Rule::MountNotAllowed,
            Refusal::MountReadOnly { .. } => Rule::MountReadOnly,
            Refusal::UnresolvedVariable { .. } => Rule::ToolUnresolvedVariable,
            Refusal::NotAllowed { .. } => Rule::ToolNotAllowed,
            Refusal::Unknown { .. } | Refusal::Ambiguous { .. } | Refusal::NotAStepTool { .. } => Rule::ToolUnknown,
            Refusal::Scope { miss: ScopeMiss::Unmatched, .. } => Rule::ScopeUnmatched,
            Refusal::Scope { miss: ScopeMiss::Rule(rule), .. } => match rule.access {
                ScopeAccess::Denied => Rule::ScopeDenied,
                _ => Rule::ScopePartialOnly,
            },
            Refusal::LinkOnPath { .. } => Rule::ZoneLink,
            Refusal::FileArgument { refusal, .. } => refusal.rule,
            Refusal::Denied { rule, .. }
            | Refusal::DeniedThrough { rule, .. }
            | Refusal::NotMade { rule, .. }
            | Refusal::Dispatch { rule, .. } => *rule,
        }
    }

    /// The text the model reads: the one place a refusal is put into words.
    pub fn text(&self) -> String {
        const SCRATCHPAD: &str = "Work inside `scratchpad/`.";
        const WRITE_SCRATCHPAD: &str = "Write inside `scratchpad/`.";
        match self {
            Refusal::PathArgument { tool, problem } => format!("{BLOCKED}'{tool}': {problem}."),
            Refusal::Escape { written, .. } => {
                format!("{BLOCKED}'{written}' climbs above the workspace root. {SCRATCHPAD}")
            }
            Refusal::GovernancePlane { path } => {
                format!("{BLOCKED}'{path}' is under `workflows/`, which no session can reach. {SCRATCHPAD}")
            }
            Refusal::SkillOnly => {
                format!("{BLOCKED}'archmax_run' runs only scripts inside a skill bundle (`skills/<slug>/…`).")
            }
            Refusal::ReplyOnly => {
                format!("{BLOCKED}this session is parked; this turn may only answer in text, and no tool runs.")
            }
            Refusal::Eval => format!("{BLOCKED}there is no 'eval' tool; run code with 'archmax_eval'."),
            Refusal::Ungrantable => format!(
                "{BLOCKED}'task' is not available in any state; delegate with an `archmax_workflow_<slug>` tool."
            ),
            Refusal::Note => format!("{BLOCKED}'archmax_note' is the runtime's note channel; nothing may call it."),
            Refusal::RuntimeInternal { path, .. } => format!("{BLOCKED}'{path}' belongs to the runtime. {SCRATCHPAD}"),
            Refusal::RuntimeManaged { path } => {
                format!("{BLOCKED}'{path}' is kept by the runtime and is read-only. {WRITE_SCRATCHPAD}")
            }
            Refusal::ReadOnlyZone { path, mount } => {
                format!("{BLOCKED}'{path}' is in the read-only mount `{mount}`. {WRITE_SCRATCHPAD}")
            }
            Refusal::SkillDeniedAbove { skill, workflow } => {
                format!("{BLOCKED}the skill `{skill}` is denied by the calling workflow `{workflow}`. {SCRATCHPAD}")
            }
            Refusal::SkillForbidden { skill, state } => format!(
                "{BLOCKED}the skill `{skill}` is forbidden in state '{state}'; a denial beats every grant. {SCRATCHPAD}"
            ),
            Refusal::SkillNotAllowed { skill, state, enabled } => format!(
                "{BLOCKED}the skill `{skill}` is not enabled in state '{state}' (enabled: {}). {SCRATCHPAD}",
                listed(enabled, ", ")
            ),
            Refusal::MountDeniedAbove { mount, workflow } => {
                format!("{BLOCKED}the mount `{mount}` is denied by the calling workflow `{workflow}`. {SCRATCHPAD}")
            }
            Refusal::MountForbidden { mount, state } => {
                format!("{BLOCKED}the mount `{mount}` is forbidden in state '{state}'. {SCRATCHPAD}")
            }
            Refusal::MountNotAllowed { path, mount, state } => {
                format!("{BLOCKED}'{path}' exists, but state '{state}' was not given the mount `{mount}`. {SCRATCHPAD}")
            }
            Refusal::MountReadOnly { mount, state } => {
                format!("{BLOCKED}state '{state}' may read the mount `{mount}` but not write it. {WRITE_SCRATCHPAD}")
            }
            // A denial shows no values: unlike a grant's guard, which the prompt already
            // spells out resolved, a denial is never shown to the model, and its references'
            // values (or whether they are set) are not the model's to learn from a refusal.
            Refusal::Denied { tool, display, scope, .. } => match scope {
                DenialScope::Caller(workflow) => {
                    format!("{BLOCKED}'{tool}' is denied by `{display}` of the calling workflow `{workflow}`.")
                }
                DenialScope::Workflow => format!("{BLOCKED}'{tool}' is denied in every state by `{display}`."),
                DenialScope::State(state) => format!("{BLOCKED}'{tool}' is denied in state '{state}' by `{display}`."),
            },
            Refusal::DeniedThrough { tool, display, scope, reveal, path, through, .. } => {
                let verb = reveal.verb();
                let denied = match scope {
                    DenialScope::Caller(workflow) => format!("`{display}` of the calling workflow `{workflow}` denies"),
                    DenialScope::Workflow => format!("`{display}` denies in every state"),
                    DenialScope::State(state) => format!("`{display}` denies in state '{state}'"),
                };
                format!(
                    "{BLOCKED}'{tool}' would {verb} '{path}', which {denied}; a denial of '{through}' binds every tool that can {verb} a file."
                )
            }
            Refusal::UnresolvedVariable { tool, state, reference } => format!(
                "{FAILED}the guard on '{tool}' in state '{state}' reads `${{{{{reference}}}}}`, which is not set; the guard cannot be evaluated."
            ),
            Refusal::NotAllowed { tool, target, state, offered, terminal_state } => {
                let target = target.map(|path| format!(" on '{path}'")).unwrap_or_default();
                let (failed, offered) = match offered {
                    Offered::Entries { entries, variables } => {
                        let guards = if entries.len() == 1 { "the guard" } else { "any of the guards" };
                        let shown: Vec<String> =
                            entries.iter().map(|entry| format!("{entry}{}", values_of(entry, variables))).collect();
                        (
                            format!(": the call does not match {guards} it is granted under"),
                            format!("Allowed here: {}.", shown.join("; ")),
                        )
                    }
                    Offered::Tools(tools) => (String::new(), format!("Tools here: {}.", listed(tools, ", "))),
                };
                let hint = if *terminal_state {
                    "This state is terminal: finish the work with the tools it has."
                } else {
                    "Use this state's tools, or finish its work and advance."
                };
                format!("{BLOCKED}'{tool}'{target} is not allowed in state '{state}'{failed}. {offered} {hint}")
            }
            Refusal::FileArgument { name, tool, path, refusal } => format!(
                "{BLOCKED}the file argument '{name}' of '{tool}' names '{path}', which this state may not read: {}",
                bare_reason(refusal)
            ),
            Refusal::Unknown { tool, state, offered } => {
                format!("[workflow] '{tool}' is not a tool. The tools of state '{state}' are: {}.", offered.join(", "))
            }
            Refusal::Ambiguous { tool, state, candidates } => format!(
                "[workflow] '{tool}' is not a tool. In state '{state}' it could be any of: {}. Call one by its full name.",
                candidates.join(", ")
            ),
            Refusal::NotMade { problem, .. } => format!("[workflow] The call was not made: {problem}."),
            Refusal::LinkOnPath { tool, argument, path, detail } => format!(
                "{BLOCKED}'{tool}' was not called: its argument `{argument}` ({path}) is refused: {detail}. Name the file where it really is."
            ),
            Refusal::Dispatch { rule, workflow, reason } => format!(
                "{BLOCKED}the call to sub-workflow '{workflow}' was refused ({}): {reason}. Nothing ran; correct the call and try again.",
                rule.name()
            ),
            // Only a flow step meets these, so they are in its words whoever asks.
            Refusal::NotAStepTool { tool } => format!("`{tool}` is not a tool of this step"),
            Refusal::Scope { owner, path, miss, kind } => {
                let reason = match miss {
                    ScopeMiss::Rule(rule) => format!("the rule `{}` refuses {}", rule.text, kind.words()),
                    ScopeMiss::Unmatched => format!("no rule of the scope matches `{path}`"),
                };
                format!("{} write scope refuses `{path}`: {reason}.", owner.words())
            }
        }
    }

    /// The text in `voice`: a flow step reads the refusals it shares with a workflow (a
    /// path argument it cannot read, a path out of the workspace, the runtime's own
    /// area, which for a flow is the folder of its records) in its own words.
    pub fn text_in(&self, voice: Voice) -> String {
        if voice == Voice::Workflow {
            return self.text();
        }
        match self {
            Refusal::PathArgument { tool, problem } => format!("`{tool}` was not run: {problem}."),
            Refusal::Escape { written, access } => {
                format!("`{written}` leads out of the workspace; no step {} there.", step_verb(*access))
            }
            Refusal::RuntimeInternal { path, access } if super::is_flow_reserved(path) => format!(
                "`{path}` is archmax's own (the workspace's seal key and settings); no step {} there.",
                step_verb(*access)
            ),
            Refusal::RuntimeInternal { path, access } => {
                format!("`{path}` holds the flow's own records; no step {} there.", step_verb(*access))
            }
            other => other.text(),
        }
    }

    /// The verdict refusing the call: its rule, its text, and whether it is terminal.
    pub fn verdict(&self) -> Verdict {
        self.verdict_in(Voice::Workflow)
    }

    /// The verdict refusing the call, its text in `voice`.
    pub fn verdict_in(&self, voice: Voice) -> Verdict {
        let rule = self.rule();
        Verdict { allowed: false, rule, reason: self.text_in(voice), terminal: rule.is_terminal() }
    }
}

/// What a flow step would have done with a path, as its refusals say it: `no step writes
/// there`.
fn step_verb(access: PathAccess) -> &'static str {
    match access {
        PathAccess::Read | PathAccess::Execute => "reads",
        PathAccess::List => "lists",
        PathAccess::Search => "searches",
        PathAccess::Write | PathAccess::Remove => "writes",
    }
}

/// The longest value a refusal shows for a guard's reference, in characters.
const SHOWN_VALUE_CHARS: usize = 80;

/// The value each `${{…}}` reference of a grant or denial entry had when the call was
/// refused, to follow the entry as written: ` (amount = 1200)`; empty when it has none.
fn values_of(entry: &str, variables: &Value) -> String {
    let (template, _) = scan_template(entry);
    let mut seen: Vec<String> = Vec::new();
    let mut values = Vec::new();
    for (path, _) in template.references() {
        let name = path.to_string();
        if seen.contains(&name) {
            continue;
        }
        let value = variables.get(&path.root).and_then(|root| value_at(root, &path.segments));
        let shown = match value {
            Some(value) => {
                let text = value.to_string();
                if text.chars().count() > SHOWN_VALUE_CHARS {
                    format!("{}…", text.chars().take(SHOWN_VALUE_CHARS).collect::<String>())
                } else {
                    text
                }
            }
            None => "not set".to_string(),
        };
        values.push(format!("{name} = {shown}"));
        seen.push(name);
    }
    if values.is_empty() { String::new() } else { format!(" ({})", values.join(", ")) }
}

/// Names joined, or `none`.
fn listed(names: &[&str], separator: &str) -> String {
    if names.is_empty() { "none".to_string() } else { names.join(separator) }
}

/// A refusal's reason without its `[workflow] BLOCKED: ` (or `FAILED: `) opener, to quote
/// inside another.
pub(crate) fn bare_reason(verdict: &Verdict) -> &str {
    verdict.reason.strip_prefix(BLOCKED).or_else(|| verdict.reason.strip_prefix(FAILED)).unwrap_or(&verdict.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_quoted_inside_another_keeps_its_rule_and_loses_its_opener() {
        let inner = Refusal::RuntimeInternal { path: "checkpoints/a", access: PathAccess::Read }.verdict();
        assert_eq!(bare_reason(&inner), "'checkpoints/a' belongs to the runtime. Work inside `scratchpad/`.");
        let outer = Refusal::FileArgument {
            name: "report",
            tool: "archmax_workflow_x",
            path: "checkpoints/a",
            refusal: &inner,
        };
        let verdict = outer.verdict();
        assert_eq!(verdict.rule, Rule::ZoneRuntimeInternal);
        assert_eq!(
            verdict.reason,
            "[workflow] BLOCKED: the file argument 'report' of 'archmax_workflow_x' names 'checkpoints/a', which this \
             state may not read: 'checkpoints/a' belongs to the runtime. Work inside `scratchpad/`."
        );
    }

    #[test]
    fn an_unresolvable_guard_fails_and_is_terminal() {
        let reference = VarPath { root: "channel".to_string(), segments: Vec::new() };
        let verdict = Refusal::UnresolvedVariable { tool: "notify", state: "work", reference: &reference }.verdict();
        assert!(verdict.terminal && !verdict.allowed);
        assert_eq!(
            verdict.reason,
            "[workflow] FAILED: the guard on 'notify' in state 'work' reads `${{channel}}`, which is not set; the \
             guard cannot be evaluated."
        );
        assert_eq!(bare_reason(&verdict), &verdict.reason["[workflow] FAILED: ".len()..]);
    }

    #[test]
    fn a_dispatch_refusal_names_its_kind_and_says_nothing_ran() {
        let refusal = Refusal::Dispatch {
            rule: Rule::DelegationMissingParam,
            workflow: "billing",
            reason: "it needs 'order_id'",
        };
        assert_eq!(
            refusal.text(),
            "[workflow] BLOCKED: the call to sub-workflow 'billing' was refused (missing-param): it needs \
             'order_id'. Nothing ran; correct the call and try again."
        );
    }

    #[test]
    fn a_name_that_is_no_tool_lists_the_state_tools() {
        let refusal = Refusal::Unknown { tool: "read", state: "work", offered: vec!["read_file", "ls"] };
        assert_eq!(refusal.rule(), Rule::ToolUnknown);
        assert_eq!(refusal.text(), "[workflow] 'read' is not a tool. The tools of state 'work' are: read_file, ls.");
        let refusal =
            Refusal::Ambiguous { tool: "send", state: "work", candidates: vec!["gmail__send", "outlook__send"] };
        assert_eq!(refusal.rule(), Rule::ToolUnknown);
        assert_eq!(
            refusal.text(),
            "[workflow] 'send' is not a tool. In state 'work' it could be any of: gmail__send, outlook__send. Call one by its full name."
        );
    }

    #[test]
    fn a_guard_that_refuses_is_shown_as_written_with_the_values_its_references_had() {
        let variables = serde_json::json!({ "amount": 1200, "order": { "id": "ORD-7" } });
        let verdict = Refusal::NotAllowed {
            tool: "pay",
            target: None,
            state: "settle",
            offered: Offered::Entries {
                entries: vec![
                    "{ tool: pay, args: { amount: [\"${{amount}}\"], order: [\"${{order.id}}\"] } }",
                    "{ tool: pay, args: { note: [\"${{memo}}\"] } }",
                ],
                variables: &variables,
            },
            terminal_state: false,
        }
        .verdict();
        assert_eq!(verdict.rule, Rule::ToolNotAllowed);
        assert_eq!(
            verdict.reason,
            "[workflow] BLOCKED: 'pay' is not allowed in state 'settle': the call does not match any of the guards \
             it is granted under. Allowed here: { tool: pay, args: { amount: [\"${{amount}}\"], order: \
             [\"${{order.id}}\"] } } (amount = 1200, order.id = \"ORD-7\"); { tool: pay, args: { note: \
             [\"${{memo}}\"] } } (memo = not set). Use this state's tools, or finish its work and advance."
        );
    }

    #[test]
    fn a_denial_shows_its_entry_as_written_and_no_value() {
        let verdict = Refusal::Denied {
            rule: Rule::ToolForbiddenHere,
            tool: "pay",
            display: "{ tool: pay, args: { to: [\"${{blocked}}\"] } }",
            scope: DenialScope::State("settle"),
        }
        .verdict();
        assert_eq!(
            verdict.reason,
            "[workflow] BLOCKED: 'pay' is denied in state 'settle' by `{ tool: pay, args: { to: [\"${{blocked}}\"] } }`."
        );
    }
}
