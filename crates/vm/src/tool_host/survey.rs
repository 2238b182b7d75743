//! The tool survey: which host tools the configured MCP servers provide, which states of
//! a compiled program grant each, and which granted tools no server provides; and those
//! findings as diagnostics (`archmax tools` prints the survey, `archmax validate --tools`
//! adds the diagnostics to its report).
//!
//! The one thing to know: everything is computed from the compiled program (each state's
//! surface tools of kind `Host`, with the grant that put them there), the host settings
//! (`essential_tools`) and one [`ToolHost`] catalog, so a test drives it with a fake
//! host. Asking the catalog starts the servers.

use archmax_compiler::Analysis;
use archmax_compiler::diagnostic::{Code, Diagnostic, Scope, list_names};
use archmax_compiler::program::{GrantTier, Program, ToolKind};
use archmax_compiler::source::Span;
use archmax_config::settings::RunnerSettings;

use crate::tool_host::{Catalog, HostTool, ToolHost};

/// One state whose surface holds a host tool, and the grant that put it there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grantor {
    pub workflow: String,
    pub state: String,
    /// `allow`, `allow_always` or `default`.
    pub by: &'static str,
}

/// A tool a server provides, with who grants it (nobody, possibly).
#[derive(Clone, Debug)]
pub struct ProvidedTool {
    pub tool: HostTool,
    pub granted_in: Vec<Grantor>,
    pub essential: bool,
}

/// A granted tool no server provides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingTool {
    pub name: String,
    pub granted_in: Vec<Grantor>,
    pub essential: bool,
    /// Provided tools with the same action under another collection (or none).
    pub candidates: Vec<String>,
}

/// What [`survey`] found.
#[derive(Clone, Debug, Default)]
pub struct ToolsReport {
    /// By name.
    pub tools: Vec<ProvidedTool>,
    /// By name.
    pub not_provided: Vec<MissingTool>,
    /// The catalog's problems, each a sentence naming its server.
    pub problems: Vec<String>,
}

/// The report for `program` from `host`'s catalog.
pub async fn survey(program: &Program, settings: &RunnerSettings, host: &dyn ToolHost) -> ToolsReport {
    let catalog = host.catalog().await;
    report(program, settings, &catalog)
}

/// Every host tool a state's surface holds, with the states granting it, in program order;
/// `essential_tools` marks the tools on everywhere.
fn granted(program: &Program, settings: &RunnerSettings) -> Vec<(String, Vec<Grantor>, bool)> {
    let mut granted: Vec<(String, Vec<Grantor>, bool)> = Vec::new();
    fn entry<'g>(
        granted: &'g mut Vec<(String, Vec<Grantor>, bool)>,
        name: &str,
    ) -> &'g mut (String, Vec<Grantor>, bool) {
        let index = match granted.iter().position(|(known, ..)| known == name) {
            Some(index) => index,
            None => {
                granted.push((name.to_string(), Vec::new(), false));
                granted.len() - 1
            }
        };
        &mut granted[index]
    }
    for workflow in &program.workflows {
        for state in &workflow.states {
            for tool in &workflow.surface(state.surface).tools {
                if tool.kind != ToolKind::Host {
                    continue;
                }
                let tier = state.guards.grants.iter().find(|grant| grant.tool == tool.name).map(|grant| grant.tier);
                let by = match tier {
                    Some(GrantTier::State) => "allow",
                    Some(GrantTier::Workflow) => "allow_always",
                    Some(GrantTier::Default) | None => "default",
                };
                let grantor = Grantor {
                    workflow: program.str(workflow.slug).to_string(),
                    state: program.str(state.slug).to_string(),
                    by,
                };
                entry(&mut granted, program.str(tool.name)).1.push(grantor);
            }
        }
    }
    for name in &settings.essential_tools {
        entry(&mut granted, name).2 = true;
    }
    granted
}

/// What a tool does, without its collection: `send_email` for `mail__send_email`.
fn action(name: &str) -> &str {
    name.split_once("__").map_or(name, |(_, action)| action)
}

/// The report for `program` from one catalog.
pub fn report(program: &Program, settings: &RunnerSettings, catalog: &Catalog) -> ToolsReport {
    let granted = granted(program, settings);
    let mut tools: Vec<ProvidedTool> = catalog
        .tools
        .iter()
        .map(|tool| {
            let grant = granted.iter().find(|(name, ..)| *name == tool.name);
            ProvidedTool {
                tool: tool.clone(),
                granted_in: grant.map(|(_, grantors, _)| grantors.clone()).unwrap_or_default(),
                essential: grant.is_some_and(|(.., essential)| *essential),
            }
        })
        .collect();
    tools.sort_by(|left, right| left.tool.name.cmp(&right.tool.name));
    let mut not_provided: Vec<MissingTool> = granted
        .into_iter()
        .filter(|(name, ..)| catalog.tool(name).is_none())
        .map(|(name, granted_in, essential)| {
            let mut candidates: Vec<String> = catalog
                .tools
                .iter()
                .filter(|tool| action(&tool.name) == action(&name))
                .map(|tool| tool.name.clone())
                .collect();
            candidates.sort();
            MissingTool { name, granted_in, essential, candidates }
        })
        .collect();
    not_provided.sort_by(|left, right| left.name.cmp(&right.name));
    ToolsReport { tools, not_provided, problems: catalog.problems.clone() }
}

/// The tools entries of `workflow` that name `tool`: its `allow_always`, then each state's
/// `allow`.
fn entries_naming(analysis: &Analysis, workflow: &str, tool: &str) -> Vec<Span> {
    let Some(parsed) = analysis.unit(workflow).and_then(|unit| unit.workflow.as_ref()) else { return Vec::new() };
    let root = parsed.tools.allow_always.iter().flat_map(|entries| entries.value.iter());
    let states = parsed.states.iter().flat_map(|state| state.tools.allow.iter());
    root.chain(states).filter(|entry| entry.name() == tool).map(|entry| entry.tool.span).collect()
}

/// The report's findings as diagnostics: each granted tool no server provides (at the
/// entries granting it, per workflow, or at its `essential_tools` entry), and each
/// catalog problem (at the table of the server it names, when it names one).
/// `catalog_command` is how the host's users see the servers' catalog (the CLI's
/// `archmax tools`); the helps name it when it is given.
pub fn diagnostics(
    report: &ToolsReport,
    analysis: &Analysis,
    settings: &RunnerSettings,
    catalog_command: Option<&str>,
) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    let catalog = |what: &str| catalog_command.map(|command| format!("; `{command}` {what}")).unwrap_or_default();
    for missing in &report.not_provided {
        let help = match missing.candidates.as_slice() {
            [] => format!(
                "configure the MCP server that provides `{}` in archmax.toml (`[mcp_servers.<name>]`), or remove the grant{}",
                missing.name,
                catalog("lists what the servers provide")
            ),
            candidates => format!("a server provides {}: grant the tool by that name", list_names(candidates)),
        };
        let mut workflows: Vec<&str> = missing.granted_in.iter().map(|grantor| grantor.workflow.as_str()).collect();
        workflows.dedup();
        for workflow in workflows {
            let states: Vec<&str> = missing
                .granted_in
                .iter()
                .filter(|grantor| grantor.workflow == workflow)
                .map(|grantor| grantor.state.as_str())
                .collect();
            let plural = if states.len() == 1 { "" } else { "s" };
            let message = format!(
                "`{}` is granted in state{plural} {} but no MCP server provides it",
                missing.name,
                list_names(&states)
            );
            let spans = entries_naming(analysis, workflow, &missing.name);
            let mut diagnostic = Diagnostic::new(Code::HostToolNotProvided, spans.first().copied(), message)
                .with_help(help.clone())
                .with_scope(Scope::Workflow(workflow.to_string()));
            for span in spans.iter().skip(1) {
                diagnostic = diagnostic.with_secondary(*span, "also granted here");
            }
            found.push(diagnostic);
        }
        if missing.essential {
            let message = format!("essential tool `{}` is provided by no MCP server", missing.name);
            let span = settings.essential_tool_spans.get(&missing.name).copied();
            found.push(Diagnostic::new(Code::HostToolNotProvided, span, message).with_help(help));
        }
    }
    for problem in &report.problems {
        let server = settings
            .mcp_servers
            .values()
            .filter(|server| {
                problem.contains(&format!("`{}`", server.name)) || problem.starts_with(&format!("{}:", server.name))
            })
            .max_by_key(|server| server.name.len());
        let span = server.map(|server| server.span).or(analysis.workspace.config_file.map(Span::file_start));
        found.push(
            Diagnostic::new(
                Code::HostConfig,
                span,
                format!("an MCP server could not be asked for its tools: {problem}"),
            )
            .with_help(format!(
                "fix the server's table in archmax.toml or the server itself{}",
                catalog("shows the catalog")
            )),
        );
    }
    found
}
