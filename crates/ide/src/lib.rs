//! The workflow language as an editor needs it: what a workspace's open documents say
//! ([`Workspace`]: the unsaved texts over the files on disk, re-checked by the compiler),
//! the findings placed in files ([`findings`]), completion, hover, go to definition,
//! document symbols and renaming a state, all read from the compiler's analysis.
//!
//! The one thing to know: this crate knows the language and nothing of any editor
//! protocol. Its answers speak its own small types: byte offsets into a document's text,
//! [`Position`]s of a line and a UTF-16 column, [`Range`]s, root-relative paths. The
//! language server (`archmax lsp`, in `archmax-cli`) owns the transport and maps these
//! types to the protocol's. This crate must never depend on a protocol crate (`lsp-types`,
//! `lsp-server`), on tokio, or on the VM (`archmax-vm`): editing is synchronous and
//! compiles, it never runs a workflow.

pub mod completion;
mod cursor;
pub mod findings;
pub mod hover;
pub mod locate;
mod navigation;
mod overlay;
mod schema_docs;
pub mod text;
pub mod workspace;

pub use completion::{CompletionItem, CompletionKind, complete};
pub use findings::{Diagnostic, Related};
pub use hover::{Hover, hover};
pub use locate::{Location, Place, RenameRefused, Symbol, SymbolKind, TextEdit};
pub use text::{LineIndex, OutOfRange, Position, Range};
pub use workspace::{Unplaced, Workspace};
