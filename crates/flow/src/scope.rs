//! Write scopes: where a step may write.
//!
//! A scope is an ordered list of `<glob>=<allowed|partial-only|denied>` rules, the grammar
//! `--write-scope` takes and a step's `run.scope` repeats. The one thing to know: **the
//! first rule whose glob matches decides, in the order written, and a path no rule
//! matches is denied** (a scope says where one may write). A step runs under the run's
//! scope and its node's scope at once ([`ScopeStack`]): both are asked and the first
//! refusal wins, so a node can only narrow what the command line allows.
//!
//! `allowed` permits every write; `partial-only` permits changing part of an existing
//! file (`edit_file`) and refuses writing a whole file, copying or moving onto it, and
//! removing it; `denied` refuses every write. A refusal carries its rule:
//! `scope.denied`, `scope.partial-only` or `scope.unmatched` ([`crate::refusal`]).

use archmax_program::glob::Glob;
use archmax_vm::kernel::Rule;

use crate::refusal::Refused;

/// What one rule lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    PartialOnly,
    Denied,
}

impl Verdict {
    pub const WORDS: [&'static str; 3] = ["allowed", "partial-only", "denied"];

    pub fn parse(word: &str) -> Option<Verdict> {
        match word {
            "allowed" => Some(Verdict::Allowed),
            "partial-only" => Some(Verdict::PartialOnly),
            "denied" => Some(Verdict::Denied),
            _ => None,
        }
    }
}

/// How a tool call writes a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// A whole file is written (`write_file`, the destination of a copy or move).
    Whole,
    /// Part of an existing file is replaced (`edit_file`).
    Partial,
    /// A file is removed (`remove_file`, the source of a move).
    Remove,
}

impl WriteKind {
    fn permitted_by(self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Allowed => true,
            Verdict::PartialOnly => self == WriteKind::Partial,
            Verdict::Denied => false,
        }
    }
}

/// One `<glob>=<verdict>` rule.
#[derive(Clone, Debug)]
pub struct ScopeRule {
    /// The rule as written.
    pub text: String,
    glob: Glob,
    pub verdict: Verdict,
}

/// Why a rule's text cannot be read: one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScopeError(pub String);

impl ScopeRule {
    pub fn parse(text: &str) -> Result<ScopeRule, ScopeError> {
        let Some((glob_text, word)) = text.rsplit_once('=') else {
            return Err(ScopeError(format!("`{text}` has no `=`; a rule is `<glob>=<allowed|partial-only|denied>`")));
        };
        let Some(verdict) = Verdict::parse(word.trim()) else {
            return Err(ScopeError(format!(
                "`{text}` names `{word}`, which is not one of `allowed`, `partial-only` and `denied`"
            )));
        };
        let glob_text = glob_text.trim();
        if glob_text.is_empty() {
            return Err(ScopeError(format!("`{text}` has an empty glob")));
        }
        let glob = Glob::literal_text(glob_text).map_err(|error| ScopeError(format!("`{text}`: {}", error.0)))?;
        Ok(ScopeRule { text: text.to_string(), glob, verdict })
    }

    fn matches(&self, path: &str) -> bool {
        self.glob.matches(path, &|_| None).unwrap_or(false)
    }
}

/// An ordered list of rules.
#[derive(Clone, Debug, Default)]
pub struct WriteScope {
    pub rules: Vec<ScopeRule>,
}

impl WriteScope {
    /// Reads every rule, or names the first that does not read.
    pub fn parse_all<S: AsRef<str>>(texts: &[S]) -> Result<WriteScope, ScopeError> {
        let rules = texts.iter().map(|text| ScopeRule::parse(text.as_ref())).collect::<Result<Vec<_>, _>>()?;
        Ok(WriteScope { rules })
    }

    /// The rule that decides `path` and whether it lets `kind` through; a refusal is
    /// the registry's rule and the sentence's tail.
    fn decide(&self, path: &str, kind: WriteKind) -> Result<(), (Rule, String)> {
        match self.rules.iter().find(|rule| rule.matches(path)) {
            Some(rule) if kind.permitted_by(rule.verdict) => Ok(()),
            Some(rule) => {
                let id = if rule.verdict == Verdict::Denied { Rule::ScopeDenied } else { Rule::ScopePartialOnly };
                Err((id, format!("the rule `{}` refuses {}", rule.text, kind_words(kind))))
            }
            None => Err((Rule::ScopeUnmatched, format!("no rule of the scope matches `{path}`"))),
        }
    }

    /// The sentence a step is told, in the same words for the run's scope and a node's.
    pub fn describe(&self, whose: &str) -> String {
        let rules: Vec<String> = self.rules.iter().map(|rule| format!("`{}`", rule.text)).collect();
        format!(
            "{whose} write scope, first matching rule wins and a path no rule matches is denied: {}. \
             `allowed` permits any write, `partial-only` only edit_file on an existing file, `denied` none.",
            rules.join(", ")
        )
    }
}

fn kind_words(kind: WriteKind) -> &'static str {
    match kind {
        WriteKind::Whole => "writing the whole file",
        WriteKind::Partial => "editing the file",
        WriteKind::Remove => "removing the file",
    }
}

/// The scopes one step runs under: the run's, then the node's; the first refusal wins.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScopeStack<'a> {
    pub run: Option<&'a WriteScope>,
    pub node: Option<&'a WriteScope>,
}

impl ScopeStack<'_> {
    /// `Ok` when every scope lets the write through, else the refusal the model reads.
    pub fn check(&self, path: &str, kind: WriteKind) -> Result<(), Refused> {
        if let Some(run) = self.run {
            run.decide(path, kind).map_err(|(rule, reason)| {
                Refused::new(rule, format!("The run's write scope refuses `{path}`: {reason}."))
            })?;
        }
        if let Some(node) = self.node {
            node.decide(path, kind).map_err(|(rule, reason)| {
                Refused::new(rule, format!("This step's write scope refuses `{path}`: {reason}."))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(rules: &[&str]) -> WriteScope {
        WriteScope::parse_all(rules).unwrap_or_default()
    }

    #[test]
    fn the_first_matching_rule_decides_in_the_order_written() {
        let deny_first = scope(&[".internal/**=denied", "**=allowed"]);
        let allow_first = scope(&["**=allowed", ".internal/**=denied"]);
        assert!(deny_first.decide(".internal/notes.md", WriteKind::Whole).is_err());
        assert!(allow_first.decide(".internal/notes.md", WriteKind::Whole).is_ok());
        assert!(deny_first.decide("src/lib.rs", WriteKind::Whole).is_ok());
    }

    #[test]
    fn partial_only_lets_edits_through_and_nothing_else() {
        let partial = scope(&["docs/**=partial-only", "secrets/**=denied"]);
        let rule = |path: &str, kind| partial.decide(path, kind).err().map(|(rule, _)| rule);
        assert_eq!(rule("docs/a.md", WriteKind::Partial), None);
        assert_eq!(rule("docs/a.md", WriteKind::Whole), Some(Rule::ScopePartialOnly));
        assert_eq!(rule("docs/a.md", WriteKind::Remove), Some(Rule::ScopePartialOnly));
        assert_eq!(rule("src/a.rs", WriteKind::Partial), Some(Rule::ScopeUnmatched), "no rule matches: denied");
        assert_eq!(rule("secrets/key", WriteKind::Partial), Some(Rule::ScopeDenied));
    }

    #[test]
    fn a_node_can_only_narrow_the_run() {
        let run = scope(&["src/**=denied", "**=allowed"]);
        let node = scope(&["**=allowed"]);
        let stack = ScopeStack { run: Some(&run), node: Some(&node) };
        let refused = stack.check("src/main.rs", WriteKind::Whole).expect_err("the run denies it");
        assert_eq!(refused.rule, Rule::ScopeDenied);
        assert!(refused.reason.starts_with("The run's write scope refuses `src/main.rs`"), "{}", refused.reason);
        assert!(stack.check("notes.md", WriteKind::Whole).is_ok());
        let narrow = scope(&["notes.md=denied", "**=allowed"]);
        let stack = ScopeStack { run: None, node: Some(&narrow) };
        assert!(stack.check("notes.md", WriteKind::Whole).is_err());
    }

    #[test]
    fn unreadable_rules_are_named() {
        for (text, words) in [("src/**", "has no `=`"), ("src/**=forbidden", "not one of"), ("=allowed", "empty glob")]
        {
            let error = ScopeRule::parse(text).err().map(|error| error.0).unwrap_or_default();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
