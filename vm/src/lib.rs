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

pub mod clock;
pub mod events;
pub mod host_env;
pub mod interp;
pub mod kernel;
pub mod model;
pub mod prompt;
pub mod runtime;
pub mod sandbox;
pub mod session;
pub mod testing;
pub mod values;

pub use archmax_compiler as compiler;
pub use archmax_stdlib as stdlib;
pub use runtime::{
    DecideRequest, DeliverRequest, Disposition, Mock, Outcome, ReplyRequest, RunError, Runtime, RuntimeParts,
    TurnRequest,
};
