//! Integration tests of the `archmax` binary: the example workspace, the command-line
//! contract (streams, formats, exit codes), artifacts and keys, parks and the session
//! store across processes, `archmax tools`, host tools over MCP (the reference server and
//! the shipped carrier server), `archmax migrate`. The golden recordings have their own harness, `tests/golden`.

mod arguments;
mod artifacts;
mod authoring;
mod book;
mod commands;
mod deliveries;
mod explain;
mod fleet;
mod flow_store;
mod flows;
mod handed_files;
mod lsp;
mod mcp;
mod migrate;
mod parks;
mod postgres;
mod providers;
mod record;
mod schemas;
mod secrets;
mod serve;
mod serve_clients;
mod serve_ops;
mod serving;
mod store;
mod streaming;
#[path = "../support/mod.rs"]
mod support;
mod telemetry;
mod tools;
mod tutorial;
