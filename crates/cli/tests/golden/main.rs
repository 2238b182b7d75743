//! The golden recordings, one test per case, run in parallel by `libtest-mimic`:
//! `golden/diagnostics/` (`archmax validate`, made in process), `golden/runs/` (session
//! commands through the binary), `golden/inspect/`, `golden/graph/` and `golden/migrate/` (`archmax migrate`, then
//! validate, replayed cases and a second run over the result). A failure names
//! its case; `cargo test -p archmax-cli --test golden -- AMX0301` runs the matching cases
//! only, and `UPDATE_GOLDEN=1` rewrites the recordings instead of comparing.

mod compare;
mod diagnostics;
mod flows;
mod inspect_and_graph;
mod migrate;
mod runs;
#[path = "../support/mod.rs"]
mod support;

fn main() {
    let arguments = libtest_mimic::Arguments::from_args();
    let mut trials = diagnostics::trials();
    trials.extend(runs::trials());
    trials.extend(flows::trials());
    trials.extend(inspect_and_graph::trials());
    trials.extend(migrate::trials());
    let conclusion = libtest_mimic::run(&arguments, trials);
    inspect_and_graph::clean_up();
    conclusion.exit();
}
