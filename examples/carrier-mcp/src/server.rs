//! The MCP face of the carrier service: two tools over the scan book and the rate card.
//!
//! The one thing to know: every answer the caller can act on is a tool answer. A
//! question the service cannot answer (a malformed or unknown tracking number, a carrier
//! we do not ship with, a weight without a band) is an `isError` answer saying why, so
//! the model reads it and corrects itself. Arguments of the wrong JSON type never reach a
//! tool: the SDK answers them, also as an `isError` answer naming the mismatch.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::rates::RateCard;
use crate::scans::ScanBook;

/// `track_parcel`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct TrackRequest {
    /// The parcel's tracking number as the carrier issued it: 6 to 40 capital letters and digits.
    #[schemars(regex(pattern = r"^[A-Z0-9]{6,40}$"))]
    pub tracking_number: String,
}

/// `quote_shipping`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct QuoteRequest {
    /// The carrier: DHL, DPD, GLS or UPS.
    pub carrier: String,
    /// The packed weight in kilograms.
    pub weight_kg: f64,
}

/// The carrier-tracking service.
#[derive(Clone)]
pub struct CarrierService {
    scans: Arc<ScanBook>,
    rates: Option<Arc<RateCard>>,
    fault: Option<Fault>,
    tool_router: ToolRouter<CarrierService>,
}

/// A failure the test suite injects into `track_parcel` through the variable
/// `ARCHMAX_TEST_CARRIER_FAULT` (which archmax passes only when `archmax.toml`'s `env`
/// table sets it): `crash` ends the process mid-call, `hang` never answers. Like
/// archmax's own `ARCHMAX_TEST_*` faults, for tests only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Crash,
    Hang,
}

impl Fault {
    /// The fault the environment asks for, if any.
    pub fn from_env() -> Option<Fault> {
        match std::env::var("ARCHMAX_TEST_CARRIER_FAULT").ok()?.as_str() {
            "crash" => Some(Fault::Crash),
            "hang" => Some(Fault::Hang),
            _ => None,
        }
    }
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
impl CarrierService {
    /// A service over these scans; without a rate card, `quote_shipping` is not offered.
    pub fn new(scans: ScanBook, rates: Option<RateCard>) -> CarrierService {
        let mut tool_router = Self::tool_router();
        if rates.is_none() {
            tool_router.remove_route("quote_shipping");
        }
        CarrierService { scans: Arc::new(scans), rates: rates.map(Arc::new), fault: Fault::from_env(), tool_router }
    }

    #[tool(
        description = "The latest carrier scans of one parcel, newest first: its status (picked_up, in_transit, out_for_delivery, delivered, damaged, returned_to_sender or lost), where and when each scan was made.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    pub async fn track_parcel(&self, Parameters(request): Parameters<TrackRequest>) -> CallToolResult {
        match self.fault {
            Some(Fault::Crash) => {
                eprintln!("archmax-carrier-mcp: the injected fault ends the process");
                std::process::exit(3);
            }
            Some(Fault::Hang) => std::future::pending::<()>().await,
            None => {}
        }
        match self.scans.track(&request.tracking_number) {
            Ok(report) => answer(&report),
            Err(error) => refusal(error.to_string()),
        }
    }

    #[tool(
        description = "What a parcel costs to ship and to return with one carrier, by its packed weight: the rate card's band, the outbound price and the return label's price, in euros.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    pub async fn quote_shipping(&self, Parameters(request): Parameters<QuoteRequest>) -> CallToolResult {
        let Some(rates) = &self.rates else {
            return refusal("this server was started without a rate card");
        };
        match rates.quote(&request.carrier, request.weight_kg) {
            Ok(band) => answer(&band),
            Err(error) => refusal(error.to_string()),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CarrierService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("archmax-carrier-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Fernhill's carrier-tracking service: track_parcel answers a parcel's latest scans by tracking number.",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCANS: &str = r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [
        {"status": "in_transit", "place": "Wien 1230", "time": "2025-03-19T06:15:00+01:00"}]}]}"#;
    const CARD: &str = include_str!("../../../specs/reference/shipping-rates.csv");

    fn service(with_rates: bool) -> CarrierService {
        let (Ok(scans), Ok(rates)) = (ScanBook::parse(SCANS), RateCard::parse(CARD)) else {
            panic!("the test's data is refused");
        };
        CarrierService::new(scans, with_rates.then_some(rates))
    }

    fn text(result: &CallToolResult) -> String {
        result.content.iter().filter_map(|block| block.as_text().map(|text| text.text.clone())).collect()
    }

    async fn track(number: &str) -> CallToolResult {
        service(true).track_parcel(Parameters(TrackRequest { tracking_number: number.into() })).await
    }

    async fn quote(carrier: &str, weight_kg: f64) -> CallToolResult {
        service(true).quote_shipping(Parameters(QuoteRequest { carrier: carrier.into(), weight_kg })).await
    }

    #[tokio::test]
    async fn track_parcel_answers_the_latest_scan_as_json() {
        let result = track("YB4TQ8N2").await;
        assert_eq!(result.is_error, Some(false));
        let answer: serde_json::Value = match serde_json::from_str(&text(&result)) {
            Ok(answer) => answer,
            Err(error) => panic!("{error}: {}", text(&result)),
        };
        assert_eq!(answer["status"], "in_transit");
        assert_eq!(answer["scans"][0]["place"], "Wien 1230");
        assert_eq!(answer["carrier"], "GLS");
    }

    #[tokio::test]
    async fn track_parcel_says_when_a_number_is_unknown() {
        let result = track("ZF7K2LQ9").await;
        assert_eq!(result.is_error, Some(true));
        assert!(text(&result).contains("knows no parcel with tracking number ZF7K2LQ9"), "{}", text(&result));
    }

    #[tokio::test]
    async fn track_parcel_refuses_a_malformed_number_without_repeating_it() {
        for hostile in ["<script>alert(1)</script>", "YB4TQ8N2; rm -rf /", "", "yb4tq8n2", &"9".repeat(4096)] {
            let result = track(hostile).await;
            assert_eq!(result.is_error, Some(true), "{hostile:?}");
            let said = text(&result);
            assert!(said.contains("6 to 40 capital letters and digits"), "{said}");
            assert!(hostile.is_empty() || !said.contains(hostile), "{said}");
        }
    }

    #[tokio::test]
    async fn quote_shipping_answers_the_band_and_both_prices() {
        let result = quote("GLS", 3.8).await;
        assert_eq!(result.is_error, Some(false));
        let said = text(&result);
        assert!(said.contains(r#""band":"M""#) && said.contains("7.4") && said.contains("5.95"), "{said}");
    }

    #[tokio::test]
    async fn quote_shipping_refuses_bad_carriers_and_weights() {
        let cases = [
            ("Hermes", 1.0, "we do not ship with Hermes"),
            ("DHL; DROP", 1.0, "named by letters only"),
            ("DHL", -2.0, "above 0 and at most 1000"),
            ("DHL", f64::NAN, "above 0 and at most 1000"),
            ("GLS", 20.0, "GLS takes parcels up to 15 kg"),
        ];
        for (carrier, weight, expected) in cases {
            let result = quote(carrier, weight).await;
            assert_eq!(result.is_error, Some(true), "{carrier} {weight}");
            assert!(text(&result).contains(expected), "{}", text(&result));
        }
    }

    #[test]
    fn without_a_rate_card_only_track_parcel_is_offered() {
        let names = |service: &CarrierService| -> Vec<String> {
            let mut names: Vec<String> =
                service.tool_router.list_all().into_iter().map(|tool| tool.name.to_string()).collect();
            names.sort();
            names
        };
        assert_eq!(names(&service(true)), ["quote_shipping", "track_parcel"]);
        assert_eq!(names(&service(false)), ["track_parcel"]);
    }

    #[test]
    fn track_parcel_schema_carries_the_number_pattern() {
        let tools = service(false).tool_router.list_all();
        let schema = serde_json::Value::Object((*tools[0].input_schema).clone());
        assert_eq!(schema["properties"]["tracking_number"]["pattern"], "^[A-Z0-9]{6,40}$");
        assert_eq!(schema["required"], serde_json::json!(["tracking_number"]));
    }
}
