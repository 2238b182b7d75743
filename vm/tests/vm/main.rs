//! Integration tests of the VM: the governance kernel's rule table and the turn loop.

mod kernel;
mod sandbox;
mod support;
