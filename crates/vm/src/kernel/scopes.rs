//! Write scopes: where a flow step (`archmax flow run`) may write, as a table the kernel
//! decides by ([`super::decide_scoped_call`], its phase 3).
//!
//! A scope is an ordered list of `<glob>=<allowed|partial-only|denied>` rules, the grammar
//! `--write-scope` takes and a step's `run.scope` repeats. The one thing to know: **the
//! first rule whose glob matches decides, in the order written, and a path no rule
//! matches is denied** (a scope says where one may write). A step runs under the run's
//! scope and its node's scope at once ([`ScopeStack`]): both are asked, the run's first,
//! and the first refusal wins, so a node can only narrow what the command line allows.
//!
//! `allowed` permits every write; `partial-only` permits changing part of an existing
//! file (`edit_file`) and refuses writing a whole file, copying or moving onto it, and
//! removing it; `denied` refuses every write. A refusal is a [`Refusal::Scope`] under
//! `scope.denied`, `scope.partial-only` or `scope.unmatched`.

use archmax_program::glob::Glob;
use archmax_program::tools::PathAccess;

use super::Refusal;

/// What one rule lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeAccess {
    Allowed,
    PartialOnly,
    Denied,
}

impl ScopeAccess {
    pub const WORDS: [&'static str; 3] = ["allowed", "partial-only", "denied"];

    pub fn parse(word: &str) -> Option<ScopeAccess> {
        match word {
            "allowed" => Some(ScopeAccess::Allowed),
            "partial-only" => Some(ScopeAccess::PartialOnly),
            "denied" => Some(ScopeAccess::Denied),
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
    /// How `tool` writes a path argument it uses with `access`; `None` when it does not
    /// write it.
    pub fn of(tool: &str, access: PathAccess) -> Option<WriteKind> {
        match (tool, access) {
            (_, access) if !access.writes() => None,
            ("edit_file", _) => Some(WriteKind::Partial),
            (_, PathAccess::Remove) => Some(WriteKind::Remove),
            _ => Some(WriteKind::Whole),
        }
    }

    fn permitted_by(self, access: ScopeAccess) -> bool {
        match access {
            ScopeAccess::Allowed => true,
            ScopeAccess::PartialOnly => self == WriteKind::Partial,
            ScopeAccess::Denied => false,
        }
    }

    /// The write in words, as a refusal names it.
    pub(super) fn words(self) -> &'static str {
        match self {
            WriteKind::Whole => "writing the whole file",
            WriteKind::Partial => "editing the file",
            WriteKind::Remove => "removing the file",
        }
    }
}

/// The level a mistyped one most likely meant: one a typo or two away, or the one the
/// verb it starts with names (`allow`, `partial`, `edit`, `deny`).
fn closest_level(word: &str) -> Option<&'static str> {
    const STEMS: [(&str, &str); 4] =
        [("allow", "allowed"), ("partial", "partial-only"), ("edit", "partial-only"), ("den", "denied")];
    let lower = word.to_ascii_lowercase();
    archmax_program::diagnostic::did_you_mean(&lower, ScopeAccess::WORDS)
        .or_else(|| STEMS.iter().find(|(stem, _)| lower.starts_with(stem)).map(|(_, level)| *level))
}

/// One `<glob>=<allowed|partial-only|denied>` rule.
#[derive(Clone, Debug)]
pub struct ScopeRule {
    /// The rule as written.
    pub text: String,
    glob: Glob,
    pub access: ScopeAccess,
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
        let Some(access) = ScopeAccess::parse(word.trim()) else {
            let hint =
                closest_level(word.trim()).map(|close| format!(" (did you mean `{close}`?)")).unwrap_or_default();
            return Err(ScopeError(format!(
                "`{text}` names `{word}`, which is not one of `allowed`, `partial-only` and `denied`{hint}"
            )));
        };
        let glob_text = glob_text.trim();
        if glob_text.is_empty() {
            return Err(ScopeError(format!("`{text}` has an empty glob")));
        }
        let glob = Glob::literal_text(glob_text).map_err(|error| ScopeError(format!("`{text}`: {}", error.0)))?;
        Ok(ScopeRule { text: text.to_string(), glob, access })
    }

    fn matches(&self, path: &str) -> bool {
        self.glob.matches(path, &|_| None).unwrap_or(false)
    }
}

/// Whose scope it is: the run's (`--write-scope`) or the step's node's (`run.scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeOwner {
    Run,
    Node,
}

impl ScopeOwner {
    /// How a sentence about the scope opens: `The run's`, `This step's`.
    pub(super) fn words(self) -> &'static str {
        match self {
            ScopeOwner::Run => "The run's",
            ScopeOwner::Node => "This step's",
        }
    }
}

/// Why a scope refuses a write: the rule that matched and does not let it through, or
/// no rule matching at all.
#[derive(Clone, Copy, Debug)]
pub enum ScopeMiss<'a> {
    Rule(&'a ScopeRule),
    Unmatched,
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

    /// The first rule matching `path` decides whether `kind` gets through; `Err` says why not.
    fn decide(&self, path: &str, kind: WriteKind) -> Result<(), ScopeMiss<'_>> {
        match self.rules.iter().find(|rule| rule.matches(path)) {
            Some(rule) if kind.permitted_by(rule.access) => Ok(()),
            Some(rule) => Err(ScopeMiss::Rule(rule)),
            None => Err(ScopeMiss::Unmatched),
        }
    }

    /// The sentence a step is told beside its prompt, in the same words for the run's
    /// scope and a node's, so no turn is spent learning the rules by being refused.
    pub fn describe(&self, owner: ScopeOwner) -> String {
        let rules: Vec<String> = self.rules.iter().map(|rule| format!("`{}`", rule.text)).collect();
        format!(
            "{} write scope, first matching rule wins and a path no rule matches is denied: {}. \
             `allowed` permits any write, `partial-only` only edit_file on an existing file, `denied` none.",
            owner.words(),
            rules.join(", ")
        )
    }
}

/// The scopes one step runs under: the run's, then the node's; the first refusal wins.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScopeStack<'a> {
    pub run: Option<&'a WriteScope>,
    pub node: Option<&'a WriteScope>,
}

impl<'a> ScopeStack<'a> {
    /// The refusal of a `kind` write of the canonical `path`, if a scope refuses it.
    pub(super) fn refusal(&self, path: &'a str, kind: WriteKind) -> Option<Refusal<'a>> {
        [(ScopeOwner::Run, self.run), (ScopeOwner::Node, self.node)].into_iter().find_map(|(owner, scope)| {
            let miss = scope?.decide(path, kind).err()?;
            Some(Refusal::Scope { owner, path, miss, kind })
        })
    }
}

#[cfg(test)]
mod tests;
