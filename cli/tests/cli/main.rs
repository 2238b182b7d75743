//! Integration tests of the `archmax` binary: golden diagnostics, the example workspace,
//! and the command-line contract (streams, formats, exit codes).

mod artifacts;
mod commands;
mod explain;
mod golden;
mod parks;
mod postgres;
mod runs;
mod store;
mod support;
