//! Integration tests of the compiler library: hostile inputs never panic, and the
//! in-memory workspace API behaves like the disk one.

mod artifact;
mod corpus;
mod lower;
