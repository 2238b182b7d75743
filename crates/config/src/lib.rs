//! # archmax-config
//!
//! `archmax.toml`, the host's one configuration file, read into typed tables:
//!
//! - [`mounts`]: the `[mounts]` table ([`mounts::parse_mounts`]); the table type and
//!   its path rules are `archmax_program::mounts`, re-exported there, because a compiled
//!   program carries the table it was built with;
//! - [`settings`]: the runner's tables — `[connections]`, `[schedule]`, `[mcp_servers]`,
//!   `essential_tools` and `[context]` ([`settings::parse_runner_settings`]).
//!
//! Problems are reported as `archmax_program::diagnostic::Diagnostic`s with spans into
//! the file, so `validate` shows them beside the workflows' own, and the runner refuses
//! to start on the same errors. This crate depends only on `archmax-program`, `serde` and
//! `toml`: never on the YAML front end or the VM, so both can read the file.

pub mod mounts;
pub mod settings;
