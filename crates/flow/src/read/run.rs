//! A step's `run` payload: the keys archmax reads (`kind`, `state`, `summary`,
//! `prompt`, `context`, `scope`, and `command` with `timeout_ms`), each checked, and a
//! warning for any other key. The one thing to know: a kind archmax does not know, a
//! malformed command or an operator without a prompt refuses the document; nothing
//! falls through to a model turn.

use archmax_compiler::syntax::yaml::Node as YamlNode;
use archmax_program::diagnostic::{Code, did_you_mean};
use archmax_program::source::Span;
use archmax_vm::kernel::{ScopeRule, WriteScope};

use super::{KINDS, RUN_KEYS, Reader};
use crate::document::{Step, StepKind};

impl Reader<'_> {
    pub(super) fn step(&mut self, run: Option<&YamlNode>, path: &str, needs: Vec<String>) -> Option<Step> {
        let empty = Step {
            id: String::new(),
            needs,
            kind: StepKind::Llm,
            state: None,
            prompt: None,
            context: Vec::new(),
            scope: None,
        };
        let Some(run) = run else { return Some(empty) };
        let run_path = format!("{path}.run");
        let Some(entries) = run.as_mapping() else {
            self.report(
                Code::FlowShape,
                run.span,
                &run_path,
                format!("`run` is {}, not a mapping", run.type_name()),
                "write `run: {prompt: ...}`",
            );
            return None;
        };
        for entry in entries {
            let key = entry.key.scalar_text().unwrap_or_default();
            if !RUN_KEYS.contains(&key) {
                let hint =
                    did_you_mean(key, RUN_KEYS).map(|near| format!("did you mean `{near}`? ")).unwrap_or_default();
                self.report(
                    Code::FlowRunKeyUnread,
                    entry.key.span,
                    &run_path,
                    format!("archmax does not read `{key}` in the run of `{path}`"),
                    &format!("{hint}archmax reads {}", RUN_KEYS.map(|key| format!("`{key}`")).join(", ")),
                );
            }
        }
        let mut ok = true;
        let text = |reader: &mut Reader, key: &str| -> Option<String> {
            let value = run.get(key)?;
            match value.as_str() {
                Some(text) => Some(text.to_string()),
                None => {
                    reader.report(
                        Code::FlowShape,
                        value.span,
                        &run_path,
                        format!("`run.{key}` of `{path}` is {}, not a string", value.type_name()),
                        &format!("write `{key}` as a string"),
                    );
                    None
                }
            }
        };
        let state = text(self, "state");
        let prompt = text(self, "prompt").or_else(|| text(self, "summary"));
        let kind = match run.get("kind") {
            None => Some("llm"),
            Some(value) => match value.as_str() {
                Some(word) if KINDS.contains(&word) => Some(word),
                Some(word) => {
                    let hint =
                        did_you_mean(word, KINDS).map(|near| format!("did you mean `{near}`? ")).unwrap_or_default();
                    self.report(
                        Code::FlowStepKind,
                        value.span,
                        &run_path,
                        format!("`{word}` is not a step kind"),
                        &format!("{hint}a step's kind is `llm`, `command` or `operator`"),
                    );
                    None
                }
                None => {
                    self.report(
                        Code::FlowStepKind,
                        value.span,
                        &run_path,
                        format!("the kind of `{path}` is {}, not a word", value.type_name()),
                        "a step's kind is `llm`, `command` or `operator`",
                    );
                    None
                }
            },
        };
        let command = run.get("command");
        let timeout = run.get("timeout_ms");
        let kind = match kind {
            Some("command") => self.command(command, timeout, run.span, &run_path),
            Some(word) => {
                for (key, value) in [("command", command), ("timeout_ms", timeout)] {
                    if let Some(value) = value {
                        self.report(
                            Code::FlowCommand,
                            value.span,
                            &run_path,
                            format!("`{key}` sits on a `{word}` step"),
                            "only `kind: command` steps run a command: add `kind: command` or remove the key",
                        );
                        ok = false;
                    }
                }
                if word == "operator" {
                    if prompt.as_deref().is_none_or(|prompt| prompt.trim().is_empty()) {
                        self.report(
                            Code::FlowOperatorPrompt,
                            run.span,
                            &run_path,
                            format!("the operator step `{path}` has no prompt"),
                            "write what the person is to check: `prompt: Review the change ...`",
                        );
                        ok = false;
                    }
                    Some(StepKind::Operator)
                } else {
                    Some(StepKind::Llm)
                }
            }
            None => None,
        };
        let context = match run.get("context") {
            None => Vec::new(),
            Some(value) => {
                let items = value
                    .as_sequence()
                    .filter(|items| items.iter().all(|item| item.as_str().is_some_and(|text| !text.trim().is_empty())));
                match items {
                    Some(items) => items.iter().filter_map(|item| item.as_str().map(str::to_string)).collect(),
                    None => {
                        self.report(
                            Code::FlowContext,
                            value.span,
                            &run_path,
                            format!("the context of `{path}` is not a list of file paths"),
                            "write `context: [docs/design.md, ...]`",
                        );
                        ok = false;
                        Vec::new()
                    }
                }
            }
        };
        let scope = match run.get("scope") {
            None => None,
            Some(value) => self.scope(value, &run_path),
        };
        if run.get("scope").is_some() && scope.is_none() {
            ok = false;
        }
        let kind = kind?;
        ok.then_some(Step { kind, state, prompt, context, scope, ..empty })
    }

    fn command(
        &mut self,
        command: Option<&YamlNode>,
        timeout: Option<&YamlNode>,
        span: Span,
        run_path: &str,
    ) -> Option<StepKind> {
        let argv = command.and_then(YamlNode::as_sequence).and_then(|items| {
            let argv: Option<Vec<String>> = items.iter().map(|item| item.as_str().map(str::to_string)).collect();
            argv.filter(|argv| argv.first().is_some_and(|program| !program.is_empty()))
        });
        let Some(argv) = argv else {
            let (span, found) =
                command.map_or((span, "missing".to_string()), |value| (value.span, value.type_name().to_string()));
            self.report(
                Code::FlowCommand,
                span,
                run_path,
                format!("the command of this step is {found}, not a non-empty list of strings"),
                "write the argv as a list: `command: [cargo, test, --workspace]`",
            );
            return None;
        };
        let timeout_ms = match timeout {
            None => None,
            Some(value) => match value.as_i64().and_then(|ms| u64::try_from(ms).ok()).filter(|ms| *ms > 0) {
                Some(ms) => Some(ms),
                None => {
                    self.report(
                        Code::FlowCommand,
                        value.span,
                        run_path,
                        "`timeout_ms` is not a positive whole number of milliseconds".to_string(),
                        "write `timeout_ms: 60000`",
                    );
                    return None;
                }
            },
        };
        Some(StepKind::Command { argv, timeout_ms })
    }

    fn scope(&mut self, value: &YamlNode, run_path: &str) -> Option<WriteScope> {
        let help = "write `scope: [\"<glob>=<allowed|partial-only|denied>\", ...]`";
        let items = self.list(value, Code::FlowScope, run_path, "the scope", "rules", help)?;
        let mut texts = Vec::new();
        for item in items {
            let Some(text) = item.as_str() else {
                self.report(
                    Code::FlowScope,
                    item.span,
                    run_path,
                    format!("a scope rule is {}, not a string", item.type_name()),
                    "write each rule as `\"<glob>=<allowed|partial-only|denied>\"`",
                );
                return None;
            };
            if let Err(error) = ScopeRule::parse(text) {
                self.report(
                    Code::FlowScope,
                    item.span,
                    run_path,
                    format!("the scope rule {error}"),
                    "write each rule as `\"<glob>=<allowed|partial-only|denied>\"`",
                );
                return None;
            }
            texts.push(text.to_string());
        }
        WriteScope::parse_all(&texts).ok()
    }
}
