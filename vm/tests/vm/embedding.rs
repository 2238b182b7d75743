//! The VM embedded in a long-running host: turn futures are `Send`, so a multi-threaded
//! tokio runtime can run many sessions at once.

use archmax_vm::runtime::{DecideRequest, DeliverRequest, ReplyRequest};
use archmax_vm::{Runtime, TurnRequest};

fn assert_send<T: Send>(_: &T) {}

/// A compile-time check: every entry point's future may move between worker threads.
#[allow(dead_code)]
fn entry_point_futures_are_send(runtime: &Runtime) {
    assert_send(&runtime.run_turn(TurnRequest::default()));
    assert_send(&runtime.decide(DecideRequest::default()));
    assert_send(&runtime.reply(ReplyRequest::default()));
    assert_send(&runtime.deliver(DeliverRequest::default()));
}
