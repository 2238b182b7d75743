//! The rate card: `reference/shipping-rates.csv`, what a parcel costs by carrier and
//! weight band.
//!
//! The one thing to know: a band covers every weight up to its `max_kg`, so a parcel
//! takes the carrier's lightest band it fits in; one heavier than every band has no
//! price, and the answer says so instead of guessing.

use serde::Serialize;

/// The heaviest parcel any question may name, in kilograms (well above every band).
const MAX_WEIGHT_KG: f64 = 1000.0;
/// The longest carrier name a question may name.
const MAX_CARRIER_LENGTH: usize = 40;

/// One row of the rate card.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Band {
    pub carrier: String,
    pub service: String,
    pub band: String,
    pub max_kg: f64,
    pub outbound_eur: f64,
    pub return_label_eur: f64,
}

/// Why a quote could not be given.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum QuoteError {
    #[error("a carrier is named by letters only (one of {0})")]
    MalformedCarrier(String),
    #[error("we do not ship with {given}; the carriers are {known}")]
    UnknownCarrier { given: String, known: String },
    #[error("a weight is a number of kilograms above 0 and at most 1000")]
    BadWeight,
    #[error("{carrier} takes parcels up to {max_kg} kg; a {weight_kg} kg parcel has no rate")]
    TooHeavy { carrier: String, max_kg: f64, weight_kg: f64 },
}

/// Every band of every carrier, in the card's order.
#[derive(Debug)]
pub struct RateCard {
    bands: Vec<Band>,
}

const HEADER: &str = "carrier,service,band,max_kg,outbound_eur,return_label_eur";

impl RateCard {
    /// Reads the card's CSV text; the error names the first bad line.
    pub fn parse(text: &str) -> Result<RateCard, String> {
        let mut lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
        match lines.next() {
            Some((_, header)) if header.trim() == HEADER => {}
            _ => return Err(format!("the rate card must start with the header `{HEADER}`")),
        }
        let mut bands = Vec::new();
        for (index, line) in lines {
            let number = index + 1;
            let fields: Vec<&str> = line.trim().split(',').collect();
            let [carrier, service, band, max_kg, outbound, return_label] = fields[..] else {
                return Err(format!("line {number} of the rate card does not have 6 fields"));
            };
            let amount = |field: &str| {
                field.parse::<f64>().ok().filter(|value| value.is_finite() && *value > 0.0).ok_or_else(|| {
                    format!("line {number} of the rate card has `{field}` where a positive number belongs")
                })
            };
            if carrier.is_empty() || !carrier.bytes().all(|byte| byte.is_ascii_alphabetic()) {
                return Err(format!("line {number} of the rate card names no carrier"));
            }
            bands.push(Band {
                carrier: carrier.to_string(),
                service: service.to_string(),
                band: band.to_string(),
                max_kg: amount(max_kg)?,
                outbound_eur: amount(outbound)?,
                return_label_eur: amount(return_label)?,
            });
        }
        if bands.is_empty() {
            return Err("the rate card has no band".to_string());
        }
        Ok(RateCard { bands })
    }

    fn carriers(&self) -> String {
        let mut carriers: Vec<&str> = self.bands.iter().map(|band| band.carrier.as_str()).collect();
        carriers.dedup();
        carriers.join(", ")
    }

    /// The band a parcel of `weight_kg` takes with `carrier`. Both are the caller's,
    /// untrusted; a carrier is matched without regard to case.
    pub fn quote(&self, carrier: &str, weight_kg: f64) -> Result<Band, QuoteError> {
        if carrier.is_empty()
            || carrier.len() > MAX_CARRIER_LENGTH
            || !carrier.bytes().all(|byte| byte.is_ascii_alphabetic())
        {
            return Err(QuoteError::MalformedCarrier(self.carriers()));
        }
        if !weight_kg.is_finite() || weight_kg <= 0.0 || weight_kg > MAX_WEIGHT_KG {
            return Err(QuoteError::BadWeight);
        }
        let bands: Vec<&Band> = self.bands.iter().filter(|band| band.carrier.eq_ignore_ascii_case(carrier)).collect();
        let Some(heaviest) = bands.iter().map(|band| band.max_kg).reduce(f64::max) else {
            return Err(QuoteError::UnknownCarrier { given: carrier.to_string(), known: self.carriers() });
        };
        bands
            .iter()
            .filter(|band| weight_kg <= band.max_kg)
            .min_by(|left, right| left.max_kg.total_cmp(&right.max_kg))
            .map(|band| (*band).clone())
            .ok_or_else(|| QuoteError::TooHeavy { carrier: bands[0].carrier.clone(), max_kg: heaviest, weight_kg })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARD: &str = include_str!("../../../specs/reference/shipping-rates.csv");

    fn card() -> RateCard {
        match RateCard::parse(CARD) {
            Ok(card) => card,
            Err(problem) => panic!("the specs rate card is refused: {problem}"),
        }
    }

    #[test]
    fn a_parcel_takes_the_lightest_band_it_fits() {
        let cases =
            [("GLS", 3.8, "M", 7.40), ("DHL", 2.0, "S", 6.90), ("dhl", 2.01, "M", 8.90), ("UPS", 30.0, "L", 21.90)];
        for (carrier, weight, band, outbound) in cases {
            let quote = card().quote(carrier, weight);
            let Ok(quote) = quote else { panic!("{carrier} {weight}: {quote:?}") };
            assert_eq!((quote.band.as_str(), quote.outbound_eur), (band, outbound), "{carrier} {weight}");
        }
    }

    #[test]
    fn a_parcel_heavier_than_every_band_has_no_rate() {
        let quote = card().quote("GLS", 15.5);
        assert!(
            matches!(quote, Err(QuoteError::TooHeavy { ref carrier, max_kg, .. }) if carrier == "GLS" && max_kg == 15.0),
            "{quote:?}"
        );
    }

    #[test]
    fn hostile_carriers_and_weights_are_refused() {
        let long = "A".repeat(41);
        for carrier in ["", "DHL Paket", "../DHL", "D\u{0}HL", &long] {
            assert!(matches!(card().quote(carrier, 1.0), Err(QuoteError::MalformedCarrier(_))), "{carrier:?}");
        }
        assert!(matches!(card().quote("Hermes", 1.0), Err(QuoteError::UnknownCarrier { .. })));
        for weight in [0.0, -1.0, f64::NAN, f64::INFINITY, 1000.5] {
            assert_eq!(card().quote("DHL", weight), Err(QuoteError::BadWeight), "{weight}");
        }
    }

    #[test]
    fn a_bad_rate_card_is_refused_with_its_line() {
        let cases = [
            ("carrier,band\nDHL,S\n", "must start with the header"),
            ("carrier,service,band,max_kg,outbound_eur,return_label_eur\n", "has no band"),
            ("carrier,service,band,max_kg,outbound_eur,return_label_eur\nDHL,Paket,S,2\n", "line 2"),
            ("carrier,service,band,max_kg,outbound_eur,return_label_eur\nDHL,Paket,S,two,6.90,5.49\n", "`two`"),
            ("carrier,service,band,max_kg,outbound_eur,return_label_eur\n,Paket,S,2,6.90,5.49\n", "names no carrier"),
        ];
        for (text, expected) in cases {
            match RateCard::parse(text) {
                Ok(_) => panic!("accepted: {text}"),
                Err(problem) => assert!(problem.contains(expected), "{problem} (expected {expected})"),
            }
        }
    }
}
