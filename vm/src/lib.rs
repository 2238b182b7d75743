//! # archmax-vm
//!
//! The runtime half of archmax: it loads verified artifacts produced by
//! `archmax-compiler` and runs their sessions. This crate is built out by the VM issues;
//! for now it carries only the dependency shape (`vm → compiler, stdlib`).

pub use archmax_compiler as compiler;
pub use archmax_stdlib as stdlib;
