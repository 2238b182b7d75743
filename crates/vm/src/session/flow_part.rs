//! What marks a session as part of a flow walk (`archmax flow run`) instead of a
//! workflow's: the walk's run id, and for a section attempt its path and attempt.
//!
//! A flow walk files two kinds of session in the same store as workflow sessions: one per
//! (section, attempt), holding that attempt's conversation and usage, finished
//! (`completed` or `failed`) when it is filed; and one per walk, its record, whose id is
//! the flow-run id and whose variables hold the header, the finished steps and the hook
//! answers. The one thing to know: **no flow session is ever `running`**, so no runner
//! mistakes one for a workflow turn that was cut and tries to continue it; a record that
//! can still go on reads `resumable`.

use serde::{Deserialize, Serialize};

/// The flow marker of a session's head ([`super::Head::flow`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowPart {
    /// The flow-run id of the walk the session belongs to.
    pub run: String,
    /// The section's path (`root.shape`) for a section attempt; `None` for the walk's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The section's attempt, counted from 1; `None` for the walk's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Model turns the attempt took.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns: u32,
    /// What the attempt cost, in microunits of the run's prices.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_microunits: u64,
    /// For a record: the key of the operator step the walk waits at, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
}

fn is_zero<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl FlowPart {
    /// Whether this is a walk's record rather than a section attempt.
    pub fn is_record(&self) -> bool {
        self.path.is_none()
    }
}
