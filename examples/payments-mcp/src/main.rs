//! `archmax-payments-mcp`: the tutorial's payment system, an MCP server over stdio
//! written with the official Rust SDK (`rmcp`).
//!
//! ```text
//! archmax-payments-mcp --ledger payments.jsonl [--limit 10000]
//! ```
//!
//! The tutorial's `archmax.toml` starts it as `[mcp_servers.payments]`, so the `pay`
//! state's `payments__pay` call makes a payment. The ledger path is relative to the
//! working directory (the workspace root, where archmax starts it). Stdout is the protocol
//! channel, so every word for a person goes to stderr.

mod ledger;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rmcp::ServiceExt;

/// The tutorial's payment system, as an MCP server over stdio.
#[derive(Parser)]
#[command(name = "archmax-payments-mcp", version)]
struct Arguments {
    /// The ledger: a file of JSON lines, one per payment, created on the first payment.
    #[arg(long, value_name = "FILE")]
    ledger: PathBuf,
    /// The most one payment may be.
    #[arg(long, value_name = "AMOUNT", default_value_t = ledger::DEFAULT_LIMIT, value_parser = positive)]
    limit: f64,
}

fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(limit) if limit.is_finite() && limit > 0.0 => Ok(limit),
        _ => Err(format!("`{text}` is not an amount above 0")),
    }
}

async fn serve(service: server::PaymentService) -> Result<(), String> {
    let running =
        service.serve(rmcp::transport::stdio()).await.map_err(|error| format!("MCP start-up failed: {error}"))?;
    running.waiting().await.map_err(|error| format!("MCP session ended abnormally: {error}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let ledger = ledger::Ledger::new(arguments.ledger, arguments.limit);
    // A ledger that does not read back stops the server at once, with the line at fault.
    if let Err(refused) = ledger.payments() {
        eprintln!("archmax-payments-mcp: {refused}");
        return ExitCode::FAILURE;
    }
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))
        .and_then(|runtime| runtime.block_on(serve(server::PaymentService::new(ledger))));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("archmax-payments-mcp: {problem}");
            ExitCode::FAILURE
        }
    }
}
