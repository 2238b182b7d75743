//! How far a session has read a tape: the one piece of a scripted model's state that a
//! session keeps in its durable head.
//!
//! The type lives with the session, not with the model adapters, so the module
//! dependency points one way: `model` imports `session` (messages, tool calls and this
//! reading), and `session` imports nothing from `model`. `model` re-exports it as
//! `model::TapeReading` for the adapters and the hosts that name it there.

use serde::{Deserialize, Serialize};

/// Which entries of one tape a session (with its children) has consumed, kept in the
/// session so a later process replaying the same tape continues where it left off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapeReading {
    /// SHA-256 (hex) of the tape's text: another tape starts from its top.
    pub digest: String,
    /// The indices of the entries consumed, ascending.
    pub used: Vec<u32>,
}
