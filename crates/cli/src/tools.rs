//! `archmax tools [--root DIR] [--json]` and `archmax validate --tools`: which host tools
//! the configured MCP servers provide, which states grant each, and which granted tools
//! no server provides.
//!
//! The one thing to know: the survey and its diagnostics are the VM's
//! ([`archmax_vm::tool_host::survey`]: computed from the compiled program, the host
//! settings and one [`ToolHost`] catalog); this module compiles, builds the host, and
//! prints. Asking the catalog starts the servers; that is why plain `validate` never does
//! it and `validate --tools` does.
//!
//! `--json` prints one object, stable across releases (fields are only ever added):
//!
//! ```json
//! {
//!   "tools": [{ "name": "crm__lookup", "server": "crm", "description": "…",
//!               "input_schema": { "type": "object" },
//!               "path_arguments": [{ "argument": "file", "access": "read" }],
//!               "granted_in": [{ "workflow": "support", "state": "triage", "by": "allow" }],
//!               "essential": false }],
//!   "not_provided": [{ "name": "send_email", "granted_in": […], "essential": false,
//!                      "candidates": ["mail__send_email"] }],
//!   "problems": ["MCP server `crm` …"]
//! }
//! ```
//!
//! `by` is `allow` (the state's `tools.allow`), `allow_always` (the workflow-wide grant)
//! or `default`; `essential` is true for a tool `essential_tools` turns on in every state.
//! `candidates` are provided tools with the same action under another name. The command
//! reports everything it found, then exits 1 when there are problems (a server that did
//! not start or answer, a variable it needs that is unset), else 0: a granted tool no
//! server provides is reported but is `validate --tools`' to fail on.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use archmax_compiler::diagnostic::{Diagnostic, Scope, list_names};
use archmax_compiler::lower::BuildInputs;
use archmax_compiler::{Analysis, CompileError, Report, compile, compile_analysis};
use archmax_config::settings::{RunnerSettings, check_environment, parse_runner_settings};
use archmax_vm::stdlib::PLATFORM_PROMPT;
use archmax_vm::tool_host::survey::{Grantor, ToolsReport, diagnostics, survey};
use archmax_vm::tool_host::{NoHost, ToolHost};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// The command that shows the servers' catalog, named in the survey's helps.
const CATALOG_COMMAND: &str = "archmax tools";

/// The host the commands ask for tools: the MCP servers of `settings`, started on first
/// need. A bare `command` is looked up beside the running `archmax` first (where the
/// workspace's own servers are built), then on `PATH`.
pub fn tool_host(root: &Path, settings: &RunnerSettings) -> Arc<dyn ToolHost> {
    if settings.mcp_servers.is_empty() {
        return Arc::new(NoHost);
    }
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf));
    let options = archmax_mcp::HostOptions::new(root).with_command_dirs(beside.into_iter().collect());
    Arc::new(archmax_mcp::McpHost::new(settings.mcp_servers.values().cloned().collect(), options))
}

/// `<root>/archmax.toml`'s runner tables, for a command that runs sessions: none when the
/// file is absent; its problems (`archmax validate` shows where) refuse the command.
pub fn read_settings(root: &Path) -> Result<RunnerSettings, String> {
    let path = root.join("archmax.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(RunnerSettings::default()),
        Err(error) => return Err(format!("could not read `{}`: {error}", path.display())),
    };
    let (settings, problems) = parse_runner_settings(archmax_compiler::source::FileId(0), &text);
    let problems: Vec<&Diagnostic> = problems.iter().filter(|problem| problem.is_error()).collect();
    if problems.is_empty() {
        return Ok(settings);
    }
    Err(format!("`{}` does not hold (`archmax validate` shows more):\n{}", path.display(), listed(&problems, &text)))
}

/// Each problem on a line of its own, at its place in `archmax.toml` (`text`).
fn listed(problems: &[&Diagnostic], text: &str) -> String {
    let mut sources = archmax_compiler::source::SourceMap::new();
    let file = sources.add("archmax.toml", "archmax.toml", text);
    let lines: Vec<String> = problems
        .iter()
        .map(|problem| {
            let at = problem.span.map(|span| {
                let place = sources.file(file).line_column(span.start);
                format!("archmax.toml:{}:{}: ", place.line, place.column)
            });
            let at = at.unwrap_or_default();
            match &problem.help {
                Some(help) => format!("  {at}{} ({help})", problem.message),
                None => format!("  {at}{}", problem.message),
            }
        })
        .collect();
    lines.join("\n")
}

/// The host tools a command's runtimes are given: `archmax.toml`'s MCP servers and
/// essential tools. A variable a server needs that is not set refuses the command before
/// anything runs, naming it.
pub fn host_tools(root: &Path, settings: &RunnerSettings) -> Result<archmax_vm::tool_host::HostTools, String> {
    let missing = environment(settings);
    let missing: Vec<&Diagnostic> = missing.iter().collect();
    if !missing.is_empty() {
        let text = std::fs::read_to_string(root.join("archmax.toml")).unwrap_or_default();
        return Err(format!("the MCP servers of `archmax.toml` cannot start:\n{}", listed(&missing, &text)));
    }
    Ok(archmax_vm::tool_host::HostTools {
        host: tool_host(root, settings),
        essential: settings.essential_tools.clone(),
    })
}

/// `archmax.toml`'s settings as the analysis read it (the diagnostics are the analysis's).
pub(crate) fn settings(analysis: &Analysis) -> RunnerSettings {
    match analysis.workspace.config_file.filter(|file| analysis.workspace.readable(*file)) {
        Some(file) => parse_runner_settings(file, analysis.sources().text(file)).0,
        None => RunnerSettings::default(),
    }
}

/// The variables the servers copy from this process's environment that are not set.
fn environment(settings: &RunnerSettings) -> Vec<Diagnostic> {
    check_environment(settings, archmax_vm::environment::process_env)
}

/// `archmax tools`.
pub fn run(executor: &Runtime, root: &Path, json: bool) -> ExitCode {
    let compiled = match compile(root, &[], &BuildInputs { platform_prompt: PLATFORM_PROMPT }) {
        Ok(compiled) => compiled,
        Err(error) => return crate::build::refused(error),
    };
    let settings = settings(&compiled.analysis);
    let host = tool_host(root, &settings);
    let mut report = executor.block_on(survey(&compiled.program, &settings, host.as_ref()));
    let missing = environment(&settings).into_iter().map(|diagnostic| diagnostic.message);
    report.problems.splice(0..0, missing);
    if json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report)).unwrap_or_default());
    } else {
        print!("{}", to_text(&report));
    }
    if report.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn grantors_json(grantors: &[Grantor]) -> Value {
    grantors
        .iter()
        .map(|grantor| json!({ "workflow": grantor.workflow, "state": grantor.state, "by": grantor.by }))
        .collect()
}

/// The `--json` document (see the module docs).
pub fn to_json(report: &ToolsReport) -> Value {
    let tools: Vec<Value> = report
        .tools
        .iter()
        .map(|provided| {
            let paths: Vec<Value> = provided
                .tool
                .paths
                .iter()
                .map(|(argument, access)| json!({ "argument": argument, "access": access.as_str() }))
                .collect();
            json!({
                "name": provided.tool.name,
                "server": provided.tool.server,
                "description": provided.tool.description,
                "input_schema": provided.tool.input_schema,
                "path_arguments": paths,
                "granted_in": grantors_json(&provided.granted_in),
                "essential": provided.essential,
            })
        })
        .collect();
    let not_provided: Vec<Value> = report
        .not_provided
        .iter()
        .map(|missing| {
            json!({
                "name": missing.name,
                "granted_in": grantors_json(&missing.granted_in),
                "essential": missing.essential,
                "candidates": missing.candidates,
            })
        })
        .collect();
    json!({ "tools": tools, "not_provided": not_provided, "problems": report.problems })
}

/// `support/triage (allow), support/answer (allow_always)`, and `every state
/// (essential_tools)` for an essential tool.
fn grantors_text(grantors: &[Grantor], essential: bool) -> String {
    let mut parts: Vec<String> =
        grantors.iter().map(|grantor| format!("{}/{} ({})", grantor.workflow, grantor.state, grantor.by)).collect();
    if essential {
        parts.insert(0, "every state (essential_tools)".to_string());
    }
    if parts.is_empty() { "no state".to_string() } else { parts.join(", ") }
}

/// `email (string, required), limit (integer)` from an object schema.
fn arguments_text(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(properties) = schema["properties"].as_object().filter(|properties| !properties.is_empty()) else {
        return "none".to_string();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let kind = match &property["type"] {
                Value::String(kind) => kind.clone(),
                Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
                _ => "any".to_string(),
            };
            if required.contains(&name.as_str()) {
                format!("{name} ({kind}, required)")
            } else {
                format!("{name} ({kind})")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report for a person.
pub fn to_text(report: &ToolsReport) -> String {
    let mut servers: Vec<&str> = report.tools.iter().map(|provided| provided.tool.server.as_str()).collect();
    servers.sort_unstable();
    servers.dedup();
    let mut text = format!(
        "{} host tool(s) from {} server(s); {} granted tool(s) provided by no server; {} problem(s)\n",
        report.tools.len(),
        servers.len(),
        report.not_provided.len(),
        report.problems.len()
    );
    for provided in &report.tools {
        let tool = &provided.tool;
        text.push_str(&format!("\n{} (server {})\n", tool.name, tool.server));
        if !tool.description.trim().is_empty() {
            text.push_str(&format!("  {}\n", tool.description.trim()));
        }
        text.push_str(&format!("  arguments: {}\n", arguments_text(&tool.input_schema)));
        if !tool.paths.is_empty() {
            let paths: Vec<String> =
                tool.paths.iter().map(|(argument, access)| format!("{argument} ({})", access.as_str())).collect();
            text.push_str(&format!("  path arguments: {}\n", paths.join(", ")));
        }
        text.push_str(&format!("  granted in: {}\n", grantors_text(&provided.granted_in, provided.essential)));
    }
    if !report.not_provided.is_empty() {
        text.push_str("\ngranted but provided by no server:\n");
        for missing in &report.not_provided {
            text.push_str(&format!(
                "  {}: granted in {}",
                missing.name,
                grantors_text(&missing.granted_in, missing.essential)
            ));
            if !missing.candidates.is_empty() {
                text.push_str(&format!("; provided as {}", list_names(&missing.candidates)));
            }
            text.push('\n');
        }
    }
    if !report.problems.is_empty() {
        text.push_str("\nproblems:\n");
        for problem in &report.problems {
            text.push_str(&format!("  {problem}\n"));
        }
    }
    text
}

/// `validate --tools`: compiles the analysis (whose report is valid), asks the host, and
/// adds the findings to `report` as errors. Returns the analysis back, for rendering.
pub fn check(
    executor: &Runtime,
    root: &Path,
    analysis: Analysis,
    selection: &[String],
    report: &mut Report,
) -> Result<Analysis, String> {
    let compiled = match compile_analysis(analysis, selection, &BuildInputs { platform_prompt: PLATFORM_PROMPT }) {
        Ok(compiled) => compiled,
        Err(CompileError::Invalid(invalid)) => {
            *report = invalid.report;
            return Ok(invalid.analysis);
        }
        Err(error) => return Err(error.to_string()),
    };
    let settings = settings(&compiled.analysis);
    let host = tool_host(root, &settings);
    let surveyed = executor.block_on(survey(&compiled.program, &settings, host.as_ref()));
    let mut found = environment(&settings);
    found.extend(diagnostics(&surveyed, &compiled.analysis, &settings, Some(CATALOG_COMMAND)));
    for diagnostic in found {
        for workflow in &mut report.workflows {
            let applies = match &diagnostic.scope {
                Scope::Workflow(slug) => *slug == workflow.slug,
                _ => true,
            };
            if applies {
                workflow.diagnostics.push(diagnostic.clone());
            }
        }
    }
    Ok(compiled.analysis)
}

#[cfg(test)]
mod tests {
    use archmax_compiler::diagnostic::Code;
    use archmax_compiler::program::Program;
    use archmax_compiler::source::{FileId, Span};
    use archmax_compiler::tools::PathAccess;
    use archmax_compiler::{analyze_workspace, load_memory};
    use archmax_vm::tool_host::survey::MissingTool;
    use archmax_vm::tool_host::{Catalog, HostAnswer, HostCall, HostError, HostFuture, HostTool};

    use super::*;

    /// Runs a survey to completion, as the commands do on the process's runtime.
    fn block_on<T>(work: impl std::future::Future<Output = T>) -> Result<T, String> {
        let executor = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("could not start the runtime: {error}"))?;
        Ok(executor.block_on(work))
    }

    /// A host whose catalog is given; it answers no call.
    struct FakeHost(Arc<Catalog>);

    impl ToolHost for FakeHost {
        fn catalog(&self) -> HostFuture<'_, Arc<Catalog>> {
            let catalog = self.0.clone();
            Box::pin(async move { catalog })
        }

        fn call<'a>(&'a self, call: HostCall<'a>) -> HostFuture<'a, Result<HostAnswer, HostError>> {
            Box::pin(async move { Err(HostError::NotProvided(call.tool.to_string())) })
        }
    }

    const WORKFLOW: &str = r#"instructions: Help customers with their orders.
tools:
  allow_always:
    - read_file
    - crm__lookup
states:
  triage:
    triggers:
      manual:
    instructions: Look the customer up, then hand over.
    tools:
      allow:
        - { tool: crm__lookup, args: { email: ["*@example.com"] } }
    transitions:
      - to: notify
        description: The customer is known.
  notify:
    instructions: Write to the customer.
    tools:
      allow:
        - send_email
"#;

    const SETTINGS: &str = r#"essential_tools = ["crm__whoami"]

[mcp_servers.crm]
command = "crm-mcp"

[mcp_servers.mail]
url = "https://mail.internal/mcp"
"#;

    fn tool(name: &str, server: &str, paths: Vec<(String, PathAccess)>) -> HostTool {
        HostTool {
            name: name.to_string(),
            server: server.to_string(),
            description: format!("The {name} tool."),
            input_schema: json!({
                "type": "object",
                "properties": { "email": { "type": "string" }, "limit": { "type": ["integer", "null"] } },
                "required": ["email"]
            }),
            paths,
        }
    }

    fn catalog() -> Catalog {
        Catalog {
            tools: vec![
                tool("mail__send_email", "mail", Vec::new()),
                tool("crm__lookup", "crm", vec![("export_to".to_string(), PathAccess::Write)]),
                tool("crm__purge", "crm", Vec::new()),
            ],
            problems: vec!["MCP server `crm` exited at start: crm-mcp: region not set".to_string()],
        }
    }

    /// The analysis and program of a workspace holding the workflow and the settings.
    fn compiled() -> (Analysis, Program, RunnerSettings) {
        let files = [("workflows/support/workflow.yaml", WORKFLOW), ("archmax.toml", SETTINGS)];
        let workspace = match load_memory(files) {
            Ok(workspace) => workspace,
            Err(error) => panic!("the workspace loads: {error}"),
        };
        let analysis = analyze_workspace(workspace);
        let compiled = match compile_analysis(analysis, &[], &BuildInputs { platform_prompt: PLATFORM_PROMPT }) {
            Ok(compiled) => compiled,
            Err(error) => panic!("the workspace compiles: {error:?}"),
        };
        let settings = settings(&compiled.analysis);
        assert_eq!(settings.mcp_servers.len(), 2, "the settings are read from the analysis");
        (compiled.analysis, compiled.program, settings)
    }

    fn survey_of(program: &Program, settings: &RunnerSettings) -> ToolsReport {
        let host = FakeHost(Arc::new(catalog()));
        match block_on(survey(program, settings, &host)) {
            Ok(report) => report,
            Err(error) => panic!("{error}"),
        }
    }

    fn grantor(state: &str, by: &'static str) -> Grantor {
        Grantor { workflow: "support".to_string(), state: state.to_string(), by }
    }

    #[test]
    fn every_provided_tool_is_listed_with_the_states_granting_it() {
        let (_, program, settings) = compiled();
        let report = survey_of(&program, &settings);
        let names: Vec<&str> = report.tools.iter().map(|provided| provided.tool.name.as_str()).collect();
        assert_eq!(names, ["crm__lookup", "crm__purge", "mail__send_email"]);
        assert_eq!(report.tools[0].granted_in, [grantor("triage", "allow"), grantor("notify", "allow_always")]);
        assert!(report.tools[1].granted_in.is_empty(), "nobody grants crm__purge");
        assert_eq!(report.problems, catalog().problems);
    }

    #[test]
    fn granted_tools_nobody_provides_are_named_with_their_candidates() {
        let (_, program, settings) = compiled();
        let report = survey_of(&program, &settings);
        assert_eq!(
            report.not_provided,
            [
                MissingTool {
                    name: "crm__whoami".to_string(),
                    granted_in: Vec::new(),
                    essential: true,
                    candidates: Vec::new()
                },
                MissingTool {
                    name: "send_email".to_string(),
                    granted_in: vec![grantor("notify", "allow")],
                    essential: false,
                    candidates: vec!["mail__send_email".to_string()],
                },
            ]
        );
    }

    #[test]
    fn the_json_document_has_the_documented_shape() {
        let (_, program, settings) = compiled();
        let document = to_json(&survey_of(&program, &settings));
        let lookup = &document["tools"][0];
        assert_eq!(lookup["name"], "crm__lookup");
        assert_eq!(lookup["server"], "crm");
        assert_eq!(lookup["description"], "The crm__lookup tool.");
        assert_eq!(lookup["input_schema"]["required"], json!(["email"]));
        assert_eq!(lookup["path_arguments"], json!([{ "argument": "export_to", "access": "write" }]));
        assert_eq!(
            lookup["granted_in"],
            json!([
                { "workflow": "support", "state": "triage", "by": "allow" },
                { "workflow": "support", "state": "notify", "by": "allow_always" }
            ])
        );
        assert_eq!(lookup["essential"], false);
        assert_eq!(
            document["not_provided"][0],
            json!({ "name": "crm__whoami", "granted_in": [], "essential": true, "candidates": [] })
        );
        assert_eq!(document["not_provided"][1]["candidates"], json!(["mail__send_email"]));
        assert_eq!(document["problems"], json!(catalog().problems));
    }

    #[test]
    fn the_text_report_reads_for_a_person() {
        let (_, program, settings) = compiled();
        let text = to_text(&survey_of(&program, &settings));
        let expected = [
            "3 host tool(s) from 2 server(s); 2 granted tool(s) provided by no server; 1 problem(s)",
            "crm__lookup (server crm)",
            "  The crm__lookup tool.",
            "  arguments: email (string, required), limit (integer or null)",
            "  path arguments: export_to (write)",
            "  granted in: support/triage (allow), support/notify (allow_always)",
            "  granted in: no state",
            "  crm__whoami: granted in every state (essential_tools)",
            "  send_email: granted in support/notify (allow); provided as `mail__send_email`",
            "  MCP server `crm` exited at start: crm-mcp: region not set",
        ];
        for line in expected {
            assert!(text.lines().any(|written| written == line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn findings_become_errors_at_the_grants_the_essential_entry_and_the_server() {
        let (analysis, program, settings) = compiled();
        let report = survey_of(&program, &settings);
        let found = diagnostics(&report, &analysis, &settings, Some(CATALOG_COMMAND));
        let located: Vec<(Code, String, &str)> = found
            .iter()
            .map(|diagnostic| {
                let span = diagnostic.span.unwrap_or(Span::file_start(FileId(0)));
                let text = &analysis.sources().file(span.file).text;
                (diagnostic.code, text[span.start as usize..span.end as usize].to_string(), diagnostic.message.as_str())
            })
            .collect();
        assert_eq!(
            located,
            [
                (
                    Code::HostToolNotProvided,
                    "\"crm__whoami\"".to_string(),
                    "essential tool `crm__whoami` is provided by no MCP server"
                ),
                (
                    Code::HostToolNotProvided,
                    "send_email".to_string(),
                    "`send_email` is granted in state `notify` but no MCP server provides it"
                ),
                (
                    Code::HostConfig,
                    "[mcp_servers.crm]".to_string(),
                    "an MCP server could not be asked for its tools: MCP server `crm` exited at start: crm-mcp: region not set"
                ),
            ]
        );
        assert!(found.iter().all(|diagnostic| diagnostic.is_error() && diagnostic.help.is_some()));
        assert_eq!(found[1].scope, Scope::Workflow("support".to_string()));
        assert_eq!(found[1].help.as_deref(), Some("a server provides `mail__send_email`: grant the tool by that name"));
    }

    #[test]
    fn the_commands_host_reports_a_server_that_cannot_start_and_its_tools_as_not_provided() {
        let (_, program, _) = compiled();
        let text = "[mcp_servers.crm]\ncommand = \"archmax-test-no-such-server\"\n";
        let (settings, problems) = parse_runner_settings(archmax_compiler::source::FileId(0), text);
        assert!(problems.is_empty(), "{problems:?}");
        let host = tool_host(Path::new("."), &settings);
        let report = match block_on(survey(&program, &settings, host.as_ref())) {
            Ok(report) => report,
            Err(error) => panic!("{error}"),
        };
        assert!(report.tools.is_empty());
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].contains("`crm`"), "the problem names the server: {:?}", report.problems);
        let names: Vec<&str> = report.not_provided.iter().map(|missing| missing.name.as_str()).collect();
        assert_eq!(names, ["crm__lookup", "send_email"]);
        // No servers: no host to start.
        let host = tool_host(Path::new("."), &RunnerSettings::default());
        assert!(!host.may_provide("crm__lookup"));
    }
}
