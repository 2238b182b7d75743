//! # archmax-program
//!
//! What the runtime needs of a compiled program, and nothing of how it was compiled:
//!
//! - [`program::Program`], the lowered, interned form of a workspace's workflows;
//! - [`artifact`] and [`codec`], the signed `.amx` envelope, its bincode payload, and the
//!   verification a loader runs before trusting one ([`artifact::load`]);
//! - [`zones`] and [`mounts`], the path rules and the workspace's mount table;
//! - [`tools`], the tool vocabulary; [`kinds`], the closed enums a program shares with
//!   its source;
//! - [`values`] (dates and times as signatures type them), [`mod@reference`] (the `${{…}}`
//!   grammar and variable paths) and [`glob`];
//! - [`inspect`], the filtered views of a program's parts, and [`topology`], a
//!   workflow's shape as the `graph-topology` event reports it;
//! - [`script`], code-state scripts compiled to QuickJS bytecode (the loader recompiles
//!   them to check an artifact);
//! - [`source`] and [`diagnostic`], the spans and the one diagnostic type every check
//!   reports through (rendering lives in the front end);
//! - [`matcher`], the partial-match patterns mocks and tapes match calls with;
//! - [`hex`], [`text`] and [`slug`], small shared helpers (hexadecimal, cutting text short,
//!   slugs).
//!
//! The front end (`archmax-compiler`) builds on this crate and re-exports each module at
//! the same path, so `archmax_compiler::program::Program` and
//! `archmax_program::program::Program` are one type. This crate must never depend on the
//! front end, on YAML (`saphyr`), on graph algorithms (`petgraph`) or on a diagnostic
//! renderer (`miette`): a runner that only loads artifacts links this and not those.

pub mod artifact;
pub mod codec;
pub mod diagnostic;
pub mod errors;
pub mod glob;
pub mod hex;
pub mod inspect;
pub mod kinds;
pub mod matcher;
pub mod mounts;
pub mod program;
pub mod reference;
pub mod script;
pub mod shell;
pub mod slug;
pub mod source;
pub mod text;
pub mod tools;
pub mod topology;
pub mod values;
pub mod zones;

/// The version of the toolchain that wrote a program; artifacts record it and the VM
/// refuses others.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use slug::{Slug, SlugRef};
