//! Embedding the VM: load a built `.amx` artifact, run one turn of a workflow against a
//! tape (scripted model answers), and print every event as a JSON line on stdout.
//!
//! ```text
//! archmax build specs -o refund.amx
//! cargo run -p archmax-vm --example embed -- refund.amx tape.yaml refund-desk "Hello"
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use archmax_program::artifact;
use archmax_vm::clock::SystemClock;
use archmax_vm::events::{EventSink, JsonLines};
use archmax_vm::model::{pricing::PricingTable, tape::Tape};
use archmax_vm::session::memory::MemoryStore;
use archmax_vm::{Outcome, Runtime, RuntimeParts, TurnRequest};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [artifact_path, tape_path, workflow, message] = args.as_slice() else {
        eprintln!("usage: embed <artifact.amx> <tape.yaml> <workflow> <message>");
        return ExitCode::from(2);
    };
    match run(artifact_path, tape_path, workflow, message, std::io::stdout()) {
        Ok(outcome) => {
            eprintln!("session {} is {:?} at `{}`", outcome.session_id, outcome.status, outcome.state);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("embed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One turn of `workflow` on a fresh session, its events written to `out` as JSON lines.
pub fn run(
    artifact_path: &str,
    tape_path: &str,
    workflow: &str,
    message: &str,
    out: impl std::io::Write + Send + 'static,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    // The artifact is verified before it is decoded; unsigned scripts are recompiled.
    let program = artifact::decode(&std::fs::read(artifact_path)?)?;
    let tape = Tape::parse(tape_path, &std::fs::read_to_string(tape_path)?)?;
    let events = EventSink::new();
    events.listen(Box::new(JsonLines { writer: out }));
    let (store, root) = (Arc::new(MemoryStore::new()), std::env::current_dir()?);
    let (model, clock, pricing) = (Arc::new(tape), Arc::new(SystemClock), PricingTable::default());
    let parts = RuntimeParts { program: Arc::new(program), store, model, events, clock, root, pricing };
    let runtime = Runtime::builder(parts).build();
    let request =
        TurnRequest { workflow: workflow.to_string(), message: Some(message.to_string()), ..TurnRequest::default() };
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(executor.block_on(runtime.run_turn(request))?)
}
