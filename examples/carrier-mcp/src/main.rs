//! `archmax-carrier-mcp`: the example workspace's carrier-tracking service, an MCP
//! server over stdio, written with the official Rust SDK (`rmcp`).
//!
//! ```text
//! archmax-carrier-mcp --scans carrier/scans.json [--rates reference/shipping-rates.csv]
//! ```
//!
//! `specs/archmax.toml` starts it as `[mcp_servers.carrier]`, so `order-status` polls a
//! parcel through `carrier__track_parcel`. Paths are relative to the working directory
//! (the workspace root, where archmax starts it). It reads both files once, checks them
//! whole, and then answers from memory: deterministic and offline. The one thing to know:
//! stdout is the protocol channel, so every word for a person goes to stderr.

mod rates;
mod scans;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rmcp::ServiceExt;

/// The carrier-tracking service of the example workspace, as an MCP server over stdio.
#[derive(Parser)]
#[command(name = "archmax-carrier-mcp", version)]
struct Arguments {
    /// The JSON file of tracking scans (`{"parcels": [{tracking_number, carrier, scans}]}`).
    #[arg(long, value_name = "FILE")]
    scans: PathBuf,
    /// The rate card (CSV); without it, `quote_shipping` is not offered.
    #[arg(long, value_name = "FILE")]
    rates: Option<PathBuf>,
}

fn read(path: &std::path::Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

fn load(arguments: &Arguments) -> Result<server::CarrierService, String> {
    let scans = scans::ScanBook::parse(&read(&arguments.scans)?)
        .map_err(|problem| format!("{}: {problem}", arguments.scans.display()))?;
    let rates = match &arguments.rates {
        None => None,
        Some(path) => {
            Some(rates::RateCard::parse(&read(path)?).map_err(|problem| format!("{}: {problem}", path.display()))?)
        }
    };
    Ok(server::CarrierService::new(scans, rates))
}

async fn serve(service: server::CarrierService) -> Result<(), String> {
    let running =
        service.serve(rmcp::transport::stdio()).await.map_err(|error| format!("MCP start-up failed: {error}"))?;
    running.waiting().await.map_err(|error| format!("MCP session ended abnormally: {error}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let arguments = Arguments::parse();
    let outcome = load(&arguments).and_then(|service| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| format!("cannot start the async runtime: {error}"))?;
        runtime.block_on(serve(service))
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("archmax-carrier-mcp: {problem}");
            ExitCode::FAILURE
        }
    }
}
