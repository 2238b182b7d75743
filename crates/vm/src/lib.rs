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
//!
//! ## Example
//!
//! A host compiles a workflow (here from memory; a production host loads a verified
//! `.amx` artifact with `archmax_program::artifact::decode`), picks a store, a model and
//! a clock, and runs turns. The model's answers come from a tape, so this runs offline:
//!
//! ```
//! use std::sync::Arc;
//!
//! use archmax_compiler::lower::{BuildInputs, lower};
//! use archmax_compiler::{analyze_workspace, load_memory};
//! use archmax_vm::clock::SystemClock;
//! use archmax_vm::events::EventSink;
//! use archmax_vm::model::{pricing::PricingTable, tape::Tape};
//! use archmax_vm::session::memory::MemoryStore;
//! use archmax_vm::{Runtime, RuntimeParts, TurnRequest};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let workflow = "title: Notes
//! instructions: Keep the user's notes.
//! states:
//!   write:
//!     triggers: { manual: { description: Take a note. } }
//!     instructions: Write the note down, then confirm it in one line.
//! ";
//! let analysis = analyze_workspace(load_memory([("workflows/notes/workflow.yaml", workflow)])?);
//! assert_eq!(analysis.report(&[])?.errors(), 0, "the workflow validates");
//! let inputs = BuildInputs { platform_prompt: archmax_vm::stdlib::PLATFORM_PROMPT };
//! let program = lower(&analysis, &[], &inputs)?;
//!
//! let tape = Tape::parse("notes.tape.yaml", "- state: write\n  text: Noted, buy milk.\n")?;
//! let runtime = Runtime::builder(RuntimeParts {
//!     program: Arc::new(program),
//!     store: Arc::new(MemoryStore::new()),
//!     model: Arc::new(tape),
//!     events: EventSink::new(),
//!     clock: Arc::new(SystemClock),
//!     root: std::env::temp_dir(),
//!     pricing: PricingTable::default(),
//! })
//! .build();
//!
//! let request = TurnRequest {
//!     workflow: "notes".to_string(),
//!     message: Some("Remember to buy milk.".to_string()),
//!     ..TurnRequest::default()
//! };
//! let executor = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let outcome = executor.block_on(runtime.run_turn(request))?;
//! assert_eq!(outcome.state, "write");
//! assert_eq!(outcome.reply, "Noted, buy milk.");
//! runtime.close_session(&outcome.session_id);
//! # Ok(())
//! # }
//! ```
//!
//! ## The public face
//!
//! - **Entry points**: [`Runtime`], built by [`Runtime::builder`] from [`RuntimeParts`]
//!   ([`RuntimeBuilder`]); `run_turn`, `run_firing`, `decide`, `reply`, `deliver` take a
//!   [`TurnRequest`], [`DecideRequest`], [`ReplyRequest`] or [`DeliverRequest`] and answer
//!   an [`Outcome`]. A host may check a stored session before building anything:
//!   [`park_refusal`], [`decision_refusal`], [`check_named_workflow`].
//! - **The store**: the [`session::SessionStore`] trait (with `SessionWriter`,
//!   `StoreError`, `ListQuery`), its two stores [`session::memory::MemoryStore`] and
//!   [`session::fs::FsStore`], the session record ([`session::SessionState`]) and its
//!   JSON forms (`session::summary`, `session::transfer`).
//! - **The other seams**: [`model::ModelAdapter`] (the OpenAI-compatible and Azure adapter
//!   in `model::openai`, Anthropic's in `model::anthropic`, routed by model id through
//!   `model::router`), [`tool_host::ToolHost`], [`clock::Clock`]; the host's settings
//!   ([`environment`], [`context`], [`secret_file`]).
//! - **Events**: [`events::Event`] in an [`events::Envelope`], heard through an
//!   [`events::EventSink`]'s listeners.
//! - **Errors**: [`RunError`] with its [`ErrorKind`] (the status a host answers with),
//!   [`Refusal`], [`InputReason`], [`FieldProblem`] and [`NotParked`]; the store's
//!   `StoreError`. They say what is wrong and name no command: a host adds its own
//!   advice (the CLI's words are in `crates/cli/src/session.rs`). `Event`, `RunError`,
//!   `ErrorKind`, `Refusal`, `InputReason` and `StoreError` are `#[non_exhaustive]`.
//! - **The kernel and the sandbox**, public for their tests and benchmarks, for
//!   `archmax explain` and for flow steps: [`kernel::decide`], [`kernel::decide_scoped_call`]
//!   (a flow step's call, under its write scopes, [`kernel::scopes`]) and [`kernel::Rule`];
//!   [`sandbox::Sandbox`].
//!
//! The feature `frontend` (on by default) adds what reads YAML at run time: tapes and
//! `--record` ([`model::tape`], [`model::record`]), the case runner ([`cases`]), a case's
//! mocks ([`Mock`]) and the tool survey (`tool_host::survey`). The feature
//! `test-support` adds the store conformance suite (`session::conformance`) for other
//! stores' tests. The turn loop (`interp`), the prompt, the caches and the value checks
//! are crate-private.

pub mod blocking;
pub(crate) mod cache;
#[cfg(feature = "frontend")]
pub mod cases;
pub mod clock;
pub mod context;
pub mod environment;
pub mod events;
pub mod handover;
pub(crate) mod interp;
pub mod kernel;
pub mod model;
pub(crate) mod prompt;
pub mod runtime;
pub mod sandbox;
pub mod secret_file;
pub mod session;
pub mod tool_host;
pub mod trace;
pub(crate) mod values;

pub use archmax_program::errors;
pub use archmax_stdlib as stdlib;
pub use interp::{Channel, NotParked, check_named_workflow, decision_refusal, park_refusal};
pub use runtime::{
    DecideRequest, DeliverRequest, Disposition, ErrorKind, FieldProblem, InputReason, Mock, Outcome, Refusal,
    ReplyRequest, RunError, Runtime, RuntimeBuilder, RuntimeParts, TurnRequest,
};
