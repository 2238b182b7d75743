//! Integration tests of the VM: the governance kernel's rule table, the sandbox, and a
//! table of attacks a hostile model makes, run through the whole runtime.

mod adversarial;
mod budgets;
mod calibration;
mod cases;
mod deciders;
mod embedding;
mod events;
mod example;
mod handover;
mod kernel;
mod long_sessions;
mod orphans;
mod pinning;
mod refusals;
mod sandbox;
mod support;
mod tool_host;
