//! # archmax-flow
//!
//! Flow documents: the second kind of document archmax runs. A flow walks a tree of
//! groups (sections: the unit of scope, reuse, retry and reporting) and steps (a model
//! turn, a gated command, or a hand-off to a person) instead of answering one request.
//!
//! ```text
//! flow.yaml ──read──▶ FlowDocument (or AMX10xx diagnostics) ──plan──▶ layers
//!                          └──walk──▶ events, per-scope sessions, the flow record
//! ```
//!
//! [`read::load`] reads and validates a document with the compiler's diagnostics;
//! [`plan`] renders what runs in what order; [`walk::walk`] runs it over a model
//! adapter (an endpoint or a tape), the run's tools (the built-in file tools under write
//! scopes, and `run`) behind the call [`gate`] (published, the approver,
//! `before-call` and `after-call` [`hooks`]), transition hooks at section boundaries, a
//! `stop` hook when the walk finishes, and a durable [`record`] that `--resume`
//! continues from. The one thing to know: a walk's steps hand back reports and the walker applies
//! them in document order ([`mod@walk`]), so the parallel and sequential walks agree.
//!
//! Every call of a step is decided by the VM's governance kernel before the gate
//! ([`archmax_vm::kernel::decide_scoped_call`]): a flow has no compiled workflow, so its
//! policy is the step's tools, the folder of the flow's records and the write scopes
//! ([`archmax_vm::kernel::scopes`]: the run's, then the node's), and the kernel's refusals
//! carry the same rule ids as a workflow's.

pub mod document;
pub mod events;
pub mod gate;
pub mod graph;
pub mod hooks;
pub mod legacy;
pub mod plan;
pub mod process;
pub mod read;
pub mod record;
pub mod refusal;
pub mod step;
pub mod walk;

pub use document::FlowDocument;
pub use events::FlowEvent;
pub use walk::{WalkEnd, WalkError, WalkOptions, walk};
