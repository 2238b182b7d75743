//! The carrier's tracking scans: a JSON file read once at start, then answered from.
//!
//! ```json
//! {"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [
//!   {"status": "in_transit", "place": "Wien 1230", "time": "2025-03-19T06:15:00+01:00"}]}]}
//! ```
//!
//! The one thing to know: the file is checked whole when the server starts (every
//! tracking number well formed and unique, every status one of [`STATUSES`], every time
//! an RFC 3339 instant, scans oldest first), so a bad file stops the server with one line instead of answering wrongly;
//! a tracking number asked for is checked as hostile input before anything is looked up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a scan can report: the stages of a parcel's way and the exceptions
/// `reference/carriers.md` names.
pub const STATUSES: &[&str] =
    &["picked_up", "in_transit", "out_for_delivery", "delivered", "damaged", "returned_to_sender", "lost"];

/// The shortest and longest tracking number any of our carriers issues.
const TRACKING_NUMBER_LENGTH: std::ops::RangeInclusive<usize> = 6..=40;

/// How many scans an answer carries at most, newest first.
pub const SCANS_ANSWERED: usize = 5;

/// One scan of a parcel.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scan {
    pub status: String,
    pub place: String,
    /// When the carrier scanned it (RFC 3339, with the carrier's offset).
    pub time: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanFile {
    parcels: Vec<ParcelRecord>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParcelRecord {
    tracking_number: String,
    carrier: String,
    scans: Vec<Scan>,
}

/// What `track_parcel` answers for one parcel.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct TrackingReport {
    pub tracking_number: String,
    pub carrier: String,
    /// The latest scan's status.
    pub status: String,
    /// The latest scans, newest first.
    pub scans: Vec<Scan>,
}

/// Why a tracking question has no report.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrackingError {
    #[error(
        "a tracking number is 6 to 40 capital letters and digits (such as YB4TQ8N2 or JJD000390011847261); the one given is not"
    )]
    Malformed,
    #[error("the carrier knows no parcel with tracking number {0}; check the number on the order's shipment")]
    Unknown(String),
}

/// Whether `text` has the shape of a tracking number: capital ASCII letters and digits.
pub fn is_tracking_number(text: &str) -> bool {
    TRACKING_NUMBER_LENGTH.contains(&text.len())
        && text.bytes().all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit())
}

/// Every parcel the carrier has scanned, by tracking number.
#[derive(Debug)]
pub struct ScanBook {
    parcels: BTreeMap<String, (String, Vec<Scan>)>,
}

impl ScanBook {
    /// Reads and checks a scan file's text; the error names the first problem.
    pub fn parse(text: &str) -> Result<ScanBook, String> {
        let file: ScanFile = serde_json::from_str(text).map_err(|error| format!("not a scan file: {error}"))?;
        let mut parcels = BTreeMap::new();
        for record in file.parcels {
            let number = record.tracking_number;
            if !is_tracking_number(&number) {
                return Err(format!("`{number}` is not a tracking number (6 to 40 capital letters and digits)"));
            }
            if record.carrier.trim().is_empty() {
                return Err(format!("parcel {number} names no carrier"));
            }
            if record.scans.is_empty() {
                return Err(format!("parcel {number} has no scan"));
            }
            for scan in &record.scans {
                if !STATUSES.contains(&scan.status.as_str()) {
                    return Err(format!(
                        "parcel {number} has a scan with status `{}`; a status is one of {}",
                        scan.status,
                        STATUSES.join(", ")
                    ));
                }
                if scan.place.trim().is_empty() {
                    return Err(format!("parcel {number} has a scan without a place"));
                }
            }
            let instants = record
                .scans
                .iter()
                .map(|scan| {
                    scan.time.parse::<jiff::Timestamp>().map_err(|_| {
                        format!("parcel {number} has a scan at `{}`, which is not an RFC 3339 instant", scan.time)
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            if instants.windows(2).any(|pair| pair[0] > pair[1]) {
                return Err(format!("the scans of parcel {number} are not listed oldest first"));
            }
            if parcels.insert(number.clone(), (record.carrier, record.scans)).is_some() {
                return Err(format!("parcel {number} is listed twice"));
            }
        }
        Ok(ScanBook { parcels })
    }

    /// The latest scans of one parcel. `tracking_number` is the caller's, untrusted.
    pub fn track(&self, tracking_number: &str) -> Result<TrackingReport, TrackingError> {
        if !is_tracking_number(tracking_number) {
            return Err(TrackingError::Malformed);
        }
        let (carrier, scans) =
            self.parcels.get(tracking_number).ok_or_else(|| TrackingError::Unknown(tracking_number.to_string()))?;
        let latest: Vec<Scan> = scans.iter().rev().take(SCANS_ANSWERED).cloned().collect();
        let status = latest.first().map(|scan| scan.status.clone()).unwrap_or_default();
        Ok(TrackingReport {
            tracking_number: tracking_number.to_string(),
            carrier: carrier.clone(),
            status,
            scans: latest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOK: &str = r#"{"parcels": [
        {"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [
            {"status": "picked_up", "place": "Leipzig", "time": "2025-03-17T16:05:00+01:00"},
            {"status": "in_transit", "place": "Wien 1230", "time": "2025-03-19T06:15:00+01:00"}]}]}"#;

    fn book() -> ScanBook {
        match ScanBook::parse(BOOK) {
            Ok(book) => book,
            Err(problem) => panic!("the test's scan file is refused: {problem}"),
        }
    }

    #[test]
    fn a_known_parcel_answers_its_latest_scan_first() {
        let report = book().track("YB4TQ8N2");
        let Ok(report) = report else { panic!("{report:?}") };
        assert_eq!(report.status, "in_transit");
        assert_eq!(report.carrier, "GLS");
        assert_eq!(report.scans.len(), 2);
        assert_eq!(report.scans[0].place, "Wien 1230");
        assert_eq!(report.scans[1].status, "picked_up");
    }

    #[test]
    fn an_unknown_parcel_is_named_as_unknown() {
        assert_eq!(book().track("ZZ9ZZ9ZZ"), Err(TrackingError::Unknown("ZZ9ZZ9ZZ".into())));
    }

    #[test]
    fn malformed_tracking_numbers_are_refused_before_any_lookup() {
        let too_long = "A".repeat(41);
        for hostile in
            ["", "yb4tq8n2", "YB4TQ", "YB4TQ8N2 ", "../YB4TQ8N2", "YB4TQ8N2\n", "ÄB4TQ8N2", "YB4-TQ8N2", &too_long]
        {
            assert_eq!(book().track(hostile), Err(TrackingError::Malformed), "{hostile:?}");
        }
    }

    #[test]
    fn only_the_latest_scans_are_answered() {
        let scans: Vec<String> = (0..9)
            .map(|hour| {
                format!(
                    r#"{{"status": "in_transit", "place": "Hub {hour}", "time": "2025-03-18T0{hour}:00:00+01:00"}}"#
                )
            })
            .collect();
        let text = format!(
            r#"{{"parcels": [{{"tracking_number": "JJD000390012133905", "carrier": "DHL", "scans": [{}]}}]}}"#,
            scans.join(",")
        );
        let book = ScanBook::parse(&text);
        let Ok(book) = book else { panic!("{book:?}") };
        let report = book.track("JJD000390012133905");
        let Ok(report) = report else { panic!("{report:?}") };
        assert_eq!(report.scans.len(), SCANS_ANSWERED);
        assert_eq!(report.scans[0].place, "Hub 8");
    }

    #[test]
    fn a_bad_scan_file_is_refused_with_its_problem() {
        let cases = [
            ("[]", "not a scan file"),
            (r#"{"parcels": [{"tracking_number": "yb4", "carrier": "GLS", "scans": []}]}"#, "is not a tracking number"),
            (r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": []}]}"#, "has no scan"),
            (r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": " ", "scans": []}]}"#, "names no carrier"),
            (
                r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [{"status": "teleported", "place": "x", "time": "t"}]}]}"#,
                "status `teleported`",
            ),
            (
                r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [{"status": "lost", "place": "", "time": "t"}]}]}"#,
                "without a place",
            ),
            (
                r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [{"status": "lost", "place": "Wien", "time": "yesterday"}]}]}"#,
                "`yesterday`, which is not an RFC 3339 instant",
            ),
            (
                r#"{"parcels": [{"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [
                    {"status": "in_transit", "place": "b", "time": "2025-03-19T00:30:00+01:00"},
                    {"status": "picked_up", "place": "a", "time": "2025-03-18T23:15:00+00:00"}]}]}"#,
                "oldest first",
            ),
            (
                r#"{"parcels": [
                    {"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [{"status": "lost", "place": "a", "time": "2025-03-19T00:00:00Z"}]},
                    {"tracking_number": "YB4TQ8N2", "carrier": "GLS", "scans": [{"status": "lost", "place": "a", "time": "2025-03-19T00:00:00Z"}]}]}"#,
                "listed twice",
            ),
        ];
        for (text, expected) in cases {
            match ScanBook::parse(text) {
                Ok(_) => panic!("accepted: {text}"),
                Err(problem) => assert!(problem.contains(expected), "{problem} (expected {expected})"),
            }
        }
    }

    #[test]
    fn the_specs_scan_file_knows_every_parcel_the_shop_shipped() {
        let book = ScanBook::parse(include_str!("../../../specs/carrier/scans.json"));
        let Ok(book) = book else { panic!("specs/carrier/scans.json is refused: {book:?}") };
        let orders: serde_json::Value =
            match serde_json::from_str(include_str!("../../../specs/skills/order-data/assets/orders.json")) {
                Ok(orders) => orders,
                Err(error) => panic!("orders.json: {error}"),
            };
        let Some(orders) = orders.as_array() else { panic!("orders.json is not a list") };
        for order in orders {
            let Some(number) = order["shipment"]["tracking_id"].as_str() else { continue };
            let report = book.track(number);
            let Ok(report) = report else { panic!("{}: {report:?}", order["order_id"]) };
            assert_eq!(report.carrier, order["shipment"]["carrier"].as_str().unwrap_or_default(), "{number}");
            let delivered = report.status == "delivered";
            // The nightly export lags the carrier: a parcel it shows delivered, the carrier
            // shows delivered too; the reverse may not hold yet.
            if order["status"] == "delivered" {
                assert!(delivered, "{number} is delivered in orders.json but not in the scans");
            }
        }
    }
}
