//! The root of `workflow.yaml`: identity keys, `runtime`, `disabled`, `settings`,
//! `tests`, the workflow-wide grants and `states`.

use crate::diagnostic::{Code, Diagnostic, Scope, SpecPath};
use crate::source::{FileId, Span, Spanned};
use crate::syntax::yaml::{Node, NodeKind, ScalarValue};

use super::ast::{CacheTtl, Judge, PromptCache, RootGrants, RootTools, Settings, TestsConfig, Workflow};
use super::governance::{mount_entries, name_list, skill_entries, tool_entries};
use super::reader::{Fields, Reader};
use super::state::parse_states;

pub(crate) const ROOT: Fields = Fields {
    known: &[
        "title",
        "instructions",
        "disabled",
        "runtime",
        "settings",
        "tests",
        "tools",
        "skills",
        "mounts",
        "metadata",
        "states",
    ],
    removed: &[
        ("name", "write the label as `title:`; the directory name is the workflow's identity"),
        ("description", "move the text into `instructions:`, rewritten as direction for the agent"),
        ("policy", "deny tools with `tools.forbid_always` and skill bundles with `skills.forbid_always`"),
        (
            "budget",
            "delete it: a turn is bounded by the runtime's recursion limit (400 steps); bound one state with its own `budget`",
        ),
        ("extensions", "delete it: a custom check is a code state (`type: code`) running a script from `scripts/`"),
        ("triggers", "declare each trigger under the `triggers:` of the state it enters"),
        ("rubrics", "judge work with a grader state (`type: grader`) placed behind the state that produces it"),
    ],
    what: "a workflow",
};

pub(crate) const RUNTIME: Fields = Fields { known: &["engine", "version"], removed: &[], what: "`runtime`" };

pub(crate) const SETTINGS: Fields = Fields {
    known: &["model", "timeoutMs", "memoryLimitBytes", "maxPtcCalls", "maxResultChars", "prompt_cache"],
    removed: &[
        ("sub_workflows", "delete it: the runtime fixes sub-workflow bounds (depth 3, at most 4 calls in flight)"),
        ("prompt", "put standing direction in the root `instructions`, and human prose in WORKFLOW.md"),
        ("forbid_tools", "list the denied tools in `tools.forbid_always`"),
    ],
    what: "`settings`",
};

pub(crate) const PROMPT_CACHE: Fields =
    Fields { known: &["enabled", "ttl"], removed: &[], what: "`settings.prompt_cache`" };

pub(crate) const TESTS: Fields =
    Fields { known: &["maxConcurrency", "caseTimeoutMs", "judge"], removed: &[], what: "`tests`" };

pub(crate) const JUDGE: Fields = Fields { known: &["model", "modelOptions"], removed: &[], what: "`tests.judge`" };

pub(crate) const MODEL_OPTIONS: Fields =
    Fields { known: &["temperature", "maxTokens"], removed: &[], what: "`tests.judge.modelOptions`" };

pub(crate) const ROOT_TOOLS: Fields =
    Fields { known: &["allow_always", "forbid_always"], removed: &[], what: "the root `tools` block" };

pub(crate) const ROOT_SKILLS: Fields = Fields {
    known: &["allow_always", "forbid_always"],
    removed: &[(
        "allow",
        "the root ceiling is gone: grant bundles everywhere with `skills.allow_always`, and per state with `skills.allow` on the state",
    )],
    what: "the root `skills` block",
};

const ROOT_MOUNTS: Fields = Fields {
    known: &["allow_always", "forbid_always"],
    removed: &[(
        "allow",
        "the root ceiling is gone: grant mounts everywhere with `mounts.allow_always`, and per state with `mounts.allow` on the state",
    )],
    what: "the root `mounts` block",
};

/// The contract this compiler implements.
pub use archmax_program::program::CONTRACT;

/// Reads a whole workflow document. `root` is the loaded document; `None` when the
/// file had no usable document (the loader reported why).
pub fn parse_workflow(
    slug: &str,
    file: FileId,
    source: &str,
    root: &Node,
    prose: Option<FileId>,
) -> (Workflow, Vec<Diagnostic>) {
    let mut reader = Reader::new(source, Scope::Workflow(slug.to_string()));
    let mut workflow = Workflow {
        slug: slug.to_string(),
        file,
        title: None,
        instructions: None,
        disabled: false,
        disabled_span: None,
        settings: Settings::default(),
        tests: TestsConfig::default(),
        tools: RootTools::default(),
        skills: None,
        mounts: None,
        metadata: None,
        states: Vec::new(),
        states_span: None,
        prose,
        state_indices: Default::default(),
        misspelt: Reader::meant_keys(root, &ROOT),
        misplaced_states: Vec::new(),
    };
    let path = SpecPath::ROOT;
    let Some(fields) = reader.fields(root, &path, &ROOT, false) else {
        return (workflow, reader.diagnostics);
    };
    let mut states_node = None;
    for field in &fields {
        let key_path = path.key(field.key);
        match field.key {
            "title" => workflow.title = reader.nonempty_string(field.value, &key_path),
            "instructions" => workflow.instructions = reader.nonempty_string(field.value, &key_path),
            "disabled" => {
                workflow.disabled_span = Some(field.value.span);
                workflow.disabled = read_disabled(&mut reader, field.value, &key_path);
            }
            "runtime" => read_runtime(&mut reader, field.value, &key_path),
            "settings" => workflow.settings = read_settings(&mut reader, field.value, &key_path),
            "tests" => workflow.tests = read_tests(&mut reader, field.value, &key_path),
            "tools" => workflow.tools = read_root_tools(&mut reader, field.value, &key_path),
            "skills" => {
                workflow.skills = read_root_grants(&mut reader, field.value, &key_path, &ROOT_SKILLS, field.key_span)
                    .map(|(allow, forbid, span)| RootGrants {
                        span,
                        allow_always: skill_entries(&mut reader, allow, &key_path.key("allow_always")),
                        forbid_always: forbid
                            .map(|node| skill_entries(&mut reader, Some(node), &key_path.key("forbid_always")))
                            .unwrap_or_default(),
                    });
            }
            "mounts" => {
                workflow.mounts = read_root_grants(&mut reader, field.value, &key_path, &ROOT_MOUNTS, field.key_span)
                    .map(|(allow, forbid, span)| RootGrants {
                        span,
                        allow_always: allow
                            .map(|node| mount_entries(&mut reader, node, &key_path.key("allow_always")))
                            .unwrap_or_default(),
                        forbid_always: forbid
                            .map(|node| name_list(&mut reader, node, &key_path.key("forbid_always"), true))
                            .unwrap_or_default(),
                    });
            }
            "metadata" => workflow.metadata = Some(field.value.clone()),
            "states" => {
                workflow.states_span = Some(field.key_span);
                states_node = Some(field.value);
            }
            _ => {}
        }
    }
    if workflow.instructions.is_none()
        && !fields.iter().any(|field| field.key == "instructions")
        && !workflow.misspelt.contains(&"instructions")
    {
        reader.report(
            Diagnostic::at(
                Code::MissingInstructions,
                Span::file_start(file),
                "the workflow has no top-level `instructions`",
            )
            .with_help(
                "add `instructions: |-` with the rules that hold in every state; they open the cached prompt prefix",
            ),
            &path,
        );
    }
    if workflow.disabled && fields.iter().any(|field| field.key == "disabled" && field.value.as_bool() == Some(true)) {
        reader.report(
            Diagnostic::at(
                Code::DisabledWorkflow,
                workflow.disabled_span.unwrap_or(Span::file_start(file)),
                "the workflow is disabled: runs and calls into it are refused",
            )
            .with_help(
                "parked sessions can still be decided, replied to and delivered; remove `disabled` to start new turns",
            ),
            &path.key("disabled"),
        );
    }
    if let Some(node) = states_node {
        workflow.states = parse_states(&mut reader, node, &path.key("states"));
        workflow.index_states();
    }
    workflow.misplaced_states = super::placement::misplaced_states(&mut reader, root, states_node);
    if workflow.states.is_empty() {
        let empty_declared =
            states_node.is_some_and(|node| node.is_null() || node.as_mapping().is_some_and(<[_]>::is_empty));
        if (states_node.is_none() && !workflow.misspelt.contains(&"states")) || empty_declared {
            reader.report(
                Diagnostic::at(
                    Code::NoStates,
                    workflow.states_span.unwrap_or(Span::file_start(file)),
                    "the workflow declares no states",
                )
                .with_help(
                    "add a `states:` mapping with at least one state, and give one of them `triggers: { manual: }`",
                ),
                &path.key("states"),
            );
        }
    } else if !workflow.states.iter().any(|state| !state.triggers.is_empty() || state.misspelt.contains(&"triggers")) {
        reader.report(
            Diagnostic::at(
                Code::NoStartState,
                workflow.states_span.unwrap_or(Span::file_start(file)),
                "no state declares a trigger, so no session can start",
            )
            .with_help("mark the entry state with `triggers: { manual: }`"),
            &path.key("states"),
        );
    }
    (workflow, reader.diagnostics)
}

fn read_disabled(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> bool {
    if node.is_null() {
        return false;
    }
    match node.as_bool() {
        Some(value) => value,
        None => {
            reader.report(
                Diagnostic::at(
                    Code::DisabledNotBoolean,
                    node.span,
                    format!(
                        "`disabled` is {}, not a boolean; the runtime reads any such value as disabled",
                        node.type_name()
                    ),
                )
                .with_label("read as `true`")
                .with_help("write `disabled: true` to disable the workflow, or `disabled: false` (or remove the key)"),
                path,
            );
            true
        }
    }
}

fn read_runtime(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) {
    let Some(fields) = reader.fields(node, path, &RUNTIME, true) else {
        return;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "engine" => {
                if let Some(engine) = reader.string(field.value, &key_path)
                    && engine.value != "archmax-harness"
                {
                    reader.report(
                        Diagnostic::at(
                            Code::UnsupportedRuntime,
                            field.value.span,
                            format!(
                                "the runtime `{}` is not supported; archmax runs `archmax-harness` contract \"{CONTRACT}\"",
                                engine.value
                            ),
                        )
                        .with_label("unsupported engine")
                        .with_help("write `runtime: { engine: archmax-harness, version: \"3\" }`, or remove the block"),
                        &key_path,
                    );
                }
            }
            "version" => {
                let version = match &field.value.kind {
                    NodeKind::Scalar(scalar) => match scalar.value {
                        ScalarValue::String | ScalarValue::Integer(_) | ScalarValue::Float(_) => {
                            Some(scalar.text.clone())
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let Some(version) = version else {
                    reader.wrong_type(field.value, &key_path, "a string or a number");
                    continue;
                };
                let normalized = version.trim().trim_end_matches(".0").to_string();
                if normalized != CONTRACT {
                    let help = if normalized == "1" || normalized == "2" {
                        format!(
                            "contract \"{normalized}\" is no longer supported: migrate the workflow and write `version: \"3\"`, or remove the `runtime` block"
                        )
                    } else {
                        "write `version: \"3\"`, or remove the `runtime` block".to_string()
                    };
                    reader.report(
                        Diagnostic::at(
                            Code::UnsupportedRuntime,
                            field.value.span,
                            format!(
                                "runtime contract \"{version}\" is not supported; the supported contract is \"{CONTRACT}\""
                            ),
                        )
                        .with_label("unsupported contract")
                        .with_help(help),
                        &key_path,
                    );
                }
            }
            _ => {}
        }
    }
}

/// A model id: a non-empty string, never a block of options.
pub(super) fn read_model(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Spanned<String>> {
    if node.as_mapping().is_some() {
        reader.report(
            Diagnostic::at(
                Code::ModelNotId,
                node.span,
                format!("`{path}` must be a model id, not a block of options"),
            )
            .with_label("a mapping")
            .with_help(
                "write the id alone (`model: gpt-5-mini`); sampling and the endpoint belong to the host's configuration",
            ),
            path,
        );
        return None;
    }
    reader.nonempty_string(node, path)
}

fn read_settings(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Settings {
    let mut settings = Settings::default();
    let Some(fields) = reader.fields(node, path, &SETTINGS, true) else {
        return settings;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "model" => settings.model = read_model(reader, field.value, &key_path),
            "timeoutMs" => settings.timeout_ms = reader.integer_at_least(field.value, &key_path, 1),
            "memoryLimitBytes" => settings.memory_limit_bytes = reader.integer_at_least(field.value, &key_path, 1),
            "maxResultChars" => settings.max_result_chars = reader.integer_at_least(field.value, &key_path, 1),
            "maxPtcCalls" => {
                settings.max_ptc_calls = if field.value.is_null() {
                    Some(Spanned::new(None, field.value.span))
                } else {
                    reader
                        .integer_at_least(field.value, &key_path, 0)
                        .map(|value| Spanned::new(Some(value.value), value.span))
                }
            }
            "prompt_cache" => settings.prompt_cache = read_prompt_cache(reader, field.value, &key_path),
            _ => {}
        }
    }
    settings
}

fn read_prompt_cache(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> PromptCache {
    let mut cache = PromptCache::default();
    let Some(fields) = reader.fields(node, path, &PROMPT_CACHE, true) else {
        return cache;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "enabled" => {
                if let Some(enabled) = reader.boolean(field.value, &key_path) {
                    cache.enabled = Some(enabled);
                }
            }
            "ttl" => match field.value.scalar_text() {
                Some("5m") => cache.ttl = Some(CacheTtl::FiveMinutes),
                Some("1h") => cache.ttl = Some(CacheTtl::OneHour),
                _ => reader.invalid_value(
                    field.value,
                    &key_path,
                    format!(
                        "`{key_path}` must be `5m` or `1h`, not `{}`",
                        field.value.scalar_text().unwrap_or("a collection")
                    ),
                    "providers cache prompts for 5 minutes or 1 hour: write `ttl: 5m` or `ttl: 1h`".to_string(),
                ),
            },
            _ => {}
        }
    }
    cache
}

fn read_tests(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> TestsConfig {
    let mut tests = TestsConfig::default();
    let Some(fields) = reader.fields(node, path, &TESTS, true) else {
        return tests;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "maxConcurrency" => {
                if let Some(value) = reader.integer_at_least(field.value, &key_path, 1) {
                    if value.value > 1 {
                        reader.report(
                            Diagnostic::at(
                                Code::InvalidValue,
                                field.value.span,
                                format!("`tests.maxConcurrency` is {}, but cases run one at a time", value.value),
                            )
                            .with_label("only 1 is accepted")
                            .with_help("write `maxConcurrency: 1`, or remove the key"),
                            &key_path,
                        );
                    }
                    tests.max_concurrency = Some(value);
                }
            }
            "caseTimeoutMs" => tests.case_timeout_ms = reader.integer_at_least(field.value, &key_path, 1),
            "judge" => tests.judge = read_judge(reader, field.value, &key_path),
            _ => {}
        }
    }
    tests
}

fn read_judge(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> Option<Judge> {
    let fields = reader.fields(node, path, &JUDGE, true)?;
    let mut judge = Judge { span: Some(node.span), ..Judge::default() };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "model" => judge.model = read_model(reader, field.value, &key_path),
            "modelOptions" => {
                let Some(options) = reader.fields(field.value, &key_path, &MODEL_OPTIONS, true) else {
                    continue;
                };
                for option in options {
                    let option_path = key_path.key(option.key);
                    match option.key {
                        "temperature" => match option.value.as_f64() {
                            Some(value) if (0.0..=2.0).contains(&value) => judge.temperature = Some(value),
                            Some(_) => reader.invalid_value(
                                option.value,
                                &option_path,
                                "`temperature` must be between 0 and 2".to_string(),
                                "write a temperature such as `0` for a steady judge".to_string(),
                            ),
                            None => reader.wrong_type(option.value, &option_path, "a number"),
                        },
                        "maxTokens" => {
                            judge.max_tokens =
                                reader.integer_at_least(option.value, &option_path, 1).map(|value| value.value)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some(judge)
}

fn read_root_tools(reader: &mut Reader<'_>, node: &Node, path: &SpecPath<'_>) -> RootTools {
    let mut tools = RootTools::default();
    let Some(fields) = reader.fields(node, path, &ROOT_TOOLS, true) else {
        return tools;
    };
    for field in fields {
        let key_path = path.key(field.key);
        match field.key {
            "allow_always" => {
                tools.allow_always =
                    Some(Spanned::new(tool_entries(reader, field.value, &key_path, false), field.key_span))
            }
            "forbid_always" => tools.forbid_always = tool_entries(reader, field.value, &key_path, true),
            _ => {}
        }
    }
    tools
}

type GrantNodes<'n> = (Option<&'n Node>, Option<&'n Node>, Span);

fn read_root_grants<'n>(
    reader: &mut Reader<'_>,
    node: &'n Node,
    path: &SpecPath<'_>,
    fields: &Fields,
    key_span: Span,
) -> Option<GrantNodes<'n>> {
    let fields = reader.fields(node, path, fields, true)?;
    let mut allow = None;
    let mut forbid = None;
    for field in fields {
        match field.key {
            "allow_always" => allow = Some(field.value),
            "forbid_always" => forbid = Some(field.value),
            _ => {}
        }
    }
    Some((allow, forbid, key_span))
}
