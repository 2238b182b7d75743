//! One server's `tools/list` as host tools: full names, shown schemas, path arguments,
//! and the tools that had to be skipped.

use archmax_config::settings::McpServer;
use archmax_vm::tool_host::HostTool;

use crate::names::{full_name, is_function_name};
use crate::paths;
use crate::redact::Redactor;

/// One tool a server provides.
#[derive(Clone, Debug)]
pub struct ServerTool {
    /// The name the server knows it by.
    pub action: String,
    pub host: HostTool,
}

/// What one server provides, as last listed.
#[derive(Clone, Debug, Default)]
pub struct ToolSet {
    pub tools: Vec<ServerTool>,
    /// The tools skipped, each in a sentence naming the server and the tool.
    pub problems: Vec<String>,
}

impl ToolSet {
    pub fn describe(server: &McpServer, listed: Vec<rmcp::model::Tool>, redactor: &Redactor) -> ToolSet {
        let mut set = ToolSet::default();
        let mut seen = std::collections::HashSet::new();
        for tool in listed {
            let action = tool.name.to_string();
            if !seen.insert(action.clone()) {
                continue;
            }
            let name = full_name(&server.collection, &action);
            let skipped = |why: String| {
                redactor.redact(&format!("MCP server `{}`: its tool `{action}` is skipped: {why}", server.name))
            };
            if !is_function_name(&name) {
                set.problems.push(skipped(format!(
                    "`{name}` is not a valid function name (1 to 64 ASCII letters, digits, `_` or `-`)"
                )));
                continue;
            }
            match paths::derive(&tool.input_schema, server.path_arguments.get(&action)) {
                Ok((paths, input_schema)) => set.tools.push(ServerTool {
                    host: HostTool {
                        name,
                        server: server.name.clone(),
                        description: tool.description.map(|text| text.to_string()).unwrap_or_default(),
                        input_schema,
                        paths,
                    },
                    action,
                }),
                Err(why) => set.problems.push(skipped(why)),
            }
        }
        set
    }

    pub fn find(&self, action: &str) -> Option<&ServerTool> {
        self.tools.iter().find(|tool| tool.action == action)
    }
}
