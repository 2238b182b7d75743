//! The strict contract-3 schema: YAML nodes in, a typed spanned [`ast::Workflow`] out.
//!
//! Shape rules live here, next to the keys they govern: unknown and removed keys, value
//! types, what each state type requires and refuses, signatures and their rules, tool,
//! skill and mount entries. Rules that relate one part of a workflow to another (targets,
//! reachability, governance probes, sub-workflows) live in [`crate::check`].

pub mod ast;
pub mod case;
pub(crate) mod governance;
pub use archmax_program::matcher;
mod placement;
pub(crate) mod reader;
pub(crate) mod root;
pub(crate) mod state;
pub mod tape;
mod trigger;

#[cfg(test)]
mod json_schema_keys;

pub use root::{CONTRACT, parse_workflow};
