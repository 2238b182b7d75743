//! The MCP face of the payment system: `pay` makes one payment into the ledger, and
//! `list_payments` reads them back.
//!
//! The one thing to know: an order the ledger refuses (an amount out of range, a currency
//! that is no ISO code, a broken ledger) is an `isError` answer saying why and that nothing
//! was paid, so the model reads it and says so instead of claiming the expense is paid.
//! Arguments of the wrong JSON type never reach a tool: the SDK answers them, also as an
//! `isError` answer.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::ledger::{Ledger, Order};

/// `pay`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct PayRequest {
    /// How much to pay, in the currency's units, with at most two decimal places.
    pub amount: f64,
    /// The ISO 4217 currency code; EUR when left out.
    #[serde(default)]
    pub currency: Option<String>,
    /// A short note kept with the payment (at most 200 characters).
    #[serde(default)]
    pub memo: Option<String>,
    /// Your own id for this payment, such as the expense claim's (letters, digits, `.`,
    /// `_`, `:`, `-`; at most 64). An order repeated under the same reference is not paid
    /// again: it is answered with the first payment.
    #[serde(default)]
    pub reference: Option<String>,
}

/// `list_payments`' arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct ListRequest {
    /// How many of the newest payments to answer (1 to 100; 20 when left out).
    #[serde(default)]
    pub newest: Option<u32>,
}

/// The payment service over one ledger.
#[derive(Clone)]
pub struct PaymentService {
    ledger: Arc<Ledger>,
    tool_router: ToolRouter<PaymentService>,
}

fn answer(value: &impl serde::Serialize) -> CallToolResult {
    match serde_json::to_string(value) {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(error) => refusal(format!("the answer could not be written: {error}")),
    }
}

fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[tool_router]
impl PaymentService {
    /// A service paying into this ledger.
    pub fn new(ledger: Ledger) -> PaymentService {
        PaymentService { ledger: Arc::new(ledger), tool_router: Self::tool_router() }
    }

    #[tool(
        description = "Pay an approved expense: the amount (at most two decimal places), its ISO currency (EUR by default), an optional memo and an optional reference (the claim's id; repeating an order under it never pays twice). Answers the payment's number once it is recorded.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn pay(&self, Parameters(request): Parameters<PayRequest>) -> CallToolResult {
        let order = Order {
            amount: request.amount,
            currency: request.currency,
            memo: request.memo,
            reference: request.reference,
        };
        let ledger = Arc::clone(&self.ledger);
        // The ledger locks and syncs a file: keep that off the async workers.
        match tokio::task::spawn_blocking(move || ledger.pay(&order)).await {
            Ok(Ok(payment)) => answer(&payment),
            Ok(Err(refused)) => refusal(refused.to_string()),
            Err(error) => {
                refusal(format!("the payment stopped unexpectedly ({error}); check the ledger before retrying"))
            }
        }
    }

    #[tool(
        description = "The newest payments in the ledger, newest first: number, amount, currency, memo and time.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    pub async fn list_payments(&self, Parameters(request): Parameters<ListRequest>) -> CallToolResult {
        let newest = request.newest.unwrap_or(20);
        if !(1..=100).contains(&newest) {
            return refusal("newest must be from 1 to 100");
        }
        let ledger = Arc::clone(&self.ledger);
        match tokio::task::spawn_blocking(move || ledger.payments()).await {
            Ok(Ok(payments)) => {
                let newest: Vec<_> = payments.iter().rev().take(newest as usize).collect();
                answer(&newest)
            }
            Ok(Err(refused)) => refusal(refused.to_string()),
            Err(error) => refusal(format!("the ledger could not be read ({error})")),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PaymentService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("archmax-payments-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions("The expense tutorial's payment system: pay records one payment in the ledger.")
    }
}
