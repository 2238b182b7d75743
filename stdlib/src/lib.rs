//! # archmax-stdlib
//!
//! The built-in tools the runtime offers agents (file tools, glob, grep, todos), the
//! control-tool schemas, the sandbox prelude and the platform prompt. Built out by the
//! VM issues; the compiler already holds the tool vocabulary these implement
//! (`archmax_compiler::tools`).
