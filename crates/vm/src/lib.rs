//! # archmax-vm
//!
//! The runtime half of archmax. It loads a verified artifact (built by
//! `archmax-compiler`) and runs its sessions turn by turn:
//!
//! ```text
//! Runtime::run_turn ─▶ turn boundary (interp::start) ─▶ Turn::run loop (interp)
//!    │                                                   ├ prompt: volatile block per call
//!    │                                                   ├ model: adapters (OpenAI, tape)
//!    │                                                   ├ kernel: every tool call decided
//!    │                                                   └ stdlib tools over the workspace
//!    └ session store: every committed step durable (session::fs)
//! ```
//!
//! Events ([`events`]) are the one record of a run; the CLI renders them.
//!
//! The runtime is built to be embedded in a long-running host: every entry point
//! ([`Runtime::run_turn`], `decide`, `reply`, `deliver`) returns a `Send` future, so a
//! multi-threaded tokio executor can run many sessions at once; the store is
//! asynchronous and owns each session's files ([`session::SessionStore::files`]);
//! blocking file work goes through [`blocking::run_blocking`]; per-session memory is
//! bounded ([`Runtime::close_session`]); errors are typed for status mapping
//! ([`RunError::kind`]). The library installs nothing process-wide: a host that talks
//! to HTTPS model endpoints installs a TLS crypto provider first
//! ([`model::openai::install_tls_provider`]).

pub mod blocking;
pub(crate) mod cache;
#[cfg(feature = "frontend")]
pub mod cases;
pub mod clock;
pub mod context;
pub mod environment;
pub mod events;
pub mod interp;
pub mod kernel;
pub mod model;
pub(crate) mod prompt;
pub mod runtime;
pub mod sandbox;
pub mod secret_file;
pub mod session;
pub mod tool_host;
pub(crate) mod values;

pub use archmax_stdlib as stdlib;
pub use runtime::{
    DecideRequest, DeliverRequest, Disposition, ErrorKind, FieldProblem, InputReason, Mock, Outcome, Refusal,
    ReplyRequest, RunError, Runtime, RuntimeBuilder, RuntimeParts, TurnRequest,
};
