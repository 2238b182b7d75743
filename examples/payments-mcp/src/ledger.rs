//! The ledger: one JSON object per line, one line per payment made, in a file the server
//! only ever appends to.
//!
//! ```json
//! {"payment":"PAY-000001","amount":142.5,"currency":"EUR","memo":"Hotel Adler","paid_at":"2026-12-04T06:00:00Z"}
//! ```
//!
//! The one thing to know: a payment is made only once it is on disk. [`Ledger::pay`]
//! takes an exclusive lock on the file, reads it whole to number the payment (so several
//! server processes on one ledger never give two payments one number), appends the line
//! and syncs it, and answers only then. A ledger that does not read back as payments (a
//! torn or edited line) stops every payment with the line at fault, rather than paying on
//! top of a record nobody can trust.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The most a single payment may be, in the payment's currency, unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: f64 = 10_000.0;

/// The longest memo a payment carries, in characters.
pub const MEMO_LENGTH: usize = 200;

/// One payment, as the ledger keeps it and the tool answers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payment {
    /// `PAY-` and the payment's number in the ledger, six digits at least.
    pub payment: String,
    pub amount: f64,
    /// An ISO 4217 code: three capital letters.
    pub currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memo: Option<String>,
    /// The caller's own id for this payment (an expense claim's, say), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// When it was written (RFC 3339, UTC).
    pub paid_at: String,
}

/// What a caller asks to pay, before it is checked.
#[derive(Clone, Debug)]
pub struct Order {
    pub amount: f64,
    pub currency: Option<String>,
    pub memo: Option<String>,
    /// Paying twice under one reference pays once: the second order is answered with the
    /// first payment (a retry after a lost answer, a turn continued after a crash).
    pub reference: Option<String>,
}

/// The longest reference, in characters.
pub const REFERENCE_LENGTH: usize = 64;

/// Why a payment was not made.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the amount must be a number above 0 and at most {limit} (the server's --limit); nothing was paid")]
    Amount { limit: f64 },
    #[error(
        "the amount has more than two decimal places; give it in cents at most (like 142.5 or 38.05); nothing was paid"
    )]
    Cents,
    #[error("the currency must be an ISO 4217 code of three capital letters, like EUR; nothing was paid")]
    Currency,
    #[error(
        "the memo must be at most {MEMO_LENGTH} characters with no control or invisible formatting characters; shorten it; nothing was paid"
    )]
    Memo,
    #[error(
        "the reference must be 1 to {REFERENCE_LENGTH} characters of letters, digits, `.`, `_`, `:` or `-`; nothing was paid"
    )]
    Reference,
    #[error(
        "reference {reference} was already paid as {payment} of {amount} {currency}, which this order does not match; nothing was paid"
    )]
    ReferenceTaken { reference: String, payment: String, amount: f64, currency: String },
    #[error("the ledger {path} cannot be used: {problem}; nothing was paid")]
    Ledger { path: String, problem: String },
    #[error(
        "{payment} may or may not be recorded ({problem}); do not pay again before `list_payments` shows whether it is"
    )]
    Unsure { payment: String, problem: String },
}

/// A character a memo may not hold: a control character, or one that changes how the
/// text around it shows without showing itself (Unicode format characters such as the
/// right-to-left override, and the line and paragraph separators).
fn is_hidden(character: char) -> bool {
    character.is_control()
        || matches!(character, '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}')
        || ('\u{200B}'..='\u{200F}').contains(&character)
        || ('\u{202A}'..='\u{202E}').contains(&character)
        || ('\u{2060}'..='\u{206F}').contains(&character)
        || ('\u{FFF9}'..='\u{FFFB}').contains(&character)
}

/// The ledger file, and the most one payment may be.
pub struct Ledger {
    path: PathBuf,
    limit: f64,
}

impl Ledger {
    /// A ledger at `path` (created on the first payment), paying at most `limit` at once.
    pub fn new(path: PathBuf, limit: f64) -> Ledger {
        Ledger { path, limit }
    }

    fn trouble(&self, problem: impl std::fmt::Display) -> Refused {
        Refused::Ledger { path: self.path.display().to_string(), problem: problem.to_string() }
    }

    /// Check an order whole; nothing is read or written.
    pub fn check(&self, order: &Order) -> Result<(f64, String, Option<String>), Refused> {
        if let Some(reference) = &order.reference {
            let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b"._:-".contains(&byte);
            if reference.is_empty() || reference.len() > REFERENCE_LENGTH || !reference.bytes().all(allowed) {
                return Err(Refused::Reference);
            }
        }
        let amount = order.amount;
        if !amount.is_finite() || amount <= 0.0 || amount > self.limit {
            return Err(Refused::Amount { limit: self.limit });
        }
        let cents = amount * 100.0;
        if (cents - cents.round()).abs() > 1e-6 || cents.round() < 1.0 {
            return Err(Refused::Cents);
        }
        // Whole cents from here on: `142.500000001` is paid, and written, as 142.5.
        let amount = cents.round() / 100.0;
        let currency = order.currency.clone().unwrap_or_else(|| "EUR".to_string());
        if currency.len() != 3 || !currency.bytes().all(|byte| byte.is_ascii_uppercase()) {
            return Err(Refused::Currency);
        }
        let memo = order.memo.clone().filter(|memo| !memo.is_empty());
        if let Some(memo) = &memo
            && (memo.chars().count() > MEMO_LENGTH || memo.chars().any(is_hidden))
        {
            return Err(Refused::Memo);
        }
        Ok((amount, currency, memo))
    }

    /// Make a payment: checked, numbered, written and synced before it is answered.
    pub fn pay(&self, order: &Order) -> Result<Payment, Refused> {
        let (amount, currency, memo) = self.check(order)?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(|error| self.trouble(error))?;
        file.lock().map_err(|error| self.trouble(format!("cannot lock it: {error}")))?;
        let made = self.read_all(&mut file)?;
        if let Some(reference) = &order.reference
            && let Some(earlier) = made.iter().find(|payment| payment.reference.as_ref() == Some(reference))
        {
            if earlier.amount == amount && earlier.currency == currency {
                return Ok(earlier.clone());
            }
            return Err(Refused::ReferenceTaken {
                reference: reference.clone(),
                payment: earlier.payment.clone(),
                amount: earlier.amount,
                currency: earlier.currency.clone(),
            });
        }
        let payment = Payment {
            payment: format!("PAY-{:06}", made.len() + 1),
            amount,
            currency,
            memo,
            reference: order.reference.clone(),
            paid_at: jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or(jiff::Timestamp::now()).to_string(),
        };
        let mut line = serde_json::to_string(&payment).map_err(|error| self.trouble(error))?;
        line.push('\n');
        // What was on disk before this line: a write or sync that fails takes the line out
        // again, so "nothing was paid" is true and a retry is not a second payment.
        let before = file.metadata().map_err(|error| self.trouble(error))?.len();
        let written = file.write_all(line.as_bytes()).map_err(|error| format!("cannot write it: {error}"));
        let synced = written.and_then(|()| file.sync_all().map_err(|error| format!("cannot sync it: {error}")));
        if let Err(problem) = synced {
            return Err(match file.set_len(before).and_then(|()| file.sync_all()) {
                Ok(()) => self.trouble(problem),
                Err(error) => Refused::Unsure {
                    payment: payment.payment,
                    problem: format!("{problem}, and taking the line out again failed: {error}"),
                },
            });
        }
        Ok(payment)
    }

    /// Every payment made, oldest first.
    pub fn payments(&self) -> Result<Vec<Payment>, Refused> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(self.trouble(error)),
        };
        file.lock_shared().map_err(|error| self.trouble(format!("cannot lock it: {error}")))?;
        self.read_all(&mut file)
    }

    fn read_all(&self, file: &mut File) -> Result<Vec<Payment>, Refused> {
        let mut text = String::new();
        file.seek(SeekFrom::Start(0)).map_err(|error| self.trouble(error))?;
        file.read_to_string(&mut text).map_err(|error| self.trouble(format!("it is not UTF-8 text: {error}")))?;
        parse(&text).map_err(|problem| self.trouble(problem))
    }
}

/// The payments of a ledger's text; a line that is not one, or a number out of order,
/// is named by its line number.
pub fn parse(text: &str) -> Result<Vec<Payment>, String> {
    let mut payments = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let payment: Payment = serde_json::from_str(line)
            .map_err(|error| format!("line {} is not a payment ({error}); repair or move the file", index + 1))?;
        let expected = format!("PAY-{:06}", payments.len() + 1);
        if payment.payment != expected {
            return Err(format!(
                "line {} is payment {} where {expected} was expected; repair or move the file",
                index + 1,
                payment.payment
            ));
        }
        payments.push(payment);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("its last line is cut short (a write was torn); repair or move the file".to_string());
    }
    Ok(payments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(label: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("archmax-payments-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        dir.join("ledger.jsonl")
    }

    fn order(amount: f64) -> Order {
        Order { amount, currency: None, memo: None, reference: None }
    }

    #[test]
    fn payments_are_numbered_written_and_read_back() {
        let ledger = Ledger::new(scratch("numbered"), DEFAULT_LIMIT);
        let first = ledger.pay(&order(142.5)).expect("paid");
        let second = ledger
            .pay(&Order { amount: 38.0, currency: Some("CHF".into()), memo: Some("Taxi".into()), reference: None })
            .expect("paid");
        assert_eq!((first.payment.as_str(), first.currency.as_str()), ("PAY-000001", "EUR"));
        assert_eq!((second.payment.as_str(), second.memo.as_deref()), ("PAY-000002", Some("Taxi")));
        assert_eq!(ledger.payments().expect("read back"), [first, second]);
    }

    #[test]
    fn bad_orders_are_refused_and_nothing_is_written() {
        let ledger = Ledger::new(scratch("refused"), 1_000.0);
        let cases: [(Order, &str); 10] = [
            (order(0.0), "above 0 and at most 1000"),
            (order(-5.0), "above 0 and at most 1000"),
            (order(f64::NAN), "above 0 and at most 1000"),
            (order(1_420.0), "above 0 and at most 1000"),
            (order(14.255), "more than two decimal places"),
            (Order { amount: 1.0, currency: Some("eur".into()), memo: None, reference: None }, "three capital letters"),
            (order(1e-9), "more than two decimal places"),
            (Order { amount: 1.0, currency: None, memo: Some("a\nb".into()), reference: None }, "no control"),
            (
                Order { amount: 1.0, currency: None, memo: Some("Taxi \u{202e}9.83 EUR".into()), reference: None },
                "invisible formatting",
            ),
            (
                Order { amount: 1.0, currency: None, memo: Some("one\u{2028}two".into()), reference: None },
                "invisible formatting",
            ),
        ];
        for (order, expected) in cases {
            let said = ledger.pay(&order).expect_err("refused").to_string();
            assert!(said.contains(expected) && said.contains("nothing was paid"), "{said}");
        }
        assert!(!ledger.path.exists(), "a refused order never creates the ledger");
    }

    #[test]
    fn an_order_repeated_under_its_reference_is_paid_once() {
        let ledger = Ledger::new(scratch("reference"), DEFAULT_LIMIT);
        let claim = |amount: f64| Order { amount, currency: None, memo: None, reference: Some("claim:e9".into()) };
        let first = ledger.pay(&claim(142.5)).expect("paid");
        let again = ledger.pay(&claim(142.5)).expect("answered");
        assert_eq!(again, first, "the retry is answered with the first payment");
        let said = ledger.pay(&claim(99.0)).expect_err("another amount").to_string();
        assert!(
            said.contains("already paid as PAY-000001 of 142.5 EUR") && said.contains("nothing was paid"),
            "{said}"
        );
        assert_eq!(ledger.payments().expect("read back").len(), 1);
        let bad = Order { reference: Some("claim e9\n".into()), ..claim(1.0) };
        assert!(ledger.pay(&bad).expect_err("refused").to_string().contains("the reference must be"));
    }

    #[test]
    fn an_amount_a_hair_off_whole_cents_is_paid_and_written_in_whole_cents() {
        let ledger = Ledger::new(scratch("cents"), DEFAULT_LIMIT);
        let paid = ledger.pay(&order(142.500000001)).expect("paid");
        assert_eq!(paid.amount, 142.5);
        let text = std::fs::read_to_string(&ledger.path).expect("the ledger");
        assert!(text.contains("\"amount\":142.5,"), "{text}");
    }

    #[test]
    fn a_torn_or_edited_ledger_stops_payments_naming_the_line() {
        let path = scratch("torn");
        std::fs::write(
            &path,
            "{\"payment\":\"PAY-000001\",\"amount\":5.0,\"currency\":\"EUR\",\"paid_at\":\"x\"}\n{\"pay",
        )
        .expect("write");
        let ledger = Ledger::new(path.clone(), DEFAULT_LIMIT);
        let said = ledger.pay(&order(1.0)).expect_err("refused").to_string();
        assert!(said.contains("line 2 is not a payment"), "{said}");
        std::fs::write(&path, "{\"payment\":\"PAY-000007\",\"amount\":5.0,\"currency\":\"EUR\",\"paid_at\":\"x\"}\n")
            .expect("write");
        let said = ledger.pay(&order(1.0)).expect_err("refused").to_string();
        assert!(said.contains("line 1 is payment PAY-000007 where PAY-000001 was expected"), "{said}");
        assert_eq!(std::fs::read_to_string(&path).expect("read").lines().count(), 1, "nothing was appended");
    }
}
