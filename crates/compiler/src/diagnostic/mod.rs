//! Diagnostics: the types, codes and name helpers are [`archmax_program::diagnostic`]
//! (re-exported here, so the whole front end and its callers keep one path); this
//! module adds [`render`], which turns a [`Report`](crate::Report) into human (miette),
//! JSON, SARIF or GitHub output.

pub use archmax_program::diagnostic::*;

pub mod render;
