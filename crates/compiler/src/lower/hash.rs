//! The spec hash: SHA-256 over a canonical form of `workflow.yaml`.
//!
//! The canonical form is the document as JSON with every `metadata` block removed (at
//! the root and on each state), the root's `disabled` removed, and object keys sorted,
//! so key order, whitespace, comments and editor data do not change the hash while any
//! governing edit does.
//!
//! `disabled` is left out because taking a workflow out of service changes no program a
//! session runs: it only stops new turns starting, and the parked sessions of the same
//! program must still be decided, answered and delivered to without `--upgrade`.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::schema::ast::Workflow;
use crate::syntax::yaml;
use crate::workspace::Workspace;

pub fn spec_hash(workspace: &Workspace, workflow: &Workflow) -> String {
    let text = workspace.sources.text(workflow.file);
    let mut value = yaml::load(workflow.file, text).root.map(|root| root.to_json()).unwrap_or(Value::Null);
    if let Value::Object(root) = &mut value {
        root.remove("metadata");
        root.remove("disabled");
        if let Some(Value::Object(states)) = root.get_mut("states") {
            for state in states.values_mut() {
                if let Value::Object(state) = state {
                    state.remove("metadata");
                }
            }
        }
    }
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                write_canonical(&map[*key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

pub use archmax_program::hex::hex;
