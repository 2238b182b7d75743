//! The turn's delegation batch: the sub-workflow calls of one tool batch, prepared and
//! waiting to run together, and what the children this turn ran have spent.
//!
//! [`DelegationBatch`] is the part of a turn that [`super::delegate`] fills and drains:
//! a call to `archmax_workflow_<slug>` that passes its checks is deferred here (its
//! child's session already created), and the whole batch runs at once when the tool
//! batch is done, so many children can run side by side. The one thing to know: a
//! deferred call has been answered to nobody yet; whoever takes it from the batch owes
//! its caller the answer.

use super::delegate::Prepared;
use crate::session::Usage;

/// Sub-workflow calls waiting to run, and the children's spend so far.
///
/// Invariants: the deferred calls are in call order; `children_usage` only grows, by
/// each child's own spend once it has run (a child's session keeps it too).
#[derive(Default)]
pub(super) struct DelegationBatch {
    /// Sub-workflow calls of the current batch, prepared and waiting to run together.
    deferred: Vec<Prepared>,
    /// What the children this turn ran spent.
    children_usage: Usage,
}

impl DelegationBatch {
    /// Holds a prepared call until the batch runs.
    pub fn defer(&mut self, prepared: Prepared) {
        self.deferred.push(prepared);
    }

    /// Whether calls wait to run.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Takes every waiting call, in call order, to run them.
    pub(crate) fn take_waiting(&mut self) -> Vec<Prepared> {
        std::mem::take(&mut self.deferred)
    }

    /// Takes the call just deferred: a script's or a grader's call starts its child as soon
    /// as it is made.
    pub(crate) fn take_last(&mut self) -> Option<Prepared> {
        self.deferred.pop()
    }

    /// Adds what one child spent.
    pub(crate) fn add_child_usage(&mut self, usage: &Usage) {
        self.children_usage.add(usage);
    }

    /// What the children this turn ran spent.
    pub(crate) fn children_usage(&self) -> &Usage {
        &self.children_usage
    }
}
